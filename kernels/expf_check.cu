// The exhaustive check of bp::exp_cr (src/bin/bitparity-expf-check.rs): each
// thread evaluates one f32 input, start + i, and writes its result's bits
// (bits, not a float: no canonicalisation of NaN payloads on the way back).
// The host keeps start + count <= 2^32, so start + i never wraps, and
// count <= 2^31, so blockIdx.x * blockDim.x + threadIdx.x fits in 32 bits.

#include "expf.cuh"

#define BP_EXPF_CHECK_THREADS 256

extern "C" __global__ void __launch_bounds__(BP_EXPF_CHECK_THREADS)
    expf_check(unsigned int start, unsigned int count, unsigned int* __restrict__ out) {
    const unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) out[i] = __float_as_uint(bp::exp_cr(__uint_as_float(start + i)));
}
