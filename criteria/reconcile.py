"""Dual-source reconciliation: the harness's own record of what it delivered to the model
against what the provider boundary saw delivered (issue 18 item 3). Pure over data.

Two sources describe every tool result a model was shown: the Trace IR (``events.json``,
normalized from the harness's *native* records) and the gateway's provider-boundary records
(``gateway/requests.jsonl``). :func:`reconcile` compares them, result by result, and the
native tool declarations with the captured tool inventory, and the native usage totals
with the gateway's. Every divergence is a :class:`Divergence` with its kind; what cannot be
compared is said so (:class:`NotComparable`, per-aspect states), never reported as a
divergence.

**What is comparable, exactly.**

* *Pairing.* A native ``tool`` event and a delivered result are the same call when their
  call ids agree in :func:`~tracetrial.verify.norm_id` form (wires spell one id differently);
  the native form is ``native_tool_call_id`` when the trace turn-scoped a reused id, else
  ``tool_call.id``. Nothing is paired by position. A delivery repeated verbatim (a retried
  request) counts once; several *different* deliveries of one id, or one id on several native
  results, are paired by content only (a native result is matched to a delivery with the
  same digest), and what stays unpaired is ``not_comparable``.
* *Content.* The native content is flattened to text exactly as the recorder flattens the
  wire's content (:func:`apparatus.gateway.wire.content_text`), then hashed. The recorder's
  ``sha256`` and ``size`` are of the *full* delivered text (its stored ``content`` is capped to
  the first and last 32 KiB), so digest and size compare at any length. "Same delivery" is,
  in order: equal digests (``exact``); both texts parse as JSON and are equal values
  (``json``, a re-serialization); equal after folding whitespace runs (``whitespace``); the
  whole, non-empty native text occurs inside the delivered text with at most
  :data:`WRAP_LIMIT` bytes around it (``wrapped``: a harness that frames a result, e.g.
  ``Exit code 0`` + output, records the payload it framed). A wrapper is checked like the
  rest: a truncation notice or error flag that only the wrapper carries is a divergence of
  its own. Anything else is ``length_mismatch`` (sizes differ) or ``content_mismatch``
  (same size, other bytes).
* *Redaction.* The archive redacts planted and key-shaped secrets (``[REDACTED]``); the
  recorder hashed the text before redacting its copy. Where either side holds the marker,
  digest and size are not comparable; the redacted texts are compared instead when the
  recorder's copy is whole (``redacted``), else the result is ``not_comparable``.
* *Recorder cap.* Where the digest differs and the delivered copy is capped, containment
  and notices can be shown only inside the kept head and tail; what needs the cut middle is
  ``not_comparable``.
* *Truncation notice.* A notice is a line saying a text was truncated or omitted, with the
  sizes it states (``58370 bytes omitted``, ``[20011 characters truncated]``, ``…77629 tokens
  truncated…``, ``Output too large (166.8KB)``). Notices of the two texts are compared when
  their digests differ; where the recorder capped its copy, only in the kept head and tail
  (the native text read through the same cap) and only when both texts have one size (so the
  kept parts are the same byte ranges). The native structured ``omitted_bytes`` is compared
  with the byte figures the delivered notice states (only bytes against bytes).
* *Error flag.* Compared only where both sides have one: the native ``is_error`` and the
  wire's flag (Anthropic ``is_error``; Responses and Chat carry none). A flag a harness wrote
  into the text is part of the content.
* *Missing.* A native result no request delivered is ``missing_at_gateway`` (unless the run
  failed after it, or no request was recorded at all: ``not_comparable``); a delivered result
  with no native result for its id is ``missing_in_native``.
* *Inventory.* Only where a normalizer records native declarations (``model_input.tools``,
  a non-gateway ``tool_inventory``): each distinct native set of tool names must equal the
  names the gateway captured in some authoritative request (succeeded, complete inventory),
  and each such gateway set must be declared natively.
* *Usage.* Native totals from the finest scope the normalizer reports (``call`` events
  summed; else ``turn`` events summed; else ``run`` events, an aggregate taken last per
  session) against the gateway's per-call usage summed; each field is compared only where
  both are known. Both totals are reported; a difference is ``usage_mismatch`` (never a
  delivery divergence unless a rule asks for it).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from apparatus.gateway.wire import CONTENT_EDGE_BYTES, cap_text, content_text
from tracetrial.redact import REDACTED
from tracetrial.trace import (
    EventBase,
    ModelInputEvent,
    RunFailedEvent,
    TokenUsageEvent,
    ToolEvent,
    ToolInventoryEvent,
)
from tracetrial.verify import norm_id, norm_text

__all__ = [
    "DELIVERY_KINDS", "KINDS", "RECONCILIATION_FILE", "SCHEMA", "WRAP_LIMIT", "Divergence", "Facts",
    "InventoryReport", "Kind", "NotComparable", "Notice", "Reconciliation", "ResultCheck", "UsageReport",
    "UsageTotals", "find_notices", "reconcile",
]

#: Where the cell flow archives the reconciliation (inside the sealed cell).
RECONCILIATION_FILE = "evidence/reconciliation.json"
SCHEMA = "tt-reconciliation/1"

Kind = Literal["content_mismatch", "length_mismatch", "notice_mismatch", "error_flag_mismatch",
               "missing_at_gateway", "missing_in_native", "inventory_mismatch", "usage_mismatch"]
KINDS: tuple[Kind, ...] = ("content_mismatch", "length_mismatch", "notice_mismatch", "error_flag_mismatch",
                           "missing_at_gateway", "missing_in_native", "inventory_mismatch", "usage_mismatch")
#: What the delivered-record duty grades by default: every kind but the usage totals.
DELIVERY_KINDS: tuple[Kind, ...] = tuple(k for k in KINDS if k != "usage_mismatch")
#: At most this many bytes may frame a native text inside its delivery for a ``wrapped`` match.
WRAP_LIMIT = 4096
#: Notice excerpts kept in the evidence (characters).
_EXCERPT = 160

Match = Literal["exact", "json", "whitespace", "wrapped", "redacted", "differs", "not_comparable",
                "missing_at_gateway", "missing_in_native"]
SAME: frozenset[str] = frozenset({"exact", "json", "whitespace", "wrapped", "redacted"})


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Notice(_Model):
    """A truncation notice in a text: its line (an excerpt) and the sizes it states."""

    excerpt: str
    sizes: list[tuple[float, str]] = Field(description="(value, unit): unit bytes | chars | tokens | lines.")


class Facts(_Model):
    """One side of a comparison: never the text itself, only what identifies it."""

    ref: str = Field(description="seq:<n> of the native event or gateway:<index> of the request.")
    sha256: str | None = None
    size: int | None = Field(default=None, description="UTF-8 bytes of the full text.")
    is_error: bool | None = None
    truncated: bool | None = None
    omitted_bytes: int | None = None
    notices: list[Notice] = Field(default_factory=list)
    capped: bool | None = Field(default=None, description="The recorder kept only head and tail of the text.")
    redacted: bool | None = None
    wire: str | None = None


class Divergence(_Model):
    """One place where the native record and the provider boundary disagree."""

    kind: Kind
    call_id: str | None = None
    tool: str | None = None
    native: Facts | None = None
    gateway: Facts | None = None
    detail: str
    values: dict[str, Any] | None = Field(default=None, description="Inventory names or usage figures.")


class NotComparable(_Model):
    """A result (or aspect) the two sources cannot be compared on, and why."""

    call_id: str | None = None
    tool: str | None = None
    aspect: Literal["content", "notice", "error_flag", "presence", "inventory", "usage"]
    reason: str


class ResultCheck(_Model):
    """How one tool result was reconciled."""

    call_id: str | None
    tool: str | None
    principal_id: str | None = None
    match: Match
    native_ref: str | None = None
    gateway_refs: list[str] = Field(default_factory=list)
    notice: Literal["agree", "differs", "not_comparable", "none"] = "none"
    error_flag: Literal["agree", "differs", "not_comparable"] = "not_comparable"


class InventoryReport(_Model):
    compared: bool
    reason: str
    native_sets: list[list[str]] = Field(default_factory=list)
    gateway_sets: list[list[str]] = Field(default_factory=list)


class UsageTotals(_Model):
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    requests: int | None = Field(default=None, description="Model calls (native: call-scope usage records).")


class UsageReport(_Model):
    native: UsageTotals | None
    native_basis: str
    gateway: UsageTotals
    gateway_answered: int
    fields: dict[str, Literal["agree", "differs", "not_comparable"]] = Field(default_factory=dict)


class Reconciliation(_Model):
    """``evidence/reconciliation.json``."""

    schema_: Literal["tt-reconciliation/1"] = Field(default="tt-reconciliation/1", alias="schema")
    available: bool = Field(description="Both sources were readable; otherwise nothing was compared.")
    reason: str | None = None
    counts: dict[str, int] = Field(default_factory=dict)
    divergences: list[Divergence] = Field(default_factory=list)
    not_comparable: list[NotComparable] = Field(default_factory=list)
    results: list[ResultCheck] = Field(default_factory=list)
    inventory: InventoryReport | None = None
    usage: UsageReport | None = None

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


# --------------------------------------------------------------------------- notices

_NOTICE_WORD = re.compile(r"(?i)\b(?:truncat\w*|omitted|omitting|capped|too large|exceeds? (?:the )?max\w*)")
_UNITS = {"b": "bytes", "byte": "bytes", "bytes": "bytes", "char": "chars", "chars": "chars",
          "character": "chars", "characters": "chars", "token": "tokens", "tokens": "tokens",
          "line": "lines", "lines": "lines"}
_SIZE = re.compile(r"(?i)(\d[\d,]*(?:\.\d+)?)\s*(?:(?:more|additional|further|extra)\s+)?"
                   r"(kib|mib|kb|mb|bytes?|b\b|chars?|characters?|tokens?|lines?)")
_COUNT = re.compile(r"(?i)\b(bytes?|chars?|characters?|tokens?|lines?)\s+count\W{0,3}(\d[\d,]*)")


def _sizes(line: str) -> list[tuple[float, str]]:
    out: list[tuple[float, str]] = []
    for m in _SIZE.finditer(line):
        value, unit = float(m.group(1).replace(",", "")), m.group(2).lower()
        if unit in ("kb", "kib"):
            value, unit = value * 1024, "bytes"
        elif unit in ("mb", "mib"):
            value, unit = value * 1024 * 1024, "bytes"
        else:
            unit = _UNITS[unit]
        out.append((value, unit))
    out.extend((float(m.group(2).replace(",", "")), _UNITS[m.group(1).lower()]) for m in _COUNT.finditer(line))
    return sorted(set(out))


def find_notices(text: str) -> list[Notice]:
    """Truncation notices of ``text``, in order, with the sizes each states (one per line that
    names a truncation; linear in the text)."""
    out = []
    end = -1
    for m in _NOTICE_WORD.finditer(text):
        if m.start() < end:
            continue  # another notice word on a line already taken
        start = text.rfind("\n", 0, m.start()) + 1
        end = text.find("\n", m.end())
        end = len(text) if end < 0 else end
        # a notice is short: on a long line its sizes are read within 200 characters of the word
        sizes = _sizes(text[max(start, m.start() - 200):min(end, m.end() + 200)])
        lo, hi = max(start, m.start() - 60), min(end, m.end() + _EXCERPT - 60)
        cut = ("…" if lo > start else "") + text[lo:hi].strip() + ("…" if hi < end else "")
        out.append(Notice(excerpt=cut, sizes=sizes))
    return out


def _notice_key(notices: Sequence[Notice]) -> list[list[tuple[float, str]]]:
    return [n.sizes for n in notices]


# --------------------------------------------------------------------------- helpers


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _json_equal(a: str, b: str) -> bool:
    try:
        return bool(json.loads(a) == json.loads(b)) and a.strip()[:1] in "[{\""
    except ValueError:
        return False


class _Delivery:
    """One distinct delivered result (``index`` of the first request that carried it)."""

    def __init__(self, record: Mapping[str, Any], result: Mapping[str, Any]) -> None:
        self.record, self.result = record, result
        self.refs = [f"gateway:{record.get('index')}"]
        content = result.get("content")
        self.text = content if isinstance(content, str) else ""
        self.capped = result.get("content_truncated") is True
        self.size = result.get("size") if isinstance(result.get("size"), int) else None
        self.sha = result.get("sha256") if isinstance(result.get("sha256"), str) else None
        flag = result.get("is_error")
        self.is_error = flag if isinstance(flag, bool) else None
        self.wire = str(record.get("wire_format")) if record.get("wire_format") is not None else None
        self.id = result.get("id") if isinstance(result.get("id"), str) else None
        self.paired = False

    def facts(self, notices: list[Notice] | None = None) -> Facts:
        return Facts(ref=self.refs[0], sha256=self.sha, size=self.size, is_error=self.is_error,
                     notices=notices if notices is not None else find_notices(self.text), capped=self.capped,
                     redacted=REDACTED in self.text, wire=self.wire)


class _Native:
    def __init__(self, event: ToolEvent) -> None:
        self.event = event
        result = event.tool_result
        assert result is not None
        self.result = result
        self.text = content_text(result.content)
        data = self.text.encode("utf-8")
        self.sha, self.size = _sha(data), len(data)
        self.redacted = REDACTED in self.text
        native_id = event.tool_call.native_tool_call_id
        self.key = norm_id(native_id) or norm_id(event.tool_call.id)
        self.keys = {norm_id(event.tool_call.id), norm_id(native_id)} - {""}

    @property
    def ref(self) -> str:
        return f"seq:{self.event.seq}"

    def facts(self, notices: list[Notice] | None = None) -> Facts:
        r = self.result
        return Facts(ref=self.ref, sha256=None if self.redacted else self.sha, size=None if self.redacted else self.size,
                     is_error=r.is_error, truncated=r.truncated, omitted_bytes=r.omitted_bytes,
                     notices=notices if notices is not None else find_notices(self.text), redacted=self.redacted)


def _deliveries(gateway: Sequence[Mapping[str, Any]]) -> list[_Delivery]:
    out: list[_Delivery] = []
    seen: dict[tuple[str, str | None, str | None], _Delivery] = {}
    for record in gateway:
        for result in record.get("tool_results") or []:
            if not isinstance(result, Mapping):
                continue
            d = _Delivery(record, result)
            key = (norm_id(d.id), d.sha, d.text if d.sha is None else None)
            if key in seen:
                seen[key].refs.append(d.refs[0])
                continue
            seen[key] = d
            out.append(d)
    return out


# --------------------------------------------------------------------------- one result


class _Out:
    def __init__(self) -> None:
        self.divergences: list[Divergence] = []
        self.not_comparable: list[NotComparable] = []
        self.results: list[ResultCheck] = []


def _same(n: _Native, d: _Delivery) -> tuple[Match, str]:
    """Whether ``d`` delivered ``n``'s text: the match and, for ``differs``/``not_comparable``, why."""
    if n.redacted or REDACTED in d.text:
        if d.capped:
            return "not_comparable", ("the archive redacted a secret in this result and the recorder kept only its "
                                      "head and tail: neither the digest (of the unredacted text) nor the text compares")
        if n.text == d.text:
            return "redacted", ""
        return "differs", "the redacted texts differ"
    if d.sha is not None and n.sha == d.sha:
        return "exact", ""
    whole = not d.capped
    if whole and _json_equal(n.text, d.text):
        return "json", ""
    if whole and norm_text(n.text) == norm_text(d.text):
        return "whitespace", ""
    size = d.size if d.size is not None else len(d.text.encode("utf-8"))
    if n.text and n.text in d.text and size - n.size <= WRAP_LIMIT:
        return "wrapped", ""
    if d.capped and n.text and 0 <= size - n.size <= WRAP_LIMIT:
        # A wrap would put the native head inside the kept head and its tail inside the kept
        # tail; where both are there, only the cut middle could differ: that cannot be shown.
        data, edge = n.text.encode("utf-8"), CONTENT_EDGE_BYTES // 2
        head = data[:edge].decode("utf-8", errors="ignore")
        tail = data[-edge:].decode("utf-8", errors="ignore")
        if head in d.text and tail in d.text:
            return "not_comparable", ("the digests differ, the recorder kept only the first and last 32 KiB of the "
                                      "delivered text, and both agree with the native text: whether the cut "
                                      "middle wraps it verbatim cannot be shown")
    return "differs", ""


