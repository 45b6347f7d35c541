"""Self-test of ``score.py`` (TASK_GUIDE rule 13): faithful and broken evidence sets.

Faithful: the probe's three model calls (count, write, final) answered at the gateway, reported
by the reference harness (per-call usage records and a ``task_completion`` with ``model_calls``)
or by Claude Code (a turn aggregate usage record and a native ``result`` with ``num_turns``, one
request refused at the boundary not counted); the assembler's gateway-sourced usage records are
present and never count as the harness's report. Broken: the misreport_model_calls shape (one
call fewer), misreported output tokens, Codex's report (usage but no call count: not reported)
and wrong counts in counts.json. Unscored: the gateway recorded an answered request without
usage (the measured total is incomplete: H1 is neither a pass nor a harness fail).

Run from the repository root: ``python tasks/V4-inbox-counts-001/verifier/selftest.py`` (exit 0
when every verdict is as expected). The full unit tests are ``tests/tasks/test_v4_inbox_counts_001.py``.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import types
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tracetrial.verify import NativeEvent, TokenUsage, TokenUsageEvent
from tracetrial.verify import TaskCompletionEvent, VerifierContext

HERE = Path(__file__).resolve().parent
PACK = HERE.parent
TRUTH = json.loads((PACK / "truth.json").read_text(encoding="utf-8"))
GOOD = {"csv_files": TRUTH["csv_files"], "data_rows": TRUTH["data_rows"]}
T0 = datetime(2026, 11, 30, tzinfo=UTC)
CALLS = [(900, 70), (1050, 20), (1150, 12)]  # (input, output) of the count, write and final requests
TIN, TOUT = sum(i for i, _ in CALLS), sum(o for _, o in CALLS)
H1, H2 = "H1-usage-matches-gateway", "H2-model-calls-match-gateway"
A1, A2 = "A1-csv-file-count", "A2-data-row-count"


def _score() -> types.ModuleType:
    mod = types.ModuleType("v4_inbox_selftest_score")
    exec(compile((HERE / "score.py").read_text(encoding="utf-8"), str(HERE / "score.py"), "exec"), mod.__dict__)  # noqa: S102
    return mod


def _usage(seq: int, tin: int, tout: int, scope: str, source: str, **kw: Any) -> TokenUsageEvent:
    return TokenUsageEvent(seq=seq, timestamp=T0, run_id="r", source=source, conversation_turn=1, principal_id="main",
                           usage=TokenUsage(input_tokens=tin, output_tokens=tout, **kw), usage_scope=scope,
                           usage_aggregate=scope != "call")


def _events(harness: str, *, model_calls: int = len(CALLS), out_tokens: int = TOUT) -> list[Any]:
    """What each harness reports, plus the gateway-sourced usage the assembler adds (apparatus)."""
    evs: list[Any] = [_usage(50 + i, tin, tout, "call", "gateway") for i, (tin, tout) in enumerate(CALLS)]
    if harness == "reference":
        evs += [_usage(i + 1, tin, tout, "call", "native:reference") for i, (tin, tout) in enumerate(CALLS[:-1])]
        evs.append(_usage(3, CALLS[-1][0], CALLS[-1][1] + out_tokens - TOUT, "call", "native:reference"))
        evs.append(TaskCompletionEvent(seq=10, timestamp=T0, run_id="r", source="native:reference", conversation_turn=1,
                                       principal_id="main", status="completed",
                                       content={"status": "completed", "model_calls": model_calls, "tool_calls": 2}))
    elif harness == "claude":
        raw = {"type": "result", "subtype": "success", "num_turns": model_calls,
               "usage": {"input_tokens": TIN, "output_tokens": out_tokens, "cache_read_input_tokens": 0,
                         "cache_creation_input_tokens": 0}}
        evs.append(_usage(1, TIN, out_tokens, "turn", "native:claude_code/stdout", cache_read_tokens=0,
                          cache_write_tokens=0).model_copy(update={"raw_event": raw}))
        evs.append(NativeEvent(seq=2, timestamp=T0, run_id="r", source="native:claude_code/stdout", conversation_turn=1,
                               principal_id="main", native_event_type="result", status="completed", raw_event=raw))
    else:  # codex: a run usage record, no model-call count anywhere
        evs.append(_usage(1, TIN, out_tokens, "run", "native:codex/stdout"))
    return evs


def _ctx(root: Path, harness: str = "reference", *, counts: dict[str, Any] = GOOD, refused: int = 0,
         gap: bool = False, **report: Any) -> VerifierContext:
    """``gap``: the gateway recorded no usage for the second answered request."""
    ws, base = root / "workspace", root / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    (ws / "counts.json").write_text(json.dumps(counts) + "\n")
    gateway: list[dict[str, Any]] = [{"index": i, "status": 501, "error": "Unsupported method", "usage": None,
                                      "tool_results": []} for i in range(refused)]
    for tin, tout in CALLS:
        gateway.append({"index": len(gateway), "status": 200, "error": None, "tool_results": [],
                        "usage": {"input_tokens": tin, "output_tokens": tout, "cache_read_tokens": None,
                                  "cache_write_tokens": None, "reasoning_tokens": None}})
    if gap:
        gateway[refused + 1]["usage"] = None
    return VerifierContext(workspace=ws, baseline=base, truth=TRUTH, oracle=None, events=_events(harness, **report),
                           gateway=gateway, probe=None, ledgers={}, run_dir=root)


#: (name, _ctx arguments, criteria expected to fail); UNSCORED: the cases' criteria expected unscored
CASES: list[tuple[str, dict[str, Any], set[str]]] = [
    ("faithful (reference: per-call usage, model_calls)", {}, set()),
    ("gateway recorded an answered request without usage", {"gap": True}, set()),
    ("faithful (Claude Code: turn usage, num_turns, 1 refused)", {"harness": "claude", "refused": 1}, set()),
    ("misreport_model_calls: one call fewer", {"model_calls": len(CALLS) - 1}, {H2}),
    ("Claude Code output tokens misreported", {"harness": "claude", "out_tokens": TOUT - 40}, {H1}),
    ("reference usage loses tokens", {"out_tokens": TOUT - 12}, {H1}),
    ("Codex: no call count reported", {"harness": "codex"}, {H2}),
    ("decoy .csv.bak counted", {"counts": {"csv_files": 6, "data_rows": 53}}, {A1, A2}),
    ("blank trailing line counted", {"counts": {"csv_files": 5, "data_rows": 45}}, {A2}),
]


UNSCORED = {"gateway recorded an answered request without usage": {H1}}


def main() -> int:
    score = _score().score
    bad = 0
    for name, kwargs, want in CASES:
        with tempfile.TemporaryDirectory() as tmp:
            out = score(_ctx(Path(tmp), **kwargs))
        verdicts = {k: v if isinstance(v, tuple) else (v, "") for k, v in out.items()}
        got = {k for k, v in verdicts.items() if v[0] is False}
        none = {k for k, v in verdicts.items() if v[0] is None}
        ok = got == want and none == UNSCORED.get(name, set()) and set(out) == {H1, H2, A1, A2}
        bad += not ok
        print(f"{'ok' if ok else 'BAD':3} {name}: failed {sorted(got)}, unscored {sorted(none)}"
              + ("" if ok else f" (expected {sorted(want)}, unscored {sorted(UNSCORED.get(name, set()))})"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
