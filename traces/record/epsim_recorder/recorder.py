"""Records how many top-k selections each expert gets, per (step, micro-batch, MoE layer, source rank).

The counting stays on the device of the router: every router call adds its selections to one row of a
[layers, experts] int64 tensor on that device, without reading anything back (torch.bincount on CUDA
reads the largest id back to the host to size its output, a synchronisation per call, so on CUDA the
count is a scatter_add_ into the row instead). When a micro-batch ends, the tensor is copied to pinned
host memory with non_blocking=True and a CUDA event marks the copy; rows are written to the file only
once their event has completed, at a later boundary or at close(). On the CPU the tensor is already
host memory and is written as it is.
"""

import collections
import os
import sys
import warnings
from contextlib import contextmanager

import torch

from .adapters import COUNTS, INDICES, find_sites
from .counts_writer import CountsFileWriter, header_line

_Pending = collections.namedtuple("_Pending", "step micro_batch rank host event device_rows")


def count_into(row, expert_ids, num_experts, use_bincount):
    """Adds the number of occurrences of each expert id to `row` (int64, num_experts), on its device."""
    flat = expert_ids.detach().reshape(-1)
    if flat.dtype != torch.int64 or flat.device != row.device:
        flat = flat.to(device=row.device, dtype=torch.int64)
    if use_bincount:
        counts = torch.bincount(flat, minlength=num_experts)
        if counts.numel() != num_experts:
            raise ValueError(f"an expert id is >= num_experts = {num_experts}")
        row.add_(counts)
    else:
        row.scatter_add_(0, flat, torch.ones_like(flat))


def resolve_ranks(rank=None, num_ranks=None, group=None):
    """(rank, num_ranks): the values given, else torch.distributed's rank and world size in `group`
    (the world when None) when it is initialised, else 0 and 1."""
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        if rank is None:
            rank = dist.get_rank(group)
        if num_ranks is None:
            num_ranks = dist.get_world_size(group)
    rank = 0 if rank is None else rank
    num_ranks = 1 if num_ranks is None else num_ranks
    if not 0 <= rank < num_ranks:
        raise ValueError(f"rank {rank} is not in [0, num_ranks = {num_ranks})")
    return rank, num_ranks


class _Scope:
    """What micro_batch() and step() return: usable as a statement or as a `with` block."""

    def __init__(self, recorder):
        self._recorder = recorder

    def __enter__(self):
        return self._recorder

    def __exit__(self, kind, value, traceback):
        if kind is None:
            self._recorder.end_micro_batch()
        return False


