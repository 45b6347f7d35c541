"""Runs **inside** the LiteLLM proxy process (loaded from the generated config): the
custom auth hook, the provider-boundary recorder and two control endpoints.

Request lifecycle::

    authenticate()                 (LiteLLM ``general_settings.custom_auth``)
        reads the raw body once; for pass-through routes stores it where LiteLLM forwards
        it verbatim (``request.state.litellm_pass_through_raw_body`` — a LiteLLM
        internal, pinned with litellm==1.108.7 and covered by the byte-identity tests);
        binds the request to its run (path for the probe, run key otherwise); strips the
        run key from live pass-through requests so only the real key goes upstream
    Recorder.async_pre_call_hook   parses the full wire body -> tools, tool results, ...;
                                   assigns the arrival index
    pass-through response          ``async_post_call_response_headers_hook`` taps the
                                   upstream ``httpx.Response`` (status, every body byte);
                                   the record is written when its last byte has passed,
                                   i.e. before the client sees the end of the response
    pass-through upstream error    ``async_post_call_failure_hook`` (status + message)
    translation response           ``async_post_call_success_hook`` /
                                   ``async_post_call_streaming_iterator_hook``, with the
                                   logging events as a fallback

LiteLLM / Starlette internals relied upon (litellm==1.108.7 pinned; each is exercised by
``tests/gateway/test_proxy_routes.py``, which fails if an upgrade breaks it):

1. ``request.state.litellm_pass_through_raw_body``: bytes forwarded verbatim (byte identity);
2. ``request.scope["parsed_body"]`` and Starlette's ``Request._json``: LiteLLM's view of the
   body is cut to ``model``/``stream`` (speed; top-level ``custom_body``/``query_params``
   keys stay data, see :func:`_slim_litellm_view`);
3. the ASGI ``scope["headers"]`` and LiteLLM's ``request.state._cached_headers``: the run
   key is removed before live pass-through forwarding;
4. the order of ``app.router.routes``: our routes are matched first (:func:`_promote_routes`);
5. ``async_post_call_response_headers_hook`` receives the upstream ``httpx.Response`` on
   every pass-through path, before its body is relayed;
6. the detail prefix ``"Upstream passthrough request failed"`` of upstream-error failures
   (the response hook follows; without it the failure alone is written after 5 s).

Nothing here is imported by the parent process.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import os
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from fastapi import HTTPException, Request
from litellm.integrations.custom_logger import CustomLogger
from litellm.proxy._types import UserAPIKeyAuth

from apparatus.gateway import wire as W
from apparatus.gateway.config import (
    CONTROL_HEADER,
    CONTROL_PREFIX,
    LIVE_PREFIX,
    PROBE_PREFIX,
    SETTINGS_ENV,
    TRANSLATION_PATHS,
    ProxySettings,
    run_of_key,
)
from apparatus.gateway.records import RUN_ID_RE, RequestRecord, RunLog
from tracetrial.harness import WireFormat
from tracetrial.redact import Redactor

log = logging.getLogger("apparatus.gateway")

#: LiteLLM forwards these bytes instead of re-encoding its parsed copy of the body.
RAW_BODY_STATE_KEY = "litellm_pass_through_raw_body"
_AUTH_HEADERS = frozenset({b"authorization", b"x-api-key", b"api-key"})
#: A failure hook for an upstream HTTP error is followed by the response hook; if that
#: never comes, the record is written from the failure alone after this delay.
_FAILURE_GRACE_S = 5.0
_STALE_CONTEXT_S = 900.0

SETTINGS = ProxySettings.model_validate_json(Path(os.environ[SETTINGS_ENV]).read_text(encoding="utf-8"))


@dataclass
class _Ctx:
    """One request from authentication to its written record."""

    token: str
    run_id: str
    route: str                      # probe | live | translation
    api_path: str
    method: str
    wire: WireFormat | None
    raw: bytes | None
    t0: float = field(default_factory=time.perf_counter)
    started_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat())
    index: int | None = None
    partial: dict[str, Any] = field(default_factory=dict)
    status: int | None = None
    error: str | None = None
    done: bool = False


_CTX: dict[str, _Ctx] = {}
_RUNS: dict[str, RunLog] = {}
#: Run id -> its planted secrets, as the parent registered them (``/tt/control/run/<id>``).
_SECRETS: dict[str, tuple[str, ...]] = {}


def _redactor(run_id: str) -> Redactor:
    """Values only: the run's planted secrets and this process's credential values (what a
    record must never hold in clear); key-shaped strings stay, the archive redacts those."""
    redactor = Redactor.from_environment(extra=_SECRETS.get(run_id, ()))
    redactor.patterns = False
    return redactor


def _run_log(run_id: str) -> RunLog:
    rl = _RUNS.get(run_id)
    if rl is None:
        rl = _RUNS[run_id] = RunLog(Path(SETTINGS.records_dir) / run_id,
                                    record_bodies=SETTINGS.record_bodies, redactor=_redactor(run_id),
                                    planted=_SECRETS.get(run_id, ()))
    return rl


# ---------------------------------------------------------------- authentication

def _deny(code: int, message: str) -> HTTPException:
    return HTTPException(status_code=code, detail=message)


def _key_from(request: Request) -> str | None:
    for name in ("x-api-key", "authorization", "api-key"):
        value = request.headers.get(name)
        if value:
            value = value.strip()
            if value.lower().startswith("bearer "):
                value = value[7:].strip()
            if run_of_key(SETTINGS.secret, value):
                return value
    return None


def _scrub_auth(request: Request) -> None:
    """Remove the run key so that only the configured upstream key is forwarded."""
    request.scope["headers"] = [(k, v) for k, v in request.scope["headers"]
                                if k.lower() not in _AUTH_HEADERS]
    request.__dict__.pop("_headers", None)
    if hasattr(request.state, "_cached_headers"):       # LiteLLM's per-request header cache
        delattr(request.state, "_cached_headers")


def _classify(request: Request) -> tuple[str, str, str, WireFormat | None]:
    """``(route, run_id, api_path, wire)`` or raise an HTTP error."""
    path = request.url.path
    query = f"?{request.url.query}" if request.url.query else ""
    if path.startswith(PROBE_PREFIX + "/"):
        run_id, _, rest = path[len(PROBE_PREFIX) + 1:].partition("/")
        if not RUN_ID_RE.match(run_id):
            raise _deny(400, f"invalid run id in path: {run_id!r}")
        return "probe", run_id, "/" + rest + query, None
    bound = run_of_key(SETTINGS.secret, _key_from(request))
    if bound is None:
        raise _deny(401, "TraceTrial gateway: missing or unknown run key (use Gateway.api_key(run_id))")
    if path.startswith(LIVE_PREFIX + "/"):
        parts = path[len(LIVE_PREFIX) + 1:].split("/", 2)
        route = SETTINGS.live_routes.get("/".join(parts[:2])) if len(parts) >= 2 else None
        if route is None:
            raise _deny(404, f"no live route for {path}")
        return "live", bound, "/" + (parts[2] if len(parts) > 2 else "") + query, route.wire_format
    if path.rstrip("/") in TRANSLATION_PATHS:
        return "translation", bound, path + query, W.wire_format_for_path(path)
    raise _deny(403, f"TraceTrial gateway does not serve {path}")


async def authenticate(request: Request, api_key: str | None) -> UserAPIKeyAuth:
    """LiteLLM ``custom_auth``: bind the request to its run; keep its raw bytes."""
    if not _PROMOTED:
        _promote_routes()
    route, run_id, api_path, wire = _classify(request)
    raw = await request.body()
    if route != "translation" and raw:
        setattr(request.state, RAW_BODY_STATE_KEY, raw)
        _slim_litellm_view(request)
    if route == "live":
        _scrub_auth(request)
    token = uuid.uuid4().hex
    _CTX[token] = _Ctx(token=token, run_id=run_id, route=route, api_path=api_path,
                       method=request.method, wire=wire, raw=raw)
    _sweep()
    return UserAPIKeyAuth(api_key=f"tt:{run_id}", metadata={"tt": token})


def _slim_litellm_view(request: Request) -> None:
    """On pass-through routes LiteLLM forwards our raw bytes; its parsed copy of the body
    then only feeds its own logging, which serializes it twice in pure Python (several ms
    for a Claude Code body), and its envelope check, which treats top-level ``custom_body``
    / ``query_params`` keys as instructions (rewriting what is logged and the upstream
    query). Leave it only ``model`` and ``stream``, and no envelope. Relies on LiteLLM's
    ``scope["parsed_body"]`` cache and Starlette's ``Request._json`` (pinned versions)."""
    cached = request.scope.get("parsed_body")
    if not (isinstance(cached, tuple) and len(cached) == 2 and isinstance(cached[1], dict)):
        return
    slim = {k: cached[1][k] for k in ("model", "stream") if k in cached[1]}
    request.scope["parsed_body"] = (tuple(slim), slim)
    request._json = {}      # read by LiteLLM's pass-through envelope parser


