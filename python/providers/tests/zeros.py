"""Any op's outputs as zeros of the right sizes (`zeros.py OP`): judges the
wire encoding of every op and the package's validation of the ops' rules
(docs/ops/<op>.md#validation; the validation property sends every invalid
variant: each must be refused), not a kernel. Also the round-trip benchmark's provider for router and
shared_expert."""
import sys

import _path  # noqa: F401
import bitparity
from bitparity import _ops

OP = sys.argv[1] if len(sys.argv) > 1 else "seqwise_loss"
# `--no-validate`: every decodable case reaches the functions, which refuse
# nothing: the validation property must then fail (tests/it/exec.rs).
VALIDATE = "--no-validate" not in sys.argv


def zeros(case, direction):
    h = dict(case.__dict__)
    return [[0] * count for (_, _, count) in _ops.OPS[OP].outputs(h, direction)]


def forward(case):
    out = zeros(case, "fwd")
    return tuple(out) if len(out) > 1 else out[0]


def backward(case):
    out = zeros(case, "bwd")
    return tuple(out) if len(out) > 1 else out[0]


if __name__ == "__main__":
    bitparity.serve(op=OP, forward=forward, backward=backward, backend="python", validate=VALIDATE)
