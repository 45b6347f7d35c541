"""CI support: the regression gate against stored verdict baselines, probe-protocol
determinism checks, and a GitHub Actions example for harness maintainers.

    ci.baseline      tt-baseline/1 model, load/store, read an output archive
    ci.gate          pure comparison -> GateResult, readable diff
    ci.command       ``tracetrial gate`` (the I/O around ci.gate)
    ci.determinism   normalized traces and run-to-run comparison
    ci/baselines/    committed baselines (probe.json)

See ci/README.md.
"""
