#!/usr/bin/env python3
"""How far two runs of the same epsim-hw measurements differ: run to run, machine to machine, day to day.

    scripts/compare-runs.py OLD.yaml NEW.yaml     # two `kind: measurements` sets (epsim-hw suite / bench)
    scripts/compare-runs.py OLD.json NEW.json ... # measured timelines of the same plans (epsim-hw run)

Measurement sets: the grouped_gemm rows (by dtype, hidden, ffn, experts, rows per expert) and the copy
rows (by kind and bytes) that both files hold. Timelines: each event (record, track, pass, name and its
occurrence; a GEMM's group suffix " gN" is dropped, so timelines written before GEMMs were named by
group pair too), every NEW file against OLD. Per series it prints the points compared, the median of
NEW / OLD, the median and 90th percentile of |NEW / OLD - 1| and the worst point. Needs Python 3 alone:
the rows epsim-hw writes are one flow mapping a line, read here without a YAML library.
"""
import json
import re
import statistics
import sys

ROW = re.compile(r"^\s+- \{(.*)\}\s*$")
SERIES = re.compile(r"^([a-z_]+):\s*$")


def read_measurements(path):
    """{(series, key...): median_us} for the grouped_gemm and copy rows of one file."""
    out, series = {}, None
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = SERIES.match(line)
            if m:
                series = m.group(1)
                continue
            m = ROW.match(line)
            if not m or series not in ("grouped_gemm", "copy"):
                continue
            fields = dict(item.split(": ", 1) for item in m.group(1).split(", ") if ": " in item)
            if "median_us" not in fields:
                continue  # a published rate, not a time
            if series == "grouped_gemm":
                key = ("gemm", fields.get("dtype"), fields["hidden_size"], fields["ffn_size"], fields["experts"],
                       fields["tokens_per_expert"])
            else:
                key = ("copy", fields["kind"], fields["bytes"])
            out[key] = float(fields["median_us"])
    return out


def read_timeline(path):
    """{(track, step, micro_batch, layer, pass, name, occurrence): duration_us} of one measured timeline."""
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    out = {}
    for r in doc["records"]:
        seen = {}
        for e in r["events"]:
            name = re.sub(r" g[0-9]+$", "", e["name"])
            k = (e["track"], r["step"], r["micro_batch"], r["layer"], e["pass"], name)
            seen[k] = seen.get(k, 0) + 1
            out[k + (seen[k],)] = (e["end_ps"] - e["start_ps"]) / 1e6
    return out


def report(label, old, new, series_of):
    for series in sorted({series_of(k) for k in old}):
        keys = [k for k in old if k in new and series_of(k) == series and old[k] > 0]
        if not keys:
            continue
        ratios = [new[k] / old[k] for k in keys]
        dev = sorted(abs(r - 1) for r in ratios)
        worst = max(keys, key=lambda k: abs(new[k] / old[k] - 1))
        total = sum(new[k] for k in keys) / sum(old[k] for k in keys)
        print(f"{label}{series}: {len(keys)} points, median ratio {statistics.median(ratios):.4f}, "
              f"total ratio {total:.4f}, median |difference| {100 * statistics.median(dev):.2f}%, "
              f"90th percentile {100 * dev[int(0.9 * len(dev))]:.2f}%, worst {100 * dev[-1]:.2f}% at {worst}")


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    old_path, new_paths = argv[1], argv[2:]
    if old_path.endswith(".json"):
        old = read_timeline(old_path)
        for p in new_paths:
            report(p + ": ", old, read_timeline(p), lambda k: k[0])
    else:
        old = read_measurements(old_path)
        for p in new_paths:
            report(p + ": ", old, read_measurements(p), lambda k: k[0])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
