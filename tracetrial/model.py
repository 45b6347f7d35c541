"""The pydantic bases of every record on disk or on a wire: unknown fields are errors, so a
misspelt or foreign field is never silently dropped."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """A record that rejects fields it does not declare."""

    model_config = ConfigDict(extra="forbid")


class FrozenModel(BaseModel):
    """A strict record that cannot be changed once built (configuration, registry entries)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
