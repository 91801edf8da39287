"""Megatron-Core's DeepSeek-V3 router as a bitparity subject of ``router``.

    bitparity check --op router \\
        --subject "exec:python3 python/providers/thirdparty/megatron_router.py"

Upstream: ``megatron.core.transformer.moe.moe_utils.
topk_routing_with_score_function`` (PyPI ``megatron-core``, tested with
0.19.2), the function ``TopKRouter.routing`` calls, in the DeepSeek-V3
setting: ``score_function="sigmoid"``, ``expert_bias`` = the case's bias,
``num_groups`` = G, ``group_topk`` = L, ``scaling_factor`` = route_scale,
``fused=False`` (the PyTorch path; the fused path is Transformer Engine's),
``dense_output=True`` (the T x k weights and ids, not the T x E scatter).

Glue, and why:

- The logits go in as the case's strided view (offset 0..3, row stride >=
  E): the function takes the gate's output, as the op does.
- Its ids come in ``torch.topk``'s order (by score); the reply sorts them
  ascending and moves each weight with its id (``_upstream.ascending``).
- The routing map and the counts over valid rows are built by the glue
  (Megatron's router scatters the same map; padding is handled by its
  callers), and the scores are ``torch.sigmoid`` of the logits, as the
  function computes them inside (it does not return them). Those outputs
  judge the glue's one line each.
- Backward: autograd of ``sum(weights * gw)`` through the function, gw
  matched to Megatron's order of the weights.

Conventions that differ from SPEC section 4. Cases where the two ops are
not the same are answered ``unavailable`` (counted apart, never passed):

- Megatron scores a group by the sum of its top ``k // L`` experts (8 // 4 =
  2 in DeepSeek-V3), SPEC by its top 2: a case with L < G and k // L != 2 is
  unavailable (with L = G every group is kept and the group score decides
  nothing; G = 1 is passed as no grouping, as Megatron's configs say it).
- Megatron always normalises sigmoid weights when k > 1, with
  ``sum + 1e-20`` as SPEC does, and never when k = 1 (the weight is then s
  itself, where SPEC's is s / (s + 1e-20)); it has no ``route_norm``
  switch. So a case with ``route_norm`` false, or with k = 1, is
  unavailable.
- Selections are ``torch.topk``'s (PyTorch's tie and NaN order); sigmoid is
  PyTorch's, not correctly rounded. Judged as they are.

Not applicable: the fused ``seqwise_loss`` (``case.loss``): Megatron's
router fuses its own auxiliary losses (``megatron_seqwise_loss.py`` judges
the sequence-level one), not SPEC's ProvidedMap loss of the router's map,
so such backward cases are unavailable. Without it the padding rows take
no part in the backward: it claims the ``skip`` rule (the same op here).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _upstream  # noqa: E402
from _upstream import bitparity  # noqa: E402

import torch  # noqa: E402


def _load():
    from megatron.core.transformer.moe.moe_utils import topk_routing_with_score_function
    return topk_routing_with_score_function


MCORE = _upstream.Upstream("megatron-core", _load)


def route(case, logits):
    topk_routing = MCORE.need()
    g, l, k = case.groups, case.topk_groups, case.k
    if not case.route_norm:
        raise bitparity.Unavailable("Megatron-Core always normalises sigmoid weights (no route_norm switch)")
    if k == 1:
        raise bitparity.Unavailable("Megatron-Core does not normalise the weight at k = 1 (SPEC: s / (s + 1e-20))")
    if l < g and k // l != 2:
        raise bitparity.Unavailable("Megatron-Core scores a group by its top k // L = %d experts, SPEC by its top 2" % (k // l))
    grouped = g > 1
    weights, ids = topk_routing(
        logits, k,
        num_groups=g if grouped else None,
        group_topk=l if grouped else None,
        scaling_factor=case.route_scale,
        score_function="sigmoid",
        expert_bias=case.bias,
        fused=False,
        dense_output=True,
    )
    return _upstream.ascending(ids, weights)


def forward(case):
    with torch.no_grad():
        ids, weights, _ = route(case, case.logits)
        scores = torch.sigmoid(case.logits)
    chosen = _upstream.routing_map(ids, case.e)
    valid = _upstream.valid_rows(case, case.t, chosen.device)
    counts = (chosen & valid[:, None]).sum(dim=0)
    return ids, weights, chosen, counts, scores


def backward(case):
    if case.loss is not None:
        raise bitparity.Unavailable("Megatron-Core's router fuses its own auxiliary losses, not SPEC's seqwise_loss")
    x = case.logits.detach().requires_grad_(True)
    _, weights, _ = route(case, x)
    (weights * case.gw).sum().backward()
    return x.grad


if __name__ == "__main__":
    bitparity.serve(op="router", forward=forward, backward=backward, backend="torch", padding="skip")
