"""T4-payout-statement-001: the settlement simulator (seeded statement with every lossy-conversion
shape, a text content that is only a summary), the verifier on hand-built runs (faithful relays in
every wrapper the harnesses use; the structured result dropped; each lossy conversion; a lossy
record; wrong or missing deliverables; a do-nothing run) and the probe policy (it writes exactly
what it was shown, and nothing when only the summary arrived)."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from apparatus.simulators.engine import ServiceRuntime
from apparatus.simulators.ledger import Ledger
from apparatus.simulators.spec import load_service, simulator_specs
from tests.tasks import drive as drive_policy
from tests.tasks import load_module as _load
from tracetrial.policy import CallTool, Final, NativeTool, Observation, Turn, TurnView, WriteFile
from tracetrial.task import load_task
from tracetrial.trace import EventBase, ToolCall, ToolEvent, ToolResult
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "T4-payout-statement-001"
NOW = datetime.now(UTC)
SCORE = _load(PACK / "verifier" / "score.py", "t4_payout_score")
POLICY = _load(PACK / "probe_policy.py", "t4_payout_policy")
TASK = load_task(PACK)
H1, H2 = "H1-structured-result-delivered", "H2-structured-result-recorded"
A1, A2, A3 = "A1-batch-and-reference-exact", "A2-settled-payouts-exact", "A3-held-payouts-listed"
IDS = {H1, H2, A1, A2, A3}
TRUTH = json.loads((PACK / "truth.json").read_text())
TOOL = "mcp__settlements__get_settlement"


def _runtime(tmp: Path, seed: str) -> tuple[ServiceRuntime, Path]:
    sims = {s.name: s for s in simulator_specs(PACK)}
    led = Ledger(tmp / "settlements.jsonl", "settlements")
    led.init()
    rt = ServiceRuntime(load_service(PACK, sims["settlements"]), tmp / "state", led, seed)
    rt.start_session()
    return rt, tmp / "settlements.jsonl"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str, list[dict[str, Any]]]:
    tmp = tmp_path_factory.mktemp("sim")
    rt, path = _runtime(tmp, "unit-seed")
    out = rt.call_tool("get_settlement", {"week": "2026-W48"})
    records = [json.loads(line) for line in path.read_text().splitlines()]
    return out.structured, out.text, records


def js_number(n: int) -> int:
    """What a JavaScript JSON.parse → JSON.stringify round trip makes of an integer (as Python
    reads the printed digits back): the double nearest to it, printed in its shortest form."""
    return int(repr(float(n)).replace(".0", "")) if "e" not in repr(float(n)) else int(float(n))


def reconciliation(statement: dict[str, Any]) -> dict[str, Any]:
    statement = copy.deepcopy(statement)
    return {"batch_id": statement["batch_id"], "bank_reference": statement["bank_reference"],
            "settled": [p for p in statement["payouts"] if p["status"] == "settled"],
            "held": [p["payout_id"] for p in statement["payouts"] if p["status"] == "held"]}


def relay(statement: Any, summary: str = "Settlement summary.") -> str:
    """The reference harness's relay: the MCP result as JSON (structuredContent kept)."""
    out: dict[str, Any] = {"isError": False, "content": [{"type": "text", "text": summary}]}
    if statement is not None:
        out["structuredContent"] = statement
    return json.dumps(out, ensure_ascii=False)


def run(tmp: Path, records: list[dict[str, Any]], *, delivered: str | None, recorded: Any = "same",
        raw_event: Any = None, recon: Any = "none", probe: bool = True, call_id: str = "call_1",
        event_id: str = "call_1", extra_results: list[dict[str, Any]] | None = None) -> VerifierContext:
    ws = tmp / "workspace"
    ws.mkdir(parents=True, exist_ok=True)
    if recon != "none":
        (ws / "reconciliation.json").write_text(recon if isinstance(recon, str) else json.dumps(recon))
    results = [] if delivered is None else [{"id": call_id, "is_error": None, "content": delivered,
                                             "content_truncated": False}]
    gateway = [{"index": 1, "wire_format": "chat", "status": 200, "error": None, "tool_results": []},
               {"index": 2, "wire_format": "chat", "status": 200, "error": None,
                "tool_results": results + (extra_results or [])}]
    content = delivered if recorded == "same" else recorded
    events: list[EventBase] = [ToolEvent(
        seq=4, timestamp=NOW, run_id="r", raw_event=raw_event,
        tool_call=ToolCall(id=event_id, name=TOOL, arguments={"week": "2026-W48"}),
        tool_result=None if content is None and raw_event is None else ToolResult(content=content))]
    report = {"requests": [{"index": 1, "action": "call_tool", "mapped_tool": TOOL, "call_id": call_id,
                            "arguments": {"week": "2026-W48"}}]}
    return VerifierContext(workspace=ws, baseline=ws, truth=TRUTH, oracle=None, events=events, gateway=gateway,
                           probe=report if probe else None, ledgers={"settlements": records}, run_dir=tmp)


