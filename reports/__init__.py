"""Corpus reports: aggregation (SPEC §5/§6), JSON/Markdown/HTML/heatmap, Allure, terminal lines.

Works from an archive alone (no pytest needed)::

    from reports import write_reports
    paths = write_reports(Path("outputs"))     # outputs/reports/{summary.json,summary.md,report.html,heatmap.png}
"""

from __future__ import annotations

from reports.aggregate import aggregate, load_runs
from reports.pricing import PriceCatalogue, PriceEntry, load_price_catalogue, run_cost
from reports.records import RunRecord
from reports.schema import CorpusSummary, GroupMetrics
from reports.write import ReportPaths, write_reports

__all__ = [
    "CorpusSummary",
    "GroupMetrics",
    "PriceCatalogue",
    "PriceEntry",
    "ReportPaths",
    "RunRecord",
    "aggregate",
    "load_price_catalogue",
    "load_runs",
    "run_cost",
    "write_reports",
]
