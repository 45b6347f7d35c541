"""Report tables built from a :class:`CorpusSummary`, shared by Markdown and HTML.

A :class:`Table` is plain strings; the renderers only lay them out. Numbers are
rounded here, once: rates to one decimal, ``—`` for "not available".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from reports.records import is_calibration
from reports.schema import CorpusSummary, GroupMetrics, PassK, RepeatMetrics, RepeatSection, Share
from tracetrial.taxonomy import COMPONENTS

NA = "—"
LABELS = ("clean", "harness_absorbed", "harness_caused", "agent_caused", "measurement_bypass", "apparatus_invalid")


@dataclass
class Table:
    """A titled table: ``headers`` and ``rows`` of strings; ``numeric`` columns align right."""

    key: str
    title: str
    headers: list[str]
    rows: list[list[str]]
    caption: str = ""
    numeric: set[int] = field(default_factory=set)
    #: 0–100 values of (row, column) cells to colour in HTML.
    heat: dict[tuple[int, int], float] = field(default_factory=dict)
    #: Columns of long text that may wrap in HTML (the others do not).
    wrap: set[int] = field(default_factory=set)


def f1(x: float | None) -> str:
    return NA if x is None else f"{x:.1f}"


def fk(x: float | None) -> str:
    return NA if x is None else f"{x:,.1f}"


def usd(x: float | None) -> str:
    if x is None:
        return "unavailable"
    return f"${x:,.4f}" if x < 1 else f"${x:,.2f}"


def sh(s: Share) -> str:
    return NA if s.pct is None else f"{s.pct:.1f} ({s.count})"


def sh_long(s: Share) -> str:
    return NA if s.pct is None else f"{s.pct:.1f} % ({s.count} of {s.of})"


def component_label(letter: str) -> str:
    return f"{COMPONENTS[letter]} ({letter})" if letter in COMPONENTS else letter


_MAIN_HEADERS = ["Runs", "Agent success %", "Agent Score", "Harness Macro", "Harness Micro", "Overall",
                 "Clean %", "Unscored H/A"]


def _main_row(name: str, g: GroupMetrics) -> list[str]:
    return [name, str(g.runs), sh(g.agent_success), f1(g.agent_score), f1(g.harness_macro),
            f1(g.harness_micro), f1(g.overall), sh(g.clean),
            f"{g.unscored.harness_criteria}/{g.unscored.agent_criteria}"]


def has_named_versions(s: CorpusSummary) -> bool:
    """Whether a harness ran under a ``name@version`` name (then tables get a version column)."""
    return any("@" in h for h in s.harness_versions)


def version_of(s: CorpusSummary, harness: str) -> str:
    """The native version(s) a harness ran (``—`` when none was recorded)."""
    return ", ".join(s.harness_versions.get(harness, [])) or NA


def _main_table(key: str, title: str, first: str, groups: dict[str, GroupMetrics], overall: GroupMetrics | None,
                caption: str, label: Callable[[str], str] = str,
                versions: Callable[[str], str] | None = None, total: str = "All") -> Table:
    """Groups as rows; with ``versions``, a column after the first gives each row's version."""
    shift = 1 if versions is not None else 0
    rows = []
    for k, g in groups.items():
        row = _main_row(label(k), g)
        rows.append(row[:1] + [versions(k)] + row[1:] if versions is not None else row)
    if overall is not None:
        row = _main_row(total, overall)
        rows.append(row[:1] + [""] + row[1:] if versions is not None else row)
    heat: dict[tuple[int, int], float] = {}
    for i, (k, g) in enumerate(groups.items()):
        for j, v in ((2, g.agent_success.pct), (3, g.agent_score), (4, g.harness_macro), (5, g.harness_micro),
                     (6, g.overall), (7, g.clean.pct)):
            if v is not None:
                heat[(i, j + shift)] = v
    headers = [first, *(["Version"] if versions is not None else []), *_MAIN_HEADERS]
    return Table(key, title, headers, rows, caption, numeric=set(range(1 + shift, 9 + shift)), heat=heat)


