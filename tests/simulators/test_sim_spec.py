"""The service format: validation messages, templates, seeded values, engine semantics."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from apparatus.simulators import (
    Ledger,
    SimulatorConfigError,
    TemplateError,
    derive_value,
    load_service,
    read_ledger,
)
from apparatus.simulators.engine import ServiceRuntime
from apparatus.simulators.expr import Scope, holds, render
from tracetrial.task import SimulatorSpec
from tracetrial.values import CODE_ALPHABET, ValueSpec


def _service(tmp_path: Path, body: str, caps: dict[str, int] | None = None,
             module: str | None = None) -> tuple[Path, SimulatorSpec]:
    (tmp_path / "simulators").mkdir(exist_ok=True)
    (tmp_path / "simulators" / "svc.yaml").write_text(textwrap.dedent(body))
    if module is not None:
        (tmp_path / "simulators" / "svc.py").write_text(textwrap.dedent(module))
    return tmp_path, SimulatorSpec(name="svc", service="simulators/svc.yaml", caps=caps or {})


def _problems(tmp_path: Path, body: str, **kw: object) -> list[str]:
    with pytest.raises(SimulatorConfigError) as info:
        load_service(*_service(tmp_path, body, **kw))  # type: ignore[arg-type]
    return info.value.problems


def test_invalid_definitions_name_file_field_and_fix(tmp_path: Path) -> None:
    problems = _problems(tmp_path, """
        tools:
          - name: a
            input_schema: {type: object}
            result: "{{ args.x | nope }}"
          - name: a
            input_schema: {type: object}
            text: "{{ args."
          - name: b
            input_schema: {type: object}
            effects: [{set: "tickets.x", value: 1}]
            result: {}
          - name: c
            input_schema: {type: array}
            result: {}
          - name: d
            input_schema: {type: object}
            handler: go
        """, caps={"zz": 1})
    text = "\n".join(problems)
    assert "svc.yaml, field 'tools.2.effects.0': 'tickets.x' is not a state path" in text
    assert "svc.yaml, field 'tools.3': input_schema must have type: object at the root" in text
    assert len(problems) == 2  # schema errors stop before the static checks

    problems = _problems(tmp_path, """
        tools:
          - name: a
            input_schema: {type: object}
            result: "{{ args.x | nope }}"
          - name: a
            input_schema: {type: object}
            text: "{{ args."
          - name: d
            input_schema: {type: object}
            handler: go
          - name: e
            visible_when: "{{ args.flag }}"
            effects: [{set: "state.x[nope.y]", value: "{{ values.v }}"}]
            result: {}
        """, caps={"zz": 1})
    text = "\n".join(problems)
    assert "svc.yaml, field 'tools.3' (e).visible_when: ['args'] cannot be used here" in text
    assert "(e).effects.0.set: ['nope'] cannot be used here" in text
    assert "unknown filter 'nope'" in text
    assert "tool name 'a' is declared twice" in text
    assert "unbalanced" in text
    assert "caps.zz': no tool 'zz'" in text
    assert "cases name handlers ['go'] but no 'module' is declared" in text


def test_module_handlers_are_checked(tmp_path: Path) -> None:
    problems = _problems(tmp_path, """
        module: svc.py
        tools:
          - {name: a, handler: present}
          - {name: b, handler: absent}
        """, module="def present(call):\n    return {}\n")
    assert problems == ["simulators/svc.yaml: handler 'absent' is not a function in svc.py"]
    assert not (tmp_path / "simulators" / "__pycache__").exists()  # nothing written into the pack


def test_values_are_seeded_and_well_formed() -> None:
    spec = ValueSpec(kind="code", length=8, prefix="ESC-", count=12)
    a = derive_value("seed-1", spec, service="tickets", name="codes")
    assert a == derive_value("seed-1", spec, service="tickets", name="codes")
    assert a != derive_value("seed-2", spec, service="tickets", name="codes")
    assert a != derive_value("seed-1", spec, service="billing", name="codes")
    assert len(a) == 12 and len(set(a)) == 12
    assert all(v.startswith("ESC-") and len(v) == 12 and set(v[4:]) <= set(CODE_ALPHABET) for v in a)
    n = derive_value("s", ValueSpec(kind="int", min=5, max=7), service="x", name="n")
    assert 5 <= n <= 7
    assert len(derive_value("s", ValueSpec(kind="uuid"), service="x", name="u")) == 36
    with pytest.raises(ValueError):
        ValueSpec(kind="choice")


def test_templates_and_conditions() -> None:
    scope = Scope({"args": {"id": "T-1"}, "values": {"code": "ABC"},
                   "state": {"t": {"T-1": {"status": "open", "tags": ["a", "b"]}},
                             "rows": [{"id": 1, "v": "x"}, {"id": 2, "v": "y"}]}})
    assert render("{{ state.t[args.id] }}", scope) == {"status": "open", "tags": ["a", "b"]}
    assert render("{{ state.t[args.id].tags | length }}", scope) == 2  # raw type kept
    assert render("#{{ state.t[args.id].tags[-1] }} {{ values.code }}", scope) == "#b ABC"
    assert scope.touched == {"code"}
    assert render("{{ state.rows | find('id', 2) }}", scope) == {"id": 2, "v": "y"}
    assert render("{{ state.rows | pluck('v') }}", scope) == ["x", "y"]
    assert render("{{ state.nope | default('-') }}", scope) == "-"
    with pytest.raises(TemplateError, match=r"state\.t\.T-9 not found"):
        render("{{ state.t.T-9.status }}", scope)
    assert holds({"exists": "{{ state.t[args.id] }}"}, scope)
    assert not holds({"exists": "{{ state.t.T-9 }}"}, scope)
    assert holds({"all": [{"equals": ["{{ state.t[args.id].status }}", "open"]},
                          {"in": ["a", "{{ state.t[args.id].tags }}"]},
                          {"not": {"gt": ["{{ state.rows | length }}", 5]}}]}, scope)
    assert not holds("{{ state.missing }}", scope)


def test_engine_effect_failure_commits_nothing(tmp_path: Path) -> None:
    root, sim = _service(tmp_path, """
        state: {items: {}, n: 0}
        tools:
          - name: bump
            input_schema: {type: object, properties: {id: {type: string}}, required: [id]}
            effects:
              - {increment: state.n}
              - {delete: "state.items[args.id]"}
            result: {ok: true}
        """)
    rt = ServiceRuntime(load_service(root, sim), tmp_path / "state", Ledger(tmp_path / "l.jsonl", "svc"), "s")
    out = rt.call_tool("bump", {"id": "x"})  # items.x does not exist: an authoring fault
    assert out.is_error and out.code == "INTERNAL_SIMULATOR_ERROR"
    assert "delete 'state.items[args.id]': nothing there" in out.text
    doc = json.loads((tmp_path / "state" / "state.json").read_text())
    assert doc["state"] == {"items": {}, "n": 0}  # the increment before the failure was not kept
    assert doc["served"] == {"bump": 1}
    errors = [r for r in read_ledger(tmp_path / "l.jsonl") if r["kind"] == "error"]
    assert errors[0]["detail"]["apparatus"] is True
    assert not [r for r in read_ledger(tmp_path / "l.jsonl") if r["tool"] == "bump" and r["kind"] == "transition"]
