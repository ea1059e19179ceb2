#!/usr/bin/env python3
"""Draws one layer of an epsim timeline.json as a PNG or SVG (by OUT's extension): a row per (GPU,
resource track), a bar per kernel, copy or message. The same file opens in Perfetto; this static
picture is for reports.

With --utilisation it draws instead how busy each resource was over the layer, in --bins time bins,
the mean over the drawn GPUs and, per bin, the largest:
  SM:       fraction of the bin the compute stream had a kernel running, and the same for the EP
            backend's communication kernels (which hold SMs while they run)
  CE:       fraction of the bin the Copy Engine had a copy in progress
  NVLink:   GB/s of payload sent on the GPU's outgoing NVLink port
  NIC:      GB/s of payload sent on the GPU's outgoing InfiniBand NIC
A message's bytes are spread evenly over its time on the wire (the timeline records its start, end
and payload, not its rate at each moment), so link rates are averages over each message's lifetime.
They are payload rates: the EP backend's protocol overhead is not in the timeline.

usage: plot_timeline.py TIMELINE.json -o OUT.png|OUT.svg [--record N] [--gpus 0,1,2,3]
                        [--pass forward|backward|both] [--utilisation] [--bins N]

Prints what it drew ("wrote OUT: LAYER, forward pass, 8 GPUs"). --gpus draws a subset on the layer's
own clock (time 0 is the first event of the layer's pass on any GPU). A GPU the timeline lacks, a
record out of range or an output folder that does not exist: one line, exit status 2. The figure is
drawn into a temporary file beside OUT, then renamed over it: whole, or not at all.

Needs matplotlib (Debian: apt-get install python3-matplotlib); without it the script says so and exits
with status 2. The same timeline and options give the same bytes: no date or software version in
the files' metadata, a fixed SVG id salt.
"""
import argparse
import json
import os
import sys

from plot_output import OutputError, format_of, save_whole

TRACKS = ["compute", "comm_kernel", "copy_engine", "nvlink_out", "nic_out", "host_cpu"]
COLOURS = {"gemm fwd": "#1f77b4", "gemm dgrad": "#4a90c8", "gemm wgrad": "#7fb2dc", "shared": "#9ecae1",
           "dispatch": "#ff7f0e", "combine": "#d62728", "grad": "#e377c2", "weights": "#2ca02c",
           "tokens": "#98df8a", "outputs": "#bcbd22", "planner": "#8c564b", "counts": "#c49c94"}


def colour(name):
    for key, value in COLOURS.items():
        if name.startswith(key):
            return value
    return "#7f7f7f"


def collect(events, label, which):
    """(gpu, track) -> [(start_us, duration_us, name, bytes)] of one record's pass (or both passes)."""
    bars = {}
    open_flows = {}
    for e in events:
        a = e.get("args", {})
        if e["ph"] == "X" and a.get("layer") == label:
            if which != "both" and a.get("pass") != which:
                continue
            bars.setdefault((e["pid"], e["tid"]), []).append(
                (float(e["ts"]), float(e["dur"]), e["name"], int(a.get("bytes", 0))))
        elif e["ph"] == "b" and a.get("layer") == label:
            if which == "both" or a.get("pass") == which:
                open_flows[e["id"]] = e
        elif e["ph"] == "e" and e["id"] in open_flows:
            b = open_flows.pop(e["id"])
            bars.setdefault((b["pid"], b["tid"]), []).append(
                (float(b["ts"]), float(e["ts"]) - float(b["ts"]), b["name"], int(b.get("args", {}).get("bytes", 0))))
    return bars


def import_pyplot():
    try:
        import matplotlib
    except ImportError:
        print(f"plot_timeline.py: matplotlib is not installed for {sys.executable} "
              "(Debian: apt-get install python3-matplotlib)", file=sys.stderr)
        sys.exit(2)
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"svg.hashsalt": "epsim", "svg.fonttype": "path", "font.family": "DejaVu Sans"})
    return plt


def fail(message):
    print(f"plot_timeline.py: error: {message}", file=sys.stderr)
    sys.exit(2)


def save(fig, path):
    try:
        save_whole(fig, path, dpi=130)
    except OutputError as e:
        fail(str(e))


