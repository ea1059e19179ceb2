#!/usr/bin/env python3
"""Writes the tensors of a PyTorch dump (torch.save of a dict) as JSON, for `epsim trace import
expert-load` and its framework names (docs/trace-format.md, section 3.5): SGLang's stat-mode dump
(`logical_count`), a dict of vLLM EPLB tensors (`expert_load_window`, `physical_to_logical_map`), or
Megatron counts someone saved. Tensors become nested lists; numbers, strings and lists are kept;
anything else (objects, None) is left out. --provenance and --licence add those labels. Needs PyTorch.

usage: torch_to_json.py DUMP.pt -o OUT.json [--keys K1,K2] [--provenance TEXT] [--licence TEXT]
"""
import argparse
import json
import sys

import torch


def plain(value):
    if isinstance(value, torch.Tensor):
        return value.tolist()
    if isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        items = [plain(v) for v in value]
        return None if any(v is None for v in items) else items
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dump")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--keys", help="keep only these keys, comma-separated")
    ap.add_argument("--provenance")
    ap.add_argument("--licence")
    a = ap.parse_args()
    data = torch.load(a.dump, map_location="cpu")
    if isinstance(data, torch.Tensor):
        data = {"counts": data}
    if not isinstance(data, dict):
        sys.exit(f"error: {a.dump}: expected a dict of tensors or one tensor, found {type(data).__name__}")
    wanted = a.keys.split(",") if a.keys else list(data.keys())
    out = {}
    for key in wanted:
        if key not in data:
            sys.exit(f"error: {a.dump}: no key {key!r} (it has {', '.join(map(str, data.keys()))})")
        value = plain(data[key])
        if value is not None:
            out[str(key)] = value
    if a.provenance:
        out["provenance"] = a.provenance
    if a.licence:
        out["licence"] = a.licence
    with open(a.output, "x") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
