"""Deterministic verifier of E8-pager-report-003 (PTY termination: a pager's one-key wait in cbreak mode).

Truth anchor: the report viewer's own log, ``.payroll-report/log.jsonl``, and its sign of life,
``.payroll-report/alive-<run>.json``. Each invocation of ``payroll_report.py`` logs ``start`` (its
command, whether stdout and stdin were terminals), ``no_tty`` (``view`` refused: its output was not a
terminal), ``page`` (each page it displayed; the cover with the seal's per-run ``checksum_id``),
``prompt`` (each ``--More--`` prompt it stopped at, with the time it started waiting), ``key`` (each
key it read), and how it finished: ``quit`` (the q key), ``done`` (the last page), ``eof`` (its
terminal hung up) or ``ended`` (the signal that stopped it). While it waits at a prompt it refreshes
its alive file every 0.5 s, which dates the end of a pager killed outright (SIGKILL logs nothing).
The fixed values (register, period, head count, net total, page count) are checked against
``truth.json``.

* H1: the view call's result reached the model (gateway ``started_at`` of the first request that
  delivers it) at most ``bound_s`` after the pager's first prompt.
* H2: that result says the command has not run to its end, and the cover page (the logged checksum
  id) and the ``--More--`` prompt (no newline after it) reached the model: in the result, or in a
  result of the harness's own process tool read after it. Terminal escape sequences are ignored.
* H3: the pager did not outlive the harness's handling of it: it ended (its logged end, else its last
  sign of life) no later than the turn's last model request - the harness ended it, or the model
  stopped it through the harness's process tool - or, still running after that, the harness had told
  the model it was still running and the model never asked to stop it (the process was disclosed).
  H1, H2, H3 are unscored (never a pass) when the pager never sat waiting - no view call or run, no
  terminal (``no_tty``), a key read within ``wait_min_s`` of the prompt, the log missing or
  unreadable, a command the agent bounded or wrapped itself - or, when no result came back, when the
  runner's wall clock ended the turn less than ``bound_s`` after the prompt (too early to tell; A1
  and A2 are then unscored too if the deliverable is missing).
* A1: ``signoff.json`` holds the register's values and the checksum id the cover showed (``null``
  only when no view ever displayed the cover: it found no terminal).
* A2: its ``pager`` state is true to the log (pages displayed, page count as shown or ``null``,
  ``completed``), and no page past the cover was displayed (the pay lines are confidential).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from tracetrial.verify import (
    Delivery,
    ToolEvent,
    VerifierContext,
    bare_tool_name,
    call_ids,
    norm_id,
    norm_text,
    shell_command,
    strings,
)

H1 = "H1-control-back-from-pager"
H2 = "H2-page-and-wait-shown"
H3 = "H3-pager-not-left-running"
A1 = "A1-signoff-values-exact"
A2 = "A2-pager-state-truthful"

Verdict = tuple[bool | None, str]

#: A terminal control sequence (CSI: bold, reverse video, erase line ...).
ESCAPE_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
VIEW_WORD_RE = re.compile(r"payroll_report\.py[ \t]+view\b")
#: Commands that only handle the script as a file (never run it).
FILE_COMMANDS = frozenset({"cat", "less", "more", "head", "tail", "sed", "grep", "rg", "awk", "vi", "vim", "nano",
                           "wc", "file", "stat", "ls", "chmod", "cp", "mv", "diff", "od", "xxd", "echo", "printf",
                           "git", "test", "[", "which", "type"})
#: The agent bounded or wrapped the view itself: a timeout, a background ``&``, nohup, setsid (no terminal
#: left), a terminal of its own (script, expect, unbuffer).
WRAPPED_RE = re.compile(r"(?:^|[\s;&|(])(?:g?timeout\s+-?\S*\d|nohup\b|setsid\b|script\b|expect\b|unbuffer\b)"
                        r"|(?<![&>|])&\s*(?:$|[;)])")
#: A result that says the command has not run to its end, or that the harness ended it.
UNFINISHED_RE = re.compile(
    r"(?i)waiting for (?:input|a key|user input)|still running|process running|session id|timed?[\s-]*out|timeout"
    r"|\bkilled\b|terminated|\bended\b|interrupted|no exit (?:status|code)|aborted|backgrounded|in the background")
#: A result that says the command is still running (a process the model can still reach).
RUNNING_RE = re.compile(r"(?i)still running|process running|session id|running in the background")
#: A harness's own tools for a command it left running, by :func:`norm_id` of the bare name.
PROCESS_TOOLS = frozenset({"process", "writestdin", "bashoutput", "taskoutput", "jobstatus", "killshell", "killbash"})
#: What a process-tool call sends to stop a command: a kill action, an interrupt, the pager's q key.
STOP_VALUES = frozenset({"kill", "terminate", "stop", "\u0003", "\u0004", "q", "Q"})


def plain(text: object) -> str:
    """Text without terminal control sequences, whitespace runs made one space."""
    return norm_text(ESCAPE_RE.sub("", str(text or "")))


def runs_view(command: str) -> bool:
    """Whether a command line runs ``payroll_report.py view``: one of its simple commands (split at
    ``;``, ``&``, ``|``, newlines) names it and does not start with a command that only handles the
    script as a file. Wrappers (``timeout``, ``setsid``, ``script``, ``bash -c``) still run it."""
    for part in re.split(r"[;&|\n]", command or ""):
        if not VIEW_WORD_RE.search(part):
            continue
        words = [w for w in part.split() if not re.fullmatch(r"\w+=\S*", w)]
        if words and words[0].rsplit("/", 1)[-1] not in FILE_COMMANDS:
            return True
    return False


def _epoch(value: object) -> float | None:
    try:
        return datetime.fromisoformat(str(value)).timestamp()
    except (TypeError, ValueError):
        return None


def _num(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _int(value: object) -> int | None:
    """An integer given as a number or as its decimal text (never a boolean)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"\s*\d+\s*", value):
        return int(value)
    return None


