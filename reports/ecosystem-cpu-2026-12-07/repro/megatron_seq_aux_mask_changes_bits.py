"""Megatron-Core's sequence-level aux loss gives other bits when a padding
mask that pads nothing is passed: with a mask the scale
coeff * E / (k * N * N) is computed in float32 tensor steps, without one in
a Python double. Expected: the same loss and gradient (the same tokens).
megatron-core 0.19.2, torch 2.11, CPU or GPU."""
import torch
from megatron.core.transformer.moe import moe_utils as mu

torch.distributed.init_process_group("gloo", store=torch.distributed.HashStore(), rank=0, world_size=1)
class OneRank:
    size = staticmethod(lambda: 1)
    rank = staticmethod(lambda: 0)

def aux(logits, mask):
    rm, probs = mu.compute_routing_scores_for_aux_loss(logits, 2, "sigmoid", fused=False, padding_mask=mask)
    c, _, n = mu.get_tokens_per_expert_and_token_count(rm, OneRank(), topk=2, with_padding_mask=mask is not None)
    return mu.switch_load_balancing_loss_func(probs=probs, tokens_per_expert=c, total_num_tokens=n,
                                              topk=2, num_experts=8, moe_aux_loss_coeff=1e-3, fused=False)

torch.manual_seed(0)
for t in range(1, 200):
    logits = torch.randn(t, 8)
    a, b = aux(logits, None), aux(logits, torch.zeros(t, dtype=torch.bool))
    if a.item() != b.item():
        print(f"T={t}: no mask {a.item().hex()}  all-False mask {b.item().hex()}")
        break
else:
    print("no difference found")