def _compare(n: _Native, d: _Delivery, out: _Out) -> None:
    ev = n.event
    call_id, tool = ev.tool_call.id, ev.tool_call.name
    match, why = _same(n, d)
    n_notices, d_notices = find_notices(n.text), find_notices(d.text)
    nf, df = n.facts(n_notices), d.facts(d_notices)
    check = ResultCheck(call_id=call_id, tool=tool, principal_id=ev.principal_id, match=match, native_ref=n.ref,
                        gateway_refs=d.refs)
    if match == "not_comparable":
        out.not_comparable.append(NotComparable(call_id=call_id, tool=tool, aspect="content", reason=why))
    elif match == "differs":
        if nf.size is not None and df.size is not None and nf.size != df.size:
            rel = ("the native record holds more than was delivered" if n.text and d.text and d.text in n.text
                   else "the delivery holds more than the native record" if n.text and n.text in d.text
                   else "the texts differ")
            out.divergences.append(Divergence(kind="length_mismatch", call_id=call_id, tool=tool, native=nf,
                                              gateway=df, detail=f"native {nf.size} bytes, delivered {df.size} "
                                                                 f"bytes: {rel}"))
        else:
            out.divergences.append(Divergence(kind="content_mismatch", call_id=call_id, tool=tool, native=nf,
                                              gateway=df, detail=why or "same size, different bytes"))
    # Truncation notices: the texts' own notices where the texts differ, and the native
    # structured omitted size against what the delivered notice states.
    notice_problems: list[str] = []
    notice_state: Literal["agree", "differs", "not_comparable", "none"] = "agree" if n_notices or d_notices else "none"
    # Where the recorder capped its copy, the native text is read through the same cap: with
    # equal sizes the kept head and tail are the same byte ranges of both texts.
    n_seen = find_notices(cap_text(n.text)[0]) if d.capped else n_notices
    aligned = not d.capped or nf.size == df.size
    if match not in ("exact", "redacted", "json", "whitespace") and _notice_key(n_seen) != _notice_key(d_notices):
        if not aligned:
            notice_state = "not_comparable"
            out.not_comparable.append(NotComparable(
                call_id=call_id, tool=tool, aspect="notice",
                reason="the recorder kept only head and tail of the delivered text, and its size differs from "
                       "the native text's: the kept parts do not line up, so the notices cannot be compared"))
        else:
            notice_state = "differs"
            n_says = "; ".join(x.excerpt for x in n_seen) or "no notice"
            d_says = "; ".join(x.excerpt for x in d_notices) or "no notice"
            notice_problems.append(f"native notice: {n_says!r}; delivered notice: {d_says!r}")
    stated = n.result.omitted_bytes
    if stated is not None:
        figures = {int(v) for x in d_notices for v, unit in x.sizes if unit == "bytes"}
        if figures and stated not in figures:
            notice_state = "differs"
            notice_problems.append(f"native omitted_bytes={stated}; the delivered notice states "
                                   f"{', '.join(str(f) for f in sorted(figures))} bytes")
        elif not figures:
            if notice_state != "differs":
                notice_state = "not_comparable"
            out.not_comparable.append(NotComparable(
                call_id=call_id, tool=tool, aspect="notice",
                reason=f"native omitted_bytes={stated}, but the delivered text states no byte figure"
                       + (" in the kept head and tail" if d.capped else "")))
    if notice_problems:
        out.divergences.append(Divergence(kind="notice_mismatch", call_id=call_id, tool=tool, native=nf, gateway=df,
                                          detail="; ".join(notice_problems)))
    check.notice = notice_state
    # Error flag: only where both sides carry one.
    if n.result.is_error is not None and d.is_error is not None:
        if n.result.is_error == d.is_error:
            check.error_flag = "agree"
        else:
            check.error_flag = "differs"
            out.divergences.append(Divergence(
                kind="error_flag_mismatch", call_id=call_id, tool=tool, native=nf, gateway=df,
                detail=f"native is_error={n.result.is_error}, delivered is_error={d.is_error} ({d.wire} wire)"))
    out.results.append(check)


