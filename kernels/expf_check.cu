// The exhaustive check of bp::exp_cr (src/bin/bitparity-expf-check.rs): each
// thread evaluates one f32 input, start + i, and writes its result's bits
// (bits, not a float: no canonicalisation of NaN payloads on the way back).
// The host keeps start + count <= 2^32, so start + i never wraps, and
// count <= 2^31, so blockIdx.x * blockDim.x + threadIdx.x fits in 32 bits.
// exp_cr reads its table of 2^(j/64) from shared memory, as the router's
// kernels do.
//
// The same pass checks the router's reciprocal, bp::rcp_rn_mid (common.cuh),
// against __frcp_rn (RN(1/y)) on every input y in [1, 2^125), where the
// router uses it: on a difference the input's result gets its last bit
// flipped (+inf becomes a NaN), so the comparison with the CPU's exp fails
// at that input and the check fails.

#include "common.cuh"
#include "expf.cuh"

#define BP_EXPF_CHECK_THREADS 256

extern "C" __global__ void __launch_bounds__(BP_EXPF_CHECK_THREADS)
    expf_check(unsigned int start, unsigned int count, unsigned int* __restrict__ out) {
    __shared__ double pow2[BP_EXP_TABLE];
    bp::exp_table_load(pow2);
    __syncthreads();
    const unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) {
        const float x = __uint_as_float(start + i);
        unsigned r = __float_as_uint(bp::exp_cr(x, pow2));
        if (x >= 1.0f && x < 0x1p125f && __float_as_uint(bp::rcp_rn_mid(x)) != __float_as_uint(__frcp_rn(x))) r ^= 1u;
        out[i] = r;
    }
}
