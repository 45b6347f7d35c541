"""One-off values derived from the run seed (codes, receipts, tokens).

A value is a pure function of ``(seed, service, scope, name, index)``: the same
run always sees the same values (a restarted server issues the same codes), a
different seed gives different ones, and nothing can be memorised across runs.
The bytes come from HMAC-SHA256 keyed by the seed, in counter mode.
"""

from __future__ import annotations

import hashlib
import hmac
import uuid
from collections.abc import Iterator
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

#: Upper-case letters and digits without the look-alikes 0/O and 1/I.
CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"


class ValueSpec(BaseModel):
    """How to generate one value (``values:`` of a service, ``issue:`` of a case).

    ``kind``: ``code`` (letters+digits), ``hex``, ``digits``, ``uuid``, ``int``
    (``min``..``max``) or ``choice`` (one of ``choices``). ``count`` > 1 gives a list.
    """

    model_config = ConfigDict(extra="forbid")

    kind: Literal["code", "hex", "digits", "uuid", "int", "choice"] = "code"
    length: int = Field(default=8, ge=1, le=256)
    prefix: str = ""
    alphabet: str | None = Field(default=None, min_length=2, description="Overrides the code alphabet.")
    min: int = 0
    max: int = 999_999
    choices: list[Any] | None = None
    count: int | None = Field(default=None, ge=1, le=10_000, description="Generate a list of this many.")

    @model_validator(mode="after")
    def _check(self) -> ValueSpec:
        if self.kind == "int" and self.max < self.min:
            raise ValueError("max must be >= min")
        if self.kind == "choice" and not self.choices:
            raise ValueError("kind 'choice' needs a non-empty 'choices' list")
        return self


def _stream(seed: str, label: str) -> Iterator[int]:
    key = seed.encode("utf-8")
    counter = 0
    while True:
        block = hmac.new(key, f"{label}\x00{counter}".encode(), hashlib.sha256).digest()
        yield from block
        counter += 1


def _pick(stream: Iterator[int], n: int) -> int:
    """Uniform integer in [0, n) by rejection sampling over 8-byte draws."""
    limit = (1 << 64) - ((1 << 64) % n)
    while True:
        x = int.from_bytes(bytes(next(stream) for _ in range(8)), "big")
        if x < limit:
            return x % n


def _one(spec: ValueSpec, stream: Iterator[int]) -> Any:
    if spec.kind == "int":
        return spec.min + _pick(stream, spec.max - spec.min + 1)
    if spec.kind == "choice":
        assert spec.choices is not None
        return spec.choices[_pick(stream, len(spec.choices))]
    if spec.kind == "uuid":
        return spec.prefix + str(uuid.UUID(bytes=bytes(next(stream) for _ in range(16)), version=4))
    alphabet = spec.alphabet or {"code": CODE_ALPHABET, "hex": "0123456789abcdef",
                                 "digits": "0123456789"}[spec.kind]
    return spec.prefix + "".join(alphabet[_pick(stream, len(alphabet))] for _ in range(spec.length))


def derive_value(seed: str, spec: ValueSpec, *, service: str, name: str, scope: str = "run",
                 index: int = 0) -> Any:
    """The value ``name`` of ``service`` for this seed.

    Args:
        scope: ``run`` for service-level ``values`` or ``<tool>`` for per-call ``issue``.
        index: 0 for run values; the tool's call number for per-call values.
    """
    stream = _stream(seed, f"tracetrial-sim\x00{service}\x00{scope}\x00{name}\x00{index}")
    if spec.count is None:
        return _one(spec, stream)
    return [_one(spec, stream) for _ in range(spec.count)]
