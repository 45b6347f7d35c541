"""Field paths and value conditions shared by the rule library.

A *field path* is dotted, with integer parts indexing lists:
``tool_result.content``, ``tools.0.name``, ``detail.value``.

A *condition* says what a value must look like. In rubric YAML it is either a
scalar (shorthand for ``equals``) or a mapping of operators::

    where:
      tool_call.name: Bash                      # equals
      tool_result.exit_code: {gte: 1}
      tool_result.content: {contains_truth: checksum}

``contains`` and ``regex`` on a structured value (a list of content blocks, a
dict) look at every string leaf, so a harness that wraps a result in blocks is
matched the same way as one that returns a bare string.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from criteria.errors import Unscorable


def get_path(obj: Any, path: str) -> tuple[bool, Any]:
    """``(present, value)`` of a dotted path in a JSON-like value."""
    current = obj
    for part in path.split("."):
        if isinstance(current, dict):
            if part not in current:
                return False, None
            current = current[part]
        elif isinstance(current, list) and part.lstrip("-").isdigit():
            index = int(part)
            if not -len(current) <= index < len(current):
                return False, None
            current = current[index]
        else:
            return False, None
    return True, current


def text_leaves(value: Any) -> Iterator[str]:
    """Every scalar leaf of a JSON-like value as text (strings verbatim, others as JSON)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, (list, tuple)):
            stack.extend(reversed(item))
        elif item is not None:
            yield json.dumps(item)


def truth_value(truth: Any, key: str) -> Any:
    """The value of ``key`` (a dotted path) in truth.json.

    Raises:
        Unscorable: truth.json is absent or lacks the key (a task bug, not a harness defect).
    """
    if truth is None:
        raise Unscorable(f"truth.json is missing from the task snapshot (needed for key {key!r})")
    present, value = get_path(truth, key)
    if not present or value is None or value == "":
        raise Unscorable(f"truth.json has no value at key {key!r}")
    return value


def as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


COND_OPERATORS = frozenset({
    "equals", "not_equals", "contains", "not_contains", "regex", "ignore_case", "in_", "exists",
    "gte", "lte", "equals_truth", "contains_truth",
})


class Cond(BaseModel):
    """A condition on one value. Every operator given must hold (they are ANDed)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    equals: Any = None
    not_equals: Any = None
    contains: str | None = None
    not_contains: str | None = None
    regex: str | None = None
    ignore_case: bool = False
    in_: list[Any] | None = Field(default=None, alias="in")
    exists: bool | None = None
    gte: float | None = None
    lte: float | None = None
    equals_truth: str | None = Field(default=None, description="equals the truth.json value at this key")
    contains_truth: str | None = Field(default=None, description="contains the truth.json value at this key")

    def operators(self) -> set[str]:
        """The operators this condition was given (subclasses add non-operator fields)."""
        return self.model_fields_set & COND_OPERATORS

    @model_validator(mode="after")
    def _check(self) -> Cond:
        if not self.operators() - {"ignore_case"}:
            raise ValueError("a condition needs at least one operator (equals, contains, regex, ...)")
        if self.regex is not None:
            try:
                re.compile(self.regex)
            except re.error as exc:
                raise ValueError(f"regex {self.regex!r} does not compile: {exc}") from None
        return self

    @classmethod
    def parse(cls, value: Any) -> Cond:
        """A mapping of operators, or a scalar meaning ``equals``."""
        if isinstance(value, Cond):
            return value
        if isinstance(value, dict):
            return cls.model_validate(value)
        return cls(equals=value)

    def describe(self) -> str:
        """A short text of the operators, for reasons (truth values are never quoted)."""
        parts = []
        for name in sorted(self.operators() - {"ignore_case"}):
            value = getattr(self, name)
            shown = f"<truth:{value}>" if name.endswith("_truth") else json.dumps(value, default=str)
            if len(shown) > 60:
                shown = shown[:57] + "..."
            parts.append(f"{name.rstrip('_')} {shown}")
        return ", ".join(parts)

    def truth_keys(self) -> list[str]:
        return [k for k in (self.equals_truth, self.contains_truth) if k]

    def check(self, present: bool, value: Any, truth: Any = None) -> bool:
        """Does the value satisfy every operator? ``present`` distinguishes absent from null."""
        fields = self.operators()
        if self.exists is not None and present != self.exists:
            return False
        if not present:
            # Only ``exists: false`` (handled above) can hold for an absent field.
            return fields <= {"exists", "ignore_case"}
        flags = re.IGNORECASE if self.ignore_case else 0

        def has(needle: str) -> bool:
            if self.ignore_case:
                needle = needle.lower()
                return any(needle in leaf.lower() for leaf in text_leaves(value))
            return any(needle in leaf for leaf in text_leaves(value))

        if "equals" in fields and value != self.equals:
            return False
        if "not_equals" in fields and value == self.not_equals:
            return False
        if self.contains is not None and not has(self.contains):
            return False
        if self.not_contains is not None and has(self.not_contains):
            return False
        if self.regex is not None and not any(re.search(self.regex, leaf, flags) for leaf in text_leaves(value)):
            return False
        if self.in_ is not None and value not in self.in_:
            return False
        numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
        if self.gte is not None and not (numeric and value >= self.gte):
            return False
        if self.lte is not None and not (numeric and value <= self.lte):
            return False
        if self.equals_truth is not None:
            expected = truth_value(truth, self.equals_truth)
            if value != expected and as_text(value).strip() != as_text(expected).strip():
                return False
        return self.contains_truth is None or has(as_text(truth_value(truth, self.contains_truth)))


def matches(record: dict[str, Any], where: dict[str, Cond], truth: Any = None) -> bool:
    """Every ``where`` condition holds on ``record``."""
    for path, cond in where.items():
        present, value = get_path(record, path)
        if not cond.check(present, value, truth):
            return False
    return True


def _cond_shorthand(value: Any) -> Any:
    return value if isinstance(value, (dict, Cond)) else {"equals": value}


#: A condition as a pydantic field type: scalars are shorthand for ``equals``.
CondField = Annotated[Cond, BeforeValidator(_cond_shorthand)]
#: ``{field path: condition}`` as a pydantic field type.
Where = dict[str, CondField]
