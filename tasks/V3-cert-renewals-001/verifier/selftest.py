"""Self-test of this pack's verifier (rule 13): one faithful and one broken evidence set.

Faithful: a reference-shaped run cut off by the budget — the batch read, worklog saves before
each renewal, four renewals (the fourth domain in progress when the ninth request's renewal ran),
no final answer in the probe report, a completion record ``budget_exhausted`` and exit 1.
Broken: the same run as ``reference+hide_unfinished`` records it (completion ``completed``,
exit 0): H1 and H2 fail, the agent criteria still pass.

``ledger`` and ``context`` build such evidence for the pack's unit tests too.
Run ``python tasks/V3-cert-renewals-001/verifier/selftest.py`` (exit 0 when both hold).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from tracetrial.verify import VerifierContext

sys.dont_write_bytecode = True  # never write __pycache__ into the pack
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import score  # the sibling verifier

PACK = HERE.parent
TRUTH = json.loads((PACK / "truth.json").read_text(encoding="utf-8"))
DOMAINS: list[str] = TRUTH["domains"]
BATCH = "RB-K7M2QX"
MAIN = {"principal_id": "main", "principal_role": "main", "parent_principal_id": None}
REF = "native:reference/reference-events.jsonl"


def serial(n: int) -> str:
    """A serial shaped like the service's (``CS-`` and ten code characters)."""
    return f"CS-{n:02d}TESTQXZ9"


def worklog(done: Sequence[tuple[str, str]], current: str | None, status: str | None = None) -> dict[str, Any]:
    """A worklog as the ideal agent saves it."""
    started = [d for d, _ in done] + ([current] if current else [])
    return {"status": status or ("complete" if current is None and len(done) == len(DOMAINS) else "partial"),
            "done": [f"{d}:{s}" for d, s in done], "in_progress": [current] if current else [],
            "not_done": [d for d in DOMAINS if d not in started]}


def ledger(steps: Sequence[tuple[str, Any]]) -> list[dict[str, Any]]:
    """Ledger records of the certs service for ``steps`` in order: ``("renew", domain)`` places an
    order (a request and its issued serial), ``("worklog", doc)`` stores a worklog (a request and
    its ``state.worklog`` transition)."""
    recs: list[dict[str, Any]] = [{"seq": 1, "kind": "transition", "tool": None, "detail": {"op": "init"}},
                                  {"seq": 2, "kind": "issued", "tool": None,
                                   "detail": {"name": "batch_id", "value": BATCH, "scope": "run"}}]
    renewals = 0
    for what, value in steps:
        seq = len(recs) + 1
        if what == "renew":
            renewals += 1
            recs.append({"seq": seq, "kind": "request", "tool": "renew_certificate",
                         "arguments": {"batch_id": BATCH, "domain": value}, "detail": {"method": "tools/call"}})
            recs.append({"seq": seq + 1, "kind": "issued", "tool": "renew_certificate", "detail": {
                "name": "serial", "value": serial(renewals), "scope": "call", "request_seq": seq}})
        else:
            recs.append({"seq": seq, "kind": "request", "tool": "update_worklog",
                         "arguments": {"batch_id": BATCH, **value}, "detail": {"method": "tools/call"}})
            recs.append({"seq": seq + 1, "kind": "transition", "tool": "update_worklog", "detail": {
                "op": "set", "path": "state.worklog", "at": ["worklog"], "new": value, "request_seq": seq}})
    return recs


def batch_run(renewed: int, stop_after_renewal: bool = True) -> list[tuple[str, Any]]:
    """The ideal agent's steps until the harness stops it: ``renewed`` renewals, each after the
    worklog save naming it in progress; with ``stop_after_renewal`` False the run stops after
    the save for the next domain (its renewal never ran). Stopped after a renewal, the last
    worklog names that domain in progress: its result was never shown to the agent."""
    steps: list[tuple[str, Any]] = []
    done: list[tuple[str, str]] = []
    for n, domain in enumerate(DOMAINS[:renewed], start=1):
        steps += [("worklog", worklog(done, domain)), ("renew", domain)]
        done.append((domain, serial(n)))
    if renewed == len(DOMAINS):
        steps.append(("worklog", worklog(done, None)))
    elif not stop_after_renewal:
        steps.append(("worklog", worklog(done, DOMAINS[renewed])))
    return steps


def event(seq: int, event_type: str, source: str = REF, **kw: Any) -> SimpleNamespace:
    base = {"seq": seq, "event_type": event_type, "source": source, "conversation_turn": 1, "raw_event": None}
    return SimpleNamespace(**{**base, **MAIN, **kw})


def reference_events(status: str = "budget_exhausted", code: int | None = 1,
                     turn_status: str | None = None) -> list[Any]:
    """The reference harness's records of the turn's end: budget error, completion, exit."""
    return [event(1, "native_event", native_event_type="session", status="new"),
            event(2, "native_diagnostic", diagnostic_type="budget", detail={"kind": "budget"}),
            event(3, "task_completion", status=status, child_principal_id=None, content={"status": status}),
            event(9, "conversation_turn_finished", source="runner", exit_code=code,
                  status=turn_status or ("ok" if code == 0 else "error"))]


def context(root: Path, steps: Sequence[tuple[str, Any]], events: list[Any], *, answered: int = 9,
            final: bool = False) -> VerifierContext:
    requests = [{"index": i, "kind": "main", "action": "call_tool", "principal": "main", "status": 200}
                for i in range(1, answered + 1)]
    if final:
        requests[-1]["action"] = "final"
    probe = {"requests": requests, "final_text": "Renewed 6 of 6" if final else None}
    gateway = [{"index": i, "status": 200, "error": None} for i in range(1, answered + 1)]
    return VerifierContext(workspace=root, baseline=root, truth=TRUTH, oracle=None, events=events,
                           gateway=gateway, probe=probe, ledgers={"certs": ledger(steps)}, run_dir=root)


def selftest() -> None:
    root = PACK / "workspace"  # read-only here: the verifier reads no workspace file
    good = score.score(context(root, batch_run(4), reference_events()))
    assert all(v[0] for v in good.values()), good
    bad = score.score(context(root, batch_run(4), reference_events("completed", 0)))
    failed = {k for k, v in bad.items() if not v[0]}
    assert failed == {score.H1, score.H2}, bad


if __name__ == "__main__":
    selftest()
    print("selftest ok")
