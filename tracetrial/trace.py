"""Trace IR, schema version 1 (SPEC §7).

One run's trace is a JSON array of events ordered by a contiguous, 1-based
``seq``. Every event has the common envelope (``schema_version``, ``seq``,
``timestamp``, ``run_id``, ``event_type``) plus optional identity fields that
appear only when the native source supports them, and a payload specific to
its ``event_type``. The union of all event classes is discriminated on
``event_type``.

Distinctions the schema keeps on purpose:

* ``ToolEvent.tool_result is None`` means *no native result was seen*; an empty
  string in ``tool_result.content`` means the tool returned nothing.
* ``TokenUsageEvent.usage is None`` (with ``usage_available=False``) means the
  source did not report usage; a measured zero is ``0``.
* Support events (run lifecycle, raw streams, apparatus records) are never
  counted as model or harness actions; :data:`SUPPORT_EVENT_TYPES` lists them.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Annotated, Any, Literal, Union

from pydantic import (
    AwareDatetime,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from tracetrial.model import StrictModel

SCHEMA_VERSION: Literal[1] = 1

#: Envelope fields that are omitted from the JSON form when unset: SPEC §7 says
#: they "appear only when the native source supports them".
ENVELOPE_OPTIONAL = (
    "source",
    "conversation_turn",
    "session_id",
    "turn_id",
    "step_id",
    "principal_id",
    "parent_principal_id",
    "principal_role",
    "source_event_seq",
    "source_event_timestamp",
    "source_timestamp",
    "raw_event",
    "source_records",
)


class SourceRecordRef(StrictModel):
    """One native record an event was built from, beyond its own (``source`` /
    ``source_event_seq``): e.g. the result record folded into a call's ``tool`` event."""

    source: str = Field(description="The record's stream, as in the envelope's ``source``.")
    file: str | None = Field(default=None, description="The archived file under native/ that holds it.")
    seq: int = Field(description="Its 1-based position in that file (line or row).")


def utc_now() -> datetime:
    """The observation time for a new event (always UTC)."""
    return datetime.now(timezone.utc)


