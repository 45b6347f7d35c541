"""A cell's criteria as sub-checks of its test (pytest's built-in ``subtests``), then the
cell verdict: a combined pass, or — with ``--tt-baseline`` — exactly the known failures."""

from __future__ import annotations

import pytest

from tracetrial_fixtures.cell import CellResult

__all__ = ["Checker", "KnownCriterionFailures"]


class KnownCriterionFailures(AssertionError):
    """A cell failed exactly the criteria its ``--tt-baseline`` records as not passing.

    The only exception the cell's ``xfail(raises=KnownCriterionFailures)`` accepts, so
    any other failure of a baseline-marked cell (a new criterion, a run not admitted,
    an apparatus error) stays red.
    """


class Checker:
    """Reports each criterion as a sub-check (pytest's built-in ``subtests``).

    With a ``tt_baseline(known=...)`` mark (``--tt-baseline``), the cell is checked
    against its known failures: known criteria are reported as sub-check xfails and
    the cell gets ``xfail(strict=True, raises=KnownCriterionFailures)``, so

    * the same criteria fail (fail or unscored) -> XFAIL;
    * another criterion fails -> FAILED (``pytest.fail`` is not the accepted exception);
    * every known criterion passes -> XPASS(strict) -> FAILED; some of them pass ->
      FAILED with the same ``[XPASS(strict)]`` prefix naming them.

    The xfail mark is added here, after the sub-checks, not at collection: pytest
    applies an item's xfail mark to each sub-check report, so a static
    ``xfail(strict=True)`` would turn every *passing* criterion into an XPASS(strict)
    sub-failure. Pytest re-reads xfail marks added during the call, so the cell
    outcome is the ordinary xfail machinery.
    """

    def __init__(self, subtests: pytest.Subtests, node: pytest.Item | None = None):
        self.subtests = subtests
        self.node = node
        mark = node.get_closest_marker("tt_baseline") if node is not None else None
        self.known: dict[str, str] = dict(mark.kwargs.get("known", {})) if mark is not None else {}

    def __call__(self, result: CellResult) -> None:
        """Check one cell: each criterion as a sub-check, then the cell verdict."""
        if result.problem:
            pytest.fail(result.problem, pytrace=False)
        score = result.score
        assert score is not None, f"no score for {result.paths.root}"
        from reports.allure import attach_cell

        attach_cell(result.paths, score)  # no-op without --alluredir
        # pytrace=False: the verdict's reason *is* the report; a traceback of this
        # checker would only bury it.
        for v in score.verdicts:
            with self.subtests.test(msg=f"{v.layer}:{v.id}"):
                if v.passed is not True and v.id in self.known:
                    pytest.xfail(f"known {self.known[v.id]} (baseline): {v.reason}")
                if v.passed is None:
                    pytest.skip(f"unscored: {v.reason}")
                if not v.passed:
                    pytest.fail(f"{v.id} ({v.layer}) failed: {v.reason}", pytrace=False)
        if self.known:
            self._against_baseline(result)
            return
        failed = [v.id for v in score.verdicts if v.passed is False]
        if not score.admitted:
            pytest.fail("run not admitted: " + "; ".join(d.reason for d in score.admission if not d.ok)
                        + f" — archive: {result.paths.root}", pytrace=False)
        if not score.combined_pass:
            pytest.fail(
                f"S={score.effective_score:.1f} (S_H={score.S_H:.1f}, S_A={score.S_A:.1f}); failed: "
                f"{', '.join(failed) or 'none'}; unscored: {score.harness.unscored + score.agent.unscored}; "
                f"label: {score.attribution.label} — archive: {result.paths.root}", pytrace=False)

    def _against_baseline(self, result: CellResult) -> None:
        """The cell verdict of a cell with known failures (see the class docstring)."""
        score = result.score
        assert score is not None and self.node is not None
        known = ", ".join(f"{cid} {state}" for cid, state in sorted(self.known.items()))
        self.node.add_marker(pytest.mark.xfail(strict=True, raises=KnownCriterionFailures,
                                               reason=f"known failing (baseline): {known}"))
        ids = {v.id for v in score.verdicts}
        not_passing = {v.id: ("unscored" if v.passed is None else "fail") for v in score.verdicts
                       if v.passed is not True}
        new = sorted(set(not_passing) - set(self.known))
        if not score.admitted:
            pytest.fail("run not admitted: " + "; ".join(d.reason for d in score.admission if not d.ok)
                        + f" — archive: {result.paths.root}", pytrace=False)
        if new:
            pytest.fail(f"new failure(s) beyond the baseline's known ones: "
                        f"{', '.join(f'{c} {not_passing[c]}' for c in new)} (known: {known}) — archive: "
                        f"{result.paths.root}", pytrace=False)
        fixed = sorted(c for c in self.known if c in ids and c not in not_passing)
        gone = sorted(c for c in self.known if c not in ids)
        if not_passing and (fixed or gone):
            pytest.fail("[XPASS(strict)] known failure(s) now pass: " + ", ".join(fixed + [f"{c} (no longer checked)"
                        for c in gone]) + f"; still failing: {', '.join(sorted(not_passing))}; update the baseline",
                        pytrace=False)
        if not_passing:
            raise KnownCriterionFailures(f"fails only its known criteria: {', '.join(sorted(not_passing))} "
                                         f"(S={score.effective_score:.1f}) — archive: {result.paths.root}")
        if not score.combined_pass:  # every criterion passes yet no combined pass: a hard gate
            pytest.fail(f"S={score.effective_score:.1f} (S={score.S:.1f} before hard gates) — archive: "
                        f"{result.paths.root}", pytrace=False)
        # Every known failure passes: returning makes the strict xfail report XPASS(strict).
