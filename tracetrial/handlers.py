"""The Python escape hatch: what a handler in a service module receives and returns.

A service YAML names a module (``module: tickets.py``) and a case names a
function in it (``handler: export_page``). The function gets a :class:`Call`
and returns a :class:`Reply` (or a dict/list for a plain structured result, or
a str for a plain text result)::

    from tracetrial.policy import Call, Reply

    def export_page(call: Call) -> Reply:
        page = call.args["page"]
        rows = call.state["rows"][page * 50:(page + 1) * 50]
        call.increment("state.exports")                 # recorded as a transition
        receipt = call.issue("receipt", kind="code", length=10, prefix="RCPT-")   # recorded as issued
        return Reply(result={"rows": rows, "receipt": receipt})

Every state change goes to the ledger: use ``call.set/append/increment/delete``
for precise transitions; direct edits of ``call.state`` are still recorded
(one ``mutate`` transition per changed top-level key). Raise nothing on purpose:
an exception is reported to the caller as ``INTERNAL_SIMULATOR_ERROR`` and to
the ledger as an apparatus error, and no state is committed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tracetrial.values import ValueSpec


@dataclass
class Reply:
    """What a call returns to the MCP client.

    Attributes:
        result: structured content (a non-object is sent as ``{"result": value}``).
        text: the text content; defaults to the JSON of ``result`` (or of the error).
        error: ``{"code": ..., "message": ..., "data": ...}`` makes an ``isError`` result.
        delay_s: sleep this long after committing, before answering (slow tool).
        notify_tools_changed: send ``notifications/tools/list_changed`` with the answer.
    """

    result: Any = None
    text: str | None = None
    error: dict[str, Any] | None = None
    delay_s: float = 0.0
    notify_tools_changed: bool = False


StatePath = str | Sequence[Any]


@dataclass
class Call:
    """One tool call as a handler sees it (built by the engine)."""

    tool: str
    args: dict[str, Any]
    """Arguments with top-level schema defaults applied."""
    raw_arguments: Any
    """The arguments exactly as received (what the ledger holds)."""
    state: dict[str, Any]
    """Working copy of the business state; committed when the handler returns."""
    before: Mapping[str, Any]
    values: Mapping[str, Any]
    session: int
    count: int
    """This tool's served calls in the run, this one included (1-based)."""
    total: int
    _apply: Callable[[str, StatePath, Any], None] = field(repr=False)
    _issue: Callable[[str, ValueSpec], Any] = field(repr=False)

    def set(self, path: StatePath, value: Any) -> None:
        """``state.a.b = value``; ``path`` is ``"state.a.b"`` or ``("a", "b")``."""
        self._apply("set", path, value)

    def append(self, path: StatePath, value: Any) -> None:
        """Append to the list at ``path`` (created when missing)."""
        self._apply("append", path, value)

    def increment(self, path: StatePath, by: float = 1) -> None:
        """Add ``by`` to the number at ``path`` (0 when missing)."""
        self._apply("increment", path, by)

    def delete(self, path: StatePath) -> None:
        """Remove the key or list item at ``path``."""
        self._apply("delete", path, None)

    def issue(self, name: str, **spec: Any) -> Any:
        """A one-off value for this call, derived from the run seed; recorded as ``issued``.

        ``spec`` is a value spec (``kind``, ``length``, ``prefix``, ...). The same
        run, tool, call number and name always give the same value.
        """
        return self._issue(name, ValueSpec(**spec))

    @staticmethod
    def error(code: str, message: str, data: Any = None) -> Reply:
        """A structured error reply."""
        err: dict[str, Any] = {"code": code, "message": message}
        if data is not None:
            err["data"] = data
        return Reply(error=err)
