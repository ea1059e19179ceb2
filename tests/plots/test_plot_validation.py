"""experiments/plot_validation.py: what it reads from `epsim validate`'s tables, what it draws from them,
its errors.

tests/fixtures/plots/validation/ is what `epsim validate` wrote for FEPLB at EP 8 on the H100 timeline
measured with the per-expert loop (experiments/validate-hw.sh, out/validate-hw/h100-sxm-feplb-ep8-loop):
40 matched tasks (GEMMs and Copy Engine copies) and 4 layers, none compared (the timeline measured no
EP kernel: each layer's unmeasured_tracks names comm_kernel and host_cpu). The other tables are written
by each test, with numbers worked out by hand.
"""

import importlib.util
import os
import tempfile
import unittest

from plot_test_support import (FIXTURES, HAVE_MATPLOTLIB, SOURCE, check_refuses_a_missing_folder, run_script,
                               run_without_matplotlib)

SCRIPT = os.path.join(SOURCE, "experiments", "plot_validation.py")
MEASURED = os.path.join(FIXTURES, "validation")
TASKS_HEADER = ("step,micro_batch,layer,gpu,track,pass,name,kind,occurrence,predicted_start_us,predicted_us,"
                "measured_start_us,measured_us,error")
LAYERS_HEADER = ("step,micro_batch,layer,predicted_us,measured_us,error,matched,predicted_only,measured_only,"
                 "measured_gpus,not_measured,unmeasured_tracks")


def load_module():
    spec = importlib.util.spec_from_file_location("plot_validation", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def task(predicted_us, measured_us, kind="gemm fwd", name="gemm fwd g0", track="compute"):
    return f"0,0,0,0,{track},forward,{name},{kind},0,0,{predicted_us},0,{measured_us},0"


def layer(predicted_us, measured_us, unmeasured=""):
    return f"0,0,0,{predicted_us},{measured_us},0,1,0,0,1,0,{unmeasured}"


def write_tables(folder, tasks, layers, tasks_header=TASKS_HEADER, layers_header=LAYERS_HEADER):
    for name, header, rows in (("tasks.csv", tasks_header, tasks), ("layers.csv", layers_header, layers)):
        with open(os.path.join(folder, name), "w") as f:
            f.write("\n".join([header, *rows]) + "\n")


class ValidationReadingTest(unittest.TestCase):

    def setUp(self):
        self.m = load_module()
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def test_reads_what_epsim_validate_wrote(self):
        tasks = self.m.read_rows(os.path.join(MEASURED, "tasks.csv"), self.m.TASK_COLUMNS)
        layers = self.m.read_rows(os.path.join(MEASURED, "layers.csv"), self.m.LAYER_COLUMNS)
        self.assertEqual(len(tasks), 40)
        self.assertEqual(len(layers), 4)
        # The first row: gemm fwd g0 on GPU 0, 2611.29524 us predicted against 2169.79211 us measured.
        self.assertEqual((tasks[0]["kind"], tasks[0]["predicted_us"], tasks[0]["measured_us"]),
                         ("gemm fwd", 2611.29524, 2169.79211))
        self.assertEqual(self.m.points(tasks)[1], 0)
        self.assertEqual(self.m.layer_points(layers), ([], 4))  # every layer lacks the EP kernels' track
        self.assertEqual(self.m.panel_titles(tasks, layers),
                         ("tasks (40)", "layers (0; 4 not drawn: at 0 us or not compared)"))

    def test_zero_durations_and_layers_not_compared_are_counted_not_drawn(self):
        write_tables(self.dir.name, [task(110, 100), task(0, 50), task(30, 0), task(90, 120)],
                     [layer(1000, 800), layer(500, 0), layer(700, 650, "comm_kernel"), layer(0, 0)])
        tasks = self.m.read_rows(os.path.join(self.dir.name, "tasks.csv"), self.m.TASK_COLUMNS)
        layers = self.m.read_rows(os.path.join(self.dir.name, "layers.csv"), self.m.LAYER_COLUMNS)
        drawn, skipped = self.m.points(tasks)
        self.assertEqual([(p, m) for p, m, _ in drawn], [(110, 100), (90, 120)])
        self.assertEqual(skipped, 2)
        drawn, skipped = self.m.layer_points(layers)
        self.assertEqual([(p, m) for p, m, _ in drawn], [(1000, 800)])
        self.assertEqual(skipped, 3)  # one at 0 us measured, one not compared, one at 0 us on both sides
        self.assertEqual(self.m.panel_titles(tasks, layers),
                         ("tasks (2; 2 at 0 us not drawn)", "layers (1; 3 not drawn: at 0 us or not compared)"))

    def test_errors_are_relative_to_the_measured_duration(self):
        self.assertEqual(self.m.error_percent(110.0, 100.0), 10.0)
        self.assertEqual(self.m.error_percent(90.0, 120.0), -25.0)

    def test_blank_lines_and_quoted_names_are_read(self):
        # epsim quotes a name with a comma; a blank line (an edited file) is passed over.
        write_tables(self.dir.name, [task(110, 100, name='"gemm fwd g0, g1"'), "", task(90, 120)], [layer(10, 8)])
        tasks = self.m.read_rows(os.path.join(self.dir.name, "tasks.csv"), self.m.TASK_COLUMNS)
        self.assertEqual([t["name"] for t in tasks], ["gemm fwd g0, g1", "gemm fwd g0"])


class ValidationErrorTest(unittest.TestCase):
    """Each table it cannot draw: exit 2, one line naming the file (and the line and column where one is
    at fault), and nothing written."""

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def refused(self, message, *extra):
        before = sorted(os.listdir(self.dir.name))
        result = run_script(SCRIPT, [self.dir.name, *extra])
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertEqual(result.stdout, "")
        self.assertEqual(result.stderr, f"plot_validation.py: error: {message}\n")
        self.assertEqual(sorted(os.listdir(self.dir.name)), before)

    def path(self, name):
        return os.path.join(self.dir.name, name)

    def test_missing_table(self):
        self.refused(f"{self.path('tasks.csv')}: cannot read (No such file or directory)")

    def test_table_of_another_writer(self):
        write_tables(self.dir.name, [task(1, 1)], [layer(1, 1)], tasks_header="step,track,kind,predicted")
        self.refused(f"{self.path('tasks.csv')}: not written by epsim validate (missing columns: predicted_us, "
                     "measured_us)")

    def test_empty_files(self):
        write_tables(self.dir.name, [task(1, 1)], [], layers_header="")
        self.refused(f"{self.path('layers.csv')}: not written by epsim validate (missing columns: predicted_us, "
                     "measured_us)")

    def test_header_alone(self):
        write_tables(self.dir.name, [], [layer(1, 1)])
        self.refused(f"{self.path('tasks.csv')}: no rows (epsim validate matched nothing)")

    def test_durations_that_are_not_finite_numbers_at_least_zero(self):
        for text in ["abc", "", "nan", "inf", "-1", "1e999"]:
            with self.subTest(text=text):
                write_tables(self.dir.name, [task(1, 1), task(2, 2), task(3, text)], [layer(1, 1)])
                self.refused(f"{self.path('tasks.csv')}:4: column 'measured_us' is '{text}', not a duration in us "
                             "(a finite number >= 0)")
        write_tables(self.dir.name, [task(1, 1)], [layer("x", 1)])
        self.refused(f"{self.path('layers.csv')}:2: column 'predicted_us' is 'x', not a duration in us "
                     "(a finite number >= 0)")

    def test_rows_of_other_lengths_name_their_line(self):
        write_tables(self.dir.name, [task(1, 1), "0,0,0,0,compute"], [layer(1, 1)])
        self.refused(f"{self.path('tasks.csv')}:3: 5 fields, the header has 14")
        write_tables(self.dir.name, [task(1, 1)], ["", layer(1, 1) + ",extra"])
        self.refused(f"{self.path('layers.csv')}:3: 13 fields, the header has 12")

    def test_an_output_that_is_not_png_or_svg(self):
        write_tables(self.dir.name, [task(1, 1)], [layer(1, 1)])
        self.refused(f"{self.path('v.pdf')}: expected a .png or .svg file to write", "-o", self.path("v.pdf"))

    def test_without_matplotlib_says_how_to_install_it(self):
        write_tables(self.dir.name, [task(1, 1)], [layer(1, 1)])
        result = run_without_matplotlib(SCRIPT, [self.dir.name])
        self.assertEqual(result.returncode, 2, result.stderr)
        lines = result.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, result.stderr)
        self.assertIn("apt-get install python3-matplotlib", lines[0])
        self.assertEqual(sorted(os.listdir(self.dir.name)), ["layers.csv", "tasks.csv"])


