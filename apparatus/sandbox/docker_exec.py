"""Launcher of one confined process in its cell's container (``python -I -c BOOT FILE SPEC``).

:class:`~apparatus.sandbox.docker_backend.DockerSandbox` starts one container per cell and
wraps each harness command into this launcher, so :func:`harnesses.runner.run_process` keeps
its contract unchanged: the launcher reads the spec file (then deletes it: it holds the run's
environment, credentials included) and runs the process in the container with the docker
CLI's ``exec``; stdout, stderr (and stdin, for JSON-RPC runtimes) pass straight through and
the launcher exits with the process's exit code.

It is stdlib only and loaded by file path (:data:`BOOT`), not as part of the package: a
process start pays no import of the docker SDK or pydantic (a third of a second each time,
which the backend used to pay per process).

The environment reaches the process by name only (``-e NAME``, the value read from the
CLI's own environment), so no value appears on a command line another host user could read.

Ending: on SIGTERM (the runner's timeout, or the death of the process that ran the cell —
``PR_SET_PDEATHSIG``) the launcher kills every process in the container but its keeper
(:data:`SWEEP`), which ends the ``exec`` too. A launcher killed outright leaves that to
:meth:`DockerSandbox.reap`, which removes the cell's container.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

#: Run inside the container as its own process: SIGKILL to every process but PID 1 (the
#: keeper) and the caller — what a container's stop did when each process had its own.
SWEEP = ("sh", "-c", "kill -KILL -1 2>/dev/null; exit 0")


def exec_command(spec: dict[str, Any]) -> list[str]:
    """The docker CLI argv for ``spec`` (environment by name only)."""
    cmd = [spec["docker"], "exec"]
    if spec.get("stdin"):
        cmd.append("-i")
    cmd += ["-w", spec["cwd"]]
    for name in spec["env"]:
        cmd += ["-e", name]
    return [*cmd, spec["container"], *spec["argv"]]


def sweep(spec: dict[str, Any]) -> None:
    """Kill what runs in the container (best effort: a removed container has nothing left)."""
    try:
        subprocess.run([spec["docker"], "exec", spec["container"], *SWEEP], env=spec["client_env"],
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        pass


def _die_with_parent() -> None:
    """SIGTERM this launcher when the process that ran the cell dies (bwrap's
    ``--die-with-parent``, for the docker backend)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: the cell's cleanup and the owner sweep still end it
    if os.getppid() == 1:
        os.kill(os.getpid(), signal.SIGTERM)


def main(spec_path: str) -> int:
    path = Path(spec_path)
    try:
        spec = json.loads(path.read_text())
    finally:
        path.unlink(missing_ok=True)
    env = {**spec["env"], **spec["client_env"]}
    stopping: list[int] = []

    def stop(signum: int, _frame: Any) -> None:
        if not stopping:
            stopping.append(signum)
            sweep(spec)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    _die_with_parent()
    try:
        proc = subprocess.Popen(exec_command(spec), env=env, stdin=None if spec.get("stdin") else subprocess.DEVNULL)
    except OSError as exc:
        print(f"tracetrial docker sandbox: could not run docker exec: {exc}", file=sys.stderr)
        return 125
    return proc.wait()


def run(spec_path: str) -> None:
    """Entry point (see :data:`BOOT`): exit with the process's exit code."""
    code = main(spec_path)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code if code >= 0 else 128 - code)


#: ``python -I -c BOOT <this file> <spec>``: loads this module by path (no package import:
#: nothing but the standard library is loaded) and runs :func:`run`.
BOOT = ("import sys, importlib.util as u; s = u.spec_from_file_location('tt_docker_exec', sys.argv[1]); "
        "m = u.module_from_spec(s); s.loader.exec_module(m); m.run(sys.argv[2])")
