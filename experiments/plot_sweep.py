#!/usr/bin/env python3
"""Draws the figures of an `epsim sweep` from its results.csv or results.jsonl (columns: docs/sweep.md).

  OUTDIR/sweep-straggler.{png,svg}  token and GEMM straggler ratio and layer time (means over each
                                    point's records) against the x axis, one line per balancer
  OUTDIR/sweep-gain.{png,svg}       METRIC of each balancer relative to the baseline balancer at the
                                    same point (the table's mean_vs_baseline) against the x axis

x axis (--x): a varied key of the sweep, as the table names it. By default the straggler figure uses
ep_degree and the gain figure the expert count (experts, num_experts or model.num_experts), each
falling back to the other, then to the first varied key. Points that differ in the other varied keys
are drawn side by side, one column of panels per combination, up to --columns of them; with more
combinations (trace seeds, say) each line is the mean over them and a band spans their minimum and
maximum.

usage: plot_sweep.py RESULTS.csv -o OUTDIR [--format png,svg] [--metric NAME] [--x KEY] [--columns N]

Needs matplotlib (Debian: apt-get install python3-matplotlib); without it the script says so and
exits with status 2, as it does for a table it cannot read and an OUTDIR it cannot make or write to.
Each file is drawn into a temporary file beside it and renamed over it, whole or not at all
(experiments/plot_output.py). The files depend only on the table: fixed fonts, size and resolution,
no date or software version in their metadata, a fixed SVG id salt.
"""

import argparse
import csv
import json
import math
import os
import sys

from plot_output import OutputError, save_whole

INSTALL_HINT = "matplotlib is not installed for {python} (Debian: apt-get install python3-matplotlib)"
REQUIRED = ["point", "balancer", "metric", "mean", "mean_vs_baseline", "not_served"]
# Columns of results.csv that are not varied keys; the keys sit between point_id and balancer.
# `sharing` (the bandwidth sharing a point ran with) follows from its hardware and EP degree.
FIXED = {"point", "point_id", "balancer", "balancer_name", "metric", "records", "mean", "p50", "p95",
         "min", "max", "mean_vs_baseline", "not_served", "sharing"}
EXPERT_KEYS = ["experts", "num_experts", "model.num_experts"]
STRAGGLER_PANELS = [("token_straggler_ratio", "token straggler ratio (max/mean)"),
                    ("gemm_straggler_ratio", "GEMM straggler ratio (max/mean)"),
                    ("layer_time_us", "layer time (us, fwd + bwd)")]
COLOURS = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c"]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]


class TableError(Exception):
    """A results table this script cannot draw: one line naming the file and what is wrong."""


def read_table(path):
    """Rows as dicts of strings with the point's values under 'values', and the varied keys in order."""
    try:
        with open(path, newline="") as f:
            text = f.read()
    except OSError as e:
        raise TableError(f"{path}: cannot read ({e.strerror})")
    if path.endswith(".jsonl") or text.lstrip().startswith("{"):
        rows, keys = [], []
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError as e:
                raise TableError(f"{path}:{number}: not a JSON object ({e})")
            if not isinstance(obj, dict):
                raise TableError(f"{path}:{number}: not a JSON object")
            for column in REQUIRED + ["values"]:
                if column not in obj:
                    raise TableError(f"{path}:{number}: no '{column}' (not a results.jsonl of epsim sweep)")
            values = obj["values"]
            if not isinstance(values, dict):
                raise TableError(f"{path}:{number}: 'values' is not an object")
            for key in values:
                if key not in keys:
                    keys.append(key)
            row = {k: "" if v is None else str(v) for k, v in obj.items() if k != "values"}
            row["values"] = {k: str(v) for k, v in values.items()}
            rows.append(row)
    else:
        reader = csv.DictReader(text.splitlines())
        header = reader.fieldnames or []
        for column in REQUIRED:
            if column not in header:
                raise TableError(f"{path}: no column '{column}' (not a results.csv of epsim sweep)")
        keys = [c for c in header if c not in FIXED]
        rows = []
        for row in reader:
            row["values"] = {k: row[k] for k in keys if row[k] != ""}
            rows.append(row)
    if not rows:
        raise TableError(f"{path}: no rows")
    # Line numbers: the CSV's header is line 1; results.jsonl has no header (blank lines aside).
    first = 1 if path.endswith(".jsonl") or text.lstrip().startswith("{") else 2
    for number, row in enumerate(rows, first):
        for column in ("mean", "mean_vs_baseline"):
            try:
                value = float(row[column]) if row[column] != "" else 0.0
            except (TypeError, ValueError):
                value = math.nan
            if not math.isfinite(value):
                raise TableError(f"{path}:{number}: column '{column}' is '{row[column]}', not a number")
    return rows, keys