@unittest.skipUnless(HAVE_MATPLOTLIB, "matplotlib is not installed (Debian: apt-get install python3-matplotlib)")
class ValidationDrawingTest(unittest.TestCase):

    def draw(self, folder, *extra):
        result = run_script(SCRIPT, [folder, *extra])
        self.assertEqual(result.returncode, 0, result.stderr)
        return result.stdout

    def test_png_and_svg_twice_the_same(self):
        with tempfile.TemporaryDirectory() as out:
            for name in ["v.png", "again.png", "v.svg", "again.svg"]:
                self.assertEqual(self.draw(MEASURED, "-o", os.path.join(out, name)),
                                 f"wrote {os.path.join(out, name)}: tasks (40); layers (0; 4 not drawn: at 0 us or "
                                 "not compared)\n")
            files = {}
            for name in sorted(os.listdir(out)):
                with open(os.path.join(out, name), "rb") as f:
                    files[name] = f.read()
            self.assertEqual(sorted(files), ["again.png", "again.svg", "v.png", "v.svg"])  # no temporary left
            self.assertEqual(files["v.png"][:8], b"\x89PNG\r\n\x1a\n")
            self.assertEqual(files["v.png"], files["again.png"])
            self.assertIn(b"<svg", files["v.svg"])
            self.assertNotIn(b"<dc:date>", files["v.svg"])
            self.assertEqual(files["v.svg"], files["again.svg"])

    def test_an_output_folder_that_does_not_exist(self):
        check_refuses_a_missing_folder(self, SCRIPT, [MEASURED], "v.png")

    def test_default_output_replaces_the_folders_figure(self):
        with tempfile.TemporaryDirectory() as folder:
            write_tables(folder, [task(110, 100), task(0, 50)], [layer(1000, 800)])
            png = os.path.join(folder, "validation.png")
            with open(png, "wb") as f:
                f.write(b"an older figure")
            self.assertEqual(self.draw(folder), f"wrote {png}: tasks (1; 1 at 0 us not drawn); layers (1)\n")
            with open(png, "rb") as f:
                self.assertEqual(f.read()[:8], b"\x89PNG\r\n\x1a\n")
            self.assertEqual(sorted(os.listdir(folder)), ["layers.csv", "tasks.csv", "validation.png"])


if __name__ == "__main__":
    unittest.main()
