"""One epsim-counts-jsonl file (version 1) for one source rank.

The file is written under a hidden temporary name beside its final path and renamed into place by
close(), so a reader never sees half a file and an interrupted run leaves nothing at the final path.
An existing file is never replaced unless overwrite=True, not even one that appears while the run
is writing (the final step is a hard link, which fails when the name is taken).
"""

import itertools
import json
import os

FORMAT = "epsim-counts-jsonl"
VERSION = 1

_temp_serial = itertools.count()


def _check_int(name, value, low, high=None):
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < low or (high is not None and value > high):
        bound = f"[{low}, {high}]" if high is not None else f">= {low}"
        raise ValueError(f"{name} must be in {bound}, got {value}")


def header_line(*, num_experts, top_k, num_ranks, layer_ids, rank, provenance, licence=None):
    """The header object of the format, as one line of compact JSON (key order fixed)."""
    _check_int("num_experts", num_experts, 1, 65536)
    _check_int("top_k", top_k, 1, num_experts)
    _check_int("num_ranks", num_ranks, 1, 65536)
    if not layer_ids:
        raise ValueError("layer_ids must name at least one MoE layer")
    for layer in layer_ids:
        _check_int("layer id", layer, 0)
    if len(set(layer_ids)) != len(layer_ids):
        raise ValueError(f"layer_ids must be distinct, got {list(layer_ids)}")
    if rank is not None:
        _check_int("rank", rank, 0, num_ranks - 1)
    if not isinstance(provenance, str) or not provenance.strip():
        raise ValueError("provenance must be a non-empty string (model, run, command)")
    header = {
        "format": FORMAT,
        "version": VERSION,
        "num_experts": num_experts,
        "top_k": top_k,
        "num_ranks": num_ranks,
        "layer_ids": list(layer_ids),
    }
    if rank is not None:
        header["rank"] = rank
    header["provenance"] = provenance
    if licence is not None:
        if not isinstance(licence, str) or not licence.strip():
            raise ValueError("licence, when given, must be a non-empty string")
        header["licence"] = licence
    return json.dumps(header, separators=(",", ":"), ensure_ascii=False)


class CountsFileWriter:
    """Writes the header at construction, then one line per (step, micro_batch, layer)."""

    def __init__(self, path, *, num_experts, top_k, num_ranks, layer_ids, rank, provenance,
                 licence=None, overwrite=False):
        line = header_line(num_experts=num_experts, top_k=top_k, num_ranks=num_ranks,
                           layer_ids=layer_ids, rank=rank, provenance=provenance, licence=licence)
        self.path = path
        self.num_experts = num_experts
        self.top_k = top_k
        self.rank = rank
        self.layer_ids = frozenset(layer_ids)
        self.lines_written = 0
        self._overwrite = overwrite
        if os.path.lexists(path) and not overwrite:
            raise FileExistsError(f"{path}: already exists (pass overwrite=True to replace it)")
        folder = os.path.dirname(os.path.abspath(path))
        os.makedirs(folder, exist_ok=True)
        self._temp = os.path.join(
            folder, f".{os.path.basename(path)}.epsim-tmp-{os.getpid()}-{next(_temp_serial)}")
        # "x": created exclusively, so nothing that already has the temporary name is truncated.
        self._file = open(self._temp, "x", encoding="utf-8", newline="\n")
        self._file.write(line + "\n")

    def write(self, step, micro_batch, layer, counts):
        _check_int("step", step, 0)
        _check_int("micro_batch", micro_batch, 0)
        if layer not in self.layer_ids:
            raise ValueError(f"layer {layer} is not one of the header's layer_ids")
        if len(counts) != self.num_experts:
            raise ValueError(f"{len(counts)} counts for {self.num_experts} experts")
        if any(type(count) is not int for count in counts) or min(counts) < 0:
            raise ValueError(f"counts must be non-negative integers, got {list(counts)}")
        total = sum(counts)
        if total % self.top_k != 0:
            raise ValueError(
                f"step {step}, micro-batch {micro_batch}, layer {layer}, rank {self.rank}: the counts "
                f"sum to {total}, not a multiple of top_k = {self.top_k} (a token lost some of its "
                f"top-k selections: was it dropped by an expert capacity?)")
        self._file.write('{"step":%d,"micro_batch":%d,"layer":%d,"rank":%d,"counts":[%s]}\n'
                         % (step, micro_batch, layer, self.rank, ",".join(map(str, counts))))
        self.lines_written += 1

    def close(self):
        """Flushes the file to disk and moves it to its final path."""
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        try:
            if self._overwrite:
                os.replace(self._temp, self.path)
                return
            try:
                os.link(self._temp, self.path)
            except FileExistsError:
                raise FileExistsError(
                    f"{self.path}: appeared while the run was recording; nothing was replaced "
                    f"(pass overwrite=True to replace it)") from None
            except OSError:
                # A file system without hard links: check, then rename (a narrow race remains).
                if os.path.lexists(self.path):
                    raise FileExistsError(f"{self.path}: already exists") from None
                os.rename(self._temp, self.path)
                return
            os.unlink(self._temp)
        except BaseException:
            self._remove_temp()
            raise

    def abort(self):
        """Drops what was written: the final path is left as it was."""
        if not self._file.closed:
            self._file.close()
        self._remove_temp()

    def _remove_temp(self):
        try:
            os.unlink(self._temp)
        except FileNotFoundError:
            pass