def _sweep() -> None:
    """Forget contexts that never became records (GET/HEAD, requests LiteLLM refused)."""
    if len(_CTX) < 256:
        return
    now = time.perf_counter()
    for token, ctx in list(_CTX.items()):
        if ctx.index is None and now - ctx.t0 > _STALE_CONTEXT_S:
            _CTX.pop(token, None)


# ---------------------------------------------------------------- record building

def _begin(ctx: _Ctx) -> None:
    """Parse the request body and take the arrival index."""
    raw = ctx.raw or b""
    try:
        body = json.loads(raw) if raw else None
    except ValueError:
        body = None
    wire = ctx.wire or W.wire_format_for_path(ctx.api_path) or W.guess_wire_format(body)
    tools, present, complete = W.extract_tools(body, wire)
    ctx.wire = wire
    ctx.partial = {
        "run_id": ctx.run_id, "path": ctx.api_path, "wire_format": wire,
        "model": body.get("model") if isinstance(body, dict) and isinstance(body.get("model"), str) else None,
        "stream": bool(isinstance(body, dict) and body.get("stream") is True),
        "started_at": ctx.started_at, "tools": tools, "inventory_present": present,
        "inventory_complete": present and complete,
        "inventory_fingerprint": W.inventory_fingerprint(tools) if present else None,
        "tool_results": W.extract_tool_results(body, wire),
        "body_sha256": W.sha256_hex(raw), "last_user_text": W.last_user_text(body, wire),
    }
    run_log = _run_log(ctx.run_id)
    ctx.partial["planted_secrets"] = run_log.planted_hits(raw)
    ctx.index = run_log.arrive(raw)
    ctx.raw = None


