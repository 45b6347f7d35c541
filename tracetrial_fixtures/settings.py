"""Resolved TraceTrial settings for one pytest session (one place, named sources).

Precedence: CLI option > ``TT_*`` environment variable > default.

A value the user gave (an option or a variable) is checked here, before any cell is
collected or run: an unknown harness, model alias or sandbox, an output folder that
cannot be written, or a tasks folder that is not one, is a usage error (one line naming
the option or variable it came from) rather than the same traceback repeated by every cell. Defaults are not checked,
so ``pytest tests/`` and ``--collect-only`` runs that never touch cells stay unaffected.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

DEFAULT_HARNESSES = ("claude_code", "codex", "openclaw", "deepseek", "reference")
SANDBOXES = ("auto", "docker", "bwrap", "local")


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
    #: ``--tt-repeat K``: how many times each cell runs (repetition 1 in ``<output>/traces/``,
    #: repetition ``i`` in ``<output>/repeats/rep-<i>/traces/``).
    repeat: int = 1
    #: ``--tt-max-cost USD``: stop starting cells once the session's archived usage, priced by the
    #: frozen catalogue, reaches this many US dollars (None: no cap).
    max_cost: float | None = None
    #: ``--tt-estimate``: a dry run that prints each selected cell's cost at its budget; nothing runs.
    estimate: bool = False


def _split(value: str | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    items = tuple(v.strip() for v in value.split(",") if v.strip())
    return items or None


def _opt_from(config: pytest.Config, name: str, env: str) -> tuple[str | None, str]:
    """The value and where it came from (``name``, ``env``, or ``"default"``)."""
    value = config.getoption(name)
    if value not in (None, ""):
        return value, name
    if os.environ.get(env):
        return os.environ[env], env
    return value, "default"


def _opt(config: pytest.Config, name: str, env: str) -> str | None:
    return _opt_from(config, name, env)[0]


def check_harnesses(names: tuple[str, ...], source: str) -> None:
    """Every name is a registered harness (``reference+<defect>``: a known mutant).

    Third-party harnesses registered through the entry-point group are listed by
    :func:`harnesses.registry.available_harnesses`, so they are accepted like built-ins.
    Variants of other harnesses are not checked: only the reference harness defines them.
    A named version (``claude_code@2.1.332``) must be installed next to the pins; else the
    error names its install command (``tracetrial install claude_code@2.1.332``).
    """
    from harnesses.reference.mutants import MUTANTS
    from harnesses.registry import available_harnesses, name_problem

    registered = available_harnesses()
    for name in names:
        plain, at, _version = name.partition("@")
        base, _, variant = plain.partition("+")
        if at and base in registered:
            problem = name_problem(name)
            if problem is not None:
                raise pytest.UsageError(f"{source}: {problem}")
        if base not in registered:
            raise pytest.UsageError(
                f"{source}: unknown harness {name!r}; registered: {', '.join(registered) or 'none'} "
                f"(a package adds one through the 'tracetrial.harnesses' entry-point group)")
        if base == "reference" and variant and variant not in MUTANTS:
            raise pytest.UsageError(
                f"{source}: unknown reference-harness mutant {variant!r} in {name!r}; known defects: "
                f"{', '.join(sorted(MUTANTS))} (select one as 'reference+<defect>')")


def check_models(aliases: tuple[str, ...], source: str) -> None:
    """Every alias is in ``models.yaml`` (an unreadable registry is a usage error too)."""
    from apparatus.gateway.registry import ModelRegistry, RegistryError

    try:
        known = ModelRegistry.load().models
    except RegistryError as exc:
        first = str(exc).splitlines()[0]
        raise pytest.UsageError(f"{source}: cannot check the model aliases: {first}") from exc
    for alias in aliases:
        if alias not in known:
            raise pytest.UsageError(f"{source}: unknown model alias {alias!r}; known: "
                                    f"{', '.join(sorted(known))} (add it to models.yaml)")


def check_output(output: Path, source: str) -> None:
    """``output`` is a writable folder, or can be created as one.

    Nothing is created here (a ``--collect-only`` run must leave no folder behind): the
    path itself, or else its nearest existing ancestor, must be a directory we can write.
    """
    existing = output
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if existing == output and not output.is_dir():
        raise pytest.UsageError(f"{source}: {output} is a file, not a folder; name a folder for the archive")
    if not existing.is_dir():
        raise pytest.UsageError(f"{source}: cannot create {output}: {existing} is a file, not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        what = "is not writable" if existing == output else f"cannot be created ({existing} is not writable)"
        raise pytest.UsageError(f"{source}: {output} {what}; name a folder you can write")


def check_tasks(tasks: Path, source: str) -> None:
    """``tasks`` is a folder (of task packs); else every cell's collection would crash."""
    if not tasks.is_dir():
        what = "is a file, not a folder" if tasks.exists() else "does not exist"
        raise pytest.UsageError(f"{source}: {tasks} {what}; name the folder of task packs")