def headline(s: CorpusSummary) -> Table:
    o = s.overall
    c = o.cells
    rows = [
        ["Protocol", s.protocol_label],
        ["Judge", ", ".join(f"{j}: {s.judge_status[j]}" if j in s.judge_status else j for j in s.judges)
         or "none (semantic criteria unscored)"],
        ["Cells", (f"{c.total} total: {c.measured} measured, {c.apparatus_invalid} apparatus-invalid, "
                   f"{c.unsupported} unsupported, {c.non_comparable} non-comparable, {c.not_scored} not scored"
                   + (f", {c.tampered} TAMPERED" if c.tampered else ""))],
        ["Agent items passed", f"{o.agent_items_passed:,} / {o.agent_items_total:,} ({f1(o.agent_micro)} %)"],
        ["Harness items passed", f"{o.harness_items_passed:,} / {o.harness_items_total:,} ({f1(o.harness_micro)} %)"],
        ["Agent task success", sh_long(o.agent_success)],
        ["All criteria of both layers (clean)", sh_long(o.clean)],
        ["Task success with ≥1 failed harness criterion (H-only)", sh_long(o.states.h_only)],
        ["Mean S (after hard gates)", f1(o.mean_score) + (f"; {o.gated_runs} run(s) lowered by a hard gate"
                                                           if o.gated_runs else "")],
        ["Unscored criteria (harness / agent)", (f"{o.unscored.harness_criteria} / {o.unscored.agent_criteria} "
                                                 f"in {o.unscored.runs_with_unscored} run(s), "
                                                 "counted as not passed")],
        ["Diagnostic criteria (in no score)", (f"{o.diagnostics.failed} failed, {o.diagnostics.unscored} unscored; "
                                               f"{o.diagnostics.runs_with_failed} run(s) with a failed one")],
    ]
    if s.calibration is not None:
        cal = s.calibration.overall.cells
        rows.insert(3, ["Calibration runs", (f"{cal.total} cell(s) of the reference harness and its mutants: "
                                             + ("pooled into these figures (--include-calibration)"
                                                if s.calibration.included_in_pools
                                                else "not in these figures (see 'Calibration instrument')"))])
    if s.repeats is not None:
        rows.insert(3, ["Repetitions", f"up to {s.repeats.k} per cell (--tt-repeat); every repetition is a run "
                                       "in these figures, see 'Repeated runs'"])
    return Table("headline", "Corpus", ["", ""], rows, wrap={1})


def _pool_note(s: CorpusSummary) -> str:
    if s.calibration is None:
        return ""
    if s.calibration.included_in_pools:
        return " Calibration runs (reference and its mutants) are pooled in (--include-calibration)."
    return " The calibration instrument (reference and its mutants) is not pooled: see its own table."


def per_harness(s: CorpusSummary) -> Table:
    return _main_table("harness", "Per harness", "Harness", s.by_harness, s.overall,
                       "Rates ×100 over measured runs. Agent Score / Harness Macro = mean of per-run p/n; "
                       "Harness Micro = Σp_H/Σn_H; Overall = mean(Agent Score, Harness Macro); "
                       "success and clean as % (count)." + _pool_note(s),
                       versions=(lambda h: version_of(s, h)) if has_named_versions(s) else None)


def calibration(s: CorpusSummary) -> Table:
    """The calibration instrument per variant (only when it ran)."""
    assert s.calibration is not None
    return _main_table("calibration", "Calibration instrument (reference and mutants)", "Variant",
                       s.calibration.by_harness, s.calibration.overall,
                       "The faithful reference harness must score 100 on every task and each seeded-defect "
                       "mutant flip what its task declares (tracetrial calibrate checks the declarations). "
                       "They audit the tasks, so they are "
                       + ("pooled into the corpus figures here only because --include-calibration was given."
                          if s.calibration.included_in_pools else
                          "left out of every corpus pool (All rows, per model, per component)."),
                       total="All calibration")


