"""A seqwise_loss provider that breaks the protocol on every case with an
odd T, as `garbage.py MODE` says:

- huge: a header length of 4 GiB (nothing may be allocated for it);
- json: a header that is not JSON;
- oversized: an ok reply listing more values than the case implies (and
  sending them);
- short: an ok reply whose buffers stop halfway, then silence;
- print: a stray print straight to the real stdout before the reply;
- mixed: json on T=7, short on every other odd T (a fast failure beside
  ones that hang: a run finds them out of order).

Correct (the pure provider) on even T."""
import os
import struct
import sys

import _path  # noqa: F401
import bitparity
from bitparity import _ops
import pure_seqwise_loss as pure

MODE = sys.argv[1] if len(sys.argv) > 1 else "json"


def main():
    stream = bitparity._Stream()
    stream.write({"protocol": "bitparity", "version": 1, "ops": ["seqwise_loss"], "profile": None})
    while True:
        got = stream.read()
        if got is None:
            return
        header, buffers = got
        direction = header["dir"]
        why = _ops.SeqwiseLoss.validate(header, buffers)
        if why:
            stream.write({"error": "invalid", "message": why})
            continue
        case = _ops.SeqwiseLoss.decode(header, buffers, "python", None)
        result = pure.forward(case) if direction == "fwd" else pure.backward(case)
        expected = _ops.SeqwiseLoss.outputs(header, direction)
        outputs = bitparity._outputs(expected, result, "python")
        if case.t % 2 == 0:
            stream.write({"ok": True}, outputs)
            continue
        mode = MODE
        if MODE == "mixed":
            mode = "json" if case.t == 7 else "short"
        if mode == "huge":
            os.write(stream.out, struct.pack("<I", 0xFFFFFFFF) + b"{" * 64)
        elif mode == "json":
            text = b"this is not json at all"
            os.write(stream.out, struct.pack("<I", len(text)) + text)
        elif mode == "oversized":
            big = [(name, dtype, count * 1000 + 7, data * 1000 + b"\0" * (7 * (4 if dtype != "u8" else 1)))
                   for (name, dtype, count, data) in outputs]
            stream.write({"ok": True}, big)
        elif mode == "short":
            listed = [[n, d, c] for (n, d, c, _) in outputs]
            text = ('{"ok":true,"buffers":%s}' % str(listed).replace("'", '"')).encode()
            data = b"".join(x[3] for x in outputs)
            os.write(stream.out, struct.pack("<I", len(text)) + text + data[: len(data) // 2])
        elif mode == "print":
            os.write(stream.out, b"hello from a stray print\n")
            stream.write({"ok": True}, outputs)
        # then wait for the next request (or the kill)


if __name__ == "__main__":
    main()
