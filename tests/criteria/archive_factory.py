"""Build synthetic task packs and sealed run archives for tests (reusable by any test folder).

    from tests.criteria.archive_factory import RunBuilder, write_task_pack, tool_event, gateway_request

    pack = write_task_pack(tmp_path / "tasks", harness=[...], agent=[...], truth={...})
    run = RunBuilder(tmp_path / "out", pack)
    run.events += [tool_event("Bash", {"command": "make"}, "BUILD OK", exit_code=2)]
    run.gateway.append(gateway_request(0, tools=["Bash"], results=[("c1", "BUILD OK", True)]))
    run_dir = run.build()          # writes every file SPEC §10 lists and seals the manifest

Everything is deterministic (fixed timestamps, fixed ids) so archives can be compared byte for byte.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from tracetrial.archive import RunArchive, RunPaths
from tracetrial.redact import Redactor
from tracetrial.results import CellIdentity, ResultRecord, Summary
from tracetrial.task import TaskPack, load_task
from tracetrial.trace_io import parse_event, write_events

T0 = datetime(2026, 9, 1, 12, 0, 0, tzinfo=UTC)
GENESIS = "0" * 64

DEFAULT_SCORE_PY = '''\
"""Synthetic verifier: passes every id listed in truth["verifier_pass"], fails the rest."""


def score(ctx):
    wanted = (ctx.truth or {}).get("verifier_pass", {})
    return {cid: (bool(ok), "synthetic verifier") for cid, ok in wanted.items()}
'''


def rule_criterion(cid: str, kind: str, statement: str = "a deterministic check", **params: Any) -> dict[str, Any]:
    """A ``type: rule`` criterion dict."""
    return {"id": cid, "type": "rule", "statement": statement, "rule": {"kind": kind, **params}}


def rubric_criterion(cid: str, statement: str = "a judged check", **evidence: Any) -> dict[str, Any]:
    """A ``type: rubric`` criterion dict with an evidence selector."""
    crit: dict[str, Any] = {"id": cid, "type": "rubric", "statement": statement}
    if evidence:
        crit["evidence"] = evidence
    return crit


def write_task_pack(
    parent: Path,
    *,
    task_id: str = "E1-synthetic-check-001",
    harness: list[dict[str, Any]] | None = None,
    agent: list[dict[str, Any]] | None = None,
    links: list[dict[str, Any]] | None = None,
    truth: Any = None,
    oracle: Any = None,
    score_py: str = DEFAULT_SCORE_PY,
    workspace: dict[str, str] | None = None,
    spec: dict[str, Any] | None = None,
    extra_files: dict[str, str] | None = None,
) -> Path:
    """Write a valid task pack under ``parent/<task_id>/`` and return its folder."""
    root = parent / task_id
    if root.exists():
        shutil.rmtree(root)
    (root / "verifier").mkdir(parents=True)
    (root / "workspace").mkdir()
    task_yaml = {"id": task_id, "title": "Synthetic task", "revision": 1, "component": "E",
                 "property": "exit_code_fidelity", "surface": "terminal", "conversation": "single",
                 "budgets": {"max_tool_calls": 8}}
    task_yaml.update(spec or {})
    # Strings double-quoted as a careful pack author writes them: the sealed snapshot replaces a
    # planted secret with [REDACTED], which unquoted YAML would read as a list (the loader refuses it).
    (root / "task.yaml").write_text(yaml.safe_dump(task_yaml, sort_keys=False, default_style='"'), encoding="utf-8")
    (root / "prompt.md").write_text("Do the synthetic task.\n", encoding="utf-8")
    harness = harness or [rule_criterion("H1", "trace_event_exists", event_type="tool")]
    agent = agent or [rule_criterion("A1", "file_exists", path="out.txt")]
    h: dict[str, Any] = {"layer": "harness", "criteria": harness}
    if links:
        h["links"] = links
    (root / "verifier" / "harness_score.yaml").write_text(yaml.safe_dump(h, sort_keys=False), encoding="utf-8")
    (root / "verifier" / "agent_score.yaml").write_text(
        yaml.safe_dump({"layer": "agent", "criteria": agent}, sort_keys=False), encoding="utf-8")
    (root / "verifier" / "score.py").write_text(score_py, encoding="utf-8")
    if truth is not None:
        (root / "truth.json").write_text(json.dumps(truth, indent=1), encoding="utf-8")
    if oracle is not None:
        (root / "oracle.json").write_text(json.dumps(oracle, indent=1), encoding="utf-8")
    for rel, text in (workspace or {}).items():
        (root / "workspace" / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / "workspace" / rel).write_text(text, encoding="utf-8")
    for rel, text in (extra_files or {}).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


# ----------------------------------------------------------------- records


def tool_event(name: str, arguments: Any, content: Any, *, exit_code: int | None = None,
               is_error: bool | None = None, call_id: str | None = None, truncated: bool | None = None,
               no_result: bool = False, **envelope: Any) -> dict[str, Any]:
    """A ``tool`` event body (envelope fields are added by :class:`RunBuilder`)."""
    result = None if no_result else {"content": content, "exit_code": exit_code, "is_error": is_error,
                                     "truncated": truncated}
    return {"event_type": "tool", "tool_call": {"id": call_id or f"call-{name}", "name": name,
                                                "arguments": arguments},
            "tool_result": result, **envelope}


def event(event_type: str, **fields: Any) -> dict[str, Any]:
    """Any event body, e.g. ``event("assistant_message", content="done")``."""
    return {"event_type": event_type, **fields}


def gateway_request(index: int, *, tools: list[str | dict[str, Any]] = (), results: list[tuple[Any, ...]] = (),  # type: ignore[assignment]
                    status: int | None = 200, error: str | None = None, run_id: str = "run-0001",
                    inventory_present: bool | None = None, inventory_complete: bool = True,
                    last_user_text: str | None = None) -> dict[str, Any]:
    """One ``gateway/requests.jsonl`` record. ``results`` items: ``(id, content[, is_error[, truncated]])``."""
    decls = [t if isinstance(t, dict) else {"name": t, "type": "function", "description": f"{t} tool",
                                            "input_schema": {"type": "object"}, "namespace": None} for t in tools]
    tool_results = []
    for item in results:
        rid, content = item[0], item[1]
        is_error = item[2] if len(item) > 2 else None
        truncated = item[3] if len(item) > 3 else False
        data = content.encode("utf-8")
        tool_results.append({"id": rid, "is_error": is_error, "size": len(data),
                             "sha256": hashlib.sha256(data).hexdigest(), "content": content,
                             "content_truncated": truncated})
    fingerprint = hashlib.sha256(json.dumps(decls, sort_keys=True).encode()).hexdigest()[:16] if decls else None
    return {"index": index, "run_id": run_id, "path": "/v1/messages", "wire_format": "anthropic",
            "model": "probe", "stream": False, "started_at": (T0 + timedelta(seconds=index)).isoformat(),
            "duration_ms": 5.0, "status": status, "error": error, "tools": decls,
            "inventory_present": bool(decls) if inventory_present is None else inventory_present,
            "inventory_complete": inventory_complete, "inventory_fingerprint": fingerprint,
            "tool_results": tool_results, "usage": None, "body_sha256": "0" * 64,
            "last_user_text": last_user_text}


def ledger_lines(service: str, entries: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], str]:
    """Hash-chained ledger records (the simulator's format) and the head digest.

    ``entries`` items: ``{"kind", "tool", "arguments", "detail"}`` (missing keys are null).
    """
    prev, out = GENESIS, []
    for i, entry in enumerate(entries, start=1):
        rec = {"seq": i, "time": (T0 + timedelta(seconds=i)).isoformat().replace("+00:00", "Z"),
               "kind": entry.get("kind", "request"), "service": service, "tool": entry.get("tool"),
               "arguments": entry.get("arguments"), "detail": entry.get("detail"), "prev": prev}
        canon = json.dumps(rec, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        rec["hash"] = hashlib.sha256(canon.encode("utf-8")).hexdigest()
        prev = rec["hash"]
        out.append(rec)
    return out, prev


# ------------------------------------------------------------------- runs


@dataclass
class RunBuilder:
    """Collects a run's records and writes a sealed run directory (SPEC §10 layout)."""

    output: Path
    task_root: Path
    run_id: str = "run-0001"
    model: str = "probe"
    harness: str = "reference"
    protocol: str = "probe"
    events: list[dict[str, Any]] = field(default_factory=list)
    gateway: list[dict[str, Any]] | None = field(default_factory=list)
    probe: dict[str, Any] | None = None
    workspace: dict[str, str | bytes] = field(default_factory=dict)
    ledgers: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    native: dict[str, str] = field(default_factory=dict)
    status: str = "completed"
    trace_complete: bool = True
    structured_trace_status: str = "complete"
    lifecycle: bool = True
    result_overrides: dict[str, Any] = field(default_factory=dict)

    @property
    def task(self) -> TaskPack:
        return load_task(self.task_root)

    def paths(self) -> RunPaths:
        return RunPaths.for_cell(self.output, self.task_root.name, self.model, self.harness)

    def _events(self, task: TaskPack) -> list[dict[str, Any]]:
        bodies = list(self.events)
        if self.lifecycle:
            bodies = [event("run_started", task_id=task.id, harness=self.harness, model=self.model), *bodies,
                      event("run_finished", exit_code=0, trace_complete=self.trace_complete)]
        out = []
        for seq, body in enumerate(bodies, start=1):
            data = {"schema_version": 1, "seq": seq, "timestamp": (T0 + timedelta(seconds=seq)).isoformat(),
                    "run_id": self.run_id, **body}
            out.append(data)
        return out

    def build(self, *, seal: bool = True) -> Path:
        """Write the run directory and return it."""
        task = self.task
        paths = self.paths()
        if paths.root.exists():
            shutil.rmtree(paths.root)
        paths.make()
        archive = RunArchive(paths, Redactor())
        shutil.copytree(self.task_root, paths.private / "task" / task.id)
        shutil.copytree(self.task_root / "workspace", paths.private / "baseline")
        shutil.copytree(self.task_root / "workspace", paths.workspace)
        for rel, content in self.workspace.items():
            target = paths.workspace / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                target.write_bytes(content)
            else:
                target.write_text(content, encoding="utf-8")
        identity = CellIdentity(run_id=self.run_id, task_id=task.id, task_revision=task.spec.revision,
                                harness=self.harness, model=self.model, protocol=self.protocol)  # type: ignore[arg-type]
        result = ResultRecord(identity=identity, status=self.status)  # type: ignore[arg-type]
        if self.result_overrides:
            result = result.model_copy(update=self.result_overrides)
        archive.write_json("result.json", result)
        events = [parse_event(e) for e in self._events(task)]
        write_events(paths.events, events)
        summary = Summary(run_id=self.run_id, trace_complete=self.trace_complete,
                          structured_trace_status=self.structured_trace_status,  # type: ignore[arg-type]
                          tool_calls=sum(1 for e in events if e.event_type == "tool"))
        archive.write_json("summary.json", summary)
        if self.gateway is not None:
            lines = "".join(json.dumps(r, sort_keys=True) + "\n" for r in self.gateway)
            (paths.gateway / "requests.jsonl").write_text(lines, encoding="utf-8")
        if self.probe is not None or self.protocol == "probe":
            probe = self.probe if self.probe is not None else {
                "run_id": self.run_id, "task_id": task.id, "requests": [], "absent_capabilities": [],
                "apparatus_errors": [], "final_text": None}
            archive.write_json("gateway/probe.json", probe)
        for service, entries in self.ledgers.items():
            records, head = ledger_lines(service, entries)
            folder = paths.private / "ledgers"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{service}.jsonl").write_text(
                "".join(json.dumps(r, separators=(",", ":"), ensure_ascii=False) + "\n" for r in records),
                encoding="utf-8")
            (folder / f"{service}.jsonl.head").write_text(head + "\n", encoding="utf-8")
        for rel, text in self.native.items():
            archive.write_text(f"native/{rel}", text)
        if seal:
            archive.seal(self.run_id)
        return paths.root


