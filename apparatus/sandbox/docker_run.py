"""What a cell's container is made of: :class:`DockerRunSpec` and the engine's create call.

:class:`~apparatus.sandbox.docker_backend.DockerSandbox` creates one container per cell from
such a spec (its mounts, network, limits); its PID 1 keeper starts each harness process in it
(:mod:`apparatus.sandbox.spawner`).
"""

from __future__ import annotations

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
    stdin: bool = Field(False, description="Open the process's stdin to an attach (closed when it detaches).")
    nested_namespaces: bool = Field(False, description="Allow user namespaces and a fresh /proc inside.")
    init: bool = Field(True, description="docker's init (tini) as PID 1; off when the command is its own init.")
    auto_remove: bool = Field(False, description="The engine removes the container once it stops.")


def create_args(spec: DockerRunSpec, api: Any) -> dict[str, Any]:
    """Arguments of the low-level ``create_container`` for ``spec`` (``api``: a
    ``docker.APIClient``, used only to build the host config)."""
    import docker.types

    host: dict[str, Any] = {
        "mounts": [docker.types.Mount(b.target, b.source, type="bind", read_only=b.read_only) for b in spec.binds],
        "tmpfs": {p: "size=1m,mode=0755" for p in spec.tmpfs},
        "network_mode": spec.network,
        # tini as PID 1 unless the command is an init of its own (the cell keeper): the
        # harness is never PID 1, so signals behave as on a host.
        "init": spec.init,
        "auto_remove": spec.auto_remove,
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
