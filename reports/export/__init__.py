"""Trace exports of an archive: ATIF v1.7 trajectories and OpenTelemetry GenAI spans (OTLP JSON).

    from reports.export import export_atif, export_otel
    export_atif(Path("outputs"))                        # outputs/exports/atif/<task>/<model>/<harness>/trajectory.json
    export_otel(Path("outputs"), Path("outputs/exports/otel.json"))
"""

from __future__ import annotations

from reports.export.atif import to_atif
from reports.export.calls import CellArchive, ExportError, build_call_graph, load_cell
from reports.export.write import ExportOutcome, export_atif, export_otel

__all__ = ["CellArchive", "ExportError", "ExportOutcome", "build_call_graph", "export_atif",
           "export_otel", "load_cell", "to_atif"]
