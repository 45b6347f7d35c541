"""Resolved TraceTrial settings for one pytest session (one place, named sources).

Precedence: CLI option > ``TT_*`` environment variable > default.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

DEFAULT_HARNESSES = ("claude_code", "codex", "openclaw", "deepseek", "reference")


@dataclass(frozen=True)
class Settings:
    """Frozen session settings (serializable: plain strings and paths)."""

    harnesses: tuple[str, ...] | None
    models: tuple[str, ...]
    sandbox: str
    output: Path
    judge: str | None
    rerun: bool
    record_bodies: bool
    tasks_dir: Path | None


def _split(value: str | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    items = tuple(v.strip() for v in value.split(",") if v.strip())
    return items or None


def _opt(config: pytest.Config, name: str, env: str) -> str | None:
    value = config.getoption(name)
    if value in (None, "") and os.environ.get(env):
        return os.environ[env]
    return value  # type: ignore[no-any-return]


def resolve_settings(config: pytest.Config) -> Settings:
    """Settings from the command line, then ``TT_*`` env vars, then defaults."""
    sandbox = _opt(config, "--tt-sandbox", "TT_SANDBOX") or "auto"
    if sandbox not in ("auto", "docker", "bwrap", "local"):
        raise pytest.UsageError(f"invalid sandbox {sandbox!r} from TT_SANDBOX; use auto|docker|bwrap|local")
    output = Path(_opt(config, "--tt-output", "TT_OUTPUT") or "outputs")
    if not output.is_absolute():
        output = Path(config.invocation_params.dir) / output
    tasks = _opt(config, "--tt-tasks", "TT_TASKS")
    return Settings(
        harnesses=_split(_opt(config, "--tt-harness", "TT_HARNESS")),
        models=_split(_opt(config, "--tt-model", "TT_MODEL")) or ("probe",),
        sandbox=sandbox,
        output=output,
        judge=_opt(config, "--tt-judge", "TT_JUDGE"),
        rerun=bool(config.getoption("--tt-rerun")) or os.environ.get("TT_RERUN") == "1",
        record_bodies=bool(config.getoption("--tt-record-bodies")),
        tasks_dir=Path(tasks) if tasks else None,
    )
