"""OpenTelemetry GenAI export: span tree, names, attributes and ids read back from the OTLP JSON
file with protobuf; content only with --content, and then redacted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from reports.export.otel import SCHEMA_URL, parse_otlp_json, to_otlp_json
from reports.export.write import cell_dirs
from tests.reports.export_fixtures import RUN, SECRET, fake_cell, probe_archive
from tracetrial.redact import REDACTED, Redactor
from tracetrial_cli.main import main as cli


def spans_of(text: str) -> list[Any]:
    request = parse_otlp_json(text)
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            assert ss.schema_url == SCHEMA_URL and ss.scope.name == "tracetrial.export"
    return [s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]


def attrs(span: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in span.attributes:
        which = kv.value.WhichOneof("value")
        value = getattr(kv.value, which)
        out[kv.key] = [v.string_value for v in value.values] if which == "array_value" else value
    return out


def test_span_tree_names_and_attributes() -> None:
    spans = spans_of(to_otlp_json([fake_cell()]))
    by_id = {s.span_id: s for s in spans}
    assert len({s.trace_id for s in spans}) == 1 and all(len(s.trace_id) == 16 for s in spans)
    (root,) = [s for s in spans if not s.parent_span_id]
    assert root.name == "invoke_agent fake"
    a = attrs(root)
    assert a["gen_ai.operation.name"] == "invoke_agent" and a["gen_ai.agent.name"] == "fake"
    assert a["gen_ai.conversation.id"] == RUN and a["gen_ai.agent.version"] == "1.0"
    chats = [s for s in spans if s.name == "chat probe"]
    assert len(chats) == 5  # one per provider request
    main_chats = [s for s in chats if s.parent_span_id == root.span_id]
    assert len(main_chats) == 3
    first = attrs(main_chats[0])
    assert first["gen_ai.operation.name"] == "chat" and first["gen_ai.request.model"] == "probe"
    assert first["gen_ai.provider.name"] == "anthropic"
    assert (first["gen_ai.usage.input_tokens"], first["gen_ai.usage.output_tokens"]) == (100, 10)
    assert first["gen_ai.usage.cache_read.input_tokens"] == 40
    assert first["gen_ai.usage.cache_creation.input_tokens"] == 5
    assert main_chats[0].start_time_unix_nano < main_chats[0].end_time_unix_nano <= main_chats[1].start_time_unix_nano
    tools = {attrs(s)["gen_ai.tool.call.id"]: s for s in spans if s.name.startswith("execute_tool ")}
    assert set(tools) == {"c1", "c2", "c3"}
    assert by_id[tools["c1"].parent_span_id] is main_chats[0]
    t1 = attrs(tools["c1"])
    assert t1["gen_ai.operation.name"] == "execute_tool" and t1["gen_ai.tool.name"] == "Bash"
    # The sub-agent runs under the tool call that spawned it, its chats under it.
    (child,) = [s for s in spans if s.name == "invoke_agent fake/c2"]
    assert child.parent_span_id == tools["c2"].span_id
    assert by_id[tools["c3"].parent_span_id].parent_span_id == child.span_id


def test_content_absent_by_default() -> None:
    text = to_otlp_json([fake_cell()])
    assert SECRET not in text
    for s in spans_of(text):
        keys = set(attrs(s))
        assert not keys & {"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.call.arguments",
                           "gen_ai.tool.call.result", "gen_ai.tool.definitions"}


def test_content_with_flag_is_redacted() -> None:
    text = to_otlp_json([fake_cell()], content=True, redactor=Redactor({SECRET}))
    assert SECRET not in text
    spans = spans_of(text)
    (bash,) = [attrs(s) for s in spans if s.name == "execute_tool Bash" and attrs(s)["gen_ai.tool.call.id"] == "c1"]
    assert bash["gen_ai.tool.call.arguments"] == '{"command": "echo ' + REDACTED + '"}'
    assert bash["gen_ai.tool.call.result"] == "out " + REDACTED
    outputs = [attrs(s).get("gen_ai.output.messages") for s in spans if s.name == "chat probe"]
    assert any(o and "all done" in o for o in outputs)
    (root,) = [s for s in spans if not s.parent_span_id]
    assert "Bash" in attrs(root)["gen_ai.tool.definitions"]


def test_export_is_deterministic() -> None:
    assert to_otlp_json([fake_cell()]) == to_otlp_json([fake_cell()])


@pytest.mark.slow
def test_real_cells_to_otlp_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    archive = probe_archive()
    target = tmp_path / "traces.otlp.json"
    assert cli(["export", "otel", str(archive), "--out", str(target)]) == 0
    cells = cell_dirs(archive)
    assert f"exported {len(cells)} cell(s)" in capsys.readouterr().out
    spans = spans_of(target.read_text())
    roots = [s for s in spans if not s.parent_span_id]
    assert len(roots) == len(cells) and len({s.trace_id for s in roots}) == len(cells)
    assert all(s.name.startswith("invoke_agent ") for s in roots)
    ids = {s.span_id for s in spans}
    assert all(s.parent_span_id in ids for s in spans if s.parent_span_id)
    assert any(s.name.startswith("invoke_agent ") and s.parent_span_id for s in spans), "L4's sub-agent"
