#!/usr/bin/env python3
"""Measures what epsim_recorder adds to a forward pass of the tiny MoE model of tiny_moe.py on the CPU.

Each repetition times `--forwards` forward passes without the recorder, then the same passes with
it (every pass its own micro-batch, so the host copy and the writing of the lines are included), in
alternation so that a change in the machine's load hits both alike. Prints the median time per
forward of each, their ratio and the added time per router call.

    /usr/bin/python3 traces/record/measure_overhead.py
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from epsim_recorder import Recorder, TopKOutput  # noqa: E402
from tiny_moe import TinyMoELM, TinyRouter  # noqa: E402


def timed(model, inputs, recorder=None):
    start = time.perf_counter()
    with torch.no_grad():
        for i, x in enumerate(inputs):
            if recorder is not None:
                recorder.micro_batch(i)
            model(x)
        if recorder is not None:
            recorder.end_micro_batch()
    return (time.perf_counter() - start) / len(inputs)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--ffn", type=int, default=64)
    parser.add_argument("--experts", type=int, default=16)
    parser.add_argument("--top-k", type=int, default=2)
    parser.add_argument("--sequences", type=int, default=8)
    parser.add_argument("--seq", type=int, default=32)
    parser.add_argument("--forwards", type=int, default=20, help="per repetition")
    parser.add_argument("--repetitions", type=int, default=15)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = TinyMoELM(layers=args.layers, hidden=args.hidden, ffn=args.ffn,
                      num_experts=args.experts, top_k=args.top_k, seq=args.seq).eval()
    inputs = [torch.randint(0, 256, (args.sequences, args.seq)) for _ in range(args.forwards)]
    timed(model, inputs)  # warm-up
    without, with_recorder = [], []
    with tempfile.TemporaryDirectory() as out:
        for repetition in range(args.repetitions):
            without.append(timed(model, inputs))
            recorder = Recorder(model, os.path.join(out, str(repetition)),
                                adapter=TopKOutput(TinyRouter, index=1), provenance="overhead")
            with_recorder.append(timed(model, inputs, recorder))
            recorder.close()
    base, recorded = statistics.median(without), statistics.median(with_recorder)
    calls = args.layers
    print(f"tiny MoE: {args.layers} layers, hidden {args.hidden}, {args.experts} experts of "
          f"{args.ffn}, top-{args.top_k}, {args.sequences * args.seq} tokens per forward, "
          f"torch {torch.__version__}, {args.threads} thread(s)")
    print(f"median forward without recorder {base * 1e3:.3f} ms, with recorder "
          f"{recorded * 1e3:.3f} ms (median of {args.repetitions} x {args.forwards} forwards)")
    print(f"ratio {recorded / base:.3f}; added {(recorded - base) / calls * 1e6:.1f} us per router "
          f"call ({calls} router calls and one micro-batch boundary per forward)")


if __name__ == "__main__":
    main()
