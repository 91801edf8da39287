"""A seqwise_loss provider that dies slowly on every case with an odd T, as
a CUDA process does (its pipes close as it exits, then its GPU context
takes seconds to tear down): its main thread ends (the kernel shows the
process exiting), another thread closes its stdout, writes its last stderr
line 1.5 s later and exits with code 7. bitparity must wait for that exit
and report the child's own code and that last line, not "killed by
bitparity" with the line lost. Correct (the pure provider) on even T.
Linux only (x86-64 or aarch64: the raw exit of one thread)."""
import ctypes
import os
import platform
import sys
import threading
import time

import _path  # noqa: F401
import bitparity
from bitparity import _ops
import pure_seqwise_loss as pure

# The syscall that ends the calling thread alone (exit, not exit_group).
SYS_EXIT = {"x86_64": 60, "aarch64": 93}[platform.machine()]


def die_slowly(stream, t):
    def last_words():
        os.close(stream.out)
        time.sleep(1.5)
        print("slow_exit.py: last words on T=%d" % t, file=sys.stderr, flush=True)
        os._exit(7)
    threading.Thread(target=last_words).start()
    ctypes.CDLL(None).syscall(SYS_EXIT, 0)


def main():
    stream = bitparity._Stream()
    stream.write({"protocol": "bitparity", "version": 1, "ops": ["seqwise_loss"], "profile": "serial"})
    while True:
        got = stream.read()
        if got is None:
            return
        header, buffers = got
        why = _ops.SeqwiseLoss.validate(header, buffers)
        if why:
            stream.write({"error": "invalid", "message": why})
            continue
        case = _ops.SeqwiseLoss.decode(header, buffers, "python", None)
        if case.t % 2 == 1:
            die_slowly(stream, case.t)
        direction = header["dir"]
        result = pure.forward(case) if direction == "fwd" else pure.backward(case)
        outputs = bitparity._outputs(_ops.SeqwiseLoss.outputs(header, direction), result, "python")
        stream.write({"ok": True}, outputs)


if __name__ == "__main__":
    main()
