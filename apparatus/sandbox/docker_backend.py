"""The docker backend (the paper's setup): each cell in a container of its own.

Per cell, one container of the local harnesses image (:mod:`apparatus.sandbox.images`),
labelled ``org.tracetrial.cell=<cell>``, is started at the cell's first harness process and
every harness process of the cell is started in it by the container's PID 1, the cell
keeper (:mod:`apparatus.sandbox.spawner`): the launcher :meth:`DockerSandbox.wrap` returns
hands the keeper the command and its own stdio over a unix socket in the cell's private
folder — no ``docker exec`` (~0.06 s of CLI and engine per process) and no Python
wrapper inside the container per process. The lifetime rule of the bwrap backend's PID
namespace holds all the same — nothing a harness process leaves running survives it into
the next turn: when the cell's last running process ends, the keeper kills everything else
in the container before it reports the exit status; a timed-out process's container is
removed (:meth:`DockerSandbox.reap`) and the next process gets a fresh one. So a verdict does
not depend on the backend.

The keeper also exits — and the engine removes the container (``auto_remove``) — when the
process that owns the cell dies, since that process holds the keeper's stdin open (an
attach) and the kernel closes it with the process; the cell's cleanup closes it the same
way and does not wait for the removal.

Each container mounts one cell folder (0700) read-write at its host path: the keeper's
socket, the host bridge's and the tunnel's sockets and, for a cell, its scratch
(:meth:`DockerSandbox.scratch`: workspace and HOME). So a container does not depend on
anything of a cell but that folder's path, and containers for cells to come are started
ahead of need with fresh folders (:func:`_warm_next`: same image, code mounts, covers, network,
limits and nesting as a cell that ran), one per *shape* (network, limits, nesting: Codex's
cells nest namespaces, Claude Code's do not, and a session interleaves them), at most
:data:`WARM_SHAPES`. A cell takes over the one of its shape (:meth:`DockerSandbox.scratch`),
so its first process does not wait for a container's create and start; a cell whose first
process needs another container after all starts its own. Starting them, and ending a
finished cell's container, is work nothing waits for: it is done while a next cell waits on
its harness (:mod:`apparatus.background`), not while a cell is scored. A waiting container
dies with the process that started it, like any other.

Inside a container:

* the pinned harness CLIs come from the image (:data:`~apparatus.sandbox.images.IMAGE_TOOLS_DIR`;
  the host's install path in argv and environment is rewritten to it, and hidden); a named
  version (``<tools>/versions/<name>@<version>/``, never in the image) is mounted read-only at
  its host path like the rest of the code, and its paths are not rewritten;
* what of the host is mounted follows the one policy of both confining backends
  (:mod:`apparatus.sandbox.policy`): the run's scratch (workspace, HOME) read-write **at
  its host path**, so native records name the same paths under every backend and the
  normalizers need no per-backend translation (``/workspace`` is the same workspace, for
  people poking around in a container); the benchmark's own code (the checkout's code
  packages, the Python runtime) and every third-party harness's
  (:func:`~apparatus.sandbox.code.code_paths`) read-only — and nothing else: no task
  pack, archive, host ``/tmp`` or docker socket is mounted, and the archive's
  ``native/`` folder is written by the apparatus after the process ends;
* network ``host`` (loopback gateway reachable) or, for ``network: none`` tasks, no
  network at all with only the gateway port tunnelled in (:mod:`apparatus.sandbox.netrelay`;
  the keeper opens the port inside, for the container's life);
* the task's resource limits (memory, CPUs, processes) as cgroup limits, on the cell's
  container (the cell's processes run one after another, so each gets what it got before);
* for a harness that sandboxes its own commands with namespaces (Codex's bundled
  bubblewrap, ``HarnessCapabilities.nested_sandbox``) the container may create user
  namespaces and mount a fresh ``/proc`` (seccomp and AppArmor unconfined, ``/proc`` not
  masked), as on a host; without it Codex's every command fails inside docker and the cell
  would measure the container, not the harness. Other harnesses keep docker's defaults.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import shutil
import socket
import sys
import tempfile
import threading
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from apparatus import background
from apparatus.sandbox import Sandbox, spawner
from apparatus.sandbox.code import code_paths
from apparatus.sandbox.docker_run import CELL_LABEL, OWNER_LABEL, Bind, DockerRunSpec, create_args
from apparatus.sandbox.images import IMAGE_TOOLS_DIR, ImageError, Images, build_images
from apparatus.sandbox.policy import exposure
from apparatus.tools import tools_dir, versions_dir

DOCKER_INSTALL = "apt-get install -y docker.io debootstrap && (dockerd >/var/log/dockerd.log 2>&1 &)"

#: The keeper's socket, in the cell's folder (0700 on the host, mounted at its host path).
KEEPER_SOCKET = "keeper.sock"


def keeper_argv(socket_path: Path, forwards: Mapping[int, Path] | None = None) -> list[str]:
    """PID 1 of a cell's container: the spawner's keeper (:mod:`apparatus.sandbox.spawner`) on
    the image's own ``python3``, from this checkout's file (mounted read-only like all the
    code the harness runs). Its last argument marks it for the sweep's guard."""
    out = ["/usr/bin/python3", "-I", "-S", str(Path(spawner.__file__).resolve()), "keeper",
           "--socket", str(socket_path)]
    for port, path in sorted((forwards or {}).items()):
        out += ["--forward", f"{port}={path}"]
    return [*out, spawner.KEEPER_MARK]


