"""What a normalizer did with each native record it read (issue 18, record accounting).

Value types only, so that both the adapter contract (:mod:`harnesses.base`, whose
``NormalizedTrace`` carries the accounting) and the normalizer toolkit
(:mod:`harnesses.native`, which builds it) can import them without a cycle.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from tracetrial.model import StrictModel

__all__ = ["AccountedRecord", "Disposition", "RecordAccounting"]

Disposition = Literal["mapped", "folded", "kept", "context", "unaccounted"]


class AccountedRecord(StrictModel):
    """What became of one native record."""

    source: str
    file: str
    seq: int = Field(description="1-based line (or row) of the record in its file.")
    type: str
    turn: int | None = None
    disposition: Disposition
    #: Positions (in the normalizer's event list) of the events the record produced.
    events: list[int] = Field(default_factory=list)
    #: Position of the event the record was folded into.
    folded_into: int | None = None
    #: Why a ``context`` record produced no event, or why a record is unaccounted.
    reason: str | None = None
    #: The normalizer does not know the record's type (kept verbatim, trace ``partial``).
    unknown_type: bool = False


class RecordAccounting(StrictModel):
    """Every native record a normalizer read and its disposition, in reading order."""

    records: list[AccountedRecord] = Field(default_factory=list)

    def counts(self) -> dict[str, int]:
        """Records per disposition (and ``unknown_type``)."""
        out: dict[str, int] = {}
        for r in self.records:
            out[r.disposition] = out.get(r.disposition, 0) + 1
            if r.unknown_type:
                out["unknown_type"] = out.get("unknown_type", 0) + 1
        return out

    def problems(self) -> list[AccountedRecord]:
        """Records that make the trace ``partial``: unaccounted or of an unknown type."""
        return [r for r in self.records if r.disposition == "unaccounted" or r.unknown_type]
