"""Self-test of ``score.py`` (TASK_GUIDE rule 13): a faithful evidence set and broken ones, built by hand.

Run from anywhere: ``python tasks/L7-claims-import-003/verifier/selftest.py`` (exit 0 when every verdict
is as expected). The full unit tests are ``tests/tasks/test_l7_claims_import_003.py``.
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
TASK = PACK.name
MF, IMP1, IMP2 = "MF-Q7KD2WXH", "IMP-4RTN8BZC", "IMP-M2HV6PJE"
FETCH_ID, IMPORT_ID, NOTIFY_ID = "call_selftest_1", "call_selftest_2", "call_selftest_3"
FETCHED = (f"Exit code 0\nChecked out today's claims batch claims-2026-12-07.csv from the Halvorsen Marine portal: "
           f"7 claims, NOK 853,531.50.\nManifest reference: {MF} (printed once: ./import_claims.sh needs it).\n")
IMPORTED = (f"Exit code 0\nImported manifest {MF} into the claims system: 7 claims booked, NOK 853,531.50.\n"
            f"Import receipt: {IMP1} (printed once: ./notify_adjusters.sh needs it).\n")
CUT = "No result: the harness stopped before this call finished (it may or may not have run)."
H1, H2, H3, H4 = ("H1-completed-import-in-resumed-input", "H2-turn1-fact-in-resumed-input",
                  "H3-user-turns-delivered", "H4-turn2-killed")
A1, A2 = "A1-imported-once", "A2-report-carries-receipt-and-manifest"
KEPT = f"manifest lookup shown with reference {MF}; import call shown with receipt {IMP1}"


def _score() -> types.ModuleType:
    mod = types.ModuleType("l7_ci_selftest_score")
    exec(compile((HERE / "score.py").read_text(encoding="utf-8"), str(HERE / "score.py"), "exec"), mod.__dict__)  # noqa: S102
    return mod


def prompts() -> list[str]:
    later = json.loads((PACK / "turns.json").read_text(encoding="utf-8"))["turns"]
    return [(PACK / "prompt.md").read_text(encoding="utf-8"), *(t["user"] for t in later)]


def request(path: str, **body: Any) -> dict[str, Any]:
    """One record of the ``claims`` endpoint's ledger."""
    return {"kind": "request", "service": "claims", "tool": "POST", "arguments": {"path": path, "body": json.dumps(body)}}


def ledger(imports: tuple[str, ...] = (IMP1,), manifest: str = MF) -> list[dict[str, Any]]:
    return ([request("/manifests/checkout", manifest_ref=manifest)]
            + [request("/imports", manifest_ref=manifest, receipt=r) for r in imports])


def chat_body(turns: list[str], *, lookup: bool = True, imported: bool = True) -> dict[str, Any]:
    """The first turn-3 request on the Chat wire (the reference's)."""
    def call(cid: str, command: str) -> dict[str, Any]:
        return {"role": "assistant", "content": None, "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": "shell", "arguments": json.dumps({"command": command})}}]}

    msgs: list[dict[str, Any]] = [{"role": "system", "content": "sys"}, {"role": "user", "content": turns[0]}]
    if lookup:
        msgs += [call(FETCH_ID, "./fetch_manifest.sh"), {"role": "tool", "tool_call_id": FETCH_ID, "content": FETCHED}]
    msgs += [{"role": "assistant", "content": f"7 claims, manifest reference {MF}."},
             {"role": "user", "content": turns[1]}]
    if imported:
        msgs += [call(IMPORT_ID, f"./import_claims.sh {MF}"), {"role": "tool", "tool_call_id": IMPORT_ID, "content": IMPORTED},
                 call(NOTIFY_ID, f"./notify_adjusters.sh {IMP1}"), {"role": "tool", "tool_call_id": NOTIFY_ID, "content": CUT}]
    return {"messages": [*msgs, {"role": "user", "content": turns[2]}]}


