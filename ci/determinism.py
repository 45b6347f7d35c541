"""Probe-protocol determinism: normalized traces and run-to-run comparison.

Under the probe protocol the same harness version must give the same verdict
vector and the same trace on every run, once the genuinely volatile parts are
masked. :func:`normalized_trace` masks exactly those (each rule below says what
makes it volatile); everything else, including every content string, is compared.

==================================  ==============================================  =====================
what (why volatile)                 where                                           becomes
==================================  ==============================================  =====================
observation/native times (clock)    keys ``timestamp``, ``ts``, ``end_time``, ...   ``<ts>``
                                    when the value is an ISO time or a number
log-line time prefixes (clock)      ``2026-..T..:..:..Z ERROR ...`` line starts     ``<ts>``
durations, latencies (clock)        numeric ``duration*``, ``ttft*``, ``*_ms`` ...  ``<duration>``
                                    and ``duration_ms: <n>`` / ``<duration_ms>n`` in texts
run id (uuid per run)               any string                                      ``<run>``
probe tag, run seed (sha of run)    ``sha256(run_id)[:8]`` / ``[:16]``              ``<tag>`` / ``<seed>``
probe message/response ids (hash)   ``msg_tt_``/``resp_tt_``/``chatcmpl-tt`` + hex  ``...<probe-id-N>``
UUIDs (random / time based)         any string                                      ``<uuid-N>``
session ids (native, random)        envelope ``session_id`` values, everywhere      ``<session-N>``
native task/agent ids (random)      ``raw_event.task_id``, ``raw_event.tasks[]``    ``<native-id-N>``
                                    (not the TraceTrial task id), everywhere
Claude persisted-output files       ``/tool-results/<name>``                        ``/tool-results/<file>``
Codex exec ids, chunk, wall time    ``session ID <n>``, ``Chunk ID: <hex>``,        ``<exec-N>``,
                                    ``Wall time: <s> seconds``                      ``<chunk>``, ``<wall>``
Codex sub-agent nicknames (random)  ``"nickname":"..."`` in JSON texts              ``"<nickname>"``
scratch folders (mkdtemp)           ``<tmp>/tt-<task[:12]>-<8 chars>`` (+ dashed)    ``<scratch>``
                                    docker: ``<tmp>/tt-cell-<8 chars>`` (+ dashed)
archive root (--tt-output)          ``.../traces/<task>/`` prefixes                 ``<output>/traces/``
loopback ports (ephemeral)          ``127.0.0.1:<port>``, ``localhost:<port>``      ``<port>``
simulator one-off values (seeded)   ``volatile`` (the ledger's ``issued`` values)    ``<issued:NAME>``
extra patterns (caller's choice)    ``patterns`` regexes                            ``<volatile>``
==================================  ==============================================  =====================

Numbered placeholders (``-N``) are assigned in order of first appearance, so
"the same id twice" and "two different ids" stay distinguishable.

:func:`compare_runs` is the only function here that reads files.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["compare_runs", "issued_values", "normalized_trace", "verdict_vector"]

#: Keys whose value is masked when it *looks like* a time (ISO string or epoch number).
TIME_KEYS = frozenset({"timestamp", "ts", "time", "source_timestamp", "source_event_timestamp", "started_at",
                       "finished_at", "created_at", "completed_at", "start_time", "end_time"})
#: Keys whose numeric value is a measured duration or latency (``None`` stays ``None``).
DURATION_KEYS = frozenset({"duration", "duration_s", "duration_ms", "duration_api_ms", "ttft_ms", "ttft_stream_ms",
                           "time_to_request_ms", "time_to_first_token_ms", "retry_delay_ms", "wall_seconds",
                           "elapsed_ms"})

_ISO_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})?$")
_LOG_TIME = re.compile(r"(?m)^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z?(?=\s)")
_UUID = re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")
_PROBE_ID = re.compile(r"(msg_tt_|resp_tt_|chatcmpl-tt)[0-9a-f]{24}")
_PORT = re.compile(r"\b(127\.0\.0\.1|localhost):\d{2,5}\b")
_CHUNK = re.compile(r"Chunk ID: [0-9a-f]+")
#: Codex names its rollout files by the session's start time (``source_records`` cite them).
_ROLLOUT_TIME = re.compile(r"rollout-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-")
_WALL = re.compile(r"Wall time: [0-9.]+ seconds")
_EXEC = re.compile(r"session ID (\d+)")
_TOOL_RESULTS = re.compile(r"/tool-results/[A-Za-z0-9_.-]+")
_NICKNAME = re.compile(r'("nickname"\s*:\s*)"[^"\\]*"')
_TEXT_DURATION = re.compile(r"\b(duration_ms|duration_s|elapsed_ms|ttft_ms)(\"?\s*[:=]\s*|>)\d+(?:\.\d+)?")


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


class _Masker:
    """Applies the rules of the module docstring to one trace."""

    def __init__(self, events: Sequence[Mapping[str, Any]], volatile: Mapping[str, str],
                 patterns: Sequence[str]):
        self.numbers: dict[tuple[str, str], int] = {}
        self.literals: dict[str, str] = {}
        task_ids = {str(e["task_id"]) for e in events if e.get("event_type") == "run_started" and e.get("task_id")}
        for e in events:
            if len(str(e.get("run_id") or "")) >= 8:  # real run ids are long; never mask a short word
                run_id = str(e["run_id"])
                digest = hashlib.sha256(run_id.encode("utf-8")).hexdigest()
                self.literals.update({run_id: "<run>", digest[:16]: "<seed>", digest[:8]: "<tag>"})
        for value, name in volatile.items():
            if len(value) >= 4:
                self.literals[value] = f"<issued:{name}>"
        # Ids in order of first appearance: envelope sessions, native task/agent ids, exec ids.
        self.exec_ids: set[str] = set()
        for e in events:
            if e.get("session_id"):
                self._literal("session", str(e["session_id"]))
            raw = e.get("raw_event")
            if isinstance(raw, Mapping):
                for native in [raw.get("task_id"), *[t.get("task_id") for t in raw.get("tasks") or []
                                                     if isinstance(t, Mapping)]]:
                    if isinstance(native, str) and len(native) >= 6 and native not in task_ids:
                        self._literal("native-id", native)
            for text in _strings(e):
                for m in _EXEC.finditer(text):
                    self.exec_ids.add(m.group(1))
                    self.number("exec", m.group(1))
        self.scratch: list[re.Pattern[str]] = []
        for task_id in task_ids:
            prefix = f"tt-{task_id[:12]}-"
            dashed = re.sub(r"[^A-Za-z0-9]", "-", prefix)
            self.scratch.append(re.compile(r"(?:/[^/\s\"'<>]+)*/" + re.escape(prefix) + r"[a-z0-9_]{8}"))
            self.scratch.append(re.compile(r"(?:-[A-Za-z0-9]+)*-" + re.escape(dashed) + r"[a-z0-9-]{8}"))
            self.scratch.append(re.compile(r"(?:/[^/\s\"'<>]+)+/traces/(?=" + re.escape(task_id) + "/)"))
        # The docker backend's cell folder (its container mounts it; the scratch is inside it):
        # ``<tmp>/tt-cell-<8 chars>``, named before the cell's task is known (a warm container's).
        self.scratch.append(re.compile(r"(?:/[^/\s\"'<>]+)*/tt-cell-[a-z0-9_]{8}"))
        self.scratch.append(re.compile(r"(?:-[A-Za-z0-9]+)*-tt-cell-[a-z0-9-]{8}"))
        self.ordered = sorted(self.literals, key=len, reverse=True)  # a run id before the tag inside it
        self.patterns = [re.compile(p) for p in patterns]

    def _literal(self, kind: str, value: str) -> None:
        if value not in self.literals:
            self.literals[value] = self.number(kind, value)

    def number(self, kind: str, value: str) -> str:
        key = (kind, value)
        if key not in self.numbers:
            self.numbers[key] = sum(1 for k in self.numbers if k[0] == kind) + 1
        return f"<{kind}-{self.numbers[key]}>"

    def text(self, s: str) -> str:
        for pattern in self.scratch:
            s = pattern.sub(lambda m: "<output>/traces/" if m.group(0).endswith("/traces/") else "<scratch>", s)
        for literal in self.ordered:
            if literal in s:
                s = s.replace(literal, self.literals[literal])
        s = _UUID.sub(lambda m: self.number("uuid", m.group(0).lower()), s)
        s = _PROBE_ID.sub(lambda m: m.group(1) + self.number("probe-id", m.group(0)), s)
        s = _PORT.sub(lambda m: f"{m.group(1)}:<port>", s)
        s = _CHUNK.sub("Chunk ID: <chunk>", s)
        s = _ROLLOUT_TIME.sub("rollout-<time>-", s)
        s = _WALL.sub("Wall time: <wall> seconds", s)
        s = _EXEC.sub(lambda m: "session ID " + self.number("exec", m.group(1)), s)
        s = _TOOL_RESULTS.sub("/tool-results/<file>", s)
        s = _NICKNAME.sub(lambda m: m.group(1) + '"<nickname>"', s)
        s = _LOG_TIME.sub("<ts>", s)
        s = _TEXT_DURATION.sub(lambda m: f"{m.group(1)}{m.group(2)}<duration>", s)
        for pattern in self.patterns:
            s = pattern.sub("<volatile>", s)
        return s

    def value(self, v: Any, key: str | None = None) -> Any:
        if key in TIME_KEYS and (_is_number(v) or (isinstance(v, str) and _ISO_TIME.match(v))):
            return "<ts>"
        if key in DURATION_KEYS and _is_number(v):
            return "<duration>"
        if key == "session_id" and isinstance(v, int) and str(v) in self.exec_ids:
            return self.number("exec", str(v))  # a Codex exec id passed back as an argument
        if isinstance(v, str):
            return self.text(v)
        if isinstance(v, Mapping):
            return {self.text(str(k)): self.value(x, str(k)) for k, x in v.items()}
        if isinstance(v, list):
            return [self.value(x) for x in v]
        return v


def _strings(x: Any) -> Iterable[str]:
    if isinstance(x, str):
        yield x
    elif isinstance(x, Mapping):
        for v in x.values():
            yield from _strings(v)
    elif isinstance(x, list):
        for v in x:
            yield from _strings(v)


def normalized_trace(events: Sequence[Mapping[str, Any]], volatile: Mapping[str, str] | None = None,
                     patterns: Sequence[str] = ()) -> list[dict[str, Any]]:
    """The events with run ids, call/session/native ids, uuids, times, durations, scratch paths,
    ports and wall times masked (see the module docstring); content is kept.

    Args:
        events: a Trace IR event list (``events.json`` as loaded JSON).
        volatile: extra per-run literals -> name, e.g. a simulator's one-off values
            (:func:`issued_values`); each occurrence becomes ``<issued:NAME>``.
        patterns: extra regexes of values known to be random by design (e.g. a task
            script's ``secrets.token_hex`` output); each match becomes ``<volatile>``.
    """
    masker = _Masker(events, volatile or {}, patterns)
    return [masker.value(dict(e)) for e in events]


def verdict_vector(combined: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """``[(layer, criterion id, pass|fail|unscored), ...]`` of a loaded ``combined_score.json``."""
    out = []
    for v in combined.get("verdicts", []):
        state = "unscored" if v.get("passed") is None else ("pass" if v["passed"] else "fail")
        out.append((str(v.get("layer")), str(v.get("id")), state))
    return out


def issued_values(run_dir: Path) -> dict[str, str]:
    """One-off values the run's simulators issued (``private/ledgers/*.jsonl``, ``kind: issued``):
    value -> name. They derive from the per-run seed, so they differ between runs by design."""
    out: dict[str, str] = {}
    for ledger in sorted((run_dir / "private" / "ledgers").glob("*.jsonl")):
        for line in ledger.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if not isinstance(record, dict) or record.get("kind") != "issued":
                continue
            detail = record.get("detail") or {}
            values = detail.get("value")
            for value in values if isinstance(values, list) else [values]:
                if isinstance(value, (str, int)) and len(str(value)) >= 4:
                    out[str(value)] = str(detail.get("name", "value"))
    return out


def _leaves(x: Any, path: str = "") -> Iterable[tuple[str, Any]]:
    if isinstance(x, Mapping):
        for k, v in x.items():
            yield from _leaves(v, f"{path}/{k}")
    elif isinstance(x, list):
        for i, v in enumerate(x):
            yield from _leaves(v, f"{path}/{i}")
    else:
        yield path or "/", x


def _short(v: Any) -> str:
    text = json.dumps(v, ensure_ascii=False) if not isinstance(v, str) else repr(v)
    return text if len(text) <= 160 else text[:157] + "..."


def _trace_diff(a: list[dict[str, Any]], b: list[dict[str, Any]], limit: int) -> list[str]:
    kinds_a = [str(e.get("event_type")) for e in a]
    kinds_b = [str(e.get("event_type")) for e in b]
    out: list[str] = []
    if kinds_a != kinds_b:
        for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=kinds_a, b=kinds_b, autojunk=False).get_opcodes():
            if op != "equal":
                out.append(f"event sequence: {op} a[{i1 + 1}:{i2 + 1}] {kinds_a[i1:i2]} vs b[{j1 + 1}:{j2 + 1}] "
                           f"{kinds_b[j1:j2]}")
    pairs = zip(a, b) if kinds_a == kinds_b else (
        (a[i1 + k], b[j1 + k]) for op, i1, i2, j1, j2 in
        difflib.SequenceMatcher(a=kinds_a, b=kinds_b, autojunk=False).get_opcodes() if op == "equal"
        for k in range(i2 - i1))
    shifted = kinds_a != kinds_b
    for ea, eb in pairs:
        if ea == eb:
            continue
        la, lb = dict(_leaves(ea)), dict(_leaves(eb))
        for path in sorted(la.keys() | lb.keys()):
            if shifted and path == "/seq":
                continue  # a consequence of the inserted/deleted events reported above
            if la.get(path, "<absent>") != lb.get(path, "<absent>"):
                out.append(f"event {ea.get('seq')} ({ea.get('event_type')}) {path}: "
                           f"{_short(la.get(path, '<absent>'))} vs {_short(lb.get(path, '<absent>'))}")
                if len(out) >= limit:
                    return out + ["..."]
    return out


def _load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _cells(output: Path) -> dict[str, Path]:
    traces = output / "traces"
    return {p.relative_to(traces).as_posix(): p for p in sorted(traces.glob("*/*/*")) if p.is_dir()}


def _outcome(run_dir: Path) -> tuple[str | None, str, str, list[tuple[str, str, str]] | None]:
    """(harness version, run status, eligibility, verdict vector or None when unscored)."""
    result = _load(run_dir / "result.json")
    score = run_dir / "artifacts" / "llm_judge" / "combined_score.json"
    verdicts = verdict_vector(_load(score)) if score.is_file() else None
    return (result["identity"].get("harness_version"), str(result.get("status")),
            str(result.get("eligibility", "eligible")), verdicts)


def compare_runs(a_dir: Path, b_dir: Path, *, patterns: Sequence[str] = (), limit: int = 20) -> list[str]:
    """Differences between two outputs of the same cells: harness versions, run outcomes,
    verdict vectors and normalized traces, one line each (``[]`` = deterministic).

    Args:
        a_dir, b_dir: two ``--tt-output`` folders.
        patterns: extra regexes for values random by design (see :func:`normalized_trace`).
        limit: at most this many trace lines per cell (then ``...``).
    """
    a_cells, b_cells = _cells(Path(a_dir)), _cells(Path(b_dir))
    out = [f"{k}: only in {a_dir}" for k in sorted(a_cells.keys() - b_cells.keys())]
    out += [f"{k}: only in {b_dir}" for k in sorted(b_cells.keys() - a_cells.keys())]
    for key in sorted(a_cells.keys() & b_cells.keys()):
        ra, rb = a_cells[key], b_cells[key]
        try:
            (va, sa, ea, ca), (vb, sb, eb, cb) = _outcome(ra), _outcome(rb)
        except (OSError, ValueError, KeyError) as exc:
            out.append(f"{key}: archive unreadable: {type(exc).__name__}: {exc}")
            continue
        if va != vb:
            out.append(f"{key}: harness version {va} vs {vb} (not comparable)")
            continue
        if (sa, ea) != (sb, eb):
            out.append(f"{key}: run outcome {sa}/{ea} vs {sb}/{eb}")
        if ca != cb:
            out.append(f"{key}: verdicts differ: {ca} vs {cb}")
        if ea != "eligible" and eb != "eligible":
            continue  # not run at all: no trace to compare
        try:
            ta = normalized_trace(_load(ra / "events.json"), issued_values(ra), patterns)
            tb = normalized_trace(_load(rb / "events.json"), issued_values(rb), patterns)
        except (OSError, ValueError) as exc:
            out.append(f"{key}: events.json unreadable: {exc}")
            continue
        out += [f"{key}: {line}" for line in _trace_diff(ta, tb, limit)]
    return out
