"""Each adapter on a stand-in of the module it reads: the routers found, their layer ids, E and K,
and recorded counts equal to the counts of the expert ids each stand-in router chose."""

import tempfile
import types
import unittest

import torch

import record_test_support as support
import stand_ins
from counts_validator import validate
from epsim_recorder import Recorder, TopKOutput, find_sites, layer_id_from_name


class AdapterTest(unittest.TestCase):
    def check(self, model, adapter, make_input, layer_ids, num_experts, top_k, names):
        sites = find_sites(model, adapter)
        self.assertEqual([s.layer_id for s in sites], layer_ids)
        self.assertEqual({(s.num_experts, s.top_k) for s in sites}, {(num_experts, top_k)})
        self.assertEqual({s.adapter for s in sites}, set(names))
        # "auto" finds the same routers as the adapter named.
        self.assertEqual([s.module for s in find_sites(model, "auto")], [s.module for s in sites])
        routers = list(model.routers())
        with tempfile.TemporaryDirectory() as out:
            recorder = Recorder(model, out, adapter=adapter, provenance="stand-in", num_ranks=2)
            expected = {}
            for micro_batch in range(2):
                recorder.micro_batch(micro_batch)
                for rank in range(2):
                    for router in routers:
                        router.chosen.clear()
                    with recorder.source_rank(rank):
                        model(make_input(3 + micro_batch + rank))
                    for layer, router in zip(layer_ids, routers):
                        expected[(0, micro_batch, layer, rank)] = support.direct_counts(
                            router.chosen, num_experts)
            paths = recorder.close()
            got = {}
            for path in paths:
                header, lines = support.read_lines(path)
                self.assertEqual((header["num_experts"], header["top_k"], header["layer_ids"]),
                                 (num_experts, top_k, layer_ids))
                got.update(lines)
            validate(paths)
        self.assertEqual(got, expected)
        self.assertTrue(all(sum(c) > 0 for c in got.values()))

    def hf_input(self, hidden):
        return lambda tokens: torch.randn(2, tokens, hidden)

    def test_hf_mixtral_v4_gate_logits(self):
        torch.manual_seed(2)
        self.check(stand_ins.mixtral_v4(hidden=8, num_experts=4, top_k=2, layers=2), "hf-mixtral",
                   self.hf_input(8), [0, 1], 4, 2, ["hf-mixtral"])

    def test_hf_mixtral_v5_topk_router(self):
        torch.manual_seed(3)
        model = stand_ins.mixtral_v5(hidden=8, num_experts=8, top_k=2, layers=3)
        self.assertEqual([s.name for s in find_sites(model, "hf-mixtral")],
                         [f"model.layers.{i}.block_sparse_moe.gate" for i in range(3)])
        self.check(model, "hf-mixtral", self.hf_input(8), [0, 1, 2], 8, 2, ["hf-mixtral"])

    def test_hf_qwen2_moe(self):
        torch.manual_seed(4)
        self.check(stand_ins.qwen2_moe_v4(hidden=8, num_experts=6, top_k=2, layers=2),
                   "hf-qwen2-moe", self.hf_input(8), [0, 1], 6, 2, ["hf-qwen2-moe"])

    def test_hf_olmoe(self):
        torch.manual_seed(5)
        self.check(stand_ins.olmoe_v4(hidden=8, num_experts=8, top_k=3, layers=2), "hf-olmoe",
                   self.hf_input(8), [0, 1], 8, 3, ["hf-olmoe"])

    def test_deepseek_v2_gate(self):
        torch.manual_seed(6)
        model = stand_ins.DeepseekForCausalLM(2, hidden=8, n_routed_experts=8, top_k=2, layers=3,
                                              first_dense=1)
        self.check(model, "deepseek-gate", self.hf_input(8), [1, 2], 8, 2, ["deepseek-gate"])

    def test_deepseek_v3_group_limited_gate(self):
        torch.manual_seed(7)
        model = stand_ins.DeepseekForCausalLM(3, hidden=8, n_routed_experts=16, top_k=4, layers=4,
                                              first_dense=2, n_group=4, topk_group=2)
        self.check(model, "deepseek-gate", self.hf_input(8), [2, 3], 16, 4, ["deepseek-gate"])

    def test_megatron_topk_router_routing_map(self):
        torch.manual_seed(8)
        model = stand_ins.GPTModel(hidden=8, num_experts=8, top_k=2, layers=2, offset=4)
        # [sequence, batch, hidden]; layer_number is global and 1-based: stage offset 4 -> 5, 6.
        self.check(model, "megatron-topk-router", lambda t: torch.randn(t, 2, 8), [5, 6], 8, 2,
                   ["megatron-topk-router"])

    def test_megatron_topk_router_indices(self):
        torch.manual_seed(9)
        model = stand_ins.GPTModel(hidden=8, num_experts=4, top_k=2, layers=2, returns_map=False)
        self.check(model, "megatron-topk-router", lambda t: torch.randn(t, 2, 8), [1, 2], 4, 2,
                   ["megatron-topk-router"])

    def test_megatron_token_dropping_is_refused(self):
        model = stand_ins.GPTModel(capacity_factor=1.25)
        with self.assertRaisesRegex(ValueError, "moe_expert_capacity_factor = 1.25 drops tokens"):
            find_sites(model, "megatron-topk-router")

    def test_generic_topk_output(self):
        torch.manual_seed(10)
        model = stand_ins.mixtral_v5(hidden=8, num_experts=4, top_k=2, layers=2)
        adapter = TopKOutput(stand_ins.MixtralTopKRouter, index=2,
                             layer_id=lambda name, module: 10 + layer_id_from_name(name))
        self.check(model, adapter, self.hf_input(8), [10, 11], 4, 2, ["topk-output"])

    def test_no_router_found(self):
        with self.assertRaisesRegex(ValueError, "no router found in Linear"):
            Recorder(torch.nn.Linear(2, 2), "unused", provenance="x")

    def test_routers_must_agree_on_experts(self):
        model = torch.nn.Module()
        model.layers = torch.nn.ModuleList([stand_ins.MixtralSparseMoeBlock(4, 4, 2),
                                            stand_ins.MixtralSparseMoeBlock(4, 8, 2)])
        with self.assertRaisesRegex(ValueError, "routers disagree on"):
            Recorder(model, "unused", provenance="x")

    def test_wrong_output_shape_is_named(self):
        model = stand_ins.mixtral_v5(hidden=8, num_experts=4, top_k=2, layers=1)
        adapter = TopKOutput(stand_ins.MixtralTopKRouter, index=1)   # the weights, not the ids
        with tempfile.TemporaryDirectory() as out:
            recorder = Recorder(model, out, adapter=adapter, provenance="x")
            with self.assertRaisesRegex(TypeError, "expected integer expert ids"):
                model(torch.randn(1, 3, 8))
            recorder.abort()

    def test_bf16_router_logits_choose_as_the_block_does(self):
        # transformers 4.x takes the softmax in float32; in bfloat16 its rounding ties and reorders
        # probabilities, and 7 of these 256 tokens would get another set of 8 experts.
        torch.manual_seed(11)
        model = stand_ins.mixtral_v4(hidden=16, num_experts=64, top_k=8, layers=1).to(torch.bfloat16)
        router = next(model.routers())
        with tempfile.TemporaryDirectory() as out:
            recorder = Recorder(model, out, provenance="stand-in")
            model(torch.randn(1, 256, 16).to(torch.bfloat16))
            _, lines = support.read_lines(recorder.close()[0])
        self.assertEqual(lines, {(0, 0, 0, 0): support.direct_counts(router.chosen, 64)})

    def test_tuple_output_too_short_for_the_index_is_named(self):
        model = stand_ins.mixtral_v5(hidden=8, num_experts=4, top_k=2, layers=1)
        adapter = TopKOutput(stand_ins.MixtralTopKRouter, index=3)   # the router returns 3 items
        with tempfile.TemporaryDirectory() as out:
            recorder = Recorder(model, out, adapter=adapter, provenance="x")
            with self.assertRaisesRegex(TypeError, "expected the router to return a tuple with at "
                                                   "least 4 items"):
                model(torch.randn(1, 3, 8))
            recorder.abort()

    def test_layer_id_from_name(self):
        self.assertEqual(layer_id_from_name("model.layers.17.mlp.gate"), 17)
        # The innermost index: a router of decoder layer 7 inside an encoder's block 1.
        self.assertEqual(layer_id_from_name("encoder.blocks.1.decoder.layers.7.mlp.gate"), 7)
        self.assertIsNone(layer_id_from_name("model.layers.12x.gate"))
        self.assertEqual(layer_id_from_name("decoder.layers.3.mlp.router"), 3)
        self.assertEqual(layer_id_from_name("transformer.h.2.moe"), 2)
        self.assertIsNone(layer_id_from_name("model.gate"))
        with self.assertRaisesRegex(ValueError, "cannot tell which layer"):
            m = torch.nn.Module()
            m.moe = stand_ins.MixtralSparseMoeBlock(4, 4, 2)
            find_sites(m, "hf-mixtral")
        m = torch.nn.Module()
        m.moe = stand_ins.MixtralSparseMoeBlock(4, 4, 2)
        m.moe.layer_idx = 7
        self.assertEqual(find_sites(m, "hf-mixtral")[0].layer_id, 7)
        m.moe.layer_idx = True   # a flag, not a layer number
        with self.assertRaisesRegex(ValueError, "cannot tell which layer"):
            find_sites(m, "hf-mixtral")


if __name__ == "__main__":
    unittest.main()
