"""Write every corpus report of an output folder into ``<output>/reports/``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from criteria.judge_calibration import judge_statuses
from reports.aggregate import aggregate, load_runs
from reports.cellpage import write_cell_pages
from reports.heatmap import heatmap_data, render_heatmap
from reports.html import render_html
from reports.markdown import render_markdown
from reports.pricing import PriceCatalogue, find_price_catalogue, load_price_catalogue
from reports.schema import CorpusSummary
from tracetrial.files import atomic_write_text


@dataclass(frozen=True)
class ReportPaths:
    """The files :func:`write_reports` wrote::

        <output>/reports/
            summary.json   CorpusSummary (pydantic, every figure)
            summary.md     the tables in Markdown
            report.html    static page (inline CSS, embedded heatmap, links into ../traces/)
            heatmap.png    task × harness S (absent when no run was measured)
            cells/         one criteria page per cell with a failed or unscored criterion
                           (cells/<cell path under the output>.html)
    """

    root: Path
    summary_json: Path
    summary_md: Path
    html: Path
    heatmap: Path | None
    summary: CorpusSummary
    pages: list[Path]


def _write(path: Path, text: str) -> None:
    atomic_write_text(path, text)


def write_reports(output: Path, *, prices: PriceCatalogue | Path | None = None,
                  include_calibration: bool = False) -> ReportPaths:
    """Aggregate ``<output>/traces`` (and every repetition under ``<output>/repeats/``) and write
    the reports.

    Args:
        output: the run output folder (the one holding ``traces/``).
        prices: a catalogue, a ``models.yaml`` path, or ``None`` to use ``<output>/models.yaml``
            or the repository's ``models.yaml`` (cost is "unavailable" when there is none).
        include_calibration: pool the calibration instrument (``reference`` and its mutants) into
            the corpus figures; by default it has its own section only.
    """
    output = Path(output)
    if not isinstance(prices, PriceCatalogue):
        prices = load_price_catalogue(prices if prices is not None else find_price_catalogue(output))
    runs = load_runs(output)
    summary = aggregate(runs, prices, include_calibration=include_calibration)
    summary = summary.model_copy(update={
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        # semantic verdicts of a judge not calibrated on the gold set are labelled as such
        "judge_status": judge_statuses(summary.judges)})
    root = output / "reports"
    root.mkdir(parents=True, exist_ok=True)
    paths_json, paths_md, paths_html = root / "summary.json", root / "summary.md", root / "report.html"
    _write(paths_json, summary.model_dump_json(indent=1, by_alias=True) + "\n")
    _write(paths_md, render_markdown(summary))
    heatmap: Path | None = root / "heatmap.png"
    png: bytes | None = None
    data = heatmap_data(summary)
    if any(v is not None for row in data.values for v in row):
        assert heatmap is not None
        render_heatmap(data, heatmap, protocol=summary.protocol_label)
        png = heatmap.read_bytes()
    else:
        heatmap = None
    pages = write_cell_pages(output, runs)
    _write(paths_html, render_html(summary, png))
    return ReportPaths(root=root, summary_json=paths_json, summary_md=paths_md, html=paths_html,
                       heatmap=heatmap, summary=summary, pages=pages)
