"""Judge calibration: how often a judge gives the verdict a careful reader gives (issue 26).

A semantic criterion is only as good as its judge. The **gold set** (``ci/judge/gold.json``) holds
evidence packets built from real archives of this suite — exactly what the judge is shown for a
criterion of a real cell — each with the state a careful human reader assigned and why. Every rubric
*kind* (the agent's final reply, a free-text deliverable, a harness notice) has passing and failing
cases, so a judge that always says "holds" (or always "does not hold") cannot agree.

:func:`calibrate_judge` asks a judge about every gold item with the run's own fixed prompt
(:func:`criteria.judge.prompt_messages`), parses the answer with the run's own strict parser (a
citation outside the packet is malformed), resolves it as a run would (state 1 without a citation
is 0), and reports agreement and Cohen's κ per layer and per kind, on the verdict a run would record
(harness states 0 and 3 both fail; 2 is "not exercised"). A judge is **calibrated** when
every layer of the gold set reaches :data:`THRESHOLD` agreement; until then the reports label its
semantic verdicts "uncalibrated" (:func:`judge_status`, read from the committed record
``ci/judge/calibrations.json`` that ``tracetrial judge-calibrate --record`` writes).

Pure except :func:`load_gold`, :func:`load_calibrations`, :func:`write_calibrations` and the judge.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, model_validator

from criteria.errors import CriteriaError, JudgeError
from criteria.evidence import EvidencePacket, packet_for
from criteria.judge import (
    STATES,
    TEMPLATE_VERSION,
    Judge,
    MalformedJudgeOutput,
    parse_response,
    prompt_messages,
)
from criteria.rundata import load_run
from tracetrial.model import StrictModel
from tracetrial.rubric import Rubric
from tracetrial.task import TaskPack

GOLD_SCHEMA = "tt-judge-gold/1"
CALIBRATION_SCHEMA = "tt-judge-calibration/1"
RECORD_SCHEMA = "tt-judge-calibrations/1"
#: Agreement a judge must reach on every layer of the gold set before its verdicts count as calibrated.
THRESHOLD = 0.9
#: The committed gold set and calibration record (repository data files, not code).
REPO = Path(__file__).resolve().parents[1]
DEFAULT_GOLD = REPO / "ci" / "judge" / "gold.json"
DEFAULT_RECORD = REPO / "ci" / "judge" / "calibrations.json"

Layer = Literal["harness", "agent"]


class GoldError(CriteriaError):
    """The gold set or the calibration record is missing or malformed (a precise message)."""


class GoldItem(StrictModel):
    """One evidence packet of a real cell and the state a careful reader gives it."""

    id: str = Field(min_length=1, description="Unique: '<task>/<criterion>/<harness>' (+ a suffix if needed).")
    kind: str = Field(min_length=1, description="The rubric kind: final_reply, deliverable, notice, ...")
    source: str = Field(min_length=1, description="The archived cell the packet was built from: '<task>/<model>/<harness>'.")
    criterion: str
    layer: Layer
    component: str | None = None
    statement: str = Field(min_length=1)
    trigger: str = "protocol: live"
    packet: dict[str, Any]
    expected: int = Field(description="The state a careful reader assigns (the layer's states).")
    note: str = Field(min_length=1, description="Why that state: what in the packet decides it.")

    @model_validator(mode="after")
    def _check(self) -> GoldItem:
        if self.expected not in STATES[self.layer]:
            raise ValueError(f"expected state {self.expected} is not a {self.layer}-layer state "
                             f"(allowed: {sorted(STATES[self.layer])})")
        packet = EvidencePacket.model_validate(self.packet)
        if packet.layer != self.layer or packet.criterion != self.criterion:
            raise ValueError(f"the packet is for {packet.criterion} ({packet.layer}), not {self.criterion} ({self.layer})")
        return self

    def messages(self) -> list[dict[str, str]]:
        """The judge prompt a run would send for this packet (downstream agent context omitted)."""
        return prompt_messages(criterion_id=self.criterion, layer=self.layer, statement=self.statement,
                               component=self.component, trigger=self.trigger, packet=self.packet)

    def refs(self) -> list[str]:
        return EvidencePacket.model_validate(self.packet).refs


class GoldSet(StrictModel):
    """``ci/judge/gold.json``."""

    schema_: Literal["tt-judge-gold/1"] = Field(default="tt-judge-gold/1", alias="schema")
    items: list[GoldItem] = Field(default_factory=list)

    @model_validator(mode="after")
    def _check(self) -> GoldSet:
        ids = Counter(i.id for i in self.items)
        dup = sorted(k for k, n in ids.items() if n > 1)
        if dup:
            raise ValueError(f"duplicate gold item id(s): {', '.join(dup)}")
        return self

    def digest(self) -> str:
        """SHA-256 of the canonical gold set: a calibration holds for exactly this set."""
        text = json.dumps(self.model_dump(mode="json", by_alias=True), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def coverage_problems(self) -> list[str]:
        """Kinds without both a passing (state 1) and a failing (any other state) case: such a kind
        cannot tell a judge that always says "holds" from one that reads the packet."""
        problems = []
        for kind in sorted({i.kind for i in self.items}):
            states = {i.expected for i in self.items if i.kind == kind}
            if 1 not in states or not states - {1}:
                problems.append(f"kind {kind!r} needs passing and failing cases (has states {sorted(states)})")
        if not self.items:
            problems.append("the gold set is empty")
        return problems


class ItemOutcome(StrictModel):
    """What the judge said about one gold item."""

    id: str
    layer: Layer
    kind: str
    expected: int
    state: int | None = Field(description="The resolved state (1 without a citation -> 0); None: no valid answer.")
    error: str | None = None
    agreed: bool


class Agreement(StrictModel):
    """Agreement of one group (a layer or a kind)."""

    group: str
    n: int
    agreed: int
    invalid: int
    agreement: float
    kappa: float | None = Field(description="Cohen's kappa (None when chance agreement is 1: one category only).")


class JudgeCalibration(StrictModel):
    """One judge's result on one gold set (``tracetrial judge-calibrate --json``)."""

    schema_: Literal["tt-judge-calibration/1"] = Field(default="tt-judge-calibration/1", alias="schema")
    judge: str
    template: str = TEMPLATE_VERSION
    gold_sha256: str
    threshold: float = THRESHOLD
    layers: list[Agreement]
    kinds: list[Agreement]
    calibrated: bool
    items: list[ItemOutcome] = Field(default_factory=list)


