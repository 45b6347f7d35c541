"""Fixtures of the harness adapter tests: golden native captures and a masking snapshot."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.json import JSONSnapshotExtension
from syrupy.types import PropertyPath

from harnesses.install import tool_bin

GOLDEN = Path(__file__).resolve().parent / "golden"
#: A fixed observation time so snapshots do not depend on when the test ran.
AT = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Golden:
    """One captured case: its folder, ``capture.json`` and the archived ``native/`` tree."""

    harness: str
    name: str
    root: Path

    @property
    def native(self) -> Path:
        return self.root / "native"

    @property
    def meta(self) -> dict[str, Any]:
        return json.loads((self.root / "capture.json").read_text(encoding="utf-8"))

    @property
    def turns(self) -> list[int]:
        return [t["index"] for t in self.meta["turns"]]

    def copy_to(self, dest: Path) -> Golden:
        shutil.copytree(self.root, dest)
        return Golden(self.harness, self.name, dest)


def golden_cases(harness: str) -> list[str]:
    return sorted(p.name for p in (GOLDEN / harness).iterdir() if (p / "capture.json").is_file())


def load_golden(harness: str, name: str) -> Golden:
    return Golden(harness, name, GOLDEN / harness / name)


# ------------------------------------------------------------------------ volatile masking

_SUBS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"/tmp/tt-golden-[A-Za-z0-9_]+-[A-Za-z0-9_]+"), "<scratch>"),
    (re.compile(r"-tmp-tt-golden-[A-Za-z0-9-]+?-(?=workspace)"), "-<scratch>-"),
    (re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), "<uuid>"),
    (re.compile(r"\ba[0-9a-f]{16}\b"), "<agent-id>"),
    (re.compile(r"127\.0\.0\.1:\d+"), "127.0.0.1:<port>"),
    (re.compile(r"(tool-results|tasks)/[A-Za-z0-9]+\.(txt|output)"), r"\1/<file>.\2"),
    (re.compile(r"\b(msg|resp)_tt_[0-9a-f]{24}\b"), r"\1_tt_<digest>"),  # probe ids hash the request body
    (re.compile(r"\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z"), "<ts>"),  # log lines in stderr
    (re.compile(r"Chunk ID: [0-9a-f]+"), "Chunk ID: <chunk>"),
    (re.compile(r"Wall time: [0-9.]+ seconds"), "Wall time: <wall> seconds"),
    (re.compile(r"<duration_ms>\d+</duration_ms>"), "<duration_ms><ms></duration_ms>"),
    (re.compile(r'"duration_ms":\s*\d+'), '"duration_ms": <ms>'),
    (re.compile(r"\bduration_ms: \d+"), "duration_ms: <ms>"),
)
_VOLATILE_KEYS = {
    "timestamp": "<timestamp>",
    "source_timestamp": "<native-timestamp>",
    "duration": "<duration>",
    "retry_delay_ms": "<ms>",
    "duration_ms": "<ms>",
}
_LONG = 1500


def mask_volatile(*, data: Any, path: PropertyPath) -> Any:
    """Syrupy matcher: masks run-specific ids, paths, ports and timings; long strings become
    a length + hash + head/tail summary (the hash still pins the exact masked text)."""
    key = path[-1][0] if path else None
    if key in _VOLATILE_KEYS and data is not None and not isinstance(data, (dict, list)):
        return _VOLATILE_KEYS[str(key)]
    if isinstance(data, str):
        for pattern, repl in _SUBS:
            data = pattern.sub(repl, data)
        if len(data) > _LONG:
            digest = hashlib.sha256(data.encode()).hexdigest()[:16]
            return f"<{len(data)} chars sha256:{digest}> {data[:240]!r} … {data[-240:]!r}"
    return data


@pytest.fixture
def snapshot_json(snapshot: SnapshotAssertion) -> SnapshotAssertion:
    """One JSON snapshot file per test, volatile values masked."""
    return snapshot.use_extension(JSONSnapshotExtension).with_defaults(matcher=mask_volatile)


def dump(events: list[Any]) -> list[dict[str, Any]]:
    """Events as the archive writes them, without ``raw_event`` (checked separately)."""
    out = []
    for e in events:
        data = e.model_dump(mode="json")
        data.pop("raw_event", None)
        out.append(data)
    return out


needs_claude = pytest.mark.skipif(
    tool_bin("claude") is None, reason="claude CLI not installed (tracetrial install claude_code)"
)
needs_codex = pytest.mark.skipif(tool_bin("codex") is None, reason="codex CLI not installed (tracetrial install codex)")
