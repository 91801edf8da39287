"""Megatron-Core's sequence-level auxiliary loss (``seq_aux_loss``, the
DeepSeek-V3 complementary sequence-wise balance loss) as a bitparity
subject of ``seqwise_loss``.

    bitparity check --op seqwise_loss \\
        --subject "exec:python3 python/providers/thirdparty/megatron_seqwise_loss.py"

Upstream (PyPI ``megatron-core``, tested with 0.19.2), the three functions
``TopKRouter._apply_seq_aux_loss`` chains, called here as it calls them for
one sequence (bsz = 1), from ``megatron.core.transformer.moe.moe_utils``:
``compute_routing_scores_for_aux_loss`` (sigmoid scores normalised by
``sum + 1e-20``, each token's top-k of them, padding masked),
``get_tokens_per_expert_and_token_count`` (the counts c_e and the token
count N) and ``switch_load_balancing_loss_func`` (``sum_e P_e c_e * E *
coeff / (k N N)``, P_e the column sums of the normalised scores), with
``fused=False`` (the fused path is Transformer Engine's).

Glue, and why:

- The op's input is the router's scores s, already sigmoid'd; Megatron's
  function starts from the logits. For the call's duration
  ``torch.sigmoid`` is replaced by the identity, so that everything after
  the sigmoid (the normalisation, the top-k, the padding mask) is
  Megatron's own code on s. s is the case's strided view (offset 0..3, row
  stride >= E).
- Megatron's loss is a mean over tokens: with coeff = 1 it is raw / N, raw
  the op's sum. The provider passes coeff = N (the number of valid rows,
  an exact integer), so that Megatron's one final product gives raw, with
  no rounding added by the glue.
- The tensor-parallel reduce of the counts gets a one-rank group (its
  ``size()`` is 1, so Megatron returns the counts unreduced, as on one GPU).
  Megatron asks for an initialised ``torch.distributed`` before it looks at
  the group, so the provider initialises a one-process gloo group on an
  in-memory store (no network).
- ``freq`` (f_e = c_e / max(C, eps) * E) is no output of Megatron's; the
  glue computes it as SPEC says, so that row judges the glue.
- Backward: autograd of ``g * raw`` through Megatron's functions.

Conventions that differ from SPEC section 3, judged as they are:

- Padding: Megatron multiplies the scores by the 0/1 mask (a product, so
  NaN and Inf in a padding row reach the loss): it claims the ``mask``
  rule (docs/padding.md). Its token count N is then C / k as a tensor.
- The top-k is ``torch.topk`` of the *normalised* scores s / (sum + eps2),
  not of s: rounding can make two different scores equal (then PyTorch's
  tie order decides), and PyTorch's order of ties and NaN is not SPEC's.
- A microbatch whose every token is padding has N = 0, and Megatron's
  factor E * coeff / (k N N) is then 0 / 0; SPEC's raw is 0 there.

Not applicable: the ``provided_map`` objective. Megatron's sequence-level
loss always maps each token to its own top-k and normalises by the plain
sum + 1e-20; it has no L1-normalised loss of a given map, so those cases
are answered ``unavailable``. The op's clamp (ProvidedMap only) never
arises, so no ``clamp_tie`` is claimed.
"""
import contextlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _upstream  # noqa: E402
from _upstream import bitparity  # noqa: E402

import torch  # noqa: E402

EPS = 1e-12


def _load():
    from megatron.core.transformer.moe import moe_utils
    return moe_utils


MCORE = _upstream.Upstream("megatron-core", _load)


class _OneRank:
    """The tensor-and-context-parallel group of a single GPU."""

    def size(self):
        return 1

    def rank(self):
        return 0


@contextlib.contextmanager
def _scores_as_given():
    """torch.sigmoid as the identity while Megatron's loss runs (see the
    module docstring: the op's input is already the router's scores)."""
    sigmoid = torch.sigmoid
    torch.sigmoid = lambda x: x
    try:
        yield
    finally:
        torch.sigmoid = sigmoid


def _one_process():
    """torch.distributed of one process, as Megatron requires it."""
    dist = torch.distributed
    if not dist.is_initialized():
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)


def loss(case, scores):
    mu = MCORE.need()
    _one_process()
    if case.objective != "unbiased_top_k":
        raise bitparity.Unavailable("Megatron-Core's sequence-level loss has no provided-map (L1-normalised) form")
    t, e, k = case.t, case.e, case.k
    padding = case.padding
    with _scores_as_given():
        routing_map, probs = mu.compute_routing_scores_for_aux_loss(
            scores, k, "sigmoid", fused=False, padding_mask=padding)
    tokens_per_expert, _, total_tokens = mu.get_tokens_per_expert_and_token_count(
        routing_map, _OneRank(), topk=k, with_padding_mask=padding is not None)
    valid = t if padding is None else int((~padding).sum().item())
    raw = mu.switch_load_balancing_loss_func(
        probs=probs, tokens_per_expert=tokens_per_expert, total_num_tokens=total_tokens,
        topk=k, num_experts=e, moe_aux_loss_coeff=float(valid), fused=False)
    return raw, tokens_per_expert


def forward(case):
    with torch.no_grad():
        raw, counts = loss(case, case.scores)
    total = counts.sum().to(torch.float32)
    freq = counts.to(torch.float32) / torch.clamp(total, min=EPS) * case.e
    return raw, counts, freq


def backward(case):
    x = case.scores.detach().requires_grad_(True)
    raw, _ = loss(case, x)
    raw.backward(torch.tensor(case.g, dtype=raw.dtype, device=raw.device))
    return x.grad


if __name__ == "__main__":
    bitparity.serve(op="seqwise_loss", forward=forward, backward=backward, backend="torch", padding="mask")
