"""T3-venue-listing-003: the verifier on hand-built runs (exact transport; one mangled shape per
criterion; a draft altered on its way to the model; a wrong draft id; wrong or missing
confirmations; a do-nothing run), the ledger rule of A2, the probe policy (it sends what it was
shown, in every wrapper the harnesses use), the CMS simulator (seeded draft, per-section
publication) and what the drop_tool_arg_field mutant removes from these arguments."""

from __future__ import annotations

import copy
import json
import re
import unicodedata
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from apparatus.simulators.engine import ServiceRuntime
from apparatus.simulators.ledger import Ledger
from apparatus.simulators.spec import load_service, simulator_specs
from criteria.registry import RuleContext, evaluate_rule
from criteria.rundata import RunData
from harnesses.reference.mcp_tools import drop_nested_field
from tests.tasks import drive as drive_policy
from tests.tasks import load_module as _load
from tracetrial.policy import CallTool, Final, Observation, Turn, WriteFile
from tracetrial.task import load_task
from tracetrial.trace import EventBase, ToolCall, ToolEvent, ToolResult
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "T3-venue-listing-003"
NOW = datetime.now(UTC)

SCORE = _load(PACK / "verifier" / "score.py", "t3_venue_score")
POLICY = _load(PACK / "probe_policy.py", "t3_venue_policy")
SIM = _load(PACK / "simulators" / "listings.py", "t3_venue_sim")
TASK = load_task(PACK)
SECTIONS = ("contact", "display", "notice", "hours", "options")
CRIT = dict(SCORE.SECTION_CRITERIA)
HARNESS_IDS = {"H1-draft-delivered-intact", *CRIT.values(), "H7-top-level-kept"}
IDS = HARNESS_IDS | {"A1-confirmations-recorded"}
CODES = {s: f"PUB-{s[:4].upper()}TEST"[:12] for s in SECTIONS}


def _runtime(tmp_path: Path, seed: str) -> tuple[ServiceRuntime, Path]:
    sims = {s.name: s for s in simulator_specs(PACK)}
    led = Ledger(tmp_path / "listings.jsonl", "listings")
    led.init()
    rt = ServiceRuntime(load_service(PACK, sims["listings"]), tmp_path / "state", led, seed)
    rt.start_session()
    return rt, tmp_path / "listings.jsonl"


