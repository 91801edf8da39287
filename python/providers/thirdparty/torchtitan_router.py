"""TorchTitan's DeepSeek-V3 router as a bitparity subject of ``router``.

    bitparity check --op router \\
        --subject "exec:python3 python/providers/thirdparty/torchtitan_router.py"

Upstream: ``torchtitan.models.common.moe.TokenChoiceTopKRouter`` (PyPI
``torchtitan``, tested with 0.3.0; importing it needs ``spmd_types``
0.2.3, ``tyro`` and ``docstring-parser`` too: WHEELS.md), built through its own ``Config`` in the DeepSeek-V3 setting:
``score_func="sigmoid"``, ``num_expert_groups`` = G, ``num_limited_groups``
= L, ``top_k`` = k, ``route_norm``, ``route_scale``, and the expert bias
passed to ``forward`` (used only to choose, as SPEC section 4 says).

Glue, and why:

- The op starts after the gate matmul, so the router's ``gate`` (a
  ``Linear``) is replaced by ``nn.Identity``: the logits go in as they are.
  A real matmul with an identity matrix would not do: 0 * Inf is NaN and
  -0.0 + 0.0 is +0.0. The logits keep the case's strided view (offset 0..3,
  row stride >= E), seen as one batch of one sequence, ``(1, T, E)``.
- ``torch.topk(..., sorted=False)`` leaves each row's experts in no
  particular order; the reply sorts the ids ascending and moves each
  weight with its id (``_upstream.ascending``).
- The routing map and the counts are not the router's outputs (TorchTitan's
  ``MoE.forward`` builds the map with the same scatter, and counts every
  token); the glue builds the map and counts valid rows only, as the op
  says. So those two outputs judge the glue as much as TorchTitan.
- Backward: autograd of ``sum(weights * gw)`` through TorchTitan's forward,
  with gw taken in the op's ascending order and matched to TorchTitan's
  order of the weights.

Conventions that differ from SPEC section 4, not changed here (bitparity
judges them as they are):

- Selections are ``torch.topk``'s: ties and NaN in PyTorch's order, not
  "equal values go to the lower index".
- The group mask is a ``masked_fill`` with -inf, so a group's experts left
  out of the kept groups are -inf, and a NaN score sorts as PyTorch sorts
  NaN.
- sigmoid is PyTorch's, not correctly rounded.

Not applicable: the fused ``seqwise_loss`` in the backward (``case.loss``).
No released TorchTitan has a sequence-wise load-balance loss (0.3.0 has
the auxiliary-loss-free bias update only; the sequence-wise loss landed on
its main branch after 0.3.0), so such cases are answered ``unavailable``.
Without the fused loss the padding rows take no part in the backward, so
the ``skip`` and ``mask`` rules are the same op here; it claims ``skip``.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _upstream  # noqa: E402
from _upstream import bitparity  # noqa: E402

import torch  # noqa: E402


def _load():
    from torchtitan.models.common.linear import Linear
    from torchtitan.models.common.moe import TokenChoiceTopKRouter
    return TokenChoiceTopKRouter, Linear


TITAN = _upstream.Upstream("torchtitan", _load)
_routers = {}


def router(case):
    TokenChoiceTopKRouter, Linear = TITAN.need()
    key = (case.e, case.groups, case.topk_groups, case.k, case.route_norm, case.route_scale)
    r = _routers.get(key)
    if r is None:
        r = TokenChoiceTopKRouter.Config(
            num_experts=case.e,
            gate=Linear.Config(in_features=1, out_features=case.e),
            num_expert_groups=case.groups,
            num_limited_groups=case.topk_groups,
            top_k=case.k,
            score_func="sigmoid",
            route_norm=case.route_norm,
            route_scale=case.route_scale,
        ).build()
        # The op begins after the gate matmul (see the module docstring).
        r.gate = torch.nn.Identity()
        _routers[key] = r
    return r


def route(case, logits):
    """(ids ascending, weights in that order, perm, scores) of TorchTitan."""
    weights, ids, scores = router(case)(logits.unsqueeze(0), case.bias)
    ids, weights, perm = _upstream.ascending(ids[0], weights[0])
    return ids, weights, perm, scores[0]


def forward(case):
    with torch.no_grad():
        ids, weights, _, scores = route(case, case.logits)
    chosen = _upstream.routing_map(ids, case.e)
    valid = _upstream.valid_rows(case, case.t, chosen.device)
    counts = (chosen & valid[:, None]).sum(dim=0)
    return ids, weights, chosen, counts, scores


def backward(case):
    if case.loss is not None:
        raise bitparity.Unavailable("TorchTitan %s has no sequence-wise load-balance loss to fuse" % TITAN.version)
    x = case.logits.detach().requires_grad_(True)
    _, weights, _, _ = route(case, x)
    (weights * case.gw).sum().backward()
    return x.grad


if __name__ == "__main__":
    bitparity.serve(op="router", forward=forward, backward=backward, backend="torch", padding="skip")
