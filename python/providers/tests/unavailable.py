"""A seqwise_loss provider that answers every valid case `unavailable` (it
computes nothing) while `serve` still refuses the invalid ones: a run of it
judged nothing it computes, and must not pass (exit 3, tests/it/hostile.rs)."""
import _path  # noqa: F401
import bitparity


def never(case):
    raise bitparity.Unavailable("this provider computes nothing")


if __name__ == "__main__":
    bitparity.serve(op="seqwise_loss", forward=never, backward=never, backend="python")
