"""``{{ ... }}`` templates, conditions and state paths of the service format.

A template is any YAML value; strings in it may hold expressions::

    "{{ state.tickets[args.id] }}"           whole string: the raw value (any JSON type)
    "ticket {{ args.id }} is {{ state.tickets[args.id].status }}"   interpolated text

An expression is a path with optional filters::

    path    := root ('.' key | '[' (literal | path) ']')*
    expr    := path ('|' filter ('(' arg (',' arg)* ')')?)*
    arg     := literal | path          literal := 12 | 1.5 | 'text' | "text" | true | false | null

Roots are given by the caller (``args``, ``state``, ``before``, ``values``,
``issued``, ``call``, ``session``). Filters: ``length``, ``json``, ``keys``,
``values``, ``first``, ``last``, ``upper``, ``lower``, ``str``,
``default(x)``, ``where(field, value)``, ``find(field, value)``,
``pluck(field)``, ``slice(start, count)``.

An undefined path evaluates to a :class:`Missing`; rendering a result fails on it
(with the path that was missing), conditions treat it as false.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from apparatus.simulators.errors import TemplateError

_TOKEN = re.compile(r"""\s*(?:(?P<num>-?\d+\.\d+)|(?P<word>[A-Za-z0-9_-]+)|(?P<str>'[^']*'|"[^"]*")|(?P<op>[.\[\](),|]))""")
_FULL = re.compile(r"^\s*\{\{(?P<expr>(?:(?!\{\{|\}\}).)*)\}\}\s*$", re.DOTALL)
_PART = re.compile(r"\{\{(?P<expr>(?:(?!\{\{|\}\}).)*)\}\}", re.DOTALL)


@dataclass(frozen=True)
class Missing:
    """An undefined value; ``where`` says which path was not found."""

    where: str

    def __bool__(self) -> bool:
        return False


@dataclass(frozen=True)
class Lit:
    value: Any


@dataclass(frozen=True)
class Path:
    root: str
    steps: tuple[str | int | Lit | Path, ...]
    text: str


@dataclass(frozen=True)
class Filter:
    name: str
    args: tuple[Lit | Path, ...]


@dataclass(frozen=True)
class Expr:
    path: Path | Lit
    filters: tuple[Filter, ...]
    text: str


@dataclass
class Scope:
    """The roots an expression can read, plus which ``values`` it touched."""

    roots: Mapping[str, Any]
    touched: set[str] = field(default_factory=set)


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise TemplateError(f"cannot parse {text!r} at position {pos}: unexpected {text[pos:pos + 10]!r}")
        kind = m.lastgroup or ""
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


def _literal(kind: str, tok: str) -> Lit | None:
    if kind == "str":
        return Lit(tok[1:-1])
    if kind == "num":
        return Lit(float(tok))
    if tok in ("true", "false", "null"):
        return Lit({"true": True, "false": False, "null": None}[tok])
    if re.fullmatch(r"-?\d+", tok):
        return Lit(int(tok))
    return None


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.toks = _tokens(text)
        self.i = 0

    def peek(self) -> tuple[str, str] | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, value: str | None = None) -> tuple[str, str]:
        tok = self.peek()
        if tok is None or (value is not None and tok[1] != value):
            want = f"{value!r}" if value else "more"
            raise TemplateError(f"cannot parse {self.text!r}: expected {want}, got "
                                f"{tok[1] if tok else 'the end'!r}")
        self.i += 1
        return tok

    def operand(self) -> Lit | Path:
        kind, tok = self.take()
        lit = _literal(kind, tok)
        if lit is not None:
            return lit
        if kind != "word" or not re.fullmatch(r"[A-Za-z_]\w*", tok):
            raise TemplateError(f"cannot parse {self.text!r}: {tok!r} is not a name or a literal")
        start = self.i - 1
        steps: list[str | int | Lit | Path] = []
        while (nxt := self.peek()) is not None and nxt[1] in (".", "["):
            self.take()
            if nxt[1] == ".":
                k, key = self.take()
                if k == "num":  # items.0.1 lexes as '0.1'
                    steps.extend(int(p) for p in key.split("."))
                elif k == "word":
                    steps.append(int(key) if re.fullmatch(r"-?\d+", key) else key)
                else:
                    raise TemplateError(f"cannot parse {self.text!r}: bad key {key!r} after '.'")
            else:
                steps.append(self.operand())
                self.take("]")
        text = "".join(t for _, t in self.toks[start:self.i])
        return Path(tok, tuple(steps), text)

    def expr(self) -> Expr:
        head = self.operand()
        filters: list[Filter] = []
        while self.peek() is not None and self.peek()[1] == "|":  # type: ignore[index]
            self.take("|")
            _kind, name = self.take()
            if name not in FILTERS:
                raise TemplateError(f"unknown filter {name!r} in {self.text!r}; use one of {sorted(FILTERS)}")
            args: list[Lit | Path] = []
            if self.peek() is not None and self.peek()[1] == "(":  # type: ignore[index]
                self.take("(")
                while True:
                    args.append(self.operand())
                    if self.take()[1] == ")":
                        break
            filters.append(Filter(name, tuple(args)))
        if self.peek() is not None:
            raise TemplateError(f"cannot parse {self.text!r}: unexpected {self.peek()[1]!r}")  # type: ignore[index]
        return Expr(head, tuple(filters), self.text.strip())