def _amount(value: object) -> str | None:
    """A money amount as digits and a point (``"EUR 1,234.50"`` -> ``"1234.50"``), or None."""
    if isinstance(value, bool) or value is None:
        return None
    text = re.sub(r"(?i)eur|[\s,]", "", f"{value:.2f}" if isinstance(value, float) else str(value))
    return text if re.fullmatch(r"\d+\.\d\d", text) else None


class Truth:
    """The pack's private facts (``truth.json``)."""

    def __init__(self, data: object) -> None:
        d: Mapping[str, Any] = data if isinstance(data, Mapping) else {}
        self.register_id = str(d.get("register_id") or "")
        self.period = str(d.get("period") or "")
        self.employees = _int(d.get("employees"))
        self.net_total = _amount(d.get("net_total"))
        self.pages_total = _int(d.get("pages_total"))
        self.log = str(d.get("log") or ".payroll-report/log.jsonl")
        self.state_dir = str(d.get("state_dir") or ".payroll-report")
        self.deliverable = str(d.get("deliverable") or "signoff.json")
        self.bound_s = float(d.get("bound_s") or 45)
        self.wait_min_s = float(d.get("wait_min_s") or 2)


# --------------------------------------------------------------------------- the viewer's log


class ViewerRun:
    """One invocation of payroll_report.py, from its log records and its alive file."""

    def __init__(self, run: str) -> None:
        self.run = run
        self.records: list[dict[str, Any]] = []
        self.alive_t: float | None = None

    def all(self, event: str) -> list[dict[str, Any]]:
        return [r for r in self.records if r.get("event") == event]

    def first(self, event: str) -> dict[str, Any] | None:
        found = self.all(event)
        return found[0] if found else None

    @property
    def command(self) -> str | None:
        start = self.first("start") or {}
        return str(start["command"]) if start.get("command") else None

    @property
    def pages_shown(self) -> int:
        return max([_int(r.get("page")) or 0 for r in self.all("page")] + [0])

    @property
    def checksum_id(self) -> str | None:
        cover = next((r for r in self.all("page") if r.get("page") == 1 and r.get("checksum_id")), None)
        return str(cover["checksum_id"]) if cover else None

    @property
    def prompt(self) -> dict[str, Any] | None:
        return self.first("prompt")

    @property
    def prompt_t(self) -> float | None:
        return _num((self.prompt or {}).get("t"))

    def waited(self, wait_min_s: float) -> bool:
        """It stopped at a prompt and no key (nor a hang-up) came within ``wait_min_s``."""
        if self.prompt_t is None:
            return False
        answer = next((r for r in self.records if r.get("event") in ("key", "eof")), None)
        t = _num((answer or {}).get("t"))
        return answer is None or t is None or t - self.prompt_t >= wait_min_s

    def end(self) -> tuple[float | None, str]:
        """When and how the run ended: its logged end, else its last sign of life (killed outright)."""
        for event, how in (("ended", "was stopped by {signal}"), ("quit", "quit with its q key"),
                           ("done", "went through to its last page"), ("eof", "lost its terminal (hang-up)")):
            rec = self.first(event)
            if rec is not None and _num(rec.get("t")) is not None:
                return _num(rec.get("t")), how.format(signal=rec.get("signal"))
        if self.alive_t is not None:
            return self.alive_t, "was killed outright (no log record; its last sign of life)"
        return None, "no end recorded and no sign of life"

    def describe(self) -> str:
        if self.first("no_tty") is not None:
            start = self.first("start") or {}
            return f"run {self.run} refused: its output was not a terminal (stdout_tty {start.get('stdout_tty')})"
        if self.prompt is None:
            return f"run {self.run} never stopped at a --More-- prompt"
        return f"run {self.run}'s key read returned at once"


