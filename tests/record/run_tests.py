#!/usr/bin/env python3
"""Runs the recorder's unittest modules named on the command line (CTest's entry point).

Exit status: 0 when they pass, 1 when one fails, 77 (CTest's SKIP_RETURN_CODE for these tests)
when PyTorch is not installed or every test skipped itself (the round trip without an epsim binary
that imports counts-jsonl, say).
"""

import os
import sys
import unittest

SKIPPED = 77


def main(names):
    sys.dont_write_bytecode = True
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    try:
        import torch  # noqa: F401
    except ImportError:
        print(f"SKIPPED: PyTorch is not installed for {sys.executable} "
              f"(Debian: apt-get install python3-torch)")
        return SKIPPED
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
