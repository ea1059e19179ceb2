"""epsim_recorder.Recorder: counts, the step / micro-batch / rank API, repeats, and safe files."""

import glob
import os
import tempfile
import unittest
import warnings

import torch

import record_test_support as support
import stand_ins
from counts_validator import validate
from epsim_recorder import CountsFileWriter, Recorder, count_into


def hand_checked_model():
    """One Mixtral-style layer, 4 experts, top-2, whose gate is the identity: a token's router
    logits are the token itself, so its two largest coordinates are its experts."""
    torch.manual_seed(0)
    model = stand_ins.mixtral_v4(hidden=4, num_experts=4, top_k=2, layers=1)
    layer = model.model.layers[0]
    with torch.no_grad():
        layer.mix.weight.zero_()
        layer.block_sparse_moe.gate.weight.copy_(torch.eye(4))
    return model


A = [3.0, 2.0, 0.0, 0.0]   # experts 0 and 1
B = [0.0, 0.0, 2.0, 3.0]   # experts 3 and 2
C = [2.0, 0.0, 3.0, 0.0]   # experts 2 and 0


class RecorderCountsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.out = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def test_hand_checked_counts(self):
        model = hand_checked_model()
        recorder = Recorder(model, self.out, provenance="hand-checked stand-in")
        with recorder.record(step=0, micro_batch=0):
            model(torch.tensor([[A, A, B, C]]))
        with recorder.record(step=0, micro_batch=1):
            model(torch.tensor([[B, B]]))
        paths = recorder.close()
        self.assertEqual(paths, [os.path.join(self.out, "counts-rank00000.jsonl")])
        header, lines = support.read_lines(paths[0])
        self.assertEqual(header, {"format": "epsim-counts-jsonl", "version": 1, "num_experts": 4,
                                  "top_k": 2, "num_ranks": 1, "layer_ids": [0], "rank": 0,
                                  "provenance": "hand-checked stand-in"})
        # A, A, B, C: expert 0 in A, A, C; expert 1 in A, A; expert 2 in B, C; expert 3 in B.
        self.assertEqual(lines, {(0, 0, 0, 0): [3, 2, 2, 1], (0, 1, 0, 0): [0, 0, 2, 2]})
        validate(paths)

    def test_counts_equal_router_outputs_per_rank_and_micro_batch(self):
        torch.manual_seed(1)
        model = stand_ins.mixtral_v4(hidden=8, num_experts=4, top_k=2, layers=3)
        routers = list(model.routers())
        recorder = Recorder(model, self.out, provenance="random stand-in", num_ranks=2)
        expected = {}
        for step in range(2):
            for micro_batch in range(3):
                recorder.micro_batch(micro_batch)
                for rank in range(2):
                    for router in routers:
                        router.chosen.clear()
                    with recorder.source_rank(rank):
                        model(torch.randn(2, 5 + rank, 8))
                    for layer, router in enumerate(routers):
                        expected[(step, micro_batch, layer, rank)] = support.direct_counts(
                            router.chosen, 4)
            recorder.step()
        paths = recorder.close()
        self.assertEqual([os.path.basename(p) for p in paths],
                         ["counts-rank00000.jsonl", "counts-rank00001.jsonl"])
        got = {}
        for path in paths:
            header, lines = support.read_lines(path)
            self.assertEqual(header["num_ranks"], 2)
            self.assertEqual(header["layer_ids"], [0, 1, 2])
            got.update(lines)
        self.assertEqual(got, expected)
        # Each rank's row holds its tokens x top_k: 2 x 5 tokens on rank 0, 2 x 6 on rank 1.
        self.assertEqual(sum(got[(1, 2, 0, 0)]), 20)
        self.assertEqual(sum(got[(1, 2, 0, 1)]), 24)
        records = validate(paths)
        self.assertEqual(len(records), 2 * 3 * 3)

    def test_micro_batch_scope_and_explicit_step(self):
        model = hand_checked_model()
        recorder = Recorder(model, self.out, provenance="x")
        with recorder.micro_batch(0):
            model(torch.tensor([[A]]))
        recorder.micro_batch(1)
        model(torch.tensor([[B]]))
        recorder.step(5)            # the next step is 5
        model(torch.tensor([[C]]))
        recorder.step()             # ... then 6
        model(torch.tensor([[A, B]]))
        _, lines = support.read_lines(recorder.close()[0])
        self.assertEqual(lines, {(0, 0, 0, 0): [1, 1, 0, 0], (0, 1, 0, 0): [0, 0, 1, 1],
                                 (5, 0, 0, 0): [1, 0, 1, 0], (6, 0, 0, 0): [1, 1, 1, 1]})

    def test_a_micro_batch_cannot_come_twice(self):
        model = hand_checked_model()
        recorder = Recorder(model, self.out, provenance="x")
        with recorder.record(step=1, micro_batch=0):
            model(torch.tensor([[A]]))
        with self.assertRaisesRegex(ValueError, "must increase"):
            with recorder.record(step=0, micro_batch=3):
                model(torch.tensor([[A]]))
        recorder.abort()
        self.assertEqual(os.listdir(self.out), [])

    def test_the_same_micro_batch_cannot_end_twice(self):
        # Ending step 0, micro-batch 2 again would write its line twice: refused as out of order.
        model = hand_checked_model()
        recorder = Recorder(model, self.out, provenance="x")
        with recorder.record(step=0, micro_batch=2):
            model(torch.tensor([[A]]))
        with self.assertRaisesRegex(ValueError, "step 0, micro-batch 2 of rank 0 comes after step 0, "
                                                "micro-batch 2: \\(step, micro-batch\\) must increase"):
            with recorder.record(step=0, micro_batch=2):
                model(torch.tensor([[B]]))
        recorder.abort()
        self.assertEqual(os.listdir(self.out), [])

    def test_ranks_out_of_range_are_refused(self):
        model = hand_checked_model()
        with self.assertRaisesRegex(ValueError, r"rank 2 is not in \[0, num_ranks = 2\)"):
            Recorder(model, self.out, provenance="x", rank=2, num_ranks=2)
        recorder = Recorder(model, self.out, provenance="x", num_ranks=2)
        with self.assertRaisesRegex(ValueError, r"source rank 2 is not in \[0, num_ranks = 2\)"):
            with recorder.source_rank(2):
                pass
        recorder.abort()
        self.assertEqual(os.listdir(self.out), [])

    def test_record_counts_the_block_as_the_rank_given(self):
        model = hand_checked_model()
        recorder = Recorder(model, self.out, provenance="x", num_ranks=2)
        with recorder.record(step=3, micro_batch=1, rank=1):
            model(torch.tensor([[A, B]]))
        paths = recorder.close()
        self.assertEqual([os.path.basename(p) for p in paths], ["counts-rank00001.jsonl"])
        _, lines = support.read_lines(paths[0])
        self.assertEqual(lines, {(3, 1, 0, 1): [1, 1, 1, 1]})

    def test_repeats_are_named_when_first_skipped_and_counted_at_close(self):
        model = hand_checked_model()
        recorder = Recorder(model, self.out, provenance="x")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model(torch.tensor([[A]]))
            model(torch.tensor([[B]]))
            self.assertEqual(len(caught), 1)
            self.assertIn("ran again in step 0, micro-batch 0: repeated router calls are not counted",
                          str(caught[0].message))
            model(torch.tensor([[C]]))   # a second repeat: no second warning now
            self.assertEqual(len(caught), 1)
            recorder.close()
        self.assertEqual([str(w.message) for w in caught[1:]], ["2 repeated router calls were not counted"])

    def test_repeated_router_calls(self):
        for policy, expected in (("first", [1, 1, 0, 0]), ("sum", [1, 1, 1, 1])):
            with self.subTest(policy=policy), tempfile.TemporaryDirectory() as out:
                model = hand_checked_model()
                recorder = Recorder(model, out, provenance="x", on_repeat=policy)
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    model(torch.tensor([[A]]))
                    model(torch.tensor([[B]]))   # the same micro-batch: recomputation, say
                    _, lines = support.read_lines(recorder.close()[0])
                self.assertEqual(lines, {(0, 0, 0, 0): expected})
                self.assertEqual(recorder.repeats_skipped, 1 if policy == "first" else 0)
                self.assertEqual(bool(caught), policy == "first")
        model = hand_checked_model()
        recorder = Recorder(model, self.out, provenance="x", on_repeat="error")
        model(torch.tensor([[A]]))
        with self.assertRaisesRegex(RuntimeError, "ran twice in step 0, micro-batch 0"):
            model(torch.tensor([[A]]))
        recorder.abort()

    def test_paused_calls_are_not_counted(self):
        model = hand_checked_model()
        recorder = Recorder(model, self.out, provenance="x")
        with recorder.paused():
            model(torch.tensor([[A, A]]))
        model(torch.tensor([[B]]))
        _, lines = support.read_lines(recorder.close()[0])
        self.assertEqual(lines, {(0, 0, 0, 0): [0, 0, 1, 1]})

    def test_hooks_are_removed_on_close(self):
        model = hand_checked_model()
        recorder = Recorder(model, self.out, provenance="x")
        model(torch.tensor([[A]]))
        recorder.close()
        gate = model.model.layers[0].block_sparse_moe.gate
        self.assertEqual(len(gate._forward_hooks), 0)
        model(torch.tensor([[A]]))   # no error, nothing counted

    def test_both_counting_paths_agree(self):
        ids = torch.tensor([[0, 3], [3, 1], [0, 3], [2, 3]])
        for use_bincount in (True, False):
            row = torch.zeros(5, dtype=torch.int64)
            count_into(row, ids, 5, use_bincount)
            count_into(row, ids[:1], 5, use_bincount)
            self.assertEqual(row.tolist(), [3, 1, 1, 5, 0])
        with self.assertRaisesRegex(ValueError, "expert id is >= num_experts = 3"):
            count_into(torch.zeros(3, dtype=torch.int64), ids, 3, True)


class RecorderFilesTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.out = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def test_existing_file_is_refused_unless_overwrite(self):
        path = os.path.join(self.out, "counts-rank00000.jsonl")
        with open(path, "w") as f:
            f.write("mine\n")
        with self.assertRaises(FileExistsError):
            Recorder(hand_checked_model(), self.out, provenance="x")
        with open(path) as f:
            self.assertEqual(f.read(), "mine\n")
        model = hand_checked_model()
        recorder = Recorder(model, self.out, provenance="x", overwrite=True)
        model(torch.tensor([[A]]))
        recorder.close()
        validate([path])

    def test_file_appearing_during_the_run_is_not_replaced(self):
        model = hand_checked_model()
        recorder = Recorder(model, self.out, provenance="x")
        model(torch.tensor([[A]]))
        recorder.micro_batch(1)   # the first line is written, under a temporary name
        path = os.path.join(self.out, "counts-rank00000.jsonl")
        self.assertFalse(os.path.exists(path))
        with open(path, "w") as f:
            f.write("mine\n")
        with self.assertRaisesRegex(FileExistsError, "appeared while the run was recording"):
            recorder.close()
        with open(path) as f:
            self.assertEqual(f.read(), "mine\n")
        self.assertEqual(os.listdir(self.out), ["counts-rank00000.jsonl"])

    def test_every_rank_file_is_checked_before_recording(self):
        # Ranks 0 and 1 recorded in one process (rank not given, no torch.distributed): rank 1's file
        # is the user's, refused at once, not after a run.
        path = os.path.join(self.out, "counts-rank00001.jsonl")
        with open(path, "w") as f:
            f.write("mine\n")
        with self.assertRaisesRegex(FileExistsError, "counts-rank00001.jsonl: already exists"):
            Recorder(hand_checked_model(), self.out, provenance="x", num_ranks=2)
        with open(path) as f:
            self.assertEqual(f.read(), "mine\n")

    def test_one_refused_file_does_not_keep_the_others_back(self):
        model = hand_checked_model()
        recorder = Recorder(model, self.out, provenance="x", num_ranks=2)
        for rank in range(2):
            with recorder.source_rank(rank):
                model(torch.tensor([[A]]))
        recorder.micro_batch(1)
        with open(os.path.join(self.out, "counts-rank00000.jsonl"), "w") as f:
            f.write("mine\n")
        with self.assertRaisesRegex(FileExistsError, "counts-rank00000.jsonl: appeared"):
            recorder.close()
        self.assertEqual(sorted(os.listdir(self.out)),
                         ["counts-rank00000.jsonl", "counts-rank00001.jsonl"])
        _, lines = support.read_lines(os.path.join(self.out, "counts-rank00001.jsonl"))
        self.assertEqual(lines, {(0, 0, 0, 1): [1, 1, 0, 0]})

    def test_error_inside_with_block_leaves_nothing(self):
        model = hand_checked_model()
        with self.assertRaises(KeyError):
            with Recorder(model, os.path.join(self.out, "sub"), provenance="x") as recorder:
                model(torch.tensor([[A]]))
                recorder.micro_batch(1)
                raise KeyError("stop")
        self.assertEqual(glob.glob(os.path.join(self.out, "sub", "*")), [])
        self.assertEqual(glob.glob(os.path.join(self.out, "sub", ".*")), [])

    def test_writer_refuses_counts_not_a_multiple_of_top_k(self):
        writer = CountsFileWriter(os.path.join(self.out, "c.jsonl"), num_experts=3, top_k=2,
                                  num_ranks=1, layer_ids=[4], rank=0, provenance="x")
        writer.write(0, 0, 4, [1, 1, 0])
        with self.assertRaisesRegex(ValueError, "sum to 3, not a multiple of top_k = 2"):
            writer.write(0, 1, 4, [1, 1, 1])
        with self.assertRaisesRegex(ValueError, "layer 5 is not one of"):
            writer.write(0, 1, 5, [1, 1, 0])
        writer.abort()
        self.assertEqual(os.listdir(self.out), [])

    def test_writer_refuses_headers_and_counts_out_of_range(self):
        def writer(**changes):
            fields = dict(num_experts=3, top_k=2, num_ranks=2, layer_ids=[4, 6], rank=1, provenance="x")
            fields.update(changes)
            return CountsFileWriter(os.path.join(self.out, "c.jsonl"), **fields)
        for changes, message in (
                (dict(num_experts=0, top_k=1), r"num_experts must be in \[1, 65536\], got 0"),
                (dict(top_k=4), r"top_k must be in \[1, 3\], got 4"),
                (dict(num_ranks=2, rank=2), r"rank must be in \[0, 1\], got 2"),
                (dict(layer_ids=[4, 6, 4]), r"layer_ids must be distinct, got \[4, 6, 4\]")):
            with self.subTest(changes=changes), self.assertRaisesRegex(ValueError, message):
                writer(**changes)
        self.assertEqual(os.listdir(self.out), [])
        w = writer()
        # Sums that are multiples of top_k, so that only the count itself is wrong.
        for counts in ([-1, 1, 2], [True, 1, 0], [1.0, 1, 0]):
            with self.subTest(counts=counts), \
                    self.assertRaisesRegex(ValueError, "counts must be non-negative integers"):
                w.write(0, 0, 4, counts)
        w.abort()
        self.assertEqual(os.listdir(self.out), [])

    def test_writer_refuses_a_dangling_link_at_its_path(self):
        # A symbolic link whose target does not exist is still something the user has at that name.
        path = os.path.join(self.out, "c.jsonl")
        os.symlink(os.path.join(self.out, "nowhere"), path)
        with self.assertRaisesRegex(FileExistsError, "c.jsonl: already exists"):
            CountsFileWriter(path, num_experts=3, top_k=2, num_ranks=1, layer_ids=[0], rank=0,
                             provenance="x")
        self.assertEqual(os.listdir(self.out), ["c.jsonl"])
        self.assertTrue(os.path.islink(path))

    def test_header_needs_provenance(self):
        with self.assertRaisesRegex(ValueError, "provenance must be a non-empty string"):
            CountsFileWriter(os.path.join(self.out, "c.jsonl"), num_experts=3, top_k=2,
                             num_ranks=1, layer_ids=[0], rank=0, provenance=" ")

    def test_bad_header_is_refused_before_recording(self):
        with self.assertRaisesRegex(ValueError, "provenance must be a non-empty string"):
            Recorder(hand_checked_model(), self.out, provenance="")
        with self.assertRaisesRegex(ValueError, "licence, when given, must be a non-empty string"):
            Recorder(hand_checked_model(), self.out, provenance="p", licence="")
        self.assertEqual(os.listdir(self.out), [])

    def test_licence_and_full_layer_list_in_the_header(self):
        model = hand_checked_model()
        recorder = Recorder(model, self.out, provenance="p", licence="CC-BY-4.0",
                            layer_ids=[0, 1, 2], rank=1, num_ranks=2)
        model(torch.tensor([[A]]))
        path = recorder.close()[0]
        self.assertEqual(os.path.basename(path), "counts-rank00001.jsonl")
        header, lines = support.read_lines(path)
        self.assertEqual(header["licence"], "CC-BY-4.0")
        self.assertEqual(header["layer_ids"], [0, 1, 2])
        self.assertEqual(lines, {(0, 0, 0, 1): [1, 1, 0, 0]})


