"""Random moe_combine cases through kernels/moe_combine.cu compiled for the
CPU (argv[1], built by scripts/moe-combine-host-emulation), each output
compared bit for bit (any NaN matches any NaN) with the `serial` profile as
python/providers/tests/pure_moe_combine.py computes it; the atomic scatter
only where no token keeps more than two choices (then every order gives
the same bits). The cases go through the package's own validation and
decoding (python/bitparity/_ops.py), so N_slots is the one the wire uses.

    python3 scripts/moe_combine_host_emulation.py EMULATOR [CASES [SEED]]

Exit status 1 when an output differs.
"""
import os
import random
import struct
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "python", "providers", "tests"))
from bitparity import _ops  # noqa: E402
import pure_moe_combine as pure  # noqa: E402

POISON = 0x7FC0DEAD


def bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def is_nan(b):
    return (b & 0x7F800000) == 0x7F800000 and (b & 0x7FFFFF) != 0


def value(rng):
    """f32 bits: mostly ordinary values, and the classes SPEC.md section 9 names."""
    c = rng.random()
    if c < 0.5:
        return bits(rng.gauss(0, 4))
    if c < 0.6:
        return rng.choice([0, 0x80000000])
    if c < 0.65:
        return rng.randint(1, 0x7FFFFF) | rng.choice([0, 0x80000000])  # subnormal
    if c < 0.68:
        return rng.choice([0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001])
    if c < 0.75:
        return bits(rng.choice([1, -1]) * 2.0 ** rng.randint(100, 127))  # products overflow
    if c < 0.85:
        return bits(float(rng.randint(-3, 3)))  # ties and cancellations
    return bits(rng.choice([1, -1]) * 2.0 ** rng.randint(-140, -100))


def shape(rng):
    if rng.random() < 0.1:  # several blocks of moe_dispatch_rank (4 chunks of 64 tokens each)
        t, e, h = rng.choice([300, 513, 700]), rng.choice([3, 37]), rng.choice([1, 5])
        cap = rng.choice([None, 7, 100, 299])
    else:
        t = rng.choice([1, 2, 3, 63, 64, 65, 129, 200, rng.randint(1, 140)])
        e = rng.choice([1, 2, 3, 5, 33, 40, rng.randint(1, 40)])
        h = rng.choice([1, 2, 31, 32, 33, 70, rng.randint(1, 70)])
        cap = rng.choice([None, 0, 1, 2, t, t + 5, rng.randint(0, t)])
    k = rng.choice([1, e, rng.randint(1, e)])
    skew = rng.random() < 0.3  # most tokens on the same experts: capacity bites
    ids = [list(range(k)) if skew and rng.random() < 0.8 else rng.sample(range(e), k) for _ in range(t)]
    pad = [rng.random() < 0.2 for _ in range(t)] if rng.random() < 0.5 else None
    return t, h, e, k, cap, rng.randint(0, 3), h + rng.choice([0, 0, 1, 3]), ids, pad


def storage(rng, rows, h, off, ld):
    if rows == 0:
        return []
    s = [POISON] * (off + (rows - 1) * ld + h)
    for r in range(rows):
        for c in range(h):
            s[off + r * ld + c] = value(rng)
    return s


def packed(dtype, values):
    code = {"u32": "I", "f32": "I", "u8": "B"}[dtype]
    return (dtype, len(values), memoryview(struct.pack("<%d%s" % (len(values), code), *values)))


def main():
    emulator = sys.argv[1]
    ncases = int(sys.argv[2]) if len(sys.argv) > 2 else 60
    rng = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 1)
    lines, cases = [], []
    for _ in range(ncases):
        t, h, e, k, cap, off, ld, ids, pad = shape(rng)
        header = {"t": t, "h": h, "e": e, "k": k, "capacity": cap, "offset": off, "row_stride": ld,
                  "has_padding": pad is not None, "dir": "bwd"}
        flat_ids = [v for row in ids for v in row]
        weights = [value(rng) for _ in range(t * k)]
        buffers = {"ids": packed("u32", flat_ids), "weights": packed("f32", weights)}
        if pad is not None:
            buffers["padding"] = packed("u8", [1 if p else 0 for p in pad])
        n = _ops.MoeCombine.n_slots(header, buffers)
        laid = {"x": storage(rng, t, h, off, ld), "x_exp": storage(rng, n, h, off, ld),
                "dy": storage(rng, t, h, off, ld), "g_disp": storage(rng, n, h, off, ld)}
        for name, v in laid.items():
            buffers[name] = packed("f32", v)
        why = _ops.MoeCombine.validate(header, buffers)
        if why:
            raise SystemExit("a generated case is invalid: %s" % why)
        cases.append(_ops.MoeCombine.decode(header, buffers, "python", None))
        gy, gx = rng.choice([1, 2, 3, 65535]), rng.choice([1, 2, 5])
        lines.append(" ".join(map(str, [t, h, e, k, -1 if cap is None else min(cap, t), off, ld, n, gy, gx])))
        padding = [1 if (pad and p) else 0 for p in (pad or [0] * t)]
        for values in (flat_ids, weights, padding, laid["x"], laid["x_exp"], laid["dy"], laid["g_disp"]):
            lines.append(" ".join(map(str, values)))
    run = subprocess.run([emulator], input="\n".join(lines) + "\n", capture_output=True, text=True)
    if run.returncode != 0 or run.stderr:
        raise SystemExit("the emulator failed (%d): %s" % (run.returncode, run.stderr[-2000:]))
    replies = run.stdout.split("end\n")
    failures = 0
    for i, case in enumerate(cases):
        got = {}
        for line in replies[i].strip().split("\n"):
            name, *values = line.split()
            got[name] = [int(v) for v in values]
        slot, counts, x_disp, y = pure.forward(case)
        dx_exp, dw, dx = pure.backward(case)
        want = {"slot": [s & 0xFFFFFFFF for row in slot for s in row], "counts": counts,
                "x_disp": [bits(v) for row in x_disp for v in row], "y": [bits(v) for row in y for v in row],
                "dx_exp": [bits(v) for row in dx_exp for v in row], "dw": [bits(v) for v in dw],
                "dx": [bits(v) for row in dx for v in row]}
        if all(sum(1 for s in row if s >= 0) <= 2 for row in slot):
            want["y_scatter"], want["dx_scatter"] = want["y"], want["dx"]
        for name, w in want.items():
            g = got.get(name, [])
            diffs = [(j, a, b) for j, (a, b) in enumerate(zip(g, w)) if a != b and not (is_nan(a) and is_nan(b))]
            if len(g) != len(w) or diffs:
                failures += 1
                print("case %d (T=%d H=%d E=%d k=%d capacity=%r offset=%d stride=%d N_slots=%d): %s differs: "
                      "%d values for %d; first (index, kernel bits, profile bits): %s"
                      % (i, case.t, case.h, case.e, case.k, case.capacity, case.offset, case.row_stride,
                         case.n_slots, name, len(g), len(w), diffs[:4]))
    print("moe-combine-host-emulation: %d cases, %d outputs differ" % (len(cases), failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