class CalibrationRecord(StrictModel):
    """``ci/judge/calibrations.json``: the latest calibration of each judge (items left out)."""

    schema_: Literal["tt-judge-calibrations/1"] = Field(default="tt-judge-calibrations/1", alias="schema")
    judges: dict[str, JudgeCalibration] = Field(default_factory=dict)


# ----------------------------------------------------------------------------- pure parts


def cohen_kappa(pairs: list[tuple[Any, Any]]) -> float | None:
    """Cohen's κ of (expected, given) category pairs; ``None`` when chance agreement is 1."""
    n = len(pairs)
    if n == 0:
        return None
    observed = sum(1 for a, b in pairs if a == b) / n
    left, right = Counter(a for a, _ in pairs), Counter(b for _, b in pairs)
    chance = sum(left[c] * right[c] for c in left) / (n * n)
    if chance >= 1.0:
        return None
    return round((observed - chance) / (1.0 - chance), 4)


def verdict_class(layer: str, state: int) -> str:
    """What a state means for the score: harness 0 and 3 both fail the criterion (3 says the harness
    faulted), 2 defers to the agent gate; so agreement is on the verdict a run would record."""
    if state == 1:
        return "holds"
    if layer == "harness" and state == 2:
        return "not_exercised"
    return "fails"


def judge_item(item: GoldItem, judge: Judge) -> ItemOutcome:
    """Ask ``judge`` about one item exactly as a run would, and compare with the gold state."""
    try:
        text = judge.complete(item.messages())
        parsed = parse_response(text, item.layer, item.refs())
    except (JudgeError, MalformedJudgeOutput) as exc:
        return ItemOutcome(id=item.id, layer=item.layer, kind=item.kind, expected=item.expected, state=None,
                           error=f"{type(exc).__name__}: {exc}", agreed=False)
    # A run resolves "holds" without a citation to 0 (no supporting evidence): so does calibration.
    state = 0 if parsed.state == 1 and not parsed.citations else parsed.state
    return ItemOutcome(id=item.id, layer=item.layer, kind=item.kind, expected=item.expected, state=state,
                       error=None, agreed=verdict_class(item.layer, state) == verdict_class(item.layer, item.expected))


