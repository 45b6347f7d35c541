"""Self-test of ``score.py`` (TASK_GUIDE rule 13): faithful and broken evidence sets.

Run from the repository root: ``python tasks/C2-tariff-review-003/verifier/selftest.py`` (exit 0
when every verdict is as expected). The full unit tests are
``tests/tasks/test_c2_tariff_review_003.py``.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import tempfile
import types
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

from tracetrial.verify import VerifierContext

HERE = Path(__file__).resolve().parent
PACK = HERE.parent
REF, RATE, VALID = "TRF-4QK7ZP2M", "0.3725", "2026-12-06"
LOOKUP = (f"tariff-desk 2.3: carrier=nordline-cargo\ntariff_ref: {REF}\nrate_eur_per_kg: {RATE}\n"
          f"valid_until: {VALID}\n")
SHOWN = f"Terms: turn2_start=shown; after_compaction=shown; ref={REF}; rate={RATE}; valid_until={VALID}."
CUT = "Terms: turn2_start=shown; after_compaction=missing; ref=missing; rate=missing; valid_until=missing."
GONE = "Terms: turn2_start=missing; after_compaction=missing; ref=missing; rate=missing; valid_until=missing."
ALL_H_A = {"H1-terms-after-compaction", "H2-compaction-recorded", "H3-user-turns-delivered",
           "H4-terms-carried-into-turn-2", "A1-charges-apply-terms", "A2-report-names-terms"}


def _score() -> types.ModuleType:
    mod = types.ModuleType("c2_tr_selftest_score")
    exec(compile((HERE / "score.py").read_text(encoding="utf-8"), str(HERE / "score.py"), "exec"), mod.__dict__)  # noqa: S102
    return mod


def _charges(priced: bool) -> str:
    lines = ["shipment_id,ship_date,weight_kg,charge_eur,status"]
    for page in (1, 2, 3):
        for line in (PACK / "workspace" / "batch" / f"page-{page}.csv").read_text().splitlines():
            if not line.startswith("SHP-"):
                continue
            sid, day, weight = line.split(",")
            if not priced:
                lines.append(f"{sid},{day},{weight},,unpriced")
            elif day <= VALID:
                charge = (Decimal(weight) * Decimal(RATE)).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
                lines.append(f"{sid},{day},{weight},{charge},contract")
            else:
                lines.append(f"{sid},{day},{weight},,expired")
    return "\n".join(lines) + "\n"


#: The probe's actions, in order, at the main agent's requests.
ACTIONS = ['shell', 'final', 'shell', 'shell', 'shell', 'write_file', 'write_file', 'final']


def _requests(kinds: list[tuple[int | None, str]]) -> list[dict[str, Any]]:
    """Probe-report requests (1-based ``index``) for ``(turn, kind)`` pairs; each main request takes the
    next of ``ACTIONS``, and a call id unless it is a final answer."""
    out: list[dict[str, Any]] = []
    actions = iter(ACTIONS)
    for i, (turn, kind) in enumerate(kinds, 1):
        req: dict[str, Any] = {"index": i, "kind": kind, "turn": turn}
        if kind == "main":
            req["action"] = next(actions)
            req["call_id"] = None if req["action"] == "final" else f"call_{i}"
        out.append(req)
    return out


def _trace(requests: list[dict[str, Any]], compaction: Any) -> list[Any]:
    """A trace in which the compaction record follows every tool call (a post-turn compaction)."""
    tools = [types.SimpleNamespace(event_type="tool", seq=n, conversation_turn=r["turn"],
                                   tool_call=types.SimpleNamespace(id=r["call_id"], native_tool_call_id=None))
             for n, r in enumerate((r for r in requests if r.get("call_id")), 1)]
    return [*tools, compaction]


def _ctx(root: Path, *, final: str, summary: bool = True, record: bool = True, priced: bool = True,
         late: bool = False) -> VerifierContext:
    ws, base = root / "workspace", root / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    snap = root / "private" / "task" / "C2-tariff-review-003"
    snap.mkdir(parents=True)
    for name in ("prompt.md", "turns.json"):
        shutil.copy(PACK / name, snap / name)
    (ws / ".desk").mkdir()
    digest = hashlib.sha256(f"tariff|{REF}|{RATE}|{VALID}".encode()).hexdigest()
    (ws / ".desk" / "lookups.jsonl").write_text(json.dumps({"carrier": "nordline-cargo", "served": True, "exit": 0,
                                                            "commitment": digest}) + "\n")
    (ws / "billing").mkdir()
    (ws / "billing" / "charges.csv").write_text(_charges(priced))
    (ws / "billing" / "report.md").write_text(f"Tariff {REF}, rate {RATE} EUR/kg, valid until {VALID}.\n" if priced
                                              else "The tariff terms are no longer visible; nothing priced.\n")
    user = [(PACK / "prompt.md").read_text(), json.loads((PACK / "turns.json").read_text())["turns"][0]["user"]]
    gateway = [{"index": 0, "status": 200, "last_user_text": user[0], "tool_results": []},
               {"index": 1, "status": 200, "last_user_text": user[0],
                "tool_results": [{"id": "call_1", "content": LOOKUP, "is_error": False}]},
               {"index": 2, "status": 200, "last_user_text": user[1], "tool_results": []}]
    summary_at: list[tuple[int | None, str]] = [(None, "compaction")] if summary else []
    kinds = [(1, "main"), (1, "main"), (2, "main"), (2, "main"), (2, "main"), *([] if late else summary_at),
             (2, "main"), (2, "main"), (2, "main"), *(summary_at if late else [])]
    requests = _requests(kinds)
    probe: dict[str, Any] = {"requests": requests, "absent_capabilities": [],
                             "final_text": f"billing/charges.csv written. {final}"}
    record_ = types.SimpleNamespace(event_type="context_compaction", native_event_type="compaction", trigger="auto",
                                    seq=19, conversation_turn=2)
    events = ([record_] if not late else _trace(requests, record_)) if record else []
    return VerifierContext(workspace=ws, baseline=base, truth=None, oracle=None, events=events, gateway=gateway,
                           probe=probe, ledgers={}, run_dir=root)


def main() -> int:
    score = _score().score
    cases = [
        ("faithful", {"final": SHOWN}, set()),
        ("silent window cut", {"final": CUT, "summary": False, "record": False, "priced": False},
         {"H1-terms-after-compaction", "H2-compaction-recorded", "A1-charges-apply-terms", "A2-report-names-terms"}),
        ("terms lost on resume", {"final": GONE, "priced": False},
         {"H4-terms-carried-into-turn-2", "A1-charges-apply-terms", "A2-report-names-terms"}),
        ("summary asked, nothing recorded", {"final": SHOWN, "record": False}, {"H2-compaction-recorded"}),
        ("summary lost the terms", {"final": CUT, "priced": False},
         {"H1-terms-after-compaction", "A1-charges-apply-terms", "A2-report-names-terms"}),
        ("no compaction needed (unscored H1/H2)", {"final": SHOWN, "summary": False, "record": False}, set()),
        ("faithful, but compacted only after the write step (H1 unscored)", {"final": SHOWN, "late": True}, set(),
         {"H1-terms-after-compaction"}),
    ]
    bad = 0
    for name, kwargs, want, *none in cases:
        with tempfile.TemporaryDirectory() as tmp:
            out = score(_ctx(Path(tmp), **kwargs))  # type: ignore[arg-type]
        got = {k for k, (ok, _) in out.items() if ok is False and k in ALL_H_A}
        off = {k for k, (ok, _) in out.items() if ok is None and k in ALL_H_A}
        good = got == want and (not none or none[0] <= off)
        status = "ok" if good else "MISMATCH"
        bad += not good
        print(f"{status:8} {name}: failed {sorted(got)}, unscored {sorted(off)}"
              + ("" if good else f", expected failed {sorted(want)}" + (f", unscored {sorted(none[0])}" if none else "")))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
