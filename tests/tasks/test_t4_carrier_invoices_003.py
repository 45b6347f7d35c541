"""T4-carrier-invoices-003: the billing-portal simulator (a seeded cursor-paged listing whose page
text only names the page, the records and next cursor only in the structured result, an unknown
cursor a business error, the ledger's record of the listing and of every page served), the
verifier on hand-built runs (the faithful reference relay and the record shapes observed on Claude
Code, Codex and OpenClaw; the drop_structured_content shape; an altered page, a lost or changed
cursor, a page served but never delivered or recorded; agent mistakes; missing evidence is
unscored) and the probe policy (it follows the chain with the cursors it was shown and writes
exactly what the pages say, or nothing when a page or its cursor did not arrive)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import tempfile
from collections.abc import Callable
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
from tracetrial.trace import ToolCall, ToolEvent, ToolResult
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "T4-carrier-invoices-003"
NOW = datetime.now(UTC)
SCORE = _load(PACK / "verifier" / "score.py", "t4_invoices_score")
POLICY = _load(PACK / "probe_policy.py", "t4_invoices_policy")
SIM = _load(PACK / "simulators" / "freightbills.py", "t4_invoices_sim")
TASK = load_task(PACK)
H1, H2, H3, A1, A2 = SCORE.H1, SCORE.H2, SCORE.H3, SCORE.A1, SCORE.A2
IDS = {H1, H2, H3, A1, A2}
HARNESS = {H1, H2, H3}
TRUTH = json.loads((PACK / "truth.json").read_text())
TOOL = "mcp__freightbills__list_invoices"

Wrap = Callable[[dict[str, Any] | None, str], str]


# ------------------------------------------------------------------ the service


def _runtime(tmp: Path, seed: str) -> tuple[ServiceRuntime, Path]:
    sims = {s.name: s for s in simulator_specs(PACK)}
    led = Ledger(tmp / "freightbills.jsonl", "freightbills")
    led.init()
    rt = ServiceRuntime(load_service(PACK, sims["freightbills"]), tmp / "state", led, seed)
    rt.start_session()
    return rt, tmp / "freightbills.jsonl"


class Served:
    """A run against the real simulator: each call's arguments and outcome, and the ledger."""

    def __init__(self, tmp: Path, seed: str = "unit-seed", *, stop_after: int | None = None,
                 mangle: Callable[[str], str] | None = None) -> None:
        tmp.mkdir(parents=True, exist_ok=True)
        rt, self.path = _runtime(tmp, seed)
        self.calls: list[tuple[dict[str, Any], Any]] = []
        cursor: Any = None
        while True:
            sent = {} if cursor is None else {"cursor": cursor}
            received = sent if cursor is None or mangle is None else {"cursor": mangle(cursor)}
            out = rt.call_tool("list_invoices", received)
            self.calls.append((sent, out))
            if out.is_error or (stop_after is not None and len(self.calls) >= stop_after):
                break
            cursor = out.structured["next_cursor"]
            if cursor is None:
                break

    @property
    def records(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.path.read_text().splitlines()]

    @property
    def pages(self) -> list[dict[str, Any]]:
        return [out.structured for _, out in self.calls if not out.is_error]


@pytest.fixture(scope="module")
def full(tmp_path_factory: pytest.TempPathFactory) -> Served:
    return Served(tmp_path_factory.mktemp("full"))


def listing_of(served: Served) -> dict[str, Any]:
    return next(r["detail"]["new"] for r in served.records
                if r["kind"] == "transition" and r["detail"].get("at") == ["listing"])


def reconciliation(pages: list[dict[str, Any]]) -> dict[str, Any]:
    invoices = [inv for p in pages for inv in p["invoices"]]
    return {"month": "2026-11", "invoice_count": len(invoices),
            "total_cents": sum(inv["amount_cents"] for inv in invoices),
            "disputed": [inv["invoice_id"] for inv in invoices if inv["status"] == "disputed"]}


def test_pack_declares_the_mutant_and_property() -> None:
    assert TASK.spec.property == "structured_result_fidelity" and TASK.spec.component == "T"
    assert set(TASK.spec.calibration.mutants["drop_structured_content"]) == IDS
    assert set(TASK.spec.calibration.mutants) == {"drop_structured_content"}


