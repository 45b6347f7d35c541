"""Trace IR + provider-boundary records -> OpenTelemetry GenAI spans, encoded as OTLP JSON.

Spans are made with the OpenTelemetry SDK (an in-memory exporter collects them) and encoded
with the official OTLP encoder (``opentelemetry-exporter-otlp-proto-common``) into an
``ExportTraceServiceRequest``, written with protobuf's JSON mapping. Per cell, one trace:

    invoke_agent {harness}                 the run (gen_ai.agent.name, gen_ai.conversation.id)
      chat {model}                         one per model call, times and usage from the gateway
        execute_tool {tool}                one per tool call (gen_ai.tool.call.id = native call id)
          invoke_agent {harness}/{child}   a sub-agent, under the tool call that spawned it

Attribute names are the GenAI semantic conventions' (``opentelemetry.semconv`` constants,
``gen_ai.*``, all of status Development); the conventions' schema URL is the scope's
``schema_url`` and is repeated as the resource attribute ``tracetrial.semconv.schema_url``.
Message and tool content are Opt-In in the conventions: they are written only with
``content=True``, and then through :class:`tracetrial.redact.Redactor`.

OTLP/JSON differs from protobuf's canonical JSON in one point: trace and span ids are hex
strings, not base64. :func:`to_otlp_json` writes the OTLP form; :func:`parse_otlp_json` reads
it back into the protobuf message.
"""

from __future__ import annotations

import base64
import hashlib
import json
from datetime import datetime, timedelta
from typing import Any

# protobuf ships no type stubs (types-protobuf is not a dependency); its two functions are used as documented.
from google.protobuf import json_format  # type: ignore[import-untyped]
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.sdk.version import __version__ as SDK_VERSION
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as GA
from opentelemetry.semconv.attributes.error_attributes import ERROR_TYPE
from opentelemetry.semconv.schemas import Schemas
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer, set_span_in_context
from opentelemetry.util.types import AttributeValue

from reports.export.atif import tool_definition
from reports.export.calls import (
    MAIN,
    CallGraph,
    CellArchive,
    ModelCall,
    Principal,
    build_call_graph,
)
from tracetrial.redact import Redactor
from tracetrial.trace import AssistantMessageEvent, EventBase, ToolEvent

SCHEMA_URL = Schemas.V1_44_0.value
SCOPE = "tracetrial.export"
#: The provider name the conventions expect, by the gateway's wire format.
PROVIDERS = {"anthropic": "anthropic", "openai_chat": "openai", "openai_responses": "openai"}

Attrs = dict[str, AttributeValue]


class _SeededIds(IdGenerator):
    """Deterministic ids from the run id, so exporting the same archive twice gives the same file."""

    def __init__(self) -> None:
        self.seed = ""
        self.counter = 0

    def _next(self, size: int) -> int:
        self.counter += 1
        digest = hashlib.sha256(f"{self.seed}/{self.counter}".encode()).digest()
        return int.from_bytes(digest[:size], "big") or 1

    def generate_span_id(self) -> int:
        return self._next(8)

    def generate_trace_id(self) -> int:
        return self._next(16)


def to_spans(cells: list[CellArchive], *, content: bool = False,
             redactor: Redactor | None = None) -> list[ReadableSpan]:
    """The GenAI spans of every cell (one trace per cell), finished and in creation order."""
    ids = _SeededIds()
    exporter = InMemorySpanExporter()
    redactor = redactor or Redactor()
    for cell in cells:
        ids.seed, ids.counter = cell.result.identity.run_id, 0
        # Resource(...) rather than Resource.create(): no random service.instance.id, no
        # environment variables, so the file depends on the archive alone.
        provider = TracerProvider(id_generator=ids, resource=Resource({
            "service.name": "tracetrial",
            "telemetry.sdk.name": "opentelemetry",
            "telemetry.sdk.language": "python",
            "telemetry.sdk.version": SDK_VERSION,
            "tracetrial.semconv.schema_url": SCHEMA_URL,
        }))
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        tracer = provider.get_tracer(SCOPE, schema_url=SCHEMA_URL)
        _Cell(cell, build_call_graph(cell), tracer, content, redactor).emit()
        # Not shutdown(): that would stop the shared in-memory exporter for the next cell.
        provider.force_flush()
    return list(exporter.get_finished_spans())