def _finish(ctx: _Ctx, *, usage: dict[str, Any] | None, error: str | None) -> None:
    if ctx.done or ctx.index is None:
        return
    ctx.done = True
    _CTX.pop(ctx.token, None)
    try:
        record = RequestRecord(index=ctx.index, duration_ms=round((time.perf_counter() - ctx.t0) * 1000, 3),
                               status=ctx.status, error=error, usage=usage, **ctx.partial)
    except Exception as e:
        log.exception("tracetrial recorder: invalid record for run %s", ctx.run_id)
        record = RequestRecord(index=ctx.index, duration_ms=None, status=ctx.status,
                               error=f"recorder error: {e}", usage=None,
                               **{**ctx.partial, "tools": [], "tool_results": [],
                                  "inventory_complete": False})
    _run_log(ctx.run_id).finish(record)


def _ctx_of(user_api_key_dict: Any) -> _Ctx | None:
    md = getattr(user_api_key_dict, "metadata", None) or {}
    token = md.get("tt") if isinstance(md, dict) else None
    return _CTX.get(token) if isinstance(token, str) else None


def _status_of(exc: BaseException) -> int | None:
    for attr in ("status_code", "code"):
        value = getattr(exc, attr, None)
        try:
            if value is not None and 100 <= int(value) <= 599:
                return int(value)
        except (TypeError, ValueError):
            continue
    return None