def served_means(rows, metric, column):
    """(point, balancer) -> float of `column` for the rows of `metric` that have a number there."""
    out = {}
    for r in rows:
        if r["metric"] == metric and not r["not_served"] and r[column] != "":
            out[(r["point"], r["balancer"])] = float(r[column])
    return out


def choose_x(keys, wanted, preferences):
    if wanted:
        return wanted
    for key in preferences:
        if key in keys:
            return key
    return keys[0] if keys else "point"


def axis_values(texts):
    """Sorted distinct x values and how to place them: numbers on a (log2 when they span a factor of 4
    or more) numeric axis, anything else as categories in order of first appearance."""
    distinct = list(dict.fromkeys(texts))
    try:
        numbers = {t: float(t) for t in distinct}
    except ValueError:
        return distinct, {t: i for i, t in enumerate(distinct)}, False
    distinct.sort(key=lambda t: numbers[t])
    low, high = numbers[distinct[0]], numbers[distinct[-1]]
    log = low > 0 and high >= 4 * low
    return distinct, numbers, log


class Series:
    """The lines of one figure: per column of panels and balancer, x text -> [values]."""

    def __init__(self, rows, keys, x, columns_max):
        self.x = x
        self.others = [k for k in keys if k != x]
        point_values = {}
        for r in rows:
            values = dict(r["values"])
            values["point"] = r["point"]
            point_values[r["point"]] = values
        self.point_x = {p: v.get(x, "") for p, v in point_values.items()}
        combos = {p: tuple(v.get(k, "") for k in self.others) for p, v in point_values.items()}
        distinct = list(dict.fromkeys(combos[p] for p in point_values))
        self.averaged = len(distinct) > columns_max
        self.columns = [()] if self.averaged else distinct
        self.point_column = {p: (() if self.averaged else c) for p, c in combos.items()}
        self.balancers = list(dict.fromkeys(r["balancer"] for r in rows))
        self.combinations = len(distinct)

    def column_title(self, column):
        if self.averaged:
            return f"mean over {self.combinations} values of {', '.join(self.others)}"
        return ", ".join(f"{k}={v}" for k, v in zip(self.others, column) if v != "")

    def lines(self, means, column):
        """balancer -> [(x text, mean, low, high)] for one column of panels."""
        out = {}
        for (point, balancer), value in means.items():
            if self.point_column[point] != column:
                continue
            out.setdefault(balancer, {}).setdefault(self.point_x[point], []).append(value)
        return {b: [(x, sum(v) / len(v), min(v), max(v)) for x, v in xs.items()] for b, xs in out.items()}


def baseline_of(rows):
    """The balancer whose every mean_vs_baseline is 1, the first in the table's order; None if none."""
    candidates = list(dict.fromkeys(r["balancer"] for r in rows))
    for r in rows:
        if r["balancer"] in candidates and r["mean_vs_baseline"] != "" and float(r["mean_vs_baseline"]) != 1.0:
            candidates.remove(r["balancer"])
    return candidates[0] if candidates else None


def draw(plt, series, panels, path_stem, formats, title, reference=None):
    xs_all = [series.point_x[p] for p in series.point_x]
    distinct, place, log = axis_values(xs_all)
    ncols = len(series.columns)
    fig, axes = plt.subplots(len(panels), ncols, figsize=(max(5.5, 4.2 * ncols), 2.9 * len(panels) + 0.8),
                             squeeze=False, sharex=True)
    for col, column in enumerate(series.columns):
        for row, (means, label) in enumerate(panels):
            ax = axes[row][col]
            lines = series.lines(means, column)
            for i, balancer in enumerate(series.balancers):
                if balancer not in lines:
                    continue
                points = sorted(lines[balancer], key=lambda t: distinct.index(t[0]))
                xs = [place[p[0]] for p in points]
                colour, marker = COLOURS[i % len(COLOURS)], MARKERS[i % len(MARKERS)]
                ax.plot(xs, [p[1] for p in points], color=colour, marker=marker, markersize=4,
                        linewidth=1.3, label=balancer)
                if series.averaged:
                    ax.fill_between(xs, [p[2] for p in points], [p[3] for p in points], color=colour,
                                    alpha=0.15, linewidth=0)
            if reference is not None:
                ax.axhline(reference, color="black", linewidth=0.8)
            if log:
                ax.set_xscale("log", base=2)
            ax.set_xticks([place[t] for t in distinct])
            ax.set_xticklabels(distinct, fontsize=8)
            ax.minorticks_off()
            ax.tick_params(axis="y", labelsize=8)
            ax.grid(True, linewidth=0.4, alpha=0.5)
            if col == 0:
                ax.set_ylabel(label, fontsize=8)
            if row == 0:
                ax.set_title(series.column_title(column), fontsize=9)
            if row == len(panels) - 1:
                ax.set_xlabel(series.x, fontsize=9)
    handles, names = [], []
    for ax in axes.flat:
        for h, n in zip(*ax.get_legend_handles_labels()):
            if n not in names:
                handles.append(h)
                names.append(n)
    fig.legend(handles, names, fontsize=8, ncol=min(len(names), 6) or 1, loc="lower center", frameon=False)
    fig.suptitle(title, fontsize=10)
    # Room at the bottom for the legend: about 0.45 inch whatever the figure's height.
    fig.tight_layout(rect=(0, 0.45 / fig.get_figheight(), 1, 1))
    written = []
    for fmt in formats:
        out = f"{path_stem}.{fmt}"
        save_whole(fig, out, dpi=100)
        written.append(out)
    plt.close(fig)
    return written