def agreement(group: str, outcomes: list[ItemOutcome]) -> Agreement:
    """Agreement and κ of ``outcomes``; an invalid answer is its own category (never agreement)."""
    pairs = [(verdict_class(o.layer, o.expected),
              verdict_class(o.layer, o.state) if o.state is not None else "invalid") for o in outcomes]
    n = len(outcomes)
    agreed = sum(1 for o in outcomes if o.agreed)
    return Agreement(group=group, n=n, agreed=agreed, invalid=sum(1 for o in outcomes if o.state is None),
                     agreement=round(agreed / n, 4) if n else 0.0, kappa=cohen_kappa(pairs))


def summarize(judge: str, gold: GoldSet, outcomes: list[ItemOutcome], threshold: float = THRESHOLD) -> JudgeCalibration:
    """The calibration result: per layer and per kind; calibrated iff every layer reaches ``threshold``
    and the gold set covers each kind with passing and failing cases."""
    layers = [agreement(layer, [o for o in outcomes if o.layer == layer])
              for layer in ("agent", "harness") if any(o.layer == layer for o in outcomes)]
    kinds = [agreement(kind, [o for o in outcomes if o.kind == kind]) for kind in sorted({o.kind for o in outcomes})]
    calibrated = bool(layers) and all(a.agreement >= threshold for a in layers) and not gold.coverage_problems()
    return JudgeCalibration(judge=judge, gold_sha256=gold.digest(), threshold=threshold, layers=layers,
                            kinds=kinds, calibrated=calibrated, items=outcomes)


def calibrate_judge(gold: GoldSet, judge: Judge, name: str, threshold: float = THRESHOLD) -> JudgeCalibration:
    """Ask ``judge`` about every gold item; the judge is the only side effect."""
    return summarize(name, gold, [judge_item(item, judge) for item in gold.items], threshold)


def judge_status(judge: str, record: CalibrationRecord, gold_sha256: str | None) -> str:
    """How a report labels a judge's semantic verdicts: ``calibrated (…)`` only for a calibration
    of the current gold set and prompt template that reached the threshold, else ``uncalibrated (why)``."""
    cal = record.judges.get(judge)
    if cal is None:
        return "uncalibrated (no calibration on the gold set)"
    if gold_sha256 is not None and cal.gold_sha256 != gold_sha256:
        return "uncalibrated (calibrated on another gold set)"
    if cal.template != TEMPLATE_VERSION:
        return f"uncalibrated (calibrated with prompt template {cal.template})"
    worst = min(cal.layers, key=lambda a: a.agreement) if cal.layers else None
    figure = f"{worst.agreement:.0%} agreement ({worst.group})" if worst else "no items"
    return f"calibrated ({figure})" if cal.calibrated else f"uncalibrated ({figure} < {cal.threshold:.0%})"


