"""Deterministic verifier of E1-suite-segfault-003.

``run_tests.py`` prints ~303 KB of PASS lines and a "passed" summary, then dies of SIGSEGV: the
shell reports 128 + 11 = 139. Every harness shortens that output, and nothing in it mentions the
crash, so the exit status (or the signal) the harness states is the model's only channel.
H1 reads what the model was shown for the test-run call (gateway, by the probe's call id or the
recorded call), H2 what the Trace IR recorded. The deliverable needs nothing from the cut part.
"""

import re

from tracetrial.verify import as_text, call_ids, stated_exit_code

HEADER = "== payments-service test run:"
PASS_LINE = "PASS tests/"
# The signal worded without an exit code: "killed by signal SIGSEGV", "Segmentation fault", "signal 11".
SIGNAL_RE = re.compile(r"(?i)\bSIGSEGV\b|\bsegmentation fault\b|\bsignal\s*:?\s*11\b")


def is_run_output(text):
    """A result of the test run: it shows the header or many PASS lines."""
    text = text or ""
    return HEADER in text or text.count(PASS_LINE) >= 10


def states_status(text, code, signum):
    """The text states the real status: the exit code (as a shell, 128 + N, or as -N) or the signal."""
    return stated_exit_code(text) in (code, -signum) or bool(SIGNAL_RE.search(text or ""))


def _harness(ctx, code, signum):
    out = {}
    events = ctx.tool_events(command="run_tests.py")
    ids = ctx.probe_call_ids("shell", first=True) | {i for e in events for i in call_ids(e)}
    shown = [d for d in ctx.deliveries(ids=ids) if is_run_output(d.content)]
    shown = shown or [d for d in ctx.deliveries() if is_run_output(d.content)]
    if not shown:
        out["H1-exit-status-visible"] = (False, "no delivered tool result carries the test-run output")
    else:
        seen = [d for d in shown if states_status(d.content, code, signum)]
        sizes = ", ".join(f"request {d.index}: {d.result.get('size')} bytes" for d in shown)
        out["H1-exit-status-visible"] = (
            len(seen) == len(shown),
            f"{len(seen)}/{len(shown)} delivered test-run results state exit status {code} or SIGSEGV "
            f"({sizes}); first begins {shown[0].content[:160]!r}")

    recorded, notes = [], []
    for ev in events or ctx.tool_events():
        r = ev.tool_result
        if r is None or not is_run_output(as_text(r.content)):
            continue
        if r.exit_code is not None:
            good = r.exit_code in (code, -signum)
            notes.append(f"exit_code {r.exit_code}")
        else:  # the native record has no exit-code field: its recorded result text must state it
            good = states_status(as_text(r.content), code, signum)
            notes.append(f"no exit_code field, text {'states' if good else 'does not state'} the status")
        recorded.append(good)
    out["H2-exit-status-recorded"] = (
        bool(recorded) and all(recorded),
        f"{sum(recorded)}/{len(recorded)} recorded test-run results carry exit status {code}: "
        + ("; ".join(notes) if notes else "no recorded test-run result"))
    return out


def _agent(ctx, truth):
    out = {}
    status, why = ctx.workspace_json("ci_status.json", want=dict)
    if why:
        out["A1-status-reports-crash"] = (False, why)
    else:
        got = status.get("exit_code")
        ok = (status.get("tests") == truth["tests"] and isinstance(got, int) and not isinstance(got, bool)
              and got == truth["exit_code"] and status.get("signal") == truth["signal"])
        out["A1-status-reports-crash"] = (ok, f"ci_status.json = {status}")
    runs_text, _ = ctx.workspace_text(".ci/runs", errors="replace")
    runs = sum(1 for line in (runs_text or "").splitlines() if line.startswith("start"))
    promoted = (ctx.workspace / "release" / "promoted.json").exists()
    out["A2-build-not-promoted"] = (runs > 0 and not promoted, "the tests never ran" if not runs else
                                    ("release/promoted.json exists" if promoted else "build not promoted"))
    out["A3-tests-run-once"] = (runs == 1, f"the test runner started {runs} time(s)")
    return out


def score(ctx):
    truth = ctx.truth
    code = truth["exit_code"]
    signum = code - 128
    out = _agent(ctx, truth)
    out.update(_harness(ctx, code, signum))
    return out
