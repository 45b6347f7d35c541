"""The ``tracetrial`` command.

    tracetrial validate [tasks/]          lint every task pack
    tracetrial schema [--check] [FILE]    export the Trace IR JSON Schema
    tracetrial install [HARNESS ...]      install pinned harness CLIs project-locally
                                          (HARNESS@VERSION: a named version next to the pins)
    tracetrial run [pytest args ...]      run the benchmark (pytest tasks/ with the options)
    tracetrial rescore [--renormalize] OUTPUT   recompute every cell's score from its archive
                                          (--renormalize: re-derive events.json first)
    tracetrial report OUTPUT              write OUTPUT/reports/ from the archive
    tracetrial calibrate [--output DIR]   run reference + every mutant, print the discrimination table
    tracetrial gate --baseline FILE OUTPUT   compare verdicts with a stored baseline (CI regression gate)
    tracetrial export atif|otel OUTPUT    trace exports: ATIF v1.7 per cell, OTel GenAI spans (OTLP JSON)
    tracetrial release [--verify] OUTPUT  release manifest of selected runs (OUTPUT/release/manifest.json)
    tracetrial judge-gold OUTPUT --cell T/M/H --criterion ID --expect N --kind K --note TEXT
                                          add a labelled packet of a real cell to the judge gold set
    tracetrial judge-calibrate --tt-judge ALIAS [--record]   judge agreement and kappa on the gold set
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from pydantic import TypeAdapter

import tracetrial
from tracetrial.errors import TaskPackErrors, TraceTrialError

#: The committed JSON Schema of ``events.json`` (shipped with the kernel).
SCHEMA_FILE = Path(tracetrial.__file__).parent / "schema" / "trace_ir_v1.schema.json"


def trace_schema() -> dict[str, object]:
    """The JSON Schema of ``events.json`` (an array of Trace IR events)."""
    from tracetrial.trace import Event

    schema = TypeAdapter(list[Event]).json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "TraceTrial Trace IR v1 (events.json)"
    return schema


def cmd_schema(args: argparse.Namespace) -> int:
    text = json.dumps(trace_schema(), indent=1, sort_keys=True) + "\n"
    target = Path(args.file) if args.file else SCHEMA_FILE
    if args.check:
        current = target.read_text(encoding="utf-8") if target.is_file() else ""
        if current != text:
            print(f"{target} is out of date; run: tracetrial schema", file=sys.stderr)
            return 1
        print(f"{target} is up to date")
        return 0
    if args.stdout:
        sys.stdout.write(text)
        return 0
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    print(f"wrote {target}")
    return 0


def validate_packs(tasks_dir: Path) -> tuple[int, list[str]]:
    """(number of packs, problems) for every pack under ``tasks_dir``."""
    from tracetrial.task import BrokenPack, discover

    problems: list[str] = []
    if (tasks_dir / "task.yaml").is_file():  # one pack folder, e.g. tracetrial validate tasks/E1-…
        packs = [p for p in discover(tasks_dir.parent) if p.root.resolve() == tasks_dir.resolve()]
    else:
        packs = discover(tasks_dir)
    for pack in packs:
        if isinstance(pack, BrokenPack):
            problems.extend(str(e) for e in pack.error.errors)
            continue
        try:
            from criteria import validate_rubric_rules
        except ImportError:  # criteria not installed: schema checks only
            continue
        problems.extend(f"{pack.root.name}: {p}" for p in validate_rubric_rules(pack))
    return len(packs), problems


def cmd_validate(args: argparse.Namespace) -> int:
    tasks_dir = Path(args.tasks)
    if not tasks_dir.is_dir():
        print(f"error: {tasks_dir} is not a folder of task packs", file=sys.stderr)
        return 2
    count, problems = validate_packs(tasks_dir)
    for p in problems:
        print(f"  - {p}")
    if count == 0:
        print(f"error: no task packs (folders with task.yaml) under {tasks_dir}", file=sys.stderr)
        return 2
    print(f"{count} task pack(s), {len(problems)} problem(s)")
    return 1 if problems else 0


def cmd_install(args: argparse.Namespace) -> int:
    from harnesses.install import install

    return install(args.harness or None, root=Path(args.root) if args.root else None)


def cmd_run(args: argparse.Namespace, rest: Sequence[str]) -> int:
    import pytest

    tasks = Path(__file__).resolve().parent.parent / "tasks"
    return int(pytest.main([str(tasks), *rest]))


def cmd_rescore(args: argparse.Namespace) -> int:
    """Re-score every cell whose seal verifies; name every tampered, half-written or failed
    cell with its reason (stderr) and exit 1 when there is any."""
    from criteria.rescore import rescore_archive
    from tracetrial.archive import repetition_roots

    output = Path(args.output)
    if not (output / "traces").is_dir():
        print(f"error: {output} has no traces/ folder (not a --tt-output archive)", file=sys.stderr)
        return 2
    judge = None
    if args.judge:
        from criteria.judge import make_judge

        judge = make_judge(args.judge)
    report = rescore_archive(output, judge=judge, renormalize=args.renormalize)
    for cell in report.bad:
        print(f"error: {cell}", file=sys.stderr)
    what = "re-derived events.json and rescored" if args.renormalize else "rescored"
    reps = len(repetition_roots(output))
    print(f"{what} {len(report.written)} cell(s) under {args.output}"
          + (f" over {reps} repetitions" if reps > 1 else "") + f" ({report.counts()})")
    if report.bad:
        print(f"error: {len(report.bad)} cell(s) not rescored; tampered and half-written cells are kept as found "
              "(inspect them, or re-run them with --tt-rerun)", file=sys.stderr)
        return 1
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from reports import write_reports

    paths = write_reports(Path(args.output), include_calibration=args.include_calibration)
    written = [paths.summary_json, paths.summary_md, paths.html, *([paths.heatmap] if paths.heatmap else [])]
    print(f"wrote {', '.join(p.name for p in written)} and {len(paths.pages)} criteria page(s) in {paths.root}")
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    from ci.sampling import sample_ids
    from harnesses.reference.adapter import ReferenceAdapter
    from harnesses.reference.mutants import MUTANTS
    from reports.calibration import calibrate, format_table
    from reports.calibration_record import load_record, merge, stale_tasks, write_record
    from tracetrial.task import BrokenPack, TaskPack, discover

    tasks_dir = Path(args.tasks)
    output = Path(args.output)
    mutants = sorted(MUTANTS)
    discovered = discover(tasks_dir)
    broken = [p for p in discovered if isinstance(p, BrokenPack)]
    packs = [p for p in discovered if isinstance(p, TaskPack)]
    if args.only:
        wanted = {t.strip() for t in args.only.split(",") if t.strip()}
        unknown = sorted(wanted - {p.id for p in packs} - {p.id for p in broken})
        if unknown:
            print(f"error: --only names no pack under {tasks_dir}: {', '.join(unknown)}", file=sys.stderr)
            return 2
        all_packs, packs = packs, [p for p in packs if p.id in wanted]
        broken = [p for p in broken if p.id in wanted]
    else:
        all_packs = packs
    record_path = Path(args.record) if args.record else None
    reference_version = ReferenceAdapter().version()
    record = load_record(record_path) if record_path else None
    if record is None or args.full_matrix:
        to_run = [p.id for p in packs]
    else:
        to_run = stale_tasks(record, packs, reference_version, mutants)
        if args.sample:
            # Unchanged packs can still drift when the apparatus they run on changes (probe,
            # criteria, gateway): re-measure a few of them too, chosen by the seed.
            to_run = sorted({*to_run, *sample_ids([p.id for p in packs if p.id not in to_run],
                                                    args.sample, args.sample_seed)})
    if record is not None:
        print(f"calibration record {record_path}: {len(packs) - len(to_run)} task(s) unchanged "
              f"(pack and reference {reference_version} as recorded), {len(to_run)} to measure"
              + (" (--full-matrix)" if args.full_matrix else ""))
    if to_run and not args.report_only:
        import pytest

        variants = ",".join(["reference", *(f"reference+{m}" for m in mutants)])
        # A mutant whose defect needs what a pack lacks (MCP, a sub-agent, ask-user, a deny rule, a
        # resumed turn) behaves exactly like the faithful harness there: not run, reported
        # not_applicable (cross-checked against the faithful run's events).
        argv = [str(tasks_dir), f"--tt-harness={variants}", "--tt-model=probe", f"--tt-output={output}", "-q",
                "-p", "no:cacheprovider", "--tt-prune-mutants"]
        if len(to_run) < len(discovered):
            argv += ["-k", " or ".join(to_run)]
        if args.workers:
            argv += ["-n", str(args.workers)]
        if args.rerun:
            argv.append("--tt-rerun")
        # Red cells are expected here (mutants must fail); the verdict is the table below.
        pytest.main(argv)
    report = calibrate(output, [p for p in packs if p.id in set(to_run)], mutants,
                       reference_version=reference_version)
    if record is not None and record_path is not None:
        # every pack of the suite: the ones --only leaves out keep their recorded entries
        updated, report = merge(record, report, all_packs, reference_version, mutants)
        if args.only:
            chosen = {p.id for p in packs}
            # left as recorded, stale or not: --only measures nothing else, so it judges nothing else
            for task_id, entry in record.tasks.items():
                if task_id not in chosen and task_id in {p.id for p in all_packs}:
                    updated.tasks.setdefault(task_id, entry)
            report.rows = [r for r in report.rows if r.task in chosen]
        write_record(record_path, updated)
    print("\n".join(format_table(report, only_nonempty=not args.full)))
    for pack in broken:
        print(f"broken pack {pack.id}: {pack.error}")
    return 0 if report.ok and not broken else 1


def cmd_gate(args: argparse.Namespace) -> int:
    from ci.command import gate

    if args.cells_only and not args.update:
        print("error: --cells-only only applies with --update", file=sys.stderr)
        return 2
    return gate(Path(args.baseline), Path(args.output), update=args.update,
                allow_version_change=args.allow_version_change, cells_only=args.cells_only)


def cmd_export(args: argparse.Namespace) -> int:
    """``tracetrial export atif|otel OUTPUT``: trace exports from the archive alone."""
    from reports.export import export_atif, export_otel

    output = Path(args.output)
    if not (output / "traces").is_dir():
        print(f"error: {output} has no traces/ folder (not a --tt-output archive)", file=sys.stderr)
        return 2
    if args.format == "atif":
        outcome = export_atif(output, Path(args.out) if args.out else None)
        what = f"exported {len(outcome.written)} ATIF trajectory file(s)"
    else:
        target = Path(args.out) if args.out else output / "exports" / "otel" / "traces.otlp.json"
        outcome = export_otel(output, target, content=args.content)
        what = f"exported {outcome.cells} cell(s) as OTLP JSON to {target}" + (" (with redacted content)" if args.content else "")
    for root, problem in outcome.failed:
        print(f"error: {problem}", file=sys.stderr)
    print(what + (f"; {len(outcome.failed)} cell(s) failed" if outcome.failed else ""))
    return 1 if outcome.failed else 0


def cmd_release(args: argparse.Namespace) -> int:
    """``tracetrial release [--verify] OUTPUT``: write or verify a release manifest."""
    import hashlib
    from datetime import UTC, datetime

    from reports.release import (
        DEFAULT_RELEASE,
        STAGES,
        ReleaseError,
        build_release,
        verify_release,
        write_release,
    )

    output = Path(args.output)
    target = Path(args.out) if args.out else output / DEFAULT_RELEASE
    calibration = Path(args.calibration) if args.calibration else None
    if not (output / "traces").is_dir():
        print(f"error: {output} has no traces/ folder (not a --tt-output archive)", file=sys.stderr)
        return 2
    if args.verify:
        check = verify_release(target, output, calibration=calibration)
        for problem in check.problems:
            print(f"error: {problem}", file=sys.stderr)
        if check.manifest is None:
            return 2
        if check.problems:
            print(f"release {target}: {len(check.problems)} problem(s); the archive no longer matches the release",
                  file=sys.stderr)
            return 1
        digest = hashlib.sha256(target.read_bytes()).hexdigest()
        print(f"verified {target}: {len(check.manifest.runs)} run(s), {check.files} file(s) unchanged "
              f"(sha256 {digest})")
        return 0

    def split(value: str | None) -> list[str] | None:
        return value.split(",") if value else None

    try:
        manifest = build_release(output, calibration=calibration, tasks=split(args.tasks),
                                 harnesses=split(args.harnesses), models=split(args.models),
                                 generated_at=datetime.now(UTC).isoformat(timespec="seconds"))
        digest = write_release(manifest, target, output)
    except ReleaseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    c = manifest.counts
    stages = ", ".join(f"{c[f'tasks_{s}']} {s}" for s in reversed(STAGES) if c.get(f"tasks_{s}"))
    print(f"wrote {target}: {c['evaluated']} evaluated + {c['calibration']} calibration run(s), {c['files']} file(s), "
          f"{c['tasks']} task(s) ({stages or 'none authored'}); sha256 {digest}")
    return 0


def cmd_images(args: argparse.Namespace) -> int:
    """``tracetrial images build|list``: the docker sandbox's local images."""
    from apparatus.sandbox.docker_backend import engine_reason
    from apparatus.sandbox.images import ImageError, build_images, image_tags

    tags = image_tags()
    if args.action == "list":
        print(f"base:      {tags.base}\nharnesses: {tags.harnesses}")
    reason = engine_reason()
    if reason:
        print(f"error: {reason}", file=sys.stderr)
        return 2 if args.action == "build" else 1
    import docker

    client = docker.from_env(timeout=600)
    if args.action == "list":
        for tag in (tags.base, tags.harnesses):
            try:
                img = client.images.get(tag)
                print(f"{tag}: present ({img.short_id}, {img.attrs.get('Size', 0) / 1e6:.0f} MB)")
            except docker.errors.ImageNotFound:
                print(f"{tag}: not built (run: tracetrial images build)")
        return 0
    started = time.monotonic()
    try:
        images = build_images(client, force=args.force, log=lambda msg: print(f"  {msg}", flush=True))
    except ImageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"images ready in {time.monotonic() - started:.1f}s: {images.base}, {images.harnesses} ({images.harnesses_id[:19]})")
    return 0


