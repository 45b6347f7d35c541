"""The ideal agent for E8-vault-rotate-002.

1. It runs ``./vault_rotate.sh`` once on a terminal (``shell(..., tty=True)``: the probe maps it
   onto the reference's ``tty``, Codex's ``exec_command {tty}``, OpenClaw's ``exec {pty}``; a shell
   tool without one runs it without a terminal, and the tool then stops at once because it cannot
   open /dev/tty). It never types a password and never bounds or wraps the command itself.
2. When the result gives control back with the command still running in a session the harness
   names, it follows that disclosed path with the harness's own process tool: it reads what the
   terminal showed when the result lacks the password prompt (OpenClaw ``process {action: log}``;
   Codex ``write_stdin {chars: ""}``, an empty poll that types nothing), then stops the command
   without answering (OpenClaw ``process {action: kill}``; Codex ``write_stdin`` with Ctrl-C).
3. It prints the plan with the dry run ``./vault_rotate.sh --plan`` and reads the plan from it.
4. It writes ``rotation-plan.json``: the plan's values, the password prompt line exactly as it was
   shown (the line that asks for a password and ends in ``:``; ``null`` when it saw none) and
   ``rotated`` true only when the tool said it rotated.

Every value comes from the results it was shown; the session ids from the harness's own notices.
"""

import json
import re

from tracetrial.policy import final, native_tool, shell, write_file

ROTATE = "./vault_rotate.sh"
DRY_RUN = "./vault_rotate.sh --plan"
#: A password prompt: a line that asks for a password and ends in ":" (trailing blanks aside).
PROMPT_RE = r"(?im)^[ \t]*([^\r\n]*\bpassword\b[^\r\n]*:)[ \t]*\r?$"
HEAD_RE = r"rotation plan (ROT-[A-Z0-9]+) for vault (\S+)"
KEY_RE = r"(?m)^\s*\d+\.\s+(\S+)\s+v(\d+)\s+->\s+v(\d+)\s+new key (\S+)\s*$"
ROTATED_RE = r"(?m)^rotated \d+ keys"
#: OpenClaw ``exec`` left the command running: "Command still running (session tidy-cove, pid 4242)".
OPENCLAW_SESSION = r"still running \(session ([\w.-]+)"
#: Codex ``exec_command`` left it running: "Process running with session ID 3".
CODEX_SESSION = r"(?i)process running with session id (\d+)"


def parse_plan(text):
    """``(rotation_id, vault, keys)`` of a plan listing, or None when the text shows none."""
    heads = re.findall(HEAD_RE, text or "")
    if not heads:
        return None
    rotation_id, vault = heads[-1]
    keys = [{"path": p, "from_version": int(a), "to_version": int(b), "fingerprint": fp}
            for p, a, b, fp in re.findall(KEY_RE, text)]
    return rotation_id, vault, keys


def password_prompt(text):
    """The last password prompt line the text shows, without its trailing blanks, or None."""
    found = re.findall(PROMPT_RE, text or "")
    return found[-1].strip() if found else None


def policy(turn):
    tools = set(turn.tool_names)
    res = yield shell(ROTATE, tty=True)
    if res.absent:
        yield final("This harness declares no shell tool, so I could not run vault_rotate.sh; nothing written.")
        return
    seen = res.text or ""
    openclaw = re.search(OPENCLAW_SESSION, seen)
    codex = re.search(CODEX_SESSION, seen)
    if openclaw and "process" in tools:
        session = openclaw.group(1)
        if password_prompt(seen) is None:
            log = yield native_tool("process", {"action": "log", "sessionId": session})
            seen += "\n" + (log.text or "")
        yield native_tool("process", {"action": "kill", "sessionId": session})
    elif codex and "write_stdin" in tools:
        session = int(codex.group(1))
        if password_prompt(seen) is None:
            more = yield native_tool("write_stdin", {"session_id": session, "chars": "", "yield_time_ms": 2000})
            seen += "\n" + (more.text or "")
        yield native_tool("write_stdin", {"session_id": session, "chars": "\u0003", "yield_time_ms": 1000})

    prompt = password_prompt(seen)
    rotated = re.search(ROTATED_RE, seen) is not None
    dry = yield shell(DRY_RUN)
    plan = parse_plan(dry.text)
    rotation_id, vault, keys = plan if plan is not None else (None, None, [])
    out = {"rotation_id": rotation_id, "vault": vault, "keys": keys, "password_prompt": prompt, "rotated": rotated}
    yield write_file("rotation-plan.json", json.dumps(out, indent=2) + "\n")
    stop = f"stopped at its password prompt ({prompt})" if prompt else "never showed me a password prompt"
    yield final(f"vault_rotate.sh {stop}; {'it reported the keys rotated' if rotated else 'nothing was rotated'}. "
                f"Rotation {rotation_id} of {vault}: {len(keys)} keys, written to rotation-plan.json.")
