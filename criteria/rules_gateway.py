"""Provider-boundary rules over ``gateway/requests.jsonl`` (SPEC §8).

One record per provider request: tool declarations (``tools``), the tool
results the request delivered to the model (``tool_results``), status and
usage. A captured inventory is authoritative only when the request succeeded
and the declaration channel was absent (nothing declared) or complete; rules
never read a partial inventory as proof of absence. Evidence refs are
``gateway:<index>``.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, model_validator

from criteria.errors import Unscorable
from criteria.matchers import Where, as_text, matches, truth_value
from criteria.registry import Params, RuleContext, RuleOutcome, rule
from criteria.rules_files import truth_keys_check


def gateway(ctx: RuleContext) -> list[dict[str, Any]]:
    """The gateway records. Raises :class:`Unscorable` when the recorder file is unusable."""
    if ctx.run.gateway is None:
        raise Unscorable(f"provider-boundary records are unavailable: {ctx.run.gateway_error}")
    return ctx.run.gateway


def succeeded(record: dict[str, Any]) -> bool:
    status = record.get("status")
    return isinstance(status, int) and 200 <= status < 300 and not record.get("error")


def _ref(record: dict[str, Any]) -> str:
    return f"gateway:{record.get('index')}"


class DeclaredParams(Params):
    name: str | None = None
    name_regex: str | None = None
    scope: Literal["any", "all"] = "any"
    where: Where = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one(self) -> DeclaredParams:
        if (self.name is None) == (self.name_regex is None):
            raise ValueError("give exactly one of 'name' or 'name_regex'")
        if self.name_regex is not None:
            try:
                re.compile(self.name_regex)
            except re.error as exc:
                raise ValueError(f"name_regex does not compile: {exc}") from None
        return self

    def declared(self, record: dict[str, Any]) -> bool:
        names = [t.get("name") or "" for t in record.get("tools") or [] if isinstance(t, dict)]
        if self.name is not None:
            return self.name in names
        return any(re.fullmatch(self.name_regex or "", n) for n in names)


@rule("gateway_tool_declared", DeclaredParams)
def gateway_tool_declared(p: DeclaredParams, ctx: RuleContext) -> RuleOutcome:
    """A tool (``name`` or ``name_regex`` full match) is declared in any / all successful
    requests with an authoritative inventory (optionally filtered by ``where``)."""
    records = [r for r in gateway(ctx) if matches(r, p.where, ctx.truth)]
    usable = [r for r in records if succeeded(r) and (not r.get("inventory_present") or r.get("inventory_complete"))]
    label = repr(p.name) if p.name is not None else f"matching /{p.name_regex}/"
    if not usable:
        raise Unscorable(f"none of {len(records)} request(s) has an authoritative tool inventory "
                         "(all failed or were captured incompletely)")
    with_tool = [r for r in usable if p.declared(r)]
    without = [r for r in usable if not p.declared(r)]
    if p.scope == "any" and with_tool:
        return RuleOutcome.ok(f"tool {label} declared in {len(with_tool)} of {len(usable)} request(s)",
                              tuple(_ref(r) for r in with_tool[:5]))
    if p.scope == "all" and not without:
        return RuleOutcome.ok(f"tool {label} declared in all {len(usable)} request(s)")
    return RuleOutcome.fail(f"tool {label} missing from {len(without)} of {len(usable)} request(s) "
                            f"(first: request {without[0].get('index')})", tuple(_ref(r) for r in without[:5]))


class ResultTextParams(Params):
    text: str | None = None
    regex: str | None = None
    truth_key: str | None = None
    ignore_case: bool = False
    tool_result_id: str | None = None
    successful_only: bool | None = None

    @model_validator(mode="after")
    def _one(self) -> ResultTextParams:
        given = [n for n in ("text", "regex", "truth_key") if getattr(self, n) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of 'text', 'regex', 'truth_key' (got {given or 'none'})")
        if self.regex is not None:
            try:
                re.compile(self.regex)
            except re.error as exc:
                raise ValueError(f"regex does not compile: {exc}") from None
        return self

    def label(self) -> str:
        if self.truth_key is not None:
            return f"the truth value {self.truth_key!r}"
        return f"regex {self.regex!r}" if self.regex is not None else f"text {self.text!r}"

    def finder(self, truth: Any) -> Any:
        flags = re.IGNORECASE if self.ignore_case else 0
        pattern = self.regex if self.regex is not None else re.escape(
            as_text(truth_value(truth, self.truth_key)) if self.truth_key is not None else self.text or "")
        compiled = re.compile(pattern, flags)
        return lambda content: compiled.search(content) is not None


Pair = tuple[dict[str, Any], dict[str, Any]]


def delivered(ctx: RuleContext, tool_result_id: str | None, successful_only: bool) -> list[Pair]:
    """``(request, tool result)`` pairs, each distinct result once (first request that carried it)."""
    out, seen = [], set()
    for record in gateway(ctx):
        if successful_only and not succeeded(record):
            continue
        for result in record.get("tool_results") or []:
            if tool_result_id is not None and result.get("id") != tool_result_id:
                continue
            digest = result.get("sha256")
            key = (result.get("id"), digest, result.get("content") if digest is None else None)
            if key in seen:
                continue
            seen.add(key)
            out.append((record, result))
    return out


def _content(result: dict[str, Any]) -> str:
    content = result.get("content")
    return content if isinstance(content, str) else as_text(content) if content is not None else ""


def _search(p: ResultTextParams, ctx: RuleContext, successful_only: bool) -> tuple[list[Any], list[Any], list[Any]]:
    found = p.finder(ctx.truth)
    pairs = delivered(ctx, p.tool_result_id, successful_only)
    hits = [(r, t) for r, t in pairs if found(_content(t))]
    clipped = [(r, t) for r, t in pairs if t.get("content_truncated")]
    return pairs, hits, clipped


def _check_truth(p: ResultTextParams, task: Any) -> list[tuple[str, str]]:
    return truth_keys_check([p.truth_key], task)


@rule("gateway_result_contains", ResultTextParams, check=_check_truth)
def gateway_result_contains(p: ResultTextParams, ctx: RuleContext) -> RuleOutcome:
    """A tool result delivered to the model (successful requests by default) contains the
    text / regex / truth value. If it is not found but the recorder stored a truncated
    copy of some result, the criterion is unscored: absence cannot be shown."""
    pairs, hits, clipped = _search(p, ctx, p.successful_only is not False)
    if hits:
        return RuleOutcome.ok(f"{p.label()} delivered in tool result {hits[0][1].get('id')!r} "
                              f"(request {hits[0][0].get('index')})", tuple(_ref(r) for r, _ in hits[:5]))
    if clipped:
        raise Unscorable(f"{p.label()} not found, but {len(clipped)} delivered result(s) were stored "
                         "truncated by the recorder")
    return RuleOutcome.fail(f"{p.label()} is in none of {len(pairs)} delivered tool result(s)")


@rule("gateway_result_omits", ResultTextParams, check=_check_truth)
def gateway_result_omits(p: ResultTextParams, ctx: RuleContext) -> RuleOutcome:
    """No tool result sent to the provider (every request by default, failed ones too:
    the body left the harness) contains the text / regex / truth value."""
    pairs, hits, clipped = _search(p, ctx, p.successful_only is True)
    if hits:
        return RuleOutcome.fail(f"{p.label()} delivered in {len(hits)} tool result(s), first "
                                f"{hits[0][1].get('id')!r} (request {hits[0][0].get('index')})",
                                tuple(_ref(r) for r, _ in hits[:5]))
    if clipped:
        raise Unscorable(f"{p.label()} not found, but {len(clipped)} result(s) were stored truncated by the recorder")
    return RuleOutcome.ok(f"{p.label()} is in none of {len(pairs)} delivered tool result(s)")


class ErrorFlagParams(Params):
    tool_result_id: str | None = None
    contains: str | None = None
    expect: bool = True


@rule("gateway_result_error", ErrorFlagParams)
def gateway_result_error(p: ErrorFlagParams, ctx: RuleContext) -> RuleOutcome:
    """A delivered tool result (by ``tool_result_id`` and/or ``contains`` on its content) is
    flagged ``is_error: true`` at the provider boundary (``expect: false``: none is)."""
    pairs = [(r, t) for r, t in delivered(ctx, p.tool_result_id, True)
             if p.contains is None or p.contains in _content(t)]
    if not pairs:
        return RuleOutcome.fail("no delivered tool result matches the selection"
                                + (f" (id {p.tool_result_id!r})" if p.tool_result_id else ""))
    flagged = [(r, t) for r, t in pairs if t.get("is_error") is True]
    refs = tuple(_ref(r) for r, _ in (flagged or pairs)[:5])
    if p.expect and flagged:
        return RuleOutcome.ok(f"tool result {flagged[0][1].get('id')!r} delivered with is_error=true", refs)
    if not p.expect and not flagged:
        return RuleOutcome.ok(f"none of {len(pairs)} selected result(s) flagged is_error", refs)
    if p.expect:
        states = sorted({repr(t.get("is_error")) for _, t in pairs})
        return RuleOutcome.fail(f"{len(pairs)} selected result(s) delivered without is_error=true "
                                f"(is_error: {', '.join(states)})", refs)
    return RuleOutcome.fail(f"{len(flagged)} selected result(s) flagged is_error=true", refs)


class RequestCountParams(Params):
    max: int | None = None
    min: int | None = None
    successful_only: bool = False
    where: Where = Field(default_factory=dict)

    @model_validator(mode="after")
    def _bounds(self) -> RequestCountParams:
        if self.min is None and self.max is None:
            raise ValueError("give 'min', 'max' or both")
        return self


@rule("gateway_request_count", RequestCountParams)
def gateway_request_count(p: RequestCountParams, ctx: RuleContext) -> RuleOutcome:
    """The number of provider requests (optionally successful ones, filtered by ``where``)
    lies within ``[min, max]`` (e.g. a model-call budget)."""
    records = [r for r in gateway(ctx)
               if (not p.successful_only or succeeded(r)) and matches(r, p.where, ctx.truth)]
    what = f"{len(records)} provider request(s)"
    if p.max is not None and len(records) > p.max:
        return RuleOutcome.fail(f"{what}, more than max={p.max}", tuple(_ref(r) for r in records[p.max:p.max + 5]))
    if p.min is not None and len(records) < p.min:
        return RuleOutcome.fail(f"{what}, fewer than min={p.min}")
    return RuleOutcome.ok(what)