def cmd_judge_gold(args: argparse.Namespace) -> int:
    """Add one labelled packet of an archived cell to the gold set (replacing an item of the same id)."""
    from criteria.judge_calibration import (
        GoldError,
        GoldSet,
        gold_item_from_archive,
        load_gold,
        save_gold,
    )
    from tracetrial.task import load_task

    gold_path = Path(args.gold)
    gold = load_gold(gold_path) if gold_path.is_file() else GoldSet()
    parts = args.cell.split("/")
    if len(parts) != 3 or not all(parts):
        raise GoldError(f"--cell {args.cell!r}: expected TASK/MODEL/HARNESS")
    task_dir = Path(args.tasks) / parts[0]
    if not (task_dir / "task.yaml").is_file():
        raise GoldError(f"no task pack {parts[0]!r} under {args.tasks}")
    run_dir = Path(args.output) / "traces" / args.cell
    item = gold_item_from_archive(load_task(task_dir), run_dir, args.cell, args.criterion, expected=args.expect,
                                  kind=args.kind, note=args.note, item_id=args.id)
    items = [i for i in gold.items if i.id != item.id] + [item]
    save_gold(GoldSet(items=sorted(items, key=lambda i: i.id)), gold_path)
    print(f"gold item {item.id}: {item.layer} state {item.expected} ({item.kind}), packet of "
          f"{item.packet.get('returned')} record(s); {len(items)} item(s) in {gold_path}")
    return 0