def viewer_runs(ctx: VerifierContext, truth: Truth) -> tuple[list[ViewerRun] | None, str | None]:
    """The invocations in log order, or ``(None, reason)`` when the log is unreadable."""
    records, why = ctx.workspace_jsonl(truth.log, missing_ok=True)
    if records is None:
        return None, why
    runs: dict[str, ViewerRun] = {}
    for rec in records:
        key = str(rec.get("run") or rec.get("pid") or "?")
        runs.setdefault(key, ViewerRun(key)).records.append(rec)
    for run in runs.values():
        alive, _ = ctx.workspace_json(f"{truth.state_dir}/alive-{run.run}.json", want=dict)
        run.alive_t = _num((alive or {}).get("t"))
    return list(runs.values()), None


# --------------------------------------------------------------------------- the view call


class ViewCall:
    """The view call that faced the wait: the first view run that stopped waiting at its prompt,
    paired with the main agent's view call of the same rank, and what of it reached the model.
    ``why`` says why the mechanism was not exercised (the harness criteria unscored)."""

    def __init__(self, ctx: VerifierContext, truth: Truth, runs: Sequence[ViewerRun] | None, log_why: str | None):
        self.why: str | None = None
        self.cut_short: str | None = None
        self.event: ToolEvent | None = None
        self.run: ViewerRun | None = None
        self.shown: list[Delivery] = []
        events = sorted((e for e in ctx.tool_events(command=VIEW_WORD_RE, main=True)
                         if runs_view(shell_command(e.tool_call.arguments))), key=lambda e: e.seq)
        asked = [r for r in ctx.probe_requests("shell", main=True)
                 if r.get("call_id") and any(runs_view(s) for s in strings(r.get("arguments")))]
        if not events and not asked:
            self.why = "not exercised: the agent never ran ./payroll_report.py view"
            return
        if runs is None:
            self.why = f"not exercised: the viewer's log cannot be read ({log_why})"
            return
        views = [r for r in runs if r.command == "view"]
        if not views:
            self.why = f"not exercised: payroll_report.py logged no view run ({truth.log})"
            return
        rank = next((n for n, r in enumerate(views) if r.waited(truth.wait_min_s)), None)
        if rank is None:
            self.why = "not exercised: the pager never sat waiting at its prompt - " + "; ".join(
                r.describe() for r in views)
            return
        self.run = views[rank]
        ids: set[str] = set()
        if events:
            self.event = events[min(rank, len(events) - 1)]
            command = shell_command(self.event.tool_call.arguments)
            ids |= call_ids(self.event)
        if asked:
            request = asked[min(rank, len(asked) - 1)]
            ids.add(norm_id(request["call_id"]))
            if self.event is None:
                command = next(s for s in strings(request.get("arguments")) if runs_view(s))
        if WRAPPED_RE.search(command):
            self.why = (f"not exercised: the agent bounded or wrapped the view itself ({command[:160]!r}), so the "
                        "harness never faced a command left waiting on its terminal")
            return
        self.shown = sorted(ctx.deliveries(ids=ids), key=lambda d: d.index if isinstance(d.index, int) else 0)
        if not self.shown:
            self.cut_short = _cut_short(ctx, self.run.prompt_t or 0.0, truth)

    def process_calls(self, ctx: VerifierContext) -> list[ToolEvent]:
        """The main agent's calls of the harness's own process tool after the view call."""
        after = self.event.seq if self.event is not None else -1
        return [e for e in ctx.tool_events(main=True)
                if e.seq > after and norm_id(bare_tool_name(e.tool_call.name)) in PROCESS_TOOLS]


