"""The dual-source reconciliation as archive evidence and as a rule kind.

:func:`reconciliation_of` reconciles one run from its archive alone (:mod:`criteria.reconcile`
over ``events.json`` and ``gateway/requests.jsonl``); :func:`write_reconciliation` archives it as
``evidence/reconciliation.json`` with its counts in ``summary.json`` (the cell flow calls it
after the archive is redacted and before it is sealed, so the seal covers it, and ``rescore
--renormalize`` calls it again after re-deriving the trace). The rule ``native_record_accurate``
recomputes it from the archive, so a verdict never depends on the stored file.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from criteria.errors import Unscorable
from criteria.reconcile import (
    DELIVERY_KINDS,
    RECONCILIATION_FILE,
    Divergence,
    Kind,
    Reconciliation,
    reconcile,
)
from criteria.registry import Params, RuleContext, RuleOutcome, rule
from criteria.rundata import RunData, load_run
from tracetrial.archive import RunArchive
from tracetrial.verify import names_tool

__all__ = ["ReconcileParams", "native_record_accurate", "reconciliation_of", "write_reconciliation"]


def reconciliation_of(run: RunData) -> Reconciliation:
    """The reconciliation of one loaded run (nothing compared when a source is unreadable)."""
    if run.events is None:
        return reconcile(None, run.gateway, reason=f"events.json is unavailable: {run.events_error}")
    if run.gateway is None:
        return reconcile(run.events, None, reason=f"gateway records are unavailable: {run.gateway_error}")
    return reconcile(run.events, run.gateway)


def write_reconciliation(archive: RunArchive) -> Reconciliation:
    """Reconcile the run from its (redacted) files and archive the result.

    Writes ``evidence/reconciliation.json`` and the counts into ``summary.json`` (when it
    exists). The tree is redacted first, so the result is what ``rescore`` re-derives from
    the sealed archive. The caller seals afterwards. Never raises for the data: a reconciler
    failure is archived as ``available: false`` with the reason.
    """
    archive.redact_tree()
    run = load_run(archive.paths.root)
    try:
        result = reconciliation_of(run)
    except Exception as exc:  # noqa: BLE001 - a reconciler bug must not cost the cell its archive
        result = Reconciliation(available=False, reason=f"the reconciler raised {type(exc).__name__}: {exc}")
    archive.write_json(RECONCILIATION_FILE, result.to_json())
    if run.summary is not None:
        run.summary.reconciliation = dict(result.counts)
        archive.write_json("summary.json", run.summary)
    return result


class ReconcileParams(Params):
    kinds: list[Kind] | None = Field(default=None, description="Divergence kinds graded (default: all but "
                                                               "usage_mismatch).")
    tools: list[str] | None = Field(default=None, description="Only results of these tools (any MCP naming form).")
    max: int = Field(default=0, ge=0)
    min_compared: int = Field(default=1, ge=0)

    @model_validator(mode="after")
    def _nonempty(self) -> ReconcileParams:
        if self.kinds is not None and not self.kinds:
            raise ValueError("'kinds' is empty: name at least one kind, or omit it")
        if self.tools is not None and not self.tools:
            raise ValueError("'tools' is empty: name at least one tool, or omit it")
        return self

    def wanted(self) -> tuple[Kind, ...]:
        return tuple(self.kinds) if self.kinds is not None else DELIVERY_KINDS

    def tool_ok(self, name: str | None) -> bool:
        return self.tools is None or (name is not None and any(names_tool(name, t) for t in self.tools))

    def selects(self, d: Divergence) -> bool | None:
        """Whether ``d`` is graded; None when a ``tools`` filter cannot attribute it."""
        if d.kind not in self.wanted():
            return False
        if self.tools is None:
            return True
        if d.kind == "inventory_mismatch":
            names = [*(d.values or {}).get("native_only", []), *(d.values or {}).get("gateway_only", [])]
            return any(self.tool_ok(n) for n in names)
        if d.kind == "usage_mismatch":
            return False
        return None if d.tool is None else self.tool_ok(d.tool)


def _refs(d: Divergence) -> list[str]:
    return [f.ref for f in (d.native, d.gateway) if f is not None]


def _describe(d: Divergence) -> str:
    what = f"{d.kind} {d.call_id}" + (f" ({d.tool})" if d.tool else "") if d.call_id else d.kind
    return f"{what}: {d.detail}"


@rule("native_record_accurate", ReconcileParams)
def native_record_accurate(p: ReconcileParams, ctx: RuleContext) -> RuleOutcome:
    """The harness's own record of what the model was shown is accurate: each tool result of the
    native record (Trace IR) matches what the provider boundary delivered for the same call id
    (content digest and length, truncation notice and its stated size, error flag, present on both
    sides) and native tool declarations match the captured inventory (``evidence/reconciliation.json``
    lists every divergence). ``kinds`` picks divergence kinds (default all but ``usage_mismatch``),
    ``tools`` the tools; at most ``max`` divergences. Unscored when fewer than ``min_compared``
    selected results could be compared and none diverged."""
    run = ctx.run
    if run.summary is not None and run.summary.structured_trace_status in ("unavailable", "integrity_failure"):
        raise Unscorable(f"the structured trace is {run.summary.structured_trace_status}: no native record to reconcile")
    result = reconciliation_of(run)
    if not result.available:
        raise Unscorable(f"reconciliation not possible: {result.reason}")
    graded: list[Divergence] = []
    unattributed = 0
    for d in result.divergences:
        chosen = p.selects(d)
        if chosen is None:
            unattributed += 1
        elif chosen:
            graded.append(d)
    compared = [r for r in result.results if r.match not in ("not_comparable", "missing_in_native",
                                                             "missing_at_gateway") and p.tool_ok(r.tool)]
    note = f"; {unattributed} divergence(s) of no known tool not graded" if unattributed else ""
    scope = f" of {', '.join(p.tools)}" if p.tools else ""
    if len(graded) > p.max:
        first = "; ".join(_describe(d) for d in graded[:3])
        refs = tuple(r for d in graded[:5] for r in _refs(d))
        return RuleOutcome.fail(f"{len(graded)} divergence(s) between the native record and the provider "
                                f"boundary{scope} (max {p.max}): {first}{note}", refs)
    if not graded and len(compared) < p.min_compared:
        nc = [x for x in result.not_comparable if p.tool_ok(x.tool) or x.tool is None]
        why = "; ".join(sorted({x.reason for x in nc if x.aspect in ("content", "presence")}))[:300]
        raise Unscorable(f"only {len(compared)} tool result(s){scope} could be compared "
                         f"(min_compared={p.min_compared})" + (f": {why}" if why else ""))
    agreed = sum(1 for r in compared if r.match != "differs")
    return RuleOutcome.ok(f"{len(graded)} divergence(s){scope} (max {p.max}); {agreed} of {len(compared)} compared "
                          f"tool result(s) delivered as recorded{note}")

