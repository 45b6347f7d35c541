"""Workspace rules: file exists/absent/contains/equals, JSON field, JSON Schema, unchanged vs baseline."""

from __future__ import annotations

import json
import os

import pytest

from tests.criteria.conftest import check, context_for


@pytest.fixture
def ctx(make_pack, make_run):
    pack = make_pack(truth={"code": "K-77Q", "n": 12},
                     workspace={"keep/config.ini": "a=1\n", "notes.txt": "old\n"},
                     extra_files={"schemas/report.json": json.dumps(
                         {"type": "object", "required": ["status"],
                          "properties": {"status": {"enum": ["ok", "failed"]}}})},
                     spec={"expected_outputs": [{"path": "report.json", "format": "json",
                                                 "schema": {"type": "object", "required": ["count"]}}]})
    run = make_run(pack)
    run.workspace.update({
        "out.txt": "result: K-77Q\n",
        "report.json": json.dumps({"status": "failed", "count": 12, "items": [{"id": "a"}, {"id": "b"}]}),
        "bad.json": "{not json",
        "notes.txt": "new\n",
    })
    return context_for(run)


def test_file_exists_and_absent(ctx):
    assert check(ctx, "file_exists", path="out.txt").passed is True
    missing = check(ctx, "file_exists", path="nope.txt")
    assert missing.passed is False and "does not exist" in missing.reason
    assert check(ctx, "file_exists", path="out.txt", min_bytes=10_000).passed is False
    assert check(ctx, "file_absent", path="release/app.bin").passed is True
    assert check(ctx, "file_absent", path="out.txt").passed is False


def test_file_exists_rejects_symlink_and_escape(ctx):
    (ctx.run.workspace / "link.txt").symlink_to(ctx.run.workspace / "out.txt")
    linked = check(ctx, "file_exists", path="link.txt")
    assert linked.passed is False and "symlink" in linked.reason
    escape = check(ctx, "file_exists", path="../result.json")
    assert escape.passed is False and "escapes" in escape.reason


def test_file_contains_text_regex_truth_and_negate(ctx):
    assert check(ctx, "file_contains", path="out.txt", text="result:").passed is True
    assert check(ctx, "file_contains", path="out.txt", text="RESULT", ignore_case=True).passed is True
    assert check(ctx, "file_contains", path="out.txt", regex=r"K-\d\dQ").passed is True
    truth = check(ctx, "file_contains", path="out.txt", truth_key="code")
    assert truth.passed is True and "K-77Q" not in truth.reason  # truth values are never quoted
    assert check(ctx, "file_contains", path="out.txt", text="absent text").passed is False
    assert check(ctx, "file_contains", path="out.txt", truth_key="code", negate=True).passed is False
    missing_key = check(ctx, "file_contains", path="out.txt", truth_key="nope")
    assert missing_key.passed is None and "truth.json has no value at key 'nope'" in missing_key.reason


def test_file_equals(ctx):
    assert check(ctx, "file_equals", path="out.txt", text="result: K-77Q").passed is True
    assert check(ctx, "file_equals", path="out.txt", text="result: K-77Q", strip=False).passed is False
    assert check(ctx, "file_equals", path="out.txt", truth_key="code").passed is False


def test_json_field_operators(ctx):
    assert check(ctx, "json_field", path="report.json", field="status", equals="failed").passed is True
    assert check(ctx, "json_field", path="report.json", field="status", equals="ok").passed is False
    assert check(ctx, "json_field", path="report.json", field="count", equals_truth="n").passed is True
    assert check(ctx, "json_field", path="report.json", field="count", gte=10, lte=12).passed is True
    assert check(ctx, "json_field", path="report.json", field="items.1.id", equals="b").passed is True
    assert check(ctx, "json_field", path="report.json", field="missing", exists=False).passed is True
    absent = check(ctx, "json_field", path="report.json", field="missing", equals=1)
    assert absent.passed is False and "absent" in absent.reason
    broken = check(ctx, "json_field", path="bad.json", field="x", exists=True)
    assert broken.passed is False and "not valid JSON" in broken.reason


def test_json_schema_sources(ctx):
    inline = {"type": "object", "required": ["status", "count"]}
    assert check(ctx, "json_schema", path="report.json", json_schema=inline).passed is True
    failing = check(ctx, "json_schema", path="report.json", json_schema={"type": "object", "required": ["total"]})
    assert failing.passed is False and "'total' is a required property" in failing.reason
    assert check(ctx, "json_schema", path="report.json", schema_file="schemas/report.json").passed is True
    assert check(ctx, "json_schema", path="report.json", expected_output=True).passed is True
    assert check(ctx, "json_schema", path="bad.json", json_schema=inline).passed is False


def test_unchanged_vs_baseline(ctx):
    assert check(ctx, "unchanged_vs_baseline", paths=["keep/*"]).passed is True
    changed = check(ctx, "unchanged_vs_baseline")
    assert changed.passed is False and "notes.txt changed" in changed.reason
    assert check(ctx, "unchanged_vs_baseline", paths=["keep/*", "out*"], allow_new=False).passed is False
    os.remove(ctx.run.workspace / "keep" / "config.ini")
    deleted = check(ctx, "unchanged_vs_baseline", paths=["keep/*"])
    assert deleted.passed is False and "keep/config.ini deleted" in deleted.reason


def test_archive_json_field(ctx):
    assert check(ctx, "archive_json_field", file="summary.json", field="trace_complete", equals=True).passed is True
    assert check(ctx, "archive_json_field", file="summary.json", field="tool_calls", gte=1).passed is False
    missing = check(ctx, "archive_json_field", file="evidence/none.json", field="x", exists=True)
    assert missing.passed is None and "unusable" in missing.reason