class EventBase(StrictModel):
    """The common envelope of every Trace IR event."""

    schema_version: Literal[1] = SCHEMA_VERSION
    seq: int = Field(ge=1, description="Contiguous 1-based position in the final trace.")
    timestamp: AwareDatetime = Field(
        description="UTC time the normalized event was written (an observation time)."
    )
    run_id: str = Field(min_length=1)
    source: str | None = Field(
        default=None,
        description="Native stream, session archive, provider boundary or apparatus component "
        "the event came from, e.g. 'native:claude_code/stdout', 'gateway', 'runner'.",
    )
    conversation_turn: int | None = Field(default=None, ge=1)
    session_id: str | None = None
    turn_id: str | int | None = None
    step_id: str | int | None = None
    principal_id: str | None = None
    parent_principal_id: str | None = None
    principal_role: Literal["main", "child"] | None = None
    source_event_seq: int | None = None
    source_event_timestamp: str | None = None
    source_timestamp: str | None = None
    raw_event: Any = Field(default=None, description="The (redacted) native source record.")
    source_records: list[SourceRecordRef] | None = Field(
        default=None,
        description="Further native records folded into this event (its own record is source / "
        "source_event_seq), so that no record is represented by nothing.",
    )

    @field_validator("timestamp")
    @classmethod
    def _utc_only(cls, value: datetime) -> datetime:
        offset = value.utcoffset()
        if offset is None or offset.total_seconds() != 0:
            raise ValueError(f"timestamp must be UTC (offset +00:00), got {value.isoformat()}")
        return value

    @model_serializer(mode="wrap")
    def _drop_unset_envelope(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for key in ENVELOPE_OPTIONAL:
            if key in data and data[key] is None:
                del data[key]
        return data


# --------------------------------------------------------------------------- core


class ModelInputEvent(EventBase):
    """One model call as the native harness exposes it."""

    event_type: Literal["model_input"] = "model_input"
    model: str | None = None
    provider: str | None = None
    messages: list[Any] | None = None
    tools: list[Any] | None = None
    request_params: dict[str, Any] | None = None


class ToolDeclaration(StrictModel):
    """One structured tool declaration seen at the provider boundary."""

    name: str
    type: str = "function"
    description: str | None = None
    input_schema: Any = None


class ToolInventoryEvent(EventBase):
    """Structured tool declarations observed at the provider boundary."""

    event_type: Literal["tool_inventory"] = "tool_inventory"
    model_visible: bool
    complete: bool
    scope: str = Field(description="e.g. 'request', 'session', 'principal'.")
    tools: list[ToolDeclaration]
    request_count: int | None = None
    inventory_fingerprint: str | None = None


class AssistantDeltaEvent(EventBase):
    """One streamed fragment of assistant text or reasoning."""

    event_type: Literal["assistant_delta"] = "assistant_delta"
    delta: str | None = None
    content_delta: str | None = None
    reasoning_delta: str | None = None
    content_kind: str | None = None
    fragment_seq: int | None = None


class AssistantMessageEvent(EventBase):
    """A complete assistant message or reasoning block (never treated as the final answer
    when ``content_kind`` is reasoning)."""

    event_type: Literal["assistant_message"] = "assistant_message"
    message_id: str | None = None
    content: Any = None
    content_kind: str | None = Field(default=None, description="'text', 'reasoning', ...")
    reasoning: str | None = None
    model: str | None = None
    finish_reason: str | None = None


class ToolCall(StrictModel):
    """The action the model requested."""

    id: str = Field(description="Trace-unique call id (turn-scoped when a harness reuses ids).")
    name: str
    arguments: Any = None
    native_tool_call_id: str | None = Field(
        default=None, description="The native id when ``id`` had to be turn-scoped."
    )


class ToolResult(StrictModel):
    """The native result paired with a call *by native call id only*.

    Fields are filled only when the native record states them: an exit code is
    never parsed out of prose and an error flag is never inferred from wording.
    """

    content: Any = Field(description="Model-facing result, verbatim (may be an empty string).")
    is_error: bool | None = None
    status: str | None = None
    exit_code: int | None = None
    duration: float | None = Field(default=None, description="Seconds, when the native record says.")
    truncated: bool | None = None
    omitted_bytes: int | None = Field(default=None, ge=0)


class ToolEvent(EventBase):
    """One native tool exchange. ``tool_result`` is ``None`` when no native result was seen."""

    event_type: Literal["tool"] = "tool"
    tool_call: ToolCall
    tool_result: ToolResult | None

    @model_serializer(mode="wrap")
    def _keep_null_result(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for key in ENVELOPE_OPTIONAL:
            if key in data and data[key] is None:
                del data[key]
        # ``tool_result: null`` is meaningful and must survive exclude_none dumps.
        data.setdefault("tool_result", None)
        return data


class TokenUsage(StrictModel):
    """Token counts (OTel GenAI names). ``None`` = not reported, ``0`` = measured zero."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    reasoning_tokens: int | None = Field(
        default=None, description="Already included in output_tokens; never add twice."
    )
    total_tokens: int | None = None


class TokenUsageEvent(EventBase):
    """Usage for one call, turn, run or internal harness operation."""

    event_type: Literal["token_usage"] = "token_usage"
    usage: TokenUsage | None = Field(description="None when the source did not report usage.")
    usage_available: bool = True
    usage_scope: Literal["call", "turn", "run", "internal"]
    usage_aggregate: bool = False
    reported_cost_usd: float | None = None

    @model_validator(mode="after")
    def _available_matches(self) -> TokenUsageEvent:
        if self.usage_available and self.usage is None:
            raise ValueError(
                "usage is null but usage_available is true: unavailable usage must be "
                "recorded with usage_available=false, never as zeros"
            )
        if not self.usage_available and self.usage is not None:
            raise ValueError("usage_available is false but usage counts are present")
        return self


class ContextCompactionEvent(EventBase):
    """A native context compaction, pruning or replacement boundary."""

    event_type: Literal["context_compaction"] = "context_compaction"
    native_event_type: str | None = None
    native_event_id: str | None = None
    native_event_key: str | None = None
    trigger: str | None = None
    summary: str | None = None
    summary_present: bool | None = None
    notice_visible_to_model: bool | None = None


class SubagentLifecycleEvent(EventBase):
    """Creation, dispatch, start, return, completion or failure of a native sub-agent."""

    event_type: Literal["subagent_lifecycle"] = "subagent_lifecycle"
    action: str
    status: str | None = None
    stop_reason: str | None = None
    child_principal_id: str | None = None
    boundary_kind: str | None = None
    pending_child_ids: list[str] | None = None


class TaskCompletionEvent(EventBase):
    """A delegated task's result reaching its completion boundary."""

    event_type: Literal["task_completion"] = "task_completion"
    status: str | None = None
    content: Any = None
    model_visible_content: Any = None
    child_principal_id: str | None = None
    parent_reactivated: bool | None = None


class PolicyEvent(EventBase):
    """A native approval, permission, sandbox or policy decision."""

    event_type: Literal["policy_event"] = "policy_event"
    policy_kind: str
    decision: str
    reason_code: str | None = None
    approval_id: str | None = None
    tool_call_id: str | None = None
    tool_name: str | None = None
    reason_visible_to_model: bool | None = None
    execution_started: bool | None = None


class NativeEvent(EventBase):
    """A valid native record that maps to no more specific core event."""

    event_type: Literal["native_event"] = "native_event"
    native_event_type: str | None = None
    native_method: str | None = None
    status: str | None = None


class NativeDiagnosticEvent(EventBase):
    """A native diagnostic that may explain a process outcome (not a model action)."""

    event_type: Literal["native_diagnostic"] = "native_diagnostic"
    diagnostic_type: str
    detail: Any = None


# ------------------------------------------------------------------------ support


class RunStartedEvent(EventBase):
    event_type: Literal["run_started"] = "run_started"
    task_id: str | None = None
    harness: str | None = None
    model: str | None = None


class RunFinishedEvent(EventBase):
    event_type: Literal["run_finished"] = "run_finished"
    exit_code: int | None = None
    trace_complete: bool
    summary_path: str | None = None


class RunFailedEvent(EventBase):
    event_type: Literal["run_failed"] = "run_failed"
    error_type: str
    error_message: str
    exit_code: int | None = None
    timed_out: bool = False


class ConversationStartedEvent(EventBase):
    event_type: Literal["conversation_started"] = "conversation_started"
    form: str | None = None


class ConversationTurnStartedEvent(EventBase):
    event_type: Literal["conversation_turn_started"] = "conversation_turn_started"
    user_text: str | None = None


class ConversationTurnFinishedEvent(EventBase):
    event_type: Literal["conversation_turn_finished"] = "conversation_turn_finished"
    exit_code: int | None = None
    status: str | None = None


class ConversationSimulatorDecisionEvent(EventBase):
    event_type: Literal["conversation_simulator_decision"] = "conversation_simulator_decision"
    decision: str
    reason: str | None = None
    next_user_text: str | None = None


class ConversationFinishedEvent(EventBase):
    event_type: Literal["conversation_finished"] = "conversation_finished"
    turns: int | None = None


class SessionBoundaryEvent(EventBase):
    event_type: Literal["session_boundary"] = "session_boundary"
    kind: str = Field(description="'new_session' or 'resume'.")
    history_replayed: bool | None = None
    workspace_preserved: bool | None = None


class ContextHandoffEvent(EventBase):
    event_type: Literal["context_handoff"] = "context_handoff"
    content: Any = None


class ProviderRequestCountEvent(EventBase):
    event_type: Literal["provider_request_count"] = "provider_request_count"
    count: int = Field(ge=0)
    failed: int | None = Field(default=None, ge=0)


class NativeSessionArchiveEvent(EventBase):
    event_type: Literal["native_session_archive"] = "native_session_archive"
    status: str
    format: str | None = None
    artifact: str | None = None
    sha256: str | None = None
    size_bytes: int | None = None
    redacted: bool | None = None


class TraceExportEvent(EventBase):
    event_type: Literal["trace_export"] = "trace_export"
    artifact: str | None = None
    format: str | None = None


class RawStdoutEvent(EventBase):
    event_type: Literal["raw_stdout"] = "raw_stdout"
    text: str
    stream_seq: int | None = None
    parseable: bool | None = None
    parse_error: str | None = None


class RawStderrEvent(EventBase):
    event_type: Literal["raw_stderr"] = "raw_stderr"
    text: str
    stream_seq: int | None = None
    severity: str | None = None


CoreEvent = Union[
    ModelInputEvent,
    ToolInventoryEvent,
    AssistantDeltaEvent,
    AssistantMessageEvent,
    ToolEvent,
    TokenUsageEvent,
    ContextCompactionEvent,
    SubagentLifecycleEvent,
    TaskCompletionEvent,
    PolicyEvent,
    NativeEvent,
    NativeDiagnosticEvent,
]

SupportEvent = Union[
    RunStartedEvent,
    RunFinishedEvent,
    RunFailedEvent,
    ConversationStartedEvent,
    ConversationTurnStartedEvent,
    ConversationTurnFinishedEvent,
    ConversationSimulatorDecisionEvent,
    ConversationFinishedEvent,
    SessionBoundaryEvent,
    ContextHandoffEvent,
    ProviderRequestCountEvent,
    NativeSessionArchiveEvent,
    TraceExportEvent,
    RawStdoutEvent,
    RawStderrEvent,
]

Event = Annotated[Union[CoreEvent, SupportEvent], Field(discriminator="event_type")]

CORE_EVENT_TYPES: frozenset[str] = frozenset(
    cls.model_fields["event_type"].default for cls in CoreEvent.__args__  # type: ignore[attr-defined]
)
SUPPORT_EVENT_TYPES: frozenset[str] = frozenset(
    cls.model_fields["event_type"].default for cls in SupportEvent.__args__  # type: ignore[attr-defined]
)
EVENT_CLASSES: dict[str, type[EventBase]] = {
    cls.model_fields["event_type"].default: cls
    for cls in (*CoreEvent.__args__, *SupportEvent.__args__)  # type: ignore[attr-defined]
}

StructuredTraceStatus = Literal["complete", "partial", "unavailable", "integrity_failure"]
