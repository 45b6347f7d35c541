"""The ``native_record_accurate`` rule kind and the archived reconciliation evidence.

The misstating harness is built by hand: its native record says a result was cut with one
omitted size, the provider boundary shows the model received another notice.
"""

from __future__ import annotations

import json

from criteria.engine import score_run
from criteria.reconcile import RECONCILIATION_FILE
from criteria.rules_reconcile import reconciliation_of, write_reconciliation
from criteria.rundata import load_run
from criteria.validate import validate_rubric_rules
from tests.criteria.archive_factory import gateway_request, rule_criterion, tool_event
from tests.criteria.conftest import check, context_for
from tracetrial.archive import RunArchive, check_seal
from tracetrial.redact import Redactor
from tracetrial.task import load_task

BODY = "".join(f"TKT-{i:05d} open\n" for i in range(40))
NATIVE = BODY + "[output truncated: 4096 bytes omitted]"
SHOWN = BODY + "[output truncated: 9000 bytes omitted]"


def _run(make_pack, make_run, native: str, shown: str, **pack):
    run = make_run(make_pack(**pack))
    run.events += [tool_event("Bash", {"command": "export"}, native, call_id="toolu_1", is_error=False),
                   tool_event("mcp__tickets__close", {"id": 1}, "closed", call_id="toolu_2", is_error=False)]
    run.gateway = [gateway_request(0, tools=["Bash", "mcp__tickets__close"]),
                   gateway_request(1, tools=["Bash", "mcp__tickets__close"], results=[("toolu-1", shown, False)]),
                   gateway_request(2, tools=["Bash", "mcp__tickets__close"], results=[("toolu-2", "closed", False)])]
    return run


def test_a_faithful_record_passes(make_pack, make_run):
    out = check(context_for(_run(make_pack, make_run, NATIVE, NATIVE)), "native_record_accurate")
    assert out.passed is True, out.reason
    assert "0 divergence(s)" in out.reason and "2 of 2 compared" in out.reason


def test_a_log_that_misstates_the_omitted_size_is_flagged(make_pack, make_run):
    ctx = context_for(_run(make_pack, make_run, NATIVE, SHOWN))
    out = check(ctx, "native_record_accurate")
    assert out.passed is False
    assert "notice_mismatch toolu_1 (Bash)" in out.reason and "4096" in out.reason and "9000" in out.reason
    assert "seq:2" in out.refs and "gateway:1" in out.refs
    # kinds and tools pick what is graded
    assert check(ctx, "native_record_accurate", kinds=["notice_mismatch"]).passed is False
    assert check(ctx, "native_record_accurate", kinds=["error_flag_mismatch", "missing_at_gateway"]).passed is True
    assert check(ctx, "native_record_accurate", tools=["Bash"]).passed is False
    only_close = check(ctx, "native_record_accurate", tools=["close"])  # any MCP naming form
    assert only_close.passed is True and "1 of 1 compared" in only_close.reason
    assert check(ctx, "native_record_accurate", max=2).passed is True  # content_mismatch + notice_mismatch


def test_nothing_comparable_is_unscored_never_a_pass(make_pack, make_run):
    run = make_run(make_pack())
    run.gateway = [gateway_request(0, tools=["Bash"])]
    out = check(context_for(run), "native_record_accurate")
    assert out.passed is None and "could be compared" in out.reason
    assert check(context_for(run), "native_record_accurate", min_compared=0).passed is True
    run.structured_trace_status = "unavailable"
    assert check(context_for(run), "native_record_accurate").passed is None


def test_bad_parameters_are_reported_by_validate(make_pack):
    pack = make_pack(harness=[rule_criterion("H1", "native_record_accurate", kinds=["content_mixup"]),
                              rule_criterion("H2", "native_record_accurate", tools=[]),
                              rule_criterion("H3", "native_record_accurate", kinds=["usage_mismatch"], max=1)])
    problems = validate_rubric_rules(load_task(pack))
    assert len(problems) == 2, problems
    assert "'H1'" in problems[0] and "kinds" in problems[0]
    assert "'H2'" in problems[1] and "tools" in problems[1]


def test_the_evidence_is_sealed_with_its_counts_and_rederivable(make_pack, make_run):
    builder = _run(make_pack, make_run, NATIVE, SHOWN,
                   harness=[rule_criterion("H1", "native_record_accurate")])
    run_dir = builder.build(seal=False)
    archive = RunArchive(builder.paths(), Redactor())
    written = write_reconciliation(archive)
    archive.seal(builder.run_id)
    stored = json.loads((run_dir / RECONCILIATION_FILE).read_text(encoding="utf-8"))
    assert stored["schema"] == "tt-reconciliation/1" and stored["counts"]["notice_mismatch"] == 1
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    assert summary["reconciliation"] == written.counts and summary["reconciliation"]["divergences"] == 2
    assert check_seal(run_dir).state == "sealed"
    # re-derived from the archive alone: the same evidence, and the rule fails on it
    assert reconciliation_of(load_run(run_dir)).to_json() == stored
    score = score_run(load_task(run_dir / "private" / "task" / builder.task_root.name), run_dir)
    verdict = next(v for v in score.verdicts if v.id == "H1")
    assert verdict.passed is False and "notice_mismatch" in verdict.reason
    assert check_seal(run_dir).state == "sealed"
