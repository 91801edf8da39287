"""A correct seqwise_loss provider that leaves processes behind, the ways
that escape a process group: a grandchild in a session of its own
(setsid), and a daemon (double fork, its parent gone). Each writes its pid
to the file $SPAWNER_PIDS and sleeps. bitparity must leave none running
when it ends, however it ends (tests/containment.rs). With SPAWNER_HANG=1
it never answers a request."""
import os
import sys
import time

import _path  # noqa: F401
import bitparity
import pure_seqwise_loss as pure


def note(pid):
    with open(os.environ["SPAWNER_PIDS"], "a") as f:
        f.write("%d\n" % pid)


def escape_session():
    if os.fork() == 0:
        os.setsid()
        note(os.getpid())
        os.closerange(0, 3)
        time.sleep(600)
        os._exit(0)


def daemon():
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            note(os.getpid())
            os.closerange(0, 3)
            time.sleep(600)
            os._exit(0)
        os._exit(0)


def hang(case):
    if os.environ.get("SPAWNER_HANG") == "1":
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
