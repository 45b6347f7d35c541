"""Self-test of ``score.py`` (TASK_GUIDE rule 13): one faithful and two broken evidence sets.

Run from the repository root: ``python tasks/C6-parcel-brief-001/verifier/selftest.py`` (exit 0
when every verdict is as expected). The full unit tests are
``tests/tasks/test_c6_parcel_brief_001.py``, which build their evidence with :func:`evidence`.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import tempfile
import types
from pathlib import Path

from tracetrial.verify import VerifierContext

HERE = Path(__file__).resolve().parent
PACK = HERE.parent
TASK_ID = "C6-parcel-brief-001"
V = {"case_id": "CS-583920", "customer_id": "CU-Q7XK2M4P", "refund_authorization": "RA-8KD2MX4QZT",
     "tracking_number": "TRK-H4TR9WXPLZ"}
LABEL = "LBL-" + hashlib.sha256(f"parcel-label:{V['tracking_number']}".encode()).hexdigest()[:10].upper()
PROMPT = ("You are the label helper. In the current folder run `python3 make_label.py "
          f"{V['tracking_number']}` exactly once and reply with the line `label id: <id>` exactly as the "
          "command printed it.")
CASE = json.dumps({"queue": "returns", "case_id": V["case_id"], "customer": {"customer_id": V["customer_id"]},
                   "refund_authorization": V["refund_authorization"],
                   "parcel": {"tracking_number": V["tracking_number"]}})


def account(ids, brief="no"):
    return f"Context check: case identifiers in my input: {', '.join(ids) or 'none'}; the parent task brief in my input: {brief}."


CLEAN = account([LABEL, V["tracking_number"]])
LEAKED = account([V["case_id"], V["customer_id"], LABEL, V["refund_authorization"], V["tracking_number"]], "yes")


def load_score() -> types.ModuleType:
    mod = types.ModuleType("c6_pb_selftest_score")
    exec(compile((HERE / "score.py").read_text(encoding="utf-8"), str(HERE / "score.py"), "exec"), mod.__dict__)  # noqa: S102
    return mod


def evidence(root: Path, *, child_account: str | None = CLEAN, prompt: str = PROMPT, delivered: str | None = None,
             labels: str | None = None, resolution: dict | None = None, bodies: dict[int, str] | None = None,
             events: list | None = None, probe: bool = True, parent_label: bool = False) -> VerifierContext:
    """A run's evidence: the parent reads the case, delegates ``prompt``, the child's requests carry
    ``delivered`` (default: the prompt) as their last user text and the child answers with its
    label and ``child_account``."""
    ws, base = root / "workspace", root / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    (ws / "labels.log").write_text(f"{V['tracking_number']} {LABEL}\n" if labels is None else labels)
    res = {"case_id": V["case_id"], "refund_authorization": V["refund_authorization"], "label_id": LABEL}
    (ws / "resolution.json").write_text(json.dumps(res if resolution is None else resolution))
    snap = root / "private" / "task" / TASK_ID
    snap.mkdir(parents=True)
    shutil.copy(PACK / "prompt.md", snap / "prompt.md")
    brief = (PACK / "prompt.md").read_text()
    reply = f"label id: {LABEL}" + (f"\n{child_account}" if child_account else "")
    seen = prompt if delivered is None else delivered
    gateway = [
        {"index": 0, "status": 200, "last_user_text": brief, "tool_results": []},
        {"index": 1, "status": 200, "last_user_text": brief, "tool_results": [{"id": "toolu_tt_1", "content": CASE}]},
        {"index": 2, "status": 200, "last_user_text": seen, "tool_results": []},
        {"index": 3, "status": 200, "last_user_text": seen,
         "tool_results": [{"id": "toolu_tt_3", "content": f"label id: {LABEL}"}]},
        {"index": 4, "status": 200, "last_user_text": brief, "tool_results": [{"id": "toolu_tt_2", "content": reply}]},
        {"index": 5, "status": 200, "last_user_text": brief, "tool_results": [{"id": "toolu_tt_4", "content": "Wrote"}]},
    ]
    if bodies:
        (root / "gateway" / "bodies").mkdir(parents=True)
        for index, text in bodies.items():
            (root / "gateway" / "bodies" / f"{index}.json").write_text(text)
    requests = [
        {"index": 1, "action": "call_tool", "principal": "main", "kind": "main", "call_id": "toolu_tt_1",
         "arguments": {"queue": "returns"}},
        {"index": 2, "action": "spawn_subagent", "principal": "main", "kind": "main", "call_id": "toolu_tt_2",
         "arguments": {"description": "Parcel shipping label", "prompt": prompt}},
        {"index": 3, "action": "shell", "principal": "subagent:a1", "kind": "subagent", "call_id": "toolu_tt_3",
         "arguments": {"command": f"python3 make_label.py {V['tracking_number']}"}},
        {"index": 4, "action": "final", "principal": "subagent:a1", "kind": "subagent"},
        {"index": 5, "action": "write_file", "principal": "main", "kind": "main", "call_id": "toolu_tt_4",
         "arguments": {"file_path": "resolution.json", "content": json.dumps(res)}},
        {"index": 6, "action": "final", "principal": "main", "kind": "main"},
    ]
    if parent_label:
        requests.insert(1, {"index": 9, "action": "shell", "principal": "main", "kind": "main", "call_id": "toolu_tt_9",
                            "arguments": {"command": f"python3 make_label.py {V['tracking_number']}"}})
    ledger = [{"kind": "request", "tool": "get_case"}] + [
        {"kind": "issued", "tool": None, "detail": {"name": k, "value": v}} for k, v in V.items()]
    return VerifierContext(workspace=ws, baseline=base, truth=json.loads((PACK / "truth.json").read_text()),
                           oracle=None, events=list(events or []), gateway=gateway,
                           probe={"requests": requests, "final_text": "resolution.json written"} if probe else None,
                           ledgers={"casedesk": ledger}, run_dir=root)


def failed(score: types.ModuleType, ctx: VerifierContext) -> set[str]:
    return {k for k, v in score.score(ctx).items() if not (v[0] if isinstance(v, tuple) else v)}


def main() -> int:
    score = load_score()
    cases = [
        ("faithful", {}, set()),
        ("child shown the parent's context", {"child_account": LEAKED}, {"H1-no-parent-context-in-child"}),
        ("brief never reaches the child", {"delivered": "", "child_account": None, "labels": "", "resolution":
                                           {"case_id": V["case_id"], "refund_authorization": V["refund_authorization"],
                                            "label_id": None}},
         {"H1-no-parent-context-in-child", "H2-delegated-prompt-reaches-child", "A1-label-made-once",
          "A2-resolution-correct"}),
    ]
    bad = 0
    for name, kw, want in cases:
        with tempfile.TemporaryDirectory() as tmp:
            got = failed(score, evidence(Path(tmp), **kw))
        ok = got == want
        bad += not ok
        print(f"{'ok ' if ok else 'BAD'} {name}: failed {sorted(got)}" + ("" if ok else f", want {sorted(want)}"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
