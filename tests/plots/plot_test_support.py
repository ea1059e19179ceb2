"""Shared by the tests of the plotting scripts in experiments/: paths, and running a script with or
without matplotlib importable."""

import importlib.util
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
FIXTURES = os.path.join(SOURCE, "tests", "fixtures", "plots")
HAVE_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None
# The scripts import their shared module (plot_output.py) from their own folder, as when run.
sys.path.insert(0, os.path.join(SOURCE, "experiments"))

# Runs the script as __main__ after making `import matplotlib` fail the way it does where the package
# is not installed (a None entry in sys.modules raises ImportError).
# (The script's folder first on the path, as `python3 SCRIPT` puts it: the scripts import plot_output.)
HIDE_MATPLOTLIB = ("import os, runpy, sys; sys.modules['matplotlib'] = None; "
                   "script = sys.argv[1]; sys.argv = sys.argv[1:]; "
                   "sys.path.insert(0, os.path.dirname(os.path.abspath(script))); "
                   "runpy.run_path(script, run_name='__main__')")


def environment():
    env = dict(os.environ)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def run_script(script, args):
    return subprocess.run([sys.executable, script, *args], capture_output=True, text=True, env=environment())


def check_refuses_a_missing_folder(test, script, args, name):
    """`script ARGS -o MISSING/NAME` (a folder that does not exist): exit 2, one line naming the output,
    nothing written."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "no-such-folder", name)
        result = run_script(script, [*args, "-o", path])
        test.assertEqual(result.returncode, 2)
        test.assertEqual(result.stderr,
                         f"{os.path.basename(script)}: error: {path}: cannot write (No such file or directory)\n")
        test.assertEqual(os.listdir(tmp), [])


def run_without_matplotlib(script, args):
    return subprocess.run([sys.executable, "-c", HIDE_MATPLOTLIB, script, *args], capture_output=True,
                          text=True, env=environment())
