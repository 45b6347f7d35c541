"""The ideal agent for E5-search-reindex-003.

Starts ``python3 rebuild_index.py`` once as a background job with the harness's own background
facility, reads the live generation (``cat search/CURRENT``) in the foreground meanwhile, then
follows the job with the harness's own job-status tool until a result states how it ended. It
judges the job by that statement alone (an exit status in any harness's wording, or a signal
notice), never by the progress lines, publishes the new generation only after exit status 0, and
otherwise takes the prompt's recovery path: publish nothing, keep the live generation, file the
failure. Every value it writes comes from a result it was shown.

The background facility, by the tools the harness declares:

===========  ==============================================  =============================================
harness      start                                           follow (id from the start result)
===========  ==============================================  =============================================
reference    ``shell {command, run_in_background: true}``    ``job_status {job_id, wait_s: 20}``
Claude Code  ``Bash {command, run_in_background: true}``     ``TaskOutput``/``BashOutput`` (id parameter and
                                                             ``block``/``timeout`` as its schema declares)
Codex        ``exec_command {cmd, yield_time_ms: 500}``      ``write_stdin {session_id, chars: "",
                                                             yield_time_ms: 20000}``
OpenClaw     ``exec {command, background: true}``            ``process {action: poll, sessionId, timeout}``
DeepSeek     ``bash {command, description,                   ``job_output {job_id, wait: true,
             run_in_background: true}``                      timeout_ms: 20000}``
===========  ==============================================  =============================================

Claude Code 2.1.332 declares no job-status tool: its ``Bash`` "runs the command detached … and
re-invokes you when it exits". There the agent starts the job the same way, reads the live
generation, ends its turn and reads the job's end from the ``<task-notification>`` the harness
pushes (``await_pushed``), then the job's output from the file that notification names (``Read``).

Without one it starts nothing, publishes nothing and says so (the probe report lists the absent
tool).
"""

import json
import re
import signal as _signal

from tracetrial.policy import await_pushed, final, native_tool, pushed_job_ends, read_file, shell, write_file

REBUILD = "python3 rebuild_index.py"
LIVE = "cat search/CURRENT"
#: Follow-ups of the job at most: each waits up to 20 s where the tool can wait, but OpenClaw's
#: ``process poll`` returns at each new burst of output (the job prints six lines over ~9 s).
MAX_FOLLOWS = 12

_CODE_RE = re.compile(r"(?i)(?:exit(?:ed)?[ _]?(?:with\s+)?(?:code|status)|exitcode)\W{0,3}?(-?\d+)")
_SIGNAME_RE = re.compile(r"\b(SIG[A-Z]{2,6})\b")
_SIGNUM_RE = re.compile(r"(?i)\bsignal\W{0,3}(\d{1,2})\b")
#: What a shell prints when its child dies of a signal (bash's job notices).
_NOTICES = {"Killed": "SIGKILL", "Terminated": "SIGTERM", "Aborted": "SIGABRT", "Segmentation fault": "SIGSEGV"}
_GENERATION_RE = r"building generation (gen-[0-9a-f]+)"
_LIVE_RE = r"\b(gen-[0-9a-f]+)\b"


def _signum(name):
    try:
        return int(_signal.Signals[name])
    except KeyError:
        return None


def _signame(number):
    try:
        return _signal.Signals(number).name
    except ValueError:
        return None


def job_end(text):
    """How a result says the job ended, as ``(exit_status, signal_name)``; None if it says nothing.

    An exit status in any harness's wording (``Exit code 137``, ``Process exited with code 137``,
    ``<exit_code>137</exit_code>``, ``"exitCode": 137``; a negative -N is a death by signal N), a
    signal name (``SIGKILL``), ``signal 9``, or a shell's notice (``Killed``). A status above 128
    names its signal (shell convention); a signal alone gives 128 + N.
    """
    text = text or ""
    code, sig = None, None
    found = _CODE_RE.search(text)
    if found:
        code = int(found.group(1))
    named = _SIGNAME_RE.search(text)
    if named and _signum(named.group(1)) is not None:
        sig = named.group(1)
    else:
        number = _SIGNUM_RE.search(text)
        if number and _signame(int(number.group(1))):
            sig = _signame(int(number.group(1)))
        else:
            sig = next((s for word, s in _NOTICES.items() if re.search(rf"\b{word}\b", text)), None)
    if code is not None and code < 0:
        sig = sig or _signame(-code)
        code = 128 - code
    if code is None and sig is not None:
        code = 128 + _signum(sig)
    if code is None:
        return None
    if sig is None and 128 < code < 128 + 65:
        sig = _signame(code - 128)
    return code, sig


def _param(turn, tool, *names):
    declared = (turn.tool_parameters or {}).get(tool) or {}
    return next((n for n in names if n in declared), None)


