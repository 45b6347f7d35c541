"""Rubric files of a task pack: ``verifier/harness_score.yaml`` and ``verifier/agent_score.yaml``.

A criterion is ``⟨id, layer, type, statement, evidence, component, trigger, role⟩``
(SPEC §4). ``type: rule`` criteria name a deterministic rule from the criteria
library (``rule.kind`` plus its parameters, checked by ``criteria`` when the
rubric is evaluated); ``type: rubric`` criteria are judged on a bounded evidence
packet built from ``evidence``.

The harness rubric may also declare candidate links ``(h, a, μ)`` with an
activation condition (SPEC §6).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tracetrial.model import StrictModel

Layer = Literal["harness", "agent"]


EvidenceSource = Literal["trace", "gateway", "ledger", "workspace", "native", "verifier", "probe"]


def _default_sources() -> list[EvidenceSource]:
    return ["trace"]


class EvidenceSelector(StrictModel):
    """Which evidence a criterion reads (SPEC §8). Deterministic; bounded by ``max_records``."""

    sources: list[EvidenceSource] = Field(default_factory=_default_sources)
    event_types: list[str] = Field(default_factory=list)
    fields: list[str] = Field(default_factory=list)
    match: list[str] = Field(default_factory=list, description="Literal keywords to match.")
    files: list[str] = Field(default_factory=list, description="Workspace paths (workspace source).")
    max_records: int = Field(default=20, ge=1, le=500)
    max_chars: int = Field(default=4000, ge=200, le=100_000)
    required: bool = True


class RuleSpec(BaseModel):
    """A deterministic rule: ``kind`` names a rule of the criteria library; the rest are its
    parameters (validated by that rule)."""

    model_config = ConfigDict(extra="allow")

    kind: str = Field(min_length=1)

    def params(self) -> dict[str, Any]:
        """The rule's parameters (everything but ``kind``)."""
        return dict(self.model_extra or {})


Protocol = Literal["probe", "live"]
PROTOCOLS: tuple[Protocol, ...] = ("probe", "live")


class Trigger(StrictModel):
    """When a criterion applies (the paper's ``trigger``). ``protocol: live``: only in runs under
    a live model — e.g. a semantic rubric over the agent's free-text reply, which the probe
    protocol scripts; such a criterion is left out of a probe run (not in its denominators), so
    the embedded default needs no judge."""

    protocol: Protocol


class CriterionSpec(StrictModel):
    """One criterion of a rubric."""

    id: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_.-]*$")
    layer: Layer | None = None
    type: Literal["rule", "rubric"]
    statement: str = Field(min_length=1)
    component: Literal["C", "E", "G", "L", "O", "T", "V"] | None = None
    trigger: Trigger | str = Field(
        default="always", description="'always', a prose note of the condition the criterion's rule checks "
        "(documentation only), or {protocol: live|probe}: the criterion belongs to runs under that protocol only.")
    role: Literal["core", "diagnostic"] = "core"
    rule: RuleSpec | None = None
    evidence: EvidenceSelector = Field(default_factory=EvidenceSelector)
    bypass: RuleSpec | None = Field(
        default=None,
        description="Harness layer only: a rule that, when it holds, shows an agent action "
        "bypassed this criterion's observation (SPEC §6, set B).",
    )

    def applies_to(self, protocol: str) -> bool:
        """Whether the criterion is part of a run under ``protocol`` (its trigger)."""
        return not isinstance(self.trigger, Trigger) or self.trigger.protocol == protocol

    @property
    def trigger_text(self) -> str:
        """The trigger as the judge prompt and the reports show it (``always``, ``protocol: live``)."""
        return self.trigger if isinstance(self.trigger, str) else f"protocol: {self.trigger.protocol}"

    @model_validator(mode="after")
    def _rule_matches_type(self) -> CriterionSpec:
        if self.type == "rule" and self.rule is None:
            raise ValueError("a 'rule' criterion needs a 'rule: {kind: ...}' block")
        if self.type == "rubric" and self.rule is not None:
            raise ValueError("a 'rubric' criterion is judged, it must not carry a 'rule' block")
        return self


class LinkSpec(StrictModel):
    """A pre-declared candidate propagation link ``ℓ = (h, a, μ)`` with ``q_ℓ``."""

    harness: str = Field(description="Harness criterion id h_ℓ.")
    agent: str = Field(description="Agent criterion id a_ℓ.")
    distortion: str = Field(min_length=1, description="μ_ℓ: the intermediate distortion.")
    activation: RuleSpec | None = Field(
        default=None, description="q_ℓ(R); absent means 'both endpoints failed' suffices."
    )
    priority: Literal["high", "medium", "low"] = "medium"


class Rubric(StrictModel):
    """One rubric file."""

    layer: Layer
    criteria: list[CriterionSpec] = Field(min_length=1)
    links: list[LinkSpec] = Field(default_factory=list)

    @model_validator(mode="after")
    def _consistent(self) -> Rubric:
        seen: set[str] = set()
        for crit in self.criteria:
            if crit.id in seen:
                raise ValueError(f"criterion id {crit.id!r} appears twice")
            seen.add(crit.id)
            if crit.layer is None:
                crit.layer = self.layer
            elif crit.layer != self.layer:
                raise ValueError(
                    f"criterion {crit.id!r} says layer {crit.layer!r} inside the "
                    f"{self.layer!r} rubric"
                )
            if crit.bypass is not None and self.layer != "harness":
                raise ValueError(f"criterion {crit.id!r}: 'bypass' is only for harness criteria")
        if self.links and self.layer != "harness":
            raise ValueError("links are declared in the harness rubric")
        for protocol in PROTOCOLS:
            if not any(c.applies_to(protocol) for c in self.criteria):
                raise ValueError(f"no criterion applies under the {protocol} protocol: every layer needs at least "
                                 "one (give one criterion trigger 'always' or that protocol)")
        return self

    def for_protocol(self, protocol: str, agent_ids: set[str] | None = None) -> Rubric:
        """The rubric of a run under ``protocol``: its triggered criteria, and (harness rubric)
        the links whose harness criterion applies and whose agent criterion is in ``agent_ids``
        (the agent rubric's criteria that apply; ``None``: keep every agent end)."""
        kept = [c for c in self.criteria if c.applies_to(protocol)]
        ids = {c.id for c in kept}
        links = [lk for lk in self.links if lk.harness in ids and (agent_ids is None or lk.agent in agent_ids)]
        if len(kept) == len(self.criteria) and len(links) == len(self.links):
            return self
        return self.model_copy(update={"criteria": kept, "links": links})
