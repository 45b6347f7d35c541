"""Self-test of this pack's verifier (rule 13): one faithful and one broken evidence set.

Faithful: the retirement result delivered on request 1, whose inventory declares quote_rate_v2
and no longer quote_rate_v1; the carrier server re-listed its tools after the cutover, served
the v2 quote and issued the quote id and total; rate_quote.json holds them.
Broken: the same run with the tool list left as first listed (the ``stale_tool_list`` mutant):
request 1 still declares track_shipment and quote_rate_v1 only, no re-list, no v2 call, nothing
issued, rate_quote.json records null.

Run ``python tasks/T6-carrier-rates-002/verifier/selftest.py`` (exit 0 when both hold).
"""

import json
import sys
import tempfile
from pathlib import Path

from tracetrial.verify import VerifierContext

sys.dont_write_bytecode = True  # never write __pycache__ into the pack
sys.path.insert(0, str(Path(__file__).resolve().parent))
import score  # noqa: E402  (the sibling verifier)

QUOTE, TOTAL = "RQ-SELFTEST01", 271828
TRACK = {"name": "mcp__carrier__track_shipment", "namespace": None}
V1 = {"name": "mcp__carrier__quote_rate_v1", "namespace": None}
V2 = {"name": "mcp__carrier__quote_rate_v2", "namespace": None,
      "description": "Quote a freight rate for a lane (rating API v2); returns the quote id and the total in euro cents."}
RETIRED = json.dumps({"error": {"code": "API_VERSION_RETIRED", "message": "rating API v1 was retired",
                                "data": {"retired_tool": "quote_rate_v1", "replacement_tool": "quote_rate_v2"}}})


def _request(index, tools, results):
    return {"index": index, "wire_format": "chat", "status": 200, "error": None, "inventory_complete": True,
            "tools": tools, "tool_results": results}


def _context(root: Path, *, broken: bool) -> VerifierContext:
    ws = root / ("broken" if broken else "faithful")
    ws.mkdir(parents=True)
    recs = [{"seq": 1, "kind": "request", "tool": None,
             "detail": {"method": "tools/list", "tools": ["track_shipment", "quote_rate_v1"]}},
            {"seq": 2, "kind": "request", "tool": "quote_rate_v1", "arguments": {}, "detail": {"method": "tools/call"}},
            {"seq": 3, "kind": "transition", "tool": "quote_rate_v1",
             "detail": {"op": "set", "path": "state.rating_api", "old": "v1", "new": "v2", "request_seq": 2}},
            {"seq": 4, "kind": "error", "tool": "quote_rate_v1", "detail": {"code": "API_VERSION_RETIRED", "request_seq": 2}}]
    gateway = [_request(0, [TRACK, V1], [])]
    probe = [{"index": 0, "action": "call_tool", "mapped_tool": V1["name"], "call_id": "call_1"}]
    retired = [{"id": "call_1", "content": RETIRED}]
    if broken:
        gateway.append(_request(1, [TRACK, V1], retired))
        quote, total = None, None
    else:
        recs += [{"seq": 5, "kind": "request", "tool": None,
                  "detail": {"method": "tools/list", "tools": ["track_shipment", "quote_rate_v2"]}},
                 {"seq": 6, "kind": "request", "tool": "quote_rate_v2", "arguments": {}, "detail": {"method": "tools/call"}},
                 {"seq": 7, "kind": "issued", "tool": "quote_rate_v2",
                  "detail": {"name": "quote_id", "value": QUOTE, "scope": "run", "request_seq": 6}},
                 {"seq": 8, "kind": "issued", "tool": "quote_rate_v2",
                  "detail": {"name": "total_cents", "value": TOTAL, "scope": "run", "request_seq": 6}}]
        gateway.append(_request(1, [TRACK, V2], retired))
        gateway.append(_request(2, [TRACK, V2], retired + [
            {"id": "call_2", "content": json.dumps({"quote_id": QUOTE, "total_cents": TOTAL})}]))
        probe.append({"index": 1, "action": "call_tool", "mapped_tool": V2["name"], "call_id": "call_2"})
        quote, total = QUOTE, TOTAL
    (ws / "rate_quote.json").write_text(json.dumps({"shipment": "SHP-40817", "quote_id": quote, "total_cents": total}))
    return VerifierContext(workspace=ws, baseline=ws, truth=None, oracle=None, events=[], gateway=gateway,
                           probe={"requests": probe}, ledgers={"carrier": recs}, run_dir=ws)


def selftest() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        good = score.score(_context(Path(tmp), broken=False))
        assert all(v[0] for v in good.values()), good
        bad = score.score(_context(Path(tmp), broken=True))
        failed = {k for k, v in bad.items() if not v[0]}
        assert failed == {"H1-replacement-tool-in-inventory", "H2-retired-tool-withdrawn",
                          "H3-replacement-call-reached-service", "H4-tools-relisted-after-change",
                          "A1-quote-recorded"}, bad
        assert "not refreshed" in bad["H1-replacement-tool-in-inventory"][1], bad
        assert "still declares mcp__carrier__quote_rate_v1" in bad["H2-retired-tool-withdrawn"][1], bad


if __name__ == "__main__":
    selftest()
    print("selftest ok")
