#!/usr/bin/env python3
"""Trains the tiny byte-level MoE language model of tiny_moe.py on CPU with epsim_recorder on, as
`--ranks` simulated data-parallel ranks: every step's batch is split into one slice per source rank,
each rank's forward and backward run in turn (gradients averaged, as an all-reduce would), and the
recorder writes one epsim-counts-jsonl file per rank into --out.

    /usr/bin/python3 traces/record/train_tiny_moe.py --out traces/samples/recorded
"""

import argparse
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from epsim_recorder import Recorder, TopKOutput  # noqa: E402
from tiny_moe import TinyMoELM, TinyRouter, generate_corpus  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="folder for counts-rankNNNNN.jsonl")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--micro-batches", type=int, default=1, help="per step (gradient accumulation)")
    parser.add_argument("--ranks", type=int, default=4, help="simulated data-parallel source ranks")
    parser.add_argument("--sequences-per-rank", type=int, default=8, help="per micro-batch")
    parser.add_argument("--seq", type=int, default=32, help="bytes per sequence")
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--ffn", type=int, default=64, help="hidden size of each expert")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--experts", type=int, default=16)
    parser.add_argument("--top-k", type=int, default=2)
    parser.add_argument("--aux-loss", type=float, default=0.01, help="load-balancing loss weight")
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch CPU threads (1: the same bytes on every run on one machine)")
    parser.add_argument("--force", action="store_true", help="replace existing count files")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    corpus = torch.tensor(list(generate_corpus(1 << 20, args.seed)), dtype=torch.long)
    model = TinyMoELM(layers=args.layers, hidden=args.hidden, ffn=args.ffn, num_experts=args.experts,
                      top_k=args.top_k, seq=args.seq)
    optimiser = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    batches = torch.Generator().manual_seed(args.seed + 1)

    command = " ".join(["python3", "traces/record/train_tiny_moe.py"] + sys.argv[1:])
    provenance = (f"tiny byte-level MoE LM ({args.layers} layers, hidden {args.hidden}, "
                  f"{args.experts} experts of {args.ffn}, top-{args.top_k}) trained {args.steps} steps on CPU from seed {args.seed} on a "
                  f"generated corpus (no third-party text or weights), {args.ranks} simulated "
                  f"data-parallel ranks x {args.sequences_per_rank} sequences of {args.seq} bytes per "
                  f"micro-batch; recorded by epsim_recorder; command: {command}")
    recorder = Recorder(model, args.out, adapter=TopKOutput(TinyRouter, index=1),
                        provenance=provenance, num_ranks=args.ranks, overwrite=args.force)
    tokens_per_slice = args.sequences_per_rank * args.seq
    start = time.monotonic()
    first_loss = None
    try:
        for step in range(args.steps):
            total = 0.0
            for micro_batch in range(args.micro_batches):
                recorder.micro_batch(micro_batch)
                for rank in range(args.ranks):
                    offsets = torch.randint(0, corpus.numel() - args.seq - 1,
                                            (args.sequences_per_rank,), generator=batches)
                    windows = torch.stack([corpus[o: o + args.seq + 1] for o in offsets.tolist()])
                    with recorder.source_rank(rank):
                        logits = model(windows[:, :-1])
                    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                           windows[:, 1:].reshape(-1))
                    scale = args.ranks * args.micro_batches
                    ((loss + args.aux_loss * model.aux_loss()) / scale).backward()
                    total += loss.item() / scale
            optimiser.step()
            optimiser.zero_grad(set_to_none=True)
            recorder.step()
            first_loss = total if first_loss is None else first_loss
            if step % 50 == 0 or step == args.steps - 1:
                print(f"step {step:4d}  loss {total:.3f} nats/byte  "
                      f"({time.monotonic() - start:.0f} s)", flush=True)
        paths = recorder.close()
    except BaseException:
        recorder.abort()
        raise
    print(f"loss {first_loss:.3f} -> {total:.3f} nats/byte over {args.steps} steps, "
          f"{tokens_per_slice} tokens per rank per micro-batch, {time.monotonic() - start:.0f} s")
    for path in paths:
        print(f"wrote {path} ({os.path.getsize(path)} bytes)")


if __name__ == "__main__":
    main()
