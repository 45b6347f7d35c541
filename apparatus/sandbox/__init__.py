"""Sandbox backends (DESIGN.md §4 "Sandbox"): one interface, selected by ``--tt-sandbox``.

* :class:`LocalSandbox` — identity: the harness runs on this host in temp dirs.
* :class:`BwrapSandbox` — bubblewrap: a root built from an allow-list
  (:mod:`apparatus.sandbox.policy`: system folders and a few ``/etc`` entries, the code
  the harness runs read-only, its scratch — workspace + home — writable), private
  ``/tmp``, ``/dev``, a PID namespace with its own ``/proc``, and **no** network namespace
  so the loopback gateway stays reachable. No host socket, task pack or archive is in it.
* :class:`~apparatus.sandbox.docker_backend.DockerSandbox` — the paper's setup: each cell
  in a container of a locally built image (``tracetrial images build``), each harness
  process started in it by the container's PID 1 (:mod:`apparatus.sandbox.spawner`) and
  nothing it leaves running outliving it.

Under bwrap and docker the code a harness runs stays visible read-only
(:func:`~apparatus.sandbox.code.code_paths`: the checkout's code packages, the Python
installation, the pinned CLIs and every third-party harness) and nothing else of the host
but the system (one policy for both, :mod:`apparatus.sandbox.policy`); the harness's
native records are written in its scratch and copied into the archive afterwards.
:func:`~apparatus.sandbox.choice.choose_backend` decides which backend a cell gets (what ``auto`` means here, what cannot run and why).

``isolation.yaml`` ``network: none`` gives the confined process no network (bwrap
``--unshare-net``, docker ``--network none``); only the gateway port is tunnelled in
(:mod:`apparatus.sandbox.netrelay`). The local backend cannot take the network away and
refuses such cells.

Private truth stays out of the sandbox: simulators (MCP servers) and the simulated
user are started *on the host* through a :class:`~apparatus.sandbox.bridge.HostBridge`
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
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from apparatus.sandbox.bridge import HostBridge
from apparatus.sandbox.code import code_paths
from apparatus.sandbox.policy import ETC_ENTRIES, SYSTEM_PATHS, exposure

__all__ = ["BWRAP_INSTALL", "BwrapSandbox", "Confinement", "DockerSandbox", "LocalSandbox", "Sandbox",
           "SandboxUnavailable", "choose_backend", "code_paths", "confined", "current", "docker_reason",
           "engine_reason", "get_sandbox", "resolve_sandbox"]

BWRAP_INSTALL = "apt-get install -y bubblewrap"


class Sandbox(ABC):
    """One backend. Instances are per cell (they own the host bridge of that cell)."""

    name: str = ""

    @abstractmethod
    def available(self) -> str | None:
        """``None`` when the backend works here, else why not (and how to install it)."""

    @abstractmethod
    def wrap(self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str],
             writable: Sequence[Path], hidden: Sequence[Path], network: str = "loopback",
             forward: Sequence[int] = (), limits: Mapping[str, float | int | None] | None = None,
             nested: bool = False, stdin: bool = False) -> list[str]:
        """The argv that runs ``argv`` inside the sandbox (in ``cwd``, with ``env``).

        ``network``: ``loopback``/``host`` keep the host network; ``none`` removes it, with
        only the loopback ``forward`` ports (the gateway) tunnelled in. ``limits``: the
        task's resource limits (``memory_mb``, ``cpus``, ``pids``), applied where the
        backend can enforce them. ``nested``: the harness runs its own namespace sandbox
        inside (the docker backend then allows namespace creation). ``stdin``: the caller
        talks to the process over its stdin (a JSON-RPC runtime), which must reach it.
        """

    def prepare(self) -> None:
        """Get ready before the cell's clock starts (the docker backend builds its image)."""

    def scratch(self, prefix: str, *, network: str | None = None,
                limits: Mapping[str, float | int | None] | None = None, nested: bool = False) -> Path:
        """A new private folder (0700) for the cell's scratch (workspace, HOME), which the cell
        removes when done. The docker backend hands out the folder its container mounts;
        ``network``, ``limits`` and ``nested`` (as the cell will pass them to :meth:`wrap`)
        let it pick a container already started for a cell like this one."""
        from apparatus import tempstate

        return tempstate.mkdtemp(prefix)

    def reap(self) -> None:
        """Stop whatever the last wrapped command left running outside its process group."""

    def host_command(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None,
                     cwd: Path | None = None, stderr: Path | None = None, name: str = "cmd") -> list[str]:
        """A command that, run inside the sandbox, runs ``argv`` on the host (stdio + exit code)."""
        return list(argv)

    def cleanup(self) -> None:
        """Release what the backend holds for the cell (bridges, host children)."""

    def _tunnel(self, argv: list[str], ports: Sequence[int], directory: Path,
                status: Path | None = None) -> list[str]:
        """``argv`` wrapped so that, inside a network-less sandbox, the loopback ``ports``
        reach the host through unix sockets in ``directory`` (which the sandbox must see)."""
        from apparatus.sandbox import netrelay

        return netrelay.command(self._forwarders(ports, directory), argv, status=status)

    def _forwarders(self, ports: Sequence[int], directory: Path) -> dict[int, Path]:
        """The host ends of the tunnel of each loopback port (unix sockets in ``directory``,
        one per port for the cell's life): port -> socket path."""
        from apparatus.sandbox import netrelay

        forwarders: dict[int, netrelay.HostForwarder] = self.__dict__.setdefault("_forwarders", {})
        for port in ports:
            if port not in forwarders:
                forwarders[port] = netrelay.HostForwarder(directory, port)
        return {p: forwarders[p].path for p in ports}

    def _status_file(self, directory: Path) -> Path:
        """A fresh file for the next process's raw exit status (read by :meth:`exit_code`)."""
        import uuid

        path = Path(directory) / f"{uuid.uuid4().hex[:12]}.status"
        self.__dict__["_last_status"] = path
        return path

    def _with_status(self, argv: list[str], directory: Path) -> list[str]:
        """``argv`` under the wrapper that writes its raw exit status into ``directory``."""
        from apparatus.sandbox import netrelay

        return netrelay.command({}, argv, status=self._status_file(directory))

    def exit_code(self, code: int | None) -> int | None:
        """The wrapped process's own exit status: a signal death (negative) even where the
        sandbox reported it as ``128+N``."""
        path: Path | None = self.__dict__.pop("_last_status", None)
        if path is None or code is None or code <= 128:
            return code
        try:
            raw = int(path.read_text())
        except (OSError, ValueError):
            return code
        return raw if raw < 0 else code

    def _close_tunnels(self) -> None:
        for forwarder in self.__dict__.pop("_forwarders", {}).values():
            forwarder.close()