# ----------------------------------------------------------------------------- tampering
def forge_clean_score(run_dir: Path) -> dict[str, Any]:
    """Rewrite a cell's ``combined_score.json`` as a consistent perfect score, the way a forger
    would: every core verdict passed, ``p = n``, ``S_H = S_A = 50``, ``S = effective_score = 100``,
    the flags and the attribution to match (the report's consistency checks all hold)."""
    path = RunPaths(run_dir).combined_score
    data = json.loads(path.read_text(encoding="utf-8"))
    for v in data["verdicts"]:
        v.update(passed=True, raw_state=1, reason="forged", bypassed=False)
    for layer, key in (("harness", "S_H"), ("agent", "S_A")):
        n = sum(1 for v in data["verdicts"] if v["layer"] == layer and v["role"] == "core")
        data[layer].update(p=n, n=n, unscored=0, score=50.0)
        data[key] = 50.0
    data.update(S=100.0, effective_score=100.0, admitted=True, combined_pass=True, agent_success=True, clean=True)
    for d in data["admission"]:
        d["ok"] = True
    data["attribution"].update(F_H=[], Z_A=[], B=[], Z_H=[], L_act=[], linked_agent_failures=[],
                               unlinked_agent_failures=[], label="clean", label_rule=7)
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8")
    return data


def flip_one_byte(path: Path, needle: bytes = b"run_id") -> None:
    """Change exactly one byte of ``path`` (the first byte of ``needle``'s first occurrence)."""
    data = bytearray(path.read_bytes())
    at = data.index(needle)
    data[at] = ord("R") if data[at] != ord("R") else ord("r")
    path.write_bytes(bytes(data))
