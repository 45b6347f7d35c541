"""Evidence selectors and bounded packets (SPEC §8).

A semantic criterion's ``evidence`` selector names sources, event types, fields,
literal ``match`` keywords and per-criterion limits (``max_records``,
``max_chars``). :func:`collect_candidates` turns the archive into candidate
records (each with a citable ``ref``: ``seq:12``, ``gateway:3``,
``ledger:tickets:5``, ``file:out.json``, ...); :func:`build_packet` — pure —
filters, selects and reduces them into an :class:`EvidencePacket` that reports
scanned / matched / returned counts and a truncation flag.

Selection keeps the first half and the last half of ``max_records`` matching
records (the run's end often holds the final answer); reduction then halves the
string and collection limits until the packet fits ``max_chars``, and only then
drops records from the middle. A packet never exceeds its bound by more than one
stub per record.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from criteria.matchers import get_path
from criteria.reduce import MAX_STRING_LIMIT, MIN_STRING_LIMIT, Budget, Reducer
from criteria.rundata import RunData
from tracetrial.rubric import EvidenceSelector
from tracetrial.verify import VerifierOutcome

PACKET_SCHEMA = "tt-packet/1"
#: Envelope fields left out of trace records unless a selector names them.
_TRACE_NOISE = ("schema_version", "run_id", "timestamp", "raw_event")
MAX_FILES = 2000
MAX_FILE_BYTES = 32 << 20
MAX_REDUCTION_ROUNDS = 8


class EvidencePacket(BaseModel):
    """``evidence/packets/<criterion>.json``: what the judge saw for one criterion."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    schema_: Literal["tt-packet/1"] = Field(default="tt-packet/1", alias="schema")
    criterion: str
    layer: Literal["harness", "agent"]
    selector: dict[str, Any]
    keywords: list[str]
    limits: dict[str, int]
    scanned: int
    matched: int
    returned: int
    truncated: bool
    empty_selection: bool
    unavailable_sources: dict[str, str] = Field(default_factory=dict)
    records: list[dict[str, Any]]

    @property
    def refs(self) -> list[str]:
        return [r["ref"] for r in self.records if "ref" in r]


# ----------------------------------------------------------------- candidates


def _trace_records(run: RunData, selector: EvidenceSelector) -> Iterator[dict[str, Any]]:
    for event in run.event_dicts:
        head = {"ref": f"seq:{event['seq']}", "source": "trace", "seq": event["seq"],
                "event_type": event["event_type"]}
        # envelope noise is dropped unless a selector names it in ``fields`` (raw_event.x)
        named = {f.split(".", 1)[0] for f in selector.fields}
        keep = {k: v for k, v in event.items() if k not in head and (k not in _TRACE_NOISE or k in named)}
        yield {**head, **keep}


#: The keys of a gateway record a packet carries (and ``fields`` may name).
GATEWAY_KEYS = ("status", "error", "model", "path", "wire_format", "inventory_present",
                 "inventory_complete", "inventory_fingerprint", "tools", "tool_results", "last_user_text")


def _gateway_records(run: RunData) -> Iterator[dict[str, Any]]:
    for record in run.gateway or []:
        yield {"ref": f"gateway:{record.get('index')}", "source": "gateway", "index": record.get("index"),
               **{k: record.get(k) for k in GATEWAY_KEYS if k in record}}


def _ledger_records(run: RunData) -> Iterator[dict[str, Any]]:
    for service in sorted(run.ledgers):
        for record in run.ledgers[service]:
            body = {k: v for k, v in record.items() if k not in ("prev", "hash", "time")}
            yield {"ref": f"ledger:{service}:{record.get('seq')}", "source": "ledger", **body}


def _read_file(path: Path) -> Any:
    size = path.stat().st_size
    with path.open("rb") as fh:
        data = fh.read(MAX_FILE_BYTES)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return {"binary": True, "size": size, "sha256": hashlib.sha256(data).hexdigest()}
    if size > MAX_FILE_BYTES:
        return {"text": text, "read_bytes": MAX_FILE_BYTES, "size": size}
    return text