_ENGINE: dict[str, str | None] = {}
_IMAGES: dict[str, Images] = {}
_FAILED: dict[str, str] = {}
_IMAGES_LOCK = threading.Lock()


def engine_reason() -> str | None:
    """``None`` when a docker engine answers here, else why not (cached per process)."""
    if "reason" in _ENGINE:
        return _ENGINE["reason"]
    reason: str | None = None
    try:
        import docker

        client = docker.from_env(timeout=5)
        client.ping()
        client.close()
    except Exception as exc:  # noqa: BLE001 - any failure means "no engine"; the text says which
        reason = (f"no docker engine answers ({type(exc).__name__}: {str(exc)[:200]}); "
                  f"install and start one with: {DOCKER_INSTALL}")
    _ENGINE["reason"] = reason
    return reason


def docker_reason() -> str | None:
    """``None`` when the docker backend can run cells here: an engine answers and the image
    exists or can be built (debootstrap present). Else why not (cached per process)."""
    if "docker" in _ENGINE:
        return _ENGINE["docker"]
    # No docker command-line client is needed: the SDK starts the cell's container and its
    # keeper starts each process (apparatus.sandbox.spawner).
    reason = engine_reason()
    if reason is None and shutil.which("debootstrap") is None:
        import docker

        from apparatus.sandbox.images import image_tags

        try:
            docker.from_env(timeout=10).images.get(image_tags().base)
        except Exception:  # noqa: BLE001 - not there (or not readable): it would need building
            reason = ("the docker sandbox image is not built and debootstrap, needed to build it, is missing; "
                      "install it with: apt-get install -y debootstrap, then run: tracetrial images build")
    _ENGINE["docker"] = reason
    return reason


def ensure_images(log: Any = None) -> Images:
    """The harnesses image for the current pins, built once per process (and cached by tag)."""
    with _IMAGES_LOCK:
        if "error" in _FAILED:
            # A failed build is not retried cell after cell (debootstrap alone takes ~30 s).
            raise ImageError(_FAILED["error"])
        if "images" not in _IMAGES:
            import docker

            client = docker.from_env(timeout=600)
            sweep_orphans(client)
            try:
                _IMAGES["images"] = build_images(client, log=log)
            except Exception as exc:
                _FAILED["error"] = f"{type(exc).__name__}: {exc}"
                raise
        return _IMAGES["images"]


