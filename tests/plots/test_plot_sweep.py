"""experiments/plot_sweep.py: what it reads from a sweep's table, the files it writes, its errors.

The fixtures (tests/fixtures/plots/) are small hand-written tables: results.csv has two points (EP 8
and 16) and two balancers (static_ep, the baseline, and feplb); results.jsonl holds the same rows as
JSON lines; results-seeds.csv varies ep_degree and trace.seed, and feplb cannot serve one point.
"""

import importlib.util
import os
import subprocess
import sys
import tempfile
import unittest

from plot_test_support import FIXTURES, HAVE_MATPLOTLIB, SOURCE, run_script, run_without_matplotlib

SCRIPT = os.path.join(SOURCE, "experiments", "plot_sweep.py")
OUTPUTS = ["sweep-straggler.png", "sweep-straggler.svg", "sweep-gain.png", "sweep-gain.svg"]


def load_module():
    spec = importlib.util.spec_from_file_location("plot_sweep", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class ReadingTest(unittest.TestCase):
    """The numbers the figures are drawn from; needs no matplotlib (the script imports it last)."""

    def setUp(self):
        self.m = load_module()

    def test_csv_and_jsonl_give_the_same_rows(self):
        csv_rows, csv_keys = self.m.read_table(os.path.join(FIXTURES, "results.csv"))
        json_rows, json_keys = self.m.read_table(os.path.join(FIXTURES, "results.jsonl"))
        self.assertEqual(csv_keys, ["ep_degree"])
        self.assertEqual(json_keys, ["ep_degree"])
        self.assertEqual(len(csv_rows), 12)
        self.assertEqual(len(json_rows), 12)
        for a, b in zip(csv_rows, json_rows):
            for column in ("point", "balancer", "metric", "not_served", "values"):
                self.assertEqual(a[column], b[column])
            for column in ("mean", "mean_vs_baseline"):
                self.assertEqual(float(a[column]), float(b[column]))

    def test_the_sharing_column_is_not_a_key(self):
        # epsim writes the bandwidth sharing each point ran with as the last column.
        with open(os.path.join(FIXTURES, "results.csv"), encoding="utf-8") as f:
            lines = f.read().splitlines()
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "results.csv")
            with open(path, "w", encoding="utf-8") as f:
                f.write(lines[0] + ",sharing\n" + "".join(line + ",exact\n" for line in lines[1:]))
            rows, keys = self.m.read_table(path)
        self.assertEqual(keys, ["ep_degree"])
        self.assertEqual(len(rows), 12)

    def test_lines_per_balancer_against_ep(self):
        rows, keys = self.m.read_table(os.path.join(FIXTURES, "results.csv"))
        series = self.m.Series(rows, keys, "ep_degree", 6)
        self.assertEqual(series.columns, [()])
        self.assertFalse(series.averaged)
        layer = series.lines(self.m.served_means(rows, "layer_time_us", "mean"), ())
        self.assertEqual(sorted(layer["static_ep"]), [("16", 1400, 1400, 1400), ("8", 1000, 1000, 1000)])
        self.assertEqual(sorted(layer["feplb"]), [("16", 1050, 1050, 1050), ("8", 900, 900, 900)])
        gain = series.lines(self.m.served_means(rows, "layer_time_us", "mean_vs_baseline"), ())
        self.assertEqual(sorted(gain["feplb"]), [("16", 0.75, 0.75, 0.75), ("8", 0.9, 0.9, 0.9)])

    def test_baseline_is_the_balancer_at_one_everywhere(self):
        rows, _ = self.m.read_table(os.path.join(FIXTURES, "results.csv"))
        self.assertEqual(self.m.baseline_of(rows), "static_ep")

    def test_other_keys_become_columns(self):
        rows, keys = self.m.read_table(os.path.join(FIXTURES, "results-seeds.csv"))
        self.assertEqual(keys, ["ep_degree", "trace.seed"])
        series = self.m.Series(rows, keys, "ep_degree", 6)
        self.assertEqual(series.columns, [("1",), ("2",)])
        self.assertEqual(series.column_title(("2",)), "trace.seed=2")
        means = self.m.served_means(rows, "layer_time_us", "mean")
        # feplb did not serve point 2 (EP 16, seed 1): its line in that column has EP 8 only.
        self.assertEqual(sorted(series.lines(means, ("1",))["feplb"]), [("8", 800, 800, 800)])
        self.assertEqual(sorted(series.lines(means, ("2",))["feplb"]),
                         [("16", 1200, 1200, 1200), ("8", 900, 900, 900)])

    def test_more_combinations_than_columns_are_averaged(self):
        rows, keys = self.m.read_table(os.path.join(FIXTURES, "results-seeds.csv"))
        series = self.m.Series(rows, keys, "ep_degree", 1)
        self.assertTrue(series.averaged)
        self.assertEqual(series.column_title(()), "mean over 2 values of trace.seed")
        lines = series.lines(self.m.served_means(rows, "layer_time_us", "mean"), ())
        # static_ep: EP 8 seeds 1000 and 1200 -> mean 1100; EP 16 seeds 2000 and 1600 -> mean 1800.
        self.assertEqual(sorted(lines["static_ep"]), [("16", 1800, 1600, 2000), ("8", 1100, 1000, 1200)])
        self.assertEqual(sorted(lines["feplb"]), [("16", 1200, 1200, 1200), ("8", 850, 800, 900)])

    def test_numeric_axis_is_sorted_and_log_when_it_spans_a_factor_of_four(self):
        self.assertEqual(self.m.axis_values(["16", "8", "64", "8"]), (["8", "16", "64"], {"16": 16.0, "8": 8.0, "64": 64.0}, True))
        self.assertEqual(self.m.axis_values(["8", "16"])[2], False)
        self.assertEqual(self.m.axis_values(["h800", "b200", "h800"]), (["h800", "b200"], {"h800": 0, "b200": 1}, False))


    def test_a_span_of_exactly_four_is_log(self):
        self.assertEqual(self.m.axis_values(["8", "32"])[2], True)
        self.assertEqual(self.m.axis_values(["8", "31"])[2], False)

    def test_baseline_is_found_after_a_balancer_below_one(self):
        rows = [{"balancer": "feplb", "mean_vs_baseline": "0.9"},
                {"balancer": "static_ep", "mean_vs_baseline": "1"},
                {"balancer": "feplb", "mean_vs_baseline": "0.8"},
                {"balancer": "static_ep", "mean_vs_baseline": "1"}]
        self.assertEqual(self.m.baseline_of(rows), "static_ep")

    def test_x_is_the_first_preferred_key_then_the_first_varied_one(self):
        self.assertEqual(self.m.choose_x(["trace.seed", "ep_degree"], None, ["ep_degree"]), "ep_degree")
        self.assertEqual(self.m.choose_x(["trace.seed", "gpu.sms"], None, ["ep_degree"]), "trace.seed")
        self.assertEqual(self.m.choose_x([], None, ["ep_degree"]), "point")
        self.assertEqual(self.m.choose_x(["ep_degree"], "gpu.sms", ["ep_degree"]), "gpu.sms")

    def test_jsonl_blank_lines_and_nulls(self):
        with open(os.path.join(FIXTURES, "results.jsonl"), encoding="utf-8") as f:
            lines = f.read().splitlines()
        # A blank line between rows is skipped, and a null reads as an empty cell, as in results.csv.
        lines[1] = lines[1].replace('"not_served":""', '"not_served":null')
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "results.jsonl")
            with open(path, "w", encoding="utf-8") as f:
                f.write(lines[0] + "\n\n" + "\n".join(lines[1:]) + "\n")
            rows, keys = self.m.read_table(path)
        self.assertEqual(keys, ["ep_degree"])
        self.assertEqual(len(rows), 12)
        self.assertEqual(rows[1]["not_served"], "")

    def fixture_lines(self):
        with open(os.path.join(FIXTURES, "results.csv"), encoding="utf-8") as f:
            return f.read().splitlines()

    def test_a_mean_that_is_not_a_finite_number_names_its_line(self):
        # Row 3 of the table is line 4 of the file (the header is line 1).
        for bad in ("abc", "inf", "nan"):
            with self.subTest(bad=bad), tempfile.TemporaryDirectory() as tmp:
                lines = self.fixture_lines()
                cells = lines[3].split(",")
                cells[7] = bad   # the mean
                lines[3] = ",".join(cells)
                path = os.path.join(tmp, "results.csv")
                with open(path, "w", encoding="utf-8") as f:
                    f.write("\n".join(lines) + "\n")
                with self.assertRaisesRegex(self.m.TableError,
                                            f"^{path}:4: column 'mean' is '{bad}', not a number$"):
                    self.m.read_table(path)

    def test_a_table_without_rows_is_refused(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "results.csv")
            with open(path, "w", encoding="utf-8") as f:
                f.write(self.fixture_lines()[0] + "\n")
            with self.assertRaisesRegex(self.m.TableError, f"^{path}: no rows$"):
                self.m.read_table(path)