def calibration_cells(s: CorpusSummary) -> Table:
    """Task × calibration variant: the criteria that did not pass (first repetition)."""
    cells = [c for c in s.cells if c.calibration and c.repetition == 1]
    variants = sorted({c.harness for c in cells}, key=lambda h: (h != "reference", h))
    tasks = sorted({c.task_id for c in cells}, key=lambda t: ("CEGLOTV?".find(t[:1]), t))
    at: dict[tuple[str, str], list[str]] = {}
    several_models = len({c.model for c in cells}) > 1
    for c in cells:
        text: str = c.status
        if c.status == "measured":
            ids = [*c.failed, *(f"{d} (diag.)" for d in c.diagnostic_failed)]
            text = ", ".join(ids) if ids else "all pass"
        at.setdefault((c.task_id, c.harness), []).append(f"{c.model}: {text}" if several_models else text)
    rows = [[t, *["; ".join(at.get((t, v), [NA])) for v in variants]] for t in tasks]
    return Table("calibration_cells", "Calibration: criteria not passed per task and variant",
                 ["Task", *variants], rows,
                 "Per task: what each variant did not pass (core criteria; '(diag.)' a diagnostic one). The "
                 "reference column must read 'all pass'.", wrap=set(range(1, len(variants) + 1)))


def per_model(s: CorpusSummary) -> Table:
    return _main_table("model", "Per model", "Model", s.by_model, None, "All harnesses pooled." + _pool_note(s))


def per_component(s: CorpusSummary) -> Table:
    return _main_table("component", "Per component (primary dimension)", "Component", s.by_component, None,
                       "Each task counted under its primary component." + _pool_note(s), label=component_label)


def states(s: CorpusSummary) -> Table:
    rows = []
    for h, g in [*s.by_harness.items(), ("All", s.overall)]:
        st = g.states
        total = sum(x.pct or 0.0 for x in (st.joint_clean, st.h_only, st.a_only, st.joint_failure))
        rows.append([h, str(g.runs), sh(st.joint_clean), sh(st.h_only), sh(st.a_only), sh(st.joint_failure),
                     f"{total:.1f}" if g.runs else NA])
    return Table("states", "Four exclusive states", ["Harness", "Runs", "Joint-clean", "H-only", "A-only",
                                                     "Joint failure", "Sum %"], rows,
                 "From the raw failed sets F_H and Z_A (an unscored criterion counts as not passed). "
                 "H-only = task succeeded with ≥1 failed harness criterion.", numeric=set(range(1, 7)))


def links(s: CorpusSummary) -> Table:
    comps = sorted({d for g in s.by_harness.values() for d in g.links.by_component} |
                   set(s.overall.links.by_component), key=lambda d: "CEGLOTV?".find(d))
    rows = []
    for h, g in [*s.by_harness.items(), ("All", s.overall)]:
        row = [h]
        for d in comps:
            lr = g.links.by_component.get(d)
            row.append(NA if lr is None or lr.pct is None else f"{lr.pct:.1f} ({lr.linked}/{lr.joint_failures})")
        p = g.links.pooled
        row.append(NA if p.pct is None else f"{p.pct:.1f} ({p.linked}/{p.joint_failures})")
        rows.append(row)
    return Table("links", "Link activation in joint failures",
                 ["Harness", *[component_label(d) for d in comps], "Pooled"], rows,
                 "Per primary dimension d: 100·|L_d|/|J_d| (L_d/J_d), J_d = runs failing in both layers, "
                 "L_d = those with ≥1 activated candidate link (not a causal verdict). "
                 "Pooled = 100·Σ|L_d|/Σ|J_d|, not the mean of the per-dimension rates.",
                 numeric=set(range(1, len(comps) + 2)))


