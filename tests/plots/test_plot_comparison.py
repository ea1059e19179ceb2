"""experiments/plot_comparison.py: what it reads from a comparison.csv, the file it writes, its errors.

The fixtures (tests/fixtures/plots/) are hand-written: comparison.csv has static_ep and feplb at EP 8
and 16 and a deepseek_eplb row that is n/a (all its records warm-up); comparison-no-bound.csv is a table
without the oracle's bound and gap columns.
"""

import importlib.util
import os
import tempfile
import unittest

from plot_test_support import (FIXTURES, HAVE_MATPLOTLIB, SOURCE, check_refuses_a_missing_folder, run_script,
                               run_without_matplotlib)

SCRIPT = os.path.join(SOURCE, "experiments", "plot_comparison.py")


def load_module():
    spec = importlib.util.spec_from_file_location("plot_comparison", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class ComparisonReadingTest(unittest.TestCase):
    """The rows the figure is drawn from; needs no matplotlib (the script imports it only to draw)."""

    def test_served_rows_grouped_by_case_and_ep(self):
        m = load_module()
        rows = m.read_rows(os.path.join(FIXTURES, "comparison.csv"))
        self.assertEqual([r["balancer"] for r in rows], ["static_ep", "feplb", "static_ep", "feplb"])
        groups = m.panels(rows)
        self.assertEqual(list(groups), [("synthetic", 8), ("synthetic", 16)])
        # The bottom panel's bars: layer time and its gap to the bound (layer - bound).
        ep16 = groups[("synthetic", 16)]
        self.assertEqual([float(r["gap_to_bound_us_median"]) for r in ep16], [900.0, 500.0])
        self.assertEqual({float(r["bound_layer_time_us_median"]) for r in ep16}, {1100.0})


class ComparisonErrorTest(unittest.TestCase):
    """Errors come as one line and exit status 2, with or without matplotlib; nothing is written."""

    def test_a_table_without_the_bound_names_the_column(self):
        path = os.path.join(FIXTURES, "comparison-no-bound.csv")
        with tempfile.TemporaryDirectory() as out:
            png = os.path.join(out, "c.png")
            result = run_script(SCRIPT, [path, "-o", png])
            self.assertEqual(result.returncode, 2, result.stderr)
            self.assertEqual(result.stderr.strip().splitlines(),
                             [f"plot_comparison.py: error: {path}: no column 'bound_layer_time_us_median' "
                              "(not a comparison.csv of epsim compare)"])
            self.assertEqual(os.listdir(out), [])

    def test_a_table_without_rows_or_without_a_served_row_is_refused(self):
        # A header alone, and a table whose every row says why its balancer could not serve.
        with open(os.path.join(FIXTURES, "comparison.csv"), encoding="utf-8") as f:
            lines = f.read().splitlines()
        header = lines[0].split(",")
        column = header.index("not_served")
        unserved = []
        for line in lines[1:]:
            cells = line.split(",")
            cells[column] = "cannot serve"
            unserved.append(",".join(cells))
        for body, message in (([], "no rows"), (unserved, "no row was served (see the not_served column)")):
            with self.subTest(message=message), tempfile.TemporaryDirectory() as out:
                path = os.path.join(out, "comparison.csv")
                with open(path, "w", encoding="utf-8") as f:
                    f.write("\n".join([lines[0]] + body) + "\n")
                png = os.path.join(out, "c.png")
                result = run_script(SCRIPT, [path, "-o", png])
                self.assertEqual(result.returncode, 2, result.stderr)
                self.assertEqual(result.stderr.strip(), f"plot_comparison.py: error: {path}: {message}")
                self.assertFalse(os.path.exists(png))

    def test_an_output_that_is_not_png_or_svg(self):
        with tempfile.TemporaryDirectory() as out:
            pdf = os.path.join(out, "c.pdf")
            result = run_script(SCRIPT, [os.path.join(FIXTURES, "comparison.csv"), "-o", pdf])
            self.assertEqual(result.returncode, 2)
            self.assertEqual(result.stderr,
                             f"plot_comparison.py: error: {pdf}: expected a .png or .svg file to write\n")
            self.assertEqual(os.listdir(out), [])

    def test_a_missing_file_is_named(self):
        path = os.path.join(FIXTURES, "no-such-comparison.csv")
        result = run_script(SCRIPT, [path])
        self.assertEqual(result.returncode, 2)
        self.assertTrue(result.stderr.startswith(f"plot_comparison.py: error: {path}: cannot read"), result.stderr)

    def test_without_matplotlib_says_how_to_install_it(self):
        with tempfile.TemporaryDirectory() as out:
            result = run_without_matplotlib(SCRIPT, [os.path.join(FIXTURES, "comparison.csv"), "-o",
                                                     os.path.join(out, "c.png")])
            self.assertEqual(result.returncode, 2, result.stderr)
            lines = result.stderr.strip().splitlines()
            self.assertEqual(len(lines), 1, result.stderr)
            self.assertIn("apt-get install python3-matplotlib", lines[0])
            self.assertNotIn("Traceback", result.stderr)
            self.assertEqual(os.listdir(out), [])


@unittest.skipUnless(HAVE_MATPLOTLIB, "matplotlib is not installed (Debian: apt-get install python3-matplotlib)")
class ComparisonDrawingTest(unittest.TestCase):

    def test_writes_one_png_byte_identical_twice(self):
        with tempfile.TemporaryDirectory() as tmp:
            a, b = os.path.join(tmp, "a.png"), os.path.join(tmp, "b.png")
            for png in (a, b):
                result = run_script(SCRIPT, [os.path.join(FIXTURES, "comparison.csv"), "-o", png])
                self.assertEqual(result.returncode, 0, result.stderr)
                self.assertEqual(result.stdout.strip(), f"wrote {png}")
            with open(a, "rb") as fa, open(b, "rb") as fb:
                data = fa.read()
                self.assertEqual(data[:8], b"\x89PNG\r\n\x1a\n")
                self.assertNotIn(b"Software", data)
                self.assertEqual(data, fb.read())

    def test_svg_twice_the_same_and_an_older_figure_replaced_whole(self):
        with tempfile.TemporaryDirectory() as tmp:
            a, b = os.path.join(tmp, "a.svg"), os.path.join(tmp, "b.svg")
            with open(a, "w") as f:
                f.write("an older figure")
            for svg in (a, b):
                result = run_script(SCRIPT, [os.path.join(FIXTURES, "comparison.csv"), "-o", svg])
                self.assertEqual(result.returncode, 0, result.stderr)
            with open(a, "rb") as fa, open(b, "rb") as fb:
                data = fa.read()
                self.assertIn(b"<svg", data)
                self.assertNotIn(b"<dc:date>", data)
                self.assertEqual(data, fb.read())
            self.assertEqual(sorted(os.listdir(tmp)), ["a.svg", "b.svg"])

    def test_an_output_folder_that_does_not_exist(self):
        check_refuses_a_missing_folder(self, SCRIPT, [os.path.join(FIXTURES, "comparison.csv")], "c.png")


if __name__ == "__main__":
    unittest.main()