#: An upper bound on ``--tt-repeat``: a typo (``--tt-repeat 300``) must not queue hundreds of runs per cell.
MAX_REPEAT = 50


def check_repeat(value: str, source: str) -> int:
    """``--tt-repeat``'s value: an integer from 1 to :data:`MAX_REPEAT`."""
    try:
        repeat = int(value)
    except ValueError:
        raise pytest.UsageError(f"{source}: {value!r} is not a number of repetitions; give an integer "
                                f"from 1 to {MAX_REPEAT}") from None
    if not 1 <= repeat <= MAX_REPEAT:
        raise pytest.UsageError(f"{source}: {repeat} repetitions; give an integer from 1 to {MAX_REPEAT}")
    return repeat


def check_max_cost(value: str, source: str) -> float:
    """``--tt-max-cost``'s value: a positive amount of US dollars (``5``, ``0.50``, ``$2``)."""
    import math

    try:
        amount = float(value.strip().lstrip("$"))
    except ValueError:
        raise pytest.UsageError(f"{source}: {value!r} is not an amount of US dollars; give e.g. 5 or 0.50") from None
    if not math.isfinite(amount) or amount <= 0:
        raise pytest.UsageError(f"{source}: {value!r}; give a positive amount of US dollars, e.g. 5 or 0.50")
    return amount


def check_prices(models: tuple[str, ...], output: Path, source: str) -> None:
    """A cap needs a price for every model it is to count: an unpriced model's cells would run uncounted."""
    from reports.pricing import find_price_catalogue, load_price_catalogue

    prices = load_price_catalogue(find_price_catalogue(output))
    unpriced = [m for m in models if prices.get(m) is None]
    if unpriced:
        raise pytest.UsageError(f"{source}: no price in models.yaml for {', '.join(unpriced)}, so the cap could not "
                                "count their cells; add a price entry or drop the cap")


def resolve_settings(config: pytest.Config) -> Settings:
    """Settings from the command line, then ``TT_*`` env vars, then defaults.

    Raises:
        pytest.UsageError: a given value is unusable (see the module docstring).
    """
    sandbox, sandbox_from = _opt_from(config, "--tt-sandbox", "TT_SANDBOX")
    sandbox = sandbox or "auto"
    if sandbox not in SANDBOXES:
        raise pytest.UsageError(f"{sandbox_from}: invalid sandbox {sandbox!r}; use {'|'.join(SANDBOXES)}")
    out_value, out_from = _opt_from(config, "--tt-output", "TT_OUTPUT")
    output = Path(out_value or "outputs")
    if not output.is_absolute():
        output = Path(config.invocation_params.dir) / output
    if out_from != "default":
        check_output(output, out_from)
    harness_value, harness_from = _opt_from(config, "--tt-harness", "TT_HARNESS")
    harnesses = _split(harness_value)
    if harnesses:
        check_harnesses(harnesses, harness_from)
    model_value, model_from = _opt_from(config, "--tt-model", "TT_MODEL")
    models = _split(model_value)
    if models:
        check_models(models, model_from)
    tasks, tasks_from = _opt_from(config, "--tt-tasks", "TT_TASKS")
    if tasks:
        check_tasks(Path(tasks), tasks_from)
    repeat_value, repeat_from = _opt_from(config, "--tt-repeat", "TT_REPEAT")
    repeat = check_repeat(str(repeat_value), repeat_from) if repeat_value not in (None, "") else 1
    cost_value, cost_from = _opt_from(config, "--tt-max-cost", "TT_MAX_COST")
    max_cost = check_max_cost(str(cost_value), cost_from) if cost_value not in (None, "") else None
    if max_cost is not None:
        check_prices(models or ("probe",), output, cost_from)
    return Settings(
        harnesses=harnesses,
        models=models or ("probe",),
        sandbox=sandbox,
        output=output,
        judge=_opt(config, "--tt-judge", "TT_JUDGE"),
        rerun=bool(config.getoption("--tt-rerun")) or os.environ.get("TT_RERUN") == "1",
        record_bodies=bool(config.getoption("--tt-record-bodies")),
        tasks_dir=Path(tasks) if tasks else None,
        repeat=repeat,
        max_cost=max_cost,
        estimate=bool(config.getoption("--tt-estimate")),
    )
