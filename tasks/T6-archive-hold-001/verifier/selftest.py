"""Self-test of this pack's verifier (rule 13): one faithful and one broken evidence set.

Faithful: the mount result delivered on request 1, whose inventory declares the new archive
lookup tool; the records server re-listed its tools after the mount, served the lookup and
issued the hold reference; hold.json holds it.
Broken: the same run with the tool list left as first listed (the ``stale_tool_list`` mutant):
request 1 declares only get_matter and mount_archive, no re-list, no lookup call, nothing
issued, hold.json records null.

Run ``python tasks/T6-archive-hold-001/verifier/selftest.py`` (exit 0 when both hold).
"""

import json
import sys
import tempfile
from pathlib import Path

from tracetrial.verify import VerifierContext

sys.dont_write_bytecode = True  # never write __pycache__ into the pack
sys.path.insert(0, str(Path(__file__).resolve().parent))
import score  # noqa: E402  (the sibling verifier)

REF = "LH-SELFTEST01"
BASE = [{"name": "mcp__records__get_matter", "namespace": None}, {"name": "mcp__records__mount_archive", "namespace": None}]
NEW = {"name": "mcp__records__lookup_archived_matter", "namespace": None,
       "description": "Look up a closed matter in the mounted cold archive; returns its litigation-hold reference."}
MOUNTED = json.dumps({"mounted": True, "archive": "cold-2025", "adds_tool": "lookup_archived_matter"})


def _request(index, tools, results):
    return {"index": index, "wire_format": "chat", "status": 200, "error": None, "inventory_complete": True,
            "tools": tools, "tool_results": results}


def _context(root: Path, *, broken: bool) -> VerifierContext:
    ws = root / ("broken" if broken else "faithful")
    ws.mkdir(parents=True)
    recs = [{"seq": 1, "kind": "request", "tool": None, "detail": {"method": "tools/list", "tools": ["get_matter", "mount_archive"]}},
            {"seq": 2, "kind": "request", "tool": "mount_archive", "arguments": {}, "detail": {"method": "tools/call"}},
            {"seq": 3, "kind": "transition", "tool": "mount_archive",
             "detail": {"op": "set", "path": "state.archive_mounted", "old": False, "new": True, "request_seq": 2}}]
    gateway = [_request(0, BASE, [])]
    probe = [{"index": 0, "action": "call_tool", "mapped_tool": "mcp__records__mount_archive", "call_id": "call_1"}]
    mount_result = [{"id": "call_1", "content": MOUNTED}]
    if broken:
        gateway.append(_request(1, BASE, mount_result))
        reference = None
    else:
        recs += [{"seq": 4, "kind": "request", "tool": None,
                  "detail": {"method": "tools/list", "tools": ["get_matter", "mount_archive", "lookup_archived_matter"]}},
                 {"seq": 5, "kind": "request", "tool": "lookup_archived_matter", "arguments": {"matter_id": "M-2291"},
                  "detail": {"method": "tools/call"}},
                 {"seq": 6, "kind": "issued", "tool": "lookup_archived_matter",
                  "detail": {"name": "hold_reference", "value": REF, "scope": "run", "request_seq": 5}}]
        gateway.append(_request(1, BASE + [NEW], mount_result))
        gateway.append(_request(2, BASE + [NEW], mount_result + [{"id": "call_2", "content": json.dumps({"hold_reference": REF})}]))
        probe.append({"index": 1, "action": "call_tool", "mapped_tool": NEW["name"], "call_id": "call_2"})
        reference = REF
    (ws / "hold.json").write_text(json.dumps({"matter": "M-2291", "hold_reference": reference}))
    return VerifierContext(workspace=ws, baseline=ws, truth=None, oracle=None, events=[], gateway=gateway,
                           probe={"requests": probe}, ledgers={"records": recs}, run_dir=ws)


def selftest() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        good = score.score(_context(Path(tmp), broken=False))
        assert all(v[0] for v in good.values()), good
        bad = score.score(_context(Path(tmp), broken=True))
        failed = {k for k, v in bad.items() if not v[0]}
        assert failed == {"H1-new-tool-in-inventory", "H2-new-tool-call-reached-service",
                          "H3-tools-relisted-after-change", "A1-hold-reference-recorded"}, bad
        assert "not refreshed" in bad["H1-new-tool-in-inventory"][1], bad


if __name__ == "__main__":
    selftest()
    print("selftest ok")