def test_the_listing_is_paged_with_opaque_cursors(full: Served) -> None:
    pages = full.pages
    assert 3 <= len(pages) <= 4 and [p["page"] for p in pages] == list(range(1, len(pages) + 1))
    assert all(p["pages"] == len(pages) and 4 <= len(p["invoices"]) <= 7 for p in pages)
    cursors = [p["next_cursor"] for p in pages]
    assert cursors[-1] is None and all(isinstance(c, str) and c.startswith("nlf1.") for c in cursors[:-1])
    assert len(set(cursors[:-1])) == len(cursors) - 1
    ids = [inv["invoice_id"] for p in pages for inv in p["invoices"]]
    assert len(ids) == len(set(ids))
    # a disputed invoice on page 1 and one later: neither deliverable can be had from page 1 alone
    assert any(inv["status"] == "disputed" for inv in pages[0]["invoices"])
    assert any(inv["status"] == "disputed" for p in pages[1:] for inv in p["invoices"])
    for inv in (inv for p in pages for inv in p["invoices"]):
        assert isinstance(inv["amount_cents"], int) and ("dispute_reason" in inv) == (inv["status"] == "disputed")


def test_the_text_content_only_names_the_page(full: Served) -> None:
    for _, out in full.calls:
        page = out.structured
        assert f"page {page['page']} of {page['pages']}" in out.text and "structured result" in out.text
        assert SCORE.PAGE_TEXT_RE.search(out.text)
        assert page["next_cursor"] is None or page["next_cursor"] not in out.text
        assert not any(inv["invoice_id"] in out.text or str(inv["amount_cents"]) in out.text
                       for inv in page["invoices"])
        assert SCORE.pages_in(out.text) == [] and POLICY.first_page(out.text) is None


def test_values_follow_the_seed(tmp_path: Path) -> None:
    a, a2, b = (Served(tmp_path / n, seed).pages for n, seed in (("a", "s-a"), ("a2", "s-a"), ("b", "s-b")))
    assert a == a2 and a != b
    assert a[0]["next_cursor"] != b[0]["next_cursor"]


def test_the_ledger_holds_the_listing_and_every_page_served(full: Served) -> None:
    records = full.records
    stored = [r for r in records if r["kind"] == "transition" and r["detail"].get("at") == ["listing"]]
    served = [r["detail"]["new"] for r in records if r["kind"] == "transition" and r["detail"].get("at") == ["served"]]
    assert len(stored) == 1 and served == full.pages
    ctx = VerifierContext(workspace=Path("/nonexistent"), baseline=Path("/nonexistent"), truth=TRUTH, oracle=None,
                          events=[], gateway=[], probe=None, ledgers={"freightbills": records}, run_dir=Path("/x"))
    truth = SCORE.Served(ctx)
    assert truth.pages == full.pages and truth.received == [None] + [p["next_cursor"] for p in full.pages[:-1]]
    assert reconciliation(full.pages) == {"month": "2026-11", "invoice_count": len(truth.invoices()),
                                          "total_cents": sum(i["amount_cents"] for i in truth.invoices()),
                                          "disputed": [i["invoice_id"] for i in truth.invoices()
                                                       if i["status"] == "disputed"]}


def test_an_unknown_cursor_is_a_business_error_and_null_is_page_one(tmp_path: Path) -> None:
    rt, _ = _runtime(tmp_path, "s")
    out = rt.call_tool("list_invoices", {"cursor": "nlf1.forged"})
    assert out.is_error and out.code == "INVALID_CURSOR"
    first = rt.call_tool("list_invoices", {"cursor": None})
    assert not first.is_error and first.structured["page"] == 1
    assert rt.call_tool("list_invoices", {}).structured == first.structured


# ------------------------------------------------------------------ relays (the shapes each harness used)


def relay(page: dict[str, Any] | None, text: str) -> str:
    """The reference harness (and the drop_structured_content mutant with ``page`` None)."""
    out: dict[str, Any] = {"isError": False, "content": [{"type": "text", "text": text}]}
    if page is not None:
        out["structuredContent"] = page
    return json.dumps(out, ensure_ascii=False)


def claude_code(page: dict[str, Any] | None, text: str) -> str:
    """Claude Code 2.1.220: the structuredContent as compact JSON, in place of the text."""
    return text if page is None else json.dumps(page, separators=(",", ":"))


def codex(page: dict[str, Any] | None, text: str) -> str:
    """Codex 0.145.0: a wall-time header, then the structuredContent as compact JSON."""
    body = text if page is None else json.dumps(page, separators=(",", ":"))
    return f"Wall time: 0.0694 seconds\nOutput:\n{body}"


