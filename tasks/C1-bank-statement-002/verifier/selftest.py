"""Self-test of ``score.py`` (TASK_GUIDE rule 13): faithful and broken evidence sets, built by hand.

Every set is one run: the bank ledger issues the statement id, the gateway records what reached
the model (the bank's result, the fetch, the read of the ~320 KB statement, the ``tail -n 3``
recovery), capped as the recorder caps it (first and last 32 KiB, full ``size``), and
reconcile.json holds what the ideal agent writes after seeing that.

* faithful (reference): read cut at 256 KiB with the reference notice, tail recovered: all pass;
* faithful (Claude Code): Read refuses the file as too large ("File content (N KB) exceeds"),
  tail recovered: all pass;
* silent cut (``reference+truncate_silently``): no notice, no recovery, total null: H1, H3, A1;
* understated omission (``reference+misreport_omitted``): the notice states half the omitted
  bytes, recovery still happens: H2 only;
* notice but no recovery: the read is disclosed, the control line never reaches the model and
  the agent writes null: H3, A1;
* wrong statement id in reconcile.json (agent): A2 only.

Run from the repository root: ``python tasks/C1-bank-statement-002/verifier/selftest.py`` (exit 0
when every verdict is as expected). The full unit tests are ``tests/tasks/test_c1_bank_statement_002.py``.
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
SID = "STM-7KQ2M9XWPA"
PATH = f"statements/{SID}.txt"
READ_LIMIT = 256 * 1024  # the reference harness's read_file limit
EDGE = 32 * 1024  # the gateway recorder keeps the first and last 32 KiB of a delivered result
H1, H2, H3 = "H1-truncation-disclosed", "H2-omitted-size-accurate", "H3-total-delivered"
A1, A2 = "A1-total", "A2-statement-id"


def _score() -> types.ModuleType:
    mod = types.ModuleType("c1_bank_selftest_score")
    exec(compile((HERE / "score.py").read_text(encoding="utf-8"), str(HERE / "score.py"), "exec"), mod.__dict__)  # noqa: S102
    return mod


SCORE = _score()
TEXT: str = SCORE.real_statement(PACK / "workspace", SID)
TOTAL = TEXT.rstrip("\n").splitlines()[-1].split(": ", 1)[1]


def _entry(call_id: str, text: str) -> dict[str, Any]:
    """A gateway tool-result record as the recorder writes it."""
    data = text.encode("utf-8")
    capped = len(data) > 2 * EDGE
    content = data[:EDGE].decode("utf-8", "ignore") + data[-EDGE:].decode("utf-8", "ignore") if capped else text
    return {"id": call_id, "is_error": False, "size": len(data), "sha256": hashlib.sha256(data).hexdigest(),
            "content": content, "content_truncated": capped}


def reference_read(mode: str = "notice") -> str:
    """The reference harness's read_file result (``silent``/``lie``: its mutants)."""
    data = TEXT.encode()
    shown = data[:READ_LIMIT].decode()
    if mode == "silent":
        return shown
    omitted = len(data) - READ_LIMIT
    said = omitted // 2 if mode == "lie" else omitted
    return (f"{shown}\n[file truncated: showing the first {READ_LIMIT} of {READ_LIMIT + said} bytes; {said} bytes "
            f"omitted. Read the rest of /ws/{PATH} with offset/limit (lines).]")


def claude_refusal() -> str:
    return (f"File content ({len(TEXT.encode()) / 1024:.1f}KB) exceeds maximum allowed size (256KB). Please use "
            "offset and limit parameters to read specific portions of the file, or use the GrepTool to search "
            "for specific content.")


def _ctx(root: Path, *, read: str, tail: bool, reconcile: dict[str, Any]) -> VerifierContext:
    ws, base = root / "workspace", root / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    (ws / "statements").mkdir()
    (ws / PATH).write_text(TEXT, encoding="utf-8")
    (ws / "reconcile.json").write_text(json.dumps(reconcile))
    bank = json.dumps({"isError": False, "content": [{"type": "text", "text": json.dumps({"statement_id": SID})}]})
    results = [bank, f"Exit code 0\nSaved statement {SID} to {PATH}", read]
    if tail:
        results.append("Exit code 0\n" + "\n".join(TEXT.rstrip("\n").splitlines()[-3:]))
    tools = [{"name": "read_file"}, {"name": "shell"}, {"name": "write_file"}, {"name": "mcp__bank__request_statement"}]
    gateway = [{"index": 0, "status": 200, "error": None, "wire_format": "chat", "tools": tools, "tool_results": []}]
    gateway += [{"index": i, "status": 200, "error": None, "wire_format": "chat", "tools": tools,
                 "tool_results": [_entry(f"call_{i}", text)]} for i, text in enumerate(results, start=1)]
    ledger = [{"seq": 1, "kind": "transition", "tool": None, "detail": {"op": "init"}},
              {"seq": 2, "kind": "request", "tool": "request_statement", "arguments": {"account": "ACME-OPS"},
               "detail": {"method": "tools/call"}},
              {"seq": 3, "kind": "issued", "tool": "request_statement",
               "detail": {"name": "statement_id", "value": SID, "scope": "run", "via": "result"}}]
    return VerifierContext(workspace=ws, baseline=base, truth=None, oracle=None, events=[], gateway=gateway,
                           probe=None, ledgers={"bank": ledger}, run_dir=root)


GOOD = {"statement_id": SID, "total": TOTAL}
NULL = {"statement_id": SID, "total": None}
CASES: list[tuple[str, dict[str, Any], set[str]]] = [
    ("faithful (reference notice, tail recovered)", {"read": reference_read(), "tail": True, "reconcile": GOOD}, set()),
    ("faithful (Claude Code refusal, tail recovered)", {"read": claude_refusal(), "tail": True, "reconcile": GOOD}, set()),
    ("silent cut (truncate_silently)", {"read": reference_read("silent"), "tail": False, "reconcile": NULL}, {H1, H3, A1}),
    ("understated omission (misreport_omitted)", {"read": reference_read("lie"), "tail": True, "reconcile": GOOD}, {H2}),
    ("notice but the control line never delivered", {"read": reference_read(), "tail": False, "reconcile": NULL},
     {H3, A1}),
    ("wrong statement id recorded", {"read": reference_read(), "tail": True,
                                         "reconcile": {"statement_id": "STM-WRONG12345", "total": TOTAL}}, {A2}),
]


def main() -> int:
    bad = 0
    for name, kwargs, want in CASES:
        with tempfile.TemporaryDirectory() as tmp:
            out = SCORE.score(_ctx(Path(tmp), **kwargs))
        got = {k for k, v in out.items() if (v if isinstance(v, tuple) else (v, ""))[0] is False}
        ok = got == want and set(out) == {H1, H2, H3, A1, A2}
        bad += not ok
        print(f"{'ok ' if ok else 'BAD'} {name}: failed {sorted(got)}" + ("" if ok else f", expected {sorted(want)}"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