def import_pyplot():
    try:
        import matplotlib
    except ImportError:
        print(f"plot_sweep.py: {INSTALL_HINT.format(python=sys.executable)}", file=sys.stderr)
        sys.exit(2)
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"svg.hashsalt": "epsim", "svg.fonttype": "path", "font.family": "DejaVu Sans",
                         "path.simplify": False})
    return plt


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("results", help="results.csv or results.jsonl of epsim sweep")
    ap.add_argument("-o", "--output", required=True, help="folder for the figures (made if missing)")
    ap.add_argument("--format", default="png,svg", help="comma-separated: png, svg (default: both)")
    ap.add_argument("--metric", default="layer_time_us", help="metric of the gain figure (default: layer_time_us)")
    ap.add_argument("--x", default="", help="varied key on the x axis of both figures")
    ap.add_argument("--columns", type=int, default=6,
                    help="most columns of panels before the other varied keys are averaged (default: 6)")
    args = ap.parse_args()
    formats = [f for f in args.format.split(",") if f]
    for f in formats:
        if f not in ("png", "svg"):
            ap.error(f"--format: '{f}' is not png or svg")
    if not formats:
        ap.error("--format: no format")
    if args.columns < 1:
        ap.error("--columns: must be at least 1")

    try:
        rows, keys = read_table(args.results)
        if args.x and args.x not in keys:
            raise TableError(f"{args.results}: no varied key '{args.x}' (varied: {', '.join(keys) or 'none'})")
        metrics = {r["metric"] for r in rows}
        for metric, _ in STRAGGLER_PANELS:
            if metric not in metrics:
                raise TableError(f"{args.results}: no rows of metric '{metric}'")
        if args.metric not in metrics:
            raise TableError(f"{args.results}: no rows of metric '{args.metric}' (has: {', '.join(sorted(metrics))})")
    except TableError as e:
        print(f"plot_sweep.py: error: {e}", file=sys.stderr)
        sys.exit(2)
    plt = import_pyplot()
    try:
        os.makedirs(args.output, exist_ok=True)
    except OSError as e:
        fail(f"{args.output}: cannot make the folder ({e.strerror})")
    try:
        written = draw_both(plt, rows, keys, args, formats)
    except OutputError as e:
        fail(str(e))
    for path in written:
        print(f"wrote {path}")


def fail(message):
    print(f"plot_sweep.py: error: {message}", file=sys.stderr)
    sys.exit(2)


def draw_both(plt, rows, keys, args, formats):
    """The straggler and gain figures, in every format asked for; the paths written."""
    written = []
    x = choose_x(keys, args.x, ["ep_degree"] + EXPERT_KEYS)
    series = Series(rows, keys, x, args.columns)
    panels = [(served_means(rows, m, "mean"), label) for m, label in STRAGGLER_PANELS]
    written += draw(plt, series, panels, os.path.join(args.output, "sweep-straggler"), formats,
                    "straggler and layer time (means over records)")

    x = choose_x(keys, args.x, EXPERT_KEYS + ["ep_degree"])
    series = Series(rows, keys, x, args.columns)
    baseline = baseline_of(rows)
    ratios = served_means(rows, args.metric, "mean_vs_baseline")
    if baseline is not None and len(series.balancers) > 1:
        ratios = {k: v for k, v in ratios.items() if k[1] != baseline}
    against = baseline if baseline is not None else "the baseline"
    panels = [(ratios, f"{args.metric} / {against}'s")]
    written += draw(plt, series, panels, os.path.join(args.output, "sweep-gain"), formats,
                    f"{args.metric} relative to {against} at the same point (below 1: less)", reference=1.0)
    return written


if __name__ == "__main__":
    main()