def openclaw(page: dict[str, Any] | None, text: str) -> str:
    """OpenClaw 2026.9.6: an untrusted-content notice around the pretty JSON of the projected result:
    a text part ``structuredContent:`` + the page (sorted keys), the text part, and the page again
    in ``details.structuredContent``."""
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}]
    details: dict[str, Any] = {"mcpServer": "freightbills", "mcpTool": "list_invoices"}
    if page is not None:
        parts.insert(0, {"type": "text", "text": "structuredContent:\n" + json.dumps(page, indent=2, sort_keys=True)})
        details["structuredContent"] = page
    doc = {"tool": {"id": "mcp:freightbills:freightbills__list_invoices", "name": "freightbills__list_invoices",
                    "source": "mcp"}, "result": {"content": parts, "details": details}}
    return ("SECURITY NOTICE: The following content is from an EXTERNAL, UNTRUSTED source (e.g., email, webhook).\n"
            '<<<EXTERNAL_UNTRUSTED_CONTENT id="x">>>\nSource: API\n---\n' + json.dumps(doc, indent=2)
            + '\n<<<END_EXTERNAL_UNTRUSTED_CONTENT id="x">>>')


WRAPS = {"reference": relay, "claude_code": claude_code, "codex": codex, "openclaw": openclaw}


# ------------------------------------------------------------------ hand-built runs


def run(tmp: Path, served: Served, *, wrap: Wrap = relay, shown: Callable[[dict[str, Any]], Any] | None = None,
        deliver: bool = True, recorded: str = "same", raw_event: Any = None, recon: Any = "auto",
        probe: bool = True, events: bool = True, gateway: bool = True, ledger: list[dict[str, Any]] | None = None,
        skip_delivery: set[int] | None = None, tool_name: str = TOOL, wrap_args: bool = False) -> VerifierContext:
    """A run over ``served``'s calls: each result relayed to the model with ``wrap`` (``shown`` alters
    the page the harness relays), recorded in the Trace IR, and the probe's call_tool actions."""
    ws = tmp / "workspace"
    ws.mkdir(parents=True, exist_ok=True)
    pages_shown: list[dict[str, Any]] = []
    results, evs, requests = [], [], []
    for n, (args, out) in enumerate(served.calls, start=1):
        call = f"call_tt_{n}"
        page = None if out.is_error else out.structured
        if page is not None and shown is not None:
            page = shown(copy.deepcopy(page))
        if page is not None:
            pages_shown.append(page)
        text = out.text if out.is_error else wrap(page, out.text)
        if deliver and n not in (skip_delivery or set()):
            results.append({"index": n + 1, "wire_format": "chat", "status": 200, "error": None,
                            "tool_results": [{"id": call, "is_error": None, "content": text,
                                              "content_truncated": False}]})
        content = text if recorded == "same" else recorded
        arguments = {"id": "freightbills__list_invoices", "args": args} if wrap_args else args
        evs.append(ToolEvent(seq=10 + n, timestamp=NOW, run_id="r", raw_event=raw_event,
                             tool_call=ToolCall(id=call, name=tool_name, arguments=arguments),
                             tool_result=ToolResult(content=content)))
        requests.append({"index": n, "action": "call_tool", "mapped_tool": TOOL, "call_id": call, "arguments": args})
    if recon == "auto":
        complete = len(pages_shown) == len(served.calls) and bool(pages_shown) \
            and "next_cursor" in pages_shown[-1] and pages_shown[-1]["next_cursor"] is None
        recon = reconciliation(pages_shown) if complete else None
    if recon is not None:
        (ws / "reconciliation.json").write_text(recon if isinstance(recon, str) else json.dumps(recon))
    first = [{"index": 1, "wire_format": "chat", "status": 200, "error": None, "tool_results": []}]
    return VerifierContext(
        workspace=ws, baseline=ws, truth=TRUTH, oracle=None, events=list(evs) if events else [],
        gateway=first + results if gateway else [], probe={"requests": requests} if probe else None,
        ledgers={"freightbills": served.records if ledger is None else ledger}, run_dir=tmp)


def verdicts(ctx: VerifierContext) -> dict[str, tuple[bool | None, str]]:
    out: dict[str, tuple[bool | None, str]] = SCORE.score(ctx)
    assert set(out) == IDS
    return out


