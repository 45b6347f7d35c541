"""The gateway (DESIGN §4): a LiteLLM proxy on loopback with byte-for-byte pass-through
routes (probe model, same-format live pairs), LiteLLM translation routes for cross-format
live pairs, and the provider-boundary recorder (SPEC §8).

Public API::

    Gateway, gateway_context, GatewayError      # the proxy process and its routes
    ModelRegistry, ModelEntry, Price, RouteInfo  # models.yaml
    RequestRecord, read_records                  # <records_dir>/<run_id>/requests.jsonl
"""

from __future__ import annotations

from apparatus.gateway.gateway import Gateway, GatewayError, gateway_context
from apparatus.gateway.records import RequestRecord, read_records
from apparatus.gateway.registry import (
    ModelEntry,
    ModelRegistry,
    Price,
    RegistryError,
    RouteInfo,
)
from tracetrial.harness import WireFormat

__all__ = [
    "Gateway",
    "GatewayError",
    "ModelEntry",
    "ModelRegistry",
    "Price",
    "RegistryError",
    "RequestRecord",
    "RouteInfo",
    "WireFormat",
    "gateway_context",
    "read_records",
]
