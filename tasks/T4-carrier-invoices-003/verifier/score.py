"""Deterministic verifier of T4-carrier-invoices-003.

Truth anchor: the ``freightbills`` ledger. The month's listing is generated from the run seed on
the first ``list_invoices`` call and stored in the service state (``transition`` ``set`` at
``["listing"]``); every page the service answered is appended to ``served`` (one ``transition``
``append`` per request: ``new`` is the page exactly as answered, ``request_seq`` the request), and
each ``request`` record holds the arguments — the cursor — exactly as the service received them.

A *page copy* is a JSON object with an integer ``page``, an ``invoices`` list and a
``next_cursor`` key, found anywhere in a text: the MCP result relayed as JSON, text parts joined,
JSON text inside a JSON string, behind a header or an untrusted-content notice. Copies are
compared with the served page of the same number in the JSON data model (types kept, an integral
float equal to its integer, keys unordered).

* H1 (gateway): every list_invoices result delivered to the model (by call id) shows a page, each
  copy equal to the page the service served under that number, and every page the service served
  reached the model. A result that only says "page 1 of N" fails; a delivered service error (an
  invalid cursor the model sent) holds no page and is not graded.
* H2 (ledger + gateway): the cursor chain was followable — every ``next_cursor`` the service
  issued on a page it served reached the model verbatim in a delivered list_invoices result, and
  every cursor the model sent (probe report; in a live run the Trace IR's arguments) reached the
  service verbatim (ledger request).
* H3 (Trace IR): the harness's tool events of those calls record the pages exactly (recorded
  result or native record), every served page recorded.
* A1/A2 (workspace vs ledger listing): reconciliation.json's month, invoice count and total of
  amount_cents over every page; its disputed invoice ids in listing order.

Missing evidence is unscored, never a pass: no provider-boundary records (H1, H2), no Trace IR
(H3), or no page served at all (the mechanism was never exercised: H1-H3).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from tracetrial.verify import VerifierContext, call_ids, norm_id

SERVICE = "freightbills"
TOOL = "list_invoices"
H1, H2, H3 = "H1-pages-delivered-exact", "H2-cursor-chain-intact", "H3-pages-recorded"
A1, A2 = "A1-totals-exact", "A2-disputed-ids-exact"
#: A list_invoices text content (what a harness that drops the structured result relays).
PAGE_TEXT_RE = re.compile(r"invoices for \d{4}-\d{2}: page \d+ of \d+")
_DECODER = json.JSONDecoder()

Verdict = tuple[bool | None, str]


# ----------------------------------------------------------------------------- JSON values


def json_objects(value: Any, depth: int = 0) -> Iterator[dict[str, Any]]:
    """Every JSON object in ``value`` — a text (each JSON value starting at a ``{``, scanning on past
    its end) or an already parsed value — outermost first, with those inside JSON strings."""
    if depth > 4:
        return
    if not isinstance(value, str):
        roots = [value]
    else:
        roots, pos = [], value.find("{")
        while pos >= 0:
            try:
                parsed, end = _DECODER.raw_decode(value, pos)
            except ValueError:
                pos = value.find("{", pos + 1)
                continue
            roots.append(parsed)
            pos = value.find("{", end)
    stack = list(roots)
    while stack:
        node = stack.pop(0)
        if isinstance(node, dict):
            yield node
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, str) and "{" in node:
            yield from json_objects(node, depth + 1)


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def is_page(obj: dict[str, Any]) -> bool:
    """A listing page (the output schema, whose ``invoices`` is a mapping, is not one)."""
    return _int(obj.get("page")) and isinstance(obj.get("invoices"), list) and "next_cursor" in obj


def pages_in(value: Any) -> list[dict[str, Any]]:
    return [o for o in json_objects(value) if is_page(o)]


def service_error(value: Any) -> bool:
    """The text shows a service error object (``{"error": {"code": …}}``) and no page."""
    return any(isinstance(o.get("error"), dict) and "code" in o["error"] for o in json_objects(value))


def _canon(v: Any) -> Any:
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, list):
        return [_canon(x) for x in v]
    if isinstance(v, dict):
        return {k: _canon(x) for k, x in v.items()}
    return v


def differences(want: Any, got: Any, path: str = "$") -> list[str]:
    """How ``got`` differs from ``want`` in the JSON data model (readable lines, ASCII)."""
    want, got = _canon(want), _canon(got)
    if type(want) is not type(got):
        return [f"{path}: expected {want!a}, found {got!a}"]
    if isinstance(want, dict):
        out = [f"{path}.{k}: absent" for k in want if k not in got]
        out += [f"{path}.{k}: unexpected {got[k]!a}" for k in got if k not in want]
        for k in want:
            if k in got:
                out += differences(want[k], got[k], f"{path}.{k}")
        return out
    if isinstance(want, list):
        if len(want) != len(got):
            return [f"{path}: expected {len(want)} item(s), found {len(got)}"]
        return [d for i, (a, b) in enumerate(zip(want, got)) for d in differences(a, b, f"{path}[{i}]")]
    return [] if want == got else [f"{path}: expected {want!a}, found {got!a}"]


def _brief(lines: list[str], n: int = 5) -> str:
    return "; ".join(lines[:n]) + (f" (+{len(lines) - n} more)" if len(lines) > n else "")


def cursor_of(arguments: Any) -> Any:
    """The ``cursor`` argument of a call (also inside a wrapper such as OpenClaw's
    ``tool_call {id, args}``, or JSON text); None when there is none."""
    for obj in json_objects(arguments):
        if "cursor" in obj:
            return obj["cursor"]
    return None


# ----------------------------------------------------------------------------- truth


class Served:
    """What the service did (ledger): the listing and each page it answered, in order."""

    def __init__(self, ctx: VerifierContext) -> None:
        self.listing: dict[str, Any] | None = None
        self.pages: list[dict[str, Any]] = []       # each page served, in request order
        self.received: list[Any] = []               # the cursor of each list_invoices request
        for r in ctx.ledger(SERVICE, tool=TOOL):
            detail = r.get("detail") or {}
            if r.get("kind") == "request":
                self.received.append(cursor_of(r.get("arguments")))
            elif r.get("kind") == "transition" and detail.get("at") == ["listing"] and self.listing is None:
                self.listing = detail.get("new") if isinstance(detail.get("new"), dict) else None
            elif r.get("kind") == "transition" and detail.get("at") == ["served"] and isinstance(detail.get("new"), dict):
                self.pages.append(detail["new"])
        self.by_number: dict[int, dict[str, Any]] = {p["page"]: p for p in self.pages if _int(p.get("page"))}

    def note(self) -> str:
        if self.listing is None:
            return "the freightbills ledger holds no listing (list_invoices never answered)"
        return (f"ledger: listing of {len(self.listing.get('pages') or [])} page(s); pages served "
                f"{[p.get('page') for p in self.pages]}")

    def invoices(self) -> list[dict[str, Any]]:
        pages = (self.listing or {}).get("pages") or []
        return [inv for p in pages if isinstance(p, dict) for inv in p.get("invoices") or [] if isinstance(inv, dict)]

    def issued_cursors(self) -> list[tuple[Any, str]]:
        return [(p.get("page"), p["next_cursor"]) for p in self.pages if isinstance(p.get("next_cursor"), str)]


def judge_copies(copies: list[dict[str, Any]], served: Served, where: str) -> tuple[bool, str]:
    """Every copy equals the served page of its number (at least one copy)."""
    if not copies:
        return False, f"{where}: no page in it"
    for c in copies:
        want = served.by_number.get(c["page"])
        if want is None:
            return False, f"{where}: a copy of page {c['page']!a}, which the service never served"
        d = differences(want, c)
        if d:
            return False, f"{where}: the copy of page {c['page']} differs from what was served: {_brief(d)}"
    return True, f"{where}: {len(copies)} copy(ies) of page(s) {sorted({c['page'] for c in copies})}, exact"


def _call_ids(ctx: VerifierContext) -> set[str]:
    """The list_invoices calls: their Trace IR events and the probe's call_tool actions."""
    return {i for e in ctx.tool_events(TOOL) for i in call_ids(e)} | ctx.probe_call_ids("call_tool", tool=TOOL)


def _deliveries(ctx: VerifierContext) -> tuple[list[Any], str]:
    shown = ctx.deliveries(ids=_call_ids(ctx))
    if shown:
        return shown, "matched by call id"
    # no call id matched (a live run whose trace names the call otherwise): results that look like it
    return ([d for d in ctx.deliveries() if pages_in(d.content) or PAGE_TEXT_RE.search(d.content)],
            "matched by content (no call id matched)")


# ----------------------------------------------------------------------------- harness criteria


def _h1(ctx: VerifierContext, served: Served) -> Verdict:
    if not served.pages:
        return None, f"{served.note()}: no page was served, the mechanism was never exercised"
    if not ctx.gateway:
        return None, "no provider-boundary records: what reached the model is unknown"
    delivered, how = _deliveries(ctx)
    if not delivered:
        return False, f"{served.note()}; no list_invoices result reached the model"
    notes, seen = [], set()
    for d in delivered:
        copies = pages_in(d.content)
        where = f"request {d.index}"
        if not copies and service_error(d.content):
            notes.append(f"{where}: a service error, no page to deliver")
            continue
        ok, why = judge_copies(copies, served, where)
        if not ok:
            return False, f"{served.note()}; {len(delivered)} result(s) {how}: {why}" + \
                ("" if copies else f"; delivered text begins {d.content[:200]!a}")
        seen |= {c["page"] for c in copies}
        notes.append(why)
    missing = sorted(set(served.by_number) - seen)
    if missing:
        return False, f"{served.note()}; served page(s) {missing} never reached the model: " + " | ".join(notes)
    return True, f"{served.note()}; {len(delivered)} result(s) {how}: " + " | ".join(notes)


def _model_cursors(ctx: VerifierContext) -> tuple[list[Any], str]:
    """The cursors the model sent: the probe's list_invoices calls (the probe protocol), else the
    Trace IR's call arguments (a live run)."""
    if ctx.probe is not None:
        return [cursor_of(r.get("arguments")) for r in ctx.probe_requests("call_tool", tool=TOOL)], "probe report"
    return [cursor_of(e.tool_call.arguments) for e in ctx.tool_events(TOOL)], "Trace IR arguments"


def _h2(ctx: VerifierContext, served: Served) -> Verdict:
    if not served.pages:
        return None, f"{served.note()}: no page was served, the mechanism was never exercised"
    if not ctx.gateway:
        return None, "no provider-boundary records: whether the cursors reached the model is unknown"
    delivered, _ = _deliveries(ctx)
    texts = [d.content for d in delivered]
    lost = [(n, c) for n, c in served.issued_cursors() if not any(c in t for t in texts)]
    if lost:
        n, c = lost[0]
        return False, (f"{served.note()}; the next_cursor the service issued on page {n} ({c!a}) never reached "
                       f"the model in a list_invoices result ({len(delivered)} delivered): the chain breaks there")
    sent, source = _model_cursors(ctx)
    sent = [c for c in sent if c is not None]
    unreceived = [c for c in sent if c not in served.received]
    if unreceived:
        return False, (f"cursor(s) the model sent ({source}) never reached the service verbatim: {unreceived!a}; "
                       f"the service received {served.received!a}")
    return True, (f"{served.note()}; {len(served.issued_cursors())} issued cursor(s) each delivered to the model, "
                  f"{len(sent)} cursor(s) the model sent ({source}) each received verbatim")


def _h3(ctx: VerifierContext, served: Served) -> Verdict:
    if not served.pages:
        return None, f"{served.note()}: no page was served, the mechanism was never exercised"
    if not ctx.events:
        return None, "no Trace IR events: the harness's record cannot be read"
    ids = _call_ids(ctx)
    events = sorted((e for e in ctx.tool_events() if call_ids(e) & ids or norm_id(e.tool_call.id) in ids),
                    key=lambda e: e.seq)
    if not events:
        return False, f"{served.note()}; the Trace IR has no tool event for a list_invoices call"
    notes, seen = [], set()
    for e in events:
        content = e.tool_result.content if e.tool_result is not None else None
        copies, source = pages_in(content), "tool_result"
        if not copies and e.raw_event:
            copies, source = pages_in(e.raw_event), "raw_event"
        where = f"tool event seq {e.seq} ({source})"
        if not copies and (service_error(content) or service_error(e.raw_event)):
            notes.append(f"{where}: a service error")
            continue
        ok, why = judge_copies(copies, served, where)
        if not ok:
            return False, f"{served.note()}: {why}"
        seen |= {c["page"] for c in copies}
        notes.append(why)
    missing = sorted(set(served.by_number) - seen)
    if missing:
        return False, f"{served.note()}; served page(s) {missing} recorded nowhere: " + " | ".join(notes)
    return True, f"{served.note()}: " + " | ".join(notes)


# ----------------------------------------------------------------------------- agent criteria


def _a1(data: Any, why: str | None, served: Served) -> Verdict:
    if why:
        return False, why
    if served.listing is None:
        return False, served.note()
    invoices = served.invoices()
    want = {"month": served.listing.get("month"), "invoice_count": len(invoices),
            "total_cents": sum(inv.get("amount_cents", 0) for inv in invoices)}
    got = {k: data.get(k, "<absent>") for k in want}
    d = differences(want, got)
    return not d, (f"month, {want['invoice_count']} invoice(s) and total {want['total_cents']} exact" if not d
                   else _brief(d))


def _a2(data: Any, why: str | None, served: Served) -> Verdict:
    if why:
        return False, why
    if served.listing is None:
        return False, served.note()
    want = [inv.get("invoice_id") for inv in served.invoices() if inv.get("status") == "disputed"]
    got = data.get("disputed", "<absent>")
    return got == want, f"disputed {got!a}; the listing's disputed invoices {want!a}"


def score(ctx: VerifierContext) -> dict[str, Verdict]:
    served = Served(ctx)
    data, why = ctx.workspace_json((ctx.truth or {}).get("output", "reconciliation.json"), want=dict)
    return {
        H1: _h1(ctx, served),
        H2: _h2(ctx, served),
        H3: _h3(ctx, served),
        A1: _a1(data, why, served),
        A2: _a2(data, why, served),
    }