def failed(ctx: VerifierContext) -> set[str]:
    return {k for k, v in verdicts(ctx).items() if v[0] is False}


def unscored(ctx: VerifierContext) -> set[str]:
    return {k for k, v in verdicts(ctx).items() if v[0] is None}


# ------------------------------------------------------------------ verifier: faithful relays


@pytest.mark.parametrize("harness", sorted(WRAPS))
def test_each_observed_faithful_relay_passes_everything(tmp_path: Path, full: Served, harness: str) -> None:
    out = verdicts(run(tmp_path, full, wrap=WRAPS[harness]))
    assert all(v[0] is True for v in out.values()), out
    assert f"pages served {list(range(1, len(full.pages) + 1))}" in out[H1][1]


def test_openclaws_two_copies_are_both_graded(tmp_path: Path, full: Served) -> None:
    out = verdicts(run(tmp_path, full, wrap=openclaw))
    assert "2 copy(ies) of page(s) [1]" in out[H1][1]


@pytest.mark.parametrize("wrap", [
    lambda p, t: t + "\n" + json.dumps(p),  # text parts joined: the page text, then the page
    lambda p, t: json.dumps({"content": [{"type": "text", "text": json.dumps(p)}]}),  # page as an escaped string
    lambda p, t: "Output:\n" + json.dumps(p, ensure_ascii=True, indent=1),
], ids=["joined-text-parts", "escaped-string", "output-header"])
def test_other_lossless_wrappers_pass(tmp_path: Path, full: Served, wrap: Wrap) -> None:
    assert failed(run(tmp_path, full, wrap=wrap)) == set()


def test_h3_reads_the_native_record_when_the_recorded_content_lacks_the_page(tmp_path: Path, full: Served) -> None:
    raw = {"result": {"structured_content": full.pages[0]}}
    ctx = run(tmp_path, Served(tmp_path / "one", stop_after=1), recorded="page 1 of 3", raw_event=raw, recon=None)
    out = verdicts(ctx)
    assert out[H3][0] is True and "raw_event" in out[H3][1]


def test_a_live_run_matches_the_trace_and_reads_wrapped_cursor_arguments(tmp_path: Path, full: Served) -> None:
    """No probe report: the call ids come from the Trace IR, the cursors the model sent from its
    recorded arguments (OpenClaw's ``tool_call {id, args}`` wrapper)."""
    out = verdicts(run(tmp_path, full, wrap=openclaw, probe=False, wrap_args=True))
    assert all(v[0] is True for v in out.values()), out
    assert "Trace IR arguments" in out[H2][1]


def test_results_under_unknown_ids_are_found_by_content(tmp_path: Path, full: Served) -> None:
    ctx = run(tmp_path, full, wrap=claude_code, probe=False, tool_name="some_renamed_tool")
    out = verdicts(ctx)
    assert out[H1][0] is True and "matched by content" in out[H1][1]


# ------------------------------------------------------------------ verifier: harness defects


@pytest.mark.parametrize("harness", sorted(WRAPS))
def test_dropped_structured_content_fails_every_criterion(tmp_path: Path, harness: str) -> None:
    """drop_structured_content: only "page 1 of N" reaches the model and the record; the ideal
    agent has no cursor, stops after page 1 and writes nothing."""
    served = Served(tmp_path / "sim", stop_after=1)
    ctx = run(tmp_path, served, wrap=lambda p, t: WRAPS[harness](None, t), recon=None)
    out = verdicts(ctx)
    assert failed(ctx) == IDS, out
    assert "no page in it" in out[H1][1] and "never reached the model" in out[H2][1]


@pytest.mark.parametrize("alter", [
    lambda p: p["invoices"][0].update(amount_cents=p["invoices"][0]["amount_cents"] + 1),
    lambda p: p["invoices"][0].update(amount_cents=str(p["invoices"][0]["amount_cents"])),
    lambda p: p["invoices"][-1].update(status="open"),
    lambda p: p["invoices"].pop(),
    lambda p: p["invoices"][0].pop("shipment"),
], ids=["amount-off", "amount-as-string", "status-changed", "invoice-dropped", "field-dropped"])
def test_an_altered_page_fails_h1_and_h3(tmp_path: Path, full: Served, alter: Callable[[dict[str, Any]], None]) -> None:
    def shown(p: dict[str, Any]) -> dict[str, Any]:
        if p["page"] == 2:
            alter(p)
        return p
    out = verdicts(run(tmp_path, full, shown=shown, recon=None))
    assert out[H1][0] is False and "page 2 differs" in out[H1][1], out[H1]
    assert out[H3][0] is False and out[H2][0] is True


