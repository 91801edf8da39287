"""A seqwise_loss provider that dies on every case with an odd T: by
SIGSEGV (`crash.py segv`, the default) or by exiting (`crash.py exit`).
Correct (the pure provider) on even T. bitparity must report the death as a
failure, restart the child for the next case, shrink the case (to T = 1) and
save it."""
import os
import signal
import sys

import _path  # noqa: F401
import bitparity
import pure_seqwise_loss as pure

MODE = sys.argv[1] if len(sys.argv) > 1 else "segv"


def die(case):
    if case.t % 2 == 1:
        print("crash.py: dying on T=%d (%s)" % (case.t, MODE), file=sys.stderr, flush=True)
        if MODE == "exit":
            os._exit(3)
        os.kill(os.getpid(), signal.SIGSEGV)


def forward(case):
    die(case)
    return pure.forward(case)


def backward(case):
    die(case)
    return pure.backward(case)


if __name__ == "__main__":
    bitparity.serve(op="seqwise_loss", forward=forward, backward=backward, backend="python")
