"""Every request of the run is answered with HTTP 500 by the probe."""

from tracetrial.policy import final

PROBE_OPTIONS = {"provider_error": {"at_request": 1, "status": 500, "count": 5}}


def policy(turn):
    yield final("hello")