def test_an_integral_float_amount_is_the_same_json_number(tmp_path: Path, full: Served) -> None:
    def shown(p: dict[str, Any]) -> dict[str, Any]:
        p["invoices"][0]["amount_cents"] = float(p["invoices"][0]["amount_cents"])
        return p
    assert failed(run(tmp_path, full, shown=shown)) == set()


def test_a_lost_cursor_fails_h1_and_h2_and_the_agent_stops(tmp_path: Path) -> None:
    """A harness that relays the records but drops next_cursor: the chain breaks after page 1."""
    served = Served(tmp_path / "sim", stop_after=1)

    def shown(p: dict[str, Any]) -> dict[str, Any]:
        del p["next_cursor"]
        return p
    ctx = run(tmp_path, served, shown=shown, recon=None)
    out = verdicts(ctx)
    assert out[H2][0] is False and "page 1" in out[H2][1]
    assert out[H1][0] is False and out[A1][0] is False and out[A2][0] is False


def test_a_cursor_changed_on_the_way_back_fails_h2_only_among_the_harness_criteria(tmp_path: Path) -> None:
    """The model sent the cursor it was shown; the service received another one (INVALID_CURSOR)."""
    served = Served(tmp_path / "sim", mangle=lambda c: c[:-1])  # e.g. a harness that trims the last character
    assert served.calls[-1][1].is_error
    ctx = run(tmp_path, served, recon=None)
    out = verdicts(ctx)
    assert failed(ctx) == {H2, A1, A2}, out
    assert "never reached the service verbatim" in out[H2][1]


def test_a_served_page_never_delivered_fails_h1(tmp_path: Path, full: Served) -> None:
    out = verdicts(run(tmp_path, full, skip_delivery={2}))
    assert out[H1][0] is False and "[2] never reached the model" in out[H1][1]


def test_a_copy_of_a_page_never_served_fails_h1(tmp_path: Path, full: Served) -> None:
    def shown(p: dict[str, Any]) -> dict[str, Any]:
        p["page"] = p["page"] + 10
        return p
    out = verdicts(run(tmp_path, full, shown=shown))
    assert out[H1][0] is False and "never served" in out[H1][1]


def test_a_record_without_the_pages_fails_h3_only(tmp_path: Path, full: Served) -> None:
    ctx = run(tmp_path, full, recorded="Nordhavn Linjefart A/S invoices for 2026-11: page 1 of 3.")
    assert failed(ctx) == {H3}


def test_an_output_schema_is_not_a_page(tmp_path: Path) -> None:
    schema = {"name": "list_invoices", "outputSchema": {"type": "object", "properties": {
        "page": {"type": "integer"}, "invoices": {"type": "array"}, "next_cursor": {"type": ["string", "null"]}}}}
    assert SCORE.pages_in(json.dumps(schema)) == [] and POLICY.first_page(json.dumps(schema)) is None
    served = Served(tmp_path / "sim", stop_after=1)
    ctx = run(tmp_path, served, wrap=lambda p, t: json.dumps(schema), recon=None)
    assert {H1, H2, H3} <= failed(ctx)


# ------------------------------------------------------------------ verifier: agent mistakes


def test_an_agent_that_stops_early_is_blamed_alone(tmp_path: Path) -> None:
    """Every page it was shown was exact and its cursor delivered: stopping is the agent's fault."""
    served = Served(tmp_path / "sim", stop_after=2)
    ctx = run(tmp_path, served, recon=reconciliation(served.pages))
    assert failed(ctx) == {A1, A2}


@pytest.mark.parametrize("edit,want", [
    (lambda r: r.update(total_cents=r["total_cents"] + 1), {A1}),
    (lambda r: r.update(total_cents=str(r["total_cents"])), {A1}),
    (lambda r: r.update(invoice_count=r["invoice_count"] - 1), {A1}),
    (lambda r: r.update(invoice_count=True), {A1}),
    (lambda r: r.update(month="2026-12"), {A1}),
    (lambda r: r.pop("total_cents"), {A1}),
    (lambda r: r["disputed"].reverse(), {A2}),
    (lambda r: r["disputed"].pop(), {A2}),
    (lambda r: r.pop("disputed"), {A2}),
    (lambda r: r.update(disputed=",".join(r["disputed"])), {A2}),
], ids=["total-off", "total-string", "count-off", "count-bool", "month", "total-absent", "disputed-order",
        "disputed-missing", "disputed-absent", "disputed-string"])