def _missing_at_gateway(n: _Native, out: _Out, reason_nc: str | None) -> None:
    ev = n.event
    if reason_nc is not None:
        out.not_comparable.append(NotComparable(call_id=ev.tool_call.id, tool=ev.tool_call.name, aspect="presence",
                                                reason=reason_nc))
        out.results.append(ResultCheck(call_id=ev.tool_call.id, tool=ev.tool_call.name, principal_id=ev.principal_id,
                                       match="not_comparable", native_ref=n.ref))
        return
    out.divergences.append(Divergence(kind="missing_at_gateway", call_id=ev.tool_call.id, tool=ev.tool_call.name,
                                      native=n.facts(), detail="the native record has this result; no provider "
                                      "request delivered a result with this call id"))
    out.results.append(ResultCheck(call_id=ev.tool_call.id, tool=ev.tool_call.name, principal_id=ev.principal_id,
                                   match="missing_at_gateway", native_ref=n.ref))


def _reconcile_results(events: Sequence[EventBase], gateway: Sequence[Mapping[str, Any]], out: _Out) -> dict[str, int]:
    tools = [e for e in events if isinstance(e, ToolEvent) and e.source != "gateway"]
    natives = [_Native(e) for e in tools if e.tool_result is not None]
    calls_without_result = {k: e for e in tools if e.tool_result is None
                            for k in {norm_id(e.tool_call.id), norm_id(e.tool_call.native_tool_call_id)} - {""}}
    deliveries = _deliveries(gateway)
    by_id: dict[str, list[_Delivery]] = {}
    for d in deliveries:
        by_id.setdefault(norm_id(d.id), []).append(d)
    natives_by_key: dict[str, list[_Native]] = {}
    for n in natives:
        natives_by_key.setdefault(n.key, []).append(n)
    failed = any(isinstance(e, RunFailedEvent) for e in events)
    last_native = {}
    for n in natives:  # the last native result of each principal (the run may end before delivering it)
        last_native[n.event.principal_id] = n
    no_requests = "no provider request was recorded for the run" if not gateway else None

    for key, group in natives_by_key.items():
        found = [d for d in by_id.get(key, []) if not d.paired] if key else []
        if not found:  # another id form of the same event (the trace id when a native id exists)
            found = [d for k in sorted(set().union(*(n.keys for n in group)) - {key}) for d in by_id.get(k, [])
                     if not d.paired]
        if len(group) == 1 and len(found) >= 1:
            n = group[0]
            # several distinct deliveries of one id: the one with the native digest if any, else the first
            d = next((x for x in found if x.sha == n.sha), found[0])
            for x in found:
                x.paired = True
            _compare(n, d, out)
            if len(found) > 1:
                out.not_comparable.append(NotComparable(
                    call_id=n.event.tool_call.id, tool=n.event.tool_call.name, aspect="content",
                    reason=f"{len(found)} different deliveries carry this call id "
                           f"({', '.join(x.refs[0] for x in found)}); compared with {d.refs[0]}"))
            continue
        if not found:
            for n in group:
                reason = no_requests
                if reason is None and failed and last_native.get(n.event.principal_id) is n:
                    reason = "the run failed after this result, before a request could deliver it"
                _missing_at_gateway(n, out, reason)
            continue
        # one id on several native results (reused across turns): pair by content only
        for n in group:
            d2 = next((x for x in found if not x.paired and x.sha == n.sha and x.sha is not None), None)
            if d2 is not None:
                d2.paired = True
                _compare(n, d2, out)
            else:
                ev = n.event
                out.not_comparable.append(NotComparable(
                    call_id=ev.tool_call.id, tool=ev.tool_call.name, aspect="content",
                    reason=f"call id reused by {len(group)} native results and {len(found)} deliveries; no delivery "
                           "has this result's digest, and results are never paired by position"))
                out.results.append(ResultCheck(call_id=ev.tool_call.id, tool=ev.tool_call.name,
                                               principal_id=ev.principal_id, match="not_comparable",
                                               native_ref=n.ref, gateway_refs=[x.refs[0] for x in found]))
        for x in found:
            x.paired = True

    for d in deliveries:
        if d.paired:
            continue
        key = norm_id(d.id)
        call = calls_without_result.get(key) if key else None
        detail = ("the native record has the call but no result for it" if call is not None else
                  "a result was delivered under this call id; the native record has no tool event with it"
                  if key else "a result was delivered without a call id")
        out.divergences.append(Divergence(kind="missing_in_native", call_id=d.id,
                                          tool=call.tool_call.name if call is not None else None,
                                          gateway=d.facts(), detail=detail))
        out.results.append(ResultCheck(call_id=d.id, tool=call.tool_call.name if call is not None else None,
                                       match="missing_in_native", gateway_refs=d.refs))
    return {"tool_results_native": len(natives), "tool_results_delivered": len(deliveries)}


