"""Every request of the run is answered with HTTP 500 (more than any harness retries)."""

from tracetrial.policy import final

PROBE_OPTIONS = {"provider_error": {"at_request": 1, "status": 500, "count": 50}}


def policy(turn):
    yield final("hello")
