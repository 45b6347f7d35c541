"""A cell whose files do not match its manifest is reported as ``tampered`` (named with the
first mismatching file), and none of its numbers are pooled (issue 17)."""

from __future__ import annotations

from pathlib import Path

from reports.aggregate import aggregate, load_runs
from reports.synthetic import make_combined, write_cell
from reports.write import write_reports
from tests.criteria.archive_factory import flip_one_byte, forge_clean_score

T, F = True, False
COMBINED_SCORE = "artifacts/llm_judge/combined_score.json"


def corpus(out: Path) -> tuple[Path, Path]:
    """Two sealed cells of one harness: ``E1-a-001`` passes everything, ``E1-b-001`` fails."""
    good = write_cell(out, make_combined("E1-a-001", "m1", "h", {"H1": T, "H2": T}, {"A1": T})).root
    bad = write_cell(out, make_combined("E1-b-001", "m1", "h", {"H1": F, "H2": F}, {"A1": F})).root
    return good, bad


def test_a_consistently_forged_score_is_tampered_and_not_pooled(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _, bad = corpus(out)
    honest = aggregate(load_runs(out)).overall
    forge_clean_score(bad)
    runs = load_runs(out)
    rec = next(r for r in runs if r.task_id == "E1-b-001")
    assert rec.status == "tampered" and not rec.combined and rec.S is None
    assert rec.reason == f"tampered: {COMBINED_SCORE}: content changed since the manifest was written (sha256 mismatch)"
    assert rec.problems == ()  # the forgery is consistent: only the seal catches it
    overall = aggregate(runs).overall
    assert (overall.cells.measured, overall.cells.tampered, overall.cells.total) == (1, 1, 2)
    assert overall.mean_score == 100.0 and honest.mean_score != overall.mean_score  # only the good cell counts
    assert overall.clean.count == 1  # the forged "clean" run is not pooled


def test_one_changed_byte_in_events_json_is_tampered(tmp_path: Path) -> None:
    out = tmp_path / "out"
    good, _ = corpus(out)
    flip_one_byte(good / "events.json")
    rec = next(r for r in load_runs(out) if r.task_id == "E1-a-001")
    assert rec.status == "tampered"
    assert rec.reason is not None and rec.reason.startswith("tampered: events.json: content changed")


def test_the_written_reports_show_the_tampered_cell(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _, bad = corpus(out)
    forge_clean_score(bad)
    paths = write_reports(out)
    md = paths.summary_md.read_text(encoding="utf-8")
    assert "1 TAMPERED" in md
    row = next(line for line in md.splitlines() if "E1-b-001" in line and "tampered" in line)
    assert COMBINED_SCORE in row
    html = paths.html.read_text(encoding="utf-8")
    assert 'class="status-tampered">tampered</span>' in html
    assert paths.summary.overall.cells.tampered == 1