def _files(root: Path) -> list[str]:
    """Regular files under ``root`` (sorted, symlinks never followed, bounded)."""
    out: list[str] = []
    if root.is_symlink() or not root.is_dir():
        return out
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not (Path(dirpath) / d).is_symlink())
        for name in sorted(filenames):
            p = Path(dirpath) / name
            if p.is_file() and not p.is_symlink():
                out.append(p.relative_to(root).as_posix())
                if len(out) >= MAX_FILES:
                    return out
    return out


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _workspace_records(run: RunData, selector: EvidenceSelector) -> Iterator[dict[str, Any]]:
    ws, base = run.workspace, run.baseline
    now, before = set(_files(ws)), set(_files(base))
    if selector.files:
        names = sorted(n for n in now | before if any(fnmatch.fnmatchcase(n, pat) for pat in selector.files))
    else:  # agent rubrics read what changed relative to the frozen baseline
        names = sorted(n for n in now | before
                       if n not in now or n not in before or _digest(ws / n) != _digest(base / n))
    for name in names:
        if name not in now:
            status, content = "deleted", None
        else:
            status = "added" if name not in before else (
                "unchanged" if _digest(ws / name) == _digest(base / name) else "modified")
            content = _read_file(ws / name)
        yield {"ref": f"file:{name}", "source": "workspace", "path": name, "status": status, "content": content}


def _native_records(run: RunData) -> Iterator[dict[str, Any]]:
    root = run.root / "native"
    for name in _files(root):
        yield {"ref": f"native:{name}", "source": "native", "path": name, "content": _read_file(root / name)}


def _probe_records(run: RunData) -> Iterator[dict[str, Any]]:
    probe = run.probe or {}
    for req in probe.get("requests") or []:
        yield {"ref": f"probe:request:{req.get('index')}", "source": "probe", **req}
    for i, cap in enumerate(probe.get("absent_capabilities") or []):
        yield {"ref": f"probe:absent:{i}", "source": "probe", "absent_capability": cap}
    if probe.get("apparatus_errors"):
        yield {"ref": "probe:apparatus_errors", "source": "probe", "apparatus_errors": probe["apparatus_errors"]}
    if probe.get("final_text") is not None:
        yield {"ref": "probe:final", "source": "probe", "final_text": probe["final_text"]}


def _verifier_records(verifier: VerifierOutcome | None) -> Iterator[dict[str, Any]]:
    if verifier is None:
        return
    if verifier.error:
        yield {"ref": "verifier:error", "source": "verifier", "error": verifier.error}
    for cid, (passed, reason) in sorted(verifier.results.items()):
        yield {"ref": f"verifier:{cid}", "source": "verifier", "id": cid, "passed": passed, "reason": reason}


def collect_candidates(selector: EvidenceSelector, run: RunData,
                       verifier: VerifierOutcome | None = None) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Every candidate record of the selector's sources, in source then native order,
    and ``{source: reason}`` for sources the archive could not provide."""
    out: list[dict[str, Any]] = []
    missing: dict[str, str] = {}
    for source in dict.fromkeys(selector.sources):
        if source == "trace":
            if run.events is None:
                missing[source] = f"events.json unavailable: {run.events_error}"
            out.extend(_trace_records(run, selector))
        elif source == "gateway":
            if run.gateway is None:
                missing[source] = f"gateway records unavailable: {run.gateway_error}"
            out.extend(_gateway_records(run))
        elif source == "ledger":
            missing.update({f"ledger:{k}": v for k, v in sorted(run.ledger_errors.items())})
            out.extend(_ledger_records(run))
        elif source == "workspace":
            if not run.workspace.is_dir():
                missing[source] = "workspace/ missing from the archive"
            out.extend(_workspace_records(run, selector))
        elif source == "native":
            out.extend(_native_records(run))
        elif source == "probe":
            if run.probe is None:
                missing[source] = f"probe record unavailable: {run.probe_error}"
            out.extend(_probe_records(run))
        elif source == "verifier":
            if verifier is None:
                missing[source] = "the verifier was not run"
            out.extend(_verifier_records(verifier))
    return out, missing


# --------------------------------------------------------------------- packet


def _project(record: dict[str, Any], selector: EvidenceSelector) -> dict[str, Any] | None:
    """The record as the judge sees it, or None when the selector excludes it.

    ``event_types`` and ``fields`` apply to trace records: a trace record is kept with only
    the named fields, and dropped when it has none of them. ``fields`` that name gateway record
    keys (``tool_results``, ``last_user_text``, ``status``, ``error`` …) project gateway records the
    same way, so a notice criterion reads what was delivered without every request's tool catalogue.
    """
    if record["source"] == "gateway":
        wanted = [f for f in selector.fields if f in GATEWAY_KEYS]
        if not wanted:
            return record
        kept = {f: record[f] for f in wanted if record.get(f) not in (None, [], {})}
        return {k: record[k] for k in ("ref", "source", "index")} | kept if kept else None
    if record["source"] != "trace":
        return record
    if selector.event_types and record["event_type"] not in selector.event_types:
        return None
    if not selector.fields:
        return record
    values = {}
    for path in selector.fields:
        present, value = get_path(record, path)
        if present:
            values[path] = value
    if not values:
        return None
    return {k: record[k] for k in ("ref", "source", "seq", "event_type")} | {"fields": values}


def _size(records: list[dict[str, Any]]) -> int:
    return len(json.dumps(records, ensure_ascii=False, sort_keys=True))


def _dedupe_catalogues(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A tool catalogue identical to an earlier returned one is replaced by a reference."""
    seen: dict[str, str] = {}
    out = []
    for r in records:
        fp = r.get("inventory_fingerprint")
        if r["source"] == "gateway" and fp and isinstance(r.get("tools"), list):
            if fp in seen:
                r = {**r, "tools": {"same_as": seen[fp]}}
            else:
                seen[fp] = r["ref"]
        out.append(r)
    return out


