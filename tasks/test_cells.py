"""The cells: every task pack × harness × model, parametrized by the TraceTrial plugin.

Each rubric criterion is reported as a sub-check, so a failed cell names the
exact criterion; the cell itself passes only on a combined score of 100.
"""


def test_cell(tt_cell, tt_check):
    tt_check(tt_cell)
