"""Launcher of one confined process in a docker container (``python -I -c BOOT ROOT SPEC``).

:class:`~apparatus.sandbox.docker_backend.DockerSandbox` wraps a harness command into this
launcher, so :func:`harnesses.runner.run_process` keeps its contract unchanged: the
launcher creates the container with the docker SDK from the spec file (read, then deleted:
it holds the run's environment, credentials included), streams the container's stdout
and stderr to its own as they arrive, and exits with the container's exit code. On
SIGTERM (the runner's timeout) it kills the container first; a launcher killed outright
leaves the container to :meth:`DockerSandbox.reap`, which removes every container
labelled with the cell. (tini reports a signal death as ``128+N``; the in-container
wrapper's status file lets :meth:`Sandbox.exit_code` restore it.)
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

CELL_LABEL = "org.tracetrial.cell"
OWNER_LABEL = "org.tracetrial.owner"  # "<hostname>:<pid>" of the process that ran the cell


class Bind(BaseModel):
    """A host folder mounted at ``target`` (same path on both sides unless stated)."""

    model_config = ConfigDict(extra="forbid")

    source: str
    target: str
    read_only: bool = True


class DockerRunSpec(BaseModel):
    """Everything needed to start one confined process; written by the sandbox, read here."""

    model_config = ConfigDict(extra="forbid")

    image: str
    name: str
    labels: dict[str, str] = Field(default_factory=dict)
    argv: list[str]
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str
    binds: list[Bind] = Field(default_factory=list)
    tmpfs: list[str] = Field(default_factory=list, description="Paths covered by an empty tmpfs (hidden).")
    network: Literal["host", "none"] = "host"
    memory_mb: int | None = None
    cpus: float | None = None
    pids: int | None = None
    stdin: bool = Field(False, description="Forward the launcher's stdin to the process (JSON-RPC runtimes).")
    nested_namespaces: bool = Field(False, description="Allow user namespaces and a fresh /proc inside.")


def create_args(spec: DockerRunSpec, api: Any) -> dict[str, Any]:
    """Arguments of the low-level ``create_container`` for ``spec`` (``api``: a
    ``docker.APIClient``, used only to build the host config)."""
    import docker.types

    host: dict[str, Any] = {
        "mounts": [docker.types.Mount(b.target, b.source, type="bind", read_only=b.read_only) for b in spec.binds],
        "tmpfs": {p: "size=1m,mode=0755" for p in spec.tmpfs},
        "network_mode": spec.network,
        # tini as PID 1: the harness is not PID 1 (signals behave as on a host) and when it
        # exits the container stops, taking every process it left behind with it.
        "init": True,
    }
    if spec.memory_mb:
        host["mem_limit"] = f"{spec.memory_mb}m"
    if spec.cpus:
        host["nano_cpus"] = int(spec.cpus * 1e9)
    if spec.pids:
        host["pids_limit"] = spec.pids
    if spec.nested_namespaces:
        host["security_opt"] = ["seccomp=unconfined", "apparmor=unconfined"]
    host_config = api.create_host_config(**host)
    if spec.nested_namespaces:
        # What `docker run --security-opt systempaths=unconfined` sends: a nested sandbox
        # cannot mount a fresh /proc while docker's masks cover parts of it.
        host_config["MaskedPaths"] = []
        host_config["ReadonlyPaths"] = []
    return {"image": spec.image, "command": spec.argv, "name": spec.name, "labels": spec.labels,
            "environment": spec.env, "working_dir": spec.cwd, "stdin_open": spec.stdin,
            # detach=False + stdin_open: docker-py sets StdinOnce, so our EOF closes its stdin.
            "detach": not spec.stdin,
            "tty": False, "host_config": host_config}


def _stream(chunks: Any) -> None:
    out, err = sys.stdout.buffer, sys.stderr.buffer
    for chunk_out, chunk_err in chunks:
        if chunk_out:
            out.write(chunk_out)
            out.flush()
        if chunk_err:
            err.write(chunk_err)
            err.flush()


def _attach_interactive(client: Any, container: Any) -> threading.Thread:
    """Attach stdin too: our stdin is copied to the process (half-closed at EOF, which
    closes its stdin), its multiplexed stdout/stderr frames are split back to ours."""
    from docker.utils.socket import frames_iter

    from apparatus.sandbox.netrelay import stdin_to

    # No "logs": attached before the start, nothing is missed (and logs+stdin stalls the stream).
    sock = client.api.attach_socket(container.id, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1})
    raw = getattr(sock, "_sock", sock)

    def drain() -> None:
        out, err = sys.stdout.buffer, sys.stderr.buffer
        for stream, data in frames_iter(sock, tty=False):  # type: ignore[no-untyped-call]
            target = err if stream == 2 else out
            target.write(data)
            target.flush()

    threading.Thread(target=stdin_to, args=(raw,), name="tt-docker-stdin", daemon=True).start()
    return threading.Thread(target=drain, name="tt-docker-out", daemon=True)


def _die_with_parent() -> None:
    """SIGTERM this launcher (so it kills its container) when the process that ran the cell
    dies — what bwrap's ``--die-with-parent`` does for the bwrap backend."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: the owner sweep (DockerSandbox) still removes orphans later
    if os.getppid() == 1:
        os.kill(os.getpid(), signal.SIGTERM)


def main(spec_path: str) -> int:
    import docker
    import docker.errors

    path = Path(spec_path)
    try:
        spec = DockerRunSpec.model_validate(json.loads(path.read_text()))
    finally:
        path.unlink(missing_ok=True)
    client = docker.from_env(timeout=600)
    try:
        created = client.api.create_container(**create_args(spec, client.api))
        container = client.containers.get(created["Id"])
    except docker.errors.DockerException as exc:
        print(f"tracetrial docker sandbox: could not create the container: {exc}", file=sys.stderr)
        return 125

    def stop(signum: int, _frame: Any) -> None:
        try:
            container.kill()
        except docker.errors.DockerException:
            pass

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    _die_with_parent()
    try:
        # Attach (the request is sent here) before start, so not a byte of early output is lost.
        if spec.stdin:
            streamer = _attach_interactive(client, container)
        else:
            chunks = container.attach(stream=True, logs=True, demux=True, stdout=True, stderr=True)
            streamer = threading.Thread(target=_stream, args=(chunks,), daemon=True)
        streamer.start()
        try:
            container.start()
        except docker.errors.DockerException as exc:
            print(f"tracetrial docker sandbox: could not start the container: {exc}", file=sys.stderr)
            return 125
        status = container.wait()
        streamer.join(timeout=10)
        return int(status.get("StatusCode", 125))
    finally:
        try:
            container.remove(force=True)
        except docker.errors.DockerException:
            pass


def run(spec_path: str) -> None:
    """Entry point (see :data:`BOOT`): exit with the container's exit code."""
    code = main(spec_path)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


#: ``python -I -c BOOT <code root> <spec>``: imports this module from the code root the
#: cell runs (not whatever an installed package points at) and runs :func:`run`.
BOOT = "import sys; sys.path.insert(0, sys.argv[1]); from apparatus.sandbox.docker_run import run; run(sys.argv[2])"
