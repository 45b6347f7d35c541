"""The probe's per-run evidence (archived by the cell as ``gateway/probe.json``) and its options."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

RequestKind = Literal["main", "subagent", "compaction", "title", "heartbeat", "provider_error", "unscripted",
                      "apparatus_error"]


class RequestRecord(BaseModel):
    """One model request the probe answered (or refused)."""

    model_config = ConfigDict(extra="forbid")

    index: int = Field(description="1-based order of the request within the run.")
    wire_format: Literal["anthropic", "responses", "chat"]
    kind: RequestKind = Field(description="main / subagent (policy-driven), compaction and title "
                              "(declared handlers), heartbeat (OpenClaw housekeeping, answered NO_REPLY), "
                              "provider_error (injected), unscripted / apparatus_error (HTTP 500).")
    observation_digest: str = Field(description="sha256 of the canonical rebuilt observation (system, items, tool names).")
    action: str | None = Field(default=None, description="Kind of the policy action answered (shell, final, …).")
    mapped_tool: str | None = Field(default=None, description="Wire tool name used (Codex namespaced tools as ns/name).")
    principal: str = "main"
    turn: int | None = None
    step: int | None = Field(default=None, description="0-based step of the policy generator in this turn.")
    call_id: str | None = None
    arguments: Any = Field(default=None, description="The arguments the probe sent to the tool its action "
                           "calls (for an indirect OpenClaw ``tool_call`` the inner ``args``); evidence for "
                           "argument-transport criteria.")
    status: int = 200
    notes: list[str] = Field(default_factory=list, description="Mapping fallbacks and losses (e.g. timeout not transportable).")


class AbsentCapability(BaseModel):
    """A policy action the harness declared no tool for."""

    model_config = ConfigDict(extra="forbid")

    action: str
    needed: str
    declared_tools: list[str]
    principal: str = "main"
    turn: int | None = None
    request_index: int | None = None


class ProbeRunReport(BaseModel):
    """Everything the probe saw and did in one run."""

    model_config = ConfigDict(extra="forbid")

    run_id: str
    task_id: str | None = None
    requests: list[RequestRecord] = Field(default_factory=list)
    absent_capabilities: list[AbsentCapability] = Field(default_factory=list)
    apparatus_errors: list[str] = Field(default_factory=list)
    final_text: str | None = Field(default=None, description="Last final(...) text of the main agent.")


class UsageSpec(BaseModel):
    """Report a large ``input_tokens`` to drive the harness's compaction."""

    model_config = ConfigDict(extra="forbid")

    tokens: int = Field(ge=1)
    from_request: int = Field(default=1, ge=1, description="First run request index that reports it.")
    compactions: int = Field(default=1, ge=1, description="Stop after this many compaction requests were answered "
                             "(else a harness that compacts on every request never ends).")


class ProviderErrorSpec(BaseModel):
    """Answer request ``at_request`` (1-based, counting every request of the run) with an HTTP error."""

    model_config = ConfigDict(extra="forbid")

    at_request: int = Field(ge=1)
    status: int = Field(default=500, ge=400, le=599)
    message: str = "Internal server error (injected by the TraceTrial probe)"
    error_type: str | None = Field(default=None, description="Native error type; default follows the status.")
    count: int = Field(default=1, ge=1, description="Consecutive requests that get the error.")


class ProbeOptions(BaseModel):
    """``PROBE_OPTIONS`` of a policy module, overridden key by key by ``register_run(options=...)``."""

    model_config = ConfigDict(extra="forbid")

    turns: list[str] | None = Field(default=None, description="User-turn texts, to tell turns apart "
                                    "(filled from the task pack; needed for multi-turn policies given by path).")
    task_id: str | None = None
    report_usage_tokens: int | UsageSpec | None = None
    provider_error: ProviderErrorSpec | list[ProviderErrorSpec] | None = None
    extra: dict[str, Any] = Field(default_factory=dict, description="Free values the policy reads from turn.options.")

    def usage_spec(self) -> UsageSpec | None:
        if self.report_usage_tokens is None:
            return None
        if isinstance(self.report_usage_tokens, int):
            return UsageSpec(tokens=self.report_usage_tokens)
        return self.report_usage_tokens

    def provider_errors(self) -> list[ProviderErrorSpec]:
        if self.provider_error is None:
            return []
        return self.provider_error if isinstance(self.provider_error, list) else [self.provider_error]
