#!/usr/bin/env python3
"""Turns SGLang per-token expert-distribution dumps into epsim-counts-jsonl (docs/trace-format.md, 3.4.3).

SGLang's per-token mode (python/sglang/srt/eplb/expert_distribution.py, _DetailAccumulator.dump) saves
one file per rank, expert_distribution_recorder_{time}_{rank}.pt, holding
{"records": [{"forward_pass_id", "rank", "topk_ids_of_layer": int tensor [layers, tokens, top_k], ...}],
 "last_physical_to_logical_map": int tensor [layers, physical experts]}.
Every record becomes, for its rank, one counts line per layer: step = the record's position among the
file's records (forward passes in the order recorded), micro-batch 0; physical expert ids are mapped
to logical ones; ids below 0 (unfilled slots) are not counted. Needs PyTorch.

usage: sglang_pt_to_counts.py DUMP.pt... --experts E --top-k K --provenance TEXT [--licence TEXT]
                              [--ranks R] -o 'counts-{rank}.jsonl'
"""
import argparse
import json
import sys

import torch


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dumps", nargs="+")
    ap.add_argument("--experts", type=int, required=True, help="logical experts E")
    ap.add_argument("--top-k", type=int, required=True)
    ap.add_argument("--ranks", type=int, help="source ranks R (default: the number of dumps)")
    ap.add_argument("--provenance", required=True)
    ap.add_argument("--licence")
    ap.add_argument("-o", "--output", required=True, help="output path with {rank}")
    a = ap.parse_args()
    if "{rank}" not in a.output:
        sys.exit("error: -o must contain {rank}: one counts-jsonl file is written per rank")
    ranks = a.ranks or len(a.dumps)
    for path in a.dumps:
        dump = torch.load(path, map_location="cpu")
        records = dump["records"]
        if not records:
            sys.exit(f"error: {path}: no records")
        rank = int(records[0]["rank"])
        p2l = dump.get("last_physical_to_logical_map")
        layers = records[0]["topk_ids_of_layer"].shape[0]
        header = {"format": "epsim-counts-jsonl", "version": 1, "num_experts": a.experts, "top_k": a.top_k,
                  "num_ranks": ranks, "layer_ids": list(range(layers)), "rank": rank, "provenance": a.provenance}
        if a.licence:
            header["licence"] = a.licence
        with open(a.output.replace("{rank}", str(rank)), "x") as out:
            out.write(json.dumps(header, separators=(",", ":")) + "\n")
            for step, rec in enumerate(records):
                ids = rec["topk_ids_of_layer"].to(torch.int64)
                for layer in range(layers):
                    chosen = ids[layer].reshape(-1)
                    chosen = chosen[chosen >= 0]
                    if p2l is not None:
                        chosen = p2l[layer].to(torch.int64)[chosen]
                    counts = torch.bincount(chosen, minlength=a.experts).tolist()
                    if len(counts) != a.experts:
                        sys.exit(f"error: {path}: record {step}, layer {layer}: expert id >= --experts {a.experts}")
                    out.write(json.dumps({"step": step, "micro_batch": 0, "layer": layer, "rank": rank,
                                          "counts": counts}, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()
