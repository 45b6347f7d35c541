"""The dependency rule of DESIGN §3 is a contract, not a convention.

* ``lint-imports`` (import-linter, configured in ``pyproject.toml``): the layers
  kernel <- apparatus <- harnesses <- criteria <- reports <- ci <- plugin | command, and no
  import cycle between the sub-packages of any package.
* A private name (``_x``) is imported only inside its own top-level package.
* The kernel imports no other package of this repository (checked by its source as well, so
  a lazy import inside a function counts too).
* Task packs are data plus a little Python that is not a package: their files may import the
  standard library, their own sibling modules, and of this repository only the two pack APIs
  :mod:`tracetrial.policy` and :mod:`tracetrial.verify`.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

#: Top-level packages of this repository (import-linter's root packages).
OURS = ("tracetrial", "apparatus", "harnesses", "criteria", "reports", "ci", "tracetrial_fixtures",
        "tracetrial_cli", "tasks", "tests")
PACK_APIS = ("tracetrial.policy", "tracetrial.verify")


def _imports(path: Path) -> list[tuple[int, str]]:
    """Every absolute module an import statement of ``path`` names (at any depth)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


def test_import_linter_contracts_hold() -> None:
    binary = shutil.which("lint-imports")
    if binary is None:
        pytest.skip("import-linter is part of the dev extra: pip install -e '.[dev]'")
    proc = subprocess.run([binary, "--no-cache"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout or "broken" not in proc.stdout.split("Contracts:")[-1]


def test_kernel_imports_nothing_above_it() -> None:
    bad = [f"{p.relative_to(REPO)}:{line} imports {name}"
           for p in sorted((REPO / "tracetrial").rglob("*.py"))
           for line, name in _imports(p)
           if name.split(".")[0] in OURS and name.split(".")[0] != "tracetrial"]
    assert bad == []


def test_private_names_stay_in_their_package() -> None:
    bad: list[str] = []
    for top in OURS[:-2]:
        for path in sorted((REPO / top).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            for node in ast.walk(tree):
                if not (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module):
                    continue
                home = node.module.split(".")[0]
                if home == top or home not in OURS:
                    continue
                private = [a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
                private += [part for part in node.module.split(".") if part.startswith("_") and
                            not part.startswith("__")]
                if private:
                    bad.append(f"{path.relative_to(REPO)}:{node.lineno} imports {private} from {node.module}")
    assert bad == []


def _pack_python(pack: Path) -> list[Path]:
    """The pack's own code (the workspace is the agent's material, not pack code)."""
    return sorted(p for p in pack.rglob("*.py") if "workspace" not in p.relative_to(pack).parts)


def test_task_packs_import_only_the_pack_apis() -> None:
    packs = sorted(p for p in (REPO / "tasks").iterdir() if (p / "task.yaml").is_file())
    assert packs
    bad: list[str] = []
    for pack in packs:
        for path in _pack_python(pack):
            siblings = {p.stem for p in path.parent.glob("*.py")}
            for line, name in _imports(path):
                top = name.split(".")[0]
                if name in PACK_APIS or top in siblings or top == "__future__":
                    continue
                if top in sys.stdlib_module_names and top not in OURS:
                    continue
                bad.append(f"{path.relative_to(REPO)}:{line} imports {name}")
    assert bad == [], "task packs may import only " + ", ".join(PACK_APIS) + " (and the stdlib)"


def test_the_pack_check_can_fail(tmp_path: Path) -> None:
    """The AST scan sees a lazy import inside a function (so the rule cannot be dodged)."""
    src = tmp_path / "score.py"
    src.write_text("def score(ctx):\n    from criteria.verifier import run_verifier\n    return {}\n")
    assert (2, "criteria.verifier") in _imports(src)
