"""An independent reading of the epsim-counts-jsonl v1 rules, to check what the recorder writes.

validate(paths) checks the files given to one import together and returns
{(step, micro_batch, layer): {rank: counts}}; any defect raises SpecError naming the file and line.
Stricter than the format where the recorder is: the keys of every object must be exactly the ones
the format names (the recorder writes nothing else).
"""

import json

HEADER_REQUIRED = {"format", "version", "num_experts", "top_k", "num_ranks", "layer_ids", "provenance"}
HEADER_OPTIONAL = {"rank", "licence"}
LINE_KEYS = {"step", "micro_batch", "layer", "rank", "counts"}


class SpecError(Exception):
    pass


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _fail(path, line, message):
    raise SpecError(f"{path}:line {line}: {message}")


def _nonneg(path, line, name, value):
    if not _is_int(value) or value < 0:
        _fail(path, line, f"{name} must be a non-negative integer, got {value!r}")


def read_header(path, text):
    header = json.loads(text)
    if not isinstance(header, dict):
        _fail(path, 1, "the header is not a JSON object")
    keys = set(header)
    if not HEADER_REQUIRED <= keys or not keys <= HEADER_REQUIRED | HEADER_OPTIONAL:
        _fail(path, 1, f"header keys {sorted(keys)}")
    if header["format"] != "epsim-counts-jsonl" or header["version"] != 1:
        _fail(path, 1, f"format {header['format']!r} version {header['version']!r}")
    for name in ("num_experts", "top_k", "num_ranks"):
        if not _is_int(header[name]) or header[name] < 1:
            _fail(path, 1, f"{name} must be a positive integer")
    if header["top_k"] > header["num_experts"]:
        _fail(path, 1, "top_k > num_experts")
    layers = header["layer_ids"]
    if not isinstance(layers, list) or not layers or len(set(layers)) != len(layers):
        _fail(path, 1, "layer_ids must be a non-empty list of distinct ids")
    for layer in layers:
        _nonneg(path, 1, "layer id", layer)
    if "rank" in header:
        _nonneg(path, 1, "rank", header["rank"])
        if header["rank"] >= header["num_ranks"]:
            _fail(path, 1, "rank >= num_ranks")
    if not isinstance(header["provenance"], str) or not header["provenance"].strip():
        _fail(path, 1, "provenance must be a non-empty string")
    if "licence" in header and (not isinstance(header["licence"], str) or not header["licence"]):
        _fail(path, 1, "licence must be a non-empty string")
    return header


def validate(paths):
    shared = None
    seen = {}
    records = {}
    for path in paths:
        with open(path, "rb") as f:
            data = f.read()
        text = data.decode("utf-8")
        if not text.endswith("\n"):
            _fail(path, text.count("\n") + 1, "the last line has no newline")
        lines = text.split("\n")[:-1]
        if not lines:
            _fail(path, 1, "empty file")
        header = read_header(path, lines[0])
        signature = (header["num_experts"], header["top_k"], header["num_ranks"],
                     tuple(header["layer_ids"]))
        if shared is None:
            shared = signature
        elif signature != shared:
            _fail(path, 1, f"header disagrees with the first file's (E, K, R, layer_ids) {shared}")
        experts, top_k, ranks = signature[:3]
        for number, raw in enumerate(lines[1:], start=2):
            line = json.loads(raw)
            if not isinstance(line, dict) or set(line) != LINE_KEYS:
                _fail(path, number, f"keys {sorted(line) if isinstance(line, dict) else line!r}")
            for name in ("step", "micro_batch", "layer", "rank"):
                _nonneg(path, number, name, line[name])
            if line["layer"] not in header["layer_ids"]:
                _fail(path, number, f"layer {line['layer']} not in layer_ids")
            if line["rank"] >= ranks or ("rank" in header and line["rank"] != header["rank"]):
                _fail(path, number, f"rank {line['rank']}")
            counts = line["counts"]
            if not isinstance(counts, list) or len(counts) != experts:
                _fail(path, number, f"counts must be a list of {experts} integers")
            for count in counts:
                _nonneg(path, number, "count", count)
            if sum(counts) % top_k:
                _fail(path, number, f"counts sum to {sum(counts)}, not a multiple of top_k {top_k}")
            key = (line["step"], line["micro_batch"], line["layer"], line["rank"])
            if key in seen:
                _fail(path, number, f"{key} already at {seen[key]}")
            seen[key] = f"{path}:line {number}"
            records.setdefault(key[:3], {})[key[3]] = counts
    for key, by_rank in records.items():
        if len(by_rank) != shared[2]:
            raise SpecError(f"(step, micro_batch, layer) {key} has ranks {sorted(by_rank)} of "
                            f"{shared[2]}")
    return records