def test_each_deliverable_defect_fails_its_criterion(tmp_path: Path, full: Served, edit: Any, want: set[str]) -> None:
    recon = reconciliation(full.pages)
    edit(recon)
    assert failed(run(tmp_path, full, recon=recon)) == want


def test_invalid_or_missing_deliverable_fails_the_agent_layer(tmp_path: Path, full: Served) -> None:
    assert failed(run(tmp_path / "a", full, recon="{not json")) == {A1, A2}
    assert failed(run(tmp_path / "b", full, recon=None)) == {A1, A2}
    assert failed(run(tmp_path / "c", full, recon="[]")) == {A1, A2}


# ------------------------------------------------------------------ verifier: missing evidence


def test_missing_evidence_is_unscored_never_a_pass(tmp_path: Path, full: Served) -> None:
    no_gateway = verdicts(run(tmp_path / "g", full, gateway=False))
    assert no_gateway[H1][0] is None and no_gateway[H2][0] is None and no_gateway[H3][0] is True
    no_trace = verdicts(run(tmp_path / "t", full, events=False))
    assert no_trace[H3][0] is None and "Trace IR" in no_trace[H3][1]


def test_a_run_where_no_page_was_served_leaves_the_harness_layer_unscored(tmp_path: Path, full: Served) -> None:
    """A do-nothing run: the mechanism was never exercised (no call), the agent layer fails."""
    init_only = [r for r in full.records if r.get("tool") is None]
    ctx = VerifierContext(workspace=tmp_path, baseline=tmp_path, truth=TRUTH, oracle=None, events=[], gateway=[],
                          probe=None, ledgers={"freightbills": init_only}, run_dir=tmp_path)
    out = verdicts(ctx)
    assert unscored(ctx) == HARNESS and failed(ctx) == {A1, A2}, out
    assert "never exercised" in out[H1][1]


def test_a_recorded_page_with_no_listing_in_the_ledger_fails_the_agent_layer(tmp_path: Path, full: Served) -> None:
    no_listing = [r for r in full.records if not (r["kind"] == "transition" and r["detail"].get("at") == ["listing"])]
    out = verdicts(run(tmp_path, full, ledger=no_listing))
    assert out[A1][0] is False and out[A2][0] is False and "holds no listing" in out[A1][1]


def test_a_delivered_service_error_is_not_graded_as_a_missing_page(tmp_path: Path) -> None:
    served = Served(tmp_path / "sim", mangle=lambda c: c + "x")
    out = verdicts(run(tmp_path, served, recon=None))
    assert out[H1][0] is True and "a service error" in out[H1][1]


# ------------------------------------------------------------------ probe policy


def _turn(tools: tuple[str, ...] = (TOOL, "write_file")) -> Turn:
    return Turn(1, TASK.prompt, view=TurnView(tool_names=tools))


def _drive(served: Served, wrap: Wrap = relay, *, shown: Callable[[dict[str, Any]], Any] | None = None,
           tools: tuple[str, ...] = (TOOL, "write_file")) -> tuple[list[Any], list[Any]]:
    """The policy against the real simulator, each result relayed with ``wrap``; returns the actions
    and the cursors the service received."""
    rt, _ = _runtime(Path(tempfile.mkdtemp(prefix="t4c-drive-")), "unit-seed")
    received: list[Any] = []

    def respond(action: Any) -> Observation:
        if isinstance(action, CallTool):
            received.append(action.arguments.get("cursor"))
            out = rt.call_tool("list_invoices", dict(action.arguments))
            if out.is_error:
                return Observation(text=out.text, is_error=True, tool=TOOL)
            page = out.structured if shown is None else shown(copy.deepcopy(out.structured))
            return Observation(text=wrap(page, out.text), tool=TOOL)
        return Observation(text="ok")
    return drive_policy(POLICY, _turn(tools), respond), received


