"""The least a seqwise_loss provider can do: zeros of the right sizes, no
validation. For measuring the protocol's round trips, not for judging:

    BITPARITY_MAX_TE=64 bitparity check --op seqwise_loss --property determinism \
        --cases 5000 --no-save --quiet --subject "exec:python3 python/providers/tests/trivial.py"

(determinism makes 4 round trips a case)."""
import _path  # noqa: F401
import bitparity


def forward(case):
    return 0.0, [0] * case.e, [0.0] * case.e


def backward(case):
    return [0.0] * (case.t * case.e)


if __name__ == "__main__":
    bitparity.serve(op="seqwise_loss", forward=forward, backward=backward, backend="python", validate=False)
