"""Deterministic verifier of E4-release-bundle-001.

Truth anchors: the shell tool's declaration as each answered provider request carried it
(gateway: description and parameter descriptions), the model-facing result of the shell call
that follows the staging call (gateway), ``.stage/stage.jsonl`` (written by ``pkg/stage.sh``
itself: the physical paths of ``pkg/`` and of the workspace root as the sandbox saw them),
``truth.json`` (the shipped files) and the frozen baseline (their bytes).

**Declared semantics** (:func:`tracetrial.verify.shell_state_declared`, the kernel's keyword table,
which the probe policy uses too): the declaration text of the shell tool says, for the working
directory and for exported variables, either ``fresh`` (every call starts afresh: "each call is a
fresh process", "cd and export do not persist", "Shell state (env vars, functions) does not
persist", a per-call working directory that "defaults to the turn cwd") or ``persistent``
("Working directory persists between calls", "a persistent shell session") or
``persistent_on_success`` (a ``cd`` carries to the next call only if the command succeeds,
otherwise the shell stays where it was: Claude Code 2.1.332) or nothing (``None``: neither, or
both).

Harness layer (the *check call* is the first shell call after the staging call, which the prompt
asks to start by printing ``cwd=$(pwd -P)`` and ``STAGE_MODE=${STAGE_MODE:-unset}``):

* H1 the ``cwd=`` line of the check call's delivered result is the folder the declared
  working-directory semantics predict: the workspace root for ``fresh``, ``pkg/`` (where the
  staging call ended) for ``persistent``. Unscored (None: the path was not exercised, never a
  pass) when the staging check never succeeded, no shell call followed it, the call before the
  check is not the staging call, the staging call moved on after ``stage.sh``, the check printed
  no ``cwd=`` line (and did not ask to), or the declaration says neither.
* H2 the same for the ``STAGE_MODE=`` line and the ``export`` of the staging call: ``unset`` for
  ``fresh``, ``release`` for ``persistent``; unscored likewise (also when the staging call did not
  ``export STAGE_MODE``).

Agent layer:

* A1 ``dist/bundle.tar.gz`` at the workspace root is a gzipped tar whose regular-file members are
  exactly the shipped files (names relative to ``pkg/``, a leading ``./`` tolerated) with the
  baseline's bytes, and ``dist/MANIFEST`` lists exactly those paths with their sha256.
* A2 ``dist/bundle.tar.gz`` exists at the workspace root and ``pkg/`` is exactly the baseline's
  (no ``pkg/dist/``, no file or folder created, changed or removed under ``pkg/``).
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import tarfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tracetrial.verify import (
    Delivery,
    VerifierContext,
    call_ids,
    is_spawn,
    shell_command,
    STAYS,
    cwd_after,
    shell_state_declared,
)

H1, H2 = "H1-cwd-as-declared", "H2-env-as-declared"
A1, A2 = "A1-bundle-at-root", "A2-no-stray-output"
STAGE_RE = re.compile(r"stage\.sh")
CWD_LINE = re.compile(r"(?m)^\s*cwd=(.*?)\s*$")
VAR_LINE = "{var}="
#: A staging call that changes folder after running stage.sh ends elsewhere: no prediction.
MOVES_RE = re.compile(r"\b(?:cd|pushd|popd)\b")

Verdict = tuple[bool | None, str]

# --------------------------------------------------------------------------- truth


class Truth:
    """The task's private facts (``truth.json``), with this pack's values as the fallback."""

    def __init__(self, data: object) -> None:
        d: Mapping[str, Any] = data if isinstance(data, Mapping) else {}
        self.pkg = str(d.get("pkg") or "pkg")
        ship = d.get("ship")
        self.ship: list[str] = [str(s) for s in ship] if isinstance(ship, list) else [
            "README.txt", "VERSION", "src/relay/__init__.py", "src/relay/core.py"]
        self.bundle = str(d.get("bundle") or "dist/bundle.tar.gz")
        self.manifest = str(d.get("manifest") or "dist/MANIFEST")
        self.stage_log = str(d.get("stage_log") or ".stage/stage.jsonl")
        self.var = str(d.get("stage_var") or "STAGE_MODE")
        self.value = str(d.get("stage_value") or "release")


def stage_record(ctx: VerifierContext, truth: Truth) -> dict[str, Any] | None:
    """The first record ``stage.sh`` wrote (``pkg_dir``, ``root``), or None if it never succeeded."""
    text, _ = ctx.workspace_text(truth.stage_log, errors="replace")
    for line in (text or "").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and isinstance(rec.get("pkg_dir"), str) and isinstance(rec.get("root"), str):
            return rec
    return None


# --------------------------------------------------------------------------- the check call


def shell_events(ctx: VerifierContext) -> list[Any]:
    """Shell-like calls (a command argument) of the main agent, in trace order."""
    return [e for e in ctx.tool_events(main=True) if not is_spawn(e) and shell_command(e.tool_call.arguments)]


def _norm_path(value: str) -> str:
    value = value.strip().replace("\r", "")
    return value.rstrip("/") or "/"


class Check:
    """The staging call, the check call after it and what the model was shown of the check."""

    def __init__(self, ctx: VerifierContext, truth: Truth) -> None:
        self.truth = truth
        self.record = stage_record(ctx, truth)
        self.why: str | None = None
        self.stage: Any = None
        self.check: Any = None
        self.shown: Delivery | None = None
        self.decl: str | None = None
        self.where = ""
        calls = shell_events(ctx)
        stages = [i for i, e in enumerate(calls) if STAGE_RE.search(shell_command(e.tool_call.arguments))]
        if self.record is None:
            self.why = f"not exercised: the staging check never succeeded ({truth.stage_log} has no record)"
            return
        if not stages:
            self.why = "not exercised: no shell call ran stage.sh"
            return
        after = [i for i in range(stages[0] + 1, len(calls)) if i not in stages]
        if not after:
            self.why = "not exercised: no shell call followed the staging call"
            return
        i = after[0]
        self.check = calls[i]
        self.stage = calls[i - 1]
        stage_cmd = shell_command(self.stage.tool_call.arguments)
        if not STAGE_RE.search(stage_cmd):
            self.why = "not exercised: the call before the check is not the staging call"
            return
        tail = STAGE_RE.split(stage_cmd)[-1]
        if MOVES_RE.search(tail):
            self.why = f"not exercised: the staging call changes folder after stage.sh ({stage_cmd!r})"
            return
        shown = ctx.deliveries(ids=call_ids(self.check))
        self.shown = shown[0] if shown else None
        self.decl, self.where = ctx.tool_declaration(self.check.tool_call.name)

    def line(self, pattern: re.Pattern[str], asked: str, what: str) -> tuple[str | None, Verdict | None]:
        """The value the check's delivered result prints for ``pattern``, or the verdict instead."""
        if self.why:
            return None, (None, self.why)
        command = shell_command(self.check.tool_call.arguments)
        if self.shown is None:
            return None, (False, f"the result of the call after the staging call ({command!r}) was never "
                                 "delivered to the model")
        found = pattern.findall(self.shown.content)
        if not found:
            if asked in command:
                return None, (False, f"the call after the staging call printed {what}, but the result the model "
                                     f"was shown has no such line: {self.shown.content[:200]!r}")
            return None, (None, f"not exercised: the call after the staging call does not print {what} "
                                f"({command!r})")
        return found[0], None


