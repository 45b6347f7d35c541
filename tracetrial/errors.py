"""Error hierarchy of the kernel. Messages name the place and the remedy."""

from __future__ import annotations


class TraceTrialError(Exception):
    """Base class of every error TraceTrial raises on purpose."""


class TraceFileError(TraceTrialError):
    """An ``events.json`` (or a single event) is malformed."""


class TaskPackError(TraceTrialError):
    """A task pack is malformed. Carries the file, the field and the fix."""

    def __init__(self, file: str, problem: str, *, field: str | None = None, fix: str | None = None):
        self.file = file
        self.field = field
        self.problem = problem
        self.fix = fix
        where = f"{file}" + (f", field '{field}'" if field else "")
        text = f"{where}: {problem}"
        if fix:
            text += f" (fix: {fix})"
        super().__init__(text)


class TaskPackErrors(TraceTrialError):
    """Every problem found in one pack (``tracetrial validate`` lists them all)."""

    def __init__(self, task_dir: str, errors: list[TaskPackError]):
        self.task_dir = task_dir
        self.errors = errors
        lines = "\n".join(f"  - {e}" for e in errors)
        super().__init__(f"task pack {task_dir} is invalid ({len(errors)} problem(s)):\n{lines}")


class ArchiveError(TraceTrialError):
    """The run archive is inconsistent: a path escapes it, a file was tampered with, ..."""


class PathEscapeError(ArchiveError):
    """An evidence path does not resolve to a regular file inside the run directory."""


class ApparatusError(TraceTrialError):
    """The apparatus (runner, gateway, probe, recorder) failed; never a harness defect."""
