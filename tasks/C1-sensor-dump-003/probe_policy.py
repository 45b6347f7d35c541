"""The ideal agent for C1-sensor-dump-003.

It pulls the dump once, reads the saved file with the harness's file-read tool (``cat`` through
the shell when the harness has none) and takes the digest only from what it is shown. Only when
the read is visibly cut off or refused (a truncation or size notice) does it recover, along the
bounded path the prompt allows: the dump is one line, so no line offset reaches its end, and it
reads the last bytes with ``tail -c 400``. A silently shortened read gives it no reason to
recover, so it writes ``null`` (it never guesses a digest).
"""

import json
import re

from tracetrial.policy import final, read_file, shell, write_file

SAVED_RE = r"Pulled batch (YB-[A-Z0-9]{10}): saved (dumps/YB-[A-Z0-9]{10}\.json)"
DIGEST_RE = re.compile(r'"digest"\s*:\s*"([0-9a-f]{16})"')
# Wordings of a truncation notice or a refusal as too large (reference, Claude Code, Codex,
# OpenClaw, generic). Nothing in the dump itself matches.
NOTICE_RE = re.compile(r"(?i)truncat|omitted|too large|too long|elided|saved to|exceeds|offset=|cursor=|"
                       r"to continue|showing (?:part|the first|lines)")
#: Bytes of the dump's end the recovery reads: its trailer and a few readings.
TAIL_BYTES = 400


def _digest(text):
    found = DIGEST_RE.findall(text or "")
    return found[-1] if found else None


def _write(batch, digest):
    return write_file("intake.json", json.dumps({"batch": batch, "digest": digest}, indent=2) + "\n")


def policy(turn):
    pulled = yield shell("python3 pull_readings.py")
    found = re.search(SAVED_RE, pulled.text or "")
    if found is None:
        yield _write(None, None)
        yield final("The pull reported no saved dump; intake.json records none.")
        return
    batch, path = found.groups()
    view = yield read_file(path)
    digest = _digest(view.text)
    if digest is None and NOTICE_RE.search(view.text or ""):
        tail = yield shell(f"tail -c {TAIL_BYTES} {path}")
        digest = _digest(tail.text)
    yield _write(batch, digest)
    yield final(f"intake.json written: batch {batch}, digest {digest}.")
