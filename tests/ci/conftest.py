"""Hand-built run archives for the gate tests (real archive layout, synthetic verdicts)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from reports.synthetic import make_combined, seal, write_cell
from tracetrial.results import ExceptionInfo

T, F, U = True, False, None


def write_run(output: Path, task: str, harness: str, harness_outcomes: Mapping[str, bool | None],
              agent_outcomes: Mapping[str, bool | None], *, version: str | None = "1.0", model: str = "probe",
              admitted: bool = True, protocol: str = "probe") -> Path:
    """One scored cell folder under ``output`` whose identity carries ``version``."""
    cs = make_combined(task, model, harness, harness_outcomes, agent_outcomes, admitted=admitted,
                       protocol=protocol)
    cs.identity.harness_version = version
    return write_cell(output, cs).root


def write_unscored(output: Path, task: str, harness: str, *, version: str | None = "1.0",
                   model: str = "probe") -> Path:
    """A cell folder without ``combined_score.json`` (an apparatus error)."""
    paths = write_cell(output, None, task_id=task, model=model, harness=harness, status="apparatus_error",
                       exception=ExceptionInfo(type="GatewayStartError", message="proxy did not answer",
                                               origin="apparatus"))
    text = paths.result.read_text(encoding="utf-8").replace('"harness_version":null',
                                                            f'"harness_version":"{version}"')
    paths.result.write_text(text, encoding="utf-8")
    seal(paths.root)  # written that way by the run, not changed after its seal
    return paths.root


def baseline_corpus(output: Path, *, codex_version: str = "1.0") -> Path:
    """The corpus a baseline is recorded from (2 harnesses, 3 tasks)."""
    write_run(output, "E1-a-001", "codex", {"H1": T, "H2": T}, {"A1": T}, version=codex_version)
    write_run(output, "E1-b-001", "codex", {"H1": F, "H2": T}, {"A1": U}, version=codex_version)
    write_run(output, "O1-a-001", "codex", {"H1": T}, {"A1": T, "A2": T}, version=codex_version)
    write_run(output, "E1-a-001", "reference", {"H1": T, "H2": T}, {"A1": T})
    write_run(output, "E1-b-001", "reference", {"H1": T, "H2": T}, {"A1": T})
    return output
