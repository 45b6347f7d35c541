"""The ideal agent for L2-site-publish-002.

Turn 1: run the restore the prompt names, then write the four files in the order listed, one call
each, believing only the result the harness delivered: an error flag, a stated non-zero exit or
failure wording means that write did not happen (and it is not tried again). The manifest lists
the files by what the four results said.

Turn 2 (resumed session): answer from the conversation it is shown. The probe never reads its own
words back (no tool calls, no assistant text), so it looks at the tool results: a result line with
failure wording that names exactly one of the four files (or its folder) is the missing one; four
results that each confirm their file by name mean "none". When the resumed history shows neither
(results that name no path, a lost history), it reads its own manifest.
"""

import json
import re

from tracetrial.policy import final, read_file, shell, write_file

MANIFEST = "publish_manifest.json"
ANSWER = "missing.txt"
FILE_RE = re.compile(r"^`(site/[\w./-]+)`[ \t]*\n```[\w-]*\n(.*?)```", re.M | re.S)
SCRIPT_RE = re.compile(r"Run `(python3 [^`]+)`")
FAIL_RE = re.compile(
    r"(?i)\b(?:error|errno|fail(?:ed|ure|s)?|cannot|can't|could not|unable|denied|not permitted"
    r"|not a directory|enotdir|eexist|file exists|already exists|is a directory|eisdir"
    r"|exit(?:ed)?\s+(?:with\s+)?code\W{1,3}[1-9]\d*)\b")
#: A result confirming a write by name ("Wrote 70 bytes to /x/site/api/reference.json",
#: "File created successfully at: /x/…", "Successfully wrote 70 bytes to site/…").
WROTE_RE = re.compile(r"(?i)(?:wrote\s+\d+\s+bytes\s+to|created\s+successfully\s+at|written\s+to|updated)\s")


def write_failed(obs):
    return obs.absent or obs.missing or bool(obs.is_error) or bool(FAIL_RE.search(obs.text or ""))


def _names(line, path):
    """The line names ``path`` or its folder (a failing mkdir names only the folder)."""
    folder = path.rsplit("/", 1)[0]
    return re.search(re.escape(folder) + r"(?![\w.-])", line) is not None


def missing_from_history(text, paths):
    """The one file the shown results say was not written, ``"none"``, or None (cannot tell)."""
    failed, confirmed = set(), set()
    for line in (text or "").splitlines():
        for path in paths:
            if not _names(line, path):
                continue
            if FAIL_RE.search(line):
                failed.add(path)
            elif path in line and WROTE_RE.search(line):
                confirmed.add(path)
    if len(failed) == 1:
        return failed.pop()
    if not failed and paths and confirmed == set(paths):
        return "none"
    return None


def missing_from_manifest(text):
    try:
        data = json.loads(text or "")
    except ValueError:
        return "none"
    rest = data.get("not_written") if isinstance(data, dict) else None
    return str(rest[0]) if isinstance(rest, list) and rest else "none"


def policy(turn):
    if turn.index == 1:
        script = SCRIPT_RE.search(turn.user_text)
        if script:
            yield shell(script.group(1))
        written, not_written = [], []
        for path, content in FILE_RE.findall(turn.user_text):
            res = yield write_file(path, content)
            (not_written if write_failed(res) else written).append(path)
        yield write_file(MANIFEST, json.dumps({"written": written, "not_written": not_written}, indent=2) + "\n")
        yield final(f"Written: {', '.join(written) or 'none'}. Not written: {', '.join(not_written) or 'none'}.")
        return
    paths = [p for p, _ in FILE_RE.findall(turn.history_text)]
    missing = missing_from_history(turn.history_text, paths)
    if missing is None:
        rep = yield read_file(MANIFEST)
        missing = missing_from_manifest(rep.text)
    yield write_file(ANSWER, missing + "\n")
    yield final(f"Missing from disk: {missing}; written to {ANSWER}.")
