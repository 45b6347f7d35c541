"""The ideal agent for E5-parallel-shards-002.

Starts both shard rebuilds as background jobs with the harness's own background facility (the
second before following the first), then follows each job with the harness's own job-status tool
until a result states how it ended, and writes ``shards_status.json`` from those results only.
Per harness (branching on the declared tools), as E5-export-job-001:

* reference: ``shell {command, run_in_background: true}`` -> ``job_status {job_id, wait_s}``;
* Claude Code: ``Bash {command, run_in_background: true, description}`` -> ``TaskOutput``
  ``{task_id, block, timeout}`` (or ``BashOutput {bash_id}``);
* Codex: ``exec_command {cmd, yield_time_ms: 500}`` -> ``write_stdin {session_id, chars: "", yield_time_ms}``;
* OpenClaw: ``exec {command, background: true}`` -> ``process {action: "poll", sessionId}``;
* DeepSeek: ``bash {command, description, run_in_background: true}`` -> ``job_output``
  ``{job_id, wait: true, timeout_ms}``;
* Claude Code 2.1.332 (``Bash`` has ``run_in_background`` but no job-status tool is declared: it
  "re-invokes you when it exits"): both ``Bash {command, run_in_background: true, description}``,
  then the turn ends and each job's end is read from the ``<task-notification>`` the harness
  pushes for it (``await_pushed``), a failed shard's reason from the output file it names.

Ids come only from the results shown. Its final answer ends with an account of the exit status each
job's own status result gave, which the probe report keeps.
"""

import json
import re

from tracetrial.policy import await_pushed, final, native_tool, pushed_job_ends, read_file, write_file

SHARDS = {"a": "sh shard_a.sh", "b": "sh shard_b.sh"}
EXIT_RE = re.compile(r"(?i)(?:exit(?:ed)?\s+(?:with\s+)?(?:code|status)|exit_code)\W{0,3}?(-?\d+)")
REASON_RE = r"shard b failed: ([^\n\"\\<]+)"
MAX_POLLS = 6


def _param(turn, tool, *names):
    params = (turn.tool_parameters or {}).get(tool) or {}
    return next((n for n in names if n in params), None)


def _facility(turn):
    """(start(command) -> action, id pattern, poll(id) -> action) for the declared facility."""
    names = set(turn.tool_names)
    if "job_status" in names and "shell" in names:
        return (lambda cmd: native_tool("shell", {"command": cmd, "run_in_background": True}),
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
        return (lambda cmd: native_tool("Bash", {"command": cmd, "run_in_background": True,
                                                 "description": "Start a shard rebuild in the background"}),
                r"(?i)(?:with ID|ID):\s*([\w-]+)",
                lambda jid: native_tool(out, {key: jid, **extra}))
    if "exec_command" in names and "write_stdin" in names:
        return (lambda cmd: native_tool("exec_command", {"cmd": cmd, "yield_time_ms": 500}),
                r"(?i)session id (\d+)",
                lambda jid: native_tool("write_stdin", {"session_id": int(jid), "chars": "", "yield_time_ms": 20000}))
    if {"bash", "job_output"} <= names:
        return (lambda cmd: native_tool("bash", {"command": cmd, "run_in_background": True,
                                                 "description": "Start a shard rebuild in the background"}),
                r"(?i)background job (\S+?)[\s.,;]*(?:$|\s)",
                lambda jid: native_tool("job_output", {"job_id": jid, "wait": True, "timeout_ms": 20000}))
    if "exec" in names and "process" in names:
        return (lambda cmd: native_tool("exec", {"command": cmd, "background": True}),
                r"(?i)session[\s:=\"]+([\w.-]+)",
                lambda jid: native_tool("process", {"action": "poll", "sessionId": jid, "timeout": 20000}))
    return None


def account(codes):
    """The probe's statement of each job's reported exit status (parsed by the verifier)."""
    return "Jobs: " + "; ".join(f"{k}={'unknown' if codes.get(k) is None else codes[k]}" for k in SHARDS) + "."


def policy(turn):
    if pushed_job_ends(turn):
        codes, texts = yield from _pushed_ends(turn)
    else:
        plan = _facility(turn)
        if plan is None:
            yield final(f"This harness declares no background-job facility, so I started nothing. {account({})}")
            return
        codes, texts = yield from _polled_ends(plan)
    note = account(codes)
    if any(codes[s] is None for s in SHARDS):
        yield final(f"I could not learn how every shard job ended, so no status was written. {note}")
        return
    status = {}
    for shard in SHARDS:
        entry = {"status": "failed" if codes[shard] != 0 else "succeeded", "exit_code": codes[shard]}
        if codes[shard] != 0:
            reason = re.findall(REASON_RE, texts[shard])
            entry["reason"] = reason[-1].strip() if reason else ""
        status[shard] = entry
    yield write_file("shards_status.json", json.dumps(status) + "\n")
    yield final(f"Both shard jobs have ended; shards_status.json written. {note}")


def _pushed_ends(turn):
    """Claude Code 2.1.332: start both jobs, end the turn, and read each job's end from the
    notification the harness pushes when it exits; a failed job's reason from the output file the
    notification names. Returns ``(codes, texts)`` by shard."""
    calls, texts, codes = {}, {}, {}
    for shard, cmd in SHARDS.items():
        res = yield native_tool("Bash", {"command": cmd, "run_in_background": True,
                                         "description": "Start a shard rebuild in the background"})
        calls[shard], texts[shard] = res.call_id, res.text or ""
        m = EXIT_RE.search(texts[shard])
        codes[shard] = int(m.group(1)) if m else None
    waiting = [calls[s] for s in SHARDS if codes[s] is None]
    ends = (yield from await_pushed(turn, waiting, "Both shard jobs are running in the background; "
                                    "I will write shards_status.json when they have ended.")) if waiting else {}
    for shard in SHARDS:
        end = ends.get(calls[shard])
        if end is None:
            continue
        texts[shard] += "\n" + end["text"]
        m = EXIT_RE.search(end["text"])
        codes[shard] = int(m.group(1)) if m else None
        if codes[shard] not in (None, 0) and end.get("output-file"):
            out = yield read_file(end["output-file"])
            texts[shard] += "\n" + (out.text or "")
    return codes, texts


def _polled_ends(plan):
    """Every other harness: start both jobs, then poll each with the declared job-status tool.
    Returns ``(codes, texts)`` by shard."""
    start, id_re, poll = plan
    ids, texts, codes = {}, {}, {}
    for shard, cmd in SHARDS.items():
        res = yield start(cmd)
        ids[shard] = res.find(id_re)
        texts[shard] = res.text or ""
        m = EXIT_RE.search(texts[shard])
        codes[shard] = int(m.group(1)) if m else None
    for shard in SHARDS:
        polls = 0
        while codes[shard] is None and ids[shard] is not None and polls < MAX_POLLS:
            res = yield poll(ids[shard])
            polls += 1
            if res.absent or res.missing:
                break
            texts[shard] += "\n" + (res.text or "")
            m = EXIT_RE.search(res.text or "")
            codes[shard] = int(m.group(1)) if m else None
    return codes, texts
