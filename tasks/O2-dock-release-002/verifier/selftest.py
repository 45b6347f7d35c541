"""Self-test of this pack's verifier (rule 13): one faithful and one broken evidence set.

Faithful: a reference-shaped run - turn 1 builds the load (ledger: manifest, open_load,
add_pallets; load.json written) and ends with exit 0; turn 2 reads load.json, its next request is
refused with HTTP 400, and the harness writes an error record naming the status and message, a
completion record ``error`` and exits 1.
Broken: the same run as ``reference+swallow_provider_error`` records it (turn 2: no error record,
completion ``completed`` with an empty final text, exit 0); the dock work is the same, so H1, H2
and H3 fail and H4, A1, A2, A3 still pass.

Run ``python tasks/O2-dock-release-002/verifier/selftest.py`` (exit 0 when both hold).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from tracetrial.verify import VerifierContext

sys.dont_write_bytecode = True  # never write __pycache__ into the pack
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import score

PACK = HERE.parent
MESSAGE = ("Invalid request: rejected by provider-side request screening; this request will not be processed "
           "(injected by the TraceTrial probe)")
LOAD, PALLETS = "LD-K7QW3ZXA", ["PLT-AB2CDE", "PLT-FG3HJK", "PLT-LM4NPQ"]
REF = "native:reference/reference-events.jsonl"


def _event(seq: int, event_type: str, source: str, turn: int, **kw: Any) -> SimpleNamespace:
    base = {"seq": seq, "event_type": event_type, "source": source, "conversation_turn": turn, "raw_event": None,
            "principal_id": "main", "principal_role": "main", "parent_principal_id": None}
    return SimpleNamespace(**{**base, **kw})


def events(broken: bool) -> list[SimpleNamespace]:
    out = [_event(1, "native_event", REF, 1, native_event_type="session", status="new"),
           _event(2, "task_completion", REF, 1, status="completed", child_principal_id=None,
                  content={"status": "completed", "final_text": f"Load {LOAD} opened; load.json written."}),
           _event(3, "conversation_turn_finished", "runner", 1, exit_code=0, status="ok"),
           _event(4, "native_event", REF, 2, native_event_type="session", status="resume")]
    if broken:
        out.append(_event(5, "task_completion", REF, 2, status="completed", child_principal_id=None,
                          content={"status": "completed", "final_text": ""}))
        code = 0
    else:
        out += [_event(5, "native_diagnostic", REF, 2, diagnostic_type="provider_error",
                       detail={"kind": "provider_error", "http_status": 400,
                               "message": f'HTTP 400 from http://gw/v1/chat/completions: {{"error":{{"message":"{MESSAGE}"}}}}'}),
                _event(6, "task_completion", REF, 2, status="error", child_principal_id=None,
                       content={"status": "error", "final_text": "model request failed: HTTP 400"})]
        code = 1
    out.append(_event(9, "conversation_turn_finished", "runner", 2, exit_code=code, status="ok" if code == 0 else "error"))
    return out


def dock_ledger() -> list[dict[str, Any]]:
    def rec(kind: str, tool: str | None, **kw: Any) -> dict[str, Any]:
        return {"kind": kind, "tool": tool, **kw}
    return [rec("issued", None, detail={"name": "pallets", "value": PALLETS, "scope": "run"}),
            rec("request", "get_route_manifest", arguments={"route": "NW-7"}),
            rec("request", "open_load", arguments={"route": "NW-7", "door": "D4"}),
            rec("issued", "open_load", detail={"name": "load_id", "value": LOAD, "scope": "call"}),
            rec("request", "add_pallets", arguments={"load_id": LOAD, "pallet_ids": PALLETS})]


def context(root: Path, *, broken: bool) -> VerifierContext:
    """A run archive as the verifier sees it: pack snapshot, workspace, gateway, probe, ledger."""
    run = root / ("broken" if broken else "faithful")
    snap = run / "private" / "task" / score.TASK_ID
    snap.mkdir(parents=True)
    for name in ("prompt.md", "turns.json"):
        (snap / name).write_text((PACK / name).read_text(encoding="utf-8"), encoding="utf-8")
    ws = run / "workspace"
    ws.mkdir()
    (ws / "load.json").write_text(json.dumps({"load_id": LOAD, "route": "NW-7", "door": "D4", "pallets": PALLETS}),
                                  encoding="utf-8")
    turns = [(PACK / "prompt.md").read_text(encoding="utf-8"),
             json.loads((PACK / "turns.json").read_text(encoding="utf-8"))["turns"][0]["user"]]
    gateway = [{"index": i, "status": 200, "error": None, "last_user_text": turns[0]} for i in range(5)]
    gateway += [{"index": 5, "status": 200, "error": None, "last_user_text": turns[1]},
                {"index": 6, "status": 400, "error": f"invalid_request_error: {MESSAGE}", "last_user_text": turns[1]}]
    probe = {"requests": [{"index": i + 1, "kind": "main", "turn": 1 if i < 5 else 2, "status": 200} for i in range(6)]
             + [{"index": 7, "kind": "provider_error", "turn": 2, "status": 400}]}
    truth = json.loads((PACK / "truth.json").read_text(encoding="utf-8"))
    return VerifierContext(workspace=ws, baseline=PACK / "workspace", truth=truth, oracle=None,
                           events=events(broken), gateway=gateway, probe=probe,  # type: ignore[arg-type]
                           ledgers={"dock": dock_ledger()}, run_dir=run)


def selftest() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        good = score.score(context(Path(tmp), broken=False))
        assert all(v[0] for v in good.values()), good
        bad = score.score(context(Path(tmp), broken=True))
        failed = {k for k, v in bad.items() if not v[0]}
        assert failed == {score.H1, score.H2, score.H3}, bad


def main() -> int:
    try:
        selftest()
    except AssertionError as exc:
        print(f"selftest FAILED: {exc}")
        return 1
    print("selftest ok: faithful run passes every criterion; swallowed provider error fails H1, H2, H3 only")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
