"""Paths and small helpers shared by the recorder's tests."""

import collections
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(SOURCE_DIR, "traces", "record"))
sys.path.insert(0, HERE)


def direct_counts(chosen, num_experts):
    """Counts of each expert id in a list of [tokens, K] tensors, computed without torch."""
    counter = collections.Counter()
    for ids in chosen:
        counter.update(int(e) for e in ids.reshape(-1).tolist())
    return [counter.get(e, 0) for e in range(num_experts)]


def read_lines(path):
    """(header, {(step, micro_batch, layer, rank): counts}) of one counts file."""
    with open(path, encoding="utf-8") as f:
        header = json.loads(f.readline())
        lines = {}
        for raw in f:
            line = json.loads(raw)
            lines[(line["step"], line["micro_batch"], line["layer"], line["rank"])] = line["counts"]
    return header, lines
