"""Sandbox backends (DESIGN.md §4 "Sandbox"): one interface, selected by ``--tt-sandbox``.

* :class:`LocalSandbox` — identity: the harness runs on this host in temp dirs.
* :class:`BwrapSandbox` — bubblewrap: the host filesystem read-only, the run's scratch
  (workspace + home) and the harness's native-record folder writable, ``--tmpfs`` over
  hidden paths (the archive output folder, the task pack), private ``/tmp``, ``/dev``,
  a PID namespace with its own ``/proc``, and **no** network namespace so the loopback
  gateway stays reachable.
* docker — not implemented yet (issue 11, later session).

Private truth stays out of the sandbox: simulators (MCP servers) and the simulated
user are started *on the host* through a :class:`~tracetrial.sandbox.bridge.HostBridge`
(:meth:`Sandbox.host_command`); the harness only sees a relay and a unix socket.

:func:`current` / :func:`confined` carry the cell's sandbox to
:func:`harnesses.runner.run_process` through a context variable, so adapters need no
change to be confined.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import shutil
import subprocess
import sys
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tracetrial.sandbox.bridge import HostBridge

__all__ = ["BWRAP_INSTALL", "BwrapSandbox", "Confinement", "LocalSandbox", "Sandbox", "confined", "current",
           "get_sandbox", "resolve_sandbox"]

BWRAP_INSTALL = "apt-get install -y bubblewrap"


class Sandbox(ABC):
    """One backend. Instances are per cell (they own the host bridge of that cell)."""

    name: str = ""

    @abstractmethod
    def available(self) -> str | None:
        """``None`` when the backend works here, else why not (and how to install it)."""

    @abstractmethod
    def wrap(self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str],
             writable: Sequence[Path], hidden: Sequence[Path]) -> list[str]:
        """The argv that runs ``argv`` inside the sandbox (in ``cwd``, with ``env``)."""

    def host_command(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None,
                     cwd: Path | None = None, stderr: Path | None = None, name: str = "cmd") -> list[str]:
        """A command that, run inside the sandbox, runs ``argv`` on the host (stdio + exit code)."""
        return list(argv)

    def cleanup(self) -> None:
        """Release what the backend holds for the cell (bridges, host children)."""


class LocalSandbox(Sandbox):
    """No isolation: temp dirs only."""

    name = "local"

    def available(self) -> str | None:
        return None

    def wrap(self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str],
             writable: Sequence[Path], hidden: Sequence[Path]) -> list[str]:
        return list(argv)


_BWRAP_PROBE: dict[str, str | None] = {}


def _code_paths() -> list[Path]:
    """This checkout (the relay module, the pinned CLIs), ``$TT_TOOLS_DIR`` and the Python
    installation: what a confined harness executes, read-only."""
    import tracetrial

    paths = {Path(tracetrial.__file__).resolve().parents[1], Path(sys.prefix).resolve(),
             Path(sys.base_prefix).resolve(), Path(sys.executable).resolve().parent}
    tools = os.environ.get("TT_TOOLS_DIR")
    if tools:
        paths.add(Path(tools).resolve())
    return sorted((p for p in paths if p.exists() and p != Path("/")), key=lambda p: len(p.parts))


class BwrapSandbox(Sandbox):
    """bubblewrap, mount + PID namespaces, host network (loopback gateway reachable)."""

    name = "bwrap"

    def __init__(self, binary: str | None = None):
        self.binary = binary or shutil.which("bwrap") or "bwrap"
        self._bridge: HostBridge | None = None

    def available(self) -> str | None:
        if self.binary in _BWRAP_PROBE:
            return _BWRAP_PROBE[self.binary]
        reason: str | None = None
        if shutil.which(self.binary) is None:
            reason = f"bubblewrap (bwrap) is not installed; install it with: {BWRAP_INSTALL}"
        else:
            try:
                proc = subprocess.run(self.wrap(["true"], cwd=Path("/"), env={}, writable=[], hidden=[]),
                                      capture_output=True, text=True, timeout=30, check=False)
                if proc.returncode != 0:
                    reason = f"bwrap does not run here: {proc.stderr.strip()[:300]}"
            except (OSError, subprocess.TimeoutExpired) as exc:
                reason = f"bwrap does not run here: {exc}"
        _BWRAP_PROBE[self.binary] = reason
        return reason

    def wrap(self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str],
             writable: Sequence[Path], hidden: Sequence[Path]) -> list[str]:
        out = [self.binary, "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
               "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
        # Code the confined harness runs stays visible (read-only) even when it lives under
        # /tmp, e.g. a checkout cloned into a temp folder; hidden paths inside it follow.
        for path in _code_paths():
            out += ["--ro-bind", str(path), str(path)]
        # Hidden first (tmpfs over them), then writable binds, which may sit inside /tmp or
        # inside a hidden folder (the run's native/ records under the archive).
        for path in _existing(hidden):
            out += ["--tmpfs", str(path)]
        binds = list(_existing(writable))
        if self._bridge is not None:
            binds.append(self._bridge.dir)
        for path in sorted(set(binds), key=lambda p: len(p.parts)):
            out += ["--bind", str(path), str(path)]
        # env is inherited from bwrap's own environment (run_process passes it to Popen).
        out += ["--chdir", str(Path(cwd).resolve()), "--"]
        return out + list(argv)

    def host_command(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None,
                     cwd: Path | None = None, stderr: Path | None = None, name: str = "cmd") -> list[str]:
        if self._bridge is None:
            self._bridge = HostBridge()
        return self._bridge.expose(argv, env=env, cwd=cwd, stderr=stderr, name=name)

    def cleanup(self) -> None:
        if self._bridge is not None:
            self._bridge.close()
            self._bridge = None


def _existing(paths: Sequence[Path]) -> Iterator[Path]:
    seen: set[Path] = set()
    for p in paths:
        r = Path(p).resolve()
        if r.exists() and r not in seen and r != Path("/"):
            seen.add(r)
            yield r


BACKENDS: dict[str, type[Sandbox]] = {"local": LocalSandbox, "bwrap": BwrapSandbox}


def get_sandbox(name: str) -> Sandbox:
    """A fresh instance of backend ``name`` (``local`` | ``bwrap``)."""
    try:
        return BACKENDS[name]()
    except KeyError:
        raise ValueError(f"sandbox backend {name!r} is not implemented (have: {', '.join(BACKENDS)})") from None


def resolve_sandbox(name: str) -> Sandbox:
    """``--tt-sandbox`` → a backend. ``auto``: docker (not implemented yet, skipped), then
    bwrap when it runs here, else local. An explicit unavailable backend raises
    :class:`RuntimeError` with the reason."""
    if name == "auto":
        box = BwrapSandbox()
        return box if box.available() is None else LocalSandbox()
    if name == "docker":
        raise RuntimeError("docker backend not implemented yet; use --tt-sandbox bwrap or local")
    chosen = get_sandbox(name)
    reason = chosen.available()
    if reason:
        raise RuntimeError(reason)
    return chosen


@dataclass
class Confinement:
    """A cell's sandbox bound to its writable and hidden paths."""

    sandbox: Sandbox = field(default_factory=LocalSandbox)
    writable: list[Path] = field(default_factory=list)
    hidden: list[Path] = field(default_factory=list)

    def wrap(self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str]) -> list[str]:
        return self.sandbox.wrap(argv, cwd=cwd, env=env, writable=self.writable, hidden=self.hidden)


_CURRENT: contextvars.ContextVar[Confinement | None] = contextvars.ContextVar("tt_sandbox", default=None)


def current() -> Confinement | None:
    """The confinement of the cell running in this context (``None``: run unconfined)."""
    return _CURRENT.get()


@contextlib.contextmanager
def confined(conf: Confinement | None) -> Iterator[Confinement | None]:
    """Within the block, :func:`harnesses.runner.run_process` wraps through ``conf``."""
    token = _CURRENT.set(conf)
    try:
        yield conf
    finally:
        _CURRENT.reset(token)