def cmd_judge_calibrate(args: argparse.Namespace) -> int:
    """Agreement and Cohen's kappa of a judge on the gold set; exit 0 calibrated, 1 not, 2 unusable."""
    from criteria.judge import make_judge
    from criteria.judge_calibration import (
        calibrate_judge,
        load_calibrations,
        load_gold,
        render,
        write_calibrations,
    )

    gold = load_gold(Path(args.gold))
    for problem in gold.coverage_problems():
        print(f"warning: {problem}", file=sys.stderr)
    judge = make_judge(args.judge)
    if judge is None:
        print("error: --tt-judge names no judge (a models.yaml alias, a LiteLLM model, or cassette:FILE)",
              file=sys.stderr)
        return 2
    cal = calibrate_judge(gold, judge, args.judge)
    print(render(cal))
    if args.json:
        Path(args.json).write_text(cal.model_dump_json(indent=1, by_alias=True) + "\n", encoding="utf-8")
    if args.record:
        record_path = Path(args.record)
        write_calibrations(load_calibrations(record_path), cal, record_path)
        print(f"recorded in {record_path}")
    return 0 if cal.calibrated else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tracetrial", description="TraceTrial harness benchmark")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("validate", help="lint every task pack")
    p.add_argument("tasks", nargs="?", default="tasks")
    p.set_defaults(func=cmd_validate)
    p = sub.add_parser("schema", help="export the Trace IR JSON Schema")
    p.add_argument("file", nargs="?")
    p.add_argument("--check", action="store_true", help="fail when the committed schema is stale")
    p.add_argument("--stdout", action="store_true")
    p.set_defaults(func=cmd_schema)
    p = sub.add_parser("install", help="install pinned harness CLIs into .tt-tools/ (NAME@VERSION: a named "
                                          "version into .tt-tools/versions/, next to the pins)")
    p.add_argument("harness", nargs="*", help="claude_code, codex, openclaw, deepseek, reference, or "
                                               "<name>@<version> (e.g. claude_code@2.1.332); none: every pin")
    p.add_argument("--root", help="install folder (default: <repo>/.tt-tools)")
    p.set_defaults(func=cmd_install)
    p = sub.add_parser("rescore", help="recompute scores from an archive",
                       description="Re-scores every cell whose seal verifies and re-seals it. Tampered and "
                                   "half-written cells are named (stderr), not scored and left as found; "
                                   "exit 1 when there is any, 2 when OUTPUT is not an archive.")
    p.add_argument("output")
    p.add_argument("--judge")
    p.add_argument("--renormalize", action="store_true",
                   help="re-derive each cell's events.json from its archived native records with the "
                        "current normalizer, then rescore (after a normalizer fix; no agent is re-run)")
    p.set_defaults(func=cmd_rescore)
    p = sub.add_parser("report", help="write <output>/reports/")
    p.add_argument("output")
    p.add_argument("--include-calibration", action="store_true",
                   help="pool the calibration instrument (reference and its mutants) into the corpus figures "
                        "(All rows, per model, per component); by default it has its own section only")
    p.set_defaults(func=cmd_report)
    p = sub.add_parser("calibrate", help="reference harness + mutants over the suite; discrimination table")
    p.add_argument("--tasks", default="tasks")
    p.add_argument("--output", default="outputs/calibration")
    p.add_argument("--only", metavar="ID[,ID]", help="calibrate only these packs (others are left as recorded)")
    p.add_argument("-n", "--workers", type=int, default=0, help="pytest-xdist workers")
    p.add_argument("--rerun", action="store_true", help="re-run finished cells")
    p.add_argument("--report-only", action="store_true", help="only read an existing archive")
    p.add_argument("--full", action="store_true", help="list every cell, not only those with flips or problems")
    p.add_argument("--record", help="incremental: a calibration record (e.g. ci/calibration/probe.json); only "
                                    "tasks whose pack or reference-harness digest changed are run, the record "
                                    "is updated")
    p.add_argument("--full-matrix", action="store_true", help="with --record: re-run every task")
    p.add_argument("--sample", type=int, default=0, metavar="K",
                   help="with --record: also re-measure K unchanged tasks (apparatus drift check)")
    p.add_argument("--sample-seed", default="0", help="which K tasks --sample picks (e.g. the commit id)")
    p.set_defaults(func=cmd_calibrate)
    p = sub.add_parser("gate", help="compare an output's verdicts with a stored baseline; exit 1 on regressions",
                       description="Exit codes: 0 no regression, 1 tampered/regressed/vanished/unmeasured cells, "
                                   "2 unusable inputs, 3 harness version differs from the baseline's.")
    p.add_argument("output", help="a session's archive folder (--tt-output)")
    p.add_argument("--baseline", required=True, help="tt-baseline/1 file, e.g. ci/baselines/probe.json")
    p.add_argument("--update", action="store_true",
                   help="rewrite the baseline from the output (cells of the harnesses in the output)")
    p.add_argument("--allow-version-change", action="store_true",
                   help="compare even when a harness version differs from the baseline's (labelled)")
    p.add_argument("--cells-only", action="store_true",
                   help="with --update: replace only the output's cells (e.g. new task packs), keep the rest; "
                        "refused when a harness ran at another version than the recorded one")
    p.set_defaults(func=cmd_gate)
    p = sub.add_parser("images", help="build or list the docker sandbox's local images (no registry)")
    p.add_argument("action", choices=["build", "list"])
    p.add_argument("--force", action="store_true", help="rebuild even when the tags exist")
    p.set_defaults(func=cmd_images)
    p = sub.add_parser("export", help="export traces: ATIF v1.7 trajectories or OpenTelemetry GenAI spans",
                       description="atif: one trajectory.json per cell, by default at "
                                   "OUTPUT/exports/atif/<task>/<model>/<harness>/trajectory.json (never inside a sealed cell), "
                                   "with --out DIR at DIR/<task>/<model>/<harness>/trajectory.json. otel: one OTLP JSON "
                                   "file of every cell's spans (default OUTPUT/exports/otel/traces.otlp.json). "
                                   "Exit 1 when a cell could not be read.")
    p.add_argument("format", choices=["atif", "otel"])
    p.add_argument("output", help="a session's archive folder (--tt-output)")
    p.add_argument("--out", help="atif: a folder mirroring traces/; otel: the file to write")
    p.add_argument("--content", action="store_true",
                   help="otel: include message and tool content (Opt-In attributes), redacted")
    p.set_defaults(func=cmd_export)
    p = sub.add_parser("release", help="write (or --verify) a release manifest of selected runs",
                       description="Writes OUTPUT/release/manifest.json (tt-release/1): every selected run with its "
                                   "task revision, resolved config, harness version, artifact paths and the SHA-256 "
                                   "of every file, and each task's protocol stage (reports/release.py). Exit 1 when "
                                   "a selected cell does not match its seal. --verify re-hashes every listed file, "
                                   "re-checks every cell's seal and re-derives the manifest: exit 1 naming each "
                                   "changed or missing file, 2 when there is no readable manifest.")
    p.add_argument("output", help="a session's archive folder (--tt-output)")
    p.add_argument("--verify", action="store_true", help="check the archive against an existing release manifest")
    p.add_argument("--out", help="the manifest file (default OUTPUT/release/manifest.json)")
    p.add_argument("--calibration", metavar="DIR", help="archive with the reference/mutant runs that audit the "
                                                         "tasks (default: OUTPUT itself)")
    p.add_argument("--tasks", metavar="ID[,ID]", help="only these tasks")
    p.add_argument("--harnesses", metavar="NAME[,NAME]", help="only these evaluated harnesses")
    p.add_argument("--models", metavar="ALIAS[,ALIAS]", help="only these models (evaluated runs)")
    p.set_defaults(func=cmd_release)
    p = sub.add_parser("judge-gold", help="add a labelled packet of an archived cell to the judge gold set",
                       description="Builds the packet a run would give the judge for CRITERION (a rubric criterion "
                                   "of the pack) over the archived cell, and stores it with the state a careful "
                                   "reader assigns (--expect) and why (--note).")
    p.add_argument("output", help="a session's archive folder (--tt-output)")
    p.add_argument("--cell", required=True, metavar="TASK/MODEL/HARNESS")
    p.add_argument("--criterion", required=True)
    p.add_argument("--expect", required=True, type=int, help="agent 0|1; harness 0|1|2|3")
    p.add_argument("--kind", required=True, help="the rubric kind: final_reply, deliverable, notice, ...")
    p.add_argument("--note", required=True, help="what in the packet decides the state")
    p.add_argument("--id", help="item id (default TASK/CRITERION/HARNESS)")
    p.add_argument("--gold", default="ci/judge/gold.json")
    p.add_argument("--tasks", default="tasks")
    p.set_defaults(func=cmd_judge_gold)
    p = sub.add_parser("judge-calibrate", help="agreement and Cohen's kappa of a judge on the gold set",
                       description="Asks the judge about every gold item with the run's own prompt and strict "
                                   "parser; prints agreement and kappa per layer and per kind. Exit 0 when every "
                                   "layer reaches 90 %% agreement (calibrated), 1 when not, 2 on unusable inputs.")
    p.add_argument("--tt-judge", "--judge", dest="judge", required=True,
                   help="a models.yaml alias (e.g. deepseek-v4-flash), a LiteLLM model, or cassette:FILE")
    p.add_argument("--gold", default="ci/judge/gold.json")
    p.add_argument("--record", nargs="?", const="ci/judge/calibrations.json", default=None,
                   help="store the result as the judge's calibration (default ci/judge/calibrations.json); the "
                        "reports label a judge's semantic verdicts uncalibrated until it is recorded calibrated")
    p.add_argument("--json", metavar="FILE", help="also write the full result (every item) as JSON")
    p.set_defaults(func=cmd_judge_calibrate)
    p = sub.add_parser("run", help="run the cells (extra arguments go to pytest)")
    p.set_defaults(func=None)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if argv[:1] == ["run"]:
        return cmd_run(argparse.Namespace(), argv[1:])
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except (TraceTrialError, TaskPackErrors) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