def _distributed_worker(rank, init_file, out):
    torch.distributed.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                                         world_size=2)
    try:
        model = hand_checked_model()
        recorder = Recorder(model, out, provenance="two processes")
        for micro_batch in range(2):
            with recorder.micro_batch(micro_batch):
                model(torch.tensor([[A] * (rank + 1) + [C]]))
        recorder.close()
    finally:
        torch.distributed.destroy_process_group()


class RecorderDistributedTest(unittest.TestCase):
    @unittest.skipUnless(torch.distributed.is_available(), "torch.distributed is not built in")
    def test_rank_and_world_size_from_torch_distributed(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "counts")
            torch.multiprocessing.spawn(_distributed_worker, args=(os.path.join(tmp, "init"), out),
                                        nprocs=2, join=True)
            paths = sorted(glob.glob(os.path.join(out, "*.jsonl")))
            records = validate(paths)
            self.assertEqual(set(records), {(0, 0, 0), (0, 1, 0)})
            self.assertEqual(records[(0, 1, 0)], {0: [2, 1, 1, 0], 1: [3, 2, 1, 0]})
            for rank, path in enumerate(paths):
                header, _ = support.read_lines(path)
                self.assertEqual((header["rank"], header["num_ranks"]), (rank, 2))


if __name__ == "__main__":
    unittest.main()
