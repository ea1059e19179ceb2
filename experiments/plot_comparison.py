#!/usr/bin/env python3
"""Draws comparison.png from the comparison.csv written by `epsim compare` (columns: docs/compare.md).

One column of panels per (case, EP degree), in the order of the CSV:
  top row:    token and GEMM straggler ratio (max/mean, medians over records) per balancer, with
              1.0 (perfect balance) and the NVLink-domain floor as horizontal lines; the token excess
              reduction against the baseline is written above each token bar;
  bottom row: layer time and its gap to the oracle's bound (medians, us) per balancer, with the
              bound (no balancer can go below it) as a horizontal line.

Usage: python3 experiments/plot_comparison.py OUT/comparison.csv [-o OUT/comparison.png | OUT.svg]
Needs matplotlib (Debian: apt-get install python3-matplotlib); without it the script says so and
exits with status 2. Errors in the table, and an output that cannot be written, come as one line
naming the file, exit status 2. The figure is drawn into a temporary file beside the output and
renamed over it (whole or not at all: experiments/plot_output.py), and depends only on the CSV:
fixed figure size and resolution, no timestamp or software version in its metadata, a fixed SVG id
salt.
"""

import argparse
import csv
import os
import sys

from plot_output import OutputError, format_of, save_whole

INSTALL_HINT = "matplotlib is not installed for {python} (Debian: apt-get install python3-matplotlib)"

REQUIRED = [
    "case", "ep_degree", "balancer", "token_straggler_ratio_median", "gemm_straggler_ratio_median",
    "token_excess_reduction", "bound_nvlink_domain_median", "layer_time_us_median",
    "bound_layer_time_us_median", "gap_to_bound_us_median",
]


class TableError(Exception):
    pass

TOKEN_COLOR = "#4c72b0"
GEMM_COLOR = "#dd8452"
LAYER_COLOR = "#55a868"
GAP_COLOR = "#c44e52"
BOUND_COLOR = "#333333"
FLOOR_COLOR = "#8172b3"


def read_rows(path):
    """The served rows of a comparison.csv; TableError names the file and what is wrong."""
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        raise TableError(f"{path}: cannot read: {e.strerror}")
    if not rows:
        raise TableError(f"{path}: no rows")
    for column in REQUIRED:
        if column not in rows[0]:
            raise TableError(f"{path}: no column '{column}' (not a comparison.csv of epsim compare)")
    # A balancer that could not serve a case, or whose records were all warm-up, has empty metric
    # cells and its reason in not_served.
    served = [r for r in rows if not r.get("not_served")]
    if not served:
        raise TableError(f"{path}: no row was served (see the not_served column)")
    return served


def panels(rows):
    """(case, ep) -> rows, in the order they first appear in the CSV."""
    out = {}
    for r in rows:
        out.setdefault((r["case"], int(r["ep_degree"])), []).append(r)
    return out


def draw(plt, rows, png):
    groups = panels(rows)
    # A grid: two rows (ratios, times) per case, one column per EP degree.
    cases = list(dict.fromkeys(case for case, _ in groups))
    eps = list(dict.fromkeys(ep for _, ep in groups))
    ncols = len(eps)
    width = max(6.0, 3.6 * ncols)
    fig, axes = plt.subplots(2 * len(cases), ncols, figsize=(width, 7.5 * len(cases)), squeeze=False)
    for ax in axes.flat:
        ax.set_visible(False)
    bar = 0.38
    for (case, ep), group in groups.items():
        col = eps.index(ep)
        base = 2 * cases.index(case)
        axes[base][col].set_visible(True)
        axes[base + 1][col].set_visible(True)
        labels = [r["balancer"] for r in group]
        xs = list(range(len(group)))
        token = [float(r["token_straggler_ratio_median"]) for r in group]
        gemm = [float(r["gemm_straggler_ratio_median"]) for r in group]
        floor = float(group[0]["bound_nvlink_domain_median"])

        top = axes[base][col]
        top.bar([x - bar / 2 for x in xs], token, bar, color=TOKEN_COLOR, label="token max/mean")
        top.bar([x + bar / 2 for x in xs], gemm, bar, color=GEMM_COLOR, label="GEMM max/mean")
        top.axhline(1.0, color="black", linewidth=0.8, label="1.0: perfect balance")
        top.axhline(floor, color=FLOOR_COLOR, linestyle="--", linewidth=1.0, label="NVLink-domain floor")
        high = max(token + gemm + [floor])
        for x, r, t in zip(xs, group, token):
            if r["token_excess_reduction"] != "":
                text = f"{100.0 * float(r['token_excess_reduction']):.0f}%"
                text = "0%" if text == "-0%" else text
                top.text(x - bar / 2, t + 0.01 * high, text, ha="center", va="bottom", fontsize=7)
        top.set_ylim(0.9, 1.08 * high + 0.02)
        top.set_title(f"{case}, EP {ep}", fontsize=10)
        top.set_xticks(xs)
        top.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
        if col == 0:
            top.set_ylabel("straggler ratio (median)")

        bottom = axes[base + 1][col]
        layer = [float(r["layer_time_us_median"]) for r in group]
        gap = [float(r["gap_to_bound_us_median"]) for r in group]
        # The bound depends only on the work and the hardware: the same for every balancer of a panel.
        bound = float(group[0]["bound_layer_time_us_median"])
        bottom.bar([x - bar / 2 for x in xs], layer, bar, color=LAYER_COLOR, label="layer time")
        bottom.bar([x + bar / 2 for x in xs], gap, bar, color=GAP_COLOR, label="gap to the oracle's bound")
        bottom.axhline(bound, color=BOUND_COLOR, linestyle="--", linewidth=1.0, label="oracle's bound")
        bottom.axhline(0.0, color="black", linewidth=0.8)
        bottom.set_xticks(xs)
        bottom.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
        if col == 0:
            bottom.set_ylabel("us per layer (median, fwd + bwd)")

    for row in range(2):
        handles, names = axes[row][0].get_legend_handles_labels()
        axes[row][ncols - 1].legend(handles, names, fontsize=7, loc="upper right")
    fig.tight_layout()
    save_whole(fig, png, dpi=100)
    plt.close(fig)


def import_pyplot():
    try:
        import matplotlib
    except ImportError:
        print(f"plot_comparison.py: {INSTALL_HINT.format(python=sys.executable)}", file=sys.stderr)
        sys.exit(2)
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"svg.hashsalt": "epsim", "svg.fonttype": "path", "font.family": "DejaVu Sans"})
    return plt


def main():
    parser = argparse.ArgumentParser(description="Draw comparison.png from epsim compare's comparison.csv.")
    parser.add_argument("csv", help="comparison.csv written by `epsim compare`")
    parser.add_argument("-o", "--output", help="PNG to write (default: comparison.png beside the CSV)")
    args = parser.parse_args()
    png = args.output or os.path.join(os.path.dirname(args.csv), "comparison.png")
    try:
        if format_of(png) is None:
            raise TableError(f"{png}: expected a .png or .svg file to write")
        rows = read_rows(args.csv)
    except TableError as e:
        print(f"plot_comparison.py: error: {e}", file=sys.stderr)
        sys.exit(2)
    try:
        draw(import_pyplot(), rows, png)
    except OutputError as e:
        print(f"plot_comparison.py: error: {e}", file=sys.stderr)
        sys.exit(2)
    print(f"wrote {png}")


if __name__ == "__main__":
    main()
