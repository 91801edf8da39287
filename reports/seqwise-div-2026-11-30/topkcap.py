import torch, traceback
t, e, k = 4096, 256, 8
s = (torch.rand(t, e, device="cuda") * (1 - 2**-24) + 2**-24).float().requires_grad_(True)
def loss_a(s):
    idx = torch.topk(s.detach(), k, dim=-1).indices
    m = torch.zeros(t, e, dtype=torch.bool, device=s.device).scatter_(1, idx, True)
    counts = m.sum(0); c = counts.sum()
    f = counts.float() / torch.clamp(c.float(), min=1e-12) * e
    p = s / (s.sum(-1, keepdim=True) + 1e-20)
    return (f * p.sum(0)).sum()
def loss_b(s):  # the same, topk on s itself (no detach)
    idx = torch.topk(s, k, dim=-1).indices
    m = torch.zeros_like(s, dtype=torch.bool).scatter_(1, idx, True)
    counts = m.sum(0); c = counts.sum()
    f = counts.float() / torch.clamp(c.float(), min=1e-12) * e
    p = s / (s.sum(-1, keepdim=True) + 1e-20)
    return (f * p.sum(0)).sum()
def loss_c(s):  # scatter with a tensor source instead of a Python scalar
    idx = torch.topk(s.detach(), k, dim=-1).indices
    m = torch.zeros(t, e, dtype=torch.float32, device=s.device).scatter_(1, idx, torch.ones(t, k, device=s.device))
    counts = m.sum(0); c = counts.sum()
    f = counts / torch.clamp(c, min=1e-12) * e
    p = s / (s.sum(-1, keepdim=True) + 1e-20)
    return (f * p.sum(0)).sum()
def loss_d(s):  # no topk at all (isolates the backward)
    p = s / (s.sum(-1, keepdim=True) + 1e-20)
    return p.sum()
for name, fn in [("a", loss_a), ("b", loss_b), ("c", loss_c), ("d", loss_d)]:
  for mode in ("global", "relaxed"):
    try:
        def fb():
            l = fn(s); (g,) = torch.autograd.grad(l, s); return l, g
        st = torch.cuda.Stream(); st.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(st):
            for _ in range(3): fb()
        torch.cuda.current_stream().wait_stream(st)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, capture_error_mode=mode):
            out = fb()
        g.replay(); torch.cuda.synchronize()
        print(name, mode, "OK")
    except Exception as ex:
        print(name, mode, "FAILED", type(ex).__name__, str(ex).splitlines()[0])
        try: torch.cuda.synchronize()
        except Exception as e2: print("  sync:", str(e2).splitlines()[0])
