"""experiments/plot_timeline.py: the utilisation it computes from a timeline, the files it writes, its
errors.

tests/fixtures/plots/timeline.json is a hand-written timeline of one record on 2 GPUs; forward pass:
  gpu 0 compute: 0-10 us and 5-15 us (overlapping: busy 0-15); gpu 1 compute: 10-20 us
  gpu 1 communication kernel: 0-5 us; gpu 0 copy engine: 0-20 us
  gpu 0 NVLink out: 20,000 bytes over 0-20 us; gpu 1 NIC out: 10,000 bytes over 5-10 us
and one backward GEMM on gpu 0 at 30-40 us.
"""

import importlib.util
import json
import os
import tempfile
import unittest

from plot_test_support import (FIXTURES, HAVE_MATPLOTLIB, SOURCE, check_refuses_a_missing_folder, run_script,
                               run_without_matplotlib)

SCRIPT = os.path.join(SOURCE, "experiments", "plot_timeline.py")
TIMELINE = os.path.join(FIXTURES, "timeline.json")
LABEL = "step 0 mb 0 layer 0"


def load_module():
    spec = importlib.util.spec_from_file_location("plot_timeline", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class UtilisationTest(unittest.TestCase):
    """4 bins of 5 us over the forward pass (0-20 us); numbers worked out from the fixture above."""

    def setUp(self):
        self.m = load_module()
        with open(TIMELINE) as f:
            self.bars = self.m.collect(json.load(f)["traceEvents"], LABEL, "forward")

    def track(self, gpu, name):
        return self.bars.get((gpu, self.m.TRACKS.index(name)), [])

    def test_busy_fraction_merges_overlapping_kernels(self):
        self.assertEqual(self.m.busy_fraction(self.track(0, "compute"), 0.0, 5.0, 4), [1, 1, 1, 0])
        self.assertEqual(self.m.busy_fraction(self.track(1, "compute"), 0.0, 5.0, 4), [0, 0, 1, 1])
        self.assertEqual(self.m.busy_fraction(self.track(1, "comm_kernel"), 0.0, 5.0, 4), [1, 0, 0, 0])
        self.assertEqual(self.m.busy_fraction(self.track(0, "copy_engine"), 0.0, 5.0, 4), [1, 1, 1, 1])
        # Bins of 8 us: gpu 0 computes 0-15, so 8 of 8, 7 of 8, 0 of 4 (the last bin ends at 24).
        self.assertEqual(self.m.busy_fraction(self.track(0, "compute"), 0.0, 8.0, 3), [1, 7 / 8, 0])

    def test_link_rate_spreads_bytes_over_the_message(self):
        # 20,000 bytes over 20 us = 1,000 bytes/us = 1 GB/s; 10,000 bytes over 5-10 us = 2 GB/s.
        self.assertEqual(self.m.rate_GBps(self.track(0, "nvlink_out"), 0.0, 5.0, 4), [1, 1, 1, 1])
        self.assertEqual(self.m.rate_GBps(self.track(1, "nic_out"), 0.0, 5.0, 4), [0, 2, 0, 0])

    def test_pass_selects_the_events(self):
        self.assertEqual(self.track(0, "compute"), [(0.0, 10.0, "gemm fwd", 0), (5.0, 10.0, "shared fwd", 0)])
        with open(TIMELINE) as f:
            backward = self.m.collect(json.load(f)["traceEvents"], LABEL, "backward")
        self.assertEqual(backward, {(0, 0): [(30.0, 10.0, "gemm dgrad", 0)]})


class TimelineErrorTest(unittest.TestCase):

    def test_without_matplotlib_says_how_to_install_it(self):
        with tempfile.TemporaryDirectory() as out:
            result = run_without_matplotlib(SCRIPT, [TIMELINE, "-o", os.path.join(out, "u.png"), "--utilisation"])
            self.assertEqual(result.returncode, 2, result.stderr)
            lines = result.stderr.strip().splitlines()
            self.assertEqual(len(lines), 1, result.stderr)
            self.assertIn("apt-get install python3-matplotlib", lines[0])
            self.assertEqual(os.listdir(out), [])

    def refused(self, args, message):
        with tempfile.TemporaryDirectory() as out:
            result = run_script(SCRIPT, [TIMELINE, "-o", os.path.join(out, "u.png"), *args])
            self.assertEqual(result.returncode, 2)
            self.assertEqual(result.stderr, f"plot_timeline.py: error: {message}\n")
            self.assertEqual(os.listdir(out), [])

    def test_record_out_of_range(self):
        # (-1 is not the last record: records are counted from 0.)
        for record in ["1", "-1"]:
            with self.subTest(record=record):
                self.refused(["--record", record], f"{TIMELINE}: has 1 records, asked for record {record}")

    def test_gpus_not_in_the_timeline(self):
        for extra in [[], ["--utilisation"]]:
            with self.subTest(extra=extra):
                self.refused(["--gpus", "1,2", *extra], f"--gpus: GPU 2 is not in {TIMELINE} (its GPUs: 0, 1)")
        # A timeline without the events that name its GPUs: those with events in the record count.
        with open(TIMELINE) as f:
            timeline = json.load(f)
        timeline["traceEvents"] = [e for e in timeline["traceEvents"] if e.get("name") != "process_name"]
        with tempfile.TemporaryDirectory() as out:
            path = os.path.join(out, "unnamed.json")
            with open(path, "w") as f:
                json.dump(timeline, f)
            result = run_script(SCRIPT, [path, "-o", os.path.join(out, "u.png"), "--gpus", "3"])
            self.assertEqual(result.returncode, 2)
            self.assertEqual(result.stderr,
                             f"plot_timeline.py: error: --gpus: GPU 3 is not in {path} (its GPUs: 0, 1)\n")


@unittest.skipUnless(HAVE_MATPLOTLIB, "matplotlib is not installed (Debian: apt-get install python3-matplotlib)")
class TimelineDrawingTest(unittest.TestCase):

    def draw(self, path, *extra, gpus=2):
        result = run_script(SCRIPT, [TIMELINE, "-o", path, *extra])
        self.assertEqual(result.returncode, 0, result.stderr)
        passes = "forward" if "--pass" not in extra else extra[extra.index("--pass") + 1]
        self.assertEqual(result.stdout, f"wrote {path}: {LABEL}, {passes} pass, {gpus} GPU{'' if gpus == 1 else 's'}\n")
        with open(path, "rb") as f:
            return f.read()

    def test_gantt_and_utilisation_as_png_and_svg_twice_the_same(self):
        with tempfile.TemporaryDirectory() as out:
            for name, extra in [("gantt", []), ("util", ["--utilisation", "--bins", "4"])]:
                png = self.draw(os.path.join(out, name + ".png"), *extra)
                self.assertEqual(png[:8], b"\x89PNG\r\n\x1a\n")
                self.assertEqual(png, self.draw(os.path.join(out, name + "-again.png"), *extra))
                svg = self.draw(os.path.join(out, name + ".svg"), *extra)
                self.assertIn(b"<svg", svg)
                self.assertNotIn(b"<dc:date>", svg)
                self.assertEqual(svg, self.draw(os.path.join(out, name + "-again.svg"), *extra))
            # Each written whole, then renamed: no temporary file is left beside them.
            self.assertEqual(sorted(os.listdir(out)), sorted(f"{name}{again}.{fmt}" for name in ["gantt", "util"]
                                                              for again in ["", "-again"] for fmt in ["png", "svg"]))

    def test_an_output_folder_that_does_not_exist(self):
        check_refuses_a_missing_folder(self, SCRIPT, [TIMELINE], "u.png")

    def test_an_existing_figure_is_replaced_and_a_subset_of_gpus_drawn(self):
        with tempfile.TemporaryDirectory() as out:
            path = os.path.join(out, "g.png")
            with open(path, "wb") as f:
                f.write(b"an older figure")
            self.assertEqual(self.draw(path, "--gpus", "1", gpus=1)[:8], b"\x89PNG\r\n\x1a\n")
            self.assertEqual(os.listdir(out), ["g.png"])
            # Utilisation over the GPUs asked for, idle ones too: GPU 1 has nothing in the backward pass.
            self.draw(path, "--gpus", "1", "--utilisation", gpus=1)
            self.draw(path, "--utilisation", "--pass", "backward", gpus=2)


if __name__ == "__main__":
    unittest.main()
