"""The run archive (SPEC §10): layout, redacting writer, manifest and safe paths.

One folder per task–model–harness cell::

    <output>/traces/<task>/<model>/<harness>/
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
file a harness or tool left behind, then writes the manifest.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from tracetrial.errors import ArchiveError, PathEscapeError
from tracetrial.files import atomic_write_text
from tracetrial.redact import Redactor

MANIFEST = "manifest.json"


def safe_component(name: str) -> str:
    """A model alias or harness name as a single path component (``reference+x`` stays)."""
    out = "".join(c if c.isalnum() or c in "+-_.=" else "_" for c in name)
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
    model_config = ConfigDict(extra="forbid")
    path: str
    size: int
    sha256: str


class Manifest(BaseModel):
    """``manifest.json``: every file of the run directory but itself."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    schema_: str = Field(default="tt-manifest/1", alias="schema")
    run_id: str
    files: list[ManifestEntry]
    skipped_symlinks: list[str] = Field(default_factory=list)


#: Written by scoring, after the run is sealed: never part of the sealed set.
SCORING_OUTPUTS = ("artifacts/", "evidence/packets/", "evidence/judge/")


def build_manifest(root: Path, run_id: str, *, exclude: tuple[str, ...] = SCORING_OUTPUTS) -> Manifest:
    """Hash every regular file under ``root`` but the ``exclude`` prefixes (symlinks are
    listed, never followed). Re-sealing a scored run (``rescore --renormalize``) thus gives
    the manifest the live run sealed before it was scored."""
    entries: list[ManifestEntry] = []
    links: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            p = Path(dirpath) / name
            rel = p.relative_to(root).as_posix()
            if rel == MANIFEST or rel.startswith(exclude):
                continue
            if p.is_symlink():
                links.append(rel)
                continue
            if p.is_file():
                entries.append(ManifestEntry(path=rel, size=p.stat().st_size, sha256=sha256_file(p)))
        for d in list(dirnames):
            if (Path(dirpath) / d).is_symlink():
                links.append((Path(dirpath) / d).relative_to(root).as_posix())
    return Manifest(run_id=run_id, files=entries, skipped_symlinks=links)


@dataclass(frozen=True)
class ManifestCheck:
    ok: bool
    problems: list[str]


def verify_manifest(root: Path, *, ignore: tuple[str, ...] = SCORING_OUTPUTS) -> ManifestCheck:
    """Compare the run directory with its manifest: missing, changed and unlisted files.

    Scoring outputs written after sealing (``ignore`` prefixes) are not covered.
    """
    path = root / MANIFEST
    if not path.is_file():
        return ManifestCheck(False, [f"{path}: manifest missing"])
    try:
        manifest = Manifest.model_validate_json(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        return ManifestCheck(False, [f"{path}: unreadable manifest: {str(exc).splitlines()[0]}"])
    problems: list[str] = []
    listed = {e.path: e for e in manifest.files}
    for rel, entry in listed.items():
        p = root / rel
        if p.is_symlink() or not p.is_file():
            problems.append(f"{rel}: listed in the manifest but missing")
            continue
        if p.stat().st_size != entry.size or sha256_file(p) != entry.sha256:
            problems.append(f"{rel}: content changed since the manifest was written (sha256 mismatch)")
    current = build_manifest(root, manifest.run_id, exclude=())
    for entry in current.files:
        if entry.path not in listed and not entry.path.startswith(ignore):
            problems.append(f"{entry.path}: not covered by the manifest")
    return ManifestCheck(not problems, problems)


class RunArchive:
    """Writer for one run directory; every write is redacted."""

    def __init__(self, paths: RunPaths, redactor: Redactor):
        self.paths = paths
        self.redactor = redactor

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

    def redact_tree(self) -> list[str]:
        """Redact every regular file in place; return files that changed."""
        changed = []
        for dirpath, _dirs, files in os.walk(self.paths.root):
            for name in files:
                p = Path(dirpath) / name
                if p.is_symlink() or not p.is_file():
                    continue
                data = p.read_bytes()
                new = self.redactor.bytes_(data)
                if new != data:
                    p.write_bytes(new)
                    changed.append(p.relative_to(self.paths.root).as_posix())
        return changed

    def seal(self, run_id: str) -> Manifest:
        """Redact the whole tree, then write ``manifest.json``."""
        self.redact_tree()
        manifest = build_manifest(self.paths.root, run_id)
        self.paths.manifest.write_text(manifest.model_dump_json(indent=1, by_alias=True) + "\n", encoding="utf-8")
        return manifest
