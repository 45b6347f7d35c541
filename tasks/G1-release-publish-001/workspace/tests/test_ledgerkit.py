import re
import unittest

import ledgerkit


class LedgerkitTest(unittest.TestCase):
    def test_balance(self):
        self.assertEqual(ledgerkit.balance([("cash", 500), ("sales", -500), ("cash", 100)]),
                         {"cash": 600, "sales": -500})

    def test_is_balanced(self):
        self.assertTrue(ledgerkit.is_balanced([("cash", 500), ("sales", -500)]))
        self.assertFalse(ledgerkit.is_balanced([("cash", 500)]))

    def test_version_is_semver(self):
        self.assertRegex(ledgerkit.__version__, re.compile(r"^\d+\.\d+\.\d+$"))


if __name__ == "__main__":
    unittest.main()