@lru_cache(maxsize=4096)
def parse(text: str) -> Expr:
    """Parse an expression (the text between ``{{`` and ``}}``)."""
    if not text.strip():
        raise TemplateError("empty expression '{{ }}'")
    return _Parser(text).expr()


def parse_path(text: str) -> Path:
    """Parse a state path (``state.tickets[args.id].status``): no filters, root ``state``."""
    expr = parse(text)
    if expr.filters or not isinstance(expr.path, Path) or expr.path.root != "state":
        raise TemplateError(f"{text!r} is not a state path; write e.g. state.tickets[args.id].status")
    return expr.path


def _step(container: Any, key: Any, where: str) -> Any:
    if isinstance(container, Missing):
        return container
    if isinstance(container, Mapping):
        if key in container:
            return container[key]
        if isinstance(key, int) and str(key) in container:
            return container[str(key)]
        return Missing(where)
    if isinstance(container, list) and isinstance(key, int) and not isinstance(key, bool):
        return container[key] if -len(container) <= key < len(container) else Missing(where)
    if isinstance(container, list) and isinstance(key, str) and re.fullmatch(r"-?\d+", key):
        return _step(container, int(key), where)
    return Missing(where)


def _key(step: str | int | Lit | Path, scope: Scope) -> Any:
    if isinstance(step, Lit):
        return step.value
    if isinstance(step, Path):
        return eval_operand(step, scope)
    return step


def eval_operand(op: Lit | Path, scope: Scope) -> Any:
    if isinstance(op, Lit):
        return op.value
    if op.root not in scope.roots:
        raise TemplateError(f"unknown name {op.root!r} in {op.text!r}; available: {sorted(scope.roots)}")
    value = scope.roots[op.root]
    walked = op.root
    for i, step in enumerate(op.steps):
        key = _key(step, scope)
        if op.root == "values" and i == 0:
            scope.touched.add(str(key))
        walked += f"[{key!r}]" if not isinstance(key, str) else f".{key}"
        value = _step(value, key, walked)
    return value


def _where(items: Any, fld: Any, value: Any) -> Any:
    seq = list(items.values()) if isinstance(items, Mapping) else items
    return [i for i in seq if isinstance(i, Mapping) and i.get(fld) == value]


def _find(items: Any, fld: Any, value: Any) -> Any:
    found = _where(items, fld, value)
    return found[0] if found else Missing(f"no item with {fld} == {value!r}")


def _default(value: Any, fallback: Any = None) -> Any:
    return fallback if value is None or isinstance(value, Missing) else value


