"""The measurement apparatus a harness runs inside, usable without pytest.

* :mod:`apparatus.gateway`: the LiteLLM proxy on loopback and the provider-boundary recorder;
* :mod:`apparatus.probe`: the scripted probe model server;
* :mod:`apparatus.sandbox`: the sandbox backends (local, bubblewrap, docker);
* :mod:`apparatus.simulators`: the task simulators (MCP services, ledgers, scripted user).

It imports only the kernel (:mod:`tracetrial`); harnesses, criteria, reports, the plugin and
the command sit above it (DESIGN §3, checked by the import-linter contract in the tests).
"""
