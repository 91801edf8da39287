"""A seqwise_loss provider that never answers a case with an odd T (it
sleeps forever); correct on even T. bitparity must give up after the
subject's timeout, kill it, report a failure and go on."""
import sys
import time

import _path  # noqa: F401
import bitparity
import pure_seqwise_loss as pure


def hang(case):
    if case.t % 2 == 1:
        print("hang.py: sleeping forever on T=%d" % case.t, file=sys.stderr, flush=True)
        while True:
            time.sleep(3600)


def forward(case):
    hang(case)
    return pure.forward(case)


def backward(case):
    hang(case)
    return pure.backward(case)


if __name__ == "__main__":
    bitparity.serve(op="seqwise_loss", forward=forward, backward=backward, backend="python")
