"""A third-party harness, installed from outside this checkout, runs under every backend.

A real distribution is made in a temp folder — a ``pyproject.toml`` declaring a
``tracetrial.harnesses`` entry point, an adapter, and the harness process: a script
*inside the package* (``acme_tt/agent.py``) that imports the package and then runs the
reference agent loop — and is installed editable with ``pip install --no-deps
--no-build-isolation -e``. Its source folder is outside the checkout and outside the
Python installation, so under bwrap (private ``/tmp``) and docker the harness process can
only start when the sandbox keeps that folder visible.

The install goes into a virtual environment that sees this one's packages
(``--system-site-packages``), not into the shared environment: an installed harness joins
the default harness set of every ``pytest tasks/`` run on this machine while it is there.
The project carries its own PEP 517/660 backend (``_build/acme_build.py``, standard
library only), because ``--no-build-isolation`` builds with what the environment has and
the environment's setuptools cannot build an editable wheel without the ``wheel`` package.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from apparatus.sandbox import SandboxUnavailable, choose_backend
from tests.conftest import REPO
from tracetrial.archive import RunPaths
from tracetrial.results import CombinedScore

pytestmark = pytest.mark.slow  # one real cell per backend, each starting its own gateway

TASK = "E1-build-status-001"
HARNESS = "acme_tt"
DIST = "acme-tt-harness"

PYPROJECT = f"""\
[build-system]
requires = []
build-backend = "acme_build"
backend-path = ["_build"]

[project]
name = "{DIST}"
version = "0.1"

[project.entry-points."tracetrial.harnesses"]
{HARNESS} = "acme_tt.adapter:AcmeAdapter"
"""

BACKEND = '''\
"""A PEP 517/660 backend of the standard library only: the editable wheel is a ``.pth``
naming this project folder, plus the metadata ``pyproject.toml`` declares."""

import base64
import hashlib
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _project():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _files():
    project = _project()
    name, version = project["name"].replace("-", "_"), project["version"]
    info = f"{name}-{version}.dist-info"
    entry_points = "".join(f"[{group}]\\n" + "".join(f"{k} = {v}\\n" for k, v in eps.items())
                           for group, eps in project.get("entry-points", {}).items())
    return f"{name}-{version}-py3-none-any.whl", info, {
        f"__editable__.{name}.pth": f"{ROOT}\\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\\nName: {project['name']}\\nVersion: {version}\\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\\nGenerator: acme_build\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n",
        f"{info}/entry_points.txt": entry_points,
    }


def get_requires_for_build_editable(config_settings=None):
    return []


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    wheel, info, files = _files()
    record = []
    with zipfile.ZipFile(Path(wheel_directory) / wheel, "w") as zf:
        for name, text in files.items():
            data = text.encode()
            zf.writestr(name, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{name},sha256={digest},{len(data)}")
        record.append(f"{info}/RECORD,,")
        zf.writestr(f"{info}/RECORD", "\\n".join(record) + "\\n")
    return wheel
'''

ADAPTER = '''\
"""acme_tt: a harness whose process is this package's own script (``agent.py``)."""

import sys
import uuid
from pathlib import Path

from apparatus.sandbox.policy import collect_records
from harnesses.base import HarnessAdapter, HarnessCapabilities, TurnOutcome
from harnesses.reference.normalize import LOG_NAME, normalize_run
from harnesses.runner import clean_env, run_process

AGENT = Path(__file__).resolve().with_name("agent.py")


class AcmeAdapter(HarnessAdapter):
    name = "acme_tt"
    wire_format = "chat"
    capabilities = HarnessCapabilities(mcp=False, multi_turn=False, new_session=False)

    def unavailable_reason(self):
        return None

    def version(self):
        return "0.1"

    def run_turn(self, ctx, turn):
        native = ctx.paths.native
        native.mkdir(parents=True, exist_ok=True)
        # The process writes its records in its scratch (the archive is not writable inside
        # a sandbox); they are copied into native/ once it has ended.
        records = ctx.home / "records"
        records.mkdir(parents=True, exist_ok=True)
        prompt = ctx.home / f"prompt-{turn.index}.txt"
        prompt.write_text(turn.user_text, encoding="utf-8")
        argv = [sys.executable, str(AGENT), "--base-url", ctx.gateway_base_url, "--model", ctx.model,
                "--workspace", str(ctx.workspace), "--log", str(records / LOG_NAME),
                "--session-dir", str(records / "sessions"), "--turn", str(turn.index), "--prompt-file", str(prompt),
                "--deadline-s", f"{max(turn.deadline_s - 5.0, 1.0):.1f}", "--new-session",
                "--session-id", f"s-{uuid.uuid4().hex[:12]}",
                "--max-model-calls", str(ctx.task.spec.budgets.max_model_calls)]
        env = clean_env({"OPENAI_API_KEY": ctx.gateway_key, "PYTHONDONTWRITEBYTECODE": "1"}, home=ctx.home)
        stdout, stderr = native / f"turn-{turn.index}.stdout", native / f"turn-{turn.index}.stderr"
        out = run_process(argv, env=env, cwd=ctx.workspace, stdout=stdout, stderr=stderr, timeout_s=turn.deadline_s)
        return TurnOutcome(index=turn.index, exit_code=out.exit_code, timed_out=out.timed_out,
                           duration_s=out.duration_s, stdout=stdout, stderr=stderr, error=out.error)

    def collect(self, ctx):
        collect_records(ctx.home / "records", ctx.paths.native)
        return sorted(p for p in ctx.paths.native.rglob("*") if p.is_file())

    def normalize(self, paths, outcomes, run_id):
        return normalize_run(paths, outcomes, run_id)