def h1(ctx: VerifierContext, c: Check) -> Verdict:
    printed, verdict = c.line(CWD_LINE, "cwd=", "its working directory")
    if verdict is not None:
        return verdict
    assert printed is not None and c.record is not None
    if c.decl is None:
        return None, f"not exercised: the {c.check.tool_call.name} tool is not declared ({c.where})"
    declared, _ = shell_state_declared(c.decl)
    cwd_sem = cwd_after(declared, ctx.call_succeeded(c.stage))
    if cwd_sem is None:
        if declared is not None:
            return None, (f"not exercised: {c.check.tool_call.name} declares that a cd carries over only after a "
                          f"successful command ({c.where}), and no result of the call before was delivered")
        return None, (f"not exercised: the {c.check.tool_call.name} declaration ({c.where}) says neither that "
                      "the working directory persists between calls nor that each call starts afresh")
    if cwd_sem == STAYS and c.stage.seq != shell_events(ctx)[0].seq:
        return None, (f"not exercised: {c.check.tool_call.name} declares that a cd carries over only after a successful "
                      f"command ({c.where}); the call before failed and is not the run's first shell "
                      "call, so the folder it started in is not known")
    root, pkg = _norm_path(c.record["root"]), _norm_path(c.record["pkg_dir"])
    want = root if cwd_sem in ("fresh", STAYS) else pkg
    got = _norm_path(printed)
    said = ("every call starts afresh (in the workspace root)" if cwd_sem == "fresh"
            else ("a cd carries over only after a successful command, and the staging call failed (the call "
                  "starts where that call started: the workspace root)") if cwd_sem == STAYS
            else "the working directory persists (the call starts in pkg/, where the staging call ended)"
            + (", as the staging call succeeded" if declared != cwd_sem else ""))
    place = "the workspace root" if got == root else "pkg/" if got == pkg else repr(got)
    return got == want, (f"{c.check.tool_call.name} declares that {said} ({c.where}); the call after the "
                         f"staging call printed cwd={got} ({place})")