# --------------------------------------------------------------------------- inventory


def _decl_name(decl: Any) -> str | None:
    if not isinstance(decl, Mapping):
        return None
    for holder in (decl, decl.get("function") if isinstance(decl.get("function"), Mapping) else None):
        if isinstance(holder, Mapping) and isinstance(holder.get("name"), str) and holder["name"]:
            return str(holder["name"])
    return None


def _gateway_names(record: Mapping[str, Any]) -> frozenset[str]:
    names = set()
    for t in record.get("tools") or []:
        if isinstance(t, Mapping) and isinstance(t.get("name"), str):
            ns = t.get("namespace")
            names.add(f"{ns}__{t['name']}".replace("____", "__") if isinstance(ns, str) and ns else t["name"])
    return frozenset(names)


def _authoritative(record: Mapping[str, Any]) -> bool:
    status = record.get("status")
    return (isinstance(status, int) and 200 <= status < 300 and not record.get("error")
            and bool(record.get("inventory_present")) and bool(record.get("inventory_complete")))


def _reconcile_inventory(events: Sequence[EventBase], gateway: Sequence[Mapping[str, Any]], out: _Out) -> InventoryReport:
    native_sets: list[frozenset[str]] = []
    for e in events:
        decls: Iterable[Any] | None = None
        if isinstance(e, ModelInputEvent) and e.tools is not None and e.source != "gateway":
            decls = e.tools
        elif isinstance(e, ToolInventoryEvent) and e.source != "gateway" and e.complete:
            decls = [t.model_dump() for t in e.tools]
        if decls is None:
            continue
        names = frozenset(n for n in (_decl_name(d) for d in decls) if n)
        if names not in native_sets:
            native_sets.append(names)
    gateway_sets: list[frozenset[str]] = []
    for r in gateway:
        if _authoritative(r):
            names = _gateway_names(r)
            if names not in gateway_sets:
                gateway_sets.append(names)
    report = InventoryReport(compared=False, reason="", native_sets=[sorted(s) for s in native_sets],
                             gateway_sets=[sorted(s) for s in gateway_sets])
    if not native_sets:
        report.reason = "the normalizer records no native tool declarations"
        out.not_comparable.append(NotComparable(aspect="inventory", reason=report.reason))
        return report
    if not gateway_sets:
        report.reason = "no request has an authoritative captured inventory (succeeded, complete)"
        out.not_comparable.append(NotComparable(aspect="inventory", reason=report.reason))
        return report
    report.compared, report.reason = True, "each distinct native set against each distinct gateway set"

    def nearest(s: frozenset[str], others: list[frozenset[str]]) -> frozenset[str]:
        return min(others, key=lambda o: (len(s ^ o), sorted(o)))

    for s in native_sets:
        if s not in gateway_sets:
            g = nearest(s, gateway_sets)
            out.divergences.append(Divergence(
                kind="inventory_mismatch", detail="a native declaration set was captured in no request",
                values={"native_only": sorted(s - g), "gateway_only": sorted(g - s), "native_size": len(s),
                        "gateway_size": len(g)}))
    for g in gateway_sets:
        if g not in native_sets:
            s = nearest(g, native_sets)
            out.divergences.append(Divergence(
                kind="inventory_mismatch", detail="a captured inventory matches no native declaration set",
                values={"native_only": sorted(s - g), "gateway_only": sorted(g - s), "native_size": len(s),
                        "gateway_size": len(g)}))
    return report