def to_otlp_json(cells: list[CellArchive], *, content: bool = False, redactor: Redactor | None = None) -> str:
    """The cells' spans as one OTLP/JSON ``ExportTraceServiceRequest`` document."""
    request = encode_spans(to_spans(cells, content=content, redactor=redactor))
    data = json_format.MessageToDict(request, use_integers_for_enums=True)  # OTLP/JSON: enums as integers
    _ids(data, lambda raw: base64.b64decode(raw).hex())
    return json.dumps(data, indent=1, ensure_ascii=False) + "\n"


def parse_otlp_json(text: str) -> ExportTraceServiceRequest:
    """Read an OTLP/JSON document (hex ids) back into the protobuf message."""
    data = json.loads(text)
    _ids(data, lambda hexed: base64.b64encode(bytes.fromhex(hexed)).decode())
    request = ExportTraceServiceRequest()
    json_format.ParseDict(data, request)
    return request


def _ids(data: dict[str, Any], convert: Any) -> None:
    for rs in data.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for span in ss.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if span.get(key):
                        span[key] = convert(span[key])


def _ns(moment: datetime) -> int:
    return int(moment.timestamp() * 1_000_000_000)


def _parse(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text)  # 3.11 reads a trailing Z
    except ValueError:
        return None


def _event_time(e: EventBase) -> datetime:
    return _parse(e.source_timestamp) or e.timestamp