def build_packet(criterion: str, layer: Literal["harness", "agent"], selector: EvidenceSelector,
                 candidates: Iterable[dict[str, Any]], unavailable: dict[str, str] | None = None) -> EvidencePacket:
    """Filter, select and reduce ``candidates`` into a bounded packet (pure, deterministic)."""
    reducer = Reducer(match=tuple(selector.match))
    scanned, matched = 0, []
    for record in candidates:
        scanned += 1
        projected = _project(record, selector)
        if projected is None:
            continue
        record = projected
        body = {k: v for k, v in record.items() if k not in ("ref", "source")}
        hits = reducer.matched_keywords(body)
        if selector.match and not hits:
            continue
        matched.append({**record, "matched_keywords": hits} if selector.match else record)
    limit = selector.max_records
    head = (limit + 1) // 2
    chosen = matched if len(matched) <= limit else matched[:head] + matched[len(matched) - (limit - head):]
    chosen = _dedupe_catalogues(chosen)

    # Start generous and halve: short evidence stays verbatim, long evidence shrinks evenly.
    budget = Budget(string_limit=max(MIN_STRING_LIMIT, min(MAX_STRING_LIMIT, selector.max_chars // 2)),
                    list_limit=20)
    reduced = [reducer.reduce(r, budget) for r in chosen]
    for _ in range(MAX_REDUCTION_ROUNDS):
        if _size(reduced) <= selector.max_chars or budget == budget.halved():
            break
        budget = budget.halved()
        reducer.reset_counts()
        reduced = [reducer.reduce(r, budget) for r in chosen]
    # json.dumps of a list is "[" + ", ".join(items) + "]": sizes add up without re-dumping.
    sizes = [_size([r]) - 2 for r in reduced]
    while len(reduced) > 1 and sum(sizes) + 2 * len(sizes) > selector.max_chars:
        middle = len(reduced) // 2  # the middle matters least: keep both ends of the run
        del reduced[middle], sizes[middle]
    if reduced and _size(reduced) > selector.max_chars:
        r = reduced[0]
        reduced = [{"ref": r["ref"], "source": r["source"], "omitted": "record exceeds the packet bound "
                    f"even after reduction ({_size([r])} chars)"}]
    return EvidencePacket(
        criterion=criterion, layer=layer, selector=selector.model_dump(mode="json"),
        keywords=list(reducer.keywords),
        limits={"max_records": selector.max_records, "max_chars": selector.max_chars,
                "string_limit": budget.string_limit, "list_limit": budget.list_limit,
                "max_windows": budget.max_windows},
        scanned=scanned, matched=len(matched), returned=len(reduced),
        truncated=bool(len(reduced) < len(matched) or reducer.strings_reduced or reducer.collections_reduced),
        empty_selection=not reduced, unavailable_sources=dict(unavailable or {}), records=reduced,
    )


def packet_for(criterion: str, layer: Literal["harness", "agent"], selector: EvidenceSelector,
               run: RunData, verifier: VerifierOutcome | None = None) -> EvidencePacket:
    """Collect from the archive and build the packet of one criterion."""
    candidates, missing = collect_candidates(selector, run, verifier)
    return build_packet(criterion, layer, selector, candidates, missing)
