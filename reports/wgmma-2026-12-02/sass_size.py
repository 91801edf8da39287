#!/usr/bin/env python3
"""Instructions per entry point of kernels/shared_expert_wgmma.cu, as NVRTC
13.0 compiles it for sm_90a (the subject's options: --fmad=false), counted
in nvdisasm's listing. Run from the repository root after
`. scripts/nvrtc-env`, with NVDISASM naming an nvdisasm binary (PyPI wheel
nvidia-cuda-nvdisasm; 13.2.86 was used: no 13.0 wheel exists)."""
import ctypes, glob, os, re, subprocess, sys, tempfile

lib = ctypes.CDLL(glob.glob(os.path.expanduser("~/.cache/bitparity/nvrtc-13.0/nvidia/cu13/lib/libnvrtc.so.13"))[0])
src = open("kernels/shared_expert_wgmma.cu").read().encode()
hdrs = ["common.cuh", "expf.cuh", "expf_hard.cuh", "swiglu.cuh"]
body = [open("kernels/" + h).read().encode() for h in hdrs]
prog = ctypes.c_void_p()
n = len(hdrs)
lib.nvrtcCreateProgram(ctypes.byref(prog), src, b"k.cu", n, (ctypes.c_char_p * n)(*body), (ctypes.c_char_p * n)(*[h.encode() for h in hdrs]))
opts = [b"--gpu-architecture=sm_90a", b"--fmad=false", b"--std=c++17"]
if lib.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts)) != 0:
    sys.exit("NVRTC failed")
size = ctypes.c_size_t()
lib.nvrtcGetCUBINSize(prog, ctypes.byref(size))
cubin = ctypes.create_string_buffer(size.value)
lib.nvrtcGetCUBIN(prog, cubin)
with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
    f.write(cubin.raw)
    f.flush()
    listing = subprocess.run([os.environ.get("NVDISASM", "nvdisasm"), f.name], capture_output=True, text=True, check=True).stdout
counts, name = {}, None
for line in listing.splitlines():
    m = re.match(r"^\.text\.(\w+):", line)
    if m:
        name = m.group(1)
        counts[name] = 0
    elif line.startswith("\t.section"):
        name = None
    elif name and re.match(r"^\s+/\*[0-9a-f]{4,6}\*/", line):
        counts[name] += 1
for k, v in sorted(counts.items()):
    print(f"{k:24} {v:6} instructions {v * 16 // 1024:4} KiB")
