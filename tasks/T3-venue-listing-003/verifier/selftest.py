"""Self-test of this pack's verifier (rule 13): one faithful and one broken evidence set.

Faithful: the approved draft (ledger init) delivered to the model, emitted by the probe and
received by the CMS unchanged, five confirmations issued and recorded in published.json.
Broken: the same run whose publish arguments lost ``contact.fax`` (the explicit null the
``drop_tool_arg_field`` mutant drops), so the CMS held the contact section and published.json
records null for it; and the ESC control character stripped from ``notice.controls``.

Run ``python tasks/T3-venue-listing-003/verifier/selftest.py`` (exit 0 when both hold).
"""

import copy
import json
import sys
import tempfile
from pathlib import Path

from tracetrial.verify import VerifierContext

sys.dont_write_bytecode = True  # never write __pycache__ into the pack
sys.path.insert(0, str(Path(__file__).resolve().parent))
import score  # noqa: E402  (the sibling verifier)

DRAFT = {
    "draft_id": "DRF-SELFTEST",
    "contact": {"phone": "+351 21 1234567", "email": "ola-test@example.pt", "whatsapp": None, "fax": None},
    "display": {"title": "\U0001F950 Pastelaria Cafe\u0301 \U0001F469\u200d\U0001F373", "name_rtl": "\u2067\u05e7\u05e4\u05d4\u2069 \u200f"},
    "notice": {"windows_path": "C:\\menus\\new", "controls": "BEL\a ESC\x1b[1m DEL\x7f", "multiline": "a\r\nb\tc"},
    "hours": {"seasons": {"summer": {"days": {"weekdays": {"slots": [{"kitchen": {"menu": {"price_cents": 450}}}]}}}}},
    "options": {"tags": [], "attributes": {}, "gallery": [[], {}], "note": ""},
}
CODES = {s: f"PUB-SELF{i:04d}" for i, s in enumerate(score.SECTIONS)}


def _context(root: Path, *, broken: bool) -> VerifierContext:
    ws = root / ("broken" if broken else "faithful")
    ws.mkdir(parents=True)
    received = copy.deepcopy(DRAFT)
    held = set()
    if broken:
        received["contact"].pop("fax")
        received["notice"]["controls"] = received["notice"]["controls"].replace("\x1b", "")
        held = {"contact", "notice"}
    recs = [{"seq": 1, "kind": "transition", "tool": None, "detail": {"op": "init", "new": {"draft": DRAFT}}},
            {"seq": 2, "kind": "request", "tool": "publish_listing", "arguments": received, "detail": {}}]
    recs += [{"seq": 3 + i, "kind": "issued", "tool": "publish_listing",
              "detail": {"name": f"confirmation_{s}", "value": CODES[s], "scope": "call", "request_seq": 2}}
             for i, s in enumerate(score.SECTIONS) if s not in held]
    (ws / "published.json").write_text(json.dumps({"draft_id": DRAFT["draft_id"], "confirmations": {
        s: None if s in held else CODES[s] for s in score.SECTIONS}}))
    gateway = [{"index": 2, "wire_format": "chat", "tool_results": [
        {"id": "call_1", "content": "Output:\n" + json.dumps(DRAFT, ensure_ascii=False)}]}]
    probe = {"requests": [
        {"index": 1, "action": "call_tool", "mapped_tool": "mcp__listings__get_draft", "call_id": "call_1"},
        {"index": 2, "action": "call_tool", "mapped_tool": "mcp__listings__publish_listing", "call_id": "call_2",
         "arguments": copy.deepcopy(DRAFT)}]}
    return VerifierContext(workspace=ws, baseline=ws, truth=None, oracle=None, events=[], gateway=gateway,
                           probe=probe, ledgers={"listings": recs}, run_dir=ws)


def selftest() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        good = score.score(_context(Path(tmp), broken=False))
        assert all(v[0] for v in good.values()), good
        bad = score.score(_context(Path(tmp), broken=True))
        failed = {k for k, v in bad.items() if not v[0]}
        assert failed == {"H2-null-vs-absent-kept", "H4-escapes-kept", "A1-confirmations-recorded"}, bad
        assert "contact.fax" in bad["H2-null-vs-absent-kept"][1] and "\\x1b" in bad["H4-escapes-kept"][1], bad


if __name__ == "__main__":
    selftest()
    print("selftest ok")