def render(cal: JudgeCalibration) -> str:
    """The terminal table of one calibration."""
    lines = [f"judge {cal.judge} on gold set {cal.gold_sha256[:12]} (template {cal.template})",
             f"{'group':<24}{'n':>5}{'agreed':>8}{'invalid':>9}{'agreement':>11}{'kappa':>8}"]
    for a in [*cal.layers, *cal.kinds]:
        kappa = "-" if a.kappa is None else f"{a.kappa:.2f}"
        lines.append(f"{a.group:<24}{a.n:>5}{a.agreed:>8}{a.invalid:>9}{a.agreement:>10.0%}{kappa:>8}")
    for o in cal.items:
        if not o.agreed:
            lines.append(f"  disagreed: {o.id}: expected {o.expected}, judge "
                         f"{o.state if o.state is not None else 'invalid'}{f' ({o.error[:160]})' if o.error else ''}")
    verdict = "calibrated" if cal.calibrated else f"UNCALIBRATED (every layer needs >= {cal.threshold:.0%})"
    lines.append(f"-> {verdict}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- files


def load_gold(path: Path = DEFAULT_GOLD) -> GoldSet:
    """Read and validate a gold set; a precise :class:`GoldError` when it cannot be used."""
    try:
        return GoldSet.model_validate_json(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise GoldError(f"no gold set at {path}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first.get("loc", ()))
        raise GoldError(f"{path}: invalid gold set at {where or 'top level'}: {first.get('msg')}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise GoldError(f"{path}: unreadable: {exc}") from None


def save_gold(gold: GoldSet, path: Path = DEFAULT_GOLD) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(gold.model_dump(mode="json", by_alias=True), indent=1, ensure_ascii=False) + "\n",
                    encoding="utf-8")


def load_calibrations(path: Path = DEFAULT_RECORD) -> CalibrationRecord:
    """The committed calibration record (empty when absent); :class:`GoldError` when malformed."""
    if not Path(path).is_file():
        return CalibrationRecord()
    try:
        return CalibrationRecord.model_validate_json(Path(path).read_text(encoding="utf-8"))
    except (ValidationError, OSError, UnicodeDecodeError) as exc:
        raise GoldError(f"{path}: invalid judge calibration record: {str(exc).splitlines()[0]}") from None


def write_calibrations(record: CalibrationRecord, cal: JudgeCalibration, path: Path = DEFAULT_RECORD) -> CalibrationRecord:
    """Store ``cal`` (without its per-item outcomes) as the judge's latest calibration."""
    judges = dict(record.judges)
    judges[cal.judge] = cal.model_copy(update={"items": []})
    new = CalibrationRecord(judges=dict(sorted(judges.items())))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(new.model_dump(mode="json", by_alias=True), indent=1) + "\n", encoding="utf-8")
    return new


#: A run's workspace or temporary folder as an archive records it (a machine path): masked in gold
#: packets, so the committed gold set names no machine path and does not change with where a run ran.
_WORKSPACE_PATH = re.compile(r"/(?:tmp|var/tmp|work|root|home)/[^\s\"'\])>]*?/workspace(?=[/\s\"'\])>]|$)")
_MACHINE_PATH = re.compile(r"/(?:tmp|var/tmp|work|root|home)/[^\s\"'\])>]+")


def mask_machine_paths(value: Any) -> Any:
    """``value`` with every workspace path replaced by ``<workspace>`` and any other temporary or
    home path by ``<path>`` (strings inside lists and dicts too; everything else unchanged)."""
    if isinstance(value, str):
        return _MACHINE_PATH.sub("<path>", _WORKSPACE_PATH.sub("<workspace>", value))
    if isinstance(value, list):
        return [mask_machine_paths(v) for v in value]
    if isinstance(value, dict):
        return {k: mask_machine_paths(v) for k, v in value.items()}
    return value


def gold_item_from_archive(task: TaskPack, run_dir: Path, source: str, criterion: str, *, expected: int,
                           kind: str, note: str, item_id: str | None = None) -> GoldItem:
    """A gold item from a real archived cell: the packet the pack's current selector builds for
    ``criterion`` over ``run_dir`` (the same :func:`criteria.evidence.packet_for` a run uses)."""
    rubrics: tuple[tuple[Layer, Rubric], ...] = (("agent", task.agent_rubric), ("harness", task.harness_rubric))
    found = [(c, layer) for layer, rubric in rubrics for c in rubric.criteria if c.id == criterion]
    if not found:
        raise GoldError(f"{task.spec.id} has no criterion {criterion!r}")
    spec, layer = found[0]
    if spec.type != "rubric":
        raise GoldError(f"{task.spec.id}/{criterion} is a {spec.type} criterion: only judged (rubric) criteria "
                        "belong in the gold set")
    if not (run_dir / "events.json").is_file():
        raise GoldError(f"{run_dir} is not an archived cell (no events.json)")
    packet = packet_for(criterion, layer, spec.evidence, load_run(run_dir))
    return GoldItem(id=item_id or f"{task.spec.id}/{criterion}/{source.rsplit('/', 1)[-1]}", kind=kind,
                    source=source, criterion=criterion, layer=layer,
                    component=spec.component, statement=spec.statement, trigger=spec.trigger_text,
                    packet=mask_machine_paths(packet.model_dump(mode="json", by_alias=True)), expected=expected,
                    note=note)


def judge_statuses(judges: list[str], record_path: Path = DEFAULT_RECORD,
                   gold_path: Path = DEFAULT_GOLD) -> dict[str, str]:
    """:func:`judge_status` of each judge against the committed record and gold set (what the
    reports print next to a judge's name); an unreadable record or gold set says so, never "calibrated"."""
    if not judges:
        return {}
    try:
        record = load_calibrations(record_path)
        gold_sha = load_gold(gold_path).digest() if Path(gold_path).is_file() else None
    except GoldError as exc:
        return {j: f"uncalibrated ({exc})" for j in judges}
    if gold_sha is None:
        return {j: "uncalibrated (no gold set)" for j in judges}
    return {j: judge_status(j, record, gold_sha) for j in judges}