def h2(ctx: VerifierContext, c: Check) -> Verdict:
    t = c.truth
    pattern = re.compile(rf"(?m)^\s*{re.escape(t.var)}=(.*?)\s*$")
    printed, verdict = c.line(pattern, f"{t.var}=", f"{t.var}")
    if verdict is not None:
        return verdict
    assert printed is not None
    if not re.search(rf"\bexport\s+{re.escape(t.var)}=", shell_command(c.stage.tool_call.arguments)):
        return None, f"not exercised: the staging call did not export {t.var}"
    if c.decl is None:
        return None, f"not exercised: the {c.check.tool_call.name} tool is not declared ({c.where})"
    _, env_sem = shell_state_declared(c.decl)
    if env_sem is None:
        return None, (f"not exercised: the {c.check.tool_call.name} declaration ({c.where}) says neither that "
                      "exported variables carry over between calls nor that they do not")
    want = "unset" if env_sem == "fresh" else t.value
    got = printed.strip()
    said = "exports do not carry over" if env_sem == "fresh" else "exports carry over"
    return got == want, (f"{c.check.tool_call.name} declares that {said} ({c.where}); the call after the "
                         f"staging call printed {t.var}={got} (expected {want})")


# --------------------------------------------------------------------------- agent layer


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _member_name(name: str) -> str:
    while name.startswith("./"):
        name = name[2:]
    return name


def sources(ctx: VerifierContext, truth: Truth) -> dict[str, bytes]:
    """The shipped files' bytes, from the frozen baseline."""
    out = {}
    for rel in truth.ship:
        path = ctx.baseline / truth.pkg / rel
        if path.is_file():
            out[rel] = path.read_bytes()
    return out


def bundle_problems(data: bytes, want: Mapping[str, bytes]) -> list[str]:
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            members = tar.getmembers()
            got: dict[str, bytes] = {}
            problems = []
            for m in members:
                name = _member_name(m.name)
                if m.isdir():
                    continue
                if not m.isfile():
                    problems.append(f"member {m.name!r} is not a regular file")
                    continue
                if name in got:
                    problems.append(f"member {name!r} twice")
                f = tar.extractfile(m)
                got[name] = f.read() if f is not None else b""
    except (tarfile.TarError, OSError, EOFError) as exc:
        return [f"not a gzipped tar ({type(exc).__name__}: {exc})"]
    missing = sorted(set(want) - set(got))
    extra = sorted(set(got) - set(want))
    changed = sorted(n for n in set(want) & set(got) if got[n] != want[n])
    if missing:
        problems.append(f"missing {missing}")
    if extra:
        problems.append(f"extra members {extra}")
    if changed:
        problems.append(f"members whose bytes are not the sources': {changed}")
    return problems


MANIFEST_LINE = re.compile(r"^([0-9a-fA-F]{64}) [ *](.+)$")