def verdicts(ctx: VerifierContext) -> dict[str, tuple[bool, str]]:
    out = SCORE.score(ctx)
    assert set(out) == IDS
    return out


def failed(ctx: VerifierContext) -> set[str]:
    return {k for k, v in verdicts(ctx).items() if not v[0]}


# ------------------------------------------------------------------ pack and simulator


def test_pack_declares_the_mutant_and_property() -> None:
    assert TASK.spec.property == "structured_result_fidelity" and TASK.spec.component == "T"
    assert set(TASK.spec.calibration.mutants["drop_structured_content"]) == IDS


def test_the_statement_holds_every_lossy_shape(served: tuple[dict[str, Any], str, list[dict[str, Any]]]) -> None:
    st, _, _ = served
    big = [st["bank_reference"]] + [p["bank_trace"] for p in st["payouts"]]
    assert all(isinstance(n, int) and 2 ** 53 < n < 2 ** 63 for n in big)
    assert any(int(float(n)) != n for n in big)  # at least one is not a double (every one, almost surely)
    amounts = [p["amount"] for p in st["payouts"]] + [a["amount"] for p in st["payouts"] for a in p.get("adjustments", [])]
    assert all(isinstance(a, str) and a.endswith("0") and "." in a for a in amounts)
    memos = [("memo" in p, p.get("memo")) for p in st["payouts"] if p["status"] == "settled"]
    assert (True, None) in memos and (False, None) in memos and any(isinstance(m, str) for _, m in memos)
    assert any(ord(c) > 0x3000 for c in st["payouts"][0]["payee"])  # CJK
    assert isinstance(st["payouts"][1]["adjustments"], list) and len(st["payouts"][1]["adjustments"]) == 2
    assert [p["status"] for p in st["payouts"]].count("held") == 1


def test_the_text_content_is_only_a_summary(served: tuple[dict[str, Any], str, list[dict[str, Any]]]) -> None:
    st, text, _ = served
    assert st["batch_id"] in text and "structured result" in text
    assert str(st["bank_reference"]) not in text
    for p in st["payouts"]:
        assert p["amount"] not in text and p["payout_id"] not in text and str(p["bank_trace"]) not in text
    assert SCORE.statements_in(text) == []


def test_values_follow_the_seed(tmp_path: Path) -> None:
    a = _runtime(tmp_path / "a", "seed-a")[0].call_tool("get_settlement", {"week": "2026-W48"}).structured
    a2 = _runtime(tmp_path / "a2", "seed-a")[0].call_tool("get_settlement", {"week": "2026-W48"}).structured
    b = _runtime(tmp_path / "b", "seed-b")[0].call_tool("get_settlement", {"week": "2026-W48"}).structured
    assert a == a2 and a != b and a["bank_reference"] != b["bank_reference"] and a["batch_id"] != b["batch_id"]


def test_the_ledger_init_is_the_served_statement(served: tuple[dict[str, Any], str, list[dict[str, Any]]]) -> None:
    st, _, records = served
    ctx = run(Path("/nonexistent"), records, delivered=None)
    got, note = SCORE.served_statement(ctx)
    assert got == st and "served on request seq" in note


def test_an_unknown_week_is_a_business_error(tmp_path: Path) -> None:
    out = _runtime(tmp_path, "s")[0].call_tool("get_settlement", {"week": "2026-W47"})
    assert out.is_error and out.code == "STATEMENT_NOT_FOUND"


# ------------------------------------------------------------------ verifier: faithful relays


@pytest.fixture
def st(served: tuple[dict[str, Any], str, list[dict[str, Any]]]) -> dict[str, Any]:
    return copy.deepcopy(served[0])


