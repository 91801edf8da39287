"""seqwise_loss as TorchTitan writes it for DeepSeek-V3, in plain PyTorch,
as a bitparity subject (it claims no profile: PyTorch promises no reduction
order, so accuracy and gradient hold it to the exact result within a bound
valid for any reduction order, determinism, padding and offset/stride
invariance and validation judge it bit for bit, and conformance is n/a).

    BITPARITY_DEVICE=cuda bitparity check --op seqwise_loss \\
        --subject "exec:python3 python/providers/torch_seqwise_loss.py"

The formula, padding as native TorchTitan has it (it claims the ``mask``
padding rule, docs/padding.md): every row's p is computed, then multiplied by
the 0/1 mask before the column sums, so NaN/Inf in a padding row make the loss
NaN, and autograd gives the padding row g * f * 0 through p; ProvidedMap:
``F.normalize(scores, p=1, dim=1, eps=1e-12)`` and the given map;
UnbiasedTopK: ``scores / (scores.sum(1) + 1e-20)`` and ``torch.topk`` of each
valid row; c_e the map's column sums, f_e = c_e / max(C, eps) * E, P_e the
column sums of p, raw = sum(f * P). The backward is autograd's, of
``g * raw``; at the clamp tie (n == eps) it lets the gradient through or
not as the installed PyTorch's ``clamp_min`` backward does (``>=`` in 2.11,
``>`` in 2.15), so the provider measures that once and claims the rule in
its handshake (``clamp_tie``): bitparity judges it under that rule, whatever
the case's ``clamp_tie`` says. The scores are read through the case's strided view (offset 1..3
is a misaligned view, as a PyTorch slice gives).
"""
import os
import sys

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))
import bitparity  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

EPS = 1e-12
EPS2 = 1e-20


def valid_rows(case, scores):
    if case.padding is None:
        return torch.ones(scores.shape[0], dtype=torch.bool, device=scores.device)
    return ~case.padding


def loss(scores, valid, objective, provided_map=None, k=None):
    """(raw, counts, freq) of scores (T x E) with padding masked as
    TorchTitan does: the counts over valid rows (integers), every row's p
    multiplied by its 0/1 mask before the sum over tokens (the ``mask``
    padding rule: a product, so NaN * 0 is NaN and (-x) * 0 is -0.0).
    Differentiable in scores."""
    e = scores.shape[1]
    rows = valid[:, None]
    s = scores
    if objective == "provided_map":
        chosen = provided_map & rows
        p = F.normalize(s, p=1, dim=1, eps=EPS)
    else:
        idx = torch.topk(s.detach(), k, dim=1).indices
        chosen = torch.zeros_like(s, dtype=torch.bool).scatter(1, idx, True) & rows
        p = s / (s.sum(dim=1, keepdim=True) + EPS2)
    p = p * rows.to(p.dtype)
    counts = chosen.sum(dim=0)
    total = counts.sum().to(torch.float32)
    freq = counts.to(torch.float32) / torch.clamp(total, min=EPS) * e
    raw = (freq * p.sum(dim=0)).sum()
    return raw, counts, freq


def forward(case):
    with torch.no_grad():
        return loss(case.scores, valid_rows(case, case.scores), case.objective, case.map, case.k)


def backward(case):
    x = case.scores.detach().requires_grad_(True)
    raw, _, _ = loss(x, valid_rows(case, x), case.objective, case.map, case.k)
    raw.backward(torch.tensor(case.g, dtype=torch.float32, device=x.device))
    return x.grad


if __name__ == "__main__":
    bitparity.serve(op="seqwise_loss", forward=forward, backward=backward, backend="torch", padding="mask",
                    clamp_tie=bitparity.clamp_tie_of_torch())
