"""A small byte-level MoE language model and the generated corpus it learns, for the recorded sample
(train_tiny_moe.py) and the recorder's overhead measurement (measure_overhead.py).

Each of the `layers` blocks is causal self-attention followed by a mixture of `experts` feed-forward
experts; TinyRouter picks the top-k experts of every token (softmax, top-k, renormalised weights,
like Mixtral) and returns (weights, expert ids, probabilities). Training adds the Switch
Transformer load-balancing loss, as MoE language models are trained.
"""

import math
import random

import torch
import torch.nn as nn
import torch.nn.functional as F


class TinyRouter(nn.Module):
    def __init__(self, hidden, num_experts, top_k):
        super().__init__()
        self.num_experts = num_experts
        self.top_k = top_k
        self.weight = nn.Parameter(torch.randn(num_experts, hidden) * hidden ** -0.5)

    def forward(self, tokens):
        probs = F.softmax(F.linear(tokens, self.weight), dim=-1, dtype=torch.float)
        weights, expert_ids = torch.topk(probs, self.top_k, dim=-1)
        weights = weights / weights.sum(dim=-1, keepdim=True)
        return weights.to(tokens.dtype), expert_ids, probs


class Expert(nn.Module):
    def __init__(self, hidden, ffn):
        super().__init__()
        self.up = nn.Linear(hidden, ffn)
        self.down = nn.Linear(ffn, hidden)

    def forward(self, x):
        return self.down(F.gelu(self.up(x)))


class MoE(nn.Module):
    def __init__(self, hidden, ffn, num_experts, top_k):
        super().__init__()
        self.router = TinyRouter(hidden, num_experts, top_k)
        self.experts = nn.ModuleList(Expert(hidden, ffn) for _ in range(num_experts))
        self.aux_loss = None

    def forward(self, x):
        shape = x.shape
        tokens = x.reshape(-1, shape[-1])
        weights, expert_ids, probs = self.router(tokens)
        out = torch.zeros_like(tokens)
        for e, expert in enumerate(self.experts):
            token_idx, slot = torch.where(expert_ids == e)
            if token_idx.numel():
                out.index_add_(0, token_idx,
                               expert(tokens[token_idx]) * weights[token_idx, slot].unsqueeze(-1))
        # Switch load-balancing loss: E * sum_e (share of selections of e) * (mean probability of e).
        counts = torch.zeros(self.router.num_experts, device=x.device).index_add_(
            0, expert_ids.reshape(-1), torch.ones(expert_ids.numel(), device=x.device))
        share = counts / expert_ids.numel()
        self.aux_loss = self.router.num_experts * (share * probs.mean(dim=0)).sum()
        return out.reshape(shape)


class Block(nn.Module):
    def __init__(self, hidden, heads, ffn, num_experts, top_k):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.norm2 = nn.LayerNorm(hidden)
        self.moe = MoE(hidden, ffn, num_experts, top_k)

    def forward(self, x):
        batch, seq, hidden = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(hidden, dim=-1)
        q, k, v = (t.view(batch, seq, self.heads, -1).transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        causal = torch.ones(seq, seq, dtype=torch.bool, device=x.device).triu(1)
        attention = scores.masked_fill(causal, float("-inf")).softmax(dim=-1) @ v
        x = x + self.proj(attention.transpose(1, 2).reshape(batch, seq, hidden))
        return x + self.moe(self.norm2(x))


class TinyMoELM(nn.Module):
    def __init__(self, layers=4, hidden=64, heads=4, ffn=128, num_experts=16, top_k=2, seq=64,
                 vocab=256):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.position = nn.Parameter(torch.randn(seq, hidden) * 0.02)
        self.layers = nn.ModuleList(Block(hidden, heads, ffn, num_experts, top_k)
                                    for _ in range(layers))
        self.norm = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, byte_ids):
        x = self.embed(byte_ids) + self.position[: byte_ids.shape[1]]
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x))

    def aux_loss(self):
        return sum(layer.moe.aux_loss for layer in self.layers) / len(self.layers)


# ---- the corpus: four kinds of text in unequal shares, from a seeded generator ------------------

_ANIMALS = "cat dog fox owl hen cow yak bee ant eel".split()
_VERBS = "sees chases follows greets finds watches helps hears".split()
_PLACES = "barn field river hill garden forest road lake".split()
_ADJECTIVES = "small quick lazy brown calm loud old young".split()


def _sentence(rng):
    return (f"the {rng.choice(_ADJECTIVES)} {rng.choice(_ANIMALS)} {rng.choice(_VERBS)} "
            f"the {rng.choice(_ANIMALS)} near the {rng.choice(_PLACES)}. ")


def _sum(rng):
    a, b = rng.randrange(100), rng.randrange(100)
    return f"{a} + {b} = {a + b}; "


def _code(rng):
    name = rng.choice("fghkmnpq") + str(rng.randrange(10))
    return f"def {name}(x): return x * {rng.randrange(2, 10)} + {rng.randrange(10)}\n"


def _date(rng):
    return f"{rng.randrange(1990, 2030)}-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d} "


def generate_corpus(num_bytes, seed):
    """Deterministic text for a seed: sentences 40%, sums 30%, code 20%, dates 10%."""
    rng = random.Random(seed)
    kinds = [_sentence] * 4 + [_sum] * 3 + [_code] * 2 + [_date]
    parts, size = [], 0
    while size < num_bytes:
        part = rng.choice(kinds)(rng)
        parts.append(part)
        size += len(part)
    return "".join(parts).encode("ascii")[:num_bytes]
