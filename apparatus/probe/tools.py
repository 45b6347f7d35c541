"""Tool declarations as a request carries them, in one neutral shape.

Anthropic: ``[{name, description, input_schema}]``; Responses: ``[{type: function,
name, parameters}]`` plus Codex namespaces ``{type: namespace, name, tools: [...]}``
and non-function tools (``web_search``, ``custom``); Chat: ``[{type: function,
function: {name, description, parameters}}]``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ToolDecl:
    """One declared tool.

    ``namespace`` is set for Codex namespaced tools (``mcp__tickets`` holding
    ``get_ticket``); the model must answer with namespace + short name.
    ``kind`` is ``function`` for callable JSON-schema tools, ``custom`` for
    free-form tools (Codex ``apply_patch``), else the native type
    (``web_search`` …), which the probe never calls.
    """

    name: str
    namespace: str | None = None
    schema: dict[str, Any] = field(default_factory=dict)
    description: str = ""
    kind: str = "function"
    #: Anthropic ``defer_loading: true``: declared, but the model knows only the name until a
    #: search tool's result references it (Claude Code 2.1.332 declares loaded MCP tools so).
    deferred: bool = False

    @property
    def display(self) -> str:
        """``ns/name`` for namespaced tools, else ``name``: how reports and policies name it."""
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    @property
    def properties(self) -> dict[str, Any]:
        props = self.schema.get("properties")
        return props if isinstance(props, dict) else {}

    @property
    def required(self) -> list[str]:
        req = self.schema.get("required")
        return [r for r in req if isinstance(r, str)] if isinstance(req, list) else []


def _schema(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def parse_tools(wire_format: str, tools: Any) -> list[ToolDecl]:
    """Neutral declarations of a request's ``tools`` array (unknown entries are skipped)."""
    out: list[ToolDecl] = []
    for t in tools or []:
        if not isinstance(t, dict):
            continue
        if wire_format == "anthropic":
            if "name" in t:
                kind = "function" if "input_schema" in t or "type" not in t or t.get("type") == "custom" else str(t["type"])
                out.append(ToolDecl(t["name"], None, _schema(t.get("input_schema")), t.get("description") or "", kind,
                                    deferred=t.get("defer_loading") is True))
        elif wire_format == "responses":
            ttype = t.get("type")
            if ttype == "namespace":
                for sub in t.get("tools") or []:
                    if isinstance(sub, dict) and sub.get("name"):
                        out.append(ToolDecl(sub["name"], t.get("name"), _schema(sub.get("parameters")),
                                            sub.get("description") or "", str(sub.get("type", "function"))))
            elif ttype in ("function", "custom") and t.get("name"):
                out.append(ToolDecl(t["name"], None, _schema(t.get("parameters")), t.get("description") or "", ttype))
            elif t.get("name"):
                out.append(ToolDecl(t["name"], None, {}, t.get("description") or "", str(ttype)))
        else:  # chat
            fn = t.get("function") if t.get("type", "function") == "function" else None
            if isinstance(fn, dict) and fn.get("name"):
                out.append(ToolDecl(fn["name"], None, _schema(fn.get("parameters")), fn.get("description") or ""))
    return out


class Inventory:
    """Lookup over one request's declarations."""

    def __init__(self, tools: list[ToolDecl]):
        self.tools = [t for t in tools if t.kind == "function"]
        self.names = [t.display for t in tools]

    def get(self, name: str, *, namespace: str | None = None, fold: bool = False) -> ToolDecl | None:
        """Exact (or case-folded) match of a tool's short name within ``namespace``."""
        for t in self.tools:
            if t.namespace != namespace:
                continue
            if t.name == name or (fold and t.name.lower() == name.lower()):
                return t
        return None

    def first(self, names: tuple[str, ...], *, namespace: str | None = None) -> ToolDecl | None:
        """First declared tool among ``names`` (exact match first, then case-folded)."""
        for n in names:
            t = self.get(n, namespace=namespace)
            if t is not None:
                return t
        for n in names:
            t = self.get(n, namespace=namespace, fold=True)
            if t is not None:
                return t
        return None

    def by_display(self, display: str) -> ToolDecl | None:
        for t in self.tools:
            if t.display == display:
                return t
        return None

    def in_namespace(self, namespace: str, name: str) -> ToolDecl | None:
        return self.get(name, namespace=namespace)
