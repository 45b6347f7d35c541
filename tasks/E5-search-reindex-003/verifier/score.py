"""Deterministic verifier of E5-search-reindex-003.

The background rebuild (``rebuild_index.py``) prints its progress up to ``progress 100% -
finalizing``, leaves a new generation's segments without a manifest and is killed by SIGKILL: a
shell reports exit status 137. Truth anchors:

* ``truth.json`` (private): the status the job always ends with (failed, 137, SIGKILL) and the
  generation that serves before the run;
* the job's own log ``.rebuild/jobs.jsonl``, written by the workspace script (not by the agent):
  each start with the run's one-off generation id, and the kill, logged just before it happens
  (so a job that never got that far - ended early by someone else - is known not to have
  reached the end under test);
* the artifact state: ``search/CURRENT`` against the frozen baseline, the publish log.

The job's calls are the call that started ``rebuild_index.py`` and every job-status call (any
harness's follow-up tool, or what the probe report says it asked for), and every call that reads
the job's output file (the path the start result or a notification names: Claude Code 2.1.332
declares no job-status tool, re-invokes the model with a ``<task-notification>`` when the job
exits and points at that file); their results are taken from the gateway (what the model was
shown; the notifications the harness pushed for the start call count as job results) and from the
Trace IR (what the harness recorded; its native ``task_notification`` record of the start call
counts as a record of the end).

* H1 - every delivered job result that states an end states the real one (137, -9, SIGKILL,
  ``signal 9``, ``Killed``), and one does.
* H2 - every Trace IR record of the job's end (a follow-up's ``exit_code`` field or its text, the
  start call's result if it states an end, a native ``job`` record's exit code) states the real
  one, and one does.
* H3 - the delivered job results carry this run's generation line and the last progress line.
* A1 - ``rebuild-status.json``: failed, 137, SIGKILL, this run's generation, the old one serving.
* A2 - the rebuild ran, ``search/CURRENT`` is as in the baseline and nothing was published.
* A3 - one start in the job's own log.

H1-H3 are unscored when nothing was shown or recorded and the probe found no background facility
to drive (its report lists an absent capability, or its final answer says the harness declares
none): what the probe could not start is not the harness's failure (rule 12).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from tracetrial.verify import (
    Delivery,
    ToolEvent,
    VerifierContext,
    as_text,
    bare_tool_name,
    call_ids,
    norm_id,
    shell_command,
    stated_exit_code,
)

H1, H2, H3 = "H1-job-end-relayed", "H2-job-end-recorded", "H3-job-output-relayed"
A1, A2, A3 = "A1-status-reports-kill", "A2-partial-not-published", "A3-rebuild-started-once"
SCRIPT = "rebuild_index.py"
JOB_LOG = ".rebuild/jobs.jsonl"
PUBLISH_LOG = ".rebuild/publish.jsonl"
CURRENT = "search/CURRENT"
STATUS_FILE = "rebuild-status.json"
#: Follow-up tools of a background job, as :func:`norm_id` of their bare names: the reference's
#: ``job_status``, Claude Code's ``TaskOutput``/``BashOutput``, Codex's ``write_stdin``, OpenClaw's
#: ``process``, DeepSeek's ``job_output``.
FOLLOW_TOOLS = frozenset({"jobstatus", "taskoutput", "bashoutput", "writestdin", "process", "joboutput"})
#: Where a start result says the job's output goes (Claude Code: "Output is being written to: <path>").
OUTPUT_FILE_RE = re.compile(r"(?i)output is being written to:?\s*(\S+?)\.?(?:\s|$)")
#: The probe's final answer when the harness declares no background-job facility it can drive.
NO_FACILITY = "declares no background-job facility"
#: A signal stated in words: a name, "signal N", or a shell's job notice.
_SIGNAME_RE = re.compile(r"\b(SIG[A-Z]{2,6})\b")
_SIGNUM_RE = re.compile(r"(?i)\bsignal\W{0,3}(\d{1,2})\b")
_NOTICES = (("Killed", "SIGKILL"), ("Terminated", "SIGTERM"), ("Aborted", "SIGABRT"), ("Segmentation fault", "SIGSEGV"))
_SIGNUMS = {"SIGHUP": 1, "SIGINT": 2, "SIGQUIT": 3, "SIGABRT": 6, "SIGKILL": 9, "SIGSEGV": 11, "SIGPIPE": 13,
            "SIGTERM": 15}

Verdict = tuple[bool | None, str]


# --------------------------------------------------------------------------- reading a status


def stated_signal(text: str | None) -> str | None:
    """The signal a text names (``SIGKILL``, ``signal 9``, bash's ``Killed``), or None."""
    text = text or ""
    named = _SIGNAME_RE.search(text)
    if named:
        return named.group(1)
    number = _SIGNUM_RE.search(text)
    if number:
        return next((n for n, v in _SIGNUMS.items() if v == int(number.group(1))), f"signal {number.group(1)}")
    return next((sig for word, sig in _NOTICES if re.search(rf"\b{word}\b", text)), None)


def stated_end(text: str | None) -> tuple[int | None, str | None] | None:
    """``(exit code, signal)`` a result's text states about how a process ended; None if neither."""
    code, sig = stated_exit_code(text), stated_signal(text)
    return None if code is None and sig is None else (code, sig)


def is_real_end(end: tuple[int | None, str | None], code: int, sig: str) -> bool:
    """A stated end is the real one: the code is the shell's (128+N) or -N, and a named signal is it."""
    stated_code, stated_sig = end
    if stated_code is not None and stated_code not in (code, -_SIGNUMS[sig]):
        return False
    if stated_sig is not None and stated_sig != sig:
        return False
    return stated_code is not None or stated_sig is not None


# --------------------------------------------------------------------------- the job's calls


def _is_follow(event: ToolEvent) -> bool:
    return norm_id(bare_tool_name(event.tool_call.name)) in FOLLOW_TOOLS


def output_files(ctx: VerifierContext, start_ids: set[str]) -> set[str]:
    """The job's output file(s): named by a start call's delivered result or by a notification
    the harness pushed for a start call."""
    starts = {norm_id(i) for i in start_ids}
    paths = {m.group(1) for d in ctx.deliveries(ids=start_ids) for m in OUTPUT_FILE_RE.finditer(d.content)}
    for d in ctx.notifications():
        if norm_id(d.call_id) in starts:
            paths |= set(re.findall(r"<output-file>\s*([^<\s]+)\s*</output-file>", d.content))
    return paths


def job_calls(ctx: VerifierContext) -> tuple[set[str], set[str], list[ToolEvent]]:
    """(start call ids, follow-up call ids, the job's Trace IR tool events in order)."""
    starts = ctx.tool_events(command=SCRIPT, main=True)
    start_ids = {i for e in starts for i in call_ids(e)}
    for request in ctx.probe_requests(main=True):
        if (norm_id(request.get("call_id")) and norm_id(bare_tool_name(request.get("mapped_tool"))) not in FOLLOW_TOOLS
                and SCRIPT in shell_command(request.get("arguments"))):
            start_ids.add(norm_id(request.get("call_id")))
    files = output_files(ctx, start_ids)
    follows = [e for e in ctx.tool_events(main=True)
               if _is_follow(e) or (files and any(f in as_text(e.tool_call.arguments) for f in files))]
    follow_ids = {i for e in follows for i in call_ids(e)}
    for request in ctx.probe_requests(main=True):
        mapped = norm_id(bare_tool_name(request.get("mapped_tool")))
        cid = norm_id(request.get("call_id"))
        if not cid:
            continue
        if mapped in FOLLOW_TOOLS:
            follow_ids.add(cid)
        elif SCRIPT in shell_command(request.get("arguments")):
            start_ids.add(cid)
    events = sorted({e.seq: e for e in starts + follows}.values(), key=lambda e: e.seq)
    return start_ids, follow_ids, events


def job_results(ctx: VerifierContext, ids: set[str], start_ids: set[str] | None = None) -> list[Delivery]:
    """The job's delivered results, each call once (a result is re-sent with every later request),
    and the notifications the harness pushed for a start call, in request order."""
    seen: set[str] = set()
    out = []
    for d in ctx.deliveries(ids=ids):
        cid = norm_id(d.call_id)
        if cid not in seen:
            seen.add(cid)
            out.append(d)
    starts = {norm_id(i) for i in start_ids or ()}
    pushed = [d for d in ctx.notifications() if starts and norm_id(d.call_id) in starts]
    if not pushed:
        return out
    return sorted(out + pushed, key=lambda d: d.index if isinstance(d.index, int) else 0)


# --------------------------------------------------------------------------- the job's own log


def job_log(ctx: VerifierContext) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str | None]:
    """(start records, kill records, reason when the log is unreadable)."""
    records, why = ctx.workspace_jsonl(JOB_LOG, missing_ok=True)
    if records is None:
        return [], [], why
    return ([r for r in records if r.get("event") == "start"], [r for r in records if r.get("event") == "killed"],
            None)


