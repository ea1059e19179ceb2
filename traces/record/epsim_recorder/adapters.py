"""Where the routers of a model are and how to read the experts they chose.

An adapter finds router sites in a model: the module to hook, the MoE layer's id in the model's own
numbering, the number of experts E and top-k K, and a function that turns the module's forward output
into either the chosen expert ids (an integer tensor whose last dimension is K) or per-expert counts
(an integer tensor of E). Nothing here imports transformers or megatron: modules are recognised by
their class names and attributes, as those libraries define them.
"""

import re
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

INDICES = "indices"
COUNTS = "counts"


@dataclass
class RouterSite:
    name: str            # qualified module name in the model, for messages
    module: torch.nn.Module  # the module whose forward output is read
    layer_id: int
    num_experts: int
    top_k: int
    extract: Callable    # (module, args, output) -> (INDICES | COUNTS, tensor)
    adapter: str


_LAYER_INDEX = re.compile(r"(?:^|\.)(?:layers|h|blocks)\.(\d+)(?:\.|$)")


def layer_id_from_name(name):
    """The decoder layer index in a qualified module name (`model.layers.7.mlp.gate` -> 7)."""
    found = _LAYER_INDEX.findall(name)
    return int(found[-1]) if found else None


def _class_name(module):
    return type(module).__name__


def _layer_id(name, *modules):
    layer = layer_id_from_name(name)
    if layer is not None:
        return layer
    for module in modules:
        for attribute in ("layer_idx", "layer_id", "layer_number"):
            value = getattr(module, attribute, None)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
    raise ValueError(f"{name}: cannot tell which layer this router belongs to (no 'layers.N' in its "
                     f"name and no layer_idx attribute); use the TopKOutput adapter with layer_id=")


def _tuple_item(output, index, name):
    if index is None:
        return output
    if not isinstance(output, (tuple, list)) or len(output) <= index:
        raise TypeError(f"{name}: expected the router to return a tuple with at least {index + 1} "
                        f"items, got {type(output).__name__}")
    return output[index]


def softmax_topk_of_logits(top_k):
    """Reads router logits and chooses experts exactly as Hugging Face's v4 MoE blocks do
    (softmax in float32, then torch.topk), so the counted experts are the ones the block used."""

    def extract(module, args, output):
        logits = output if torch.is_tensor(output) else output[0]
        probs = F.softmax(logits.detach(), dim=-1, dtype=torch.float)
        return INDICES, torch.topk(probs, top_k, dim=-1).indices

    return extract


def indices_at(index):
    """Reads the expert ids the router returns itself (item `index` of its output tuple)."""

    def extract(module, args, output):
        return INDICES, _tuple_item(output, index, _class_name(module))

    return extract


class Adapter:
    name = "adapter"

    def sites(self, model):
        raise NotImplementedError


class HFSparseMoe(Adapter):
    """Hugging Face transformers MoE blocks (Mixtral, Qwen2-MoE, OLMoE).

    transformers 4.x: the block's `gate` is an nn.Linear returning router logits and the block
    chooses `top_k` of `num_experts` by softmax + topk; the gate is hooked and the choice repeated.
    transformers 5.x: `gate` is a `*TopKRouter` with `num_experts` and `top_k` whose forward
    returns (router_logits, router_scores, router_indices); the indices are read as they are.
    """

    def __init__(self, name, block_classes):
        self.name = name
        self.block_classes = frozenset(block_classes)

    def sites(self, model):
        found = []
        for name, block in model.named_modules():
            if _class_name(block) not in self.block_classes:
                continue
            gate = getattr(block, "gate", None)
            if gate is None:
                raise ValueError(f"{name}: {_class_name(block)} without a 'gate' module")
            layer = _layer_id(name, block, gate)
            if isinstance(gate, torch.nn.Linear):
                num_experts, top_k = int(block.num_experts), int(block.top_k)
                extract = softmax_topk_of_logits(top_k)
            else:
                num_experts, top_k = int(gate.num_experts), int(gate.top_k)
                extract = indices_at(2)
            found.append(RouterSite(f"{name}.gate", gate, layer, num_experts, top_k, extract,
                                    self.name))
        return found


class DeepSeekGate(Adapter):
    """DeepSeek-V2/V3 `MoEGate` (the models' own modeling_deepseek.py): attributes `top_k` and
    `n_routed_experts`; forward returns (topk_idx, topk_weight, aux_loss) in V2 and
    (topk_idx, topk_weight) in V3, topk_idx being [tokens, top_k] after group-limited routing."""

    name = "deepseek-gate"
    classes = frozenset({"MoEGate"})

    def sites(self, model):
        found = []
        for name, gate in model.named_modules():
            if _class_name(gate) not in self.classes:
                continue
            found.append(RouterSite(name, gate, _layer_id(name, gate), int(gate.n_routed_experts),
                                    int(gate.top_k), indices_at(0), self.name))
        return found


