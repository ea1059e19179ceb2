#!/usr/bin/env python3
"""Runs the plotting scripts' unittest cases named on the command line (CTest's entry point), e.g.
`run_tests.py test_plot_sweep.DrawingTest`.

Exit status: 0 when they pass, 1 when one fails, 77 (CTest's SKIP_RETURN_CODE for the drawing tests)
when every test skipped itself, as the drawing tests do without matplotlib.
"""

import os
import sys
import unittest

SKIPPED = 77


def main(names):
    sys.dont_write_bytecode = True
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    suite = unittest.defaultTestLoader.loadTestsFromNames(names)
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    if not result.wasSuccessful():
        return 1
    if result.testsRun and len(result.skipped) == result.testsRun:
        print("SKIPPED: " + "; ".join(sorted({reason for _, reason in result.skipped})))
        return SKIPPED
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
