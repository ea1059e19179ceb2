"""experiments/plot_output.py: a figure written whole or not at all. A stand-in figure (its savefig
writes what it is given, then fails or not) shows what is left at the output in each case; no
matplotlib is needed."""

import os
import tempfile
import unittest

import plot_test_support  # noqa: F401  (puts experiments/ on the path)
from plot_output import OutputError, format_of, save_whole


class StandInFigure:
    """savefig(file, **options) writes `data` and records the options, then raises `error` if given."""

    def __init__(self, data=b"new figure", error=None):
        self.data, self.error, self.options = data, error, None

    def savefig(self, f, **options):
        self.options = options
        f.write(self.data)
        if self.error is not None:
            raise self.error


class SaveWholeTest(unittest.TestCase):

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        self.path = os.path.join(self.dir.name, "figure.png")
        with open(self.path, "wb") as f:
            f.write(b"older figure")

    def content(self):
        with open(self.path, "rb") as f:
            return f.read()

    def test_a_complete_figure_replaces_the_older_one(self):
        fig = StandInFigure()
        save_whole(fig, self.path, dpi=100)
        self.assertEqual(self.content(), b"new figure")
        self.assertEqual(os.listdir(self.dir.name), ["figure.png"])
        # No matplotlib version in a PNG; no date or creator in an SVG: the same input, the same bytes.
        self.assertEqual(fig.options, {"format": "png", "dpi": 100, "metadata": {"Software": None}})
        save_whole(fig, self.path[:-4] + ".svg", dpi=72)
        self.assertEqual(fig.options, {"format": "svg", "dpi": 72, "metadata": {"Date": None, "Creator": None}})

    def test_a_draw_that_fails_or_is_interrupted_leaves_the_older_figure_alone(self):
        for error in (RuntimeError("draw failed"), OSError(28, "No space left on device"), KeyboardInterrupt()):
            with self.subTest(error=type(error).__name__):
                with self.assertRaises(type(error)):
                    save_whole(StandInFigure(b"half a fig", error), self.path, dpi=100)
                self.assertEqual(self.content(), b"older figure")
                self.assertEqual(os.listdir(self.dir.name), ["figure.png"])

    def test_the_format_is_the_extensions_in_either_case(self):
        self.assertEqual([format_of(p) for p in ["a.png", "A.PNG", "b.svg", "B.Svg", "c.pdf", "d", "e.png.txt"]],
                         ["png", "png", "svg", "svg", None, None, None])

    def test_a_folder_that_does_not_exist_is_one_error(self):
        path = os.path.join(self.dir.name, "missing", "figure.png")
        with self.assertRaises(OutputError) as caught:
            save_whole(StandInFigure(), path, dpi=100)
        self.assertEqual(str(caught.exception), f"{path}: cannot write (No such file or directory)")


if __name__ == "__main__":
    unittest.main()