class Recorder:
    """Hooks the routers of `model` and writes `{prefix}-rank{r:05d}.jsonl` in `out_dir` per source rank.

    rank / num_ranks: the source rank of this process's tokens and how many there are; by default
    from torch.distributed (in `group`) when initialised, else 0 of 1. source_rank(r) overrides the
    rank for a block of code (several simulated ranks in one process).
    layer_ids: every MoE layer of the model, for the header (default: the layers found here; give
    the full list under pipeline parallelism, where one process holds only some layers).
    on_repeat: what a second call of the same router in the same micro-batch does: "first" counts
    the first call only (activation recomputation re-runs routers in the backward pass), "sum" adds
    the calls, "error" raises.
    """

    def __init__(self, model, out_dir, *, adapter="auto", provenance=None, licence=None, rank=None,
                 num_ranks=None, group=None, layer_ids=None, prefix="counts", overwrite=False,
                 on_repeat="first"):
        if on_repeat not in ("first", "sum", "error"):
            raise ValueError(f"on_repeat must be 'first', 'sum' or 'error', got {on_repeat!r}")
        sites = find_sites(model, adapter)
        if not sites:
            raise ValueError(f"no router found in {type(model).__name__} by adapter {adapter!r}")
        shapes = {(s.num_experts, s.top_k) for s in sites}
        if len(shapes) != 1:
            raise ValueError("routers disagree on (num_experts, top_k): "
                             + ", ".join(f"{s.name} {s.num_experts, s.top_k}" for s in sites))
        self.num_experts, self.top_k = shapes.pop()
        self.sites = sorted(sites, key=lambda s: s.layer_id)
        self.recorded_layer_ids = [s.layer_id for s in self.sites]
        if layer_ids is None:
            layer_ids = list(self.recorded_layer_ids)
        missing = set(self.recorded_layer_ids) - set(layer_ids)
        if missing:
            raise ValueError(f"layer_ids {list(layer_ids)} lack the routers' layers {sorted(missing)}")
        self.layer_ids = list(layer_ids)
        self.rank, self.num_ranks = resolve_ranks(rank, num_ranks, group)
        if provenance is None:
            names = sorted({s.adapter for s in self.sites})
            provenance = (f"recorded by epsim_recorder from {type(model).__name__} "
                          f"(adapter {', '.join(names)}; torch {torch.__version__}); command: "
                          + " ".join([os.path.basename(sys.executable)] + sys.argv))
        self.provenance = provenance
        self.licence = licence
        # The header's rules (provenance, licence, sizes) are checked now, not at the first write.
        header_line(num_experts=self.num_experts, top_k=self.top_k, num_ranks=self.num_ranks,
                    layer_ids=self.layer_ids, rank=self.rank, provenance=provenance, licence=licence)
        self.out_dir = out_dir
        self.prefix = prefix
        self.overwrite = overwrite
        self.on_repeat = on_repeat
        self.enabled = True
        self.repeats_skipped = 0
        self._step = 0
        self._micro_batch = 0
        self._rank_override = None
        self._live = {}         # rank -> [device rows tensor, rows already counted, row views]
        self._pending = collections.deque()
        self._last_key = {}     # rank -> last (step, micro_batch) ended
        self._writers = {}
        self._pinned_pool = []
        self._closed = False
        self._checked = set()
        # Refuse existing files now rather than after the run.
        ranks = range(self.num_ranks) if rank is None and not _distributed() else [self.rank]
        if not overwrite:
            for r in ranks:
                if os.path.lexists(self.path_of(r)):
                    raise FileExistsError(f"{self.path_of(r)}: already exists "
                                          f"(pass overwrite=True to replace it)")
        self._hooks = [s.module.register_forward_hook(self._hook_for(row, s))
                       for row, s in enumerate(self.sites)]

    # ---- where and what --------------------------------------------------------------------

    def path_of(self, rank):
        return os.path.join(self.out_dir, f"{self.prefix}-rank{rank:05d}.jsonl")

    @property
    def current_step(self):
        return self._step

    @property
    def current_micro_batch(self):
        return self._micro_batch

    # ---- the explicit API: step(), micro_batch(i), source_rank(r), record(...) ---------------

    def micro_batch(self, index):
        """Ends the micro-batch under way and starts micro-batch `index` of the current step.
        Also a context manager: `with recorder.micro_batch(i): ...` ends it on leaving."""
        self.end_micro_batch()
        self._micro_batch = int(index)
        return _Scope(self)

    def step(self, index=None):
        """Ends the micro-batch and the step under way (call it after optimizer.step()); the next
        step is `index`, by default the current one + 1, starting at micro-batch 0."""
        self.end_micro_batch()
        self._step = self._step + 1 if index is None else int(index)
        self._micro_batch = 0
        return _Scope(self)

    @contextmanager
    def record(self, step, micro_batch, rank=None):
        """`with recorder.record(step, micro_batch):` counts the block as that micro-batch."""
        self.end_micro_batch()
        self._step, self._micro_batch = int(step), int(micro_batch)
        with self.source_rank(rank):
            yield self
        self.end_micro_batch()

    @contextmanager
    def source_rank(self, rank):
        """Counts the router calls of the block as source rank `rank` (None: this process's rank)."""
        if rank is not None and not 0 <= rank < self.num_ranks:
            raise ValueError(f"source rank {rank} is not in [0, num_ranks = {self.num_ranks})")
        saved = self._rank_override
        self._rank_override = rank
        try:
            yield self
        finally:
            self._rank_override = saved

    @contextmanager
    def paused(self):
        """Router calls in the block are not counted (evaluation passes, say)."""
        saved = self.enabled
        self.enabled = False
        try:
            yield self
        finally:
            self.enabled = saved

    # ---- counting ----------------------------------------------------------------------------

    def _hook_for(self, row, site):
        def hook(module, args, output):
            if not self.enabled or self._closed:
                return None
            rank = self.rank if self._rank_override is None else self._rank_override
            kind, tensor = site.extract(module, args, output)
            if row not in self._checked:
                self._check_shape(site, kind, tensor)
                self._checked.add(row)
            live = self._live.get(rank)
            if live is None:
                rows = torch.zeros((len(self.sites), self.num_experts), dtype=torch.int64,
                                   device=tensor.device)
                live = self._live[rank] = [rows, set(), rows.unbind(0)]
            if row in live[1]:
                if self.on_repeat == "error":
                    raise RuntimeError(
                        f"{site.name} ran twice in step {self._step}, micro-batch "
                        f"{self._micro_batch} (rank {rank}); call micro_batch(i) between micro-batches")
                if self.on_repeat == "first":
                    if self.repeats_skipped == 0:
                        warnings.warn(
                            f"{site.name} ran again in step {self._step}, micro-batch "
                            f"{self._micro_batch}: repeated router calls are not counted (activation "
                            f"recomputation); call micro_batch(i) if these are new micro-batches",
                            stacklevel=2)
                    self.repeats_skipped += 1
                    return None
            live[1].add(row)
            # Integer tensors carry no gradient, so this needs no torch.no_grad().
            if kind == INDICES:
                count_into(live[2][row], tensor, self.num_experts,
                           use_bincount=live[0].device.type != "cuda")
            else:
                live[2][row].add_(tensor.detach().to(device=live[0].device, dtype=torch.int64))
            return None

        return hook

    def _check_shape(self, site, kind, tensor):
        if not torch.is_tensor(tensor):
            raise TypeError(f"{site.name}: the adapter read a {type(tensor).__name__}, not a tensor")
        if kind == INDICES:
            if tensor.dtype.is_floating_point or tensor.dtype == torch.bool or tensor.dim() == 0 \
                    or tensor.shape[-1] != site.top_k:
                raise TypeError(f"{site.name}: expected integer expert ids [..., top_k = {site.top_k}]"
                                f", got {tuple(tensor.shape)} {tensor.dtype}")
        elif kind == COUNTS:
            if tensor.shape != (site.num_experts,):
                raise TypeError(f"{site.name}: expected {site.num_experts} counts, got "
                                f"{tuple(tensor.shape)}")
        else:
            raise TypeError(f"{site.name}: unknown reading {kind!r}")

    # ---- boundaries, copies, files -------------------------------------------------------------

    def end_micro_batch(self):
        """Starts the host copy of the micro-batch under way and writes what has arrived."""
        if self._closed:
            raise RuntimeError("the recorder is closed")
        key = (self._step, self._micro_batch)
        for rank, (rows, _, _) in sorted(self._live.items()):
            last = self._last_key.get(rank)
            if last is not None and key <= last:
                raise ValueError(f"step {key[0]}, micro-batch {key[1]} of rank {rank} comes after "
                                 f"step {last[0]}, micro-batch {last[1]}: (step, micro-batch) must "
                                 f"increase, or the file would hold a micro-batch twice")
            self._last_key[rank] = key
            if rows.device.type == "cuda":
                host = self._pinned_pool.pop() if self._pinned_pool else torch.empty(
                    rows.shape, dtype=torch.int64, pin_memory=True)
                host.copy_(rows, non_blocking=True)
                event = torch.cuda.Event()
                event.record(torch.cuda.current_stream(rows.device))   # the stream of the copy
                self._pending.append(_Pending(key[0], key[1], rank, host, event, rows))
            elif rows.device.type == "cpu":
                self._pending.append(_Pending(key[0], key[1], rank, rows, None, None))
            else:
                self._pending.append(_Pending(key[0], key[1], rank, rows.cpu(), None, None))
        self._live = {}
        self._drain(block=False)

    def _drain(self, block):
        while self._pending:
            entry = self._pending[0]
            if entry.event is not None:
                if not block and not entry.event.query():
                    return
                entry.event.synchronize()
            self._pending.popleft()
            writer = self._writer(entry.rank)
            for layer, counts in zip(self.recorded_layer_ids, entry.host.tolist()):
                writer.write(entry.step, entry.micro_batch, layer, counts)
            if entry.event is not None:
                self._pinned_pool.append(entry.host)

    def _writer(self, rank):
        writer = self._writers.get(rank)
        if writer is None:
            writer = self._writers[rank] = CountsFileWriter(
                self.path_of(rank), num_experts=self.num_experts, top_k=self.top_k,
                num_ranks=self.num_ranks, layer_ids=self.layer_ids, rank=rank,
                provenance=self.provenance, licence=self.licence, overwrite=self.overwrite)
        return writer

    def close(self):
        """Ends the micro-batch under way, waits for the last copies, removes the hooks and moves
        the files into place. Returns the paths written."""
        if self._closed:
            return sorted(w.path for w in self._writers.values())
        try:
            self.end_micro_batch()
            self._drain(block=True)
        except BaseException:
            self.abort()
            raise
        self._remove_hooks()
        self._closed = True
        # Every file gets its chance: one refused rename does not leave the others temporary.
        errors = []
        for writer in self._writers.values():
            try:
                writer.close()
            except OSError as error:
                errors.append(error)
        if errors:
            raise errors[0]
        if self.repeats_skipped:
            warnings.warn(f"{self.repeats_skipped} repeated router calls were not counted")
        return sorted(w.path for w in self._writers.values())

    def abort(self):
        """Removes the hooks and drops the files being written."""
        self._remove_hooks()
        self._closed = True
        for writer in self._writers.values():
            writer.abort()
        self._pending.clear()
        self._live = {}

    def _remove_hooks(self):
        for handle in self._hooks:
            handle.remove()
        self._hooks = []

    def __enter__(self):
        return self

    def __exit__(self, kind, value, traceback):
        if kind is None:
            self.close()
        else:
            self.abort()
        return False


def _distributed():
    dist = torch.distributed
    return dist.is_available() and dist.is_initialized()