class ErrorTest(unittest.TestCase):
    """Errors come as one line and exit status 2, with or without matplotlib."""

    def test_missing_column_names_the_file_and_the_column(self):
        path = os.path.join(FIXTURES, "results-no-ratio.csv")
        with tempfile.TemporaryDirectory() as out:
            result = run_script(SCRIPT, [path, "-o", out])
            self.assertEqual(result.returncode, 2, result.stderr)
            self.assertEqual(result.stderr.strip().splitlines(),
                             [f"plot_sweep.py: error: {path}: no column 'mean_vs_baseline' "
                              "(not a results.csv of epsim sweep)"])
            self.assertEqual(os.listdir(out), [])

    def test_unknown_x_names_the_varied_keys(self):
        path = os.path.join(FIXTURES, "results.csv")
        with tempfile.TemporaryDirectory() as out:
            result = run_script(SCRIPT, [path, "-o", out, "--x", "experts"])
            self.assertEqual(result.returncode, 2)
            self.assertEqual(result.stderr.strip(),
                             f"plot_sweep.py: error: {path}: no varied key 'experts' (varied: ep_degree)")

    def test_without_matplotlib_says_how_to_install_it(self):
        with tempfile.TemporaryDirectory() as out:
            result = run_without_matplotlib(SCRIPT, [os.path.join(FIXTURES, "results.csv"), "-o", out])
            self.assertEqual(result.returncode, 2, result.stderr)
            lines = result.stderr.strip().splitlines()
            self.assertEqual(len(lines), 1, result.stderr)
            self.assertIn("matplotlib is not installed", lines[0])
            self.assertIn("apt-get install python3-matplotlib", lines[0])
            self.assertNotIn("Traceback", result.stderr)
            self.assertEqual(os.listdir(out), [])


