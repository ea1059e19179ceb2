"""Record -> `epsim trace import counts-jsonl` -> `epsim trace show` and `epsim run`: the counts the
stand-in routers chose come out of the binary trace unchanged, and the replay loads each GPU with
the tokens of its experts. Needs the epsim binary (EPSIM_BINARY, set by CTest)."""

import csv
import os
import re
import subprocess
import tempfile
import unittest

import torch

import record_test_support as support
import stand_ins
from counts_validator import validate
from epsim_recorder import Recorder

EPSIM = os.environ.get("EPSIM_BINARY", "")
NUM_EXPERTS, TOP_K, RANKS, EP = 16, 2, 4, 4


def epsim_imports_counts_jsonl():
    if not EPSIM or not os.access(EPSIM, os.X_OK):
        return False
    usage = subprocess.run([EPSIM, "trace", "import", "--help"], capture_output=True, text=True)
    return "counts-jsonl" in usage.stdout + usage.stderr


def run(*args):
    result = subprocess.run([EPSIM, *args], capture_output=True, text=True)
    if result.returncode != 0:
        raise AssertionError(f"epsim {' '.join(args)} exited {result.returncode}:\n"
                             f"{result.stdout}{result.stderr}")
    return result.stdout


def parse_show(text):
    """{(step, micro_batch, layer id): [row of rank 0, row of rank 1, ...]} from `epsim trace show`."""
    records, current = {}, None
    for line in text.splitlines():
        head = re.match(r"record \d+: step (\d+), micro-batch (\d+), layer \d+ \(id (\d+)\)", line)
        if head:
            current = records.setdefault(tuple(int(g) for g in head.groups()), [])
            continue
        row = re.match(r"\s*rank (\d+):((?:\s+\d+)+)\s*$", line)
        if row and current is not None:
            assert int(row.group(1)) == len(current)
            current.append([int(c) for c in row.group(2).split()])
    return records


@unittest.skipUnless(epsim_imports_counts_jsonl(),
                     "no epsim binary with `trace import counts-jsonl` (set EPSIM_BINARY)")
class RoundTripTest(unittest.TestCase):
    def test_record_import_show_and_replay(self):
        torch.manual_seed(11)
        model = stand_ins.mixtral_v4(hidden=8, num_experts=NUM_EXPERTS, top_k=TOP_K, layers=2)
        routers = list(model.routers())
        expected = {}
        with tempfile.TemporaryDirectory() as tmp:
            counts_dir = os.path.join(tmp, "counts")
            recorder = Recorder(model, counts_dir, provenance="round-trip stand-in", num_ranks=RANKS)
            for step in range(2):
                for micro_batch in range(2):
                    recorder.micro_batch(micro_batch)
                    for rank in range(RANKS):
                        for router in routers:
                            router.chosen.clear()
                        with recorder.source_rank(rank):
                            model(torch.randn(3, 10 + 5 * rank, 8))
                        for layer, router in enumerate(routers):
                            expected.setdefault((step, micro_batch, layer), []).append(
                                support.direct_counts(router.chosen, NUM_EXPERTS))
                recorder.step()
            paths = recorder.close()
            self.assertEqual(len(paths), RANKS)
            validate(paths)

            trace = os.path.join(tmp, "recorded.eptrace")
            run("trace", "import", "counts-jsonl", *paths, "-o", trace)
            shown = run("trace", "show", trace)
            self.assertIn("provenance: round-trip stand-in", shown)
            self.assertEqual(parse_show(shown), expected)

            experiment = os.path.join(tmp, "replay.yaml")
            with open(experiment, "w") as f:
                f.write(f"kind: experiment\nname: round-trip\ntrace: {trace}\n"
                        f"model: {os.path.join(support.SOURCE_DIR, 'models', 'tiny-moe.yaml')}\n"
                        f"hardware: {os.path.join(support.SOURCE_DIR, 'models', 'h100-sxm-8.yaml')}\n"
                        f"ep_degree: {EP}\nplacement: contiguous\nbalancer:\n  name: static_ep\n"
                        f"output: {os.path.join(tmp, 'out')}\nseed: 1\n")
            run("run", experiment, "-o", os.path.join(tmp, "out"))
            with open(os.path.join(tmp, "out", "metrics.csv"), newline="") as f:
                rows = [r for r in csv.DictReader(f) if r["balancer"] == "static_ep"]
        self.assertEqual(len(rows), len(expected))
        per_gpu = NUM_EXPERTS // EP
        for row in rows:
            matrix = expected[(int(row["step"]), int(row["micro_batch"]), int(row["layer_id"]))]
            loads = [sum(matrix[r][e] for r in range(RANKS)) for e in range(NUM_EXPERTS)]
            gpu_loads = [sum(loads[g * per_gpu:(g + 1) * per_gpu]) for g in range(EP)]
            # Every token's top-k assignments land on the GPUs holding the chosen experts.
            self.assertEqual(int(row["tokens_total"]), sum(loads))
            self.assertEqual(int(row["token_max"]), max(gpu_loads))


SAMPLE_DIR = os.path.join(support.SOURCE_DIR, "traces", "samples", "recorded")
SAMPLE_COUNTS = [os.path.join(SAMPLE_DIR, f"counts-rank{r:05d}.jsonl") for r in range(4)]


class RecordedSampleTest(unittest.TestCase):
    def test_sample_counts_follow_the_format(self):
        records = validate(SAMPLE_COUNTS)
        # 300 steps x 1 micro-batch x 4 layers, 4 ranks each of 8 x 32 tokens x top-2.
        self.assertEqual(len(records), 1200)
        self.assertTrue(all(sum(row) == 512 for by_rank in records.values()
                            for row in by_rank.values()))

    @unittest.skipUnless(epsim_imports_counts_jsonl(),
                         "no epsim binary with `trace import counts-jsonl` (set EPSIM_BINARY)")
    def test_sample_trace_is_the_import_of_the_sample_counts(self):
        with tempfile.TemporaryDirectory() as tmp:
            trace = os.path.join(tmp, "sample.eptrace")
            run("trace", "import", "counts-jsonl", *SAMPLE_COUNTS, "-o", trace)
            with open(trace, "rb") as made, \
                    open(os.path.join(SAMPLE_DIR, "tiny-moe-16e-ep4.eptrace"), "rb") as shipped:
                self.assertTrue(made.read() == shipped.read(),
                                "traces/samples/recorded/tiny-moe-16e-ep4.eptrace is not what "
                                "`epsim trace import counts-jsonl` makes of the counts beside it")


if __name__ == "__main__":
    unittest.main()
