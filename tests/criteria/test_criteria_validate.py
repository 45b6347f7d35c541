"""Rule parameters are validated with precise errors naming the criterion id and the param."""

from __future__ import annotations

from pathlib import Path

import pytest

from criteria import validate_rubric_rules
from criteria.errors import RuleParamError
from criteria.registry import parse_params
from tests.criteria.archive_factory import rubric_criterion, rule_criterion
from tracetrial.rubric import RuleSpec
from tracetrial.task import load_task

EXAMPLE = Path(__file__).resolve().parents[2] / "tasks" / "E1-build-status-001"


def test_param_errors_name_criterion_and_param():
    with pytest.raises(RuleParamError) as err:
        parse_params(RuleSpec(kind="file_contains", text="x"), "A7")
    assert err.value.criterion == "A7" and ("path", "Field required") in err.value.problems
    assert "criterion 'A7' rule (kind 'file_contains'): param 'path'" in str(err.value)
    with pytest.raises(RuleParamError) as err:
        parse_params(RuleSpec(kind="file_exists", path="a", colour="red"), "A1")
    assert err.value.problems[0][0] == "colour"
    with pytest.raises(RuleParamError) as err:
        parse_params(RuleSpec(kind="trace_event_count", event_type="tool"), "H1")
    assert "give 'min', 'max' or both" in str(err.value)
    with pytest.raises(RuleParamError) as err:
        parse_params(RuleSpec(kind="trace_event_exists", event_type="tool_call"), "H2")
    assert "unknown event_type 'tool_call'" in str(err.value)
    with pytest.raises(RuleParamError) as err:
        parse_params(RuleSpec(kind="no_such_rule"), "H3")
    assert err.value.problems[0][0] == "kind" and "known kinds" in str(err.value)


def test_validate_reports_every_problem(make_pack):
    pack = make_pack(
        truth={"code": "X"},
        harness=[
            rule_criterion("H1", "trace_field_match", event_type="tool", field="tool_result.content",
                           contains_truth="missing_key"),
            {**rule_criterion("H2", "gateway_request_count", max=3),
             "bypass": {"kind": "forbidden_event", "where": {"tool_call.name": {"regex": "("}}}},
            rubric_criterion("H3", fields=["tool_result.content"], sources=["gateway"]),
        ],
        agent=[
            rule_criterion("A1", "json_schema", path="out.json", schema_file="schemas/none.json"),
            rule_criterion("A2", "json_field", path="out.json", field="x"),
        ],
        links=[{"harness": "H1", "agent": "A1", "distortion": "d", "activation": {"kind": "file_exists"}}],
    )
    problems = validate_rubric_rules(load_task(pack))
    text = "\n".join(problems)
    assert "criterion 'H1' rule (kind 'trace_field_match'): param 'truth_key'" in text
    assert "truth.json has no value at key 'missing_key'" in text
    assert "criterion 'H2' bypass rule (kind 'forbidden_event'): param 'where.tool_call.name'" in text
    assert "criterion 'H3' evidence" in text and "'trace' is not among its sources" in text
    assert "criterion 'A1' rule (kind 'json_schema'): param 'schema_file'" in text
    assert "criterion 'A2' rule (kind 'json_field')" in text and "at least one operator" in text
    assert "criterion 'links[0]' activation rule (kind 'file_exists'): param 'path'" in text
    assert len(problems) == 6


def test_example_pack_is_clean():
    if not EXAMPLE.is_dir():
        pytest.skip("example pack not present")
    assert validate_rubric_rules(load_task(EXAMPLE)) == []


def test_rule_reference_documents_every_rule():
    from criteria import RULES, load_builtin_rules, rule_reference

    text = rule_reference()
    load_builtin_rules()
    assert len(RULES) >= 20
    for kind, definition in RULES.items():
        assert f"| `{kind}` |" in text and definition.doc, kind
    assert "| `file_contains` | `path`, `text`?" in text  # required parameters first
