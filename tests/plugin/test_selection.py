"""`-k "<Component> and <harness>"` on the whole suite selects exactly that slice.

pytest's ``-k`` matches keyword substrings case-insensitively, so a keyword that contains
another component's name (``claim_execution_consistency`` of Verification, say) would drag
its cells into ``-k Execution``. Every keyword of a cell is made collision-free; this runs
the README's selection for every component × harness over the real task packs.
"""

from __future__ import annotations

import shutil

import pytest

from tests.conftest import REPO
from tracetrial.task import TaskPack, discover
from tracetrial.taxonomy import COMPONENTS, PROPERTIES, collision_free, property_keyword

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestAssertRewriteWarning")

HARNESSES = ("claude_code", "codex", "openclaw", "deepseek", "reference")


def _collected(result: pytest.RunResult) -> set[str]:
    return {line.split("::test_cell[", 1)[1].rstrip("]") for line in result.outlines if "::test_cell[" in line}


def test_k_component_and_harness_selects_exactly_that_slice(pytester: pytest.Pytester) -> None:
    tasks = pytester.path / "tasks"
    tasks.mkdir()
    shutil.copy(REPO / "tasks" / "test_cells.py", tasks / "test_cells.py")
    shutil.copy(REPO / "tasks" / "conftest.py", tasks / "conftest.py")
    packs = [p for p in discover(REPO / "tasks") if isinstance(p, TaskPack)]
    assert len(packs) >= 14
    common = ["tasks", "--collect-only", "-q", "--tt-tasks", str(REPO / "tasks"), "--tt-harness", ",".join(HARNESSES)]
    every = _collected(pytester.runpytest(*common))
    assert len(every) == len(packs) * len(HARNESSES)
    # Every component once and every harness at least once (a collection per pair grows as
    # packs × harnesses × pairs; one per component keeps the check, not the cost).
    for n, (letter, component) in enumerate(COMPONENTS.items()):
        harness = HARNESSES[n % len(HARNESSES)]
        got = _collected(pytester.runpytest(*common, "-k", f"{component} and {harness}"))
        want = {f"{p.id}-{harness}-probe" for p in packs if p.spec.component == letter}
        assert got == want, (component, harness, sorted(got ^ want))


def test_no_property_keyword_names_another_component() -> None:
    for letter, props in PROPERTIES.items():
        for prop in props:
            keyword = property_keyword(letter, prop).lower()
            others = [n for c, n in COMPONENTS.items() if c != letter and n.lower() in keyword]
            assert not others, (prop, keyword, others)
    assert property_keyword("V", "claim_execution_consistency") == "claim_exec_consistency"
    assert property_keyword("G", "execution_governance") == "exec_governance"
    assert property_keyword("E", "exit_code_fidelity") == "exit_code_fidelity"
    assert collision_free("my_tools_harness") == "my_tool_harness"
