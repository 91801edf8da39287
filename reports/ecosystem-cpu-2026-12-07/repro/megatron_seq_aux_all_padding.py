"""Megatron-Core's sequence-level aux loss is NaN, and so is its gradient,
when every token of the sequence is padding (e.g. a fully padded
microbatch): the token count N is 0 and the scale coeff * E / (k * N * N)
is inf, times a sum that is 0. Expected: loss 0 and gradient 0 (no token
routes anywhere). megatron-core 0.19.2, torch 2.11, CPU or GPU."""
import torch
from megatron.core.transformer.moe import moe_utils as mu

torch.distributed.init_process_group("gloo", store=torch.distributed.HashStore(), rank=0, world_size=1)
class OneRank:
    size = staticmethod(lambda: 1)
    rank = staticmethod(lambda: 0)

T, E, K = 4, 8, 2
logits = torch.randn(T, E, requires_grad=True)
padding = torch.ones(T, dtype=torch.bool)          # every token is padding
routing_map, probs = mu.compute_routing_scores_for_aux_loss(
    logits, K, "sigmoid", fused=False, padding_mask=padding)
counts, _, n = mu.get_tokens_per_expert_and_token_count(routing_map, OneRank(), topk=K, with_padding_mask=True)
loss = mu.switch_load_balancing_loss_func(probs=probs, tokens_per_expert=counts, total_num_tokens=n,
                                          topk=K, num_experts=E, moe_aux_loss_coeff=1e-3, fused=False)
loss.backward()
print("N =", n, " loss =", loss.item(), " grad finite:", torch.isfinite(logits.grad).all().item())
assert loss.item() == 0 and torch.isfinite(logits.grad).all(), "NaN loss/gradient on an all-padding sequence"
