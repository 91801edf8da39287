"""SGLang's DeepSeek-V3 router (its PyTorch path) as a bitparity subject of
``router``, forward only.

    bitparity check --op router \\
        --subject "exec:python3 python/providers/thirdparty/sglang_router.py"

Upstream: ``sglang.srt.layers.moe.topk.biased_grouped_topk_impl`` (PyPI
``sglang``, tested with 0.5.23 on a CPU), the PyTorch path SGLang takes
for DeepSeek-V3's gate (``biased_grouped_topk``) where its fused kernel
(sgl-kernel's ``moe_fused_gate``) is not used: sigmoid scores, the
correction bias used only to choose, group score = the sum of each group's
two largest biased scores, ``topk_group`` groups kept, the top-k of their
experts, the weights gathered from the unbiased scores, renormalised by
``sum + 1e-20`` when ``renormalize``, times ``routed_scaling_factor`` when
``apply_routed_scaling_factor_on_output``. SGLang decorates it with
``torch.compile(dynamic=True)``: ``SGLANG_ROUTER=compiled`` (default) calls
it so, with torch._dynamo's recompile limit raised so that every
configuration stays compiled (at the default limit, the ninth would run
eagerly, and two processes could then disagree); ``SGLANG_ROUTER=eager``
calls the function's own Python body (``_torchdynamo_orig_callable``).
Compiling takes up to a minute for each new configuration (k, G, L,
renormalize) on a CPU, inside a reply: give the subject time
(``BITPARITY_EXEC_TIMEOUT=600``), or a compile reads as a hang.

The GPU host cannot have SGLang (python/providers/thirdparty/WHEELS.md:
the wheel is 39 MB, its import chain some 40 packages): this provider is
for a machine where SGLang is installed; elsewhere it answers every case
``unavailable``.

Glue, and why:

- ``hidden_states`` is only read for its number of rows (an assertion):
  the logits are passed for it. The logits are the case's strided view.
- Ids come unsorted (``sorted=False``); the reply sorts them ascending and
  moves each weight with its id. The map, the counts over valid rows and
  the scores (``torch.sigmoid`` of the logits, as the function computes
  them inside) are the glue's.
- ``route_norm`` is ``renormalize``, ``route_scale`` the
  ``routed_scaling_factor`` applied on the output; G and L are
  ``num_expert_group`` and ``topk_group``; no fused shared experts.

Conventions that differ from SPEC section 4, judged as they are:
``torch.topk``'s order of ties and NaN; PyTorch's sigmoid (or Inductor's
code for it, compiled), not correctly rounded; a multiply by the scale
in place after the division.

Not applicable: the backward. SGLang serves inference: this function has no
backward of its own (autograd through its PyTorch body would be PyTorch's,
not SGLang's), so every backward is answered ``unavailable``. (bitparity
then leaves the case out of the metamorphic properties too, which judge a
case's forward and backward together: only accuracy and validation judge
this provider.) The padding rule is moot without a backward: ``skip``.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _upstream  # noqa: E402
from _upstream import bitparity  # noqa: E402

import torch  # noqa: E402

MODE = os.environ.get("SGLANG_ROUTER", "compiled")
if MODE not in ("compiled", "eager"):
    sys.exit("sglang_router: SGLANG_ROUTER=%r: expected compiled or eager" % (MODE,))


def _load():
    from sglang.srt.layers.moe.topk import biased_grouped_topk_impl
    if MODE == "eager":
        return biased_grouped_topk_impl._torchdynamo_orig_callable
    import torch._dynamo
    torch._dynamo.config.cache_size_limit = 1 << 16
    return biased_grouped_topk_impl


SGL = _upstream.Upstream("sglang", _load)


def forward(case):
    route = SGL.need()
    with torch.no_grad():
        weights, ids = route(
            case.logits, case.logits, case.bias, case.k, case.route_norm,
            num_expert_group=case.groups, topk_group=case.topk_groups,
            num_fused_shared_experts=0, routed_scaling_factor=case.route_scale,
            apply_routed_scaling_factor_on_output=True)
        ids, weights, _ = _upstream.ascending(ids.long(), weights)
        scores = torch.sigmoid(case.logits)
    chosen = _upstream.routing_map(ids, case.e)
    valid = _upstream.valid_rows(case, case.t, chosen.device)
    counts = (chosen & valid[:, None]).sum(dim=0)
    return ids, weights, chosen, counts, scores


def backward(case):
    raise bitparity.Unavailable("SGLang's router serves inference: it has no backward")


if __name__ == "__main__":
    bitparity.serve(op="router", forward=forward, backward=backward, backend="torch", padding="skip")
