#!/usr/bin/env python3
"""Draws validation.png from the tasks.csv and layers.csv written by `epsim validate` (docs/validation.md).

Three panels:
  left:   every matched task, predicted against measured duration (us, log-log), coloured by kind;
  middle: every layer (record), predicted against measured layer time (us, log-log);
  right:  every task's relative error (predicted - measured) / measured against its measured duration,
          where errors of a few percent stay visible.
The log-log panels have the line y = x and the +-5% and +-10% bands around it, the error panel the
same bands around 0. Tasks measured or predicted at 0 us cannot be drawn on log axes and are counted
in the panel's title instead, as are layers that are not compared (a record that lacks whole tracks).

Usage: python3 experiments/plot_validation.py DIR [-o DIR/validation.png | OUT.svg]

Needs matplotlib (Debian: apt-get install python3-matplotlib); without it the script says so and exits
with status 2, as it does for a table it cannot read (one line naming the file, the line and the
column), writing nothing. The figure is written whole or not at all (a temporary file beside it,
renamed), and depends only on the CSVs: fixed figure size and resolution, no date or software version
in its metadata, a fixed SVG id salt.
"""

import argparse
import csv
import io
import math
import os
import sys

from plot_output import OutputError, format_of, save_whole

INSTALL_HINT = "matplotlib is not installed for {python} (Debian: apt-get install python3-matplotlib)"
TASK_COLUMNS = ["track", "kind", "predicted_us", "measured_us"]
LAYER_COLUMNS = ["predicted_us", "measured_us"]
DURATIONS = ["predicted_us", "measured_us"]


class TableError(Exception):
    """A table or an argument this script cannot use: one line naming the file and what is wrong."""


BAND_5 = "#55a868"
BAND_10 = "#dd8452"
LAYER_COLOR = "#4c72b0"


def read_rows(path, required):
    """The rows of an `epsim validate` table as dicts, its durations as floats (finite, >= 0)."""
    try:
        with open(path, newline="") as f:
            text = f.read()
    except OSError as e:
        raise TableError(f"{path}: cannot read ({e.strerror})")
    reader = csv.reader(io.StringIO(text, newline=""))
    header = next(reader, [])
    missing = [c for c in required if c not in header]
    if missing:
        raise TableError(f"{path}: not written by epsim validate (missing columns: {', '.join(missing)})")
    rows = []
    for fields in reader:
        line = reader.line_num  # (the line the row ends on: a quoted name may hold a line break)
        if not fields:
            continue  # a blank line
        if len(fields) != len(header):
            raise TableError(f"{path}:{line}: {len(fields)} fields, the header has {len(header)}")
        row = dict(zip(header, fields))
        for column in DURATIONS:
            try:
                value = float(row[column])
            except ValueError:
                value = math.nan
            if not (math.isfinite(value) and value >= 0):
                raise TableError(f"{path}:{line}: column '{column}' is '{row[column]}', not a duration in us "
                                 "(a finite number >= 0)")
            row[column] = value
        rows.append(row)
    if not rows:
        raise TableError(f"{path}: no rows (epsim validate matched nothing)")
    return rows


def points(rows):
    """(predicted, measured, row) of the rows that a log axis can show, and how many it cannot."""
    good, skipped = [], 0
    for r in rows:
        p, m = r["predicted_us"], r["measured_us"]
        if p > 0 and m > 0:
            good.append((p, m, r))
        else:
            skipped += 1
    return good, skipped


def layer_points(layers):
    """points() of the layers compared, and how many are not drawn: at 0 us, or not compared (a layer
    whose record lacks whole tracks, docs/validation.md; files written before that column existed
    compare every layer)."""
    compared = [r for r in layers if not r.get("unmeasured_tracks")]
    good, skipped = points(compared)
    return good, skipped + len(layers) - len(compared)


def error_percent(predicted, measured):
    """A task's error as the right-hand panel draws it: (predicted - measured) / measured, in %."""
    return 100 * (predicted - measured) / measured


def panel_titles(tasks, layers):
    """The task and layer panels' titles: what each draws, and what it cannot (also printed once the
    figure is written)."""
    task_points, task_skipped = points(tasks)
    drawn, layer_skipped = layer_points(layers)
    tasks_title = f"tasks ({len(task_points)}" + (f"; {task_skipped} at 0 us not drawn)" if task_skipped else ")")
    layers_title = f"layers ({len(drawn)}" + (
        f"; {layer_skipped} not drawn: at 0 us or not compared)" if layer_skipped else ")")
    return tasks_title, layers_title


def import_pyplot():
    try:
        import matplotlib
    except ImportError:
        raise TableError(INSTALL_HINT.format(python=sys.executable))
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"svg.hashsalt": "epsim", "svg.fonttype": "path", "font.family": "DejaVu Sans"})
    return plt