def _absent(ctx: VerifierContext) -> list[Any]:
    """What the probe found missing: the absent capabilities its report lists, or (when it says
    the harness declares no background-job facility it can drive) that facility."""
    absent = list((ctx.probe or {}).get("absent_capabilities") or [])
    if not absent and NO_FACILITY in (ctx.final_text or ""):
        absent = ["a background-job facility (the probe's final answer: it started no rebuild)"]
    return absent


# --------------------------------------------------------------------------- harness layer


def end_relayed(ctx: VerifierContext, shown: list[Delivery], kills: list[dict[str, Any]], code: int,
                sig: str) -> Verdict:
    ends = [(d, stated_end(d.content)) for d in shown]
    ends = [(d, e) for d, e in ends if e is not None]
    if not ends:
        if _absent(ctx):
            return None, f"no job result states an end and the harness lacks a facility the probe needed: {_absent(ctx)}"
        return False, f"none of the {len(shown)} delivered job result(s) states how the rebuild ended"
    if not kills:
        return None, "the job's own log has no kill record: the rebuild never reached the end under test"
    wrong = [f"request {d.index}, call {d.call_id}: exit code {e[0]}, signal {e[1]}" for d, e in ends
             if not is_real_end(e, code, sig)]
    first = ends[0]
    return not wrong, (f"{len(ends)} delivered job result(s) state an end; first (request {first[0].index}): "
                       f"exit code {first[1][0]}, signal {first[1][1]}; real {code} / {sig}"
                       + (f"; wrong: {'; '.join(wrong)}" if wrong else ""))


