"""Codex: delegate a slow command to a background sub-agent and answer at once (no wait).

The Codex shape of ``subagent_background.py`` and of ``tasks/L4-pending-report-001``: the
parent's turn ends while the child still runs its command, so the records must keep the
child pending (``codex exec`` then ends the run and the child's turn is aborted).
"""

from tracetrial.policy import final, shell, spawn_subagent


def policy(turn):
    yield spawn_subagent("slow hi", "Run sleep 5 && echo hi and report.", background=True)
    yield final("The helper is still working.")


def subagent_policy(turn):
    yield shell("sleep 5 && echo hi", timeout_s=30)
    yield final("hi printed")
