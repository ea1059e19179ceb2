#!/usr/bin/env python3
"""Traces for UltraEP's headline ("imbalance 1.30-4.01 down to 1.01-1.04"), built the way UltraEP's own
tests build their loads (Dots-Infra/UltraEP: tests/utils.py, generate_loads_per_rank_zipf): expert
weights Zipf over ranks (rank r weighs 1 / (r + 1)^alpha) times Zipf inside a rank (local expert m
weighs 1 / (m + 1)^4), alpha found by bisection so that the rank-level max/mean of the top-k inclusion
probabilities hits the target ratio. UltraEP samples tokens from these weights; here every rank gets
the expected counts (8192 tokens x the inclusion probability of each expert, rounded to whole tokens
with the largest remainders), so the traces are deterministic. The README's test_e2e setting: EP 64,
256 experts (4 master per rank), top-8, 8192 tokens per rank.

  python3 experiments/ultraep-traces.py            # writes out/traces/ultraep-zipf-r*.eptrace

Each trace has one record (step 0, micro-batch 0, layer 0). Needs build/epsim (--epsim to change).
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

RATIOS = [1.30, 1.51, 2.01, 3.03, 4.01]  # the paper's range and the README table's three rows


def weights_for(alpha, ranks, local):
    local_alpha = 4.0 if local > 1 else 0.0
    w = [(1.0 / (r + 1) ** alpha) * (1.0 / (m + 1) ** local_alpha) for r in range(ranks) for m in range(local)]
    total = sum(w)
    return [x / total for x in w]


def inclusion_probs(w, top_k):
    """tests/utils.py topk_inclusion_probs_approx: p_e = 1 - exp(-c w_e) with sum p_e = top_k."""
    lo, hi = 0.0, 1.0
    while sum(1.0 - math.exp(-hi * x) for x in w) < top_k:
        hi *= 2.0
    for _ in range(48):
        mid = (lo + hi) * 0.5
        if sum(1.0 - math.exp(-mid * x) for x in w) < top_k:
            lo = mid
        else:
            hi = mid
    return [1.0 - math.exp(-hi * x) for x in w]


def rank_ratio(p, ranks, local):
    loads = [sum(p[r * local:(r + 1) * local]) for r in range(ranks)]
    return max(loads) / (sum(loads) / ranks)


def alpha_for(target, ranks, local, top_k):
    """tests/utils.py zipf_alpha_for_rank_ratio: bisection on alpha in [0, 8], 32 steps."""
    lo, hi = 0.0, 8.0
    for _ in range(32):
        mid = (lo + hi) * 0.5
        if rank_ratio(inclusion_probs(weights_for(mid, ranks, local), top_k), ranks, local) < target:
            lo = mid
        else:
            hi = mid
    return hi


def expected_counts(p, tokens, top_k):
    """tokens x p_e, rounded to whole tokens summing to tokens x top_k (largest remainder, lower id on ties)."""
    exact = [tokens * x for x in p]
    counts = [min(tokens, int(math.floor(x))) for x in exact]
    short = tokens * top_k - sum(counts)
    order = sorted(range(len(p)), key=lambda e: (-(exact[e] - math.floor(exact[e])), e))
    for e in order:
        if short <= 0:
            break
        if counts[e] < tokens:
            counts[e] += 1
            short -= 1
    return counts


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epsim", default="build/epsim")
    ap.add_argument("--out", default="out/traces")
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--experts", type=int, default=256)
    ap.add_argument("--top-k", type=int, default=8)
    ap.add_argument("--tokens-per-rank", type=int, default=8192)
    a = ap.parse_args()
    local = a.experts // a.ranks
    os.makedirs(a.out, exist_ok=True)
    for target in RATIOS:
        alpha = alpha_for(target, a.ranks, local, a.top_k)
        p = inclusion_probs(weights_for(alpha, a.ranks, local), a.top_k)
        counts = expected_counts(p, a.tokens_per_rank, a.top_k)
        name = "ultraep-zipf-r%03d" % round(target * 100)
        path = os.path.join(a.out, name + ".eptrace")
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, name + ".jsonl")
            with open(src, "w") as f:
                header = {"format": "epsim-counts-jsonl", "version": 1, "num_experts": a.experts, "top_k": a.top_k,
                          "num_ranks": a.ranks, "layer_ids": [0],
                          "provenance": "UltraEP tests/utils.py Zipf loads, expected counts: rank max/mean target "
                                        "%.2f, alpha %.6f, %d tokens per rank" % (target, alpha, a.tokens_per_rank)}
                f.write(json.dumps(header) + "\n")
                for r in range(a.ranks):
                    f.write(json.dumps({"step": 0, "micro_batch": 0, "layer": 0, "rank": r, "counts": counts}) + "\n")
            subprocess.run([a.epsim, "trace", "import", "counts-jsonl", src, "-o", path, "--force"], check=True,
                           stdout=subprocess.DEVNULL)
        loads = [sum(counts[r * local:(r + 1) * local]) for r in range(a.ranks)]
        print("%s: alpha %.4f, rank max/mean %.3f" % (path, alpha, max(loads) / (sum(loads) / a.ranks)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