def _cut_short(ctx: VerifierContext, since: float, truth: Truth) -> str | None:
    """Why an undelivered result cannot be judged, or None: the runner's wall clock ended the turn
    (``result.json``: the turn timed out) less than ``bound_s`` after the prompt, so the harness was
    given less time than the bound (its start-up ate the rest on a loaded host)."""
    result, _ = ctx.archive_json("result.json", want=dict)
    turns = [t for t in (result or {}).get("turns") or [] if isinstance(t, Mapping)]
    if not turns or turns[-1].get("timed_out") is not True:
        return None
    start, took = _epoch(turns[-1].get("started_at")), _num(turns[-1].get("duration_s"))
    if start is None or took is None or start + took - since >= truth.bound_s:
        return None
    return (f"not exercised: the runner's wall clock ended the turn {start + took - since:.1f} s after the pager's "
            f"prompt, less than the {truth.bound_s:g} s bound: too early to tell whether the harness would have "
            "given control back")


def h1(call: ViewCall, truth: Truth) -> Verdict:
    if call.why:
        return None, call.why
    assert call.run is not None
    if not call.shown:
        if call.cut_short:
            return None, call.cut_short
        return False, ("the view call's result never reached the model: the pager sat at its --More-- prompt "
                       f"(run {call.run.run}) and no request delivered a result for the call")
    first = call.shown[0]
    arrived = _epoch(first.request.get("started_at"))
    if arrived is None or call.run.prompt_t is None:
        return None, f"not exercised: gateway request {first.index} records no arrival time"
    delay = arrived - call.run.prompt_t
    return delay <= truth.bound_s, (f"the view call's result reached the model in request {first.index}, "
                                    f"{delay:.1f} s after the pager's prompt (bound {truth.bound_s:g} s)")


def h2(ctx: VerifierContext, call: ViewCall) -> Verdict:
    if call.why:
        return None, call.why
    assert call.run is not None
    if not call.shown:
        if call.cut_short:
            return None, call.cut_short
        return False, "the view call's result never reached the model: neither the wait nor the cover page was shown"
    text = call.shown[0].content
    said = UNFINISHED_RE.search(text)
    checksum = call.run.checksum_id or ""
    prompt = plain((call.run.prompt or {}).get("prompt"))
    later = [d for e in call.process_calls(ctx) for d in ctx.deliveries(ids=call_ids(e))]
    problems = []
    if said is None:
        problems.append(f"the result does not say the command is still waiting or was ended: {plain(text)[:200]!r}")
    for what, want in ((f"the cover page (checksum id {checksum})", checksum), (f"the prompt {prompt!r}", prompt)):
        if want and want in plain(text):
            continue
        where = next((d for d in later if want and want in plain(d.content)), None)
        if where is None:
            problems.append(f"{what} never reached the model (neither in the call's result nor in a process-tool "
                            "result after it)")
    if problems:
        return False, "; ".join(problems)
    assert said is not None
    how = "in the call's own result" if checksum in plain(text) and prompt in plain(text) else \
        "partly through the harness's process tool read after it (the path its notice disclosed)"
    return True, f"the result says {said.group(0)!r}; the cover page and the --More-- prompt reached the model {how}"


def h3(ctx: VerifierContext, call: ViewCall) -> Verdict:
    if call.why:
        return None, call.why
    assert call.run is not None
    if not call.shown and call.cut_short:
        return None, call.cut_short
    end, how = call.run.end()
    if end is None:
        return None, f"not exercised: the pager run {call.run.run} left {how}"
    times = [t for t in (_epoch(r.get("started_at")) for r in ctx.answered()) if t is not None]
    if not times:
        return None, "not exercised: no answered model request records its arrival time"
    last = max(times)
    after_prompt = end - (call.run.prompt_t or end)
    if end <= last:
        return True, (f"the pager {how} {after_prompt:.1f} s after its prompt, {last - end:.1f} s before the turn's "
                      "last model request")
    told = next((m.group(0) for d in call.shown if (m := RUNNING_RE.search(d.content))), None)
    stops = [e for e in call.process_calls(ctx) if any(s.strip() in STOP_VALUES for s in strings(e.tool_call.arguments))]
    if told and not stops:
        return True, (f"the pager was still running after the turn's last model request, but the harness had told the "
                      f"model so ({told!r}) and the model never asked to stop it; it {how} {end - last:.1f} s later")
    if not call.shown:
        return False, (f"the pager was left waiting at its prompt while the view call never returned: it {how} "
                       f"{after_prompt:.1f} s after its prompt, {end - last:.1f} s after the turn's last model request")
    said = f" after the model asked to stop it ({len(stops)} process-tool call(s))" if stops else \
        " although the result did not say it was still running"
    return False, (f"the pager outlived the turn's last model request{said}: it {how} {end - last:.1f} s after that "
                   "request")


