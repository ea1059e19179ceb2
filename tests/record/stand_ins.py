"""Tiny stand-ins with the module structure, class names, attributes and forward outputs of the
routers epsim_recorder's adapters read (transformers and megatron are not needed to test them):

- Hugging Face transformers 4.x MixtralSparseMoeBlock / Qwen2MoeSparseMoeBlock / OlmoeSparseMoeBlock:
  `gate` is an nn.Linear, the block has `num_experts` and `top_k`, chooses by softmax (float32) +
  topk and returns (hidden_states, router_logits);
- transformers 5.x: `gate` is a *TopKRouter (`weight`, `num_experts`, `top_k`) returning
  (router_logits, router_scores, router_indices);
- DeepSeek-V2 MoEGate (softmax, greedy top-k, returns (topk_idx, topk_weight, aux_loss)) and
  DeepSeek-V3 MoEGate (sigmoid + e_score_correction_bias, group-limited, returns (topk_idx, topk_weight));
- Megatron-core TopKRouter (`config.num_moe_experts`, `topk`, `layer_number`, input [seq, batch,
  hidden]) returning (probs, routing_map) with a boolean [tokens, experts] map, or in older releases
  (scores, indices).

Every router keeps the expert ids it chose in `chosen` (a list, one tensor per call), so tests can
count them directly and compare with what the recorder wrote.
"""

import types

import torch
import torch.nn as nn
import torch.nn.functional as F


def _experts(hidden, num_experts):
    return nn.ModuleList(nn.Linear(hidden, hidden, bias=False) for _ in range(num_experts))


def _mix(tokens, experts, expert_ids, weights):
    out = torch.zeros_like(tokens)
    for e, expert in enumerate(experts):
        token_idx, slot = torch.where(expert_ids == e)
        if token_idx.numel():
            out.index_add_(0, token_idx, expert(tokens[token_idx]) * weights[token_idx, slot, None])
    return out


class _HFBlockV4(nn.Module):
    """transformers 4.x sparse MoE block (Mixtral, Qwen2-MoE and OLMoE share this routing)."""

    def __init__(self, hidden, num_experts, top_k):
        super().__init__()
        self.hidden_dim = hidden
        self.num_experts = num_experts
        self.top_k = top_k
        self.norm_topk_prob = True
        self.gate = nn.Linear(hidden, num_experts, bias=False)
        self.experts = _experts(hidden, num_experts)
        self.chosen = []

    def forward(self, hidden_states):
        batch, seq, hidden = hidden_states.shape
        tokens = hidden_states.view(-1, hidden)
        router_logits = self.gate(tokens)
        routing_weights = F.softmax(router_logits, dim=1, dtype=torch.float)
        routing_weights, selected_experts = torch.topk(routing_weights, self.top_k, dim=-1)
        routing_weights /= routing_weights.sum(dim=-1, keepdim=True)
        self.chosen.append(selected_experts.clone())
        out = _mix(tokens, self.experts, selected_experts, routing_weights.to(tokens.dtype))
        return out.view(batch, seq, hidden), router_logits


class MixtralSparseMoeBlock(_HFBlockV4):
    pass


class Qwen2MoeSparseMoeBlock(_HFBlockV4):
    def __init__(self, hidden, num_experts, top_k):
        super().__init__(hidden, num_experts, top_k)
        self.shared_expert = nn.Linear(hidden, hidden, bias=False)
        self.shared_expert_gate = nn.Linear(hidden, 1, bias=False)

    def forward(self, hidden_states):
        out, router_logits = super().forward(hidden_states)
        shared = torch.sigmoid(self.shared_expert_gate(hidden_states)) * self.shared_expert(hidden_states)
        return out + shared, router_logits


class OlmoeSparseMoeBlock(_HFBlockV4):
    pass


class _TopKRouterV5(nn.Module):
    """transformers 5.x MixtralTopKRouter / Qwen2MoeTopKRouter / OlmoeTopKRouter."""

    def __init__(self, hidden, num_experts, top_k):
        super().__init__()
        self.top_k = top_k
        self.num_experts = num_experts
        self.hidden_dim = hidden
        self.weight = nn.Parameter(torch.randn(num_experts, hidden))
        self.chosen = []

    def forward(self, hidden_states):
        hidden_states = hidden_states.reshape(-1, self.hidden_dim)
        router_logits = F.linear(hidden_states, self.weight)
        router_probs = F.softmax(router_logits.float(), dim=-1)
        router_top_value, router_indices = torch.topk(router_probs, self.top_k, dim=-1)
        router_top_value /= router_top_value.sum(dim=-1, keepdim=True)
        self.chosen.append(router_indices.clone())
        return router_logits, router_top_value, router_indices


class MixtralTopKRouter(_TopKRouterV5):
    pass


