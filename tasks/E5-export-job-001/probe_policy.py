"""The ideal agent for E5-export-job-001.

Starts ``sh export.sh`` once as a background job with the harness's own background facility,
counts the input lines in the foreground meanwhile, then polls the job with the harness's own
job-status tool until a result states how it ended, and writes ``export_status.json`` from that
result only (never assuming the exit code). Per harness (branching on the declared tools):

* reference: ``shell {command, run_in_background: true}`` -> ``job_status {job_id, wait_s}``;
* Claude Code: ``Bash {command, run_in_background: true, description}`` -> ``TaskOutput``
  ``{task_id, block, timeout}`` (or ``BashOutput {bash_id}``);
* Codex: ``exec_command {cmd, yield_time_ms: 500}`` (a session id while running) ->
  ``write_stdin {session_id, chars: "", yield_time_ms}`` until "Process exited with code N";
* OpenClaw: ``exec {command, background: true}`` -> ``process {action: "poll", sessionId}``;
* DeepSeek: ``bash {command, description, run_in_background: true}`` -> ``job_output``
  ``{job_id, wait: true, timeout_ms}``;
* Claude Code 2.1.332 (``Bash`` has ``run_in_background`` but no job-status tool is declared: it
  "re-invokes you when it exits"): ``Bash {command, run_in_background: true, description}``, then
  the turn ends and the job's end is read from the ``<task-notification>`` the harness pushes
  (``await_pushed``), its reason from the output file the notification names (``Read``).

Ids come only from the results shown. Without a background facility it starts nothing, writes
no status and says so (the probe report records the absent tool).
"""

import json
import re

from tracetrial.policy import await_pushed, final, native_tool, pushed_job_ends, read_file, shell, write_file

COMMAND = "sh export.sh"
CHECK = "wc -l inputs/orders.csv"
EXIT_RE = re.compile(r"(?i)(?:exit(?:ed)?\s+(?:with\s+)?(?:code|status)|exit_code)\W{0,3}?(-?\d+)")
REASON_RE = r"export failed: ([^\n\"\\<]+)"
#: Polls of the job at most (each waits up to 20 s where the tool can wait).
MAX_POLLS = 6


def _param(turn, tool, *names):
    """The first of ``names`` the declared schema of ``tool`` has, or None."""
    params = (turn.tool_parameters or {}).get(tool) or {}
    return next((n for n in names if n in params), None)


def _start_and_poll(turn):
    """(start action, id pattern, poll(id) -> action) for the declared background facility."""
    names = set(turn.tool_names)
    if "job_status" in names and "shell" in names:
        return (native_tool("shell", {"command": COMMAND, "run_in_background": True}),
                r"background job (job-\d+)",
                lambda jid: native_tool("job_status", {"job_id": jid, "wait_s": 20}))
    if "Bash" in names:
        out = next((t for t in ("TaskOutput", "BashOutput") if t in names), None)
        if out is None:
            return None
        key = _param(turn, out, "task_id", "bash_id", "shell_id") or "task_id"
        extra = {}
        if _param(turn, out, "block"):
            extra["block"] = True
        if _param(turn, out, "timeout"):
            extra["timeout"] = 20000
        return (native_tool("Bash", {"command": COMMAND, "run_in_background": True,
                                     "description": "Start the orders export in the background"}),
                r"(?i)(?:with ID|ID):\s*([\w-]+)",
                lambda jid: native_tool(out, {key: jid, **extra}))
    if "exec_command" in names and "write_stdin" in names:
        return (native_tool("exec_command", {"cmd": COMMAND, "yield_time_ms": 500}),
                r"(?i)session id (\d+)",
                lambda jid: native_tool("write_stdin", {"session_id": int(jid), "chars": "", "yield_time_ms": 20000}))
    if {"bash", "job_output"} <= names:
        return (native_tool("bash", {"command": COMMAND, "run_in_background": True,
                                     "description": "Start the orders export in the background"}),
                r"(?i)background job (\S+?)[\s.,;]*(?:$|\s)",
                lambda jid: native_tool("job_output", {"job_id": jid, "wait": True, "timeout_ms": 20000}))
    if "exec" in names and "process" in names:
        return (native_tool("exec", {"command": COMMAND, "background": True}),
                r"(?i)session[\s:=\"]+([\w.-]+)",
                lambda jid: native_tool("process", {"action": "poll", "sessionId": jid, "timeout": 20000}))
    return None


#: Where a pushed notification (or the start result) says the job's output goes.
OUTPUT_FILE_RE = r"(?i)output is being written to:?\s*(\S+?)\.?(?:\s|$)"


def _pushed_end(turn):
    """Claude Code 2.1.332: start the job, check the input, end the turn and read the job's end
    from the notification the harness pushes when it exits, then its output file for the reason.
    Returns ``(text shown about the job, match of its exit status or None)``."""
    res = yield native_tool("Bash", {"command": COMMAND, "run_in_background": True,
                                     "description": "Start the orders export in the background"})
    text = res.text or ""
    yield shell(CHECK)
    match = EXIT_RE.search(text)
    if match is None and res.call_id:
        ends = yield from await_pushed(turn, [res.call_id], "The export job is running in the background; "
                                       "I will write export_status.json when it ends.")
        end = ends.get(res.call_id)
        if end is not None:
            text += "\n" + end["text"]
            match = EXIT_RE.search(end["text"])
            output = end.get("output-file") or res.find(OUTPUT_FILE_RE)
            if output:
                out = yield read_file(output)
                text += "\n" + (out.text or "")
    return text, match


def policy(turn):
    if pushed_job_ends(turn):
        text, match = yield from _pushed_end(turn)
    else:
        plan = _start_and_poll(turn)
        if plan is None:
            yield final("This harness declares no background-job facility, so I did not start the export.")
            return
        text, match = yield from _polled_end(turn, plan)
    if match is None:
        yield final("I could not learn how the export job ended, so no status was written.")
        return
    code = int(match.group(1))
    reason = re.findall(REASON_RE, text)
    status = {"status": "failed" if code != 0 else "succeeded", "exit_code": code,
              "reason": reason[-1].strip() if code != 0 and reason else ""}
    yield write_file("export_status.json", json.dumps(status) + "\n")
    yield final(f"The export job ended with exit code {code}; export_status.json written.")


def _polled_end(turn, plan):
    """Every other harness: start the job, check the input, poll the job with the declared
    job-status tool. Returns ``(text shown about the job, match of its exit status or None)``."""
    start, id_re, poll = plan
    res = yield start
    text = res.text or ""
    jid = res.find(id_re)
    yield shell(CHECK)
    match = EXIT_RE.search(text)
    polls = 0
    while match is None and jid is not None and polls < MAX_POLLS:
        res = yield poll(jid)
        polls += 1
        if res.absent or res.missing:
            break
        text += "\n" + (res.text or "")
        match = EXIT_RE.search(res.text or "")
    return text, match