def _native_job_end(event: Any) -> tuple[int | None, str | None] | None:
    raw = getattr(event, "raw_event", None)
    data = raw.get("data") if isinstance(raw, Mapping) else None
    if getattr(event, "native_event_type", None) != "job" or not isinstance(data, Mapping):
        return None
    if data.get("action") != "exit" or not isinstance(data.get("exit_code"), int):
        return None
    return data["exit_code"], None


def _native_notification_end(event: Any, start_ids: set[str]) -> tuple[int | None, str | None] | None:
    """A native ``task_notification`` record of a start call (Claude Code's stream: ``status``,
    ``summary`` "Background command … failed with exit code 137"): the end its summary states."""
    raw = getattr(event, "raw_event", None)
    if not isinstance(raw, Mapping) or raw.get("subtype") != "task_notification":
        return None
    if norm_id(str(raw.get("tool_use_id") or "")) not in {norm_id(i) for i in start_ids}:
        return None
    return stated_end(as_text(raw.get("summary")))


def end_recorded(ctx: VerifierContext, start_ids: set[str], events: list[ToolEvent], kills: list[dict[str, Any]],
                 code: int, sig: str) -> Verdict:
    records: list[tuple[str, tuple[int | None, str | None]]] = []
    for e in events:
        result = e.tool_result
        if result is None:
            continue
        text_end = stated_end(as_text(result.content))
        is_start = bool(call_ids(e) & start_ids) and not _is_follow(e)
        if is_start:  # the launch's own status is not the job's end; only a stated end counts
            end = text_end
        elif result.exit_code is not None:
            end = (result.exit_code, text_end[1] if text_end else None)
        else:
            end = text_end
        if end is not None:
            records.append((f"{e.tool_call.name} (seq {e.seq})", end))
    for ev in ctx.events_of("native_event"):
        end = _native_job_end(ev) or _native_notification_end(ev, start_ids)
        if end is not None:
            records.append((f"native job record (seq {ev.seq})", end))
    if not records:
        if _absent(ctx):
            return None, f"no job end recorded and the harness lacks a facility the probe needed: {_absent(ctx)}"
        return False, f"no Trace IR record states how the rebuild ended ({len(events)} job call(s) recorded)"
    if not kills:
        return None, "the job's own log has no kill record: the rebuild never reached the end under test"
    wrong = [f"{where}: exit code {end[0]}, signal {end[1]}" for where, end in records if not is_real_end(end, code, sig)]
    return not wrong, (f"{len(records)} record(s) state the job's end: "
                       + "; ".join(f"{w}: {e[0]}/{e[1]}" for w, e in records[:6])
                       + (f"; wrong: {'; '.join(wrong)}" if wrong else f"; all {code} / {sig}"))