def attribution(s: CorpusSummary) -> Table:
    rows = []
    for h, g in [*s.by_harness.items(), ("All", s.overall)]:
        a = g.attribution
        rows.append([h, str(a.z_h_total), str(a.runs_with_z_h), str(a.bypassed_total),
                     str(a.activated_links_total), str(a.linked_agent_failures), str(a.unlinked_agent_failures),
                     sh(a.runs_with_activated_link), sh(a.runs_with_unlinked_agent_failure)])
    return Table("attribution", "Attribution sets",
                 ["Harness", "Σ|Z_H|", "Runs Z_H≠∅", "Σ|B|", "Σ|L_act|", "Linked agent fail.",
                  "Unlinked agent fail.", "Runs with link %", "Runs with unlinked %"], rows,
                 "Z_H = F_H \\ B (bypassed observations removed); agent failures split by activated links.",
                 numeric=set(range(1, 9)))


def labels(s: CorpusSummary) -> Table:
    rows = [[h, *[str(g.labels.get(lb, 0)) for lb in LABELS]] for h, g in [*s.by_harness.items(),
                                                                         ("All", s.overall)]]
    return Table("labels", "Run labels", ["Harness", *LABELS], rows,
                 "Stored run labels (SPEC §6, first matching rule) of every scored cell, including "
                 "not-admitted (apparatus_invalid) ones.", numeric=set(range(1, len(LABELS) + 1)))


def _resource_rows(groups: dict[str, GroupMetrics]) -> list[list[str]]:
    rows = []
    for k, g in groups.items():
        r = g.resources
        rows.append([k, f"{r.runs_with_usage}/{g.runs}", fk(r.mean_input_k), fk(r.mean_output_k),
                     fk(r.mean_total_k), usd(r.mean_cost_usd), f"{r.runs_costed}", r.cost_note or ""])
    return rows


_RES_HEADERS = ["Runs with usage", "Input k", "Output k", "Total k", "Mean USD", "Costed runs", "Note"]


def resources(s: CorpusSummary) -> Table:
    return Table("resources", "Resources per harness", ["Harness", *_RES_HEADERS],
                 _resource_rows({**s.by_harness, "All": s.overall}),
                 "Mean recorded agent usage per run (thousands of tokens; reasoning is inside output). "
                 f"Estimated USD from the frozen price catalogue ({s.prices.source or 'none'}"
                 + (f"; {s.prices.provenance}" if s.prices.provenance else "") + "), "
                 "input split into plain, cache read and cache write; judge calls excluded.",
                 numeric=set(range(1, 7)), wrap={7})


def resources_by_model(s: CorpusSummary) -> Table:
    return Table("resources_model", "Resources per model", ["Model", *_RES_HEADERS],
                 _resource_rows(s.by_model), numeric=set(range(1, 7)), wrap={7})


def _matrix(key: str, title: str, outer: dict[str, dict[str, GroupMetrics]], metric: str, caption: str,
            inner_label: Callable[[str], str] = str) -> Table:
    inner = sorted({k for g in outer.values() for k in g}, key=lambda k: ("CEGLOTV?".find(k), k))
    rows: list[list[str]] = []
    heat: dict[tuple[int, int], float] = {}
    for i, (h, groups) in enumerate(outer.items()):
        row = [h]
        for j, k in enumerate(inner, start=1):
            g = groups.get(k)
            v = getattr(g, metric) if g is not None else None
            if isinstance(v, Share):
                v = v.pct
            row.append(f1(v))
            if v is not None:
                heat[(i, j)] = v
        rows.append(row)
    return Table(key, title, ["Harness", *[inner_label(k) for k in inner]], rows, caption,
                 numeric=set(range(1, len(inner) + 1)), heat=heat)


def harness_by_component(s: CorpusSummary) -> Table:
    return _matrix("harness_component", "Harness Macro by harness × component", s.by_harness_component,
                   "harness_macro", "100 · mean p_H/n_H of the measured runs in each block.", component_label)