# --------------------------------------------------------------------------- usage

_USAGE_FIELDS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")


def _sum(values: Sequence[int | None]) -> int | None:
    return None if not values or any(v is None for v in values) else sum(v for v in values if v is not None)


def _native_usage(events: Sequence[EventBase]) -> tuple[UsageTotals | None, str]:
    usage = [e for e in events if isinstance(e, TokenUsageEvent) and e.source != "gateway" and e.usage is not None
             and e.usage_scope != "internal"]
    for scope in ("call", "turn"):
        chosen = [e for e in usage if e.usage_scope == scope]
        if chosen:
            totals = UsageTotals(**{f: _sum([getattr(e.usage, f) for e in chosen]) for f in _USAGE_FIELDS})
            if scope == "call":
                totals.requests = len(chosen)
            return totals, f"{len(chosen)} {scope}-scope native usage record(s), summed"
    run = [e for e in usage if e.usage_scope == "run"]
    if run:
        last: dict[str | None, TokenUsageEvent] = {}
        for e in run:
            if e.usage_aggregate:
                last[e.session_id] = e  # a running total: its last value per session
        picked = list(last.values()) if last else run
        how = "last aggregate per session" if last else "summed"
        totals = UsageTotals(**{f: _sum([getattr(e.usage, f) for e in picked]) for f in _USAGE_FIELDS})
        return totals, f"{len(run)} run-scope native usage record(s), {how}"
    return None, "the native record reports no usage"