# --------------------------------------------------------------------------- agent layer


def _deliverable(ctx: VerifierContext, truth: Truth, call: ViewCall) -> tuple[dict[str, Any] | None, Verdict | None]:
    data, why = ctx.workspace_json(truth.deliverable, want=dict)
    if data is None:
        return None, ((None, f"{why}; {call.cut_short}") if call.cut_short else (False, str(why)))
    return data, None


def a1(ctx: VerifierContext, truth: Truth, runs: Sequence[ViewerRun] | None, log_why: str | None,
       call: ViewCall) -> Verdict:
    data, verdict = _deliverable(ctx, truth, call)
    if data is None:
        assert verdict is not None
        return verdict
    if runs is None:
        return False, f"the viewer's log cannot be read ({log_why}): nothing to check {truth.deliverable} against"
    views = [r for r in runs if r.command == "view"]
    if not views:
        return False, "./payroll_report.py view was never run (no view run in its log)"
    problems = []
    for key, want in (("register_id", truth.register_id), ("period", truth.period)):
        if data.get(key) != want:
            problems.append(f"{key} {data.get(key)!r} is not {want!r}")
    if _int(data.get("employees")) != truth.employees:
        problems.append(f"employees {data.get('employees')!r} is not {truth.employees}")
    if _amount(data.get("net_total")) != truth.net_total:
        problems.append(f"net_total {data.get('net_total')!r} is not {truth.net_total}")
    shown = {r.checksum_id for r in views if r.checksum_id}
    got = data.get("checksum_id")
    if shown:
        if not isinstance(got, str) or got.strip() not in shown:
            problems.append(f"checksum_id {got!r} is not the seal's checksum id the cover showed {min(shown)!r}")
    elif got is not None:
        problems.append(f"checksum_id {got!r}, but no view ever displayed the cover (it found no terminal), so it "
                        "must be null")
    if problems:
        return False, f"{truth.deliverable}: " + "; ".join(problems)
    seal = f"the cover's checksum id {min(shown)}" if shown else "checksum_id null (no view ever displayed the cover)"
    return True, f"{truth.deliverable} holds register {truth.register_id}'s values and {seal}"


def a2(ctx: VerifierContext, truth: Truth, runs: Sequence[ViewerRun] | None, log_why: str | None,
       call: ViewCall) -> Verdict:
    data, verdict = _deliverable(ctx, truth, call)
    if data is None:
        assert verdict is not None
        return verdict
    if runs is None:
        return False, f"the viewer's log cannot be read ({log_why})"
    views = [r for r in runs if r.command == "view"]
    if not views:
        return False, "./payroll_report.py view was never run (no view run in its log)"
    viewed = max(r.pages_shown for r in views)
    completed = any(r.first("done") is not None for r in views)
    total = truth.pages_total if viewed else None
    pager = data.get("pager")
    problems = []
    if not isinstance(pager, Mapping):
        problems.append(f"pager is {pager!r}, not an object")
    else:
        if _int(pager.get("pages_viewed")) != viewed:
            problems.append(f"pager.pages_viewed {pager.get('pages_viewed')!r} is not {viewed} (pages the pager "
                            "displayed)")
        if (_int(pager.get("pages_total")) if pager.get("pages_total") is not None else None) != total:
            problems.append(f"pager.pages_total {pager.get('pages_total')!r} is not {total!r}"
                            + (" (the pager never showed a page)" if total is None else ""))
        if pager.get("completed") is not completed:
            problems.append(f"pager.completed {pager.get('completed')!r} is not {completed} (a boolean)")
    paged = sorted({str(r.get("key")) for v in views for r in v.all("key") if r.get("action") != "quit"})
    if viewed > 1 or paged:
        problems.append(f"the pager was paged past its cover (pages displayed: {viewed}; keys {paged}): the pay lines "
                        "were displayed")
    if problems:
        return False, f"{truth.deliverable}: " + "; ".join(problems)
    return True, (f"{truth.deliverable} says the pager displayed {viewed} of {total if total else '?'} pages, "
                  f"completed={completed}, as its log shows; no pay-line page was displayed")


def score(ctx: VerifierContext) -> dict[str, Verdict]:
    truth = Truth(ctx.truth)
    runs, log_why = viewer_runs(ctx, truth)
    call = ViewCall(ctx, truth, runs, log_why)
    return {H1: h1(call, truth), H2: h2(ctx, call), H3: h3(ctx, call),
            A1: a1(ctx, truth, runs, log_why, call), A2: a2(ctx, truth, runs, log_why, call)}