def success_by_model(s: CorpusSummary) -> Table:
    return _matrix("harness_model", "Agent success % by harness × model", s.by_harness_model, "agent_success",
                   "Fixed-model comparison: each block is one harness on one model.")


def excluded(s: CorpusSummary) -> Table:
    rows = [[c.task_id, c.model, c.harness, c.status, c.reason or ""] for c in s.cells if c.status != "measured"]
    return Table("excluded", f"Cells not in the measured population ({len(rows)})",
                 ["Task", "Model", "Harness", "Status", "Reason"], rows,
                 "Apparatus-invalid, unsupported, non-comparable, not-scored and tampered cells (files that do not "
                 "match the cell's manifest; the first one is named): counted, never dropped, never pooled.",
                 wrap={4})


def _version_label(name: str, version: str | None) -> str:
    """``claude_code`` (pin) -> ``claude_code (2.1.220)``; a named version stays ``claude_code@2.1.332``
    (with the version that ran added only when it differs from the name)."""
    _, at, named = name.partition("@")
    if not at:
        return f"{name} ({version or 'unknown'})"
    return name if version in (None, named) else f"{name} (ran {version})"


def version_diff(s: CorpusSummary) -> Table:
    """The criteria that flip between versions of one harness (only when one ran at two or more)."""
    rows: list[list[str]] = []
    compared: list[str] = []
    for d in s.version_diff:
        labels = {n: _version_label(n, v) for n, v in d.versions.items()}
        compared.append(f"{d.harness}: {' vs '.join(labels.values())} on {d.cells_compared} task × model "
                        f"pair(s), {len(d.flips)} flip(s)")
        for f in d.flips:
            states = " → ".join(f"{labels.get(n, n)}: {state}" for n, state in f.states.items())
            rows.append([d.harness, f.task_id, f.model, f.criterion, f.layer or "", states])
    caption = ("For each harness run at two or more versions in this output (the plain name is the pin): every "
               "criterion whose verdict differs between versions, per task and model ('absent': not among that "
               "version's verdicts; a 'status' row: the cell was not measured under every version, so its "
               "criteria are not compared). " + "; ".join(compared) + ".")
    return Table("version_diff", f"Version diff ({len(rows)} flips)",
                 ["Harness", "Task", "Model", "Criterion", "Layer", "Verdicts by version"], rows, caption,
                 wrap={5})


def _passk_cells(p: PassK, k: int) -> list[str]:
    last = k - 1
    return [f1(p.pass_hat[0]) if p.pass_hat else NA, f1(p.pass_hat[last]) if len(p.pass_hat) > last else NA,
            f1(p.pass_at[last]) if len(p.pass_at) > last else NA]


def _repeat_row(name: str, m: RepeatMetrics, k: int) -> list[str]:
    a = m.agreement
    agree = NA if a.pct is None else f"{a.pct:.1f} ({a.identical}/{a.cells})"
    return [name, str(m.combined.cells), str(m.runs_not_measured), *_passk_cells(m.combined, k),
            f1(m.agent.pass_hat[k - 1]) if len(m.agent.pass_hat) >= k else NA, agree, f1(a.criteria_pct),
            NA if a.mean_score_sd is None else f"{a.mean_score_sd:.2f}"]


def _repeat_headers(first: str, s: RepeatSection) -> list[str]:
    k = s.k
    return [first, "Cells", "Reps not measured", "pass^1", f"pass^{k}", f"pass@{k}", f"agent pass^{k}",
            f"{s.agreement_label.capitalize()} % (cells)", "Criteria agreeing %", "Mean SD of S"]