class LocalSandbox(Sandbox):
    """No isolation: temp dirs only."""

    name = "local"

    def available(self) -> str | None:
        return None

    def wrap(self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str],
             writable: Sequence[Path], hidden: Sequence[Path], network: str = "loopback",
             forward: Sequence[int] = (), limits: Mapping[str, float | int | None] | None = None,
             nested: bool = False, stdin: bool = False) -> list[str]:
        if network == "none":
            raise RuntimeError("the local sandbox cannot take the network away (network: none); "
                               "use --tt-sandbox bwrap or docker")
        return list(argv)


_BWRAP_PROBE: dict[str, str | None] = {}


class BwrapSandbox(Sandbox):
    """bubblewrap, mount + PID namespaces, host network (loopback gateway reachable)."""

    name = "bwrap"

    def __init__(self, binary: str | None = None):
        self.binary = binary or shutil.which("bwrap") or "bwrap"
        self._bridge: HostBridge | None = None
        self._helper_dir: Path | None = None

    def available(self) -> str | None:
        if self.binary in _BWRAP_PROBE:
            return _BWRAP_PROBE[self.binary]
        reason: str | None = None
        if shutil.which(self.binary) is None:
            reason = f"bubblewrap (bwrap) is not installed; install it with: {BWRAP_INSTALL}"
        else:
            # A throwaway instance: wrapping makes a helper folder, removed with it.
            probe = BwrapSandbox(self.binary)
            try:
                proc = subprocess.run(probe.wrap(["true"], cwd=Path("/"), env={}, writable=[], hidden=[]),
                                      capture_output=True, text=True, timeout=30, check=False)
                if proc.returncode != 0:
                    reason = f"bwrap does not run here: {proc.stderr.strip()[:300]}"
            except (OSError, subprocess.TimeoutExpired) as exc:
                reason = f"bwrap does not run here: {exc}"
            finally:
                probe.cleanup()
        _BWRAP_PROBE[self.binary] = reason
        return reason

    def wrap(self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str],
             writable: Sequence[Path], hidden: Sequence[Path], network: str = "loopback",
             forward: Sequence[int] = (), limits: Mapping[str, float | int | None] | None = None,
             nested: bool = False, stdin: bool = False) -> list[str]:
        # The root is an empty tmpfs (bwrap's default); only what the policy allows is
        # mounted into it (apparatus.sandbox.policy): system folders, code, scratch.
        out = [self.binary, "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
               *_system_args(), "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--tmpfs", "/var/tmp"]
        extra = [self._run_dir()] + ([self._bridge.dir] if self._bridge is not None else [])
        seen = exposure([*writable, *extra], hidden)
        # Code first (it may live under /tmp: a checkout cloned into a temp folder), then
        # the covers over hidden folders inside it, then the writable binds, which may sit
        # inside a covered folder.
        for path in seen.code:
            out += ["--ro-bind", str(path), str(path)]
        for path in seen.covered:
            out += ["--tmpfs", str(path)]
        # The confined process runs under a small wrapper that records its raw exit status
        # (bwrap reports a signal death as 128+N, indistinguishable from an exit code).
        if network == "none":
            # Own network namespace (bwrap brings its loopback up); the gateway port is
            # tunnelled in through a unix socket in a bound folder.
            out.append("--unshare-net")
            argv = self._tunnel(list(argv), forward, self._run_dir(), status=self._status_file(self._run_dir()))
        else:
            argv = self._with_status(list(argv), self._run_dir())
        for path in sorted(seen.writable, key=lambda p: len(p.parts)):
            out += ["--bind", str(path), str(path)]
        # The root tmpfs only holds the mount points: nothing may be written beside them.
        out += ["--remount-ro", "/"]
        # env is inherited from bwrap's own environment (run_process passes it to Popen).
        out += ["--chdir", str(Path(cwd).resolve()), "--"]
        return out + list(argv)

    def host_command(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None,
                     cwd: Path | None = None, stderr: Path | None = None, name: str = "cmd") -> list[str]:
        if self._bridge is None:
            self._bridge = HostBridge()
        return self._bridge.expose(argv, env=env, cwd=cwd, stderr=stderr, name=name)

    def _run_dir(self) -> Path:
        """The cell's bound helper folder: exit-status files and the gateway tunnel's socket."""
        if self._helper_dir is None:
            import tempfile

            self._helper_dir = Path(tempfile.mkdtemp(prefix="tt-run-"))
        return self._helper_dir

    def cleanup(self) -> None:
        if self._bridge is not None:
            self._bridge.close()
            self._bridge = None
        self._close_tunnels()
        if self._helper_dir is not None:
            shutil.rmtree(self._helper_dir, ignore_errors=True)
            self._helper_dir = None


