"""Task × harness heatmap of the effective score S (PNG, matplotlib Agg backend).

Each cell is the mean effective ``S`` (0–100, after hard gates) of the measured
runs of that task and harness, i.e. over models (and repetitions) when several were run. Cells
without a measured run are grey and marked ``n/a``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from reports.schema import CorpusSummary

_ORDER = "CEGLOTV"


@dataclass(frozen=True)
class HeatmapData:
    """``values[i][j]`` = mean S of task ``tasks[i]`` under harness ``harnesses[j]`` (None = no run)."""

    tasks: list[str]
    harnesses: list[str]
    values: list[list[float | None]]
    models: int


def heatmap_data(summary: CorpusSummary) -> HeatmapData:
    """Collect the per-cell means from the summary's cell list (pure). The calibration instrument
    is left out unless the summary pooled it (``--include-calibration``)."""
    with_calibration = summary.calibration is not None and summary.calibration.included_in_pools
    sums: dict[tuple[str, str], list[float]] = {}
    tasks: set[str] = set()
    harnesses: set[str] = set()
    models: set[str] = set()
    for c in summary.cells:
        if c.calibration and not with_calibration:
            continue
        tasks.add(c.task_id)
        harnesses.add(c.harness)
        if c.status == "measured" and c.effective_score is not None:
            sums.setdefault((c.task_id, c.harness), []).append(c.effective_score)
            models.add(c.model)
    task_list = sorted(tasks, key=lambda t: (_ORDER.find(t[:1]) if t[:1] in _ORDER else 99, t))
    harness_list = sorted(harnesses)
    values = [[(sum(v) / len(v)) if (v := sums.get((t, h))) else None for h in harness_list] for t in task_list]
    return HeatmapData(tasks=task_list, harnesses=harness_list, values=values, models=len(models))


def render_heatmap(data: HeatmapData, path: Path, *, protocol: str = "") -> Path:
    """Write the annotated heatmap PNG to ``path`` and return it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    n_t, n_h = max(len(data.tasks), 1), max(len(data.harnesses), 1)
    grid = np.full((n_t, n_h), np.nan)
    for i, row in enumerate(data.values):
        for j, v in enumerate(row):
            if v is not None:
                grid[i, j] = v
    height = 1.6 + 0.26 * n_t
    width = max(4.5, 2.6 + 1.25 * n_h)
    fig, ax = plt.subplots(figsize=(width, height), dpi=100)
    cmap = matplotlib.colormaps["RdYlGn"].with_extremes(bad="#d9d9d9")
    img = ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, vmin=0, vmax=100, aspect="auto",
                    interpolation="nearest")
    ax.set_xticks(range(len(data.harnesses)), labels=data.harnesses, fontsize=9)
    ax.xaxis.tick_top()
    ax.set_yticks(range(len(data.tasks)), labels=data.tasks, fontsize=8)
    for i in range(len(data.tasks)):
        for j in range(len(data.harnesses)):
            v = grid[i, j]
            text = "n/a" if np.isnan(v) else f"{v:.0f}" if data.models > 1 else f"{v:.1f}".rstrip("0").rstrip(".")
            dark = not np.isnan(v) and (v < 20 or v > 85)
            ax.text(j, i, text, ha="center", va="center", fontsize=7.5, color="white" if dark else "black")
    what = f"mean S over {data.models} models" if data.models > 1 else "S"
    ax.set_title(f"Task × harness: {what}" + (f" ({protocol})" if protocol else ""), fontsize=10, pad=28)
    fig.colorbar(img, ax=ax, fraction=0.04, pad=0.02, label="S (0–100)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png")
    plt.close(fig)
    return path
