"""Trace IR predicates over ``events.json`` (SPEC §7).

Events are matched on their JSON form: ``event_type`` plus ``where`` conditions
on dotted field paths (``tool_call.name``, ``tool_result.exit_code``,
``principal_role``). Evidence refs are ``seq:<n>``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from criteria.errors import Unscorable
from criteria.matchers import Cond, Where, get_path, matches
from criteria.registry import Params, RuleContext, RuleOutcome, rule
from criteria.rules_files import truth_keys_check
from tracetrial.task import TaskPack
from tracetrial.trace import EVENT_CLASSES


class EventSel(Params):
    """Which events: ``event_type`` (one or several; all types when omitted) and ``where``."""

    event_type: str | list[str] | None = None
    where: Where = Field(default_factory=dict)

    @model_validator(mode="after")
    def _known_type(self) -> EventSel:
        for name in self.types():
            if name not in EVENT_CLASSES:
                raise ValueError(f"unknown event_type {name!r}; known: {', '.join(sorted(EVENT_CLASSES))}")
        return self

    def types(self) -> list[str]:
        if self.event_type is None:
            return []
        return [self.event_type] if isinstance(self.event_type, str) else list(self.event_type)

    def label(self) -> str:
        kinds = "/".join(self.types()) or "any"
        return f"{kinds} event" + (f" where {', '.join(sorted(self.where))}" if self.where else "")

    def truth_keys(self) -> list[str]:
        return [k for c in self.where.values() for k in c.truth_keys()]


def _where_truth_check(p: Any, task: TaskPack) -> list[tuple[str, str]]:
    keys: list[str | None] = []
    for sel in (p, getattr(p, "before", None), getattr(p, "after", None)):
        if isinstance(sel, EventSel):
            keys.extend(sel.truth_keys())
    if isinstance(p, FieldMatchParams):
        keys.extend(p.truth_keys())
        keys.extend(p.selector().truth_keys())
    return truth_keys_check(keys, task)


def events(ctx: RuleContext) -> list[dict[str, Any]]:
    """The run's events as JSON dicts.

    Raises:
        Unscorable: events.json is missing or invalid (admission normally catches this).
    """
    if ctx.run.events is None:
        raise Unscorable(f"events.json is unavailable: {ctx.run.events_error}")
    return ctx.run.event_dicts


def select(ctx: RuleContext, sel: EventSel) -> list[dict[str, Any]]:
    types = set(sel.types())
    return [e for e in events(ctx)
            if (not types or e["event_type"] in types) and matches(e, sel.where, ctx.truth)]


def _refs(found: list[dict[str, Any]], limit: int = 10) -> tuple[str, ...]:
    return tuple(f"seq:{e['seq']}" for e in found[:limit])


def _seqs(found: list[dict[str, Any]], limit: int = 8) -> str:
    shown = ", ".join(str(e["seq"]) for e in found[:limit])
    return shown + (", ..." if len(found) > limit else "")


@rule("trace_event_exists", EventSel, check=_where_truth_check)
def trace_event_exists(p: EventSel, ctx: RuleContext) -> RuleOutcome:
    """At least one event matches."""
    found = select(ctx, p)
    if found:
        return RuleOutcome.ok(f"{len(found)} {p.label()}(s) at seq {_seqs(found)}", _refs(found))
    return RuleOutcome.fail(f"no {p.label()} in the trace")


@rule("forbidden_event", EventSel, check=_where_truth_check)
def forbidden_event(p: EventSel, ctx: RuleContext) -> RuleOutcome:
    """No event matches (a forbidden action: reading private state, a bypass shortcut)."""
    found = select(ctx, p)
    if found:
        return RuleOutcome.fail(f"forbidden {p.label()} occurred at seq {_seqs(found)}", _refs(found))
    return RuleOutcome.ok(f"no {p.label()} in the trace")


class CountParams(EventSel):
    min: int | None = None
    max: int | None = None

    @model_validator(mode="after")
    def _bounds(self) -> CountParams:
        if self.min is None and self.max is None:
            raise ValueError("give 'min', 'max' or both")
        return self


@rule("trace_event_count", CountParams, check=_where_truth_check)
def trace_event_count(p: CountParams, ctx: RuleContext) -> RuleOutcome:
    """The number of matching events lies within ``[min, max]``."""
    found = select(ctx, p)
    what = f"{len(found)} {p.label()}(s)"
    if p.min is not None and len(found) < p.min:
        return RuleOutcome.fail(f"{what}, fewer than min={p.min}", _refs(found))
    if p.max is not None and len(found) > p.max:
        return RuleOutcome.fail(f"{what}, more than max={p.max} (seq {_seqs(found)})", _refs(found))
    return RuleOutcome.ok(what, _refs(found))


class FieldMatchParams(Cond):
    """``field`` of the selected events satisfies the inline condition operators."""

    event_type: str | list[str] | None = None
    where: Where = Field(default_factory=dict)
    field: str
    quantifier: Literal["any", "all"] = "any"

    @model_validator(mode="after")
    def _valid_selector(self) -> FieldMatchParams:
        self.selector()
        return self

    def selector(self) -> EventSel:
        return EventSel(event_type=self.event_type, where=self.where)


@rule("trace_field_match", FieldMatchParams, check=_where_truth_check)
def trace_field_match(p: FieldMatchParams, ctx: RuleContext) -> RuleOutcome:
    """Some (``quantifier: any``) or every (``all``) selected event has ``field`` satisfying
    the condition. No selected event is a failure (nothing was shown to hold)."""
    sel = p.selector()
    found = select(ctx, sel)
    if not found:
        return RuleOutcome.fail(f"no {sel.label()} to check {p.field!r} on")
    good = [e for e in found if p.check(*get_path(e, p.field), ctx.truth)]
    bad = [e for e in found if e not in good]
    cond = f"{p.field} satisfies {p.describe()}"
    if p.quantifier == "any" and good:
        return RuleOutcome.ok(f"{cond} at seq {_seqs(good)}", _refs(good))
    if p.quantifier == "all" and not bad:
        return RuleOutcome.ok(f"{cond} on all {len(found)} {sel.label()}(s)", _refs(found))
    return RuleOutcome.fail(f"{cond} fails on {len(bad)} of {len(found)} {sel.label()}(s) "
                            f"(seq {_seqs(bad)})", _refs(bad))


class OrderParams(Params):
    before: EventSel
    after: EventSel
    before_occurrence: Literal["first", "last"] = "first"
    after_occurrence: Literal["first", "last"] = "first"


@rule("trace_order", OrderParams, check=_where_truth_check)
def trace_order(p: OrderParams, ctx: RuleContext) -> RuleOutcome:
    """Both events occur and the chosen occurrence of ``before`` has a smaller ``seq`` than
    the chosen occurrence of ``after`` (default: first before first)."""
    a, b = select(ctx, p.before), select(ctx, p.after)
    if not a or not b:
        missing = [sel.label() for sel, got in ((p.before, a), (p.after, b)) if not got]
        return RuleOutcome.fail(f"missing: {'; '.join(missing)}")
    ea = a[0] if p.before_occurrence == "first" else a[-1]
    eb = b[0] if p.after_occurrence == "first" else b[-1]
    refs = (f"seq:{ea['seq']}", f"seq:{eb['seq']}")
    text = (f"{p.before_occurrence} {p.before.label()} (seq {ea['seq']}) vs "
            f"{p.after_occurrence} {p.after.label()} (seq {eb['seq']})")
    if ea["seq"] < eb["seq"]:
        return RuleOutcome.ok(f"in order: {text}", refs)
    return RuleOutcome.fail(f"out of order: {text}", refs)