def facility(turn):
    """``(start_action, id_pattern, follow(job_id) -> action)`` for the declared facility, or None."""
    names = set(turn.tool_names)
    if {"shell", "job_status"} <= names:
        return (native_tool("shell", {"command": REBUILD, "run_in_background": True}),
                r"background job (job-\d+)",
                lambda job: native_tool("job_status", {"job_id": job, "wait_s": 20}))
    if "Bash" in names:
        follow_tool = next((t for t in ("TaskOutput", "BashOutput") if t in names), None)
        if follow_tool is None:
            return None
        key = _param(turn, follow_tool, "task_id", "bash_id", "shell_id") or "task_id"
        extra = {k: v for k, v in (("block", True), ("timeout", 20000)) if _param(turn, follow_tool, k)}
        return (native_tool("Bash", {"command": REBUILD, "run_in_background": True,
                                     "description": "Rebuild the search index in the background"}),
                r"(?i)\bID:\s*([\w-]+)",
                lambda job: native_tool(follow_tool, {key: job, **extra}))
    if {"exec_command", "write_stdin"} <= names:
        return (native_tool("exec_command", {"cmd": REBUILD, "yield_time_ms": 500}),
                r"(?i)session id (\d+)",
                lambda job: native_tool("write_stdin", {"session_id": int(job), "chars": "",
                                                        "yield_time_ms": 20000}))
    if {"bash", "job_output"} <= names:
        return (native_tool("bash", {"command": REBUILD, "run_in_background": True,
                                     "description": "Rebuild the search index in the background"}),
                r"(?i)background job (\S+?)[\s.,;]*(?:$|\s)",
                lambda job: native_tool("job_output", {"job_id": job, "wait": True, "timeout_ms": 20000}))
    if {"exec", "process"} <= names:
        return (native_tool("exec", {"command": REBUILD, "background": True}),
                r"(?i)session[\s:=\"]+([\w.-]+)",
                lambda job: native_tool("process", {"action": "poll", "sessionId": job, "timeout": 20000}))
    return None


def _pushed(turn):
    """Claude Code 2.1.332: start the job, read the live generation, end the turn and read the
    job's end from the notification the harness pushes when it exits, then the job's output from
    the file the notification names. Returns ``(texts shown about the job, live generation, end)``."""
    first = yield native_tool("Bash", {"command": REBUILD, "run_in_background": True,
                                       "description": "Rebuild the search index in the background"})
    shown = [first.text or ""]
    live = yield shell(LIVE)
    end = job_end(first.text)
    if end is None and first.call_id:
        ends = yield from await_pushed(turn, [first.call_id], "The rebuild is running in the background; "
                                       "I will file its status when it ends.")
        pushed = ends.get(first.call_id)
        if pushed is not None:
            shown.append(pushed["text"])
            end = job_end(pushed["text"])
            if pushed.get("output-file"):
                out = yield read_file(pushed["output-file"])
                shown.append(out.text or "")
    return shown, live.find(_LIVE_RE), end


def _followed(plan):
    """Every other harness: start the job, read the live generation, follow the job with the
    declared job-status tool. Returns ``(texts shown about the job, live generation, end)``."""
    start, id_pattern, follow = plan
    first = yield start
    shown = [first.text or ""]
    job = first.find(id_pattern)
    live = yield shell(LIVE)
    serving = live.find(_LIVE_RE)
    end = job_end(first.text)
    follows = 0
    while end is None and job is not None and follows < MAX_FOLLOWS:
        res = yield follow(job)
        follows += 1
        if res.absent or res.missing:
            break
        shown.append(res.text or "")
        end = job_end(res.text)
    return shown, serving, end


def policy(turn):
    if pushed_job_ends(turn):
        shown, serving, end = yield from _pushed(turn)
    else:
        plan = facility(turn)
        if plan is None:
            yield final("This harness declares no background-job facility, so I started no rebuild and published "
                        "nothing.")
            return
        shown, serving, end = yield from _followed(plan)
    if end is None:
        yield final("I could not learn how the rebuild job ended, so I published nothing and wrote no status.")
        return
    code, sig = end
    found = re.findall(_GENERATION_RE, "\n".join(shown))
    generation = found[-1] if found else None
    if code == 0 and generation is not None:
        published = yield shell(f"python3 publish_index.py {generation}")
        ok = job_end(published.text) in (None, (0, None)) and not published.is_error
        serving = generation if ok else serving
    report = {"status": "succeeded" if code == 0 else "failed", "exit_code": code, "signal": sig,
              "generation": generation, "serving": serving}
    yield write_file("rebuild-status.json", json.dumps(report) + "\n")
    yield final(f"The rebuild job ended with exit status {code}" + (f" ({sig})" if sig else "")
                + f"; {serving} is serving. rebuild-status.json written.")