class _HFBlockV5(nn.Module):
    def __init__(self, hidden, num_experts, top_k):
        super().__init__()
        self.top_k = top_k
        self.gate = MixtralTopKRouter(hidden, num_experts, top_k)
        self.experts = _experts(hidden, num_experts)

    def forward(self, hidden_states):
        batch, seq, hidden = hidden_states.shape
        tokens = hidden_states.view(-1, hidden)
        _, top_k_weights, top_k_index = self.gate(tokens)
        return _mix(tokens, self.experts, top_k_index, top_k_weights).view(batch, seq, hidden)


_HFBlockV5.__name__ = "MixtralSparseMoeBlock"   # the v5 block keeps the v4 class name


class HFDecoderLayer(nn.Module):
    def __init__(self, block, attribute, hidden):
        super().__init__()
        self.mix = nn.Linear(hidden, hidden, bias=False)
        setattr(self, attribute, block)
        self._attribute = attribute

    def forward(self, x):
        out = getattr(self, self._attribute)(x + self.mix(x))
        return x + (out[0] if isinstance(out, tuple) else out)


class HFCausalLM(nn.Module):
    """model.layers.N.<attribute>, as in MixtralForCausalLM (block_sparse_moe) and
    Qwen2MoeForCausalLM / OlmoeForCausalLM (mlp)."""

    def __init__(self, blocks, attribute, hidden):
        super().__init__()
        self.model = nn.Module()
        self.model.layers = nn.ModuleList(HFDecoderLayer(b, attribute, hidden) for b in blocks)

    def forward(self, x):
        for layer in self.model.layers:
            x = layer(x)
        return x

    def routers(self):
        for layer in self.model.layers:
            block = getattr(layer, layer._attribute)
            yield block.gate if hasattr(block.gate, "chosen") else block


def mixtral_v4(hidden=8, num_experts=4, top_k=2, layers=2):
    return HFCausalLM([MixtralSparseMoeBlock(hidden, num_experts, top_k) for _ in range(layers)],
                      "block_sparse_moe", hidden)


def mixtral_v5(hidden=8, num_experts=4, top_k=2, layers=2):
    return HFCausalLM([_HFBlockV5(hidden, num_experts, top_k) for _ in range(layers)],
                      "block_sparse_moe", hidden)


def qwen2_moe_v4(hidden=8, num_experts=6, top_k=2, layers=2):
    return HFCausalLM([Qwen2MoeSparseMoeBlock(hidden, num_experts, top_k) for _ in range(layers)],
                      "mlp", hidden)


def olmoe_v4(hidden=8, num_experts=8, top_k=3, layers=2):
    return HFCausalLM([OlmoeSparseMoeBlock(hidden, num_experts, top_k) for _ in range(layers)], "mlp",
                      hidden)


# ---- DeepSeek --------------------------------------------------------------------------------