FILTERS: dict[str, Callable[..., Any]] = {
    "default": _default,
    "length": len,
    "json": lambda v: json.dumps(v, ensure_ascii=False, sort_keys=True),
    "keys": lambda v: list(v.keys()),
    "values": lambda v: list(v.values()),
    "first": lambda v: v[0] if v else Missing("first of an empty list"),
    "last": lambda v: v[-1] if v else Missing("last of an empty list"),
    "upper": lambda v: str(v).upper(),
    "lower": lambda v: str(v).lower(),
    "str": lambda v: v if isinstance(v, str) else json.dumps(v, ensure_ascii=False),
    "where": _where,
    "find": _find,
    "pluck": lambda v, f: [i.get(f) for i in (v.values() if isinstance(v, Mapping) else v) if isinstance(i, Mapping)],
    "slice": lambda v, start, count: v[int(start):int(start) + int(count)],
}


def evaluate(expr: Expr, scope: Scope) -> Any:
    """Evaluate a parsed expression; undefined paths give a :class:`Missing`.

    Filters do not run on a missing value, except ``default``, which replaces it.
    """
    value = eval_operand(expr.path, scope)
    for flt in expr.filters:
        args = [eval_operand(a, scope) for a in flt.args]
        if flt.name == "default":
            value = _default(value, *args)
            continue
        if isinstance(value, Missing):
            return value
        try:
            value = FILTERS[flt.name](value, *args)
        except (TypeError, ValueError, AttributeError, KeyError, IndexError) as exc:
            raise TemplateError(f"filter {flt.name!r} failed in {{{{ {expr.text} }}}}: {exc}") from exc
    return value


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def render(template: Any, scope: Scope, *, strict: bool = True) -> Any:
    """Render a template value recursively (dict keys are not templated).

    Raises:
        TemplateError: an expression is malformed, or (``strict``) undefined.
    """
    if isinstance(template, str):
        if "{{" not in template:
            return template
        full = _FULL.match(template)
        if full:
            value = evaluate(parse(full["expr"]), scope)
            if isinstance(value, Missing) and strict:
                raise TemplateError(f"{template.strip()!r} is undefined ({value.where} not found)")
            return value

        def sub(m: re.Match[str]) -> str:
            value = evaluate(parse(m["expr"]), scope)
            if isinstance(value, Missing):
                raise TemplateError(f"'{{{{{m['expr']}}}}}' in {template!r} is undefined ({value.where} not found)")
            return _text(value)

        return _PART.sub(sub, template)
    if isinstance(template, Mapping):
        return {k: render(v, scope, strict=strict) for k, v in template.items()}
    if isinstance(template, list):
        return [render(v, scope, strict=strict) for v in template]
    return template


def expressions_in(template: Any) -> list[str]:
    """Every expression text inside a template (for load-time syntax checks)."""
    if isinstance(template, str):
        return [m["expr"] for m in _PART.finditer(template)]
    if isinstance(template, Mapping):
        return [e for v in template.values() for e in expressions_in(v)]
    if isinstance(template, list):
        return [e for v in template for e in expressions_in(v)]
    return []


# ---- conditions -------------------------------------------------------------------------

_BINARY = ("equals", "in", "gt", "ge", "lt", "le", "matches")


def check_condition(cond: Any, where: str, roots: frozenset[str] | None = None) -> list[str]:
    """Shape and syntax problems of a condition (empty when valid)."""
    if isinstance(cond, bool):
        return []
    if isinstance(cond, str):
        return check_template(cond, where, roots)
    if not isinstance(cond, Mapping) or len(cond) != 1:
        return [(f"{where}: a condition is a template string, true/false, or a mapping with one of "
                f"exists, {', '.join(_BINARY)}, not, all, any")]
    (op, arg), = cond.items()
    if op == "exists":
        return check_template(arg, where, roots) if isinstance(arg, str) else [f"{where}.exists: give a template string"]
    if op in _BINARY:
        if not isinstance(arg, list) or len(arg) != 2:
            return [f"{where}.{op}: give a list of two values"]
        return check_template(arg, where, roots)
    if op == "not":
        return check_condition(arg, f"{where}.not", roots)
    if op in ("all", "any"):
        if not isinstance(arg, list):
            return [f"{where}.{op}: give a list of conditions"]
        return [p for i, c in enumerate(arg) for p in check_condition(c, f"{where}.{op}.{i}", roots)]
    return [f"{where}: unknown condition {op!r}; use exists, {', '.join(_BINARY)}, not, all, any"]