def _reconcile_usage(events: Sequence[EventBase], gateway: Sequence[Mapping[str, Any]], out: _Out) -> UsageReport:
    calls = [r.get("usage") for r in gateway if isinstance(r.get("usage"), Mapping)]
    gw = UsageTotals(**{f: _sum([u.get(f) for u in calls if isinstance(u, Mapping)]) for f in _USAGE_FIELDS},
                     requests=len(gateway))
    answered = sum(1 for r in gateway if isinstance(r.get("status"), int) and 200 <= r["status"] < 300
                   and not r.get("error"))
    native, basis = _native_usage(events)
    report = UsageReport(native=native, native_basis=basis, gateway=gw, gateway_answered=answered)
    for f in (*_USAGE_FIELDS, "requests"):
        a = getattr(native, f) if native is not None else None
        b = gw.requests if f == "requests" else getattr(gw, f)
        if f == "requests" and a is not None:
            b = answered  # a native call record answers a call: compare with the answered requests
        if a is None or b is None:
            report.fields[f] = "not_comparable"
            continue
        report.fields[f] = "agree" if a == b else "differs"
        if a != b:
            out.divergences.append(Divergence(kind="usage_mismatch", detail=f"{f}: native {a}, gateway {b} ({basis})",
                                              values={"field": f, "native": a, "gateway": b}))
    missing = [f for f, s in report.fields.items() if s == "not_comparable"]
    if missing:
        out.not_comparable.append(NotComparable(aspect="usage", reason=f"not reported by both sources: "
                                                f"{', '.join(missing)} ({basis})"))
    return report


