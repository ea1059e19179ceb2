#!/usr/bin/env python3
"""Draws one layer of an epsim timeline.json as a PNG: a row per (GPU, resource track), a bar per
kernel, copy or message. The same file opens in Perfetto; this static picture is for reports.

usage: plot_timeline.py TIMELINE.json -o OUT.png [--record N] [--gpus 0,1,2,3] [--pass forward|backward|both]
"""
import argparse
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

TRACKS = ["compute", "comm_kernel", "copy_engine", "nvlink_out", "nic_out", "host_cpu"]
COLOURS = {"gemm fwd": "#1f77b4", "gemm dgrad": "#4a90c8", "gemm wgrad": "#7fb2dc", "shared": "#9ecae1",
           "dispatch": "#ff7f0e", "combine": "#d62728", "grad": "#e377c2", "weights": "#2ca02c",
           "tokens": "#98df8a", "outputs": "#bcbd22", "planner": "#8c564b", "counts": "#c49c94"}


def colour(name):
    for key, value in COLOURS.items():
        if name.startswith(key):
            return value
    return "#7f7f7f"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("timeline")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--record", type=int, default=0, help="which drawn record (0 = the first)")
    ap.add_argument("--gpus", default="", help="comma-separated GPU ids (default: all)")
    ap.add_argument("--pass", dest="which", default="forward", choices=["forward", "backward", "both"])
    args = ap.parse_args()

    try:
        with open(args.timeline) as f:
            events = json.load(f)["traceEvents"]
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"{args.timeline}: not an epsim timeline ({e})")
    labels = []
    for e in events:
        label = e.get("args", {}).get("layer")
        if label is not None and label not in labels:
            labels.append(label)
    if args.record >= len(labels):
        sys.exit(f"{args.timeline}: has {len(labels)} records, asked for record {args.record}")
    label = labels[args.record]
    gpus = [int(g) for g in args.gpus.split(",")] if args.gpus else None

    bars = {}  # (gpu, track) -> [(start, duration, name)]
    open_flows = {}
    for e in events:
        a = e.get("args", {})
        if e["ph"] == "X" and a.get("layer") == label:
            if args.which != "both" and a.get("pass") != args.which:
                continue
            bars.setdefault((e["pid"], e["tid"]), []).append((float(e["ts"]), float(e["dur"]), e["name"]))
        elif e["ph"] == "b" and a.get("layer") == label:
            if args.which == "both" or a.get("pass") == args.which:
                open_flows[e["id"]] = e
        elif e["ph"] == "e" and e["id"] in open_flows:
            b = open_flows.pop(e["id"])
            bars.setdefault((b["pid"], b["tid"]), []).append(
                (float(b["ts"]), float(e["ts"]) - float(b["ts"]), b["name"]))
    rows = sorted(k for k in bars if gpus is None or k[0] in gpus)
    if not rows:
        sys.exit(f"{args.timeline}: nothing to draw for record {args.record}")
    t0 = min(s for k in rows for s, _, _ in bars[k])

    fig, ax = plt.subplots(figsize=(12, 0.32 * len(rows) + 1.2))
    for y, key in enumerate(rows):
        items = sorted(bars[key])
        # Messages overlap on a link: draw them thin and translucent so that overlap shows as density.
        flow = TRACKS[key[1]] in ("nvlink_out", "nic_out")
        for start, dur, name in items:
            ax.barh(y, max(dur, 1e-3), left=start - t0, height=0.35 if flow else 0.8,
                    color=colour(name), alpha=0.35 if flow else 0.95, linewidth=0)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([f"gpu {g} {TRACKS[t]}" for g, t in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("time since the layer started (us)")
    ax.set_title(f"{label}, {args.which} pass", fontsize=9)
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in COLOURS.values()]
    ax.legend(handles, list(COLOURS), fontsize=6, ncol=6, loc="upper center", bbox_to_anchor=(0.5, -0.12 - 0.6 / len(rows)))
    fig.tight_layout()
    fig.savefig(args.output, dpi=130, metadata={"Software": None})


if __name__ == "__main__":
    main()
