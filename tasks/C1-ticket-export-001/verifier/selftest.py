"""Self-test of ``score.py`` (TASK_GUIDE rule 13): faithful and broken evidence sets, built by hand.

Every set is one run of both export parts: the gateway records what reached the model (each
part's result, capped as the recorder caps it: first and last 32 KiB, full ``size``; then a
``tail -n 3`` recovery where the agent took one) and checksums.json holds what the ideal agent
writes after seeing that. The real outputs come from the pack's own ``export.py``.

* faithful (reference): 16 KiB shown with the reference notice and saved copy, tails recovered;
* faithful (Codex): head and tail shown with "N tokens truncated", no recovery needed;
* silent cut (``reference+truncate_silently``): no notice, no recovery, checksums null: H1, H3, A1, A2;
* understated omission (``reference+misreport_omitted``): half the omitted bytes stated: H2;
* exit status hidden (``reference+hide_exit_code``): the agent reports 0: H4, A3;
* part b cut with a notice but never recovered: H3, A2;
* wrong checksum of part a written although it was shown (agent): A1.

Run from the repository root: ``python tasks/C1-ticket-export-001/verifier/selftest.py`` (exit 0
when every verdict is as expected). The full unit tests are ``tests/tasks/test_c1_ticket_export_001.py``.
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
REF_LIMIT = 16 * 1024  # the reference harness's shell output limit
EDGE = 32 * 1024  # the gateway recorder keeps the first and last 32 KiB of a delivered result
H1, H2, H3, H4 = ("H1-truncation-disclosed", "H2-omitted-size-accurate", "H3-checksum-delivered",
                  "H4-b-exit-status-delivered")
A1, A2, A3 = "A1-checksum-a", "A2-checksum-b", "A3-b-exit-code"


def _score() -> types.ModuleType:
    mod = types.ModuleType("c1_tickets_selftest_score")
    exec(compile((HERE / "score.py").read_text(encoding="utf-8"), str(HERE / "score.py"), "exec"), mod.__dict__)  # noqa: S102
    return mod


SCORE = _score()
REAL: dict[str, tuple[str, int]] = SCORE.real_outputs(PACK / "workspace")
SUM = {p: REAL[p][0].rstrip("\n").splitlines()[-1].split(": ", 1)[1] for p in "ab"}


def _entry(call_id: str, text: str) -> dict[str, Any]:
    """A gateway tool-result record as the recorder writes it."""
    data = text.encode("utf-8")
    capped = len(data) > 2 * EDGE
    content = data[:EDGE].decode("utf-8", "ignore") + data[-EDGE:].decode("utf-8", "ignore") if capped else text
    return {"id": call_id, "is_error": None, "size": len(data), "sha256": hashlib.sha256(data).hexdigest(),
            "content": content, "content_truncated": capped}


def reference(part: str, mode: str = "notice") -> str:
    """The reference harness's shell result (``silent``/``lie``/``hide``: its mutants)."""
    text, code = REAL[part]
    data = text.encode()
    status = "" if mode == "hide" else f"Exit code {code}\n"
    if mode == "silent":
        return status + data[:REF_LIMIT].decode()
    omitted = len(data) - REF_LIMIT
    said = omitted // 2 if mode == "lie" else omitted
    return (f"{status}{data[:REF_LIMIT].decode()}\n[stdout truncated: showing the first {REF_LIMIT} of "
            f"{REF_LIMIT + said} bytes; {said} bytes omitted. Full stdout saved to /ws/.tt-outputs/call_{part}.stdout.txt]")


def codex(part: str, keep: int = 20000) -> str:
    text, code = REAL[part]
    data = text.encode()
    return (f"Chunk ID: 1a2b\nWall time: 0.0512 seconds\nProcess exited with code {code}\n"
            f"Original token count: {(len(data) + 3) // 4}\nOutput:\nTotal output lines: {text.count(chr(10))}\n\n"
            f"{data[:keep].decode()}…{(len(data) - 2 * keep) // 4} tokens truncated…{data[-keep:].decode()}")


def tail3(part: str, status: bool = True) -> str:
    return ("Exit code 0\n" if status else "") + "\n".join(REAL[part][0].rstrip("\n").splitlines()[-3:])


def _ctx(root: Path, results: list[str], checksums: dict[str, Any]) -> VerifierContext:
    ws, base = root / "workspace", root / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    (ws / "checksums.json").write_text(json.dumps(checksums))
    tools = [{"name": "shell"}, {"name": "write_file"}]
    gateway = [{"index": 0, "status": 200, "error": None, "tools": tools, "tool_results": []}]
    gateway += [{"index": i, "status": 200, "error": None, "tools": tools, "tool_results": [_entry(f"call_{i}", t)]}
                for i, t in enumerate(results, start=1)]
    truth = json.loads((PACK / "truth.json").read_text(encoding="utf-8"))
    return VerifierContext(workspace=ws, baseline=base, truth=truth, oracle=None, events=[], gateway=gateway,
                           probe=None, ledgers={}, run_dir=root)


GOOD = {"a": SUM["a"], "b": SUM["b"], "b_exit_code": 1}
RECOVERED = [reference("a"), tail3("a"), reference("b"), tail3("b")]
CASES: list[tuple[str, list[str], dict[str, Any], set[str]]] = [
    ("faithful (reference notice, saved copies tailed)", RECOVERED, GOOD, set()),
    ("faithful (Codex head+tail)", [codex("a"), codex("b")], GOOD, set()),
    ("silent cut (truncate_silently)", [reference("a", "silent"), reference("b", "silent")],
     {"a": None, "b": None, "b_exit_code": 1}, {H1, H3, A1, A2}),
    ("understated omission (misreport_omitted)",
     [reference("a", "lie"), tail3("a"), reference("b", "lie"), tail3("b")], GOOD, {H2}),
    ("exit status hidden (hide_exit_code)", [reference("a", "hide"), tail3("a", False), reference("b", "hide"),
                                              tail3("b", False)],
     {**GOOD, "b_exit_code": 0}, {H4, A3}),
    ("part b disclosed but never recovered", [reference("a"), tail3("a"), reference("b")], {**GOOD, "b": None},
     {H3, A2}),
    ("wrong checksum of part a written", RECOVERED, {**GOOD, "a": "0" * 16}, {A1}),
]


def main() -> int:
    bad = 0
    for name, results, checksums, want in CASES:
        with tempfile.TemporaryDirectory() as tmp:
            out = SCORE.score(_ctx(Path(tmp), results, checksums))
        got = {k for k, v in out.items() if (v if isinstance(v, tuple) else (v, ""))[0] is False}
        ok = got == want and set(out) == {H1, H2, H3, H4, A1, A2, A3}
        bad += not ok
        print(f"{'ok ' if ok else 'BAD'} {name}: failed {sorted(got)}" + ("" if ok else f", expected {sorted(want)}"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