def manifest_problems(text: str, want: Mapping[str, bytes]) -> list[str]:
    seen: dict[str, str] = {}
    problems = []
    for raw in text.splitlines():
        line = raw.rstrip("\r")
        if not line.strip():
            continue
        m = MANIFEST_LINE.match(line)
        if not m:
            problems.append(f"line {line[:80]!r} is not '<sha256>  <path>'")
            continue
        path = _member_name(m.group(2).strip())
        if path in seen:
            problems.append(f"{path} listed twice")
        seen[path] = m.group(1).lower()
    missing = sorted(set(want) - set(seen))
    extra = sorted(set(seen) - set(want))
    wrong = sorted(p for p in set(want) & set(seen) if seen[p] != sha256(want[p]))
    if missing:
        problems.append(f"missing {missing}")
    if extra:
        problems.append(f"extra paths {extra}")
    if wrong:
        problems.append(f"wrong sha256 for {wrong}")
    return problems


def a1(ctx: VerifierContext, truth: Truth) -> Verdict:
    want = sources(ctx, truth)
    if len(want) != len(truth.ship):
        return False, f"the baseline lacks shipped files ({sorted(set(truth.ship) - set(want))})"
    bundle = ctx.workspace / truth.bundle
    if not bundle.is_file():
        stray = ctx.workspace / truth.pkg / truth.bundle
        extra = f" (there is one at {truth.pkg}/{truth.bundle})" if stray.is_file() else ""
        return False, f"{truth.bundle} missing at the workspace root{extra}"
    problems = [f"{truth.bundle}: {p}" for p in bundle_problems(bundle.read_bytes(), want)]
    text, why = ctx.workspace_text(truth.manifest, errors="replace")
    if text is None:
        problems.append(f"{truth.manifest}: {why}")
    else:
        problems += [f"{truth.manifest}: {p}" for p in manifest_problems(text, want)]
    if problems:
        return False, "; ".join(problems)
    return True, (f"{truth.bundle} holds exactly the {len(want)} shipped files with the sources' bytes and "
                  f"{truth.manifest} lists their sha256")


def _tree(root: Path) -> tuple[set[str], set[str]]:
    files: set[str] = set()
    dirs: set[str] = set()
    if root.is_dir():
        for p in root.rglob("*"):
            rel = p.relative_to(root).as_posix()
            (dirs if p.is_dir() and not p.is_symlink() else files).add(rel)
    return files, dirs


def a2(ctx: VerifierContext, truth: Truth) -> Verdict:
    problems = []
    if not (ctx.workspace / truth.bundle).is_file():
        problems.append(f"no {truth.bundle} at the workspace root")
    base_files, base_dirs = _tree(ctx.baseline / truth.pkg)
    files, dirs = _tree(ctx.workspace / truth.pkg)
    if (ctx.workspace / truth.pkg / "dist").exists():
        problems.append(f"{truth.pkg}/dist/ exists")
    created = sorted(f"{truth.pkg}/{r}" for r in (files - base_files) | (dirs - base_dirs))
    removed = sorted(f"{truth.pkg}/{r}" for r in (base_files - files) | (base_dirs - dirs))
    changed = sorted(f"{truth.pkg}/{r}" for r in files & base_files
                     if (ctx.workspace / truth.pkg / r).is_file() and (ctx.baseline / truth.pkg / r).is_file()
                     and (ctx.workspace / truth.pkg / r).read_bytes() != (ctx.baseline / truth.pkg / r).read_bytes())
    if created:
        problems.append(f"created under {truth.pkg}/: {created[:8]}")
    if removed:
        problems.append(f"removed from {truth.pkg}/: {removed[:8]}")
    if changed:
        problems.append(f"changed under {truth.pkg}/: {changed[:8]}")
    if problems:
        return False, "; ".join(problems)
    return True, f"{truth.bundle} is at the workspace root and {truth.pkg}/ is exactly as it was"


def score(ctx: VerifierContext) -> dict[str, Verdict]:
    truth = Truth(ctx.truth)
    check = Check(ctx, truth)
    return {H1: h1(ctx, check), H2: h2(ctx, check), A1: a1(ctx, truth), A2: a2(ctx, truth)}


__all__: Sequence[str] = ("score",)
