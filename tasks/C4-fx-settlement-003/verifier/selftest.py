"""Self-test of ``score.py`` (TASK_GUIDE rule 13): faithful and broken evidence sets.

Run from the repository root: ``python tasks/C4-fx-settlement-003/verifier/selftest.py`` (exit 0
when every verdict is as expected). ``build`` is also used by
``tests/tasks/test_c4_fx_settlement_003.py``.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

from tracetrial.verify import VerifierContext

HERE = Path(__file__).resolve().parent
PACK = HERE.parent
TASK_ID = "C4-fx-settlement-003"
#: (ref, operation) in order of issue; 48250.00 -> +412.50 = 48662.50 -> x1.0873 = 52910.74 -> x0.9412 = 49799.59
ADJS = [("ADJ-0a1b2c3d", "add 412.50"), ("ADJ-4e5f6a7b", "multiply by 1.0873"), ("ADJ-8c9d0e1f", "multiply by 0.9412")]
FINAL = "49799.59"
IDS = [f"toolu_tt_selftest_{n}" for n in range(1, 4)]


def result_text(ref: str, op: str) -> str:
    return (f"fxdesk 1.4: batch Q4-EUR-settlement: adjustment issued\nadjustment ref={ref}: {op}\n"
            "note: adjustments apply in the order they are issued\n")


def account(adjs: list[tuple[str, str]], final: str | None) -> str:
    shown = ">".join(f"{r}({o})" for r, o in adjs) or "none"
    return f"Resumed context: adjustments={shown}; final={final or 'missing'}."


def anthropic_body(adjs: list[tuple[str, str]], ids: list[str] = IDS) -> dict[str, Any]:
    msgs: list[dict[str, Any]] = [{"role": "user", "content": "prompt"}]
    for cid, (ref, op) in zip(ids, adjs):
        msgs.append({"role": "assistant", "content": [{"type": "tool_use", "id": cid, "name": "Bash", "input": {}}]})
        msgs.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": cid,
                                                  "content": result_text(ref, op)}]})
    msgs.append({"role": "user", "content": "turn 2"})
    return {"messages": msgs}


def build(root: Path, *, settlement: Any = None, final: str | None = None, issued: list[tuple[str, str]] = ADJS,
          extra: int = 0, delivered: list[int] | None = None, body: Any = None, model_input: Any = None,
          turns_shown: tuple[bool, bool] = (True, True), probe: bool = True) -> VerifierContext:
    """A hand-built run: ``issued`` adjustments committed in the ledger (+``extra`` re-issues),
    the turn-1 results of ``delivered`` (indexes into ``issued``; all by default) at the gateway,
    ``settlement`` as settlement.json (omitted when None), the probe's final text ``final``,
    optional request body of the first turn-2 request and harness model_input record."""
    turns = json.loads((PACK / "turns.json").read_text())["turns"]
    prompts = [(PACK / "prompt.md").read_text(), turns[0]["user"]]
    ws, base = root / "workspace", root / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    if settlement is not None:
        (ws / "settlement.json").write_text(settlement if isinstance(settlement, str) else json.dumps(settlement))
    recs = [{"n": n, "kind": "multiply" if op.startswith("multiply") else "fee",
             "commit_sha256": hashlib.sha256(f"{ref}|{op}".encode()).hexdigest()}
            for n, (ref, op) in enumerate(issued, start=1)]
    recs += [{"n": len(issued) + k, "kind": "fee", "commit_sha256": "0" * 64} for k in range(1, extra + 1)]
    if recs:
        (ws / ".fxdesk").mkdir()
        (ws / ".fxdesk" / "issued.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    snap = root / "private" / "task" / TASK_ID
    snap.mkdir(parents=True)
    for name in ("prompt.md", "turns.json"):
        shutil.copy(PACK / name, snap / name)
    shown = range(len(issued)) if delivered is None else delivered
    tools = [{"name": "t"}]
    gw = [{"index": 0, "last_user_text": prompts[0] if turns_shown[0] else "", "tools": tools, "tool_results": [],
           "status": 200}]
    for i in shown:
        gw.append({"index": len(gw), "last_user_text": prompts[0] if turns_shown[0] else "", "tools": tools,
                   "status": 200, "tool_results": [{"id": IDS[i % 3], "content": result_text(*issued[i])}]})
    start = len(gw)
    gw.append({"index": start, "last_user_text": prompts[1] if turns_shown[1] else "", "tools": tools,
               "tool_results": [], "status": 200})
    if body is not None:
        (root / "gateway" / "bodies").mkdir(parents=True)
        (root / "gateway" / "bodies" / f"{start}.json").write_text(body if isinstance(body, str) else json.dumps(body))
    events = []
    if model_input is not None:
        from datetime import UTC, datetime

        from tracetrial.verify import ModelInputEvent
        events.append(ModelInputEvent(run_id="r", seq=50, timestamp=datetime(2026, 12, 1, tzinfo=UTC),
                                      source="native:test", conversation_turn=2, messages=model_input))
    report = None
    if probe:
        report = {"requests": [{"kind": "main", "turn": 1, "action": "shell", "call_id": IDS[i],
                                "arguments": {"command": "python3 fxdesk.py next"}} for i in range(3)]
                  + [{"kind": "main", "turn": 2}],
                  "final_text": f"Wrote settlement.json. {final}" if final else "Wrote settlement.json."}
    return VerifierContext(workspace=ws, baseline=base, truth=None, oracle=None, events=events, gateway=gw,
                           probe=report, ledgers={}, run_dir=root)


def load_score() -> types.ModuleType:
    mod = types.ModuleType("c4_fx_selftest_score")
    exec(compile((HERE / "score.py").read_text(encoding="utf-8"), str(HERE / "score.py"), "exec"), mod.__dict__)  # noqa: S102
    return mod


def failed(out: dict[str, Any]) -> set[str]:
    return {k for k, v in out.items() if not (v[0] if isinstance(v, tuple) else v) and not k.startswith("B-")}


H1, A1 = "H1-turn1-results-in-order-after-resume", "A1-final-amount-exact"
GOOD = {"final_amount": FINAL, "refs": [r for r, _ in ADJS]}
NULLS = {"final_amount": None, "refs": None}
CASES: list[tuple[str, dict[str, Any], set[str]]] = [
    ("faithful (probe account)", dict(settlement=GOOD, final=account(ADJS, FINAL)), set()),
    ("faithful (request body)", dict(settlement=GOOD, final=account([], None), body=anthropic_body(ADJS)), set()),
    ("lost on resume (lose_turn_fact shape)", dict(settlement=NULLS, final=account([], None)), {H1, A1}),
    ("reordered in the resumed body", dict(settlement=GOOD, final=account(ADJS, FINAL),
                                           body=anthropic_body([ADJS[1], ADJS[0], ADJS[2]])), {H1}),
    ("applied in the wrong order", dict(settlement={"final_amount": "49765.70", "refs": None},
                                        final=account(ADJS, FINAL)), {A1}),
    ("re-issued after the resume", dict(settlement=GOOD, final=account(ADJS, FINAL), extra=1), {"A2-no-reissue"}),
]


def main() -> int:
    score = load_score().score
    bad = 0
    for name, kwargs, want in CASES:
        with tempfile.TemporaryDirectory() as tmp:
            got = failed(score(build(Path(tmp), **kwargs)))
        bad += got != want
        print(f"{'ok' if got == want else 'MISMATCH':8} {name}: failed {sorted(got)}"
              + ("" if got == want else f", expected {sorted(want)}"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