class _Cell:
    """Emits one cell's span tree."""

    def __init__(self, cell: CellArchive, graph: CallGraph, tracer: Tracer, content: bool, redactor: Redactor):
        self.cell, self.graph, self.tracer = cell, graph, tracer
        self.content, self.redactor = content, redactor
        self.identity = cell.result.identity

    def emit(self) -> None:
        events = self.cell.events
        start = events[0].timestamp if events else datetime.now().astimezone()
        end = max([e.timestamp for e in events] + [self._record_end(r) or start for r in self.cell.records])
        self._agent(self.graph.principals[MAIN], None, start, end)

    def _agent(self, principal: Principal, parent: Span | None, start: datetime, end: datetime) -> None:
        name = self.identity.harness if principal.id == MAIN else f"{self.identity.harness}/{principal.id}"
        attrs: Attrs = {
            GA.GEN_AI_OPERATION_NAME: GA.GenAiOperationNameValues.INVOKE_AGENT.value,
            GA.GEN_AI_AGENT_NAME: name,
            GA.GEN_AI_AGENT_ID: principal.id,
            GA.GEN_AI_CONVERSATION_ID: self.identity.run_id,
            GA.GEN_AI_REQUEST_MODEL: self.identity.model,
            "tracetrial.task_id": self.identity.task_id,
            "tracetrial.protocol": self.identity.protocol,
            "tracetrial.status": self.cell.result.status,
        }
        if self.identity.harness_version:
            attrs[GA.GEN_AI_AGENT_VERSION] = self.identity.harness_version
        if principal.id == MAIN and self.content and self.graph.tool_definitions:
            attrs[GA.GEN_AI_TOOL_DEFINITIONS] = self._json([tool_definition(t) for t in self.graph.tool_definitions])
        ctx = set_span_in_context(parent) if parent is not None else None
        span = self.tracer.start_span(f"invoke_agent {name}", context=ctx, kind=SpanKind.INTERNAL,
                                      attributes=attrs, start_time=_ns(start))
        if principal.id == MAIN and self.cell.result.exception is not None:
            span.set_attribute(ERROR_TYPE, self.cell.result.exception.type)
            span.set_status(Status(StatusCode.ERROR, self.cell.result.exception.message[:200]))
        calls = principal.calls
        for i, call in enumerate(calls):
            nxt = calls[i + 1] if i + 1 < len(calls) else None
            self._chat(call, span, self._call_start(call) or start, end if nxt is None else (self._call_start(nxt) or end))
        if principal.id == MAIN:
            for record in self.graph.unmatched:
                self._chat(ModelCall(principal_id=MAIN, record=record), span, self._record_start(record) or start, end)
        span.end(end_time=_ns(max(end, start)))

    def _chat(self, call: ModelCall, parent: Span, start: datetime, until: datetime) -> None:
        model = call.model or self.identity.model
        record = call.record or {}
        attrs: Attrs = {
            GA.GEN_AI_OPERATION_NAME: GA.GenAiOperationNameValues.CHAT.value,
            GA.GEN_AI_REQUEST_MODEL: model,
            GA.GEN_AI_CONVERSATION_ID: self.identity.run_id,
            GA.GEN_AI_AGENT_NAME: self.identity.harness,
        }
        wire = record.get("wire_format")
        if isinstance(wire, str):
            attrs[GA.GEN_AI_PROVIDER_NAME] = PROVIDERS.get(wire, wire)
        if "index" in record:
            attrs["tracetrial.gateway.request_index"] = int(record["index"])
        usage = record.get("usage") or {}
        for key, attr in (("input_tokens", GA.GEN_AI_USAGE_INPUT_TOKENS),
                          ("output_tokens", GA.GEN_AI_USAGE_OUTPUT_TOKENS),
                          ("cache_read_tokens", GA.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS),
                          ("cache_write_tokens", GA.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS),
                          ("reasoning_tokens", GA.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS)):
            if isinstance(usage.get(key), int):
                attrs[attr] = usage[key]
        finish = [e.finish_reason for e in call.events if isinstance(e, AssistantMessageEvent) and e.finish_reason]
        if finish:
            attrs[GA.GEN_AI_RESPONSE_FINISH_REASONS] = [str(f) for f in finish]
        if self.content:
            if record.get("last_user_text"):
                attrs[GA.GEN_AI_INPUT_MESSAGES] = self._json(
                    [{"role": "user", "parts": [{"type": "text", "content": record["last_user_text"]}]}])
            parts: list[dict[str, Any]] = [{"type": "text", "content": t} for t in call.texts]
            parts += [{"type": "tool_call", "id": t.tool_call.id, "name": t.tool_call.name,
                       "arguments": t.tool_call.arguments} for t in call.tools]
            if parts:
                attrs[GA.GEN_AI_OUTPUT_MESSAGES] = self._json([{"role": "assistant", "parts": parts}])
        end = self._record_end(record) or start
        span = self.tracer.start_span(f"chat {model}", context=set_span_in_context(parent), kind=SpanKind.CLIENT,
                                      attributes=attrs, start_time=_ns(start))
        if record.get("error") or (isinstance(record.get("status"), int) and record["status"] >= 400):
            span.set_attribute(ERROR_TYPE, str(record.get("status") or "error"))
            span.set_status(Status(StatusCode.ERROR, str(record.get("error") or "")[:200]))
        span.end(end_time=_ns(max(end, start)))
        for tool in call.tools:
            self._tool(tool, parent=span, start=end, until=max(until, end))

    def _tool(self, t: ToolEvent, *, parent: Span, start: datetime, until: datetime) -> None:
        attrs: Attrs = {
            GA.GEN_AI_OPERATION_NAME: GA.GenAiOperationNameValues.EXECUTE_TOOL.value,
            GA.GEN_AI_TOOL_NAME: t.tool_call.name,
            GA.GEN_AI_TOOL_CALL_ID: t.tool_call.native_tool_call_id or t.tool_call.id,
            GA.GEN_AI_TOOL_TYPE: "function",
            GA.GEN_AI_AGENT_NAME: self.identity.harness,
        }
        result = t.tool_result
        if result is not None and result.exit_code is not None:
            attrs["tracetrial.tool.exit_code"] = result.exit_code
        if self.content:
            attrs[GA.GEN_AI_TOOL_CALL_ARGUMENTS] = self._json(t.tool_call.arguments)
            if result is not None:
                attrs[GA.GEN_AI_TOOL_CALL_RESULT] = self._json(result.content)
        end = start + timedelta(seconds=result.duration) if result is not None and result.duration else until
        span = self.tracer.start_span(f"execute_tool {t.tool_call.name}", context=set_span_in_context(parent),
                                      kind=SpanKind.INTERNAL, attributes=attrs, start_time=_ns(start))
        if result is not None and result.is_error:
            span.set_attribute(ERROR_TYPE, "tool_error")
            span.set_status(Status(StatusCode.ERROR))
        elif result is None:
            span.set_attribute("tracetrial.tool.result_seen", False)
        for child in self.graph.children(t.principal_id or MAIN):
            if child.spawn_call_id == t.tool_call.id and child.calls:
                first = self._call_start(child.calls[0]) or start
                last = child.calls[-1]
                self._agent(child, span, min(first, start) if first < start else first,
                            max(self._record_end(last.record or {}) or first, first))
        span.end(end_time=_ns(max(end, start)))

    def _call_start(self, call: ModelCall) -> datetime | None:
        if call.record is not None:
            return self._record_start(call.record)
        return _event_time(call.events[0]) if call.events else None

    @staticmethod
    def _record_start(record: dict[str, Any]) -> datetime | None:
        return _parse(record.get("started_at"))

    def _record_end(self, record: dict[str, Any]) -> datetime | None:
        started = self._record_start(record)
        if started is None:
            return None
        return started + timedelta(milliseconds=float(record.get("duration_ms") or 0))

    def _json(self, value: Any) -> str:
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
        return self.redactor.text(text)