def megatron_routing(num_experts, top_k):
    """Megatron-core's TopKRouter returns (probs, routing_map): routing_map is a boolean
    [tokens, num_experts] mask; older releases returned (scores, indices), indices [tokens, top_k]."""

    def extract(module, args, output):
        chosen = _tuple_item(output, 1, _class_name(module))
        if chosen.dtype == torch.bool:
            mask = chosen.detach().reshape(-1, num_experts)
            return COUNTS, mask.sum(dim=0, dtype=torch.int64)
        return INDICES, chosen

    return extract


class MegatronTopKRouter(Adapter):
    """Megatron-core `TopKRouter` (megatron/core/transformer/moe/router.py): `topk`,
    `config.num_moe_experts`, `layer_number` (1-based, global across pipeline stages)."""

    name = "megatron-topk-router"
    classes = frozenset({"TopKRouter"})

    def sites(self, model):
        found = []
        for name, router in model.named_modules():
            if _class_name(router) not in self.classes or not hasattr(router, "config"):
                continue
            config = router.config
            capacity = getattr(config, "moe_expert_capacity_factor", None)
            if capacity is not None:
                raise ValueError(
                    f"{name}: moe_expert_capacity_factor = {capacity} drops tokens, and the routing "
                    f"map then no longer holds top_k experts per token; record a dropless run")
            layer = getattr(router, "layer_number", None)
            if not isinstance(layer, int) or isinstance(layer, bool):
                layer = _layer_id(name)
            num_experts, top_k = int(config.num_moe_experts), int(router.topk)
            found.append(RouterSite(name, router, layer, num_experts, top_k,
                                    megatron_routing(num_experts, top_k), self.name))
        return found


class TopKOutput(Adapter):
    """Any router that returns the chosen expert ids itself: `match` is a module class or a
    predicate (name, module) -> bool; `index` picks the ids from a returned tuple (None: the output
    is the ids); num_experts / top_k default to the module's attributes of those names; layer_id is
    a function (name, module) -> int, by default 'layers.N' in the name or a layer_idx attribute."""

    def __init__(self, match, index=None, num_experts=None, top_k=None, layer_id=None,
                 name="topk-output"):
        self.match = match
        self.index = index
        self.num_experts = num_experts
        self.top_k = top_k
        self.layer_id = layer_id
        self.name = name

    def _matches(self, name, module):
        if isinstance(self.match, type):
            return isinstance(module, self.match)
        return bool(self.match(name, module))

    def sites(self, model):
        found = []
        for name, module in model.named_modules():
            if not self._matches(name, module):
                continue
            num_experts = self.num_experts if self.num_experts is not None else module.num_experts
            top_k = self.top_k if self.top_k is not None else module.top_k
            layer = self.layer_id(name, module) if self.layer_id else _layer_id(name, module)
            found.append(RouterSite(name, module, int(layer), int(num_experts), int(top_k),
                                    indices_at(self.index), self.name))
        return found


BUILT_IN = {
    "hf-mixtral": HFSparseMoe("hf-mixtral", {"MixtralSparseMoeBlock"}),
    "hf-qwen2-moe": HFSparseMoe("hf-qwen2-moe", {"Qwen2MoeSparseMoeBlock", "Qwen3MoeSparseMoeBlock"}),
    "hf-olmoe": HFSparseMoe("hf-olmoe", {"OlmoeSparseMoeBlock"}),
    "deepseek-gate": DeepSeekGate(),
    "megatron-topk-router": MegatronTopKRouter(),
}


def find_sites(model, adapter="auto"):
    """The router sites of `model`: adapter is "auto" (every built-in adapter), a built-in name, an
    Adapter, or a list of those."""
    if adapter == "auto":
        adapters = list(BUILT_IN.values())
    elif isinstance(adapter, (list, tuple)):
        adapters = [BUILT_IN[a] if isinstance(a, str) else a for a in adapter]
    elif isinstance(adapter, str):
        if adapter not in BUILT_IN:
            raise ValueError(f"unknown adapter {adapter!r}; built in: {', '.join(BUILT_IN)}")
        adapters = [BUILT_IN[adapter]]
    else:
        adapters = [adapter]
    sites = [site for a in adapters for site in a.sites(model)]
    seen_modules, seen_layers = {}, {}
    for site in sites:
        if id(site.module) in seen_modules:
            raise ValueError(f"{site.name}: matched by two adapters "
                             f"({seen_modules[id(site.module)]} and {site.adapter})")
        seen_modules[id(site.module)] = site.adapter
        if site.layer_id in seen_layers:
            raise ValueError(f"{site.name} and {seen_layers[site.layer_id]}: two routers with "
                             f"layer id {site.layer_id}")
        seen_layers[site.layer_id] = site.name
    return sites
