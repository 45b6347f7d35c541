"""Scale benchmark of the corpus reports (prints numbers; not a timed test).

Generates the paper's grid — 4 harnesses × 9 models × 95 tasks = 3,420 run
archives (task mix C 15, E 27, G 9, L 19, O 7, T 17, V 1) — with valid
combined_score.json / summary.json / result.json files in a temporary folder,
then times ``reports.write_reports`` end to end and its stages.

    python benchmarks/report_scale.py [--keep DIR]

Goal: ``write_reports`` under 10 s on 2 cores.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reports import write_reports
from reports.aggregate import aggregate, load_runs
from reports.heatmap import heatmap_data, render_heatmap
from reports.html import render_html
from reports.markdown import render_markdown
from reports.pricing import parse_price_catalogue
from reports.synthetic import random_corpus

HARNESSES = ["claude_code", "codex", "openclaw", "deepseek"]
MODELS = ["deepseek-v4-pro", "deepseek-v4-flash", "gpt-5.2", "claude-sonnet-5", "qwen3-coder",
          "kimi-k3", "glm-5", "gemini-3-pro", "minimax-m3"]
MIX = {"C": 15, "E": 27, "G": 9, "L": 19, "O": 7, "T": 17, "V": 1}
TASKS = [f"{c}{1 + i % 4}-bench-task-{i + 1:03d}" for c, n in MIX.items() for i in range(n)]
PRICES = {"models": {m: {"price": {"input": 0.5 + i / 10, "cache_read": 0.05, "output": 2.0 + i / 5}}
                     for i, m in enumerate(MODELS[:-1])}}   # the last model has no price entry


def timed(label: str, fn, *args, **kw):  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    out = fn(*args, **kw)
    print(f"  {label:<34} {time.perf_counter() - t0:7.2f} s")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keep", type=Path, help="write the corpus here and keep it")
    args = ap.parse_args()
    assert len(TASKS) == 95
    out = args.keep or Path(tempfile.mkdtemp(prefix="tt-report-scale-"))
    try:
        print(f"corpus: {len(HARNESSES)} harnesses × {len(MODELS)} models × {len(TASKS)} tasks in {out}"
              f" (cpus: {os.cpu_count()})")
        t0 = time.perf_counter()
        n = random_corpus(out, harnesses=HARNESSES, models=MODELS, tasks=TASKS, seed=1)
        print(f"  generated {n} run archives          {time.perf_counter() - t0:7.2f} s")
        prices = parse_price_catalogue(PRICES, source="benchmark")

        print("end to end (first call in this process: includes the matplotlib import):")
        t0 = time.perf_counter()
        paths = write_reports(out, prices=prices)
        total = time.perf_counter() - t0
        print(f"  write_reports                      {total:7.2f} s   (goal < 10 s)")
        o = paths.summary.overall
        sizes = {p.name: p.stat().st_size for p in (paths.summary_json, paths.summary_md, paths.html)}
        if paths.heatmap:
            sizes[paths.heatmap.name] = paths.heatmap.stat().st_size
        print(f"  cells {o.cells.total}, measured {o.runs}, harness macro {o.harness_macro:.1f}, "
              f"agent success {o.agent_success.pct:.1f} %, pooled link rate {o.links.pooled.pct:.1f} %")
        print("  sizes: " + ", ".join(f"{k} {v / 1024:,.0f} KiB" for k, v in sizes.items()))
        print("stages again, each timed separately (warm):")
        runs = timed("load_runs", load_runs, out)
        summary = timed("aggregate", aggregate, runs, prices)
        timed("summary.json dump", summary.model_dump_json, indent=1, by_alias=True)
        timed("render_markdown", render_markdown, summary)
        png = timed("heatmap (matplotlib)", render_heatmap, heatmap_data(summary), out / "bench-heatmap.png")
        timed("render_html", render_html, summary, png.read_bytes())

        return 0 if total < 10 else 1
    finally:
        if args.keep is None:
            shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
