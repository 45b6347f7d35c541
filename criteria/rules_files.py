"""Workspace rules: deliverables after the run, and state against the frozen baseline.

Paths are relative to the run's ``workspace/``; a path that escapes it, goes
through a symlink or is not a regular file never counts as the deliverable
(SPEC §9: evidence paths must resolve to regular files inside the archive).
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
from pydantic import Field, model_validator

from criteria.errors import Unscorable
from criteria.matchers import Cond, as_text, get_path, truth_value
from criteria.registry import Params, RuleContext, RuleOutcome, rule
from tracetrial.archive import resolve_inside
from tracetrial.errors import PathEscapeError
from tracetrial.task import TaskPack


def workspace_file(ctx: RuleContext, rel: str) -> tuple[Path | None, str]:
    """``(path, "")`` for a regular workspace file, else ``(None, why not)``."""
    root = ctx.run.workspace
    if not root.is_dir():
        raise Unscorable("the run archive has no workspace/ folder (apparatus)")
    candidate = root / rel
    if not candidate.exists() and not candidate.is_symlink():
        return None, f"workspace file {rel!r} does not exist"
    try:
        return resolve_inside(root, rel), ""
    except PathEscapeError as exc:
        return None, str(exc)


def truth_keys_check(keys: list[str | None], task: TaskPack) -> list[tuple[str, str]]:
    problems = []
    for key in keys:
        if key is None:
            continue
        try:
            truth_value(task.truth, key)
        except Unscorable as exc:
            problems.append(("truth_key", str(exc)))
    return problems


class PathParams(Params):
    path: str


class FileExistsParams(PathParams):
    min_bytes: int = 0


@rule("file_exists", FileExistsParams)
def file_exists(p: FileExistsParams, ctx: RuleContext) -> RuleOutcome:
    """The workspace holds a regular file at ``path`` of at least ``min_bytes`` bytes."""
    path, why = workspace_file(ctx, p.path)
    if path is None:
        return RuleOutcome.fail(why)
    size = path.stat().st_size
    if size < p.min_bytes:
        return RuleOutcome.fail(f"{p.path} has {size} bytes, fewer than min_bytes={p.min_bytes}")
    return RuleOutcome.ok(f"{p.path} exists ({size} bytes)", (f"file:{p.path}",))


@rule("file_absent", PathParams)
def file_absent(p: PathParams, ctx: RuleContext) -> RuleOutcome:
    """Nothing (no file, folder or symlink) exists at ``path`` in the workspace."""
    if not ctx.run.workspace.is_dir():
        raise Unscorable("the run archive has no workspace/ folder (apparatus)")
    target = ctx.run.workspace / p.path
    if target.exists() or target.is_symlink():
        return RuleOutcome.fail(f"{p.path} exists in the workspace", (f"file:{p.path}",))
    return RuleOutcome.ok(f"{p.path} is absent")


class TextParams(PathParams):
    text: str | None = None
    regex: str | None = None
    truth_key: str | None = None
    ignore_case: bool = False
    negate: bool = False

    @model_validator(mode="after")
    def _one_needle(self) -> TextParams:
        given = [n for n in ("text", "regex", "truth_key") if getattr(self, n) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of 'text', 'regex', 'truth_key' (got {given or 'none'})")
        if self.regex is not None:
            try:
                re.compile(self.regex)
            except re.error as exc:
                raise ValueError(f"regex {self.regex!r} does not compile: {exc}") from None
        return self

    def needle_found(self, haystack: str, truth: Any) -> tuple[bool, str]:
        """``(found, description)``; the description never quotes a truth value."""
        flags = re.IGNORECASE if self.ignore_case else 0
        if self.regex is not None:
            return re.search(self.regex, haystack, flags) is not None, f"regex {self.regex!r}"
        if self.truth_key is not None:
            needle, label = as_text(truth_value(truth, self.truth_key)), f"the truth value {self.truth_key!r}"
        else:
            needle, label = self.text or "", f"text {self.text!r}"
        if self.ignore_case:
            return needle.lower() in haystack.lower(), label
        return needle in haystack, label


def _read_text(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


@rule("file_contains", TextParams, check=lambda p, t: truth_keys_check([p.truth_key], t))
def file_contains(p: TextParams, ctx: RuleContext) -> RuleOutcome:
    """The workspace file at ``path`` contains ``text`` / matches ``regex`` / contains the
    truth.json value at ``truth_key`` (``negate: true`` inverts: it must not)."""
    path, why = workspace_file(ctx, p.path)
    if path is None:
        return RuleOutcome.fail(why)
    found, label = p.needle_found(_read_text(path), ctx.truth)
    ref = (f"file:{p.path}",)
    if found != p.negate:
        verb = "does not contain" if p.negate else "contains"
        return RuleOutcome.ok(f"{p.path} {verb} {label}", ref)
    verb = "contains" if p.negate else "does not contain"
    return RuleOutcome.fail(f"{p.path} {verb} {label}", ref)


class EqualsParams(PathParams):
    text: str | None = None
    truth_key: str | None = None
    strip: bool = True

    @model_validator(mode="after")
    def _one(self) -> EqualsParams:
        if (self.text is None) == (self.truth_key is None):
            raise ValueError("give exactly one of 'text' or 'truth_key'")
        return self


@rule("file_equals", EqualsParams, check=lambda p, t: truth_keys_check([p.truth_key], t))
def file_equals(p: EqualsParams, ctx: RuleContext) -> RuleOutcome:
    """The file's text equals ``text`` or the truth value (surrounding whitespace ignored
    unless ``strip: false``)."""
    path, why = workspace_file(ctx, p.path)
    if path is None:
        return RuleOutcome.fail(why)
    actual = _read_text(path)
    expected = p.text if p.text is not None else as_text(truth_value(ctx.truth, p.truth_key or ""))
    if p.strip:
        actual, expected = actual.strip(), expected.strip()
    label = f"text {p.text!r}" if p.text is not None else f"the truth value {p.truth_key!r}"
    if actual == expected:
        return RuleOutcome.ok(f"{p.path} equals {label}", (f"file:{p.path}",))
    return RuleOutcome.fail(f"{p.path} ({len(actual)} chars) differs from {label}", (f"file:{p.path}",))


def _load_json(ctx: RuleContext, rel: str) -> tuple[Any, str | None]:
    path, why = workspace_file(ctx, rel)
    if path is None:
        return None, why
    try:
        return json.loads(path.read_text(encoding="utf-8")), None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return None, f"{rel} is not valid JSON: {exc}"


class JsonFieldParams(Cond):
    """``path`` and ``field`` plus the condition operators inline (``equals: failed``)."""

    path: str
    field: str


@rule("json_field", JsonFieldParams, check=lambda p, t: truth_keys_check(list(p.truth_keys()), t))
def json_field(p: JsonFieldParams, ctx: RuleContext) -> RuleOutcome:
    """A field of the JSON deliverable satisfies the condition (``equals``, ``contains``,
    ``gte``, ``exists``, ``equals_truth``, ...)."""
    data, why = _load_json(ctx, p.path)
    if why is not None:
        return RuleOutcome.fail(why)
    present, value = get_path(data, p.field)
    ref = (f"file:{p.path}",)
    if p.check(present, value, ctx.truth):
        return RuleOutcome.ok(f"{p.path}:{p.field} satisfies {p.describe()}", ref)
    shown = "absent" if not present else f"{type(value).__name__} value"
    return RuleOutcome.fail(f"{p.path}:{p.field} ({shown}) does not satisfy {p.describe()}", ref)


class SchemaParams(PathParams):
    json_schema: dict[str, Any] | None = None
    schema_file: str | None = None
    expected_output: bool = False

    @model_validator(mode="after")
    def _one(self) -> SchemaParams:
        given = [n for n in ("json_schema", "schema_file") if getattr(self, n) is not None]
        if self.expected_output:
            given.append("expected_output")
        if len(given) != 1:
            raise ValueError("give exactly one of 'json_schema', 'schema_file', 'expected_output: true'")
        if self.json_schema is not None:
            _check_schema(self.json_schema)
        return self


def _check_schema(schema: dict[str, Any]) -> None:
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise ValueError(f"not a valid JSON Schema: {exc.message}") from None


def _resolve_schema(p: SchemaParams, task: TaskPack) -> dict[str, Any]:
    """The schema to apply; a schema file is read from the task pack (snapshot)."""
    if p.json_schema is not None:
        return p.json_schema
    source: Any = p.schema_file
    if p.expected_output:
        entry = next((o for o in task.spec.expected_outputs if o.path == p.path), None)
        if entry is None or entry.schema_ is None:
            raise Unscorable(f"task.yaml declares no expected_outputs schema for {p.path!r}")
        source = entry.schema_
    if isinstance(source, dict):
        return source
    file = Path(task.root) / str(source)
    try:
        schema = json.loads(resolve_inside(Path(task.root), str(source)).read_text(encoding="utf-8"))
    except (PathEscapeError, json.JSONDecodeError, OSError) as exc:
        raise Unscorable(f"schema {file.name!r} of the task cannot be read: {exc}") from None
    if not isinstance(schema, dict):
        raise Unscorable(f"schema {file.name!r} is not a JSON object")
    return schema


def _schema_check(p: SchemaParams, task: TaskPack) -> list[tuple[str, str]]:
    try:
        _check_schema(_resolve_schema(p, task))
    except (Unscorable, ValueError) as exc:
        return [("schema_file" if p.schema_file else "expected_output", str(exc))]
    return []


@rule("json_schema", SchemaParams, check=_schema_check)
def json_schema_rule(p: SchemaParams, ctx: RuleContext) -> RuleOutcome:
    """The JSON deliverable validates against an inline schema (``json_schema``), a schema
    file of the task pack, or the schema task.yaml declares for that output."""
    schema = _resolve_schema(p, ctx.task)
    data, why = _load_json(ctx, p.path)
    if why is not None:
        return RuleOutcome.fail(why)
    validator = jsonschema.validators.validator_for(schema)(schema)
    errors = sorted(validator.iter_errors(data), key=lambda e: (list(e.absolute_path), e.message))
    ref = (f"file:{p.path}",)
    if not errors:
        return RuleOutcome.ok(f"{p.path} validates against its schema", ref)
    shown = "; ".join(f"at /{'/'.join(map(str, e.absolute_path))}: {e.message[:120]}" for e in errors[:3])
    return RuleOutcome.fail(f"{p.path}: {len(errors)} schema error(s): {shown}", ref)


class UnchangedParams(Params):
    paths: list[str] = Field(default_factory=lambda: ["*"])
    allow_new: bool = True


def _tree(root: Path) -> dict[str, str]:
    """``{relative posix path: sha256 or 'symlink'}`` of every file under ``root``."""
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in [*filenames, *(d for d in dirnames if (Path(dirpath) / d).is_symlink())]:
            p = Path(dirpath) / name
            rel = p.relative_to(root).as_posix()
            out[rel] = "symlink" if p.is_symlink() else hashlib.sha256(p.read_bytes()).hexdigest()
    return out


@rule("unchanged_vs_baseline", UnchangedParams)
def unchanged_vs_baseline(p: UnchangedParams, ctx: RuleContext) -> RuleOutcome:
    """Every frozen-baseline file matching ``paths`` (fnmatch; ``*`` crosses folders) is
    still in the workspace with identical bytes; with ``allow_new: false`` no new file
    matching ``paths`` appeared either."""
    if not ctx.run.baseline.is_dir():
        raise Unscorable("the frozen baseline private/baseline/ is missing (apparatus)")
    if not ctx.run.workspace.is_dir():
        raise Unscorable("the run archive has no workspace/ folder (apparatus)")

    def selected(rel: str) -> bool:
        return any(fnmatch.fnmatchcase(rel, pat) for pat in p.paths)

    before = {k: v for k, v in _tree(ctx.run.baseline).items() if selected(k)}
    after = {k: v for k, v in _tree(ctx.run.workspace).items() if selected(k)}
    changed = sorted(k for k in before if after.get(k) != before[k])
    added = [] if p.allow_new else sorted(set(after) - set(before))
    if not changed and not added:
        return RuleOutcome.ok(f"{len(before)} baseline file(s) unchanged")
    problems = [f"{k} {'deleted' if k not in after else 'changed'}" for k in changed]
    problems += [f"{k} added" for k in added]
    more = f" (+{len(problems) - 5} more)" if len(problems) > 5 else ""
    return RuleOutcome.fail("; ".join(problems[:5]) + more, tuple(f"file:{k}" for k in (changed + added)[:5]))


class ArchiveJsonParams(Cond):
    """``file`` (relative to the run directory) and ``field`` plus inline condition operators."""

    file: str
    field: str


@rule("archive_json_field", ArchiveJsonParams, check=lambda p, t: truth_keys_check(list(p.truth_keys()), t))
def archive_json_field(p: ArchiveJsonParams, ctx: RuleContext) -> RuleOutcome:
    """A field of a JSON file of the run archive (e.g. ``evidence/secret_scan.json``)
    satisfies the condition. A missing or unreadable file is unscored (apparatus)."""
    try:
        path = resolve_inside(ctx.run.root, p.file)
        data = json.loads(path.read_text(encoding="utf-8"))
    except (PathEscapeError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise Unscorable(f"archive file {p.file!r} is unusable: {exc}") from None
    present, value = get_path(data, p.field)
    if p.check(present, value, ctx.truth):
        return RuleOutcome.ok(f"{p.file}:{p.field} satisfies {p.describe()}")
    shown = "absent" if not present else f"{type(value).__name__} value"
    return RuleOutcome.fail(f"{p.file}:{p.field} ({shown}) does not satisfy {p.describe()}")
