"""On-disk records of one run: ``result.json``, ``summary.json`` and
``artifacts/llm_judge/combined_score.json`` (SPEC §5, §6, §10).

``combined_score.json`` is authoritative for scores; ``result.json`` holds the
execution identity and history only.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field

from tracetrial.model import StrictModel
from tracetrial.trace import StructuredTraceStatus, TokenUsage

Protocol = Literal["probe", "live"]
Eligibility = Literal["eligible", "unsupported", "non_comparable"]
RunLabel = Literal[
    "apparatus_invalid",
    "harness_caused",
    "harness_absorbed",
    "agent_caused",
    "measurement_bypass",
    "clean",
]


class CellIdentity(StrictModel):
    """Who ran what: must agree across result, config, task and trace (admission)."""

    run_id: str
    task_id: str
    task_revision: int
    harness: str
    harness_version: str | None = None
    model: str
    protocol: Protocol


class PhaseTiming(StrictModel):
    started_at: str
    finished_at: str | None = None
    seconds: float | None = None


class ExceptionInfo(StrictModel):
    """An error captured during the run, classified by its source."""

    type: str
    message: str
    origin: Literal["harness", "apparatus", "task"]
    traceback: str | None = None


class TurnRecord(StrictModel):
    """What the runner saw of one user turn's native process (the inputs a normalizer and
    the trace assembly need, so ``tracetrial rescore --renormalize`` can re-derive
    ``events.json`` from the archive alone)."""

    index: int
    started_at: str = Field(description="UTC ISO-8601 time the turn's process was started.")
    exit_code: int | None
    timed_out: bool
    duration_s: float
    session_id: str | None = None
    error: str | None = None
    interrupted: bool = Field(default=False, description=(
        "The runner killed the turn's process tree on purpose (the task's interrupts): the next "
        "turn resumes the session; not a crash."))


#: ``RunFailure.type`` of a run whose wall clock was used up between turns: every turn that ran
#: exited normally, the later scripted turns never started (admission: not measured).
WALL_CLOCK_BEFORE_TURN = "WallClockExceeded"


class RunFailure(StrictModel):
    """Why a run did not finish normally (``failure`` of the trace assembly)."""

    type: str
    message: str
    timed_out: bool


class ResultRecord(StrictModel):
    """``result.json``: execution identity, resolved config and history (not the score)."""

    schema_: Literal["tt-result/1"] = Field(default="tt-result/1", alias="schema")
    identity: CellIdentity
    status: Literal["completed", "failed", "timed_out", "skipped", "apparatus_error"]
    eligibility: Eligibility = "eligible"
    eligibility_reason: str | None = None
    resolved_config: dict[str, Any] = Field(default_factory=dict)
    timing: dict[str, PhaseTiming] = Field(default_factory=dict)
    exit_codes: list[int | None] = Field(default_factory=list)
    exception: ExceptionInfo | None = None
    #: When the cell started (the run's first Trace IR timestamp).
    started_at: str | None = None
    #: One record per user turn that ran, in order (empty in archives older than this field).
    turns: list[TurnRecord] = Field(default_factory=list)
    failure: RunFailure | None = None
    score_note: str = "authoritative score: artifacts/llm_judge/combined_score.json"

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Summary(StrictModel):
    """``summary.json``: evidence status and resource use of the run."""

    schema_: Literal["tt-summary/1"] = Field(default="tt-summary/1", alias="schema")
    run_id: str
    trace_complete: bool
    structured_trace_status: StructuredTraceStatus
    event_counts: dict[str, int] = Field(default_factory=dict)
    tool_calls: int = 0
    model_calls: int | None = Field(default=None, description="Provider requests seen by the gateway.")
    usage: TokenUsage | None = Field(default=None, description="Run total; None when unavailable.")
    wall_seconds: float | None = None
    notes: list[str] = Field(default_factory=list)
    accounting: dict[str, int] | None = Field(
        default=None, description="Native records per disposition (mapped, folded, kept, context, unaccounted; "
                                  "unknown_type) of the normalizer's record accounting; None when it reported none.")
    reconciliation: dict[str, int] | None = Field(
        default=None, description="Counts of the dual-source reconciliation (native record vs provider "
                                  "boundary; the items are in evidence/reconciliation.json); None when not run.")

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class CriterionVerdict(StrictModel):
    """The final verdict of one criterion."""

    id: str
    layer: Literal["harness", "agent"]
    type: Literal["rule", "rubric"]
    role: Literal["core", "diagnostic"] = "core"
    component: str | None = None
    raw_state: int | None = Field(default=None, description="0/1 (rules, agent rubrics) or 0-3.")
    passed: bool | None = Field(description="None = unscored (never a pass).")
    reason: str
    empty_selection: bool = False
    bypassed: bool = False
    packet_path: str | None = None
    judge_path: str | None = None


class LayerScore(StrictModel):
    """One layer: ``p`` passed of ``n`` finalized criteria (unscored ones stay in ``n``)."""

    p: int
    n: int
    unscored: int
    score: float = Field(description="50 * p / n")


class AdmissionDecision(StrictModel):
    check: str
    ok: bool
    reason: str


class Attribution(StrictModel):
    """SPEC §6 sets and the stored run label."""

    F_H: list[str]
    Z_A: list[str]
    B: list[str]
    Z_H: list[str]
    L_act: list[dict[str, Any]]
    linked_agent_failures: list[str]
    unlinked_agent_failures: list[str]
    label: RunLabel
    label_rule: int


class CombinedScore(StrictModel):
    """``artifacts/llm_judge/combined_score.json``: the authoritative score of a run."""

    schema_: Literal["tt-combined/1"] = Field(default="tt-combined/1", alias="schema")
    identity: CellIdentity
    admitted: bool
    admission: list[AdmissionDecision]
    hard_gates: list[AdmissionDecision] = Field(default_factory=list)
    harness: LayerScore
    agent: LayerScore
    S_H: float
    S_A: float
    S: float
    effective_score: float = Field(description="S after hard gates (0 when a gate zeroed it).")
    combined_pass: bool
    agent_success: bool
    clean: bool
    verdicts: list[CriterionVerdict]
    attribution: Attribution
    judge: str | None = Field(default=None, description="Judge model alias, or None.")

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