@pytest.fixture(scope="module")
def draft(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    rt, _ = _runtime(tmp_path_factory.mktemp("draft"), "unit-seed")
    return rt.call_tool("get_draft", {}).structured


def ledger(approved: dict[str, Any], received: list[Any], *, confirmed: Any = SECTIONS) -> list[dict[str, Any]]:
    recs: list[dict[str, Any]] = [{"seq": 1, "kind": "transition", "tool": None,
                                   "detail": {"op": "init", "at": [], "new": {"draft": approved, "publications": []}}}]
    for i, args in enumerate(received):
        seq = len(recs) + 1
        recs.append({"seq": seq, "kind": "request", "tool": "publish_listing", "arguments": args, "detail": {}})
        if i == 0:
            for s in confirmed:
                recs.append({"seq": len(recs) + 1, "kind": "issued", "tool": "publish_listing",
                             "detail": {"name": f"confirmation_{s}", "value": CODES[s], "scope": "call",
                                        "request_seq": seq}})
    return recs


def run(tmp_path: Path, approved: dict[str, Any], *, received: Any = "same", shown: Any = "same",
        emitted: Any = "same", confirmed: Any = SECTIONS, published: Any = "same", probe: bool = True,
        calls: int = 1, wrap: Any = None) -> VerifierContext:
    ws = tmp_path / "workspace"
    ws.mkdir(parents=True, exist_ok=True)
    if published == "same":
        published = {"draft_id": approved["draft_id"], "confirmations": {s: CODES.get(s) if s in confirmed else None
                                                                         for s in SECTIONS}}
    if published is not None:
        (ws / "published.json").write_text(json.dumps(published))
    shown_draft = copy.deepcopy(approved) if shown == "same" else shown
    sent = copy.deepcopy(shown_draft) if emitted == "same" else emitted
    args = copy.deepcopy(sent) if received == "same" else received
    draft_text = json.dumps(shown_draft, ensure_ascii=False)
    if wrap is not None:
        draft_text = wrap(draft_text)
    gateway = [{"index": 1, "wire_format": "chat", "status": 200, "error": None, "inventory_complete": True,
                "tools": [], "tool_results": []},
               {"index": 2, "wire_format": "chat", "status": 200, "error": None, "inventory_complete": True,
                "tools": [], "tool_results": [{"id": "call_1", "is_error": None, "content": draft_text}]},
               {"index": 3, "wire_format": "chat", "status": 200, "error": None, "inventory_complete": True,
                "tools": [], "tool_results": [{"id": "call_2", "is_error": None, "content": "{}"}]}]
    events: list[EventBase] = [
        ToolEvent(seq=5, timestamp=NOW, run_id="r", tool_call=ToolCall(id="call_1", name="mcp__listings__get_draft",
                                                                       arguments={}),
                  tool_result=ToolResult(content=draft_text)),
        ToolEvent(seq=7, timestamp=NOW, run_id="r", tool_call=ToolCall(
            id="call_2", name="mcp__listings__publish_listing", arguments=copy.deepcopy(sent)),
            tool_result=ToolResult(content="{}"))]
    report = {"requests": [
        {"index": 1, "action": "call_tool", "mapped_tool": "mcp__listings__get_draft", "call_id": "call_1",
         "arguments": {}},
        {"index": 2, "action": "call_tool", "mapped_tool": "mcp__listings__publish_listing", "call_id": "call_2",
         **({"arguments": sent} if sent is not None else {})}]}
    return VerifierContext(workspace=ws, baseline=ws, truth=None, oracle=None, events=events, gateway=gateway,
                           probe=report if probe else None,
                           ledgers={"listings": ledger(approved, [args] * calls, confirmed=confirmed)},
                           run_dir=tmp_path)


def failed(ctx: VerifierContext) -> set[str]:
    out = SCORE.score(ctx)
    assert set(out) == IDS
    return {k for k, v in out.items() if not v[0]}


def changed(draft: dict[str, Any], fn: Any) -> dict[str, Any]:
    args = copy.deepcopy(draft)
    fn(args)
    return args


# ------------------------------------------------------------------ pack


def test_the_draft_holds_every_shape(draft: dict[str, Any]) -> None:
    c, d, n, o = draft["contact"], draft["display"], draft["notice"], draft["options"]
    assert c["fax"] is None and c["whatsapp"] is None and "website" not in c and "schedule_at" not in draft
    assert any(ord(ch) > 0xFFFF for ch in d["title"]) and "\u200d" in d["title"]
    assert unicodedata.normalize("NFC", d["name_nfd"]) != d["name_nfd"]
    assert "\u2067" in d["name_rtl"] and "\u200f" in d["name_rtl"] and "\U0001D11E" in d["tagline"]
    assert set("\a\x1b\b\v\f\x1f\x7f") <= set(n["controls"]) and "\r\n" in n["multiline"] and "\t" in n["multiline"]
    assert "\x00" not in json.dumps(draft) and "\\" in n["windows_path"] and "\\n" in n["literal_escapes"]
    menu = draft["hours"]["seasons"]["summer"]["days"]["weekdays"]["slots"][0]["kitchen"]["menu"]
    assert isinstance(menu["price_cents"], int) and menu["allergens"] == {"gluten": True, "nuts": False}
    assert o == {"tags": [], "attributes": {}, "seating": {"indoor": [], "outdoor": {}}, "gallery": [[], {}], "note": ""}


def test_the_mutant_drops_exactly_the_explicit_null_fax(draft: dict[str, Any]) -> None:
    dropped = drop_nested_field(draft)
    assert SCORE.diff(draft, dropped) == ["$.contact.fax: sent None, absent on arrival"]


# ------------------------------------------------------------------ verifier


def test_exact_transport_passes(tmp_path: Path, draft: dict[str, Any]) -> None:
    assert failed(run(tmp_path, draft)) == set()


def test_emitted_arguments_fall_back_to_the_shown_draft(tmp_path: Path, draft: dict[str, Any]) -> None:
    assert failed(run(tmp_path, draft, emitted=None, received=copy.deepcopy(draft))) == set()


def test_live_runs_use_the_trace_record(tmp_path: Path, draft: dict[str, Any]) -> None:
    assert failed(run(tmp_path, draft, probe=False)) == set()


@pytest.mark.parametrize("wrap", [
    lambda t: "Wall time: 0.05 seconds\nOutput:\n" + t,                                           # Codex
    lambda t: json.dumps({"content": [{"type": "text", "text": t}], "details": {}}, indent=2),   # OpenClaw tool_call
    lambda t: "SECURITY NOTICE: {untrusted}\n<<<EXTERNAL>>>\nSource: API\n---\n" + t + "\n<<<END>>>",
])
def test_wrapped_results_are_read(tmp_path: Path, draft: dict[str, Any], wrap: Any) -> None:
    assert failed(run(tmp_path, draft, wrap=wrap)) == set()


MANGLINGS = [
    ("contact", lambda a: a["contact"].pop("fax"), "fax"),                                   # the mutant
    ("contact", lambda a: a["contact"].update(website=None), "website"),                     # absent -> null
    ("display", lambda a: a["display"].update(name_nfd=unicodedata.normalize("NFC", a["display"]["name_nfd"])),
     "name_nfd"),
    ("display", lambda a: a["display"].update(name_rtl=re.sub("[\u2066-\u2069\u200f]", "", a["display"]["name_rtl"])),
     "name_rtl"),
    ("display", lambda a: a["display"].update(title=a["display"]["title"].encode("utf-16", "surrogatepass")
                                              .decode("utf-16").replace("\u200d", "")), "title"),
    ("notice", lambda a: a["notice"].update(controls=re.sub("[\x00-\x08\x0b-\x1f\x7f]", "", a["notice"]["controls"])),
     "controls"),
    ("notice", lambda a: a["notice"].update(multiline=a["notice"]["multiline"].replace("\r\n", "\n")), "multiline"),
    ("notice", lambda a: a["notice"].update(literal_escapes=a["notice"]["literal_escapes"].replace("\\n", "\n")),
     "literal_escapes"),
    ("notice", lambda a: a["notice"].update(json_text=json.loads(a["notice"]["json_text"])), "json_text"),
    # Seen on Claude Code 2.1.220 ("repair double-escaped unicode"): a literal \uXXXX decoded.
    ("notice", lambda a: a["notice"].update(literal_escapes=a["notice"]["literal_escapes"].replace("\\u00e9", "\u00e9")),
     "literal_escapes"),
    ("hours", lambda a: a["hours"]["seasons"]["summer"]["days"]["weekdays"]["slots"][0]["kitchen"].update(
        menu=json.dumps(a["hours"]["seasons"]["summer"]["days"]["weekdays"]["slots"][0]["kitchen"]["menu"])), "menu"),
    ("hours", lambda a: a["hours"]["seasons"]["summer"]["days"]["weekdays"]["slots"][0]["kitchen"]["menu"].update(
        price_cents=float(a["hours"]["seasons"]["summer"]["days"]["weekdays"]["slots"][0]["kitchen"]["menu"]
                          ["price_cents"])), "price_cents"),
    ("options", lambda a: a["options"].pop("tags"), "tags"),
    ("options", lambda a: a["options"].update(attributes=[]), "attributes"),
    ("options", lambda a: a["options"]["seating"].update(outdoor=None), "outdoor"),
    ("options", lambda a: a["options"].update(note=None), "note"),
]


@pytest.mark.parametrize("section, change, where", MANGLINGS)
def test_each_mangled_shape_fails_its_own_criterion_and_a1(tmp_path: Path, draft: dict[str, Any], section: str,
                                                           change: Any, where: str) -> None:
    received = changed(draft, change)
    assert SCORE.diff(draft, received), "the change must alter the arguments"
    held = [section]
    ctx = run(tmp_path, draft, received=received, confirmed=[s for s in SECTIONS if s not in held])
    assert failed(ctx) == {CRIT[section], "A1-confirmations-recorded"}
    assert where in SCORE.score(ctx)[CRIT[section]][1]


@pytest.mark.parametrize("change", [lambda a: a.update(schedule_at=None), lambda a: a.update(draft_id="DRF-OTHER1")])
def test_top_level_changes_fail_h7(tmp_path: Path, draft: dict[str, Any], change: Any) -> None:
    ctx = run(tmp_path, draft, received=changed(draft, change), confirmed=[])
    assert failed(ctx) == {"H7-top-level-kept", "A1-confirmations-recorded"}


def test_a_draft_altered_on_its_way_to_the_model_fails_h1_only_on_the_harness_layer(
        tmp_path: Path, draft: dict[str, Any]) -> None:
    shown = changed(draft, lambda a: a["display"].update(name_nfd=unicodedata.normalize("NFC", a["display"]["name_nfd"])))
    ctx = run(tmp_path, draft, shown=shown, confirmed=[s for s in SECTIONS if s != "display"])
    assert failed(ctx) == {"H1-draft-delivered-intact", "A1-confirmations-recorded"}
    assert "name_nfd" in SCORE.score(ctx)["H1-draft-delivered-intact"][1]


def test_an_unreadable_draft_fails_h1(tmp_path: Path, draft: dict[str, Any]) -> None:
    ctx = run(tmp_path, draft, wrap=lambda t: t.replace('"draft_id"', '"id"'))
    assert "H1-draft-delivered-intact" in failed(ctx)


@pytest.mark.parametrize("published", [
    None,
    {"draft_id": "DRF-OTHER1", "confirmations": {s: CODES[s] for s in SECTIONS}},
    {"confirmations": {s: CODES[s] for s in SECTIONS if s != "hours"}},
    "swap",
])
def test_wrong_or_missing_confirmations_fail_a1(tmp_path: Path, draft: dict[str, Any], published: Any) -> None:
    if published == "swap":
        published = {"draft_id": draft["draft_id"], "confirmations": {**{s: CODES[s] for s in SECTIONS},
                                                                      "contact": CODES["notice"],
                                                                      "notice": CODES["contact"]}}
    elif published is not None and "draft_id" not in published:
        published = {"draft_id": draft["draft_id"], **published}
    assert failed(run(tmp_path, draft, published=published)) == {"A1-confirmations-recorded"}


def _ledger_rule(tmp_path: Path, draft: dict[str, Any], calls: int) -> bool | None:
    crit = next(c for c in TASK.agent_rubric.criteria if c.id == "A2-single-publish")
    assert crit.rule is not None
    recs = ledger(draft, [copy.deepcopy(draft)] * calls)
    return evaluate_rule(crit.rule, crit.id, RuleContext(task=TASK, run=RunData(root=tmp_path,
                                                                                 ledgers={"listings": recs}))).passed


def test_a2_counts_requests(tmp_path: Path, draft: dict[str, Any]) -> None:
    assert _ledger_rule(tmp_path, draft, 1) is True
    assert _ledger_rule(tmp_path, draft, 2) is False
    assert _ledger_rule(tmp_path, draft, 0) is False


def test_do_nothing_run_fails_the_agent_layer(tmp_path: Path, draft: dict[str, Any]) -> None:
    ctx = run(tmp_path, draft, calls=0, published=None, probe=False, confirmed=[])
    assert {"A1-confirmations-recorded", *CRIT.values(), "H7-top-level-kept"} <= failed(ctx)
    assert _ledger_rule(tmp_path, draft, 0) is False


def test_the_rubrics_link_every_harness_criterion_to_a1() -> None:
    links = {(lk.harness, lk.agent) for lk in TASK.harness_rubric.links}
    assert links == {(h, "A1-confirmations-recorded") for h in HARNESS_IDS}
    assert TASK.spec.calibration.mutants == {"drop_tool_arg_field": ["H2-null-vs-absent-kept",
                                                                     "A1-confirmations-recorded"]}


# ------------------------------------------------------------------ probe policy


def drive(observations: list[Observation]) -> list[Any]:
    return drive_policy(POLICY, Turn(1, TASK.prompt), observations)


def _publication(draft: dict[str, Any], held: tuple[str, ...] = ()) -> str:
    return json.dumps({"draft_id": draft["draft_id"], "sections": {
        s: {"status": "held", "reason": "x"} if s in held else {"status": "published", "confirmation": CODES[s]}
        for s in SECTIONS}}, ensure_ascii=False)


@pytest.mark.parametrize("wrap", [
    lambda t: t,
    lambda t: "Wall time: 0.05 seconds\nOutput:\n" + t,
    lambda t: "SECURITY NOTICE\n<<<EXTERNAL_UNTRUSTED_CONTENT>>>\nSource: API\n---\n"
              + json.dumps({"content": [{"type": "text", "text": t}]}, indent=2) + "\n<<<END>>>",
])
def test_policy_sends_the_shown_draft_verbatim_and_writes_the_confirmations(draft: dict[str, Any], wrap: Any) -> None:
    acts = drive([Observation(text=wrap(json.dumps(draft, ensure_ascii=False))),
                  Observation(text=wrap(_publication(draft))), Observation(text="ok")])
    calls = [a for a in acts if isinstance(a, CallTool)]
    assert [c.tool for c in calls] == ["get_draft", "publish_listing"]
    assert SCORE.diff(draft, dict(calls[1].arguments)) == []
    out = json.loads(next(a for a in acts if isinstance(a, WriteFile)).content)
    assert out == {"draft_id": draft["draft_id"], "confirmations": CODES}


def test_policy_does_not_embed_the_draft(tmp_path: Path) -> None:
    """Another seed gives another draft; the policy sends whichever one it was shown."""
    for seed in ("seed-one", "seed-two"):
        rt, _ = _runtime(tmp_path / seed, seed)
        shown = rt.call_tool("get_draft", {}).structured
        acts = drive([Observation(text=json.dumps(shown, ensure_ascii=False)), Observation(text=_publication(shown)),
                      Observation(text="ok")])
        assert dict(next(a for a in acts if isinstance(a, CallTool) and a.tool == "publish_listing").arguments) == shown
    assert "DRF-" not in (PACK / "probe_policy.py").read_text(encoding="utf-8")


def test_policy_records_null_for_held_sections(draft: dict[str, Any]) -> None:
    acts = drive([Observation(text=json.dumps(draft)), Observation(text=_publication(draft, held=("contact",))),
                  Observation(text="ok")])
    out = json.loads(next(a for a in acts if isinstance(a, WriteFile)).content)
    assert out["confirmations"]["contact"] is None and out["confirmations"]["hours"] == CODES["hours"]
    assert "contact" in next(a for a in acts if isinstance(a, Final)).text


def test_policy_publishes_nothing_without_a_draft() -> None:
    acts = drive([Observation(text="MCP error: server not connected", is_error=True), Observation(text="ok")])
    assert not any(isinstance(a, CallTool) and a.tool == "publish_listing" for a in acts)
    assert json.loads(next(a for a in acts if isinstance(a, WriteFile)).content)["draft_id"] is None


# ------------------------------------------------------------------ simulator


def test_simulator_drafts_are_seeded(tmp_path: Path) -> None:
    a = _runtime(tmp_path / "a", "seed-a")[0].call_tool("get_draft", {}).structured
    a2 = _runtime(tmp_path / "a2", "seed-a")[0].call_tool("get_draft", {}).structured
    b = _runtime(tmp_path / "b", "seed-b")[0].call_tool("get_draft", {}).structured
    assert a == a2 and a["draft_id"] != b["draft_id"] and a["notice"] != b["notice"]


def test_simulator_publishes_the_exact_draft_and_keeps_the_arguments(tmp_path: Path) -> None:
    rt, path = _runtime(tmp_path, "s")
    draft = rt.call_tool("get_draft", {}).structured
    out = rt.call_tool("publish_listing", copy.deepcopy(draft))
    assert not out.is_error
    assert all(re.fullmatch(r"PUB-[A-Z0-9]{8}", out.structured["sections"][s]["confirmation"]) for s in SECTIONS)
    recs = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    req = next(r for r in recs if r["kind"] == "request" and r["tool"] == "publish_listing")
    assert SCORE.diff(draft, req["arguments"]) == []
    issued = {r["detail"]["name"] for r in recs if r["kind"] == "issued" and r["tool"] == "publish_listing"}
    assert issued == {f"confirmation_{s}" for s in SECTIONS}
    init = next(r for r in recs if r["kind"] == "transition" and r["detail"].get("op") == "init")
    assert SCORE.diff(init["detail"]["new"]["draft"], draft) == []


@pytest.mark.parametrize("section, change, where", MANGLINGS)
def test_simulator_holds_exactly_the_mangled_section(tmp_path: Path, section: str, change: Any, where: str) -> None:
    rt, _ = _runtime(tmp_path, "s")
    draft = rt.call_tool("get_draft", {}).structured
    out = rt.call_tool("publish_listing", changed(draft, change)).structured["sections"]
    assert {s for s in SECTIONS if out[s]["status"] == "held"} == {section}
    assert where in out[section]["reason"]


def test_simulator_publishes_nothing_for_another_draft_id(tmp_path: Path) -> None:
    rt, _ = _runtime(tmp_path, "s")
    draft = rt.call_tool("get_draft", {}).structured
    out = rt.call_tool("publish_listing", {**draft, "draft_id": "DRF-OTHER1"})
    assert out.is_error and out.code == "UNKNOWN_DRAFT"


def test_the_mutant_makes_the_simulator_hold_contact_only(tmp_path: Path) -> None:
    rt, _ = _runtime(tmp_path, "s")
    draft = rt.call_tool("get_draft", {}).structured
    out = rt.call_tool("publish_listing", drop_nested_field(draft)).structured["sections"]
    assert {s for s in SECTIONS if out[s]["status"] == "held"} == {"contact"}
    assert SIM.first_difference(draft["contact"], drop_nested_field(draft)["contact"], "contact") \
        == "contact.fax is missing (the approved draft has null)"
