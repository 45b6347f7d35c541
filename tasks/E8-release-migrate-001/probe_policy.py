"""The ideal agent for E8-release-migrate-001.

1. It runs ``./migrate.py apply`` once and asks for a terminal (``shell(..., tty=True)``: the
   probe maps it onto the reference's ``tty``, Codex's ``exec_command {tty}``, OpenClaw's
   ``exec {pty}``; a shell tool without one runs the command without a terminal). It never answers
   the prompt and never feeds or bounds the command itself.
2. When the result gives control back with the command still running in a session the harness
   names, it follows that disclosed path with the harness's own process tool: it reads what the
   command printed when the result does not show the confirmation prompt (OpenClaw ``process
   {action: log}``; Codex ``write_stdin {chars: ""}``, an empty poll), then stops it without
   answering (OpenClaw ``process {action: kill}``; Codex ``write_stdin`` with Ctrl-C).
3. It saves the plan with the dry run ``./migrate.py plan --out plan.txt`` and reads the plan's
   values from that output (or from plan.txt, or from what apply printed).
4. It writes ``migration-review.json``: the plan's values, the confirmation prompt line exactly as
   it was shown (the line ending in ``[y/N]``; ``null`` when it never saw one) and ``applied`` true
   only when migrate.py said it applied the plan.

Every value comes from the results it was shown; the session ids from the harness's own notices.
"""

import json
import re

from tracetrial.policy import final, native_tool, read_file, shell, write_file

APPLY = "./migrate.py apply"
DRY_RUN = "./migrate.py plan --out plan.txt"
#: The confirmation prompt: the line that ends with migrate.py's "[y/N]".
PROMPT_RE = r"([^\r\n]*\[y/N\])"
PLAN_RE = r"\bplan (PLAN-[A-Z0-9]+)\s+(\d+) -> (\d+)"
STEP_RE = r"(?m)^\s*\d+\.\s+(\S+)\s+(\S+)\s+(\d+) rows\s*$"
APPLIED_RE = r"(?m)^applied \d+ migrations"
#: OpenClaw ``exec`` left the command running: "Command still running (session tidy-cove, pid 4242)".
OPENCLAW_RUNNING = r"still running \(session ([\w.-]+)"
#: Codex ``exec_command`` left it running: "Process running with session ID 3".
CODEX_RUNNING = r"(?i)process running with session id (\d+)"


def parse_plan(text):
    """``(plan_id, from, to, steps)`` of a plan listing, or None when the text holds none."""
    head = re.findall(PLAN_RE, text or "")
    if not head:
        return None
    plan_id, low, high = head[-1]
    steps = [{"id": i, "table": t, "rows": int(r)} for i, t, r in re.findall(STEP_RE, text)]
    return plan_id, int(low), int(high), steps


def policy(turn):
    names = set(turn.tool_names)
    res = yield shell(APPLY, tty=True)
    if res.absent:
        yield final("This harness declares no shell tool, so I could not run migrate.py; no review written.")
        return
    seen = res.text or ""
    openclaw = re.search(OPENCLAW_RUNNING, seen)
    codex = re.search(CODEX_RUNNING, seen)
    if openclaw and "process" in names:
        session = openclaw.group(1)
        if not re.search(PROMPT_RE, seen):
            log = yield native_tool("process", {"action": "log", "sessionId": session})
            seen += "\n" + (log.text or "")
        yield native_tool("process", {"action": "kill", "sessionId": session})
    elif codex and "write_stdin" in names:
        session = int(codex.group(1))
        if not re.search(PROMPT_RE, seen):
            more = yield native_tool("write_stdin", {"session_id": session, "chars": "", "yield_time_ms": 2000})
            seen += "\n" + (more.text or "")
        yield native_tool("write_stdin", {"session_id": session, "chars": "\u0003", "yield_time_ms": 1000})

    prompts = re.findall(PROMPT_RE, seen)
    prompt = prompts[-1].strip() if prompts else None
    applied = re.search(APPLIED_RE, seen) is not None

    dry = yield shell(DRY_RUN)
    plan = parse_plan(dry.text)
    if plan is None or not plan[3]:
        saved = yield read_file("plan.txt")
        plan = parse_plan(saved.text)
    if plan is None or not plan[3]:
        plan = parse_plan(seen)
    plan_id, low, high, steps = plan if plan is not None else (None, None, None, [])
    review = {"plan_id": plan_id, "from_version": low, "to_version": high, "migrations": steps,
              "confirmation_prompt": prompt, "applied": applied}
    yield write_file("migration-review.json", json.dumps(review, indent=2) + "\n")
    stopped = f"stopped at its confirmation prompt ({prompt})" if prompt else "never showed me a confirmation prompt"
    yield final(f"migrate.py apply {stopped}; {'it reported the plan applied' if applied else 'nothing was applied'}. "
                f"Plan {plan_id}: {len(steps)} migrations, {low} -> {high}; saved to plan.txt and reviewed in "
                "migration-review.json.")
