"""Task packs are data; the TraceTrial plugin turns them into cells.

Packs are not Python packages: keep pytest from importing their files as tests.
"""

collect_ignore_glob = ["*/workspace/*", "*/verifier/*", "*/probe_policy.py", "*/simulators/*"]
