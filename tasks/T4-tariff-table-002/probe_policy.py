"""The ideal agent for T4-tariff-table-002.

Turn 1: fetches the schedule's tariff table (``get_tariff_table``), takes the table object out of
the result it was shown — parsed as JSON, so every boolean, string, ``{}``, ``null``, nested list
and float digit is exactly as shown — and writes ``quota_watch.json`` from it (the lines whose
``quota`` is the empty object ``{}``, copied unchanged). When the harness cut the result (a
truncation notice, the table's opening without a complete table, or a table missing lines of its
``line_count``: Codex and OpenClaw cut results of ~12 KB and 20,000 characters with a notice, and
Codex's cut can leave valid JSON behind), it follows the recovery path the tool declares and the prompt allows: it fetches
the table page by page (``offset``/``limit``, ``PAGE`` lines each) and joins the pages. When the
result shows no table at all (only the summary reached it), it writes nothing and says so.

Turn 2 (after the native resume): looks for the table in the resumed history it is shown. It
works from the first whole copy found there, else from the pages found there when they join into
the whole table; when the history holds neither, it fetches the table again (the turn-2 message
allows that), as in turn 1. It writes ``duty_quote.json`` (the
lines whose ``preferential`` is the boolean ``true``, each with the rate of the weight band that
contains the consignment weight the message names) and ends with an account of what the resumed
history showed it: how many complete table copies (whole tables and pages), the canonical digest
of each (pages named by their offset and limit), how many cut copies, whether a result's summary
was there, and where the table it used came from. That account is the probe's reading
of the provider request (the verifier's evidence when request bodies are not archived); it
states only what the probe was shown.

Nothing is assumed: every value comes from an observation or the user's message. Harnesses relay
an MCP result in different wrappers (the MCP result as JSON, text parts joined, JSON text inside
a JSON string, ``Output:`` headers, an untrusted-content notice), so the table is searched for in
every JSON value of the text and inside JSON strings there.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Generator
from typing import Any, TypeGuard

from tracetrial.policy import Action, Observation, Turn, await_mcp, call_tool, final, write_file

Steps = Generator[Action, Observation, None]

SERVER = "tariffs"
TOOL = "get_tariff_table"
SCHEDULE_RE = r"`(EU-[A-Z]+-\d{4}-\d{2})`"
WEIGHT_RE = r"\b(\d+) kg consignment\b"
#: The text content of a get_tariff_table result (its human summary).
SUMMARY_RE = r"Tariff schedule \S+: (?:\d+ tariff lines|tariff lines \d+-\d+ of \d+) in [A-Z]{3}\."
#: A table's opening — its currency, then (past the validity and precision blocks, or right after
#: it with sorted keys) its line list — also JSON-escaped: a result that shows it but holds no
#: complete table was cut on the way.
PARTIAL_RE = r'\\*"currency\\*"\s*:[^\[\]]{0,600}?\\*"lines\\*"\s*:\s*\['
#: Lines per page when the whole table does not come through in one result, and pages at most.
#: (OpenClaw cuts a relay at 20,000 characters: the first copy of a 30-line page reached ~19,800 of
#: them for some seeds, of a 25-line page ~17,000 at most.)
PAGE = 25
MAX_PAGES = 10
#: A harness's truncation notice (Codex "…N chars truncated…", OpenClaw "[truncated]", Claude Code
#: "Output too large", the reference "bytes omitted").
NOTICE_RE = r"(?i)\btruncated\b|too large|\bomitted\b"
_DECODER = json.JSONDecoder()
_MAX_DEPTH = 12


# ----------------------------------------------------------------------------- finding the table


def is_table(obj: Any) -> bool:
    """A tariff table: a string schedule, a currency, a validity block and a list of lines (an output
    schema, whose ``lines`` is a mapping, is not one; nor is a deliverable, which has no currency)."""
    return (isinstance(obj, dict) and isinstance(obj.get("schedule"), str) and isinstance(obj.get("lines"), list)
            and "currency" in obj and "valid" in obj)


def _walk(value: Any, depth: int, out: list[dict[str, Any]]) -> None:
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


def _scan(text: str, depth: int, out: list[dict[str, Any]]) -> None:
    """Every table in ``text``: each JSON value that starts at a ``{`` (scanning on after the end
    of each value decoded), and JSON strings inside them."""
    start = text.find("{")
    while start >= 0:
        try:
            value, stop = _DECODER.raw_decode(text, start)
        except ValueError:
            start = text.find("{", start + 1)
            continue
        _walk(value, depth, out)
        start = text.find("{", stop)


def tables_in(text: str | None) -> list[dict[str, Any]]:
    """Every table object in ``text`` (also inside JSON strings found there), in order."""
    out: list[dict[str, Any]] = []
    _scan(text or "", 0, out)
    return out


def _canon(value: Any) -> Any:
    """The JSON value with numbers in one form (an integral float as its integer), so that two
    equal JSON values (RFC 8785: numbers are compared as numbers) print the same."""
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
    """First 16 hex digits of the SHA-256 of the canonical JSON of ``value``."""
    text = json.dumps(_canon(value), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


# ----------------------------------------------------------------------------- the work


def quota_watch(table: dict[str, Any]) -> dict[str, Any]:
    lines = [ln for ln in table["lines"] if isinstance(ln, dict)]
    return {"schedule": table["schedule"], "revision": table.get("revision"),
            "lines": [ln for ln in lines if isinstance(ln.get("quota"), dict) and ln["quota"] == {}]}


def band_rate(bands: Any, kg: int) -> Any:
    """The rate of the band ``[from, to, rate]`` with from <= kg < to (to None: no upper limit)."""
    for band in bands if isinstance(bands, list) else []:
        if not (isinstance(band, list) and len(band) == 3):
            continue
        low, high, rate = band
        if _number(low) and low <= kg and (high is None or (_number(high) and kg < high)):
            return rate
    return None


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def duty_quote(table: dict[str, Any], kg: int) -> dict[str, Any]:
    lines = [ln for ln in table["lines"] if isinstance(ln, dict) and ln.get("preferential") is True]
    return {"revision": table.get("revision"), "weight_kg": kg,
            "lines": [{"line": ln.get("line"), "hs": ln.get("hs"), "licence": ln.get("licence"),
                       "rate": band_rate(ln.get("bands"), kg)} for ln in lines]}


def _dump(value: Any) -> str:
    # ASCII escapes: the file's JSON value is the same, and no shell or tool path can re-encode it
    return json.dumps(value, ensure_ascii=True, indent=2) + "\n"


def _failed(shown: Observation) -> str | None:
    if shown.absent or shown.missing:
        return "no result"
    if shown.is_error:
        return "an error"
    return None


def _count(v: Any) -> TypeGuard[int]:
    return isinstance(v, int) and not isinstance(v, bool)


def complete(t: dict[str, Any]) -> bool:
    """Every line the copy says it has is there: a whole table's ``line_count``, a page's share of
    its ``total`` (a harness that cut the result in the middle can leave valid JSON behind)."""
    block = t.get("page")
    if isinstance(block, dict):
        off, lim, total = block.get("offset"), block.get("limit"), block.get("total")
        if not (_count(off) and _count(lim) and _count(total)):
            return False
        return len(t["lines"]) == max(0, min(lim, total - off))
    count = t.get("line_count")
    return not _count(count) or count == len(t["lines"])


def whole(found: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The first complete whole table (not a page) among ``found``."""
    return next((t for t in found if "page" not in t and complete(t)), None)


def pages_of(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The complete pages among ``found``."""
    return [t for t in found if isinstance(t.get("page"), dict) and complete(t)]


def cut_shown(text: str, found: list[dict[str, Any]]) -> bool:
    """The result shows the table cut: a copy missing lines, a table's opening with no complete
    copy, or a truncation notice."""
    return (any(not complete(t) for t in found) or re.search(PARTIAL_RE, text) is not None
            or re.search(NOTICE_RE, text) is not None)


def join(pages: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The whole table from its pages (each page once, by offset), when they cover every line."""
    by_offset: dict[Any, dict[str, Any]] = {}
    for p in pages:
        by_offset.setdefault(p["page"].get("offset"), p)
    first = by_offset.get(0)
    total = first["page"].get("total") if first is not None else None
    if first is None or not _count(total):
        return None
    lines: list[Any] = []
    while len(lines) < total:
        page = by_offset.get(len(lines))
        if page is None or not page["lines"]:
            return None
        lines.extend(page["lines"])
    if len(lines) != total:
        return None
    table = {k: v for k, v in first.items() if k not in ("page", "lines")}
    table["line_count"] = total
    table["lines"] = lines
    return table


def _fetch(turn: Turn, schedule: str) -> Generator[Action, Observation, tuple[dict[str, Any] | None, str]]:
    """The table: one whole result, or (when the harness cut it) the pages joined."""
    yield from await_mcp(turn, SERVER)
    shown = yield call_tool(SERVER, TOOL, {"schedule": schedule})
    failed = _failed(shown)
    if failed:
        return None, failed
    found = tables_in(shown.text)
    table = whole(found)
    if table is not None:
        return table, "one result"
    if not cut_shown(shown.text or "", found):
        return None, "only a summary without the table's lines"
    pages: list[dict[str, Any]] = []
    offset = 0
    for _ in range(MAX_PAGES):
        res = yield call_tool(SERVER, TOOL, {"schedule": schedule, "offset": offset, "limit": PAGE})
        failed = _failed(res)
        page = None if failed else next((p for p in pages_of(tables_in(res.text))
                                         if p["page"].get("offset") == offset), None)
        if page is None:
            return None, f"the cut table, then {failed or 'no lines'} for the page at offset {offset}"
        pages.append(page)
        offset += len(page["lines"])
        total = page["page"].get("total")
        if not page["lines"] or not isinstance(total, int) or offset >= total:
            break
    table = join(pages)
    if table is None:
        return None, f"the cut table, then {len(pages)} page(s) that do not join into the whole table"
    return table, f"the cut table, then {len(pages)} page(s)"


def turn_one(turn: Turn) -> Steps:
    found = re.search(SCHEDULE_RE, turn.user_text or "")
    if found is None:
        yield final("The request names no tariff schedule; nothing was fetched.")
        return
    table, why = yield from _fetch(turn, found.group(1))
    if table is None:
        yield final(f"get_tariff_table gave me {why}: I do not have the tariff lines, so I did not write "
                    "quota_watch.json.")
        return
    watch = quota_watch(table)
    yield write_file("quota_watch.json", _dump(watch))
    yield final(f"Schedule {watch['schedule']} revision {watch['revision']}: {len(watch['lines'])} line(s) with "
                "an empty quota copied to quota_watch.json.")


def _label(t: dict[str, Any]) -> str:
    page = t.get("page")
    if isinstance(page, dict):
        return f"p{page.get('offset')}+{page.get('limit')}:{digest(t)}"
    return f"full:{digest(t)}"


def account(history: str) -> tuple[list[dict[str, Any]], str]:
    """The tables (whole and pages) the resumed history shows and the probe's account of them:
    complete copies with their digests, copies missing lines (cut) counted apart."""
    found = tables_in(history)
    kept = [t for t in found if complete(t)]
    summary = re.search(SUMMARY_RE, history) is not None
    labels = ",".join(_label(t) for t in kept) or "-"
    return kept, (f"Resumed history: tables={len(kept)} digests={labels} cut={len(found) - len(kept)} "
                  f"summary={'shown' if summary else 'absent'}")


def turn_two(turn: Turn) -> Steps:
    weight = re.search(WEIGHT_RE, turn.user_text or "")
    found, seen = account(turn.history_text)
    if weight is None:
        yield final(f"The message names no consignment weight; nothing was written. {seen}; used=none.")
        return
    kg = int(weight.group(1))
    table, source = whole(found), "history"
    if table is None:
        table, source = join(pages_of(found)), "history pages"
    if table is None:
        schedule = re.search(SCHEDULE_RE, turn.user_text or "")
        if schedule is None:
            yield final("The resumed history holds no tariff table and the message names no schedule to fetch; "
                        f"nothing was written. {seen}; used=none.")
            return
        table, why = yield from _fetch(turn, schedule.group(1))
        source = f"call ({why})"
        if table is None:
            yield final(f"get_tariff_table gave me {why}: I do not have the tariff lines, so I did not write "
                        f"duty_quote.json. {seen}; used=none.")
            return
    quote = duty_quote(table, kg)
    yield write_file("duty_quote.json", _dump(quote))
    yield final(f"{len(quote['lines'])} preferential line(s) quoted for {kg} kg in duty_quote.json. "
                f"{seen}; used={source} digest={digest(table)}.")


def policy(turn: Turn) -> Steps:
    if turn.index == 1:
        yield from turn_one(turn)
    else:
        yield from turn_two(turn)