class DockerSandbox(Sandbox):
    """Docker backend; see the module docstring."""

    name = "docker"

    def __init__(self) -> None:
        self.cell = uuid.uuid4().hex[:12]
        self.images: Images | None = None
        self._tools = tools_dir().resolve()
        self._versions = versions_dir().resolve()
        self._counter = itertools.count(1)
        # Host only (never mounted): the launchers' job files (they hold the environment)
        # and the exit-status files the launchers write.
        self._private = Path(tempfile.mkdtemp(prefix="tt-docker-"))
        os.chmod(self._private, 0o700)
        (self._private / "status").mkdir()
        # The cell's folder (0700, mounted read-write at its host path): the keeper's socket,
        # the bridge's and the tunnel's sockets and — when the cell asks for it
        # (:meth:`scratch`) — the cell's scratch. One folder per container, so a container
        # can be started before the cell that uses it exists (:func:`_warm_next`).
        self._home: Path | None = None
        self._home_given = False
        self._bridge: Any = None
        self._client: Any = None
        # The cell's running container: its id, the spec it was made from (a process that
        # needs other mounts, network or limits gets a new one) and the owner's attach.
        self._container: str | None = None
        self._container_spec: str | None = None
        self._spec: DockerRunSpec | None = None
        self._keepalive: Any = None
        self._lock = threading.Lock()

    # -- Sandbox API --------------------------------------------------------------------
    def available(self) -> str | None:
        return docker_reason()

    def prepare(self) -> None:
        """Build or reuse the image before the cell's clock starts (raises :class:`ImageError`)."""
        if self.images is None:
            self.images = ensure_images()

    def scratch(self, prefix: str, *, network: str | None = None,
                limits: Mapping[str, float | int | None] | None = None, nested: bool = False) -> Path:
        """The cell's folder itself: its scratch is mounted with the container made for it,
        possibly before the cell began (a warm container of the cell's shape — ``network``,
        ``limits``, ``nested`` — :func:`_warm_next`). The cell removes it when it is done with
        it (the sandbox's cleanup leaves it)."""
        shape = None if network is None else _shape(network, limits, nested)
        with self._lock:
            home = self._ensure_home(shape)
            self._home_given = True
        return home

    def _ensure_home(self, shape: str | None) -> Path:
        """The cell's folder: a warm container's of ``shape`` (taken over with its container
        and cell id; ``None``: of any shape) or a new one. Called under ``self._lock``."""
        if self._home is None:
            warm = _claim_warm(shape)
            if warm is not None:
                self.cell, self._home = warm.cell, warm.home
                self._container, self._container_spec, self._keepalive = warm.cid, warm.key, warm.attach
                self._spec = warm.spec
                next(self._counter)
                # One for the next cell of this shape, started while this one runs its harness.
                background.later(functools.partial(_warm_next, warm.spec, warm.home))
            else:
                from apparatus import tempstate

                self._home = tempstate.mkdtemp("tt-cell-")
        return self._home

    def wrap(self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], writable: Sequence[Path],
             hidden: Sequence[Path], network: str = "loopback", forward: Sequence[int] = (),
             limits: Mapping[str, float | int | None] | None = None, nested: bool = False,
             stdin: bool = False) -> list[str]:
        self.prepare()
        assert self.images is not None
        argv = [self._image_path(a) for a in argv]
        env = {k: self._image_path(v) for k, v in env.items()}
        with self._lock:
            home = self._ensure_home(_shape(network, limits, nested))
        # The cell's folder holds the sockets (keeper, bridge, tunnel) and usually the scratch:
        # one mount, the same for every cell but for its path.
        outside = [p for p in writable if not Path(p).resolve().is_relative_to(home)]
        # The same policy as bwrap (apparatus.sandbox.policy); the image stands in for the
        # host's system folders, and its copy of the CLIs for the host's install.
        seen = exposure([*outside, home], hidden, code=[p for p in code_paths() if p != self._tools])
        binds = [Bind(source=str(p), target=str(p), read_only=True) for p in seen.code]
        binds += [Bind(source=str(p), target=str(p), read_only=False) for p in seen.writable]
        workspace = Path(cwd).resolve()
        if workspace.name == "workspace" and any(workspace.is_relative_to(p) for p in seen.writable):
            binds.append(Bind(source=str(workspace), target="/workspace", read_only=False))
        # The host install of the CLIs is covered where a mount would show it, so the
        # image's copy is the one that runs.
        mounted = [Path(b.target) for b in binds]
        covered = [*seen.covered, *[p for p in [self._tools] if any(p.is_relative_to(m) for m in mounted)
                                    and p not in mounted]]
        if network == "none" and forward:
            (home / "net").mkdir(exist_ok=True)
        forwards = self._forwarders(forward, home / "net") if network == "none" else {}
        spec = DockerRunSpec(
            image=self.images.harnesses, name=f"tt-{self.cell}-{next(self._counter)}",
            labels={CELL_LABEL: self.cell, OWNER_LABEL: _owner()},
            argv=keeper_argv(home / KEEPER_SOCKET, forwards), env={}, cwd="/",
            binds=binds, tmpfs=[str(p) for p in covered], **_shape_fields(network, limits, nested),
            stdin=True, init=False, auto_remove=True,
        )
        self._cell_container(spec)
        # The job holds the environment (credentials included): a 0600 file in the 0700
        # private folder, deleted by the launcher as it reads it; never a command line.
        job = {"socket": str(home / KEEPER_SOCKET), "argv": argv, "env": dict(env), "cwd": str(workspace),
               "stdin": stdin, "status": str(self._status_file(self._private / "status"))}
        job_file = self._private / f"job-{uuid.uuid4().hex[:12]}.json"
        fd = os.open(job_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump(job, fh)
        return [sys.executable, "-I", "-S", "-c", spawner.BOOT, str(Path(spawner.__file__).resolve()), str(job_file)]

    def _cell_container(self, spec: DockerRunSpec) -> str:
        """The id of the cell's running container for ``spec``'s mounts, network and limits,
        started (with its keeper attached) when there is none or it was made for others."""
        import docker.errors

        key = _key(spec)
        with self._lock:
            if self._client is None:
                self._client = _engine_client()
            if self._container is not None and key == self._container_spec and self._running(self._container):
                return self._container
            # Made for other mounts, network or limits (or ended): ended in the background.
            self._drop_container(wait=False)
            assert self._home is not None
            # The next keeper names its socket once it listens: until then a launcher waits.
            (self._home / KEEPER_SOCKET).unlink(missing_ok=True)
            try:
                cid, self._keepalive = _start(self._client.api, spec)
            except docker.errors.DockerException as exc:
                raise RuntimeError(f"tracetrial docker sandbox: could not start the cell's container: {exc}") from exc
            self._container, self._container_spec, self._spec = cid, key, spec
            # This cell found no container of its shape waiting (a session's first cell of the
            # shape, or one that did not fit): the next cell of this shape would find none either,
            # since this cell's own ending starts one only when the next cell's turns begin —
            # after that cell has asked for its container. Started now, while this cell's
            # harness runs (what the background's idle would release: the apparatus waits on it).
            if _reusable(spec, self._home):
                _warm_next(spec, self._home)
            return cid

    def _running(self, cid: str) -> bool:
        try:
            return bool(self._client.api.inspect_container(cid)["State"]["Running"])
        except Exception:  # noqa: BLE001 - gone (removed, or its keeper ended): not running
            return False

    def _drop_container(self, *, wait: bool = True) -> None:
        """Forget the cell's current container and end it: removed at once (``wait``: the
        timed-out path, whose leftovers must be gone before it returns), or by closing the
        owner's attach, which ends the keeper and so the container, which the engine then
        removes (``auto_remove``) while the cell goes on."""
        cid, self._container, self._container_spec = self._container, None, None
        sock, self._keepalive = self._keepalive, None
        self._spec = None
        if wait and cid is not None and self._client is not None:
            try:
                self._client.api.remove_container(cid, force=True)
            except Exception:  # noqa: BLE001, S110 - already gone (auto-removed)
                pass
        if sock is not None:
            _hang_up(sock)

    def host_command(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None,
                     cwd: Path | None = None, stderr: Path | None = None, name: str = "cmd") -> list[str]:
        from apparatus.sandbox.bridge import HostBridge

        with self._lock:
            home = self._ensure_home(None)
        if self._bridge is None:
            self._bridge = HostBridge(home / "bridge")
        return list(self._bridge.expose(argv, env=env, cwd=cwd, stderr=stderr, name=name))

    def reap(self) -> None:
        """Remove the cell's container now (a timed-out or interrupted process: what it left
        running goes with its container; the next process of the cell gets a fresh one).
        The sandbox started every container of its cell and drops each one it replaces, so
        there is nothing to list."""
        with self._lock:
            self._drop_container()

    def cleanup(self) -> None:
        """End the cell's container without waiting for its removal (see :meth:`_drop_container`),
        and start one for a next cell (:func:`_warm_next`) when this one's fits a cell's layout —
        both in the background, while a next cell waits on its harness (:mod:`apparatus.background`)."""
        with self._lock:
            template = self._spec if self._home is not None and _reusable(self._spec, self._home) else None
            home = self._home
            attach, self._keepalive = self._keepalive, None
            self._drop_container(wait=False)
        # Ending the container (the engine's teardown) and starting one for a next cell cost
        # the machine ~0.2 s of CPU that nothing waits for: done while the next cell runs its
        # harness, not while this one is scored. Its processes are gone already (the keeper's
        # sweep), so it only idles until then.
        background.later(functools.partial(_retire, attach, template, home))
        self._client = None  # the thread's client stays open for its next cell (_engine_client)
        if self._bridge is not None:
            self._bridge.close()
            self._bridge = None
        self._close_tunnels()
        shutil.rmtree(self._private, ignore_errors=True)
        if home is not None:
            if self._home_given:
                (home / KEEPER_SOCKET).unlink(missing_ok=True)  # the scratch itself is the cell's
            else:
                shutil.rmtree(home, ignore_errors=True)

    # -- helpers ------------------------------------------------------------------------
    def _image_path(self, value: str) -> str:
        host = str(self._tools)
        if host not in value or str(self._versions) in value:
            # A named version is not in the image: it runs from its read-only mount at its host path.
            return value
        return value.replace(host, IMAGE_TOOLS_DIR)


_CLIENTS = threading.local()


def _engine_client() -> Any:
    """This thread's engine client (one per thread and process, kept across cells): a new one
    costs a cell ~10-20 ms (its connection and the API version query) on its first process."""
    import docker

    cached = getattr(_CLIENTS, "client", None)
    if cached is None or cached[0] != os.getpid():  # a forked child's copy shares the parent's socket
        cached = (os.getpid(), docker.from_env(timeout=120))
        _CLIENTS.client = cached
    return cached[1]


def _key(spec: DockerRunSpec) -> str:
    """What a container must have been made from to serve ``spec`` (all of it but its name)."""
    return spec.model_dump_json(exclude={"name"})


def _start(api: Any, spec: DockerRunSpec) -> tuple[str, Any]:
    """Create and start ``spec``'s container; its id and the owner's attach to its keeper."""
    created = api.create_container(**create_args(spec, api))
    cid = str(created["Id"])
    # Attached before the start: the keeper's stdin stays open while we hold this.
    attach = api.attach_socket(cid, params={"stdin": 1, "stream": 1})
    api.start(cid)
    return cid, attach


#: Start the next cell's container when a cell ends (:func:`_warm_next`). Off: each cell
#: starts its own at its first process.
WARM_NEXT = True
#: How many started containers may wait at once, one per shape (the most recently used
#: shapes): a session interleaves harnesses whose cells need different containers (Codex's
#: nests namespaces, Claude Code's does not), and a cell takes only a container of its own
#: shape, so one per shape keeps every cell's first process off the engine.
WARM_SHAPES = 2
#: How long a cell waits for a container of its shape that is being started before it
#: starts its own (a start under way is further along than a new one).
WARM_WAIT_S = 5.0


@dataclass
class _Warm:
    """A started container waiting for the next cell, with its cell folder and cell id."""

    cell: str
    home: Path
    cid: str
    key: str
    spec: DockerRunSpec
    attach: Any
    shape: str


#: The waiting containers, least recently started first; one per shape.
_WARM: list[_Warm] = []
#: The container being started per shape.
_WARMING: dict[str, threading.Thread] = {}
_WARM_LOCK = threading.Lock()


def _shape_fields(network: str, limits: Mapping[str, float | int | None] | None, nested: bool) -> dict[str, Any]:
    """The :class:`DockerRunSpec` fields a cell's container is made for besides its folder and
    the code it mounts: its network, its resource limits and whether it nests namespaces."""
    lim = dict(limits or {})
    return {"network": "none" if network == "none" else "host", "memory_mb": _int(lim.get("memory_mb")),
            "cpus": _float(lim.get("cpus")), "pids": _int(lim.get("pids")), "nested_namespaces": bool(nested)}


def _shape(network: str, limits: Mapping[str, float | int | None] | None, nested: bool) -> str:
    """The shape a cell asks for (what :meth:`DockerSandbox.wrap` will build its spec from)."""
    return json.dumps(_shape_fields(network, limits, nested))


def _spec_shape(spec: DockerRunSpec) -> str:
    """The shape ``spec``'s container was made for (equal to :func:`_shape` of what it was made from)."""
    return json.dumps({name: getattr(spec, name) for name in _shape_fields("host", None, False)})


def _reusable(spec: DockerRunSpec | None, home: Path) -> bool:
    """Whether ``spec``'s container fits any cell laid out in its cell folder ``home``: its
    only writable mounts are in that folder (a cell's scratch and sockets)."""
    return spec is not None and all(Path(b.source).is_relative_to(home) for b in spec.binds if not b.read_only)


def _warm_next(template: DockerRunSpec, home: Path) -> None:
    """Start, in the background, a container like ``template`` (same image, code mounts,
    covers, network, limits, nesting) for a new cell folder, unless one of its shape waits or
    is being started: a next cell of this process of that shape takes it over
    (:meth:`DockerSandbox._ensure_home`). At most :data:`WARM_SHAPES` wait, one per shape. A
    waiting container dies with this process like any cell's container (the keeper's
    attach)."""
    if not WARM_NEXT:
        return
    shape = _spec_shape(template)
    with _WARM_LOCK:
        busy = _WARMING.get(shape)
        if (busy is not None and busy.is_alive()) or any(w.shape == shape for w in _WARM):
            return
        thread = threading.Thread(target=_make_warm, args=(template, home), name="tt-docker-warm", daemon=True)
        _WARMING[shape] = thread
        thread.start()


def _make_warm(template: DockerRunSpec, old_home: Path) -> None:
    from apparatus import tempstate

    try:
        import docker

        home = tempstate.mkdtemp("tt-cell-")
        cell = uuid.uuid4().hex[:12]
        # The template names the old cell's folder in its mounts, keeper socket and tunnel
        # paths: the same container for another folder is the same text with that folder.
        text = template.model_dump_json().replace(str(old_home), str(home))
        spec = DockerRunSpec.model_validate_json(text)
        spec.labels = {**spec.labels, CELL_LABEL: cell}
        spec.name = f"tt-{cell}-1"
        for bind in spec.binds:
            if Path(bind.source).is_relative_to(home):
                Path(bind.source).mkdir(parents=True, exist_ok=True)  # e.g. the /workspace alias
        client = docker.from_env(timeout=120)
        try:
            cid, attach = _start(client.api, spec)
        finally:
            client.close()  # the attach keeps its own connection
    except Exception:  # noqa: BLE001 - only a head start: the next cell starts its own
        return
    warm = _Warm(cell, home, cid, _key(spec), spec, attach, _spec_shape(spec))
    with _WARM_LOCK:
        stale = [w for w in _WARM if w.shape == warm.shape]
        rest = [w for w in _WARM if w.shape != warm.shape]
        room = max(WARM_SHAPES - 1, 0)
        if len(rest) > room:  # the least recently started shapes give way
            stale += rest[:len(rest) - room]
            rest = rest[len(rest) - room:]
        _WARM[:] = [*rest, warm]
    for old in stale:
        _discard(old)


def _claim_warm(shape: str | None) -> _Warm | None:
    """A waiting container of ``shape`` (``None``: the latest of any), taken; when one of that
    shape is being started, waits for it (at most :data:`WARM_WAIT_S`). ``None``: there is none."""
    for attempt in (0, 1):
        with _WARM_LOCK:
            for i in range(len(_WARM) - 1, -1, -1):
                if shape is None or _WARM[i].shape == shape:
                    return _WARM.pop(i)
            busy = _WARMING.get(shape) if shape is not None else None
        if attempt or busy is None or not busy.is_alive():
            return None
        busy.join(WARM_WAIT_S)
    return None


def _retire(attach: Any, template: DockerRunSpec | None, home: Path | None) -> None:
    """End a finished cell's container (its owner's attach) and start a container for a next
    cell like it (:func:`_warm_next`)."""
    if attach is not None:
        _hang_up(attach)
    if template is not None and home is not None:
        _warm_next(template, home)


def _discard(warm: _Warm) -> None:
    _hang_up(warm.attach)
    shutil.rmtree(warm.home, ignore_errors=True)


def _hang_up(attach: Any) -> None:
    """End the owner's attach: the keeper's stdin ends, so the keeper does. Shut down, not
    only closed: the SDK's HTTP response still holds the connection, and a close of this
    one handle would leave it open (and the container running) until garbage collection."""
    raw = getattr(attach, "_sock", attach)  # a SocketIO around the socket, or the socket
    for target in (raw, attach):
        try:
            if target is raw:
                raw.shutdown(socket.SHUT_RDWR)
            else:
                target.close()
        except (OSError, AttributeError):
            pass


def _owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True)
class Listed:
    """One container as the engine's list call returned it."""

    id: str
    name: str
    labels: dict[str, str]