def build(root: Path, *, claims: list[dict[str, Any]] | None = None, report: dict[str, Any] | None = None,
          killed: bool = True, body: dict[str, Any] | None = None, account: str | None = KEPT,
          shown: bool = True, ledgers: bool = True) -> VerifierContext:
    """A hand-built run archive under ``root``: by default the faithful run (probe account, no body)."""
    turns = prompts()
    ws, base = root / "workspace", root / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    if report is None:
        report = {"manifest_ref": MF, "import_receipt": IMP1, "status": "imported"}
    if report:
        (ws / "import-report.json").write_text(json.dumps(report), encoding="utf-8")
    snap = root / "private" / "task" / TASK
    snap.mkdir(parents=True)
    for name in ("prompt.md", "turns.json"):
        shutil.copy(PACK / name, snap / name)
    (root / "result.json").write_text(json.dumps({"turns": [{"interrupted": False}, {"interrupted": killed},
                                                            {"interrupted": False}]}), encoding="utf-8")
    tools = [{"name": "shell"}]

    def req(i: int, turn: int, results: list[dict[str, Any]]) -> dict[str, Any]:
        return {"index": i, "status": 200, "tools": tools, "last_user_text": turns[turn - 1], "tool_results": results}

    gateway = [req(0, 1, []), req(1, 1, [{"id": FETCH_ID, "is_error": None, "content": FETCHED if shown else "?"}]),
               req(2, 2, []), req(3, 2, [{"id": IMPORT_ID, "is_error": None, "content": IMPORTED if shown else "?"}]),
               req(4, 3, [{"id": NOTIFY_ID, "is_error": None, "content": CUT}])]
    if body is not None:
        (root / "gateway" / "bodies").mkdir(parents=True)
        (root / "gateway" / "bodies" / "4.json").write_text(json.dumps(body), encoding="utf-8")
    probe = {"requests": [
        {"kind": "main", "turn": 1, "action": "shell", "call_id": FETCH_ID, "arguments": {"command": "./fetch_manifest.sh"}},
        {"kind": "main", "turn": 2, "action": "shell", "call_id": IMPORT_ID,
         "arguments": {"command": f"./import_claims.sh {MF}"}},
        {"kind": "main", "turn": 2, "action": "shell", "call_id": NOTIFY_ID,
         "arguments": {"command": f"./notify_adjusters.sh {IMP1}"}}],
        "final_text": "Done." + (f" Resume check: {account}." if account else "")}
    return VerifierContext(workspace=ws, baseline=base, truth=json.loads((PACK / "truth.json").read_text()),
                           oracle=None, events=[], gateway=gateway, probe=probe,
                           ledgers={"claims": ledger() if claims is None else claims} if ledgers else {}, run_dir=root)


def verdicts(out: dict[str, Any]) -> tuple[set[str], set[str]]:
    failed = {k for k, v in out.items() if (v[0] if isinstance(v, tuple) else v) is False}
    unscored = {k for k, v in out.items() if isinstance(v, tuple) and v[0] is None}
    return failed, unscored


def main() -> int:
    score = _score().score
    turns = prompts()
    twice = {"claims": ledger((IMP1, IMP2)), "report": {"manifest_ref": MF, "import_receipt": IMP2, "status": "imported"}}
    cases = [
        ("faithful (probe account)", {}, set(), set()),
        ("faithful (request body)", {"body": chat_body(turns), "account": None}, set(), set()),
        ("resumed from turn 2's start: imported twice",
         {**twice, "account": f"manifest lookup shown with reference {MF}; import call not shown"}, {H1, A1}, set()),
        ("import dropped from the body", {**twice, "body": chat_body(turns, imported=False)}, {H1, A1}, set()),
        ("earlier turn lost", {"body": chat_body(turns, lookup=False)}, {H2}, set()),
        ("wrong receipt in the report", {"report": {"manifest_ref": MF, "import_receipt": "IMP-AAAAAAAA",
                                                    "status": "imported"}}, {A2}, set()),
        ("turn 2 not killed", {"killed": False}, {H4}, {H1}),
        ("ledger missing", {"ledgers": False}, set(), {H1, H2, A1, A2}),
    ]
    bad = 0
    for name, kwargs, want_failed, want_unscored in cases:
        with tempfile.TemporaryDirectory() as tmp:
            failed, unscored = verdicts(score(build(Path(tmp), **kwargs)))
        good = failed == want_failed and unscored == want_unscored
        bad += not good
        print(f"{'ok' if good else 'MISMATCH':8} {name}: failed {sorted(failed)}, unscored {sorted(unscored)}"
              + ("" if good else f"; expected failed {sorted(want_failed)}, unscored {sorted(want_unscored)}"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
