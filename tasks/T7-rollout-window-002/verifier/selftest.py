"""Self-test of T7-rollout-window-002's verifier (TASK_GUIDE rule 13): a faithful and a broken
evidence set, built by hand.

    python tasks/T7-rollout-window-002/verifier/selftest.py      # prints "selftest ok"

The faithful set is the reference harness's run: the multiple-choice question reaches the scripted
user with one option per window (ledger ``_ask_user``), the picked option comes back as the ask-user
result and the ideal agent writes that window. The broken one is ``drop_user_answer``: the same
question and pick in the ledger, but the model is shown ``(no answer)``, so the agent writes
``window: null``. A1 is a ``json_field`` rule, not scored here.
"""

import json
import shutil
import tempfile
from pathlib import Path

from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[1]
CALL = "call_selftest_2"
BROKEN = {"H1-chosen-option-delivered"}


def _score_module():
    namespace = {"__name__": "t7b_selftest_score"}
    source = PACK / "verifier" / "score.py"
    exec(compile(source.read_text(encoding="utf-8"), str(source), "exec"), namespace)  # noqa: S102
    return namespace["score"]


def _context(root, dropped):
    truth = json.loads((PACK / "truth.json").read_text(encoding="utf-8"))
    ws, base = root / "workspace", root / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    labels = ["RW-TUE-0200 (Tuesday 02:00-04:00 UTC)", truth["window_label"], "RW-SAT-0600 (Saturday 06:00-08:00 UTC)"]
    ledger = [
        {"seq": 1, "kind": "request", "tool": "ask_user",
         "detail": {"question": "Which rollout window?", "options": labels, "request_id": CALL}},
        {"seq": 2, "kind": "issued", "tool": "ask_user",
         "detail": {"answer": truth["window_label"], "option": truth["window_label"], "matched": "answers.0"}},
    ]
    shown = "(no answer)" if dropped else truth["window_label"]
    window = None if dropped else truth["window_id"]
    (ws / "rollout.json").write_text(json.dumps({"service": "payments-gateway", "version": "5.3.0",
                                                 "window": window, "choice": None if dropped else shown}))
    probe = {"requests": [
        {"index": 1, "kind": "main", "turn": 1, "action": "read_file", "mapped_tool": "read_file", "call_id": "call_selftest_1"},
        {"index": 2, "kind": "main", "turn": 1, "action": "native_tool", "mapped_tool": "ask_user", "call_id": CALL}],
        "final_text": "done"}
    gateway = [
        {"index": 0, "status": 200, "tool_results": [], "last_user_text": "Prepare the rollout request."},
        {"index": 1, "status": 200, "tool_results": [
            {"id": "call_selftest_1", "is_error": False,
             "content": (PACK / "workspace" / "release.yaml").read_text(encoding="utf-8")}]},
        {"index": 2, "status": 200, "tool_results": [{"id": CALL, "is_error": False, "content": shown}]},
    ]
    return VerifierContext(workspace=ws, baseline=base, truth=truth, oracle=None, events=[], gateway=gateway,
                           probe=probe, ledgers={"_ask_user": ledger}, run_dir=root)


def main():
    score = _score_module()
    with tempfile.TemporaryDirectory() as tmp:
        for dropped, want in ((False, set()), (True, BROKEN)):
            root = Path(tmp) / ("broken" if dropped else "faithful")
            root.mkdir()
            got = {k for k, v in score(_context(root, dropped)).items() if not (v[0] if isinstance(v, tuple) else v)}
            assert got == want, f"{'broken' if dropped else 'faithful'} set failed {sorted(got)}, want {sorted(want)}"
    print("selftest ok")


if __name__ == "__main__":
    main()
