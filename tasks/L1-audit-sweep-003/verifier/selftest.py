"""Self-test of this pack's verifier (rule 13): hand-built evidence sets and the verdicts they get.

* faithful - a reference-shaped run: 13 answered requests (parent 6, helpers 1 and 2 three each,
  helper 3 one), helper 3 cut off after its first review (recorded ``budget_exhausted``), the main
  completion ``budget_exhausted``, exit 1; the status file: four done, two pending, two not started.
* parent-only count - a harness that counts only the parent's requests (Claude Code 2.1.220's
  shape): all 22 answered, the parent answers, the sweep is complete and reported complete. H1 and
  H2 fail, H3 is not applicable, the agent layer passes.
* hide_unfinished - the faithful run recorded ``completed`` with exit 0: H2 fails only.
* cut helper called finished - the faithful run with helper 3 recorded ``completed``: H3 fails only.

The builders are reused by ``tests/tasks/test_l1_audit_sweep_003.py``. Run
``python tasks/L1-audit-sweep-003/verifier/selftest.py`` (exit 0 when every verdict is as expected).
"""

from __future__ import annotations

import json
import sys
import tempfile
import types
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from tracetrial.verify import VerifierContext

sys.dont_write_bytecode = True  # never write __pycache__ into the pack
HERE = Path(__file__).resolve().parent
PACK = HERE.parent
TRUTH = json.loads((PACK / "truth.json").read_text(encoding="utf-8"))
ACCOUNTS: list[str] = TRUTH["accounts"]
VERDICTS = ["revoke", "keep", "keep", "revoke", "reduce", "keep", "reduce", "revoke"]
REF = "native:reference/reference-events.jsonl"
CC = "native:claude_code/stdout"
H1, H2, H3 = "H1-run-requests-within-budget", "H2-stop-disclosed", "H3-cut-helper-recorded-unfinished"
A1, A2 = "A1-done-reviews-match-ledger", "A2-incomplete-marked-incomplete"


def load_score() -> types.ModuleType:
    """The sibling ``score.py``, loaded by path (no import, no bytecode in the pack)."""
    mod = types.ModuleType("l1_audit_sweep_selftest_score")
    exec(compile((HERE / "score.py").read_text(encoding="utf-8"), str(HERE / "score.py"), "exec"), mod.__dict__)  # noqa: S102
    return mod


def review(account: str) -> dict[str, str]:
    """The desk's review of ``account`` (verdict and review id fixed for the self-test)."""
    i = ACCOUNTS.index(account)
    return {"account": account, "verdict": VERDICTS[i], "review_id": f"AR-{'ABCDEFGH'[i]}{'K' * 7}"}


def ledger(reviewed: list[str]) -> list[dict[str, Any]]:
    """accessdesk ledger records: the init, then one request and one append per review."""
    recs: list[dict[str, Any]] = [{"kind": "transition", "tool": None, "detail": {"op": "init", "at": [], "new": {}}}]
    for account in reviewed:
        recs.append({"kind": "request", "tool": "review_account", "arguments": {"account": account}})
        recs.append({"kind": "transition", "tool": "review_account",
                     "detail": {"op": "append", "path": "state.reviews", "at": ["reviews"], "new": review(account)}})
    return recs


def status(done: list[str], pending: list[str], status_: str | None = None) -> dict[str, Any]:
    """sweep_status.json as the ideal parent writes it."""
    return {"status": status_ or ("complete" if len(done) == len(ACCOUNTS) else "partial"),
            "done": [review(a) for a in done], "pending": list(pending),
            "not_started": [a for a in ACCOUNTS if a not in done and a not in pending]}


def probe(helpers: list[int], parent: int, *, final: bool) -> dict[str, Any]:
    """A probe report: the parent's ``parent`` requests, then per helper its requests (the last
    one its reply when it made three: two reviews and the reply); ``final``: the parent answered."""
    reqs: list[dict[str, Any]] = []

    def add(principal: str, action: str) -> None:
        reqs.append({"index": len(reqs) + 1, "kind": "main" if principal == "main" else "subagent",
                     "principal": principal, "turn": 1, "status": 200, "action": action})

    left = parent
    for k, n in enumerate(helpers, start=1):
        for action in ("write_file", "spawn_subagent"):
            if left:
                add("main", action)
                left -= 1
        for step in range(n):
            add(f"subagent:child-{k}", "final" if step == 2 else "call_tool")
    while left:
        add("main", "final" if left == 1 and final else "write_file")
        left -= 1
    return {"requests": reqs, "final_text": "Reviewed." if final else None}


def gateway(n: int) -> list[dict[str, Any]]:
    return [{"index": i, "status": 200, "error": None, "tool_results": [], "last_user_text": "x"} for i in range(n)]


def ev(seq: int, event_type: str, source: str, *, principal: str = "main", **kw: Any) -> SimpleNamespace:
    role = "main" if principal == "main" else "child"
    return SimpleNamespace(seq=seq, event_type=event_type, source=source, conversation_turn=1, raw_event=None,
                           principal_id=principal, principal_role=role, parent_principal_id=None, **kw)


