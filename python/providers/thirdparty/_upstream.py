"""What the third-party providers share: the upstream package is imported
as installed (never a copy of its code), and when it cannot be imported
here the provider still answers the handshake and replies ``unavailable``
to every case, with the import error as the reason. bitparity then counts
those cases as unavailable (an honest skip, never a pass), and a run where
nothing could be judged exits 3, so a missing wheel cannot pass silently.

The providers import this module by path (``sys.path`` is set to this
folder and to ``python/`` for ``bitparity``), so they run from a checkout
without ``pip install``.
"""
import importlib
import importlib.metadata
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.abspath(os.path.join(HERE, "..", "..")))
import bitparity  # noqa: E402

# Used only by the local tests of a provider whose upstream kernel needs a
# GPU (Triton, CUDA): ``PROVIDER_STANDIN=1`` swaps the upstream call for a
# plain PyTorch function of the same contract, so the glue around it (views,
# dtypes, output order) can be judged on a CPU. Never set on the GPU host:
# the provider's stderr says when it is on. (Not a BITPARITY_ variable:
# bitparity refuses unknown knobs of its own prefix.)
STANDIN = os.environ.get("PROVIDER_STANDIN") == "1"


class Upstream:
    """One upstream package: ``dist`` (its distribution name, for the
    version) and ``load`` (a function that imports what the provider calls
    and returns it). ``missing`` is None, or why it could not be loaded."""

    def __init__(self, dist, load):
        self.dist = dist
        self.api = None
        self.missing = None
        self.version = None
        try:
            self.api = load()
        except Exception as e:  # an ImportError, or a package that fails as it imports
            self.missing = "%s cannot be imported here: %s: %s" % (dist, type(e).__name__, e)
        try:
            self.version = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            pass
        sys.stderr.write("%s: upstream %s %s%s%s\n" % (
            os.path.basename(sys.argv[0]), dist, self.version or "(no version)",
            "" if self.missing is None else " UNAVAILABLE: " + self.missing,
            " (PROVIDER_STANDIN=1: the upstream call is replaced)" if STANDIN else ""))

    def need(self):
        """Raises ``Unavailable`` when the package could not be loaded."""
        if self.missing is not None and not STANDIN:
            raise bitparity.Unavailable(self.missing)
        return self.api


def need_cuda(what):
    """Raises ``Unavailable`` when no CUDA device is there for a GPU-only
    upstream kernel (unless the local stand-in is on)."""
    import torch
    if STANDIN:
        return
    if not torch.cuda.is_available():
        raise bitparity.Unavailable("%s runs on a CUDA device only; none is usable here" % what)


def valid_rows(case, t, device):
    """T bools, true for a valid (non-padding) row."""
    import torch
    if case.padding is None:
        return torch.ones(t, dtype=torch.bool, device=device)
    return ~case.padding


def ascending(ids, weights):
    """The router reply's order: each row's expert ids ascending, each
    weight moved with its id. Upstream routers return their top-k in their
    own order (sorted by score, or unsorted); the op's ids are ascending.
    Returns (ids, weights, perm), perm the column of each sorted entry in
    the upstream order, so a gradient given in the op's order can be
    matched to the upstream's weights."""
    sorted_ids, perm = ids.sort(dim=-1)
    return sorted_ids, weights.gather(-1, perm), perm


def routing_map(ids, e):
    """T x E bools: true where the expert is among the row's ids."""
    import torch
    return torch.zeros(ids.shape[0], e, dtype=torch.bool, device=ids.device).scatter(1, ids.long(), True)
