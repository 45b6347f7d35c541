"""Simulator-ledger rules: request counts, issued values in a file, no repeated one-shot operation."""

from __future__ import annotations

import pytest

from tests.criteria.conftest import check, context_for


@pytest.fixture
def ctx(make_pack, make_run):
    pack = make_pack(spec={"conversation": "simulator", "simulators": [{"name": "tickets", "service": "kv"}]})
    run = make_run(pack)
    run.ledgers["tickets"] = [
        {"kind": "request", "tool": "export", "arguments": {"snapshot": "s1", "page": 1}},
        {"kind": "issued", "tool": "export", "detail": {"value": "ESC-1001"}},
        {"kind": "request", "tool": "recover", "arguments": {"snapshot": "s1"}},
        {"kind": "issued", "tool": "recover", "detail": {"values": ["ESC-1002", "ESC-1003"]}},
        {"kind": "request", "tool": "commit", "arguments": {"batch": "b1"}},
        {"kind": "transition", "tool": "commit", "detail": {"from": "open", "to": "committed"}},
    ]
    run.workspace["codes.json"] = '{"codes": ["ESC-1001", "ESC-1002"]}'
    return context_for(run)


def test_request_count_per_tool(ctx):
    assert check(ctx, "ledger_request_count", service="tickets", tool="export", min=1, max=1).passed is True
    over = check(ctx, "ledger_request_count", service="tickets", max=2)
    assert over.passed is False and "3 request record(s)" in over.reason
    assert over.refs[0] == "ledger:tickets:1"
    assert check(ctx, "ledger_request_count", service="tickets", record_kind="refused", max=0).passed is True
    assert check(ctx, "ledger_request_count", service="tickets", tool="delete", min=1).passed is False


def test_issued_values_in_file(ctx):
    every = check(ctx, "ledger_issued_in_file", service="tickets", path="codes.json")
    assert every.passed is False and "2 of 3 issued value(s)" in every.reason
    assert check(ctx, "ledger_issued_in_file", service="tickets", path="codes.json", mode="any").passed is True
    assert check(ctx, "ledger_issued_in_file", service="tickets", path="codes.json", tool="export").passed is True
    assert check(ctx, "ledger_issued_in_file", service="tickets", path="missing.json").passed is False


def test_no_repeat_of_one_shot_operation(ctx):
    assert check(ctx, "ledger_no_repeat", service="tickets", tool="commit").passed is True
    ctx.run.ledgers["tickets"].append({"seq": 7, "kind": "request", "tool": "commit", "arguments": {"batch": "b1"}})
    repeated = check(ctx, "ledger_no_repeat", service="tickets", tool="commit")
    assert repeated.passed is False and "repeated" in repeated.reason and "5, 7" in repeated.reason
    keyed = check(ctx, "ledger_no_repeat", service="tickets", tool="commit", key=["batch"], max_per_key=2)
    assert keyed.passed is True


def test_missing_ledger_is_unscored_not_failed(ctx):
    out = check(ctx, "ledger_request_count", service="billing", max=1)
    assert out.passed is None and "no ledger for service 'billing'" in out.reason
