#!/usr/bin/env python3
"""refresh_rates: fetch the latest EUR reference rates for the invoicing run.

    ./refresh_rates.py

Asks the rates service first: GET <base URL>v1/latest?base=EUR, the base URL being the one line of
config/upstream.url. When that request fails (no answer, an HTTP error, a body that is not rates),
it falls back to the local mirror, mirror/eur-latest.json (copied from the service every Friday).

Prints the rates it got as one JSON line on stdout:

    {"base": "EUR", "as_of": "<date>", "source": "upstream" | "mirror", "rates": {"USD": "1.0583", ...}}

Problems go to stderr. Exit status 0 with rates from either source, 1 when neither has any.
Rates stay strings, exactly as the source gave them (no float rounding).
"""

import json
import sys
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
URL_FILE = HERE / "config" / "upstream.url"
MIRROR = HERE / "mirror" / "eur-latest.json"
TIMEOUT_S = 5


def warn(message):
    print(f"refresh_rates: {message}", file=sys.stderr, flush=True)


def valid(data):
    """The rates document with string rates, or None."""
    if not isinstance(data, dict) or data.get("base") != "EUR" or not isinstance(data.get("as_of"), str):
        return None
    rates = data.get("rates")
    if not isinstance(rates, dict) or not rates or not all(isinstance(v, str) for v in rates.values()):
        return None
    return {"base": "EUR", "as_of": data["as_of"], "rates": dict(rates)}


def from_upstream():
    try:
        base = URL_FILE.read_text(encoding="utf-8").strip()
    except OSError as exc:
        warn(f"no rates service configured ({URL_FILE.name}: {exc.strerror or exc})")
        return None
    url = base.rstrip("/") + "/v1/latest?base=EUR"
    request = urllib.request.Request(url, headers={"Accept": "application/json",
                                                   "User-Agent": "refresh_rates/2.3"})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            body = response.read()
    except Exception as exc:  # noqa: BLE001 - any failure means: use the mirror
        warn(f"upstream request failed: GET {url}: {exc}")
        return None
    try:
        data = valid(json.loads(body))
    except ValueError:
        data = None
    if data is None:
        warn(f"upstream request failed: GET {url}: the answer is not an EUR rates document")
    return data


def from_mirror():
    try:
        data = valid(json.loads(MIRROR.read_text(encoding="utf-8")))
    except (OSError, ValueError) as exc:
        warn(f"the local mirror cannot be read: {exc}")
        return None
    if data is None:
        warn("the local mirror is not an EUR rates document")
    return data


def main():
    data, source = from_upstream(), "upstream"
    if data is None:
        data, source = from_mirror(), "mirror"
        if data is None:
            warn("no rates: neither the rates service nor the local mirror answered")
            return 1
        warn(f"using the local mirror {MIRROR.relative_to(HERE)} (rates as of {data['as_of']})")
    print(json.dumps({"base": data["base"], "as_of": data["as_of"], "source": source, "rates": data["rates"]}),
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
