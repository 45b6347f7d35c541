"""Added latency of the TraceTrial gateway on loopback (prints numbers; not a test).

    python benchmarks/gateway_latency.py [--n 150] [--warmup 20]

For a small request (~0.6 KB) and a Claude-Code-sized one (~100 KB, 24 tools: the
captured Claude Code 2.1.220 body, padded), each a streamed Anthropic Messages call
answered by the fake upstream, it measures the client-side time to the last byte:

- direct to the upstream (baseline);
- pass-through via the probe route, recorder on (the default) and off (same proxy
  config otherwise: raw-body auth hook, no callback);
- pass-through via a live route (run key replaced by the upstream key);
- translation (Anthropic Messages -> Chat Completions through LiteLLM).

Added latency = gateway percentile - direct percentile (p50, p95). Goal: <= 20 ms p50
added on pass-through for the large request. Loopback only; bounded loops.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from apparatus.gateway import Gateway, ModelRegistry
from apparatus.gateway.fake_upstream import FakeUpstream

KEY_ENV = "TT_BENCH_UPSTREAM_KEY"
CLAUDE_BODY = ROOT / "tests" / "gateway" / "fixtures" / "claude_0.json"


def registry(upstream: str) -> ModelRegistry:
    price = {"input": 0, "cache_read": 0, "cache_write": 0, "output": 0}
    return ModelRegistry.from_data({"catalogue": {"frozen_on": "2026-11-30", "source": "bench"}, "models": {
        "probe": {"kind": "probe", "price": price},
        "bench-anthropic": {"kind": "live", "model": "bench", "key_env": KEY_ENV,
                            "upstreams": {"anthropic": upstream}, "price": price},
        "bench-chat": {"kind": "live", "model": "bench", "key_env": KEY_ENV, "upstreams": {"chat": upstream},
                       "translation": {"provider": "openai", "api_base": upstream + "/v1"}, "price": price},
    }})


def requests() -> dict[str, bytes]:
    small = json.dumps({"model": "bench", "max_tokens": 256, "stream": True, "metadata": {"user_id": "u"},
                        "system": "You are a careful assistant. " * 10,
                        "messages": [{"role": "user", "content": "Say hi. " * 20}]},
                       separators=(",", ":")).encode()
    big = json.loads(CLAUDE_BODY.read_bytes())
    assert len(big["tools"]) == 24
    big["model"] = "bench"
    big["messages"][0]["content"].append({"type": "text", "text": "x" * (100_000 - len(CLAUDE_BODY.read_bytes()))})
    return {"small": small, "large": json.dumps(big, separators=(",", ":")).encode()}


def once(client: httpx.Client, url: str, body: bytes, headers: dict[str, str]) -> float:
    t0 = time.perf_counter()
    with client.stream("POST", url, content=body, headers=headers) as r:
        for _ in r.iter_raw():
            pass
        if r.status_code != 200:
            raise SystemExit(f"{url}: HTTP {r.status_code}: {r.read()[:300]!r}")
    return (time.perf_counter() - t0) * 1000


def pct(xs: list[float], q: float) -> float:
    return statistics.quantiles(xs, n=100, method="inclusive")[int(q) - 1] if len(xs) > 1 else xs[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=150, help="timed requests per cell (default 150)")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--gap-ms", type=float, default=25.0, help="idle time before each request")
    args = ap.parse_args()
    env = dict(os.environ, **{KEY_ENV: "sk-bench-upstream"})
    bodies = requests()
    nodelay = httpx.HTTPTransport(socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)])
    with FakeUpstream() as up, tempfile.TemporaryDirectory() as tmp, \
            httpx.Client(transport=nodelay, trust_env=False, timeout=60) as c:
        base = Path(tmp)
        reg = registry(up.url)
        t0 = time.perf_counter()
        on = Gateway(base / "on", base / "on.log", up.url, reg, env=env).start()
        start_s = time.perf_counter() - t0
        off = Gateway(base / "off", base / "off.log", up.url, reg, env=env, recorder=False).start()
        try:
            anth = {"content-type": "application/json", "anthropic-version": "2023-06-01"}
            modes: dict[str, Callable[[str], tuple[str, dict[str, str]]]] = {
                "direct": lambda run: (up.url + "/v1/messages", anth),
                "pass-through (probe, recorder on)": lambda run: (
                    on.base_url(run, "probe", "anthropic") + "/v1/messages", anth),
                "pass-through (probe, recorder off)": lambda run: (
                    off.base_url(run, "probe", "anthropic") + "/v1/messages", anth),
                "pass-through (live, key swap)": lambda run: (
                    on.base_url(run, "bench-anthropic", "anthropic") + "/v1/messages",
                    {**anth, "x-api-key": on.api_key(run)}),
                "translation (anthropic->chat)": lambda run: (
                    on.base_url(run, "bench-chat", "anthropic") + "/v1/messages",
                    {**anth, "x-api-key": on.api_key(run)}),
            }
            # Modes are interleaved request by request in a shuffled order, so load changes
            # on this shared machine hit every mode alike; a short gap before each request
            # (as a harness has between model calls) lets the proxy finish its post-response
            # logging, which would otherwise be charged to the next request.
            rng = random.Random(0)
            results: dict[tuple[str, str], list[float]] = {(z, m): [] for z in bodies for m in modes}
            runs = {(z, m): f"bench-{z}-{i}" for i, (z, m) in enumerate(results)}
            targets = {key: modes[key[1]](runs[key]) for key in results}
            time.sleep(3)     # let the proxies finish their start-up work
            for size, body in bodies.items():
                payloads = {m: body.replace(b'"model":"bench"', b'"model":"bench-chat"')
                            if m.startswith("translation") else body for m in modes}
                order = list(modes)
                for i in range(args.warmup + args.n):
                    rng.shuffle(order)
                    for mode in order:
                        url, headers = targets[(size, mode)]
                        time.sleep(args.gap_ms / 1000)
                        dt = once(c, url, payloads[mode], headers)
                        if i >= args.warmup:
                            results[(size, mode)].append(dt)
            rec = on.records(runs[("large", "pass-through (probe, recorder on)")])
        finally:
            on.stop()
            off.stop()

    print(f"gateway start: {start_s:.1f} s; n={args.n} timed requests per row (+{args.warmup} warm-up, "
          f"{args.gap_ms:g} ms gap), "
          f"streamed Anthropic Messages, loopback, {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.1f} at the end")
    print(f"request sizes: small {len(bodies['small'])} B, large {len(bodies['large'])} B (24 tools)")
    print(f"{'size':6} {'mode':36} {'p50 ms':>8} {'p95 ms':>8} {'+p50 ms':>8} {'+p95 ms':>8}")
    for size in bodies:
        d50, d95 = pct(results[(size, "direct")], 50), pct(results[(size, "direct")], 95)
        for mode in modes:
            xs = results[(size, mode)]
            p50, p95 = pct(xs, 50), pct(xs, 95)
            added = "" if mode == "direct" else f"{p50 - d50:8.2f} {p95 - d95:8.2f}"
            print(f"{size:6} {mode:36} {p50:8.2f} {p95:8.2f} {added}")
        on50 = pct(results[(size, "pass-through (probe, recorder on)")], 50)
        off50 = pct(results[(size, "pass-through (probe, recorder off)")], 50)
        print(f"{size:6} {'recorder overhead (on - off), p50':36} {on50 - off50:8.2f}")
    print(f"records written for one large run: {len(rec)} (last status {rec[-1]['status'] if rec else None})")


if __name__ == "__main__":
    main()
