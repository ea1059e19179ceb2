"""Shared by the tests of the plotting scripts in experiments/: paths, and running a script with or
without matplotlib importable."""

import importlib.util
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
FIXTURES = os.path.join(SOURCE, "tests", "fixtures", "plots")
HAVE_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None

# Runs the script as __main__ after making `import matplotlib` fail the way it does where the package
# is not installed (a None entry in sys.modules raises ImportError).
HIDE_MATPLOTLIB = ("import runpy, sys; sys.modules['matplotlib'] = None; "
                   "script = sys.argv[1]; sys.argv = sys.argv[1:]; runpy.run_path(script, run_name='__main__')")


def environment():
    env = dict(os.environ)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def run_script(script, args):
    return subprocess.run([sys.executable, script, *args], capture_output=True, text=True, env=environment())


def run_without_matplotlib(script, args):
    return subprocess.run([sys.executable, "-c", HIDE_MATPLOTLIB, script, *args], capture_output=True,
                          text=True, env=environment())