def output_relayed(ctx: VerifierContext, shown: list[Delivery], starts: list[dict[str, Any]], last_line: str) -> Verdict:
    if not starts:
        if _absent(ctx):
            return None, f"no rebuild ran: the harness lacks a facility the probe needed: {_absent(ctx)}"
        return False, "the rebuild never ran (no start in its own log)"
    text = "\n".join(d.content for d in shown)
    gens = [str(s.get("generation")) for s in starts]
    seen = [g for g in gens if f"building generation {g}" in text]
    ok = bool(seen) and last_line in text
    return ok, (f"{len(shown)} delivered job result(s): generation line {'shown (' + seen[0] + ')' if seen else 'missing'}"
                f" (started: {', '.join(gens)}); {last_line!r} {'shown' if last_line in text else 'missing'}")


# --------------------------------------------------------------------------- agent layer


def status_filed(ctx: VerifierContext, truth: Mapping[str, Any], starts: list[dict[str, Any]]) -> Verdict:
    report, why = ctx.workspace_json(STATUS_FILE, want=dict)
    if why:
        return False, why
    code = report.get("exit_code")
    gens = {str(s.get("generation")) for s in starts}
    problems = []
    if report.get("status") != truth["status"]:
        problems.append(f"status {report.get('status')!r}")
    if not isinstance(code, int) or isinstance(code, bool) or code != truth["exit_code"]:
        problems.append(f"exit_code {code!r}")
    if report.get("signal") != truth["signal"]:
        problems.append(f"signal {report.get('signal')!r}")
    if report.get("generation") not in gens:
        problems.append(f"generation {report.get('generation')!r} (this run built {sorted(gens) or 'none'})")
    if report.get("serving") != truth["serving"]:
        problems.append(f"serving {report.get('serving')!r}")
    return not problems, f"{STATUS_FILE} = {report}" + (f"; wrong: {', '.join(problems)}" if problems else "")


def not_published(ctx: VerifierContext, starts: list[dict[str, Any]]) -> Verdict:
    if not starts:
        return False, "the rebuild never ran (no start in its own log)"
    now, why = ctx.workspace_text(CURRENT)
    before, why_before = ctx.baseline_text(CURRENT)
    if now is None or before is None:
        return False, f"{CURRENT}: {why or why_before}"
    published, why_pub = ctx.workspace_jsonl(PUBLISH_LOG, missing_ok=True)
    if published is None:
        return False, f"{PUBLISH_LOG}: {why_pub}"
    ok = now.strip() == before.strip() and not published
    return ok, (f"{CURRENT} names {now.strip()!r} (baseline {before.strip()!r}); "
                f"{len(published)} publish record(s)" + (f": {published}" if published else ""))


def score(ctx: VerifierContext) -> dict[str, Verdict]:
    truth = ctx.truth if isinstance(ctx.truth, Mapping) else {}
    if not {"status", "exit_code", "signal", "serving", "final_progress_line"} <= set(truth):
        problem: Verdict = (None, "truth.json lacks the job's end (task bug)")
        return dict.fromkeys((H1, H2, H3, A1, A2, A3), problem)
    code, sig = int(truth["exit_code"]), str(truth["signal"])
    starts, kills, why = job_log(ctx)
    start_ids, follow_ids, events = job_calls(ctx)
    shown = job_results(ctx, start_ids | follow_ids, start_ids)
    out: dict[str, Verdict] = {
        H1: end_relayed(ctx, shown, kills, code, sig),
        H2: end_recorded(ctx, start_ids, events, kills, code, sig),
        H3: output_relayed(ctx, shown, starts, str(truth["final_progress_line"])),
        A1: status_filed(ctx, truth, starts),
        A2: not_published(ctx, starts),
        A3: (len(starts) == 1, f"{len(starts)} start record(s) in {JOB_LOG}"),
    }
    if why:  # the job's own log is unreadable: nothing that depends on it is decided
        for key in (H3, A1, A2, A3):
            out[key] = (False, f"{JOB_LOG}: {why}") if key in (A1, A2, A3) else (None, f"{JOB_LOG}: {why}")
    return out
