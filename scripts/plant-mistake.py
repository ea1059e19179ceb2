#!/usr/bin/env python3
"""Plants one mistake in epsim's code and says whether any test notices it.

    scripts/plant-mistake.py FILE OLD NEW [--filter PATTERN | --ctest REGEX] [--build DIR]

Replaces OLD (which must occur exactly once in FILE) by NEW, builds `epsim` and the doctest suite in
the build folder (default: build), runs the suite (or the test cases matching PATTERN, doctest's
--test-case syntax) and prints the test cases that failed. With --ctest it runs the CTest tests whose
names match REGEX instead (`ctest -R`), which reaches the Python suites too: the recorder's
(`record\.`) and the plotting scripts' (`plots\.`). FILE is put back as it was and the build
folder rebuilt from it, whatever happens, Ctrl-C included.

Exit status: 0 when a test noticed the mistake (a failed check or a crash), 1 when every test passed,
2 when the mistake could not be planted or did not build. A mistake that no test notices marks code
whose behaviour no test holds: either a test is missing, or the code decides nothing a user could
see (a bound kept for speed alone). docs/reliability.md ("Planted mistakes") lists those tried.
"""
import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


def build(build_dir: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ninja", "-C", build_dir, "tests/epsim_tests", "epsim"], capture_output=True, text=True)


def failed_cases(output: str) -> list:
    """The test cases of doctest's report blocks that hold an error (not those of MESSAGE blocks)."""
    names = []
    for block in re.split(r"^=+$", output, flags=re.M):
        case = re.search(r"^TEST CASE:\s+(.*)$", block, flags=re.M)
        if case and re.search(r"\b(ERROR|FATAL ERROR)\b", block) and case.group(1) not in names:
            names.append(case.group(1))
    return names


def ctest_verdict(build_dir: str, regex: str) -> int:
    """Runs the CTest tests matching `regex` and prints those that failed; 0 when one did, 1 when
    all passed, 2 when none matched or every one was skipped (a suite without its interpreter or
    PyTorch notices nothing)."""
    run = subprocess.run(["ctest", "--test-dir", build_dir, "-R", regex, "--output-on-failure"],
                         capture_output=True, text=True)
    out = run.stdout + run.stderr
    if "No tests were found" in out:
        print(f"plant-mistake: no CTest test matches '{regex}'", file=sys.stderr)
        return 2
    failed = re.findall(r"^\s*\d+ - (.+?) \((?:Failed|SEGFAULT|Subprocess aborted|Timeout|Exception|Child aborted)\)",
                        out, flags=re.M)
    ran = re.search(r"tests passed, (\d+) tests failed out of (\d+)", out)
    skipped = len(re.findall(r"\*\*\*Skipped", out))
    if ran and skipped == int(ran.group(2)):
        print("plant-mistake: every test matched was skipped", file=sys.stderr)
        return 2
    if run.returncode == 0:
        print(f"not noticed: every test passed ({ran.group(2) if ran else '?'} CTest tests, {skipped} skipped)")
        return 1
    print(f"noticed: {len(failed)} failed CTest tests")
    for name in failed:
        print("  " + name)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file")
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--filter", help="run only the test cases matching this (doctest --test-case)")
    parser.add_argument("--ctest", metavar="REGEX", help="run the CTest tests matching this instead (ctest -R)")
    parser.add_argument("--build", default="build", help="the build folder (default: build)")
    args = parser.parse_args()
    if args.filter and args.ctest:
        parser.error("--filter and --ctest choose between two runners: give one")

    path = Path(args.file)
    text = path.read_text()
    found = text.count(args.old)
    if found != 1:
        print(f"plant-mistake: the text to replace occurs {found} times in {path}, not once", file=sys.stderr)
        return 2
    with tempfile.NamedTemporaryFile(delete=False) as kept:
        backup = Path(kept.name)
    shutil.copyfile(path, backup)
    try:
        path.write_text(text.replace(args.old, args.new))
        built = build(args.build)
        if built.returncode != 0:
            print("plant-mistake: the mistake does not build:\n" + built.stdout[-3000:], file=sys.stderr)
            return 2
        if args.ctest:
            return ctest_verdict(args.build, args.ctest)
        command = [str(Path(args.build) / "tests" / "epsim_tests"), "--no-intro"]
        if args.filter:
            command.append("--test-case=" + args.filter)
        run = subprocess.run(command, capture_output=True, text=True)
        cases = failed_cases(run.stdout)
        if run.returncode == 0:
            print("not noticed: every test passed")
            return 1
        errors = len(re.findall(r"\b(?:ERROR|FATAL ERROR):", run.stdout))
        how = f"exit status {run.returncode}" + (" (crashed)" if run.returncode < 0 else "")
        print(f"noticed: {errors} failed checks in {len(cases)} test cases, {how}")
        for name in cases:
            print("  " + name)
        return 0
    finally:
        # The text back with a new modification time, so that the build sees it changed again.
        shutil.copyfile(backup, path)
        backup.unlink()
        build(args.build)


if __name__ == "__main__":
    sys.exit(main())