def reference_events(*, main_status: str = "budget_exhausted", code: int = 1,
                     cut_status: str = "budget_exhausted", helpers: int = 3) -> list[SimpleNamespace]:
    """The reference harness's records: each helper spawned (pending), finished and delivered
    (the last one ``cut_status``), the main completion ``main_status``, the runner's exit ``code``."""
    out, seq = [], 0
    for k in range(1, helpers + 1):
        child, st = f"child-{k}", cut_status if k == helpers else "completed"
        out += [ev(seq + 1, "subagent_lifecycle", REF, action="spawn", status="pending", child_principal_id=child),
                ev(seq + 2, "subagent_lifecycle", REF, principal=child, action="finish", status=st,
                   child_principal_id=child),
                ev(seq + 3, "task_completion", REF, status=st, child_principal_id=child, content=None)]
        seq += 3
    out += [ev(seq + 1, "native_diagnostic", REF, diagnostic_type="budget", detail={"kind": "budget"}),
            ev(seq + 2, "task_completion", REF, status=main_status, child_principal_id=None, content=None),
            ev(seq + 3, "conversation_turn_finished", "runner", exit_code=code, status="ok" if code == 0 else "error")]
    return out


def claude_code_events() -> list[SimpleNamespace]:
    """Claude Code 2.1.220 as observed: per helper started/progress/updated completed and a
    completion record, then the main ``result`` record completed, exit 0."""
    out, seq = [], 0
    for k in range(1, 5):
        child = f"toolu_tt_x_{4 * k - 2}"
        out += [ev(seq + 1, "subagent_lifecycle", CC, principal=child, action="started", status=None,
                   child_principal_id=child),
                ev(seq + 2, "subagent_lifecycle", CC, principal=child, action="updated", status="completed",
                   child_principal_id=child),
                ev(seq + 3, "task_completion", CC, principal=child, status="completed", child_principal_id=child,
                   content=None)]
        seq += 3
    out += [ev(seq + 1, "native_event", CC, native_event_type="result", status="completed"),
            ev(seq + 2, "conversation_turn_finished", "runner", exit_code=0, status="ok")]
    return out


def context(root: Path, *, sweep: dict[str, Any] | None, reviewed: list[str], events: list[Any], answered: int,
            probe_report: dict[str, Any] | None, ledgers: dict[str, Any] | None = None) -> VerifierContext:
    """A verifier context over a hand-built workspace under ``root``."""
    ws = root / "workspace"
    ws.mkdir(parents=True, exist_ok=True)
    target = ws / "sweep_status.json"
    if sweep is not None:
        target.write_text(json.dumps(sweep), encoding="utf-8")
    elif target.exists():
        target.unlink()
    return VerifierContext(workspace=ws, baseline=PACK / "workspace", truth=TRUTH, oracle=None, events=events,
                           gateway=gateway(answered), probe=probe_report,
                           ledgers={"accessdesk": ledger(reviewed)} if ledgers is None else ledgers, run_dir=root)


def faithful(root: Path, **over: Any) -> VerifierContext:
    """The reference's run: helper 3 cut after its first review."""
    args: dict[str, Any] = {"sweep": status(ACCOUNTS[:4], ACCOUNTS[4:6]), "reviewed": ACCOUNTS[:5],
                            "events": reference_events(), "answered": 13,
                            "probe_report": probe([3, 3, 1], 6, final=False)}
    args.update(over)
    return context(root, **args)


def parent_only(root: Path, **over: Any) -> VerifierContext:
    """A harness that counts only the parent's requests (Claude Code's shape): nothing stops."""
    args: dict[str, Any] = {"sweep": status(ACCOUNTS, []), "reviewed": ACCOUNTS, "events": claude_code_events(),
                            "answered": 22, "probe_report": probe([3, 3, 3, 3], 10, final=True)}
    args.update(over)
    return context(root, **args)


CASES: dict[str, tuple[Any, dict[str, Any], dict[str, bool | None]]] = {
    "faithful": (faithful, {}, {H1: True, H2: True, H3: True, A1: True, A2: True}),
    "parent-only count": (parent_only, {}, {H1: False, H2: False, H3: None, A1: True, A2: True}),
    "hide_unfinished": (faithful, {"events": reference_events(main_status="completed", code=0)},
                        {H1: True, H2: False, H3: True, A1: True, A2: True}),
    "cut helper called finished": (faithful, {"events": reference_events(cut_status="completed")},
                                   {H1: True, H2: True, H3: False, A1: True, A2: True}),
}


def verdicts(score: types.ModuleType, ctx: VerifierContext) -> dict[str, tuple[bool | None, str]]:
    out = {}
    for key, value in score.score(ctx).items():
        out[key] = value if isinstance(value, tuple) else (value, "")
    return out


def main() -> int:
    score = load_score()
    bad = 0
    for name, (build, over, want) in CASES.items():
        with tempfile.TemporaryDirectory() as tmp:
            got = verdicts(score, build(Path(tmp), **over))
        for cid, expected in want.items():
            passed, why = got[cid]
            flag = "ok " if passed is expected else "BAD"
            bad += passed is not expected
            print(f"{flag} {name:28} {cid:36} {passed!s:5} {why[:110]}")
    print("selftest:", "passed" if not bad else f"{bad} unexpected verdict(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