@unittest.skipUnless(HAVE_MATPLOTLIB, "matplotlib is not installed (Debian: apt-get install python3-matplotlib)")
class DrawingTest(unittest.TestCase):

    def draw(self, out, table="results.csv", extra=()):
        result = run_script(SCRIPT, [os.path.join(FIXTURES, table), "-o", out, *extra])
        self.assertEqual(result.returncode, 0, result.stderr)
        return result

    def test_writes_png_and_svg_of_both_figures(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "figures")
            result = self.draw(out)
            self.assertEqual(sorted(os.listdir(out)), sorted(OUTPUTS))
            self.assertEqual(result.stdout.splitlines(), [f"wrote {os.path.join(out, n)}" for n in OUTPUTS])
            for name in OUTPUTS:
                with open(os.path.join(out, name), "rb") as f:
                    data = f.read()
                if name.endswith(".png"):
                    self.assertEqual(data[:8], b"\x89PNG\r\n\x1a\n")
                    self.assertNotIn(b"Software", data)
                else:
                    self.assertIn(b"<svg", data)
                    self.assertNotIn(b"<dc:date>", data)
                    self.assertNotIn(b"Matplotlib v", data)

    def test_two_runs_are_byte_identical(self):
        with tempfile.TemporaryDirectory() as tmp:
            first, second = os.path.join(tmp, "a"), os.path.join(tmp, "b")
            self.draw(first)
            self.draw(second)
            for name in OUTPUTS:
                with open(os.path.join(first, name), "rb") as a, open(os.path.join(second, name), "rb") as b:
                    self.assertEqual(a.read(), b.read(), name)

    def test_jsonl_draws_the_same_figures_as_csv(self):
        with tempfile.TemporaryDirectory() as tmp:
            self.draw(os.path.join(tmp, "csv"))
            self.draw(os.path.join(tmp, "jsonl"), "results.jsonl")
            for name in OUTPUTS:
                with open(os.path.join(tmp, "csv", name), "rb") as a, open(os.path.join(tmp, "jsonl", name), "rb") as b:
                    self.assertEqual(a.read(), b.read(), name)

    def test_one_format(self):
        with tempfile.TemporaryDirectory() as out:
            self.draw(out, extra=["--format", "svg", "--metric", "token_straggler_ratio"])
            self.assertEqual(sorted(os.listdir(out)), ["sweep-gain.svg", "sweep-straggler.svg"])

    def test_figures_replace_older_ones_whole(self):
        # Each is drawn into a temporary file beside it and renamed: an older figure is replaced, and
        # nothing else is left in the folder.
        with tempfile.TemporaryDirectory() as out:
            with open(os.path.join(out, "sweep-gain.png"), "wb") as f:
                f.write(b"an older figure")
            self.draw(out)
            self.assertEqual(sorted(os.listdir(out)), sorted(OUTPUTS))
            with open(os.path.join(out, "sweep-gain.png"), "rb") as f:
                self.assertEqual(f.read()[:8], b"\x89PNG\r\n\x1a\n")

    def test_an_output_folder_it_cannot_make(self):
        with tempfile.TemporaryDirectory() as tmp:
            taken = os.path.join(tmp, "a-file")
            with open(taken, "w") as f:
                f.write("not a folder")
            for out, why in ((taken, "File exists"), (os.path.join(taken, "figures"), "Not a directory")):
                with self.subTest(out=out):
                    result = run_script(SCRIPT, [os.path.join(FIXTURES, "results.csv"), "-o", out])
                    self.assertEqual(result.returncode, 2)
                    self.assertEqual(result.stderr, f"plot_sweep.py: error: {out}: cannot make the folder ({why})\n")
            self.assertEqual(os.listdir(tmp), ["a-file"])


if __name__ == "__main__":
    unittest.main()
