"""The run archive (SPEC §10): layout, redacting writer, manifest and safe paths.

One folder per task–model–harness cell::

    <output>/traces/<task>/<model>/<harness>/     (<harness>: name, name+variant or name@version)
        result.json                 execution identity, resolved config, history
        events.json                 Trace IR
        summary.json                evidence status and resources
        manifest.json               path, size, SHA-256 of every other file
        native/                     native records (stdout/stderr, session files)
        gateway/                    provider-boundary records
        evidence/                   ledgers, workspace diff, verifier output, packets
        workspace/                  the agent's workspace after the run
        artifacts/llm_judge/combined_score.json   the authoritative score
        private/                    frozen baseline and ledgers (never agent-visible)

The writer redacts every text it writes; :meth:`RunArchive.seal` redacts any
file a harness or tool left behind, then writes the manifest. Scoring then writes the
score and its evidence (:data:`SCORING_OUTPUTS`) and re-seals (:func:`reseal_scoring`),
so the manifest covers every file but itself, the score included. :func:`check_seal`
tells a sealed cell from a half-written, tampered or legacy one; reports, resume, the
gate and ``rescore`` trust only a sealed cell.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from tracetrial.errors import ArchiveError, PathEscapeError
from tracetrial.files import atomic_write_text
from tracetrial.redact import Redactor

MANIFEST = "manifest.json"


#: Folder of the repetitions after the first: ``<output>/repeats/rep-<i>/`` (a whole output each).
REPEATS_DIR = "repeats"


def repetition_root(output: Path, repetition: int) -> Path:
    """The output folder holding repetition ``repetition`` (1-based): ``output`` itself for the
    first, ``output/repeats/rep-<i>`` after it. Each is a complete output (``traces/<task>/<model>/
    <harness>/``), so the gate, ``rescore``, calibration and the exports work on it unchanged."""
    if repetition < 1:
        raise ValueError(f"repetition {repetition} is not 1-based")
    return Path(output) if repetition == 1 else Path(output) / REPEATS_DIR / f"rep-{repetition}"


def repetition_of(run_dir: Path) -> int:
    """Which repetition a cell folder ``<root>/traces/<task>/<model>/<harness>`` holds, from where it
    lies: ``<output>/repeats/rep-<i>/traces/...`` is repetition ``i``, anything else repetition 1."""
    parents = Path(run_dir).parents
    if len(parents) < 5:
        return 1
    root = parents[3]
    index = root.name.removeprefix("rep-")
    if root.parent.name == REPEATS_DIR and root.name.startswith("rep-") and index.isdigit() and int(index) >= 2:
        return int(index)
    return 1


def repetition_roots(output: Path) -> list[tuple[int, Path]]:
    """``(repetition, root)`` of every repetition archived under ``output``, in order (repetition 1
    first, when ``output/traces`` exists). Folders under ``repeats/`` not named ``rep-<i>`` (i ≥ 2)
    are not repetitions and are left alone."""
    output = Path(output)
    out: list[tuple[int, Path]] = [(1, output)] if (output / "traces").is_dir() else []
    base = output / REPEATS_DIR
    if base.is_dir():
        found = []
        for entry in os.scandir(base):
            index = entry.name.removeprefix("rep-")
            if entry.name.startswith("rep-") and index.isdigit() and int(index) >= 2 and entry.is_dir() \
                    and not entry.is_symlink() and (Path(entry.path) / "traces").is_dir():
                found.append((int(index), Path(entry.path)))
        out += sorted(found)
    return out


def safe_component(name: str) -> str:
    """A model alias or harness name as a single path component (``reference+x`` and a
    named version's ``claude_code@2.1.332`` stay as they are)."""
    out = "".join(c if c.isalnum() or c in "+-_.=@" else "_" for c in name)
    if out in ("", ".", ".."):
        raise ArchiveError(f"{name!r} cannot be used as an archive folder name")
    return out


@dataclass(frozen=True)
class RunPaths:
    """Paths of one cell's run directory (see the module docstring for the tree)."""

    root: Path

    @classmethod
    def for_cell(cls, output: Path, task_id: str, model: str, harness: str) -> RunPaths:
        return cls(output / "traces" / safe_component(task_id) / safe_component(model) / safe_component(harness))

    @property
    def result(self) -> Path:
        return self.root / "result.json"

    @property
    def events(self) -> Path:
        return self.root / "events.json"

    @property
    def summary(self) -> Path:
        return self.root / "summary.json"

    @property
    def manifest(self) -> Path:
        return self.root / MANIFEST

    @property
    def native(self) -> Path:
        return self.root / "native"

    @property
    def gateway(self) -> Path:
        return self.root / "gateway"

    @property
    def evidence(self) -> Path:
        return self.root / "evidence"

    @property
    def workspace(self) -> Path:
        return self.root / "workspace"

    @property
    def private(self) -> Path:
        return self.root / "private"

    @property
    def packets(self) -> Path:
        return self.root / "evidence" / "packets"

    @property
    def combined_score(self) -> Path:
        return self.root / "artifacts" / "llm_judge" / "combined_score.json"

    @property
    def scratch(self) -> Path:
        """Per-run HOME / TMPDIR for the harness (archived like the rest)."""
        return self.root / "native" / "home"

    def make(self) -> None:
        for p in (self.native, self.gateway, self.evidence, self.packets, self.private,
                  self.combined_score.parent):
            p.mkdir(parents=True, exist_ok=True)


def resolve_inside(root: Path, relpath: str | os.PathLike[str]) -> Path:
    """Resolve an evidence path; it must be a regular file inside ``root``.

    Raises:
        PathEscapeError: absolute paths, ``..`` escapes, symlinks (anywhere on the
            path) and non-regular files are rejected.
    """
    rel = Path(relpath)
    if rel.is_absolute():
        raise PathEscapeError(f"evidence path {str(relpath)!r} is absolute; use a path relative to {root}")
    root_real = root.resolve()
    current = root
    for part in rel.parts:
        current = current / part
        if current.is_symlink():
            raise PathEscapeError(f"evidence path {str(relpath)!r} goes through a symlink at {current}")
    real = current.resolve()
    if root_real != real and root_real not in real.parents:
        raise PathEscapeError(f"evidence path {str(relpath)!r} escapes the run directory {root}")
    if not real.is_file():
        raise PathEscapeError(f"evidence path {str(relpath)!r} is not a regular file in {root}")
    return real


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class ManifestEntry(BaseModel):
    """One sealed file: its path relative to the run directory, size and SHA-256."""

    model_config = ConfigDict(extra="forbid")
    path: str
    size: int
    sha256: str


#: The seal of this version: every file of the run directory but ``manifest.json`` itself,
#: the score and the scoring evidence included.
MANIFEST_SCHEMA = "tt-manifest/2"
#: Older seals, written before the manifest covered the scoring outputs.
LEGACY_MANIFEST_SCHEMA = "tt-manifest/1"


class Manifest(BaseModel):
    """``manifest.json``: every file of the run directory but itself."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    schema_: str = Field(default=MANIFEST_SCHEMA, alias="schema")
    run_id: str
    files: list[ManifestEntry]
    skipped_symlinks: list[str] = Field(default_factory=list)


#: Written by scoring after the run is sealed. They are sealed too: scoring re-seals the cell
#: (:func:`reseal_scoring`), and these are the only files it may change.
SCORING_OUTPUTS = ("artifacts/", "evidence/packets/", "evidence/judge/")
#: Where the authoritative score lives, relative to the run directory.
COMBINED_SCORE = "artifacts/llm_judge/combined_score.json"


def _walk(root: Path) -> tuple[list[str], list[str]]:
    """(regular files, symlinks) under ``root`` relative to it, sorted walk order, without
    ``manifest.json``; symlinks are listed, never followed."""
    files: list[str] = []
    links: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            p = Path(dirpath) / name
            rel = p.relative_to(root).as_posix()
            if rel == MANIFEST:
                continue
            if p.is_symlink():
                links.append(rel)
            elif p.is_file():
                files.append(rel)
        for d in list(dirnames):
            if (Path(dirpath) / d).is_symlink():
                links.append((Path(dirpath) / d).relative_to(root).as_posix())
    return files, links


def build_manifest(root: Path, run_id: str, *, exclude: tuple[str, ...] = ()) -> Manifest:
    """Hash every regular file under ``root`` but ``manifest.json`` and the ``exclude``
    prefixes (symlinks are listed, never followed)."""
    files, links = _walk(root)
    entries = [ManifestEntry(path=rel, size=(root / rel).stat().st_size, sha256=sha256_file(root / rel))
               for rel in files if not rel.startswith(exclude)]
    return Manifest(run_id=run_id, files=entries, skipped_symlinks=[rel for rel in links if not rel.startswith(exclude)])


#: What :func:`check_seal` found:
#:
#: * ``sealed`` -- every file is listed in ``manifest.json`` with its size and SHA-256;
#: * ``unsealed`` -- no ``manifest.json`` and no score: a cell that never finished (half-written);
#: * ``incomplete`` -- files the manifest lists are missing, nothing else differs (half-written);
#: * ``tampered`` -- a listed file changed, a file is not listed, the manifest is unreadable,
#:   or a score sits in a cell that was never sealed;
#: * ``legacy`` -- a ``tt-manifest/1`` seal whose files verify, but which never covered the
#:   score: the score is not trusted until ``tracetrial rescore`` re-scores and re-seals the cell.
SealState = Literal["sealed", "unsealed", "incomplete", "tampered", "legacy"]
#: States in which scoring may write its outputs and re-seal: the run's files verify.
SCORABLE: tuple[SealState, ...] = ("sealed", "legacy")


@dataclass(frozen=True)
class SealProblem:
    """One difference between a run directory and its manifest (``path`` relative to the run)."""

    path: str
    issue: str

    def __str__(self) -> str:
        return f"{self.path}: {self.issue}"


@dataclass(frozen=True)
class SealCheck:
    """The integrity of one cell's archive (see :data:`SealState`)."""

    state: SealState
    problems: tuple[SealProblem, ...] = ()
    manifest: Manifest | None = None

    @property
    def ok(self) -> bool:
        """Every file is sealed and unchanged: the cell, score included, can be trusted."""
        return self.state == "sealed"

    @property
    def first_file(self) -> str | None:
        """The first file that does not match the manifest (``None`` when sealed)."""
        return self.problems[0].path if self.problems else None

    def describe(self, limit: int = 1) -> str:
        """The first ``limit`` problems in one line (and how many more there are)."""
        shown = "; ".join(str(p) for p in self.problems[:limit])
        more = len(self.problems) - limit
        return shown + (f" (and {more} more)" if more > 0 else "")


_CHANGED = "content changed since the manifest was written (sha256 mismatch)"
_MISSING = "listed in the manifest but missing"
_UNLISTED = "not covered by the manifest"


def check_seal(root: Path) -> SealCheck:
    """Compare a run directory with its ``manifest.json`` (see :data:`SealState`).

    Listed files are checked in manifest order (changed or missing), then files the
    manifest does not list; ``first_file`` is thus the first mismatching file. Pure
    over the files: nothing is written.
    """
    path = root / MANIFEST
    if not path.is_file() or path.is_symlink():
        if (root / COMBINED_SCORE).exists():
            return SealCheck("tampered", (SealProblem(MANIFEST, f"manifest missing, but the cell has a score "
                                                                f"({COMBINED_SCORE}); a score is only written into a sealed cell"),))
        return SealCheck("unsealed", (SealProblem(MANIFEST, "manifest missing (the cell was never sealed)"),))
    try:
        manifest = Manifest.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return SealCheck("tampered", (SealProblem(MANIFEST, f"unreadable manifest: {first}"),))
    legacy = manifest.schema_ == LEGACY_MANIFEST_SCHEMA
    if not legacy and manifest.schema_ != MANIFEST_SCHEMA:
        return SealCheck("tampered", (SealProblem(MANIFEST, f"unknown manifest schema {manifest.schema_!r}"),), manifest)
    changed: list[SealProblem] = []
    missing: list[SealProblem] = []
    listed = {e.path: e for e in manifest.files}
    for rel, entry in listed.items():
        p = root / rel
        if p.is_symlink() or not p.is_file():
            missing.append(SealProblem(rel, _MISSING))
        elif p.stat().st_size != entry.size or sha256_file(p) != entry.sha256:
            changed.append(SealProblem(rel, _CHANGED))
    files, links = _walk(root)
    # A tt-manifest/1 seal never covered the scoring outputs: they are not "unlisted" there
    # (and not trusted either: the state is ``legacy``).
    unsealed_ok: tuple[str, ...] = SCORING_OUTPUTS if legacy else ()
    unlisted = [SealProblem(rel, _UNLISTED) for rel in files
                if rel not in listed and not rel.startswith(unsealed_ok)]
    unlisted += [SealProblem(rel, "symlink " + _UNLISTED) for rel in links
                 if rel not in manifest.skipped_symlinks and not rel.startswith(unsealed_ok)]
    # Keep the manifest's order for listed files, so the first problem is the first mismatch.
    order = {rel: i for i, rel in enumerate(listed)}
    ordered = sorted((*changed, *missing), key=lambda p: order[p.path])
    problems = tuple(ordered + unlisted)
    if changed or unlisted:
        return SealCheck("tampered", problems, manifest)
    if missing:
        return SealCheck("incomplete", problems, manifest)
    if legacy:
        return SealCheck("legacy", (SealProblem(MANIFEST, "a tt-manifest/1 seal, written before the manifest covered the "
                                                          "score: the score is not sealed; `tracetrial rescore` re-scores "
                                                          "and re-seals the cell"),), manifest)
    return SealCheck("sealed", (), manifest)


@dataclass(frozen=True)
class ManifestCheck:
    """:func:`verify_manifest`'s answer: ``ok`` only for a fully sealed, unchanged cell."""

    ok: bool
    problems: list[str]


def verify_manifest(root: Path) -> ManifestCheck:
    """Compare the run directory with its manifest: missing, changed and unlisted files.

    Every file but ``manifest.json`` is covered, the score and scoring evidence included
    (:func:`check_seal` says which kind of failure it is).
    """
    check = check_seal(root)
    return ManifestCheck(check.ok, [str(p) for p in check.problems])


def write_manifest(root: Path, manifest: Manifest) -> None:
    """Write ``manifest.json`` atomically (a reader never sees half a seal)."""
    atomic_write_text(root / MANIFEST, manifest.model_dump_json(indent=1, by_alias=True) + "\n")


def reseal_scoring(root: Path, before: SealCheck) -> Manifest:
    """Re-seal a cell after scoring wrote its outputs, so the score is sealed too.

    ``before`` is :func:`check_seal` of the cell taken before scoring wrote anything. Only a
    cell whose files verified may be re-sealed, and scoring may only have changed
    :data:`SCORING_OUTPUTS`: re-sealing never launders a tampered file into a sealed one.

    Raises:
        ArchiveError: the cell did not verify before scoring, or a file outside the
            scoring outputs changed meanwhile.
    """
    if before.state not in SCORABLE or before.manifest is None:
        raise ArchiveError(f"{root}: refusing to re-seal a {before.state} cell ({before.describe()})")
    current = build_manifest(root, before.manifest.run_id)

    def run_files(m: Manifest) -> tuple[dict[str, tuple[int, str]], list[str]]:
        return ({e.path: (e.size, e.sha256) for e in m.files if not e.path.startswith(SCORING_OUTPUTS)},
                sorted(rel for rel in m.skipped_symlinks if not rel.startswith(SCORING_OUTPUTS)))

    if run_files(current) != run_files(before.manifest):
        old, new = run_files(before.manifest)[0], run_files(current)[0]
        diff = sorted(rel for rel in old.keys() | new.keys() if old.get(rel) != new.get(rel))
        raise ArchiveError(f"{root}: files outside the scoring outputs changed while scoring "
                           f"({', '.join(diff[:3]) or 'symlinks'}); not re-sealed")
    write_manifest(root, current)
    return current


#: Files up to this size are remembered by their bytes between two redaction passes of one
#: archive (comparing them costs nothing); larger ones by their SHA-256 (bounded memory).
_REMEMBER_BYTES = 1 << 20


def _fingerprint(data: bytes) -> bytes | str:
    """What identifies a file's content across two passes: the bytes, or the digest of large ones."""
    return data if len(data) <= _REMEMBER_BYTES else hashlib.sha256(data).hexdigest()


class RunArchive:
    """Writer for one run directory; every write is redacted."""

    def __init__(self, paths: RunPaths, redactor: Redactor):
        self.paths = paths
        self.redactor = redactor
        #: Files the last :meth:`redact_tree` found already redacted (redacting them changed
        #: nothing), by content, with the redactor state it used: :meth:`seal` re-redacts only
        #: files whose content differs, or everything when the redactor has changed since.
        self._clean: dict[str, bytes | str] = {}
        self._clean_state: tuple[frozenset[str], bool] | None = None

    def _redactor_state(self) -> tuple[frozenset[str], bool]:
        return frozenset(self.redactor.values), self.redactor.patterns

    def write_json(self, rel: str, data: Any) -> Path:
        if isinstance(data, BaseModel):
            data = data.model_dump(mode="json", by_alias=True)
        path = self.paths.root / rel
        text = json.dumps(self.redactor.value(data), indent=1, ensure_ascii=False, sort_keys=False)
        atomic_write_text(path, text + "\n")
        return path

    def write_text(self, rel: str, text: str) -> Path:
        path = self.paths.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.redactor.text(text), encoding="utf-8")
        return path

    def copy_in(self, src: Path, rel: str) -> Path:
        """Copy a native file or folder into the archive (redacted at :meth:`seal`)."""
        dest = self.paths.root / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dest, symlinks=True, dirs_exist_ok=True)
        else:
            shutil.copy2(src, dest, follow_symlinks=False)
        return dest

    def _redact_file(self, path: Path, data: bytes) -> bytes:
        """``data`` (the content of ``path``) redacted; the file is rewritten when that changed it."""
        new = self.redactor.bytes_(data)
        if new != data:
            path.write_bytes(new)
        return new

    def redact_tree(self) -> list[str]:
        """Redact every regular file in place; return files that changed."""
        changed = []
        clean: dict[str, bytes | str] = {}
        for dirpath, _dirs, files in os.walk(self.paths.root):
            for name in files:
                p = Path(dirpath) / name
                if p.is_symlink() or not p.is_file():
                    continue
                data = p.read_bytes()
                rel = p.relative_to(self.paths.root).as_posix()
                if self._redact_file(p, data) != data:
                    changed.append(rel)
                else:
                    clean[rel] = _fingerprint(data)
        self._clean, self._clean_state = clean, self._redactor_state()
        return changed

    def seal(self, run_id: str) -> Manifest:
        """Redact the whole tree, then write ``manifest.json``.

        One read of each file does both: a file whose content is what the last
        :meth:`redact_tree` of this archive (same redactor) found already redacted is not
        redacted again — redacting it would give the same bytes — and is hashed as read; any
        other file (new, rewritten since, or all of them in a fresh archive) is redacted first,
        then hashed as written. The manifest is the one :func:`build_manifest` would build after
        :meth:`redact_tree`: the same files (``manifest.json`` aside, which is replaced), sizes
        and digests.
        """
        root = self.paths.root
        clean = self._clean if self._clean_state == self._redactor_state() else {}
        files, links = _walk(root)
        entries = []
        for rel in files:
            path = root / rel
            data = path.read_bytes()
            if clean.get(rel) != _fingerprint(data):
                data = self._redact_file(path, data)
            entries.append(ManifestEntry(path=rel, size=len(data), sha256=hashlib.sha256(data).hexdigest()))
        self._clean, self._clean_state = {}, None  # the manifest now says what the files are
        manifest = Manifest(run_id=run_id, files=entries, skipped_symlinks=links)
        write_manifest(root, manifest)
        return manifest
