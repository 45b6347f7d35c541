"""``write_reports``: summary.json, summary.md, report.html and the heatmap."""

from __future__ import annotations

import base64
import re
import shutil
from pathlib import Path
from urllib.parse import unquote

import pytest

from reports import write_reports
from reports.heatmap import heatmap_data
from reports.schema import CorpusSummary
from reports.write import ReportPaths

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def written(corpus_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> ReportPaths:
    out = tmp_path_factory.mktemp("written") / "out"
    shutil.copytree(corpus_dir, out)
    return write_reports(out)


def test_summary_json_round_trips(written: ReportPaths) -> None:
    loaded = CorpusSummary.model_validate_json(written.summary_json.read_text(encoding="utf-8"))
    assert loaded.by_harness["hA"].harness_macro == pytest.approx(81.25)
    assert loaded.prices.models_priced == ["m1"] and loaded.prices.sha256
    assert loaded.generated_at is not None
    assert len(loaded.cells) == 11


def test_markdown_has_protocol_tables_and_excluded_cells(written: ReportPaths) -> None:
    md = written.summary_md.read_text(encoding="utf-8")
    assert md.startswith("# TraceTrial report — protocol: probe")
    assert "| hA | 4 | 50.0 (2) | 58.3 | 81.2 | 84.6 | 69.8 | 25.0 (1) | 0/0 |" in md
    assert "| All | 8 | 37.5 (3) |" in md
    assert "75.0 (3/4)" in md                       # pooled link activation
    assert "HarnessCrashError: codex exited with 139" in md
    assert "$0.0193" in md                          # hA mean cost
    assert "unavailable" in md                      # hB has no usage


def test_html_is_static_and_self_contained(written: ReportPaths) -> None:
    html = written.html.read_text(encoding="utf-8")
    assert "<script" not in html.lower()
    assert not re.search(r'(src|href)="(https?:)?//', html), "external asset or link"
    assert "<style>" in html and 'rel="stylesheet"' not in html
    assert "protocol: probe" in html
    m = re.search(r'src="data:image/png;base64,([^"]+)"', html)
    assert m is not None
    assert written.heatmap is not None
    assert base64.b64decode(m.group(1)) == written.heatmap.read_bytes()


def test_html_archive_links_resolve(written: ReportPaths) -> None:
    html = written.html.read_text(encoding="utf-8")
    hrefs = [unquote(h) for h in re.findall(r'href="(\.\./traces/[^"]+)"', html)]
    assert hrefs, "no per-cell links"
    assert any(h.endswith("/artifacts/llm_judge/combined_score.json") for h in hrefs)
    assert any(h.endswith("/events.json") for h in hrefs)
    for h in hrefs:
        assert (written.html.parent / h).exists(), h
    # the not-scored cell links its folder but no (absent) combined score
    assert "../traces/G1-x-001/m1/hA/artifacts" not in html


def test_heatmap_png_and_matrix(written: ReportPaths) -> None:
    assert written.heatmap is not None and written.heatmap.read_bytes().startswith(PNG_MAGIC)
    data = heatmap_data(written.summary)
    assert data.harnesses == ["hA", "hB"]
    assert data.tasks[:2] == ["C1-a-001", "C1-b-001"] and data.tasks[-1] == "G1-x-001"
    row = dict(zip(data.harnesses, data.values[data.tasks.index("C1-a-001")]))
    assert row["hA"] == pytest.approx(50 * 3 / 4 + 50)          # r1: S = 37.5 + 50
    assert row["hB"] == pytest.approx(50 * 2 / 3 + 50)
    assert data.values[data.tasks.index("G1-x-001")] == [None, None]   # nothing measured


def test_empty_output_writes_reports_without_heatmap(tmp_path: Path) -> None:
    paths = write_reports(tmp_path, prices=tmp_path / "absent.yaml")
    assert paths.heatmap is None and paths.html.is_file() and paths.summary_md.is_file()
    assert paths.summary.overall.cells.total == 0
    assert "protocol: unknown" in paths.html.read_text(encoding="utf-8")