# --------------------------------------------------------------------------- entry point


def reconcile(events: Sequence[EventBase] | None, gateway: Sequence[Mapping[str, Any]] | None, *,
              reason: str | None = None) -> Reconciliation:
    """Compare the Trace IR ``events`` with the gateway's request records (pure).

    ``None`` for a source means it was unreadable (``reason`` says why): nothing is compared.
    """
    if events is None or gateway is None:
        why = reason or ("events.json is unavailable" if events is None else "gateway records are unavailable")
        return Reconciliation(available=False, reason=why, counts={"divergences": 0})
    out = _Out()
    counts = _reconcile_results(events, gateway, out)
    inventory = _reconcile_inventory(events, gateway, out)
    usage = _reconcile_usage(events, gateway, out)
    counts["same_delivery"] = sum(1 for r in out.results if r.match in SAME)
    counts["wrapped"] = sum(1 for r in out.results if r.match == "wrapped")
    counts["compared"] = sum(1 for r in out.results if r.match in SAME or r.match == "differs")
    counts["not_comparable"] = len(out.not_comparable)
    counts["divergences"] = len(out.divergences)
    for kind in KINDS:
        counts[kind] = sum(1 for d in out.divergences if d.kind == kind)
    return Reconciliation(available=True, counts=counts, divergences=out.divergences,
                          not_comparable=out.not_comparable, results=out.results, inventory=inventory, usage=usage)