'''

AGENT = '''\
"""acme_tt's harness process, run by its path: it cannot start unless this package's
folder is visible, and it imports the package through its editable install."""

import sys
from pathlib import Path

import acme_tt
from harnesses.reference.cli import main

# Evidence that this very file ran: a note beside the native event log (--log).
log = Path(sys.argv[sys.argv.index("--log") + 1])
log.parent.mkdir(parents=True, exist_ok=True)
(log.parent / "acme-agent.txt").write_text(f"{acme_tt.MARK} {Path(__file__).resolve()}\\n")
raise SystemExit(main())
'''


@dataclass(frozen=True)
class Installed:
    """The editable install: the environment's Python and the project's source folder."""

    python: Path
    source: Path


def _pip(python: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(python), "-m", "pip", *args], capture_output=True, text=True, timeout=300,
                          check=False)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    """``acme-tt-harness``, installed editable from a temp folder (uninstalled afterwards)."""
    root = tmp_path_factory.mktemp("thirdparty")
    source = root / "acme-tt"
    (source / "acme_tt").mkdir(parents=True)
    (source / "_build").mkdir()
    (source / "pyproject.toml").write_text(PYPROJECT)
    (source / "_build" / "acme_build.py").write_text(BACKEND)
    (source / "acme_tt" / "__init__.py").write_text('MARK = "acme_tt agent"\n')
    (source / "acme_tt" / "adapter.py").write_text(ADAPTER)
    (source / "acme_tt" / "agent.py").write_text(AGENT)
    env = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(env)],
                   check=True, timeout=120)
    python = env / "bin" / "python"
    try:
        proc = _pip(python, "install", "--no-deps", "--no-build-isolation", "-e", str(source))
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        yield Installed(python, source.resolve())
    finally:
        _pip(python, "uninstall", "-y", DIST)
        shutil.rmtree(env, ignore_errors=True)


def test_the_install_is_what_it_claims(installed: Installed) -> None:
    """Registered, editable, from a folder no other code path covers: the sandboxes see it
    only because its distribution provides a harness entry point."""
    probe = ("import json, sys; from apparatus.sandbox import code_paths; from apparatus.sandbox.code import "
             "harness_code_paths; from harnesses.registry import available_harnesses; "
             "print(json.dumps([available_harnesses(), [str(p) for p in code_paths()], "
             "[str(p) for p in harness_code_paths()], 'acme_tt' in sys.modules]))")
    proc = subprocess.run([str(installed.python), "-c", probe], cwd=REPO, capture_output=True, text=True,
                          timeout=120, check=True)
    harnesses, paths, harness_paths, imported = json.loads(proc.stdout)
    assert HARNESS in harnesses and not imported
    assert str(installed.source) in paths and str(installed.source) in harness_paths
    others = [Path(p) for p in paths if p not in harness_paths]
    assert not any(installed.source.is_relative_to(p) for p in others), others


@pytest.mark.parametrize("backend", ["local", "bwrap", "docker"])
def test_a_cell_of_the_third_party_harness_runs_under(installed: Installed, backend: str, tmp_path: Path) -> None:
    try:
        choose_backend(backend)
    except SandboxUnavailable as exc:
        pytest.skip(str(exc))
    out = tmp_path / "out"
    proc = subprocess.run([str(installed.python), "-m", "pytest", "tasks/", "-p", "no:cacheprovider", "-q",
                           "--tt-harness", HARNESS, "--tt-sandbox", backend, f"--tt-output={out}", "-k", TASK],
                          cwd=REPO, capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    paths = RunPaths.for_cell(out, TASK, "probe", HARNESS)
    record = json.loads(paths.result.read_text())
    assert record["resolved_config"]["sandbox"] == backend
    assert record["identity"]["harness_version"] == "0.1"
    # The package's own script ran (inside the sandbox), from the package folder.
    note = (paths.native / "acme-agent.txt").read_text().split()
    assert note[:2] == ["acme_tt", "agent"] and note[2] == str(installed.source / "acme_tt" / "agent.py")
    score = CombinedScore.model_validate_json(paths.combined_score.read_text())
    assert score.admitted and score.verdicts and all(v.passed for v in score.verdicts), score.verdicts