@pytest.fixture
def records(served: tuple[dict[str, Any], str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    return copy.deepcopy(served[2])


def test_faithful_reference_relay_passes_everything(tmp_path: Path, st: dict[str, Any], records: Any) -> None:
    out = verdicts(run(tmp_path, records, delivered=relay(st), recon=reconciliation(st)))
    assert all(v[0] for v in out.values()), out


@pytest.mark.parametrize("wrap", [
    # Claude-Code-like: text blocks joined (summary, then the structured JSON as a second text part)
    lambda s: "Settlement summary.\n" + json.dumps(s, ensure_ascii=False),
    # Codex-like: structured content serialised as the whole output
    lambda s: json.dumps(s),
    # a JSON document whose text part holds the statement as an escaped string
    lambda s: json.dumps({"content": [{"type": "text", "text": json.dumps(s)}]}),
    # an untrusted-content notice around it, an Output: header
    lambda s: "<<<EXTERNAL_UNTRUSTED_CONTENT>>>\nSource: MCP\n---\n" + json.dumps(s, indent=2) + "\n<<<END>>>",
    lambda s: "Output:\n" + json.dumps(s, ensure_ascii=True),
], ids=["joined-text-parts", "json-only", "escaped-string", "untrusted-wrapper", "output-header"])
def test_every_lossless_wrapper_passes(tmp_path: Path, st: dict[str, Any], records: Any, wrap: Any) -> None:
    out = verdicts(run(tmp_path, records, delivered=wrap(st), recon=reconciliation(st)))
    assert all(v[0] for v in out.values()), out


def test_h2_reads_the_native_record_when_the_recorded_content_lacks_it(tmp_path: Path, st: dict[str, Any],
                                                                       records: Any) -> None:
    raw = {"result": {"data": {"content": "Settlement summary.", "structured_content": st}}}
    out = verdicts(run(tmp_path, records, delivered=relay(st), recorded="Settlement summary.", raw_event=raw,
                       recon=reconciliation(st)))
    assert out[H2][0] and "raw_event" in out[H2][1], out[H2]


def test_a_live_run_without_probe_matches_the_trace_call_id(tmp_path: Path, st: dict[str, Any], records: Any) -> None:
    out = verdicts(run(tmp_path, records, delivered=relay(st), recon=reconciliation(st), probe=False,
                       call_id="toolu_01", event_id="toolu-01"))
    assert all(v[0] for v in out.values()), out


# ------------------------------------------------------------------ verifier: defects


def test_dropped_structured_content_fails_every_criterion(tmp_path: Path, st: dict[str, Any], records: Any) -> None:
    """The drop_structured_content mutant: only the summary reaches the model and the record;
    the ideal agent writes nothing."""
    ctx = run(tmp_path, records, delivered=relay(None, summary=f"Settlement {st['batch_id']} is closed."))
    out = verdicts(ctx)
    assert failed(ctx) == IDS
    assert "no structured statement" in out[H1][1] and "no structured statement" in out[H2][1]


def _lossy(st: dict[str, Any], kind: str) -> dict[str, Any]:
    bad = copy.deepcopy(st)
    if kind == "js-rounded-integers":
        bad["bank_reference"] = js_number(bad["bank_reference"])
        for p in bad["payouts"]:
            p["bank_trace"] = js_number(p["bank_trace"])
    elif kind == "float-integer":
        bad["bank_reference"] = float(bad["bank_reference"])
    elif kind == "integer-as-string":
        bad["bank_reference"] = str(bad["bank_reference"])
    elif kind == "decimal-as-number":
        bad["payouts"][0]["amount"] = float(bad["payouts"][0]["amount"])
    elif kind == "null-memo-dropped":
        del bad["payouts"][0]["memo"]
    elif kind == "null-memo-added":
        bad["payouts"][3]["memo"] = None
    elif kind == "nested-list-flattened":
        bad["payouts"][1]["adjustments"] = json.dumps(bad["payouts"][1]["adjustments"])
    elif kind == "unicode-mangled":
        bad["payouts"][0]["payee"] = bad["payouts"][0]["payee"].encode("utf-8").decode("latin-1")
    elif kind == "payout-dropped":
        bad["payouts"].pop()
    return bad


LOSSY = ["js-rounded-integers", "float-integer", "integer-as-string", "decimal-as-number", "null-memo-dropped",
         "null-memo-added", "nested-list-flattened", "unicode-mangled", "payout-dropped"]


@pytest.mark.parametrize("kind", LOSSY)
def test_each_lossy_conversion_fails_h1_and_h2(tmp_path: Path, st: dict[str, Any], records: Any, kind: str) -> None:
    bad = _lossy(st, kind)
    assert SCORE.diff(st, bad), kind
    text = relay(None) + "\n" + json.dumps(bad, ensure_ascii=False)
    # the ideal agent copies what it was shown: the deliverable carries the loss as well
    ctx = run(tmp_path, records, delivered=text, recon=reconciliation(bad))
    out = verdicts(ctx)
    assert not out[H1][0] and not out[H2][0], (kind, out)
    assert "altered" in out[H1][1]
    assert not (out[A1][0] and out[A2][0]), (kind, out)


def test_rounded_reference_fails_exactly_a1_downstream(tmp_path: Path, st: dict[str, Any], records: Any) -> None:
    bad = copy.deepcopy(st)
    bad["bank_reference"] = js_number(st["bank_reference"]) if js_number(st["bank_reference"]) != st["bank_reference"] \
        else st["bank_reference"] + 1
    ctx = run(tmp_path, records, delivered=json.dumps(bad), recon=reconciliation(bad))
    assert failed(ctx) == {H1, H2, A1}


def test_one_altered_copy_next_to_an_intact_one_fails_h1(tmp_path: Path, st: dict[str, Any], records: Any) -> None:
    bad = _lossy(st, "js-rounded-integers")
    text = json.dumps({"content": [{"type": "text", "text": json.dumps(bad)}], "structuredContent": st})
    out = verdicts(run(tmp_path, records, delivered=text, recon=reconciliation(st)))
    assert not out[H1][0] and "1/2" in out[H1][1]


def test_an_output_schema_is_not_a_statement(tmp_path: Path, st: dict[str, Any], records: Any) -> None:
    schema = {"name": "settlements__get_settlement", "outputSchema": {
        "type": "object", "properties": {"batch_id": {"type": "string"}, "payouts": {"type": "array"}}}}
    ctx = run(tmp_path, records, delivered=json.dumps(schema), recon=reconciliation(st))
    assert SCORE.statements_in(json.dumps(schema)) == []
    assert failed(ctx) == {H1, H2}


def test_a_search_result_before_the_call_does_not_mask_the_call(tmp_path: Path, st: dict[str, Any],
                                                                records: Any) -> None:
    """OpenClaw: tool_search then tool_call, both recorded for the call_tool action."""
    ctx = run(tmp_path, records, delivered=relay(st), recon=reconciliation(st),
              extra_results=[{"id": "call_0", "content": "found settlements__get_settlement"}])
    assert failed(ctx) == set()


def test_a_result_delivered_under_another_id_falls_back_to_the_batch_id(tmp_path: Path, st: dict[str, Any],
                                                                        records: Any) -> None:
    ctx = run(tmp_path, records, delivered=relay(st), recon=reconciliation(st), call_id="zzz", event_id="yyy",
              probe=False)
    out = verdicts(ctx)
    assert out[H1][0] and "batch id" in out[H1][1]
    assert out[H2][0]  # live run: the trace event is found by its tool name


def test_no_delivery_and_no_record_fail(tmp_path: Path, st: dict[str, Any], records: Any) -> None:
    ctx = run(tmp_path, records, delivered=None, recorded=None, recon=reconciliation(st))
    out = verdicts(ctx)
    assert not out[H1][0] and not out[H2][0] and out[A1][0]


def test_a_statement_never_served_fails_everything(tmp_path: Path, st: dict[str, Any], records: Any) -> None:
    no_call = [r for r in records if r.get("tool") != "get_settlement"]
    assert failed(run(tmp_path, no_call, delivered=relay(st), recon=reconciliation(st))) == IDS


@pytest.mark.parametrize("edit,want", [
    (lambda r: r.update(bank_reference=str(r["bank_reference"])), {A1}),
    (lambda r: r.update(bank_reference=r["bank_reference"] + 1), {A1}),
    (lambda r: r.update(batch_id="STL-XXXXXXXX"), {A1}),
    (lambda r: r.pop("bank_reference"), {A1}),
    (lambda r: r["settled"][0].update(amount=r["settled"][0]["amount"].rstrip("0")), {A2}),
    (lambda r: r["settled"][0].pop("memo"), {A2}),
    (lambda r: r["settled"][-1].update(memo=None), {A2}),
    (lambda r: r["settled"].reverse(), {A2}),
    (lambda r: r["settled"][0].update(note="extra"), {A2}),
    (lambda r: r.update(settled=r["settled"][:-1]), {A2}),
    (lambda r: r.update(held=[]), {A3}),
    (lambda r: r.pop("held"), {A3}),
], ids=["ref-string", "ref-off", "batch", "ref-absent", "amount-zero-lost", "memo-null-dropped", "memo-null-added",
        "order", "extra-field", "payout-missing", "held-empty", "held-absent"])
def test_each_deliverable_defect_fails_its_criterion(tmp_path: Path, st: dict[str, Any], records: Any,
                                                     edit: Any, want: set[str]) -> None:
    recon = reconciliation(st)
    edit(recon)
    assert failed(run(tmp_path, records, delivered=relay(st), recon=recon)) == want


def test_invalid_or_missing_deliverable_fails_the_agent_layer(tmp_path: Path, st: dict[str, Any], records: Any) -> None:
    assert failed(run(tmp_path / "a", records, delivered=relay(st), recon="{not json")) == {A1, A2, A3}
    assert failed(run(tmp_path / "b", records, delivered=relay(st))) == {A1, A2, A3}


def test_a_do_nothing_run_scores_zero_on_the_agent_layer(tmp_path: Path, records: Any) -> None:
    init_only = [r for r in records if r.get("kind") != "request"]
    ctx = VerifierContext(workspace=tmp_path, baseline=tmp_path, truth=TRUTH, oracle=None, events=[], gateway=[],
                          probe=None, ledgers={"settlements": init_only}, run_dir=tmp_path)
    assert failed(ctx) == IDS


# ------------------------------------------------------------------ probe policy


def _turn(tools: tuple[str, ...] = (TOOL, "write_file")) -> Turn:
    return Turn(1, (PACK / "prompt.md").read_text(), view=TurnView(tool_names=tools))


def _drive(text: str, *, is_error: bool | None = None, tools: tuple[str, ...] = (TOOL, "write_file")) -> list[Any]:
    def respond(action: Any) -> Observation:
        if isinstance(action, CallTool):
            return Observation(text=text, is_error=is_error, tool=TOOL, call_id="c1")
        return Observation(text="ok")
    return drive_policy(POLICY, _turn(tools), respond)


@pytest.mark.parametrize("wrap", [relay, lambda s: "Summary.\n" + json.dumps(s),
                                  lambda s: json.dumps({"content": [{"type": "text", "text": json.dumps(s)}]})])
def test_the_policy_writes_exactly_what_it_was_shown(st: dict[str, Any], wrap: Any) -> None:
    actions = _drive(wrap(st))
    assert isinstance(actions[0], CallTool) and actions[0].arguments == {"week": "2026-W48"}
    writes = [a for a in actions if isinstance(a, WriteFile)]
    assert len(writes) == 1 and writes[0].path == "reconciliation.json"
    written = json.loads(writes[0].content)
    assert SCORE.diff(reconciliation(st), written) == [] and isinstance(actions[-1], Final)


def test_the_policy_embeds_no_value(st: dict[str, Any]) -> None:
    other = copy.deepcopy(st)
    other["batch_id"], other["bank_reference"] = "STL-OTHER123", 9223372036854775001
    other["payouts"][0]["amount"] = "1.10"
    written = json.loads(next(a for a in _drive(relay(other)) if isinstance(a, WriteFile)).content)
    assert written == reconciliation(other)


def test_a_lossy_relay_is_copied_as_shown(st: dict[str, Any]) -> None:
    bad = _lossy(st, "js-rounded-integers")
    written = json.loads(next(a for a in _drive(json.dumps(bad)) if isinstance(a, WriteFile)).content)
    assert written["bank_reference"] == bad["bank_reference"]


@pytest.mark.parametrize("text,is_error", [("Settlement STL-X is closed: 4 payouts.", None),
                                           (relay(None), None), ("{\"error\": {\"code\": \"X\"}}", True)])
def test_without_a_statement_the_policy_writes_nothing(text: str, is_error: bool | None) -> None:
    actions = _drive(text, is_error=is_error)
    assert not any(isinstance(a, WriteFile) for a in actions)
    assert isinstance(actions[-1], Final) and "did not write" in actions[-1].text


def test_the_policy_waits_for_a_connecting_mcp_server(st: dict[str, Any]) -> None:
    turn = _turn(("Bash", "Write", "WaitForMcpServers"))
    gen = POLICY.policy(turn)
    first = next(gen)
    assert isinstance(first, NativeTool) and first.name == "WaitForMcpServers"
    assert first.arguments == {"servers": ["settlements"]}