def _system_args() -> list[str]:
    """bwrap arguments mounting the host's system folders and ``/etc`` entries of the
    policy (:data:`~apparatus.sandbox.policy.SYSTEM_PATHS`, ``ETC_ENTRIES``) read-only."""
    out: list[str] = []
    for name in SYSTEM_PATHS:
        path = Path(name)
        if path.is_symlink():  # merged /usr: /bin -> usr/bin stays a symlink
            out += ["--symlink", os.readlink(path), name]
        elif path.is_dir():
            out += ["--ro-bind", name, name]
    out += ["--dir", "/etc"]
    for entry in ETC_ENTRIES:
        # -try: an entry missing here (or a dangling link) is skipped, not an error.
        out += ["--ro-bind-try", f"/etc/{entry}", f"/etc/{entry}"]
    return out


# Imported here, not at the top: the docker module subclasses Sandbox defined above, and
# the choice module probes both confining backends.
from apparatus.sandbox.choice import SandboxUnavailable, choose_backend
from apparatus.sandbox.docker_backend import DockerSandbox, docker_reason, engine_reason

BACKENDS: dict[str, type[Sandbox]] = {"local": LocalSandbox, "bwrap": BwrapSandbox, "docker": DockerSandbox}


def get_sandbox(name: str) -> Sandbox:
    """A fresh instance of backend ``name`` (``local`` | ``bwrap`` | ``docker``)."""
    try:
        return BACKENDS[name]()
    except KeyError:
        raise ValueError(f"sandbox backend {name!r} is not implemented (have: {', '.join(BACKENDS)})") from None


def resolve_sandbox(name: str, *, network: str = "loopback") -> Sandbox:
    """``--tt-sandbox`` -> a fresh backend instance, chosen by :func:`choose_backend`
    (raises :class:`SandboxUnavailable` with the reason when none can serve)."""
    return get_sandbox(choose_backend(name, network=network))


@dataclass
class Confinement:
    """A cell's sandbox bound to its writable and hidden paths."""

    sandbox: Sandbox = field(default_factory=LocalSandbox)
    writable: list[Path] = field(default_factory=list)
    hidden: list[Path] = field(default_factory=list)
    network: str = "loopback"
    forward: list[int] = field(default_factory=list)
    limits: dict[str, float | int | None] = field(default_factory=dict)
    nested: bool = False

    def wrap(self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], stdin: bool = False) -> list[str]:
        return self.sandbox.wrap(argv, cwd=cwd, env=env, writable=self.writable, hidden=self.hidden,
                                 network=self.network, forward=self.forward, limits=self.limits,
                                 nested=self.nested, stdin=stdin)


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
