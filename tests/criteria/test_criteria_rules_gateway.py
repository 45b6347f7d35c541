"""Gateway-record predicates: tool declared, result contains/omits, is_error flag, request count."""

from __future__ import annotations

import pytest

from tests.criteria.archive_factory import gateway_request
from tests.criteria.conftest import check, context_for


@pytest.fixture
def ctx(make_pack, make_run):
    pack = make_pack(truth={"secret": "hunter2-token", "checksum": "c0ffee42"})
    run = make_run(pack)
    run.gateway = [
        gateway_request(0, tools=["Bash", "Read"], last_user_text="go"),
        gateway_request(1, tools=["Bash", "Read", "mcp__tickets__export"],
                        results=[("t1", "BUILD SUCCESS\nexit code 2", True)]),
        gateway_request(2, tools=["Bash", "Read"], results=[("t2", "checksum=c0ffee42", False)]),
        gateway_request(3, tools=[], status=529, error="overloaded"),
    ]
    return context_for(run)


def test_tool_declared_any_and_all(ctx):
    assert check(ctx, "gateway_tool_declared", name="Bash", scope="all").passed is True
    some = check(ctx, "gateway_tool_declared", name="mcp__tickets__export")
    assert some.passed is True and some.refs == ("gateway:1",)
    every = check(ctx, "gateway_tool_declared", name_regex=r"mcp__tickets__.*", scope="all")
    assert every.passed is False and "missing from 2 of 3" in every.reason  # the failed request is not authoritative
    assert check(ctx, "gateway_tool_declared", name="Write").passed is False


def test_incomplete_inventory_is_unscored(ctx):
    for record in ctx.run.gateway:
        record["inventory_complete"] = False
        record["inventory_present"] = True
    out = check(ctx, "gateway_tool_declared", name="Bash")
    assert out.passed is None and "authoritative tool inventory" in out.reason


def test_result_contains_literal_regex_truth(ctx):
    assert check(ctx, "gateway_result_contains", text="exit code 2").passed is True
    assert check(ctx, "gateway_result_contains", regex=r"exit code [1-9]").passed is True
    assert check(ctx, "gateway_result_contains", truth_key="checksum").passed is True
    missing = check(ctx, "gateway_result_contains", text="BUILD FAILED")
    assert missing.passed is False and "none of 2 delivered" in missing.reason


def test_result_omits(ctx):
    assert check(ctx, "gateway_result_omits", truth_key="secret").passed is True
    leaked = check(ctx, "gateway_result_omits", truth_key="checksum")
    assert leaked.passed is False and "c0ffee42" not in leaked.reason


def test_truncated_recording_cannot_prove_absence(ctx):
    ctx.run.gateway.append(gateway_request(4, tools=["Bash"], results=[("t3", "head...tail", None, True)]))
    assert check(ctx, "gateway_result_omits", truth_key="secret").passed is None
    assert check(ctx, "gateway_result_contains", text="never there").passed is None
    assert check(ctx, "gateway_result_contains", text="exit code 2").passed is True


def test_result_error_flag(ctx):
    assert check(ctx, "gateway_result_error", tool_result_id="t1").passed is True
    unflagged = check(ctx, "gateway_result_error", contains="checksum")
    assert unflagged.passed is False and "without is_error=true" in unflagged.reason
    assert check(ctx, "gateway_result_error", contains="checksum", expect=False).passed is True
    assert check(ctx, "gateway_result_error", tool_result_id="nope").passed is False


def test_request_count(ctx):
    assert check(ctx, "gateway_request_count", max=4).passed is True
    over = check(ctx, "gateway_request_count", max=3)
    assert over.passed is False and over.refs == ("gateway:3",)
    assert check(ctx, "gateway_request_count", max=3, successful_only=True).passed is True


def test_missing_gateway_file_is_an_empty_run(make_pack, make_run):
    ctx = context_for(make_run(make_pack(), gateway=None))
    assert ctx.run.gateway == []
    assert check(ctx, "gateway_request_count", max=0).passed is True
