#!/usr/bin/env python3
"""FEPLB's GEMM straggler as the paper states it: an absolute time, the slowest GPU's forward GEMM time
minus the mean, per record (gemm_max_us - gemm_mean_us in metrics.csv), median over the records, for
FEPLB and static EP on the same trace, and its reduction.

Reads the outputs of
  epsim run experiments/feplb-ep8.yaml, experiments/feplb-ep8-static.yaml,
            experiments/feplb-ep16.yaml, experiments/feplb-ep16-static.yaml
(out/feplb-ep8/metrics.csv, ...). Usage: python3 experiments/feplb_gemm_straggler.py [OUT_DIR]
"""

import csv
import os
import statistics
import sys


def median_straggler_us(path):
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        sys.exit(f"feplb_gemm_straggler: {path}: cannot read: {e.strerror} (run the epsim commands in this file's header first)")
    if not rows:
        sys.exit(f"feplb_gemm_straggler: {path}: no records")
    try:
        gaps = [float(r["gemm_max_us"]) - float(r["gemm_mean_us"]) for r in rows]
    except (KeyError, ValueError):
        sys.exit(f"feplb_gemm_straggler: {path}: expected numeric gemm_max_us and gemm_mean_us columns")
    return statistics.median(gaps), len(gaps)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "out"
    for ep in ("8", "16"):
        base, n = median_straggler_us(os.path.join(out, f"feplb-ep{ep}-static", "metrics.csv"))
        feplb, _ = median_straggler_us(os.path.join(out, f"feplb-ep{ep}", "metrics.csv"))
        reduction = 1 - feplb / base if base > 0 else float("nan")
        print(f"EP {ep}: GEMM straggler (max - mean, median over {n} records): static EP {base:.1f} us, "
              f"FEPLB {feplb:.1f} us, reduction {100 * reduction:.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