class MoEGate(nn.Module):
    """modeling_deepseek.py's MoEGate: V2 (softmax, greedy) or V3 (sigmoid, bias, group-limited)."""

    def __init__(self, hidden, n_routed_experts, top_k, version, n_group=1, topk_group=1):
        super().__init__()
        self.top_k = top_k
        self.n_routed_experts = n_routed_experts
        self.version = version
        self.n_group = n_group
        self.topk_group = topk_group
        self.weight = nn.Parameter(torch.randn(n_routed_experts, hidden))
        if version == 3:
            self.e_score_correction_bias = nn.Parameter(torch.randn(n_routed_experts) * 0.5)
        self.chosen = []

    def forward(self, hidden_states):
        bsz, seq_len, h = hidden_states.shape
        logits = F.linear(hidden_states.view(-1, h).float(), self.weight.float())
        if self.version == 2:
            scores = logits.softmax(dim=-1, dtype=torch.float32)
            topk_weight, topk_idx = torch.topk(scores, k=self.top_k, dim=-1, sorted=False)
            self.chosen.append(topk_idx.clone())
            return topk_idx, topk_weight, None
        scores = logits.sigmoid()
        scores_for_choice = scores + self.e_score_correction_bias.unsqueeze(0)
        group_scores = scores_for_choice.view(bsz * seq_len, self.n_group, -1).topk(2, dim=-1)[0].sum(-1)
        group_idx = torch.topk(group_scores, k=self.topk_group, dim=-1, sorted=False)[1]
        group_mask = torch.zeros_like(group_scores).scatter_(1, group_idx, 1)
        score_mask = group_mask.unsqueeze(-1).expand(
            bsz * seq_len, self.n_group, self.n_routed_experts // self.n_group).reshape(bsz * seq_len, -1)
        tmp_scores = scores_for_choice.masked_fill(~score_mask.bool(), 0.0)
        _, topk_idx = torch.topk(tmp_scores, k=self.top_k, dim=-1, sorted=False)
        topk_weight = scores.gather(1, topk_idx)
        topk_weight = topk_weight / (topk_weight.sum(dim=-1, keepdim=True) + 1e-20)
        self.chosen.append(topk_idx.clone())
        return topk_idx, topk_weight


class DeepseekMoE(nn.Module):
    def __init__(self, hidden, gate):
        super().__init__()
        self.gate = gate
        self.experts = _experts(hidden, gate.n_routed_experts)
        self.shared_experts = nn.Linear(hidden, hidden, bias=False)

    def forward(self, hidden_states):
        shape = hidden_states.shape
        topk_idx, topk_weight = self.gate(hidden_states)[:2]
        tokens = hidden_states.view(-1, shape[-1])
        out = _mix(tokens, self.experts, topk_idx, topk_weight.to(tokens.dtype)).view(shape)
        return out + self.shared_experts(hidden_states)


class DeepseekDecoderLayer(nn.Module):
    def __init__(self, mlp):
        super().__init__()
        self.mlp = mlp

    def forward(self, x):
        return x + self.mlp(x)


class DeepseekForCausalLM(nn.Module):
    """model.layers.N.mlp: dense MLPs for the first `first_k_dense_replace` layers, then MoE."""

    def __init__(self, version, hidden=8, n_routed_experts=8, top_k=2, layers=3, first_dense=1,
                 n_group=1, topk_group=1):
        super().__init__()
        self.model = nn.Module()
        mlps = [nn.Linear(hidden, hidden, bias=False) if i < first_dense else
                DeepseekMoE(hidden, MoEGate(hidden, n_routed_experts, top_k, version, n_group,
                                            topk_group))
                for i in range(layers)]
        self.model.layers = nn.ModuleList(DeepseekDecoderLayer(m) for m in mlps)

    def forward(self, x):
        for layer in self.model.layers:
            x = layer(x)
        return x

    def routers(self):
        return [layer.mlp.gate for layer in self.model.layers if isinstance(layer.mlp, DeepseekMoE)]


# ---- Megatron-core ---------------------------------------------------------------------------


class TopKRouter(nn.Module):
    def __init__(self, config, returns_map=True):
        super().__init__()
        self.config = config
        self.topk = config.moe_router_topk
        self.num_experts = config.num_moe_experts
        self.layer_number = None
        self.returns_map = returns_map
        self.weight = nn.Parameter(torch.randn(config.num_moe_experts, config.hidden_size))
        self.chosen = []

    def set_layer_number(self, layer_number):
        self.layer_number = layer_number

    def forward(self, input):
        logits = F.linear(input, self.weight).view(-1, self.config.num_moe_experts)
        scores = torch.softmax(logits, dim=-1, dtype=torch.float32)
        probs, top_indices = torch.topk(scores, k=self.topk, dim=1)
        self.chosen.append(top_indices.clone())
        if not self.returns_map:
            return probs, top_indices
        routing_map = torch.zeros_like(logits).int().scatter(1, top_indices, 1).bool()
        return torch.zeros_like(logits).scatter(1, top_indices, probs), routing_map


class MoELayer(nn.Module):
    def __init__(self, config, layer_number, returns_map):
        super().__init__()
        self.router = TopKRouter(config, returns_map)
        self.router.set_layer_number(layer_number)
        self.experts = _experts(config.hidden_size, config.num_moe_experts)

    def forward(self, hidden_states):
        shape = hidden_states.shape
        out = self.router(hidden_states)
        if self.router.returns_map:
            probs, routing_map = out
            expert_ids = routing_map.nonzero()[:, 1].view(-1, self.router.topk)
            weights = probs.gather(1, expert_ids)
        else:
            weights, expert_ids = out
        tokens = hidden_states.reshape(-1, shape[-1])
        return _mix(tokens, self.experts, expert_ids, weights).view(shape)


class TransformerLayer(nn.Module):
    def __init__(self, config, layer_number, returns_map):
        super().__init__()
        self.mlp = MoELayer(config, layer_number, returns_map)

    def forward(self, x):
        return x + self.mlp(x)


class GPTModel(nn.Module):
    """decoder.layers.N.mlp.router; layer_number = pipeline offset + N + 1, as Megatron sets it."""

    def __init__(self, hidden=8, num_experts=8, top_k=2, layers=2, offset=0, returns_map=True,
                 capacity_factor=None):
        super().__init__()
        config = types.SimpleNamespace(hidden_size=hidden, num_moe_experts=num_experts,
                                       moe_router_topk=top_k,
                                       moe_expert_capacity_factor=capacity_factor)
        self.decoder = nn.Module()
        self.decoder.layers = nn.ModuleList(TransformerLayer(config, offset + i + 1, returns_map)
                                            for i in range(layers))

    def forward(self, x):
        for layer in self.decoder.layers:
            x = layer(x)
        return x

    def routers(self):
        return [layer.mlp.router for layer in self.decoder.layers]
