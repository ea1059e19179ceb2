#!/usr/bin/env python3
"""Draws validation.png from the tasks.csv and layers.csv written by `epsim validate` (docs/validation.md).

Three panels:
  left:   every matched task, predicted against measured duration (us, log-log), coloured by kind;
  middle: every layer (record), predicted against measured layer time (us, log-log);
  right:  every task's relative error (predicted - measured) / measured against its measured duration,
          where errors of a few percent stay visible.
The log-log panels have the line y = x and the +-5% and +-10% bands around it, the error panel the
same bands around 0. Tasks measured or predicted at
0 us cannot be drawn on log axes and are counted in the panel's title instead.

Usage: python3 experiments/plot_validation.py DIR [-o DIR/validation.png]
Needs matplotlib (Debian: python3-matplotlib). The output depends only on the CSVs: fixed figure size
and resolution, no timestamp or software version in the PNG's metadata.
"""

import argparse
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)

BAND_5 = "#55a868"
BAND_10 = "#dd8452"
LAYER_COLOR = "#4c72b0"


def read_rows(path, required):
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
            fields = set(rows[0].keys()) if rows else set()
    except OSError as e:
        sys.exit(f"{path}: {e.strerror}")
    if not rows:
        sys.exit(f"{path}: no rows")
    missing = required - fields
    if missing:
        sys.exit(f"{path}: not written by epsim validate (missing columns: {', '.join(sorted(missing))})")
    return rows


def points(rows, predicted, measured):
    """(predicted, measured) pairs that a log axis can show, and how many it cannot."""
    good, skipped = [], 0
    for r in rows:
        p, m = float(r[predicted]), float(r[measured])
        if p > 0 and m > 0:
            good.append((p, m, r))
        else:
            skipped += 1
    return good, skipped


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
        sel = [(m, 100 * (p - m) / m) for p, m, r in task_points if (r["track"], r["kind"]) == (track, kind)]
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


def plot(tasks, layers, png):
    fig, (ax_t, ax_l, ax_e) = plt.subplots(1, 3, figsize=(19, 6.2))

    task_points, task_skipped = points(tasks, "predicted_us", "measured_us")
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
    title = f"tasks ({len(task_points)}"
    title += f"; {task_skipped} at 0 us not drawn)" if task_skipped else ")"
    ax_t.set_title(title)

    # A layer whose record lacks whole tracks (a single-GPU run has no EP kernels) is not compared
    # (docs/validation.md); files written before the column existed compare every layer.
    compared = [r for r in layers if not r.get("unmeasured_tracks")]
    layer_points, layer_skipped = points(compared, "predicted_us", "measured_us")
    layer_skipped += len(layers) - len(compared)
    if layer_points:
        lo, hi = limits([v for p, m, _ in layer_points for v in (p, m)])
        draw_bands(ax_l, lo, hi)
        ax_l.scatter([m for _, m, _ in layer_points], [p for p, _, _ in layer_points], s=22, color=LAYER_COLOR,
                     label="layer", edgecolors="none")
        ax_l.legend(fontsize=8, loc="upper left")
    else:
        ax_l.text(0.5, 0.5, "no layer compared", ha="center", va="center", transform=ax_l.transAxes)
    title = f"layers ({len(layer_points)}"
    title += f"; {layer_skipped} not drawn: at 0 us or not compared)" if layer_skipped else ")"
    ax_l.set_title(title)

    fig.suptitle("epsim validate: predicted vs measured")
    fig.tight_layout()
    fig.savefig(png, dpi=100, metadata={"Software": None})
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dir", help="output folder of epsim validate (tasks.csv, layers.csv)")
    parser.add_argument("-o", "--output", help="PNG to write (default: DIR/validation.png)")
    args = parser.parse_args()
    tasks = read_rows(os.path.join(args.dir, "tasks.csv"), {"track", "kind", "predicted_us", "measured_us"})
    layers = read_rows(os.path.join(args.dir, "layers.csv"), {"predicted_us", "measured_us"})
    png = args.output or os.path.join(args.dir, "validation.png")
    plot(tasks, layers, png)
    print(f"wrote {png}")


if __name__ == "__main__":
    main()