def draw_bands(ax, lo, hi):
    xs = [lo, hi]
    ax.fill_between(xs, [x * 0.90 for x in xs], [x * 1.10 for x in xs], color=BAND_10, alpha=0.15,
                    linewidth=0, label="±10%")
    ax.fill_between(xs, [x * 0.95 for x in xs], [x * 1.05 for x in xs], color=BAND_5, alpha=0.25,
                    linewidth=0, label="±5%")
    ax.plot(xs, xs, color="black", linewidth=0.8, label="y = x")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_aspect("equal")
    ax.set_xlabel("measured (us)")
    ax.set_ylabel("predicted (us)")
    ax.grid(True, which="both", linewidth=0.3, alpha=0.5)


def draw_errors(ax, task_points, kinds, cmap):
    xs = [m for _, m, _ in task_points]
    lo, hi = limits(xs)
    ax.axhspan(-10, 10, color=BAND_10, alpha=0.15, linewidth=0)
    ax.axhspan(-5, 5, color=BAND_5, alpha=0.25, linewidth=0)
    ax.axhline(0, color="black", linewidth=0.8)
    errors = []
    for i, (track, kind) in enumerate(kinds):
        sel = [(m, error_percent(p, m)) for p, m, r in task_points if (r["track"], r["kind"]) == (track, kind)]
        errors += [e for _, e in sel]
        ax.scatter([m for m, _ in sel], [e for _, e in sel], s=14, color=cmap(i % 20), edgecolors="none", alpha=0.85)
    span = max(12.0, 1.1 * max(abs(e) for e in errors))
    ax.set_xscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(-span, span)
    ax.set_xlabel("measured (us)")
    ax.set_ylabel("error (%), (predicted - measured) / measured")
    ax.set_title("task errors (bands ±5%, ±10%)")
    ax.grid(True, which="both", linewidth=0.3, alpha=0.5)


def limits(values):
    lo, hi = min(values), max(values)
    return lo / 1.5, hi * 1.5


def plot(plt, tasks, layers, path):
    fig, (ax_t, ax_l, ax_e) = plt.subplots(1, 3, figsize=(19, 6.2))

    task_points, _ = points(tasks)
    if task_points:
        lo, hi = limits([v for p, m, _ in task_points for v in (p, m)])
        draw_bands(ax_t, lo, hi)
        kinds = sorted({(r["track"], r["kind"]) for _, _, r in task_points})
        cmap = plt.get_cmap("tab20")
        for i, (track, kind) in enumerate(kinds):
            sel = [(p, m) for p, m, r in task_points if (r["track"], r["kind"]) == (track, kind)]
            ax_t.scatter([m for _, m in sel], [p for p, _ in sel], s=14, color=cmap(i % 20),
                         label=f"{track}: {kind}", edgecolors="none", alpha=0.85)
        ax_t.legend(fontsize=7, loc="upper left", ncol=1, framealpha=0.9)
        draw_errors(ax_e, task_points, kinds, cmap)
    tasks_title, layers_title = panel_titles(tasks, layers)
    ax_t.set_title(tasks_title)

    drawn, _ = layer_points(layers)
    if drawn:
        lo, hi = limits([v for p, m, _ in drawn for v in (p, m)])
        draw_bands(ax_l, lo, hi)
        ax_l.scatter([m for _, m, _ in drawn], [p for p, _, _ in drawn], s=22, color=LAYER_COLOR,
                     label="layer", edgecolors="none")
        ax_l.legend(fontsize=8, loc="upper left")
    else:
        ax_l.text(0.5, 0.5, "no layer compared", ha="center", va="center", transform=ax_l.transAxes)
    ax_l.set_title(layers_title)

    fig.suptitle("epsim validate: predicted vs measured")
    fig.tight_layout()
    save_whole(fig, path, dpi=100)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dir", help="output folder of epsim validate (tasks.csv, layers.csv)")
    parser.add_argument("-o", "--output", help="PNG or SVG to write (default: DIR/validation.png)")
    args = parser.parse_args()
    path = args.output or os.path.join(args.dir, "validation.png")
    try:
        if format_of(path) is None:
            raise TableError(f"{path}: expected a .png or .svg file to write")
        tasks = read_rows(os.path.join(args.dir, "tasks.csv"), TASK_COLUMNS)
        layers = read_rows(os.path.join(args.dir, "layers.csv"), LAYER_COLUMNS)
        plot(import_pyplot(), tasks, layers, path)
    except (TableError, OutputError) as e:
        print(f"plot_validation.py: error: {e}", file=sys.stderr)
        sys.exit(2)
    print(f"wrote {path}: {'; '.join(panel_titles(tasks, layers))}")


if __name__ == "__main__":
    main()