def _message_of(exc: BaseException) -> str:
    detail = getattr(exc, "detail", None) or getattr(exc, "message", None) or str(exc)
    text = detail if isinstance(detail, str) else json.dumps(detail, default=str)
    return f"{type(exc).__name__}: {text}"[:2000]


def _as_dict(obj: Any) -> dict[str, Any] | None:
    if isinstance(obj, dict):
        return obj
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        try:
            out = dump()
            return out if isinstance(out, dict) else None
        except Exception:  # noqa: BLE001
            return None
    return None


# ---------------------------------------------------------------- the recorder

class Recorder(CustomLogger):
    """Provider-boundary recorder (SPEC §8), one per proxy."""

    async def async_pre_call_hook(self, user_api_key_dict: UserAPIKeyAuth, cache: Any,
                                  data: dict[str, Any], call_type: Any) -> dict[str, Any]:
        ctx = _ctx_of(user_api_key_dict)
        if ctx is not None and ctx.index is None:
            if ctx.method == "POST" and ctx.raw:
                _begin(ctx)
            else:       # HEAD / GET: not a model call
                _CTX.pop(ctx.token, None)
        return data

    # -- pass-through ------------------------------------------------------------

    async def async_post_call_response_headers_hook(
            self, data: dict[str, Any], user_api_key_dict: UserAPIKeyAuth, response: Any,
            request_headers: dict[str, str] | None = None,
            litellm_call_info: dict[str, Any] | None = None) -> dict[str, str] | None:
        ctx = _ctx_of(user_api_key_dict)
        if ctx is None or ctx.index is None or ctx.done or ctx.route == "translation":
            return None
        if not isinstance(response, httpx.Response):
            return None
        assert ctx.wire is not None
        ctx.status = response.status_code
        reader = W.ResponseReader(ctx.wire, sse="text/event-stream" in response.headers.get("content-type", ""))
        if response.is_stream_consumed:
            reader.feed(response.content)
            self._finish_response(ctx, reader, response.content)
        else:
            original = response.aiter_bytes

            def tapped(chunk_size: int | None = None) -> AsyncIterator[bytes]:
                return self._tap(ctx, reader, original(chunk_size))

            response.aiter_bytes = tapped  # type: ignore[method-assign]
        return None

    async def _tap(self, ctx: _Ctx, reader: W.ResponseReader, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        error: str | None = None
        body = bytearray()
        try:
            async for chunk in chunks:
                reader.feed(chunk)
                if (ctx.status or 0) >= 400 and len(body) < 65536:
                    body += chunk
                yield chunk
        except (GeneratorExit, asyncio.CancelledError):
            # A client that hangs up after the stream's terminal event got the whole
            # response; only a close before it is a truncated response.
            if not reader.terminal_seen:
                error = "response stream closed before the upstream finished (client disconnected)"
            raise
        except Exception as e:
            error = f"upstream stream failed: {_message_of(e)}"
            raise
        finally:
            self._finish_response(ctx, reader, bytes(body), error)

    def _finish_response(self, ctx: _Ctx, reader: W.ResponseReader, body: bytes,
                         error: str | None = None) -> None:
        usage, stream_error = reader.finish()
        if (ctx.status or 0) >= 400:
            error = W.error_from_body(body) if body else (ctx.error or f"HTTP {ctx.status}")
        _finish(ctx, usage=usage, error=error or stream_error)

    async def async_post_call_failure_hook(self, request_data: dict[str, Any], original_exception: Exception,
                                           user_api_key_dict: UserAPIKeyAuth,
                                           traceback_str: str | None = None) -> None:
        ctx = _ctx_of(user_api_key_dict)
        if ctx is None or ctx.done:
            return
        if ctx.index is None:
            if ctx.method != "POST" or not ctx.raw:
                _CTX.pop(ctx.token, None)
                return
            _begin(ctx)
        ctx.status = _status_of(original_exception)
        ctx.error = _message_of(original_exception)
        detail = str(getattr(original_exception, "detail", ""))
        if ctx.route != "translation" and detail.startswith("Upstream passthrough request failed"):
            # The response hook follows with the upstream's own body; wait for it.
            asyncio.get_running_loop().call_later(_FAILURE_GRACE_S, self._late_failure, ctx)
            return
        if ctx.route != "translation" and isinstance(original_exception, httpx.HTTPError):
            ctx.status = None   # no upstream response at all (connect error, timeout)
        _finish(ctx, usage=None, error=ctx.error)

    @staticmethod
    def _late_failure(ctx: _Ctx) -> None:
        _finish(ctx, usage=None, error=ctx.error)

    # -- translation ---------------------------------------------------------------

    async def async_post_call_success_hook(self, data: dict[str, Any], user_api_key_dict: UserAPIKeyAuth,
                                           response: Any) -> Any:
        ctx = _ctx_of(user_api_key_dict)
        if ctx is not None and ctx.route == "translation" and ctx.index is not None and ctx.wire:
            ctx.status = 200
            obj = _as_dict(response) or {}
            _finish(ctx, usage=W.normalize_usage(obj.get("usage"), ctx.wire), error=None)
        return response

    async def async_post_call_streaming_iterator_hook(  # type: ignore[override]
            self, user_api_key_dict: UserAPIKeyAuth, response: Any,
            request_data: dict[str, Any]) -> AsyncIterator[Any]:
        ctx = _ctx_of(user_api_key_dict)
        if ctx is None or ctx.route != "translation" or ctx.index is None or ctx.wire is None:
            async for item in response:
                yield item
            return
        reader = W.ResponseReader(ctx.wire, sse=True)
        usage: dict[str, Any] | None = None
        error: str | None = None
        ctx.status = 200
        try:
            async for item in response:
                if isinstance(item, (bytes, str)):
                    reader.feed(item.encode() if isinstance(item, str) else item)
                else:
                    obj = _as_dict(item) or {}
                    raw = obj.get("usage")
                    if raw is None and isinstance(obj.get("response"), dict):
                        raw = obj["response"].get("usage")
                    if isinstance(raw, dict):
                        usage = W.normalize_usage(raw, ctx.wire)
                yield item
        except (GeneratorExit, asyncio.CancelledError):
            error = "response stream closed before the upstream finished (client disconnected)"
            raise
        except Exception as e:
            error = _message_of(e)
            ctx.status = _status_of(e)
            raise
        finally:
            parsed, stream_error = reader.finish()
            _finish(ctx, usage=parsed or usage, error=error or stream_error)

    async def async_log_success_event(self, kwargs: dict[str, Any], response_obj: Any,
                                      start_time: Any, end_time: Any) -> None:
        ctx = self._ctx_from_kwargs(kwargs)
        if ctx is not None and ctx.route == "translation" and ctx.index is not None and ctx.wire:
            ctx.status = ctx.status or 200
            obj = _as_dict(response_obj) or {}
            _finish(ctx, usage=W.normalize_usage(obj.get("usage"), ctx.wire), error=None)

    async def async_log_failure_event(self, kwargs: dict[str, Any], response_obj: Any,
                                      start_time: Any, end_time: Any) -> None:
        ctx = self._ctx_from_kwargs(kwargs)
        exc = kwargs.get("exception")
        if ctx is not None and ctx.route == "translation" and ctx.index is not None:
            if isinstance(exc, BaseException):
                ctx.status = _status_of(exc)
            _finish(ctx, usage=None, error=_message_of(exc) if isinstance(exc, BaseException) else "failed")

    @staticmethod
    def _ctx_from_kwargs(kwargs: dict[str, Any]) -> _Ctx | None:
        md = (kwargs.get("litellm_params") or {}).get("metadata") or {}
        auth_md = md.get("user_api_key_auth_metadata") if isinstance(md, dict) else None
        token = auth_md.get("tt") if isinstance(auth_md, dict) else None
        return _CTX.get(token) if isinstance(token, str) else None


recorder = Recorder()


# ---------------------------------------------------------------- control endpoints

_PROMOTED = False


def _promote_routes() -> None:
    """Move our ``/tt/...`` routes to the front of the router.

    LiteLLM registers ~650 routes and adds pass-through routes last; Starlette matches in
    order, so every probe request would first try them all (several ms per request)."""
    global _PROMOTED
    from litellm.proxy.proxy_server import app

    routes = app.router.routes
    ours = [r for r in routes if str(getattr(r, "path", "")).startswith("/tt/")]
    routes[:] = ours + [r for r in routes if not str(getattr(r, "path", "")).startswith("/tt/")]
    _PROMOTED = any(str(getattr(r, "path", "")).startswith((PROBE_PREFIX, LIVE_PREFIX)) for r in ours)


async def _health() -> dict[str, Any]:
    """Readiness probe (the parent waits for it); also puts our routes first."""
    _promote_routes()
    return {"instance_id": SETTINGS.instance_id, "pid": os.getpid(), "routes_first": _PROMOTED}


async def _drain(request: Request, run_id: str, timeout: float = 10.0) -> dict[str, Any]:
    """Wait until every request of ``run_id`` has its line; then write any still-open
    request with an error, so the file is complete when this returns. Only the parent may
    ask (header ``x-tt-control`` = the gateway secret): a process under test must not be
    able to close another run's records."""
    if not hmac.compare_digest(request.headers.get(CONTROL_HEADER, ""), SETTINGS.secret):
        raise _deny(403, "control requests need the gateway's control header")
    deadline = time.perf_counter() + max(0.0, min(timeout, 120.0))

    def open_ctx() -> list[_Ctx]:
        return [c for c in list(_CTX.values()) if c.run_id == run_id and c.index is not None and not c.done]

    while open_ctx() and time.perf_counter() < deadline:
        await asyncio.sleep(0.01)
    forced = open_ctx()
    for ctx in forced:
        _finish(ctx, usage=None, error="gateway: response still open when the run was drained")
    counts = _RUNS[run_id].counts() if run_id in _RUNS else {"arrived": 0, "written": 0}
    return {**counts, "forced": len(forced)}


async def _register(request: Request, run_id: str) -> dict[str, Any]:
    """Take the run's planted secrets (``{"secrets": [...]}``) before its first request, so
    its records never hold them in clear. Parent only (the gateway's control header): a
    process under test must not change what another run's records redact."""
    if not hmac.compare_digest(request.headers.get(CONTROL_HEADER, ""), SETTINGS.secret):
        raise _deny(403, "control requests need the gateway's control header")
    if not RUN_ID_RE.match(run_id):
        raise _deny(400, f"invalid run id: {run_id!r}")
    try:
        data = json.loads(await request.body() or b"{}")
    except ValueError:
        data = None
    values = data.get("secrets") if isinstance(data, dict) else None
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise _deny(400, 'expected {"secrets": [<string>, ...]}')
    _SECRETS[run_id] = tuple(values)
    if run_id in _RUNS:     # a request came first: later lines and bodies are redacted too
        _RUNS[run_id].redactor = _redactor(run_id)
        _RUNS[run_id].planted = _SECRETS[run_id]
    return {"run_id": run_id, "secrets": len(values)}


def _install_control_routes() -> None:
    from litellm.proxy.proxy_server import app

    paths = {getattr(r, "path", None) for r in app.router.routes}
    if f"{CONTROL_PREFIX}/health" not in paths:
        app.add_api_route(f"{CONTROL_PREFIX}/health", _health, methods=["GET"])
        app.add_api_route(f"{CONTROL_PREFIX}/drain/{{run_id}}", _drain, methods=["POST"])
        app.add_api_route(f"{CONTROL_PREFIX}/run/{{run_id}}", _register, methods=["POST"])


_install_control_routes()