_REPEAT_CAPTION = ("Each cell ran up to k times (--tt-repeat k). pass^j = mean over cells of C(c,j)/C(n,j) "
                   "(all j drawn repetitions pass), pass@j = 1 − C(n−c,j)/C(n,j) (at least one does); a run "
                   "passes when S = 100 after hard gates (agent pass^k: the agent task succeeded); n = measured "
                   "repetitions of the cell, c = those passing; cells with fewer than j are left out of that j. ")


def repeats_by_harness(s: CorpusSummary) -> Table:
    """pass^k, pass@k and the agreement of repetitions per harness and for the corpus pool."""
    r = s.repeats
    assert r is not None
    names = {h: h + (" (calibration)" if is_calibration(h) else "") for h in r.by_harness}
    rows = [_repeat_row(names[h], m, r.k) for h, m in r.by_harness.items()]
    rows.append(_repeat_row("All", r.overall, r.k))
    what = ("Under the probe protocol the model is scripted: agreement below 100 % is non-determinism of the "
            "apparatus or the harness." if r.agreement_label == "determinism" else
            "Under a live protocol this is the noise floor of a single run." if r.agreement_label == "noise floor"
            else "")
    return Table("repeats", f"Repeated runs: pass^{r.k}, pass@{r.k} and {r.agreement_label}",
                 _repeat_headers("Harness", r), rows,
                 _REPEAT_CAPTION + "Agreement: cells whose repetitions give the same verdict vector (every "
                 "criterion, core and diagnostic), criterion × cell pairs in the same state in every repetition, "
                 "and the mean standard deviation of S across repetitions. " + what + _pool_note(s).replace(
                     "see its own table", "its harness rows are listed, 'All' leaves them out"),
                 numeric=set(range(1, 10)))


def repeats_by_component(s: CorpusSummary) -> Table:
    r = s.repeats
    assert r is not None
    rows = [_repeat_row(component_label(d), m, r.k) for d, m in r.by_component.items()]
    return Table("repeats_component", "Repeated runs per component", _repeat_headers("Component", r), rows,
                 "The corpus pool per primary component." + _pool_note(s), numeric=set(range(1, 10)))


def repeats_by_task(s: CorpusSummary) -> Table:
    r = s.repeats
    assert r is not None
    rows = [[f"{t} · {h}", *_repeat_row("", m, r.k)[1:]] for t, hs in r.by_task.items() for h, m in hs.items()]
    return Table("repeats_task", "Repeated runs per task and harness", _repeat_headers("Task · harness", r), rows,
                 "Over the task's models.", numeric=set(range(1, 10)))


def repeats_flips(s: CorpusSummary) -> Table:
    """The criteria whose state differed between repetitions, per harness."""
    r = s.repeats
    assert r is not None
    rows = [[h, cid, str(n), str(m.agreement.cells)] for h, m in r.by_harness.items()
            for cid, n in m.agreement.flipping.items()]
    return Table("repeats_flips", f"Criteria that did not agree across repetitions ({len(rows)})",
                 ["Harness", "Criterion", "Cells where it flipped", "Cells compared"], rows,
                 "A criterion in different states (pass / fail / unscored / absent) among the repetitions of a cell.",
                 numeric={2, 3})


def all_tables(s: CorpusSummary) -> list[Table]:
    """The summary tables in report order (the per-cell list is rendered separately); the
    calibration tables appear only when the instrument ran, the repeated-run tables only when a
    cell ran more than once, the version diff only when a harness ran at two or more versions."""
    tables = [headline(s), per_harness(s)]
    if s.calibration is not None:
        tables += [calibration(s), calibration_cells(s)]
    tables += [states(s), links(s), attribution(s), labels(s), resources(s),
               per_model(s), resources_by_model(s), per_component(s), harness_by_component(s),
               success_by_model(s)]
    if s.repeats is not None:
        tables += [repeats_by_harness(s), repeats_by_component(s), repeats_by_task(s), repeats_flips(s)]
    tables.append(excluded(s))
    if s.version_diff:
        tables.append(version_diff(s))
    return tables
