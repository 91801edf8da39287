"""A correct seqwise_loss provider that leaves processes behind, the ways
that escape a process group: a grandchild in a session of its own
(setsid), and a daemon (double fork, its parent gone). They sleep, with the
provider's arguments as their command line (a test gives a token to find
them by). bitparity must leave none running when it ends, however it ends
(tests/it/hostile.rs). With the argument `hang` it never answers a request."""
import os
import sys
import time

import _path  # noqa: F401
import bitparity
import pure_seqwise_loss as pure


def escape_session():
    if os.fork() == 0:
        os.setsid()
        os.closerange(0, 3)
        time.sleep(600)
        os._exit(0)


def daemon():
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.closerange(0, 3)
            time.sleep(600)
            os._exit(0)
        os._exit(0)


def hang(case):
    if "hang" in sys.argv[1:]:
        while True:
            time.sleep(3600)


def forward(case):
    hang(case)
    return pure.forward(case)


def backward(case):
    hang(case)
    return pure.backward(case)


if __name__ == "__main__":
    escape_session()
    daemon()
    sys.stderr.write("spawner.py: started\n")
    bitparity.serve(op="seqwise_loss", forward=forward, backward=backward, backend="python")
