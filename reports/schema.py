"""``reports/summary.json``: the corpus summary written to disk (pydantic v2).

``tt-report/2``: the corpus pools (``overall``, per model, per component, …) leave the calibration
instrument (``reference`` and its mutants) out unless asked; it has its own section. Repeated
cells (``--tt-repeat``) add the ``repeats`` section.

Every rate is a percentage (×100). A rate whose denominator is empty is
``None`` ("not available"), never ``0``. :class:`Share` keeps the count and the
denominator next to the percentage so every figure can be re-derived.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from tracetrial.model import StrictModel

#: How a cell entered (or did not enter) the measured population.
#: ``tampered``: the cell's files do not match its manifest (its numbers are never pooled).
CellStatus = Literal["measured", "apparatus_invalid", "unsupported", "non_comparable", "not_scored", "tampered"]
CELL_STATUSES: tuple[CellStatus, ...] = (
    "measured", "apparatus_invalid", "unsupported", "non_comparable", "not_scored", "tampered",
)


class Share(StrictModel):
    """``count`` of ``of`` runs, and ``pct = 100·count/of`` (``None`` when ``of == 0``)."""

    count: int
    of: int
    pct: float | None


class CellCounts(StrictModel):
    """Cells of a group by status; each cell is counted exactly once."""

    total: int = 0
    measured: int = 0
    apparatus_invalid: int = 0
    unsupported: int = 0
    non_comparable: int = 0
    not_scored: int = 0
    tampered: int = 0


class States(StrictModel):
    """The four exclusive states from the not-passed sets of both layers (SPEC §5).

    A harness criterion is "not passed" when it is in the raw ``F_H`` or is
    unscored (unscored is never a pass); likewise for the agent layer. The four
    shares have the same denominator and sum to 100 %.
    """

    joint_clean: Share
    h_only: Share
    a_only: Share
    joint_failure: Share


class LinkRate(StrictModel):
    """``J`` runs failing in both layers; ``L ⊆ J`` with ≥1 stored (activated) link."""

    joint_failures: int
    linked: int
    pct: float | None = Field(description="100·L/J; None when J = 0.")


class LinkActivation(StrictModel):
    """Link activation per primary dimension (component letter) and pooled.

    ``pooled`` is ``100·ΣL_d / ΣJ_d``, *not* the unweighted mean of the per-dimension rates.
    """

    by_component: dict[str, LinkRate]
    pooled: LinkRate


class AttributionTotals(StrictModel):
    """SPEC §6 set sizes summed over measured runs."""

    z_h_total: int = Field(description="Σ|Z_H| (harness failures not bypassed).")
    runs_with_z_h: int
    bypassed_total: int = Field(description="Σ|B|.")
    activated_links_total: int = Field(description="Σ|L_act|.")
    linked_agent_failures: int = Field(description="Σ|Z_A,linked|.")
    unlinked_agent_failures: int = Field(description="Σ|Z_A \\ Z_A,linked|.")
    runs_with_activated_link: Share
    runs_with_unlinked_agent_failure: Share


class Unscored(StrictModel):
    """Unscored criteria (e.g. no judge): counted, never a pass, never dropped."""

    harness_criteria: int
    agent_criteria: int
    runs_with_unscored: int


class Diagnostics(StrictModel):
    """Diagnostic criteria (never in a score, never in ``p``/``n``): shown, so a failed one is visible."""

    failed: int = Field(description="Failed diagnostic criteria over measured runs.")
    unscored: int
    runs_with_failed: int


class Resources(StrictModel):
    """Mean recorded usage per run and the estimated agent cost (judge calls excluded).

    Token means are over runs whose ``summary.json`` reports the counter; cost
    means are over runs with usage *and* a price entry. ``None`` = unavailable.
    """

    runs_with_usage: int
    runs_without_usage: int
    mean_input_k: float | None
    mean_output_k: float | None
    mean_total_k: float | None
    mean_reasoning_k: float | None = Field(description="Already inside output; shown, never added.")
    runs_costed: int
    mean_cost_usd: float | None
    total_cost_usd: float | None
    cost_note: str | None = Field(default=None, description="Why (part of) the cost is unavailable.")


class GroupMetrics(StrictModel):
    """SPEC §5 corpus metrics of one group of cells (overall, a harness, a model, …)."""

    cells: CellCounts
    runs: int = Field(description="Measured runs: the denominator of every rate below.")
    agent_success: Share = Field(description="Runs with p_A = n_A.")
    agent_score: float | None = Field(description="100 · mean(p_A/n_A).")
    harness_macro: float | None = Field(description="100 · mean(p_H/n_H).")
    harness_micro: float | None = Field(description="100 · Σp_H / Σn_H.")
    agent_micro: float | None = Field(description="100 · Σp_A / Σn_A.")
    overall: float | None = Field(description="mean(Agent Score, Harness Macro), unrounded inputs.")
    clean: Share = Field(description="Runs where every criterion of both layers passed.")
    mean_score: float | None = Field(description="Mean effective S (after hard gates), 0–100.")
    harness_items_passed: int
    harness_items_total: int
    agent_items_passed: int
    agent_items_total: int
    gated_runs: int = Field(description="Runs whose effective score a hard gate lowered.")
    unscored: Unscored
    diagnostics: Diagnostics
    states: States
    links: LinkActivation
    attribution: AttributionTotals
    labels: dict[str, int] = Field(description="Stored run labels of every scored cell (measured or "
                                   "apparatus-invalid).")
    resources: Resources


class CellRow(StrictModel):
    """One task × model × harness cell, as listed in the report."""

    task_id: str
    component: str
    property: str | None
    model: str
    harness: str
    protocol: str | None
    status: CellStatus
    reason: str | None
    path: str = Field(description="Run folder relative to the output folder (posix).")
    S_H: float | None = None
    S_A: float | None = None
    S: float | None = None
    effective_score: float | None = None
    label: str | None = None
    failed: list[str] = Field(default_factory=list, description="Not-passed criterion ids.")
    unscored: list[str] = Field(default_factory=list)
    links: int = 0
    cost_usd: float | None = None
    diagnostic_failed: list[str] = Field(default_factory=list, description="Failed diagnostic criterion ids.")
    diagnostic_unscored: list[str] = Field(default_factory=list)
    calibration: bool = Field(default=False, description="A run of the calibration instrument (reference, "
                                                         "reference+<defect>).")
    repetition: int = Field(default=1, description="Which repetition of the cell (--tt-repeat).")
    harness_version: str | None = Field(default=None, description="The native version that ran.")
    page: str | None = Field(default=None, description="The cell's drill-down page relative to reports/ "
                                                       "(cells with a failed or unscored criterion).")


class VersionFlip(StrictModel):
    """One criterion (or the cell's status) of one task × model whose state differs between
    two or more versions of the same harness run in one output."""

    task_id: str
    model: str
    criterion: str = Field(description="Criterion id, or 'status' when the cell was not measured in "
                                       "every version.")
    layer: str | None = Field(description="'harness' or 'agent'; None for a status row.")
    states: dict[str, str] = Field(description="Harness name as run (e.g. 'claude_code', "
                                               "'claude_code@2.1.332') -> 'pass' | 'fail' | 'unscored' | "
                                               "'absent' (not among that version's verdicts) or the cell status.")


class VersionDiff(StrictModel):
    """One harness run at two or more versions in this output: what flips between them."""

    harness: str = Field(description="The harness (plain name, without '@version').")
    versions: dict[str, str | None] = Field(description="Harness name as run -> the native version that ran "
                                                        "(pin first, then named versions).")
    cells_compared: int = Field(description="Task × model pairs run under at least two of those names.")
    flips: list[VersionFlip]


class CalibrationSection(StrictModel):
    """The calibration instrument's runs (``reference`` and its mutants), apart from the corpus.

    They audit the tasks (the faithful harness must score 100, each mutant flip what its task
    declares): pooled with the evaluated harnesses they would inflate every corpus figure, so the
    corpus pools leave them out unless the report was asked to include them.
    """

    included_in_pools: bool = Field(description="True when --include-calibration pooled them into the corpus.")
    by_harness: dict[str, GroupMetrics]
    overall: GroupMetrics = Field(description="Every calibration run pooled (the instrument as a whole).")


class PassK(StrictModel):
    """pass^k and pass@k of one group over repeated cells (tau-bench's unbiased estimators).

    For a cell with ``n`` measured repetitions of which ``c`` passed, ``pass^j = C(c,j)/C(n,j)``
    (every one of ``j`` draws passes) and ``pass@j = 1 − C(n−c,j)/C(n,j)`` (at least one does);
    a group's value is the mean over its cells with ``n ≥ j``, ×100. ``None`` when no cell has
    ``j`` measured repetitions.
    """

    cells: int = Field(description="Cells (task × model × harness) with at least one measured repetition.")
    pass_hat: list[float | None] = Field(description="pass^j for j = 1..k (index j-1), ×100.")
    pass_at: list[float | None] = Field(description="pass@j for j = 1..k (index j-1), ×100.")


class Agreement(StrictModel):
    """How often repetitions of a cell agree: over cells with ≥ 2 measured repetitions.

    Under the probe protocol this is the determinism of the apparatus (100 % expected); under
    a live protocol it is the noise floor a single run carries.
    """

    cells: int = Field(description="Cells with at least two measured repetitions.")
    identical: int = Field(description="Of those, cells whose repetitions have the same verdict vector "
                                       "(every criterion, core and diagnostic, in the same state).")
    pct: float | None
    criteria: int = Field(description="Criterion × cell pairs compared.")
    criteria_agreeing: int = Field(description="Pairs in the same state in every repetition.")
    criteria_pct: float | None
    mean_score_sd: float | None = Field(description="Mean over those cells of the standard deviation of "
                                                    "the effective S across repetitions (0-100 scale).")
    flipping: dict[str, int] = Field(default_factory=dict,
                                     description="Criterion id -> cells in which it did not agree.")


class RepeatMetrics(StrictModel):
    """Repeated-run metrics of one group (a harness, a component, a task × harness, or all)."""

    repetitions: int = Field(description="The most repetitions any cell of the group has.")
    runs_not_measured: int = Field(description="Repetitions left out (not measured: apparatus-invalid, "
                                               "not scored, ...).")
    combined: PassK = Field(description="A run passes when S = 100 after hard gates (the stored combined_pass).")
    agent: PassK = Field(description="A run passes when the agent task succeeded (the stored agent_success).")
    agreement: Agreement


class RepeatSection(StrictModel):
    """``--tt-repeat K``: pass^k / pass@k per harness, component and task, and the agreement of
    repetitions (determinism under probe, noise floor under live)."""

    k: int = Field(description="The most repetitions of any cell.")
    agreement_label: str = Field(description="'determinism' (probe), 'noise floor' (live) or "
                                             "'agreement' (mixed/unknown).")
    overall: RepeatMetrics = Field(description="The corpus pool (calibration left out unless included).")
    by_harness: dict[str, RepeatMetrics] = Field(description="Every harness, calibration ones included.")
    by_component: dict[str, RepeatMetrics] = Field(description="Corpus pools per component.")
    by_task: dict[str, dict[str, RepeatMetrics]] = Field(description="Task -> harness -> metrics.")


class PriceInfo(StrictModel):
    """The frozen price catalogue used for the cost estimate."""

    source: str | None
    sha256: str | None
    models_priced: list[str]
    note: str | None = None
    provenance: str | None = Field(default=None, description="The catalogue's own record of where "
                                   "its prices come from (e.g. frozen_on, source).")


class CorpusSummary(StrictModel):
    """``reports/summary.json``."""

    schema_: Literal["tt-report/2"] = Field(default="tt-report/2", alias="schema")
    protocols: list[str]
    protocol_label: str = Field(description="'probe', 'live', 'mixed: live, probe' or 'unknown'.")
    judges: list[str]
    judge_status: dict[str, str] = Field(
        default_factory=dict, description="Per judge: 'calibrated (…)' when its recorded agreement on the "
        "committed gold set reaches the threshold (tracetrial judge-calibrate), else 'uncalibrated (why)'.")
    overall: GroupMetrics = Field(description="The corpus pool: evaluated harnesses only, unless "
                                              "calibration.included_in_pools.")
    by_harness: dict[str, GroupMetrics] = Field(description="Evaluated harnesses (and the calibration ones "
                                                            "when included in the pools).")
    by_model: dict[str, GroupMetrics]
    by_component: dict[str, GroupMetrics]
    by_harness_model: dict[str, dict[str, GroupMetrics]]
    by_harness_component: dict[str, dict[str, GroupMetrics]]
    calibration: CalibrationSection | None = Field(
        default=None, description="The calibration instrument's runs apart (None: none in this output).")
    harness_versions: dict[str, list[str]] = Field(
        default_factory=dict, description="Harness name as run -> the native versions that ran (every harness).")
    repeats: RepeatSection | None = Field(default=None, description="Present when a cell ran more than once.")
    cells: list[CellRow]
    prices: PriceInfo
    problems: list[str] = Field(default_factory=list, description="Consistency warnings.")
    version_diff: list[VersionDiff] = Field(
        default_factory=list, description="Per harness run at two or more versions: the criteria whose "
                                          "verdict flips between versions, per task and model.")
    generated_at: str | None = None

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
