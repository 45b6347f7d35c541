"""Deterministic verifier of T4-tariff-table-002.

Truth anchor: the ``tariffs`` ledger. The schedule's table is generated from the run values on the
first ``get_tariff_table`` call and stored in the service state: that call's ``transition``
record (``op: set`` at ``["tables", <schedule>]``) holds the table exactly as served, and every
later call answers the stored table. The verifier also requires a served request (not refused,
not an error), so the table is what the service answered.

Values are compared in the JSON data model (RFC 8785's view): same types (null, boolean, number,
string, array, object), numbers equal as numbers (``1e-07`` and ``1e-7`` are one number, ``0.3``
and ``0.30000000000000004`` are two), strings and keys character for character, arrays in order,
objects as key sets. A boolean is never a string (``true`` is not ``"true"``), ``{}`` is never
``null`` nor absent.

A *copy* is a table-like object found in a text (a string ``schedule``, a ``currency``, a
``valid`` block and a ``lines`` list): the whole table, or a page (``page: {offset, limit,
total}``) an ``offset``/``limit`` call asked for, compared with ``page_of(table, offset, limit)``.
A copy with fewer lines than it says it has (``line_count``, or its page's share of ``total``) is
*cut*, not altered: a harness that cuts a large result in the middle can leave valid JSON behind
(Codex 0.145.0's notice once landed inside a key). A result is cut when it shows a cut copy or the
table's opening (``"currency" … "lines": [``) without any copy.

* H1 (gateway): every get_tariff_table result delivered to the model (by call id, any turn) holds
  a complete copy, wherever the harness put it (the MCP result as JSON, a JSON text part, a JSON
  string inside JSON, behind a header or notice), and every complete copy in it equals what was
  served. Only the summary fails. A result the harness cut *with a truncation notice* is a
  truncation matter (C1): its cut copy is not graded here (its complete copies are); a cut without
  any notice fails. No complete copy to grade in any result: unscored. A result capped by the
  recorder (first and last 32 KiB kept) is read in full from the archived request body when there
  is one (matched by its SHA-256); otherwise a capped result without a complete copy is unscored.
* H2 (Trace IR): each tool event of a get_tariff_table call keeps its table or page exactly, in
  its recorded result (``tool_result.content``) or in the native record it was built from
  (``raw_event``); a record of a cut result is not graded.
* H3 (the resumed turn 2): the first turn-2 model request — every complete copy its history holds
  equals what was served, and when it still shows a result's summary but no copy, not even a cut
  one, the session store kept the text and dropped the structured content: fail. A resumed
  history without any trace of the turn-1 result is a resume-fidelity matter (C4), not graded
  here. Evidence, strongest first: the archived request body (``--tt-record-bodies``); the probe
  model's account of that request (its turn-2 final text: complete copies with their canonical
  digests, cut copies counted, summary shown or absent); the harness's own turn-2 ``model_input``
  record; none: unscored.
* H4: turn delivery (rule 11).
* A1/A2 (workspace vs ledger): quota_watch.json (the lines whose quota is ``{}``, copied exactly)
  and duty_quote.json (the lines whose preferential is ``true``: line, hs, licence and the rate of
  the band that contains the consignment weight, exactly).
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, TypeGuard

from tracetrial.verify import VerifierContext, call_ids, norm_id

TASK_ID = "T4-tariff-table-002"
SERVICE = "tariffs"
TOOL = "get_tariff_table"
H1, H2, H3, H4 = ("H1-table-delivered-exact", "H2-table-recorded", "H3-table-intact-after-resume",
                  "H4-user-turns-delivered")
A1, A2 = "A1-quota-watch-exact", "A2-duty-quote-exact"
#: The text content of a get_tariff_table result or page (its human summary).
SUMMARY_RE = re.compile(r"Tariff schedule \S+: (?:\d+ tariff lines|tariff lines \d+-\d+ of \d+) in [A-Z]{3}\.")
#: A table's opening — its currency, then (past the validity and precision blocks, or right after
#: it with sorted keys) its line list — also JSON-escaped: a text that shows it but holds no
#: complete table was cut on the way. (A deliverable has lines but no currency.)
PARTIAL_RE = re.compile(r'\\*"currency\\*"\s*:[^\[\]]{0,600}?\\*"lines\\*"\s*:\s*\[')
#: A truncation notice in a cut result (Codex "…N chars truncated…", OpenClaw "[truncated]",
#: Claude Code "Output too large", the reference "bytes omitted").
NOTICE_RE = re.compile(r"(?i)\btruncated\b|too large|\bomitted\b")
#: The probe's account of the resumed history (its turn-2 final text).
ACCOUNT_RE = re.compile(r"Resumed history: tables=(\d+) digests=(\S+) cut=(\d+) summary=(shown|absent)")
ACCOUNT_ENTRY_RE = re.compile(r"(?:full|p(?P<offset>\d+)\+(?P<limit>\d+)):(?P<digest>[0-9a-f]{16})")
_DECODER = json.JSONDecoder()
_MAX_DEPTH = 12

Verdict = tuple[bool | None, str]


# ----------------------------------------------------------------------------- JSON values


def is_table(obj: Any) -> bool:
    """A tariff table: a string schedule, a currency, a validity block and a list of lines (an output
    schema, whose ``lines`` is a mapping, is not one; nor is a deliverable, which has no currency)."""
    return (isinstance(obj, dict) and isinstance(obj.get("schedule"), str) and isinstance(obj.get("lines"), list)
            and "currency" in obj and "valid" in obj)


def _walk(value: Any, depth: int, out: list[Any]) -> None:
    if depth > _MAX_DEPTH:
        return
    if isinstance(value, dict):
        if is_table(value):
            out.append(value)
            return
        for item in value.values():
            _walk(item, depth + 1, out)
    elif isinstance(value, list):
        for item in value:
            _walk(item, depth + 1, out)
    elif isinstance(value, str) and "{" in value:
        _scan(value, depth + 1, out)


def _scan(text: str, depth: int, out: list[Any]) -> None:
    """Every table in ``text``: each JSON value that starts at a ``{`` (scanning on after the end of
    each value decoded), and JSON strings inside them."""
    start = text.find("{")
    while start >= 0:
        try:
            value, stop = _DECODER.raw_decode(text, start)
        except ValueError:
            start = text.find("{", start + 1)
            continue
        _walk(value, depth, out)
        start = text.find("{", stop)


def tables_in(value: Any) -> list[Any]:
    """Every table inside a value: a text (JSON anywhere in it) or an already parsed JSON value
    (strings inside it are scanned too), in order."""
    out: list[Any] = []
    if isinstance(value, str):
        _scan(value, 0, out)
    else:
        _walk(value, 0, out)
    return out


def _kind(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    return type(v).__name__


def diff(want: Any, got: Any, path: str = "$") -> list[str]:
    """Differences of ``got`` from ``want`` in the JSON data model (readable lines, ``ascii()`` text)."""
    if _kind(want) != _kind(got):
        return [f"{path}: expected {want!a} ({_kind(want)}), found {got!a} ({_kind(got)})"]
    if isinstance(want, dict):
        out = []
        for k in want:
            if k not in got:
                out.append(f"{path}.{k!a}: expected {want[k]!a}, absent")
            else:
                out.extend(diff(want[k], got[k], f"{path}.{k!a}"))
        out.extend(f"{path}.{k!a}: not expected, found {got[k]!a}" for k in got if k not in want)
        return out
    if isinstance(want, list):
        if len(want) != len(got):
            return [f"{path}: expected {len(want)} item(s), found {len(got)}"]
        return [d for i, (a, b) in enumerate(zip(want, got)) for d in diff(a, b, f"{path}[{i}]")]
    return [] if want == got else [f"{path}: expected {want!a}, found {got!a}"]


def _canon(value: Any) -> Any:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, list):
        return [_canon(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _canon(v) for k, v in value.items()}
    return value


def digest(value: Any) -> str:
    """First 16 hex digits of the SHA-256 of the canonical JSON of ``value`` (the probe's digest)."""
    text = json.dumps(_canon(value), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _brief(d: list[str], n: int = 6) -> str:
    return "; ".join(d[:n]) + (f" (+{len(d) - n} more)" if len(d) > n else "")


def page_of(table: dict[str, Any], offset: int, limit: int) -> dict[str, Any]:
    """The page the service serves for ``offset``/``limit`` (the simulator's ``page_of``)."""
    page = {k: v for k, v in table.items() if k not in ("line_count", "lines")}
    page["page"] = {"offset": offset, "limit": limit, "total": len(table["lines"])}
    page["lines"] = table["lines"][offset:offset + limit]
    return page


def _int(v: Any) -> TypeGuard[int]:
    return isinstance(v, int) and not isinstance(v, bool)


def expected(copy: dict[str, Any], table: dict[str, Any]) -> dict[str, Any]:
    """What the service served for this copy: the whole table, or the page its block names."""
    block = copy.get("page")
    if isinstance(block, dict) and _int(block.get("offset")) and _int(block.get("limit")):
        return page_of(table, block["offset"], block["limit"])
    return table


def copy_label(copy: dict[str, Any]) -> str:
    block = copy.get("page")
    return f"page {block.get('offset')}+{block.get('limit')}" if isinstance(block, dict) else "whole table"


def judge(copies: list[Any], table: dict[str, Any], where: str) -> tuple[bool, str]:
    """``(ok, note)``: ``copies`` (whole tables and pages found) each equal what was served (the
    table, or the page it names), at least one."""
    if not copies:
        return False, f"{where}: no tariff table in it"
    bad = [(c, diff(expected(c, table), c)) for c in copies]
    bad = [(c, d) for c, d in bad if d]
    kinds = sorted({copy_label(c) if "page" in c else "whole table" for c in copies})
    if bad:
        return False, (f"{where}: {len(bad)}/{len(copies)} cop(y/ies) altered ({copy_label(bad[0][0])}): "
                       f"{_brief(bad[0][1])}")
    return True, f"{where}: {len(copies)} cop(y/ies) ({', '.join(kinds)}), equal to what was served"


def complete(copy: dict[str, Any]) -> bool:
    """Every line the copy says it has is there: a whole table's ``line_count``, a page's share of
    its ``total``. A harness that cuts a result in the middle can leave valid JSON behind (Codex's
    notice may land inside a key); such a copy is a cut one, not an altered one."""
    block = copy.get("page")
    if isinstance(block, dict):
        off, lim, total = block.get("offset"), block.get("limit"), block.get("total")
        if not (_int(off) and _int(lim) and _int(total)):
            return False
        return len(copy["lines"]) == max(0, min(lim, total - off))
    count = copy.get("line_count")
    return not _int(count) or count == len(copy["lines"])


def split(text: Any) -> tuple[list[Any], bool]:
    """``(complete copies, cut)``: the complete tables and pages in ``text``, and whether it also
    shows a cut one (a copy missing lines, or a table's opening with no copy at all)."""
    copies = tables_in(text)
    whole = [c for c in copies if complete(c)]
    shown = text if isinstance(text, str) else json.dumps(text, ensure_ascii=False)
    partial = len(whole) < len(copies) or (not copies and PARTIAL_RE.search(shown) is not None)
    return whole, partial


# ----------------------------------------------------------------------------- truth


def served_table(ctx: VerifierContext) -> tuple[dict[str, Any] | None, str]:
    """``(table, note)``: the table the service answered with (ledger), or ``(None, why)``."""
    truth = ctx.truth or {}
    schedule = truth.get("schedule", "EU-TARIC-2027-01")
    stored = next((r for r in ctx.ledger(SERVICE, kind="transition", tool=TOOL)
                   if (r.get("detail") or {}).get("op") == "set"
                   and (r.get("detail") or {}).get("at") == ["tables", schedule]), None)
    if stored is None:
        return None, f"the tariffs ledger holds no table stored for {schedule} (get_tariff_table never served it)"
    table = (stored.get("detail") or {}).get("new")
    if not isinstance(table, dict) or not is_table(table):
        return None, "the ledger's stored table is not a tariff table"
    refused = {(r.get("detail") or {}).get("request_seq")
               for r in ctx.ledger(SERVICE, kind=("error", "refused"), tool=TOOL)}
    served = [r for r in ctx.ledger(SERVICE, kind="request", tool=TOOL) if r.get("seq") not in refused]
    if not served:
        return None, "the tariffs ledger shows no get_tariff_table request answered with the table"
    return table, (f"ledger table {schedule} {table.get('revision')} ({len(table['lines'])} lines), "
                   f"stored on request seq {(stored.get('detail') or {}).get('request_seq')}")


def _call_ids(ctx: VerifierContext) -> set[str]:
    """Call ids of the get_tariff_table calls: the Trace IR's events and the probe's calls."""
    ids = {i for e in ctx.tool_events(TOOL) for i in call_ids(e)}
    return ids | ctx.probe_call_ids("call_tool", tool=TOOL)


# ----------------------------------------------------------------------------- H1


def _body_strings(node: Any) -> list[Any]:
    """Candidate tool-result texts of a request body: every string, and every list of content
    blocks joined as the recorder joins them (text parts with newlines)."""
    out: list[Any] = []
    stack = [node]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
            if v and all(isinstance(p, (str, dict)) for p in v):
                parts = []
                for p in v:
                    if isinstance(p, str):
                        parts.append(p)
                    elif isinstance(p.get("text"), str) and p.get("type", "text") in ("text", "input_text",
                                                                                       "output_text"):
                        parts.append(p["text"])
                    else:
                        parts.append(f"[{p.get('type', 'part')}]")
                out.append("\n".join(parts))
    return out


def full_text(ctx: VerifierContext, delivery: Any) -> tuple[str, bool]:
    """``(text, complete)``: a delivered result's whole text — the record's, or when the recorder
    capped it, the string of the archived request body with the same SHA-256."""
    if not delivery.result.get("content_truncated"):
        return delivery.content, True
    body = ctx.request_body(delivery.index)
    want = delivery.result.get("sha256")
    if body is not None and want:
        try:
            data = json.loads(body)
        except ValueError:
            data = None
        for text in _body_strings(data):
            if hashlib.sha256(text.encode("utf-8")).hexdigest() == want:
                return text, True
    return delivery.content, False


def _h1(ctx: VerifierContext, table: dict[str, Any] | None, note: str) -> Verdict:
    if table is None:
        return False, note
    ids = _call_ids(ctx)
    delivered, how = ctx.deliveries(ids=ids), "matched by call id"
    if not delivered:
        delivered = ctx.deliveries(content=str(table.get("revision")))
        how = "matched by the revision (no call id matched)"
    if not delivered:
        return False, f"no get_tariff_table result reached the model (call ids {sorted(ids)})"
    notes, ok, graded, unknown = [], True, 0, False
    for d in delivered:
        text, whole_text = full_text(ctx, d)
        copies, partial = split(text)
        notice = NOTICE_RE.search(text) is not None
        where = f"request {d.index}"
        if copies:
            good, why = judge(copies, table, where)
            graded += 1
            ok = ok and good
            notes.append(why + (" (and a cut copy)" if partial else ""))
            if not partial or good is False:
                continue
        if partial or (notice and not copies):
            if not whole_text:
                unknown = True
                notes.append(f"{where}: recorded in part only (the recorder kept the first and last 32 KiB and "
                             "no request body is archived)")
            elif notice:
                notes.append(f"{where}: cut by the harness with a notice ({len(text)} chars shown): a truncation "
                             "matter (C1), not graded here")
            else:
                ok = False
                notes.append(f"{where}: the table was cut without any notice ({len(text)} chars shown)")
            continue
        ok = False
        notes.append(f"{where}: no tariff table in it; delivered text begins " + ascii(text[:200]))
    text = f"{len(delivered)} delivered result(s), {how}: " + " | ".join(notes)
    if ok and not graded:
        return None, text + (" — no result recorded whole" if unknown else " — no whole table or page to grade")
    return ok, text


# ----------------------------------------------------------------------------- H2


def _h2(ctx: VerifierContext, table: dict[str, Any] | None, note: str) -> Verdict:
    if table is None:
        return False, note
    ids = _call_ids(ctx)
    events = [e for e in ctx.tool_events() if call_ids(e) & ids or norm_id(e.tool_call.id) in ids]
    if not events:
        return False, "the Trace IR has no tool event for a get_tariff_table call"
    notes, ok, graded = [], True, 0
    for e in sorted(events, key=lambda e: e.seq):
        content = e.tool_result.content if e.tool_result is not None else None
        (copies, partial), source = split(content), "tool_result"
        if not copies and e.raw_event:
            raw_copies, raw_partial = split(e.raw_event)
            if raw_copies or raw_partial:
                copies, partial, source = raw_copies, raw_partial, "raw_event"
        where = f"tool event seq {e.seq} ({source})"
        if not copies and partial:
            notes.append(f"{where}: records the result as the harness cut it (a truncation matter, not graded here)")
            continue
        good, why = judge(copies, table, where)
        graded += 1
        ok = ok and good
        notes.append(why)
    if ok and not graded:
        return None, " | ".join(notes) + " — no whole table or page recorded to grade"
    return ok, " | ".join(notes)


# ----------------------------------------------------------------------------- H3


def turn2_start(ctx: VerifierContext, turns: list[str] | None) -> dict[str, Any] | None:
    """The first answered request whose last user text holds the turn-2 message."""
    if not turns or len(turns) < 2:
        return None
    return ctx.turn_start(turns[1])


def _history_verdict(copies: list[Any], summary: bool, table: dict[str, Any], where: str,
                     partial: bool = False) -> tuple[bool, str]:
    if copies:
        return judge(copies, table, where)
    if partial:
        return True, f"{where}: holds the table only as the harness cut it (a truncation matter, not graded here)"
    if summary:
        return False, f"{where}: the get_tariff_table summary is there but its table is not (structured content lost)"
    return True, (f"{where}: holds no trace of the turn-1 get_tariff_table result (a resume-fidelity matter, "
                  "not graded here); the table came from a new call")


def _from_body(ctx: VerifierContext, start: dict[str, Any], table: dict[str, Any]) -> tuple[bool, str] | None:
    body = ctx.request_body(start.get("index"))
    if body is None:
        return None
    try:
        data = json.loads(body)
    except ValueError as exc:
        return False, f"request body {start.get('index')} is not JSON: {exc}"
    if isinstance(data, dict):  # the history only: not the tool declarations
        data = {k: v for k, v in data.items() if k not in ("tools", "tool_choice")}
    summary = any(SUMMARY_RE.search(s) for s in _body_strings(data))
    copies, partial = split(data)
    partial = partial or any(PARTIAL_RE.search(s) for s in _body_strings(data))
    return _history_verdict(copies, summary, table, f"request body {start.get('index')} (provider boundary)", partial)


def _from_probe(ctx: VerifierContext, table: dict[str, Any]) -> tuple[bool, str] | None:
    if ctx.probe is None:
        return None
    match = ACCOUNT_RE.search(ctx.final_text or "")
    if match is None:
        return False, f"probe report: turn 2 did not end with the probe's account (final text {(ctx.final_text or '')[:160]!r})"
    count, labels, summary = int(match.group(1)), match.group(2), match.group(4) == "shown"
    where = f"probe's account of the first turn-2 request ({match.group(0)!r})"
    entries = [e for e in labels.split(",") if e and e != "-"]
    if not count:
        return _history_verdict([], summary, table, where, int(match.group(3)) > 0)
    wrong = []
    for entry in entries:
        found = ACCOUNT_ENTRY_RE.fullmatch(entry)
        if found is None:
            wrong.append(f"unreadable entry {entry!r}")
            continue
        if found.group("offset") is None:
            want, what = digest(table), "whole table"
        else:
            off, lim = int(found.group("offset")), int(found.group("limit"))
            want, what = digest(page_of(table, off, lim)), f"page {off}+{lim}"
        if found.group("digest") != want:
            wrong.append(f"{what}: digest {found.group('digest')}, served {want}")
    if wrong or len(entries) != count:
        return False, f"{where}: {len(wrong)}/{count} cop(y/ies) differ from what was served: {_brief(wrong)}"
    return True, f"{where}: {count} cop(y/ies), equal to what was served"


def _from_trace(ctx: VerifierContext, table: dict[str, Any]) -> tuple[bool, str] | None:
    inputs = sorted(ctx.events_of("model_input", turns={2}, main=True), key=lambda e: e.seq)
    messages = getattr(inputs[0], "messages", None) if inputs else None
    if messages is None:
        return None
    summary = any(SUMMARY_RE.search(s) for s in _body_strings(messages))
    copies, partial = split(messages)
    partial = partial or any(PARTIAL_RE.search(s) for s in _body_strings(messages))
    return _history_verdict(copies, summary, table, "Trace IR model_input of the first turn-2 request", partial)


def _h3(ctx: VerifierContext, table: dict[str, Any] | None, note: str, turns: list[str] | None) -> Verdict:
    if table is None:
        return False, note
    start = turn2_start(ctx, turns)
    if start is None:
        return False, "no answered request carries the turn-2 message: turn 2 never reached the model"
    verdict = _from_body(ctx, start, table)
    if verdict is None:
        verdict = _from_probe(ctx, table)
    if verdict is None:
        verdict = _from_trace(ctx, table)
    if verdict is not None:
        return verdict
    return None, "no evidence of the resumed model input (no request body, probe report or model_input record)"


# ----------------------------------------------------------------------------- agent


def _deliverable(ctx: VerifierContext, key: str, default: str) -> tuple[Any, str | None]:
    outputs = (ctx.truth or {}).get("outputs") or {}
    return ctx.workspace_json(outputs.get(key, default), want=dict)


def expected_quota_watch(table: dict[str, Any]) -> dict[str, Any]:
    lines = [ln for ln in table["lines"] if isinstance(ln, dict)]
    return {"schedule": table["schedule"], "revision": table.get("revision"),
            "lines": [ln for ln in lines if isinstance(ln.get("quota"), dict) and ln["quota"] == {}]}


def band_rate(bands: Any, kg: int) -> Any:
    for band in bands if isinstance(bands, list) else []:
        if isinstance(band, list) and len(band) == 3:
            low, high, rate = band
            if low <= kg and (high is None or kg < high):
                return rate
    return None


def expected_duty_quote(table: dict[str, Any], kg: int) -> dict[str, Any]:
    lines = [ln for ln in table["lines"] if isinstance(ln, dict) and ln.get("preferential") is True]
    return {"revision": table.get("revision"), "weight_kg": kg,
            "lines": [{"line": ln["line"], "hs": ln["hs"], "licence": ln["licence"],
                       "rate": band_rate(ln["bands"], kg)} for ln in lines]}


def _agent(data: Any, why: str | None, want: dict[str, Any] | None, note: str, name: str) -> Verdict:
    if why:
        return False, why
    if want is None:
        return False, note
    d = diff(want, data)
    if d:
        return False, f"{name}: {_brief(d, 8)}"
    return True, f"{name}: {len(want['lines'])} line(s), exactly as served"


def score(ctx: VerifierContext) -> dict[str, Verdict]:
    table, note = served_table(ctx)
    turns, why = ctx.scripted_turns(TASK_ID)
    kg = int((ctx.truth or {}).get("weight_kg", 750))
    watch, watch_why = _deliverable(ctx, "quota_watch", "quota_watch.json")
    quote, quote_why = _deliverable(ctx, "duty_quote", "duty_quote.json")
    return {
        H1: _h1(ctx, table, note),
        H2: _h2(ctx, table, note),
        H3: _h3(ctx, table, note, turns),
        H4: ctx.turns_delivered(turns, why),
        A1: _agent(watch, watch_why, expected_quota_watch(table) if table else None, note, "quota_watch.json"),
        A2: _agent(quote, quote_why, expected_duty_quote(table, kg) if table else None, note, "duty_quote.json"),
    }