def bin_overlaps(start, end, t0, width, bins):
    """(bin, overlap in us) for the interval [start, end) against bins of `width` from t0."""
    first = max(0, min(bins - 1, int((start - t0) // width)))
    last = max(0, min(bins - 1, int((end - t0) // width)))
    for b in range(first, last + 1):
        low, high = t0 + b * width, t0 + (b + 1) * width
        overlap = min(end, high) - max(start, low)
        if overlap > 0:
            yield b, overlap


def busy_fraction(items, t0, width, bins):
    """Per bin, the fraction of it covered by at least one of the (start, duration) items."""
    merged = []
    for start, dur, _, _ in sorted(items):
        end = start + dur
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    out = [0.0] * bins
    for start, end in merged:
        for b, overlap in bin_overlaps(start, end, t0, width, bins):
            out[b] += overlap / width
    return out


def rate_GBps(items, t0, width, bins):
    """Per bin, GB/s of the items' bytes, each message's bytes spread evenly over its duration."""
    out = [0.0] * bins
    for start, dur, _, size_bytes in items:
        if dur <= 0:
            b = max(0, min(bins - 1, int((start - t0) // width)))
            out[b] += size_bytes / width / 1e3
            continue
        for b, overlap in bin_overlaps(start, start + dur, t0, width, bins):
            out[b] += size_bytes * (overlap / dur) / width / 1e3  # bytes per us / 1e3 = GB/s
    return out


UTILISATION_PANELS = [  # (title, [(track, label)], rate?)
    ("SM: busy fraction", [("compute", "compute stream"), ("comm_kernel", "communication kernels")], False),
    ("Copy Engine: busy fraction", [("copy_engine", "copy engine")], False),
    ("NVLink out: GB/s of payload", [("nvlink_out", "NVLink out")], True),
    ("NIC out: GB/s of payload", [("nic_out", "NIC out")], True),
]


def draw_utilisation(plt, bars, gpus, t0, t1, bins, title, output):
    width = (t1 - t0) / bins
    mids = [(b + 0.5) * width for b in range(bins)]
    fig, axes = plt.subplots(len(UTILISATION_PANELS), 1, figsize=(10, 8.5), sharex=True)
    for ax, (panel, tracks, is_rate) in zip(axes, UTILISATION_PANELS):
        for i, (track, label) in enumerate(tracks):
            tid = TRACKS.index(track)
            per_gpu = [(rate_GBps if is_rate else busy_fraction)(bars.get((g, tid), []), t0, width, bins)
                       for g in gpus]
            mean = [sum(v[b] for v in per_gpu) / len(gpus) for b in range(bins)]
            high = [max(v[b] for v in per_gpu) for b in range(bins)]
            colour = ["#1f77b4", "#ff7f0e"][i]
            ax.plot(mids, mean, color=colour, linewidth=1.2, label=f"{label}, mean over GPUs")
            ax.plot(mids, high, color=colour, linewidth=0.8, linestyle="--", label=f"{label}, max over GPUs")
        if not is_rate:
            ax.set_ylim(-0.02, 1.05)
        ax.set_title(panel, fontsize=9)
        ax.tick_params(labelsize=7)
        ax.grid(True, linewidth=0.4, alpha=0.5)
        ax.legend(fontsize=6, loc="upper right")
    axes[-1].set_xlabel(f"time since the layer started (us), {bins} bins of {width:.3g} us")
    fig.suptitle(f"{title}, {len(gpus)} GPUs", fontsize=10)
    fig.tight_layout()
    save(fig, output)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("timeline")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--record", type=int, default=0, help="which drawn record (0 = the first)")
    ap.add_argument("--gpus", default="", help="comma-separated GPU ids (default: all)")
    ap.add_argument("--pass", dest="which", default="forward", choices=["forward", "backward", "both"])
    ap.add_argument("--utilisation", action="store_true",
                    help="draw SM, Copy Engine, NVLink and NIC utilisation over time instead of the bars")
    ap.add_argument("--bins", type=int, default=100, help="time bins of --utilisation (default: 100)")
    args = ap.parse_args()
    if args.bins < 1:
        ap.error("--bins: must be at least 1")
    if format_of(args.output) is None:
        ap.error(f"-o: '{args.output}' does not end in .png or .svg")

    try:
        with open(args.timeline) as f:
            events = json.load(f)["traceEvents"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        fail(f"{args.timeline}: not an epsim timeline ({e})")
    labels = []
    for e in events:
        label = e.get("args", {}).get("layer")
        if label is not None and label not in labels:
            labels.append(label)
    if not 0 <= args.record < len(labels):
        fail(f"{args.timeline}: has {len(labels)} records, asked for record {args.record}")
    label = labels[args.record]
    try:
        gpus = [int(g) for g in args.gpus.split(",")] if args.gpus else None
    except ValueError:
        ap.error(f"--gpus: '{args.gpus}' is not a comma-separated list of GPU ids")

    try:
        bars = collect(events, label, args.which)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        fail(f"{args.timeline}: not an epsim timeline (an event without {e})")
    # The timeline's GPUs: named by its process_name events, or else those with events of this record.
    known = sorted({e["pid"] for e in events if e.get("name") == "process_name"}) or sorted({g for g, _ in bars})
    unknown = [g for g in gpus or [] if g not in known]
    if unknown:
        fail(f"--gpus: GPU {unknown[0]} is not in {args.timeline} (its GPUs: {', '.join(str(g) for g in known)})")
    rows = sorted(k for k in bars if gpus is None or k[0] in gpus)
    if not rows:
        fail(f"{args.timeline}: nothing to draw for record {args.record}")
    # The layer's (or pass's) start, over every GPU: a subset drawn with --gpus keeps the layer's clock.
    t0 = min(s for k in bars for s, _, _, _ in bars[k])
    plt = import_pyplot()

    if args.utilisation:
        # Every GPU of the timeline (or of --gpus), also those idle in this pass.
        drawn = gpus if gpus is not None else known
        t1 = max(s + d for k in rows for s, d, _, _ in bars[k])
        draw_utilisation(plt, bars, drawn, t0, t1 if t1 > t0 else t0 + 1.0, args.bins,
                         f"{label}, {args.which} pass", args.output)
        report(args.output, label, args.which, len(drawn))
        return

    fig, ax = plt.subplots(figsize=(12, 0.32 * len(rows) + 1.2))
    for y, key in enumerate(rows):
        items = sorted(bars[key])
        # Messages overlap on a link: draw them thin and translucent so that overlap shows as density.
        flow = TRACKS[key[1]] in ("nvlink_out", "nic_out")
        for start, dur, name, _ in items:
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
    save(fig, args.output)
    report(args.output, label, args.which, len({g for g, _ in rows}))


def report(path, label, which, gpus):
    print(f"wrote {path}: {label}, {which} pass, {gpus} GPU{'' if gpus == 1 else 's'}")


if __name__ == "__main__":
    main()