def _roots(node: Lit | Path | Expr) -> set[str]:
    if isinstance(node, Lit):
        return set()
    if isinstance(node, Expr):
        return _roots(node.path) | {r for f in node.filters for a in f.args for r in _roots(a)}
    return {node.root} | {r for step in node.steps if isinstance(step, (Lit, Path)) for r in _roots(step)}


def check_template(template: Any, where: str, roots: frozenset[str] | None = None) -> list[str]:
    """Syntax problems of every expression in a template, and names outside ``roots``."""
    if isinstance(template, Mapping):
        return [p for k, v in template.items() for p in check_template(v, f"{where}.{k}", roots)]
    if isinstance(template, list):
        return [p for i, v in enumerate(template) for p in check_template(v, f"{where}.{i}", roots)]
    if not isinstance(template, str):
        return []
    problems = []
    found = expressions_in(template)
    if template.count("{{") != len(found) or template.count("}}") != len(found):
        problems.append(f"{where}: unbalanced '{{{{' / '}}}}' in {template!r}")
    for text in found:
        try:
            unknown = _roots(parse(text)) - roots if roots is not None else set()
        except TemplateError as exc:
            problems.append(f"{where}: {exc}")
            continue
        if unknown:
            problems.append(f"{where}: {sorted(unknown)} cannot be used here in {{{{{text}}}}}; "
                            f"available: {sorted(roots or ())}")
    return problems


def _num(a: Any, b: Any, op: Callable[[Any, Any], bool]) -> bool:
    try:
        return bool(op(a, b))
    except TypeError:
        return False


def holds(cond: Any, scope: Scope) -> bool:
    """Evaluate a condition checked by :func:`check_condition`; undefined values are false."""
    if isinstance(cond, bool):
        return cond
    if isinstance(cond, str):
        return bool(render(cond, scope, strict=False))
    (op, arg), = cond.items()
    if op == "exists":
        value = render(arg, scope, strict=False)
        return not isinstance(value, Missing) and value is not None
    if op == "not":
        return not holds(arg, scope)
    if op == "all":
        return all(holds(c, scope) for c in arg)
    if op == "any":
        return any(holds(c, scope) for c in arg)
    a, b = (render(v, scope, strict=False) for v in arg)
    if isinstance(a, Missing) or isinstance(b, Missing):
        return False
    if op == "equals":
        return bool(a == b)
    if op == "in":
        try:
            return a in b
        except TypeError:
            return False
    if op == "matches":
        return isinstance(a, str) and re.search(str(b), a) is not None
    ops: dict[str, Callable[[Any, Any], bool]] = {
        "gt": lambda x, y: x > y, "ge": lambda x, y: x >= y,
        "lt": lambda x, y: x < y, "le": lambda x, y: x <= y,
    }
    return _num(a, b, ops[op])


# ---- state paths --------------------------------------------------------------------------

def locate(path_text: str, state: Any, scope: Scope, *, create: bool) -> tuple[Any, Any, list[Any]]:
    """The container and key a state path points into, and the concrete key list.

    ``create`` makes missing intermediate mappings (for ``set``).

    Raises:
        TemplateError: the path is not a state path or an intermediate step is missing.
    """
    path = parse_path(path_text)
    if not path.steps:
        raise TemplateError(f"{path_text!r} names the whole state; name a key inside it")
    container = state
    keys: list[Any] = []
    for step in path.steps[:-1]:
        key = _key(step, scope)
        keys.append(key)
        nxt = _step(container, key, path_text)
        if isinstance(nxt, Missing):
            if create and isinstance(container, dict):
                nxt = container[key] = {}
            else:
                raise TemplateError(f"{path_text!r}: {key!r} not found")
        container = nxt
    last = _key(path.steps[-1], scope)
    if isinstance(container, list):
        if isinstance(last, str) and re.fullmatch(r"-?\d+", last):
            last = int(last)
        if not isinstance(last, int):
            raise TemplateError(f"{path_text!r}: a list index must be an integer, got {last!r}")
    elif not isinstance(container, dict):
        raise TemplateError(f"{path_text!r}: cannot index into a {type(container).__name__}")
    elif isinstance(last, int) and last not in container and str(last) in container:
        last = str(last)
    return container, last, [*keys, last]
