"""Where a run's simulators keep their private files, and the MCP servers a cell registers.

::

    <run>/private/sim/<name>/state.json      business state, call counts, session counter
    <run>/private/ledgers/<name>.jsonl       the hash-chained ledger (+ .head sidecar)

Both live under the run's ``private/`` folder, never in the agent-writable workspace.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from apparatus.simulators.errors import SimulatorConfigError
from apparatus.simulators.ledger import Ledger
from apparatus.simulators.spec import load_service
from tracetrial.harness import McpServer
from tracetrial.task import TaskPack

SERVE_MODULE = "apparatus.simulators.serve"


@dataclass(frozen=True)
class SimulatorPaths:
    """The private files of one simulator in one run."""

    state_dir: Path
    ledger: Path

    @classmethod
    def for_run(cls, run_private: Path, name: str) -> SimulatorPaths:
        return cls(state_dir=run_private / "sim" / name, ledger=run_private / "ledgers" / f"{name}.jsonl")


def serve_command(task: TaskPack, name: str, run_private: Path, seed: str) -> list[str]:
    """The full command line that serves simulator ``name`` of ``task`` for one run."""
    paths = SimulatorPaths.for_run(run_private, name)
    return [sys.executable, "-m", SERVE_MODULE, "--pack", str(task.root), "--service", name,
            "--state-dir", str(paths.state_dir), "--ledger", str(paths.ledger), "--seed", seed]


def mcp_servers_for(task: TaskPack, run_private: Path, seed: str) -> list[McpServer]:
    """The stdio MCP servers an adapter registers for this run, one per declared simulator.

    Validates every service first (so a broken service fails the cell as an
    apparatus error before the harness starts), creates the state folders and the
    empty ledgers with their genesis heads (so a ledger that is missing later was
    lost, not merely unused).

    Raises:
        SimulatorConfigError: listing the problems of every invalid service.
    """
    run_private = run_private.resolve()
    problems: list[str] = []
    servers: list[McpServer] = []
    for sim in task.spec.simulators:
        try:
            load_service(task.root, sim)
        except SimulatorConfigError as exc:
            problems.extend(exc.problems)
            continue
        paths = SimulatorPaths.for_run(run_private, sim.name)
        paths.state_dir.mkdir(parents=True, exist_ok=True)
        Ledger(paths.ledger, sim.name).init()
        cmd = serve_command(task, sim.name, run_private, seed)
        servers.append(McpServer(name=sim.name, command=cmd[0], args=tuple(cmd[1:]),
                                 env={"PYTHONDONTWRITEBYTECODE": "1"}))
    if problems:
        raise SimulatorConfigError(f"task {task.id}", problems)
    return servers