@pytest.mark.parametrize("harness", sorted(WRAPS))
def test_the_policy_follows_the_chain_and_writes_exactly_what_it_was_shown(full: Served, harness: str) -> None:
    actions, received = _drive(full, WRAPS[harness])
    calls = [a for a in actions if isinstance(a, CallTool)]
    assert [c.arguments for c in calls] == [a for a, _ in full.calls]
    assert received == [None] + [p["next_cursor"] for p in full.pages[:-1]]
    writes = [a for a in actions if isinstance(a, WriteFile)]
    assert len(writes) == 1 and writes[0].path == "reconciliation.json"
    assert json.loads(writes[0].content) == reconciliation(full.pages) and isinstance(actions[-1], Final)


def test_the_policy_embeds_no_value(tmp_path: Path) -> None:
    other = Served(tmp_path / "o", "another-seed")
    rt, _ = _runtime(tmp_path / "drive", "another-seed")

    def respond(action: Any) -> Observation:
        if isinstance(action, CallTool):
            out = rt.call_tool("list_invoices", dict(action.arguments))
            return Observation(text=relay(out.structured, out.text), tool=TOOL)
        return Observation(text="ok")
    actions = drive_policy(POLICY, _turn(), respond)
    written = json.loads(next(a for a in actions if isinstance(a, WriteFile)).content)
    assert written == reconciliation(other.pages)


def test_an_altered_page_is_copied_as_shown(full: Served) -> None:
    def shown(p: dict[str, Any]) -> dict[str, Any]:
        p["invoices"][0]["amount_cents"] += 100
        return p
    actions, _ = _drive(full, shown=shown)
    written = json.loads(next(a for a in actions if isinstance(a, WriteFile)).content)
    assert written["total_cents"] == reconciliation(full.pages)["total_cents"] + 100 * len(full.pages)


@pytest.mark.parametrize("harness", sorted(WRAPS))
def test_without_the_structured_page_the_policy_stops_and_writes_nothing(full: Served, harness: str) -> None:
    actions, received = _drive(full, lambda p, t: WRAPS[harness](None, t))
    assert received == [None] and not any(isinstance(a, WriteFile) for a in actions)
    assert isinstance(actions[-1], Final) and "did not write" in actions[-1].text and "page 1" in actions[-1].text


def test_a_lost_cursor_or_a_wrong_page_stops_the_policy(full: Served) -> None:
    def no_cursor(p: dict[str, Any]) -> dict[str, Any]:
        del p["next_cursor"]
        return p
    actions, _ = _drive(full, shown=no_cursor)
    assert not any(isinstance(a, WriteFile) for a in actions)

    def always_first(p: dict[str, Any]) -> dict[str, Any]:
        p["page"] = 1
        return p
    actions, received = _drive(full, shown=always_first)
    assert len(received) == 2 and not any(isinstance(a, WriteFile) for a in actions)
    assert "page 1 when page 2 was asked for" in actions[-1].text


def test_an_error_result_stops_the_policy() -> None:
    actions = drive_policy(POLICY, _turn(), [Observation(text='{"error": {"code": "X"}}', is_error=True)])
    assert not any(isinstance(a, WriteFile) for a in actions) and "an error for page 1" in actions[-1].text


def test_a_listing_that_never_ends_is_bounded() -> None:
    page = {"page": 1, "pages": 99, "invoices": [], "next_cursor": "nlf1.again"}
    seen: list[Any] = []

    def respond(action: Any) -> Observation:
        page["page"] = len(seen) + 1
        seen.append(action)
        return Observation(text=json.dumps(page), tool=TOOL)
    actions = drive_policy(POLICY, _turn(), respond)
    assert len(seen) == POLICY.MAX_PAGES and "did not end" in actions[-1].text
    assert not any(isinstance(a, WriteFile) for a in actions)


def test_the_policy_waits_for_a_connecting_mcp_server() -> None:
    gen = POLICY.policy(_turn(("Bash", "Write", "WaitForMcpServers")))
    first = next(gen)
    assert isinstance(first, NativeTool) and first.name == "WaitForMcpServers"
    assert first.arguments == {"servers": ["freightbills"]}


# ------------------------------------------------------------------ selftest (rule 13)


def test_the_selftest_passes() -> None:
    proc = subprocess.run([sys.executable, "-B", str(PACK / "verifier" / "selftest.py")], capture_output=True,
                          text=True, timeout=120, check=False, cwd=PACK / "verifier")
    assert proc.returncode == 0 and "selftest ok" in proc.stdout, proc.stdout + proc.stderr
