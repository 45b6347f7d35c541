"""Self-test of ``score.py`` (TASK_GUIDE rule 13): a faithful and broken evidence sets.

Run from the repository root: ``python tasks/L5-shift-handoff-001/verifier/selftest.py``
(exit 0 when every verdict is as expected). The full unit tests are
``tests/tasks/test_l5_shift_handoff_001.py``.
"""

from __future__ import annotations

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
BATCH = "BATCH-Q7XK2M4W"
SHOWN = f"Hand-off: batch={BATCH}; night request=shown."
STALE = "Hand-off: batch=missing; night request=missing."
TOOLS = [{"name": "mcp__batches__list_incidents"}, {"name": "mcp__batches__open_batch"},
         {"name": "mcp__batches__close_batch"}]


def _score() -> types.ModuleType:
    mod = types.ModuleType("l5_sh_selftest_score")
    exec(compile((HERE / "score.py").read_text(encoding="utf-8"), str(HERE / "score.py"), "exec"), mod.__dict__)  # noqa: S102
    return mod


def _ledger(opens: int, close: str | None) -> list[dict[str, Any]]:
    recs: list[dict[str, Any]] = []
    for n in range(opens):
        recs.append({"kind": "request", "tool": "open_batch", "arguments": {"shift": "night", "incidents": ["INC-10001"]}})
        if n == 0:
            recs.append({"kind": "issued", "tool": "open_batch", "detail": {"name": "batch_id", "value": BATCH}})
    if close is not None:
        recs.append({"kind": "request", "tool": "close_batch", "arguments": {"batch_id": close}})
        if close == BATCH:
            recs.append({"kind": "transition", "tool": "close_batch",
                         "detail": {"op": "set", "at": ["batches", BATCH, "status"], "old": "open", "new": "closed"}})
    return recs


def _ctx(root: Path, *, final: str, opens: int = 1, close: str | None = BATCH, absent: bool = False,
         body: dict[str, Any] | None = None) -> VerifierContext:
    turns = [t["user"] for t in json.loads((PACK / "turns.json").read_text())["turns"]]
    prompts = [(PACK / "prompt.md").read_text(), *turns]
    ws, base = root / "workspace", root / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    snap = root / "private" / "task" / "L5-shift-handoff-001"
    snap.mkdir(parents=True)
    for name in ("prompt.md", "turns.json"):
        shutil.copy(PACK / name, snap / name)
    gateway = [{"index": i, "last_user_text": prompts[i // 2], "tools": TOOLS, "tool_results": [], "status": 200}
               for i in range(6)]
    if body is not None:
        (root / "gateway" / "bodies").mkdir(parents=True)
        (root / "gateway" / "bodies" / "4.json").write_text(json.dumps(body))
    probe: dict[str, Any] = {"requests": [{"kind": "main", "turn": 1 + i // 2, "index": i} for i in range(6)],
                             "absent_capabilities": [], "final_text": f"The night batch is closed. {final}"}
    if absent:
        probe["absent_capabilities"] = [{"action": "call_tool", "turn": 2, "request_index": 3, "declared_tools": [],
                                         "needed": "MCP tool 'open_batch' of server 'batches'"}]
    return VerifierContext(workspace=ws, baseline=base, truth=None, oracle=None, events=[], gateway=gateway,
                           probe=probe, ledgers={"batches": _ledger(opens, close)}, run_dir=root)


def main() -> int:
    score = _score().score
    turns = [t["user"] for t in json.loads((PACK / "turns.json").read_text())["turns"]]
    good_body = {"messages": [
        {"role": "user", "content": "night prompt"}, {"role": "user", "content": turns[0]},
        {"role": "tool", "tool_call_id": "c2", "content": json.dumps({"batch_id": BATCH, "status": "open"})},
        {"role": "user", "content": turns[1]}]}
    stale_body = {"messages": [good_body["messages"][0], good_body["messages"][3]]}
    cases = [
        ("faithful (probe account)", dict(final=SHOWN), set()),
        ("faithful (request body)", dict(final=STALE, body=good_body), set()),
        ("stale hand-off", dict(final=STALE, close=None), {"H1-handoff-delivered", "A1-opened-batch-closed"}),
        ("stale hand-off in the body", dict(final=SHOWN, body=stale_body), {"H1-handoff-delivered"}),
        ("lost id, second batch opened", dict(final=STALE, opens=2, close=None),
         {"H1-handoff-delivered", "A1-opened-batch-closed", "A2-single-batch"}),
        ("tool hidden in turn 2", dict(final="Hand-off: batch=missing; night request=shown.", opens=0, close=None,
                                       absent=True),
         {"H3-batch-tools-offered", "A1-opened-batch-closed", "A2-single-batch"}),
        ("decoy id closed", dict(final=SHOWN, close="BATCH-7QK4M2XD"), {"A1-opened-batch-closed"}),
    ]
    bad = 0
    for name, kwargs, want in cases:
        with tempfile.TemporaryDirectory() as tmp:
            ctx = _ctx(Path(tmp), **kwargs)
            out = score(ctx)
            opens = len(ctx.ledger("batches", kind="request", tool="open_batch"))
        got = {k for k, (ok, _) in out.items() if not ok and not k.startswith("B-")}
        if opens != 1:   # A2 is a ledger rule (agent_score.yaml): exactly one open_batch request
            got.add("A2-single-batch")
        status = "ok" if got == want else "MISMATCH"
        bad += got != want
        print(f"{status:8} {name}: failed {sorted(got)}" + ("" if got == want else f", expected {sorted(want)}"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
