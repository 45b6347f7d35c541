"""Simulator-ledger rules: the ledger is authoritative evidence of what happened.

Ledger lines (``private/ledgers/<service>.jsonl``)::

    {"seq", "time", "kind": "request"|"issued"|"transition"|"refused"|"error",
     "service", "tool", "arguments", "detail", "prev", "hash"}

Hash-chain integrity is an admission matter (:mod:`criteria.admission`); these
rules read the records.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import Field, model_validator

from criteria.errors import Unscorable
from criteria.matchers import get_path
from criteria.registry import Params, RuleContext, RuleOutcome, rule
from criteria.rules_files import workspace_file

LedgerKind = Literal["request", "issued", "transition", "refused", "error"]


def ledger(ctx: RuleContext, service: str) -> list[dict[str, Any]]:
    """The records of one service's ledger.

    Raises:
        Unscorable: the ledger is missing or unreadable (an apparatus failure).
    """
    if service in ctx.run.ledger_errors:
        raise Unscorable(f"ledger of service {service!r} is unreadable: {ctx.run.ledger_errors[service]}")
    if service not in ctx.run.ledgers:
        raise Unscorable(f"no ledger for service {service!r} in private/ledgers/ (apparatus)")
    return ctx.run.ledgers[service]


def _ref(service: str, record: dict[str, Any]) -> str:
    return f"ledger:{service}:{record.get('seq')}"


class CountParams(Params):
    service: str
    tool: str | None = None
    record_kind: LedgerKind = "request"
    min: int | None = None
    max: int | None = None

    @model_validator(mode="after")
    def _bounds(self) -> CountParams:
        if self.min is None and self.max is None:
            raise ValueError("give 'min', 'max' or both")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min={self.min} is greater than max={self.max}")
        return self


@rule("ledger_request_count", CountParams)
def ledger_request_count(p: CountParams, ctx: RuleContext) -> RuleOutcome:
    """The number of ledger records of ``record_kind`` (default ``request``; ``kind`` names
    the rule itself), optionally for one ``tool``, lies within ``[min, max]``."""
    records = [r for r in ledger(ctx, p.service)
               if r.get("kind") == p.record_kind and (p.tool is None or r.get("tool") == p.tool)]
    count = len(records)
    what = f"{count} {p.record_kind} record(s)" + (f" for tool {p.tool!r}" if p.tool else "") + f" in {p.service!r}"
    refs = tuple(_ref(p.service, r) for r in records[:10])
    if p.min is not None and count < p.min:
        return RuleOutcome.fail(f"{what}, fewer than min={p.min}", refs)
    if p.max is not None and count > p.max:
        return RuleOutcome.fail(f"{what}, more than max={p.max}", refs)
    return RuleOutcome.ok(what, refs)


def issued_values(record: dict[str, Any], field: str | None) -> list[str]:
    """The value(s) an ``issued`` record handed out, as text."""
    if field is not None:
        present, value = get_path(record, field)
        if not present:
            raise Unscorable(f"issued record seq {record.get('seq')} has no field {field!r}")
    else:
        detail = record.get("detail")
        if isinstance(detail, dict) and "value" in detail:
            value = detail["value"]
        elif isinstance(detail, dict) and "values" in detail:
            value = detail["values"]
        elif detail is not None and not isinstance(detail, dict):
            value = detail
        else:
            raise Unscorable(f"issued record seq {record.get('seq')} has no detail.value; set the rule's 'field'")
    items = value if isinstance(value, list) else [value]
    return [v if isinstance(v, str) else json.dumps(v) for v in items if v is not None and v != ""]


class IssuedParams(Params):
    service: str
    path: str
    tool: str | None = None
    field: str | None = None
    mode: Literal["all", "any"] = "all"


@rule("ledger_issued_in_file", IssuedParams)
def ledger_issued_in_file(p: IssuedParams, ctx: RuleContext) -> RuleOutcome:
    """Values the simulator issued (``issued`` records, optionally of one ``tool``) appear in
    the workspace file ``path``: every one (``mode: all``) or at least one (``any``)."""
    records = [r for r in ledger(ctx, p.service)
               if r.get("kind") == "issued" and (p.tool is None or r.get("tool") == p.tool)]
    values = [v for r in records for v in issued_values(r, p.field)]
    if not values:
        return RuleOutcome.fail(f"the ledger of {p.service!r} shows no issued value"
                                + (f" for tool {p.tool!r}" if p.tool else ""))
    path, why = workspace_file(ctx, p.path)
    if path is None:
        return RuleOutcome.fail(why)
    text = path.read_text(encoding="utf-8", errors="replace")
    present = [v for v in values if v in text]
    refs = (f"file:{p.path}", *(_ref(p.service, r) for r in records[:5]))
    ok = len(present) == len(values) if p.mode == "all" else bool(present)
    summary = f"{len(present)} of {len(values)} issued value(s) appear in {p.path}"
    return RuleOutcome(ok, summary, refs)


class NoRepeatParams(Params):
    service: str
    tool: str
    key: list[str] | None = None
    kinds: list[LedgerKind] = Field(default_factory=lambda: list[LedgerKind](["request"]))
    max_per_key: int = 1


@rule("ledger_no_repeat", NoRepeatParams)
def ledger_no_repeat(p: NoRepeatParams, ctx: RuleContext) -> RuleOutcome:
    """A one-shot operation was not repeated: records of ``tool`` (of ``kinds``) grouped by
    the argument fields ``key`` (all arguments when omitted) occur at most ``max_per_key``
    times per group."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for record in ledger(ctx, p.service):
        if record.get("tool") != p.tool or record.get("kind") not in p.kinds:
            continue
        args = record.get("arguments")
        ident = args if p.key is None else [get_path(args, k) for k in p.key]
        groups.setdefault(json.dumps(ident, sort_keys=True, default=str), []).append(record)
    repeated = {k: v for k, v in groups.items() if len(v) > p.max_per_key}
    total = sum(len(v) for v in groups.values())
    if not repeated:
        return RuleOutcome.ok(f"{total} {p.tool!r} record(s), none repeated beyond {p.max_per_key}")
    worst = max(repeated.values(), key=len)
    refs = tuple(_ref(p.service, r) for r in worst[:10])
    return RuleOutcome.fail(
        f"{p.tool!r} repeated: {len(repeated)} operation(s) over the limit, one {len(worst)} times "
        f"(ledger seq {', '.join(str(r.get('seq')) for r in worst[:5])})", refs)
