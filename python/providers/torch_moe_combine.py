"""MoE dispatch and weighted combine (SPEC.md section 9) in plain PyTorch, as
MoE training code usually writes it, as a bitparity subject that claims no
profile: accuracy and gradient hold it to the exact result within a bound
valid for any summation order; determinism, batch invariance, padding and
offset/stride invariance and validation judge it bit for bit; conformance
is n/a.

    BITPARITY_DEVICE=cuda bitparity check --op moe_combine \\
        --subject "exec:python3 python/providers/torch_moe_combine.py"

Dispatch: the choices (t, j) flattened in row-major order, padding tokens'
choices given the key E (after every expert), a stable sort by key (so
inside an expert, ascending t then j), each choice's rank inside its expert
from the cumulative counts (``torch.bincount`` then ``cumsum``), ranks at or
past the capacity dropped; counts = min(bincount, capacity), offsets their
exclusive cumsum; the kept choices, in sorted order, are the slots 0, 1, ...
x_disp = x[token_of_slot].

Combine: ``y = zeros(T, H).index_add_(0, token_of_slot, w_of_slot[:, None]
* x_exp)``. index_add_ promises no order: on a GPU it adds with float
atomics (the order of a token's terms depends on scheduling, from three
kept choices on), on the CPU it adds the slots in ascending order (the
`by-slot` order). Either way it claims no profile.

Backward: autograd's, of y (gradient dy) and x_disp (gradient g_disp):
dx_exp = w_of_slot * dy[token_of_slot] (one product), dw = the sum over h
of dy * x_exp (PyTorch's reduction order), gathered back to (t, j) with
+0.0 for dropped choices and padding tokens; dx = index_select's backward,
an index_add_ of g_disp (atomics on a GPU). A padding token is never
dispatched, so its weights and rows (NaN and Inf included) reach nothing:
the ``skip`` padding rule (docs/padding.md).

The inputs are the case's strided views (x, x_exp, dy and g_disp at the
case's offset and row stride; misaligned for offsets 1..3).
"""
import os
import sys

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))
import bitparity  # noqa: E402

import torch  # noqa: E402


def dispatch(case):
    """(slot: T x k, -1 for none; counts: E; choice_of_slot; token_of_slot),
    the last two indexed by slot, choice = t * k + j."""
    ids = case.ids
    t, k = ids.shape
    e = case.e
    device = ids.device
    flat = ids.reshape(-1)
    if case.padding is not None:
        valid = (~case.padding).repeat_interleave(k)
        flat = torch.where(valid, flat, torch.full_like(flat, e))
    key, order = torch.sort(flat, stable=True)
    per_key = torch.bincount(flat, minlength=e + 1)
    first = torch.cumsum(per_key, 0) - per_key
    rank = torch.arange(t * k, device=device) - first[key]
    keep = key < e
    counts = per_key[:e]
    if case.capacity is not None:
        keep &= rank < case.capacity
        counts = counts.clamp(max=case.capacity)
    offsets = torch.cumsum(counts, 0) - counts
    choice_of_slot = order[keep]
    slot = torch.full((t * k,), -1, dtype=torch.int64, device=device)
    slot[choice_of_slot] = offsets[key[keep]] + rank[keep]
    return slot.reshape(t, k), counts, choice_of_slot, torch.div(choice_of_slot, k, rounding_mode="floor")


def combine(case, x, x_exp, weights, token_of_slot, choice_of_slot):
    x_disp = x[token_of_slot]
    w_of_slot = weights.reshape(-1)[choice_of_slot]
    y = torch.zeros(case.t, case.h, dtype=torch.float32, device=x.device)
    y = y.index_add_(0, token_of_slot, w_of_slot[:, None] * x_exp)
    return x_disp, y


def forward(case):
    with torch.no_grad():
        slot, counts, choice_of_slot, token_of_slot = dispatch(case)
        x_disp, y = combine(case, case.x, case.x_exp, case.weights, token_of_slot, choice_of_slot)
        return slot, counts, x_disp, y


def backward(case):
    _, _, choice_of_slot, token_of_slot = dispatch(case)
    x = case.x.detach().requires_grad_(True)
    x_exp = case.x_exp.detach().requires_grad_(True)
    weights = case.weights.detach().clone().requires_grad_(True)
    x_disp, y = combine(case, x, x_exp, weights, token_of_slot, choice_of_slot)
    torch.autograd.backward([y, x_disp], [case.dy, case.g_disp])

    def grad(v):
        return v.grad if v.grad is not None else torch.zeros_like(v)
    return grad(x_exp), grad(weights), grad(x)


if __name__ == "__main__":
    bitparity.serve(op="moe_combine", forward=forward, backward=backward, backend="torch")