def listed(client: Any, label: str) -> list[Listed]:
    """Containers (running or not) with ``label``, from the list call alone. The SDK's
    ``containers.list`` inspects each container after listing it and raises ``NotFound`` when
    one was removed in between (a cell ending at that moment): a sparse listing has no race."""
    out = []
    for c in client.containers.list(all=True, sparse=True, filters={"label": label}):
        names = c.attrs.get("Names") or [c.id]
        out.append(Listed(id=c.id, name=str(names[0]).lstrip("/"), labels=dict(c.attrs.get("Labels") or {})))
    return out


def sweep_orphans(client: Any) -> list[str]:
    """Remove containers of cells whose owning process (on this host) is gone — left by a
    session that was killed outright. Returns their names."""
    host = socket.gethostname()
    removed = []
    for c in listed(client, CELL_LABEL):
        owner_host, _, pid = str(c.labels.get(OWNER_LABEL, "")).rpartition(":")
        if owner_host != host or not pid.isdigit() or Path(f"/proc/{pid}").exists():
            continue
        try:
            client.api.remove_container(c.id, force=True)
            removed.append(c.name)
        except Exception:  # noqa: BLE001, S110 - another sweeper won the race
            pass
    return removed


def _int(v: float | None) -> int | None:
    return None if v is None else int(v)


def _float(v: float | None) -> float | None:
    return None if v is None else float(v)


__all__ = ["DOCKER_INSTALL", "DockerSandbox", "ImageError", "docker_reason", "engine_reason", "ensure_images",
           "sweep_orphans"]
