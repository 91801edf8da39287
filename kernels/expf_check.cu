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
//
// And it checks bp::div_by (common.cuh: one reciprocal per divisor, the
// seqwise_loss kernels' division) against __fdiv_rn on one pair per input:
// x = the input, d a divisor hashed from it, in div_by's fast range
// [2^-31, 2^33) with a random sign and significand (one in eight with the
// significand all ones, one in eight a power of two: the reciprocal's hardest
// and easiest cases), so the 2^32 inputs give about 2^30 pairs on the fast
// path and the rest on __fdiv_rn's own. On a difference the result's second
// bit is flipped.

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
        unsigned h = (start + i) * 0x9e3779b1u;
        h ^= h >> 15;
        h *= 0x85ebca6bu;
        h ^= h >> 13;
        unsigned sig = h & 0x7fffffu;
        if ((h >> 29) == 0u) sig = 0x7fffffu;
        if ((h >> 29) == 1u) sig = 0u;
        const float d = __uint_as_float((h & 0x80000000u) | ((96u + ((h >> 23) & 63u)) << 23) | sig);
        if (__float_as_uint(bp::div_by(x, bp::divisor(d))) != __float_as_uint(__fdiv_rn(x, d))) r ^= 2u;
        out[i] = r;
    }
}
