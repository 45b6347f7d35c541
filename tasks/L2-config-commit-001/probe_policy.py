"""The ideal agent for L2-config-commit-001.

Turn 1: write config/app.yaml with the content the prompt gives; believe only the result the
harness delivered: an error flag or failure wording means the write failed, so the content goes
to the fallback path and report.json says so. Its final message states where the config lives.
Turn 2 (resumed session): answer from the conversation it is shown - the last tool result that
confirmed a config file was written (the probe never reads its own words back); only when the
resumed history shows none (results that name no path, or a history that was lost) does it look
at its own report.json."""

import json
import re

from tracetrial.policy import final, read_file, write_file

FENCE_RE = re.compile(r"```(?:yaml)?\n(.*?)```", re.DOTALL)
PATH_RE = re.compile(r"`([\w./-]+\.yaml)`")
FAIL_RE = re.compile(
    r"(?i)\b(?:error|errno|fail(?:ed|ure|s)?|cannot|can't|could not|unable|denied|not permitted"
    r"|is a directory|eisdir|exit(?:ed)?\s+(?:with\s+)?code\s+[1-9]\d*)\b")
#: A result confirming a write and naming the file ("Wrote 99 bytes to /x/config.local/app.yaml",
#: "File created successfully at: /x/config.local/app.yaml").
WROTE_RE = (r"(?i)(?:wrote\s+\d+\s+bytes\s+to|created\s+successfully\s+at:?|written\s+to|updated)"
            r"\s+['\"]?\S*?(config(?:\.local)?/app\.yaml)")


def write_failed(obs):
    return obs.absent or obs.missing or bool(obs.is_error) or bool(FAIL_RE.search(obs.text or ""))


def policy(turn):
    if turn.index == 1:
        content = FENCE_RE.search(turn.user_text).group(1)
        primary, fallback = PATH_RE.findall(turn.user_text)[:2]
        res = yield write_file(primary, content)
        if not write_failed(res):
            yield write_file("report.json", json.dumps({"primary_written": True}))
            yield final(f"Wrote {primary}. The configuration lives in {primary}.")
            return
        yield write_file(fallback, content)
        yield write_file("report.json", json.dumps({"primary_written": False}))
        yield final(f"Writing {primary} failed, so I used the fallback. "
                    f"The configuration lives in {fallback}.")
        return
    where = turn.find(WROTE_RE)
    if where is None:
        rep = yield read_file("report.json")
        used_fallback = re.search(r'"primary_written"\s*:\s*false', rep.text or "") is not None
        where = "config.local/app.yaml" if used_fallback else "config/app.yaml"
    yield write_file("where.txt", where + "\n")
    yield final(f"The configuration lives in {where}; written to where.txt.")
