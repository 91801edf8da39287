// The SwiGLU epilogues of the cuBLAS subject of `shared_expert`
// (src/subject/cuda/shared_expert_cublas.rs): cuBLAS computes the four GEMMs (z
// and dX in f32, y and dh rounded to bf16 by cuBLAS), these two elementwise
// kernels compute what lies between them, exactly as docs/ops/shared_expert.md
// writes it and as kernels/shared_expert.cu's fused epilogues do. So the
// subject differs from the profile oracle only in cuBLAS's reduction order
// (and, for y and dh, in how cuBLAS rounds its f32 sums to bf16): what
// bitparity judges it by (accuracy for an unknown order, batch invariance).
//
// Not hunted by `bitparity mutants` (KernelId::op is None for it): the
// campaign judges the strict kernels, and this file serves a vendor library.

#include "common.cuh"
#include "expf.cuh"

namespace bp {
namespace se_blas {

typedef unsigned short bf16_t;

// The next three are kernels/shared_expert.cu's bf16_value, bf16_rne and
// sigmoid, character for character (a test of the Rust subject compares
// them): RN-even to bf16 with NaN kept quiet, overflow to inf, subnormals
// rounded; sigmoid = 1 / (1 + exp(-g)), each operation rounded, exp
// correctly rounded.
__device__ __forceinline__ float bf16_value(bf16_t v) { return __uint_as_float((unsigned)v << 16); }

__device__ __forceinline__ bf16_t bf16_rne(float x) {
    const unsigned b = __float_as_uint(x);
    if (x != x) return (bf16_t)((b >> 16) | 0x0040u);
    return (bf16_t)((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}

__device__ __forceinline__ float sigmoid(float g, const double* pow2) {
    return div(1.0f, add(1.0f, exp_cr(-g, pow2)));
}

}  // namespace se_blas
}  // namespace bp

using namespace bp;
using namespace bp::se_blas;

// h = bf16((g sigmoid(g)) u) for z = [g, u] (T x 2F f32, row-major), one
// thread per (t, j), grid-stride.
extern "C" __global__ void se_swiglu_fwd(const float* __restrict__ z, int T, int F, bf16_t* __restrict__ h) {
    __shared__ double pow2[BP_EXP_TABLE];
    exp_table_load(pow2);
    __syncthreads();
    const long long n = (long long)T * F;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        const long long t = i / F;
        const int j = (int)(i - t * F);
        const float g = z[t * 2 * F + j], u = z[t * 2 * F + F + j];
        const float sig = sigmoid(g, pow2);
        h[i] = bf16_rne(mul(mul(g, sig), u));
    }
}

// dz = bf16([dgate, dup]) (T x 2F) from z (T x 2F f32) and dh (T x F bf16),
// docs/ops/shared_expert.md#backward's formulas in its order.
extern "C" __global__ void se_swiglu_bwd(const float* __restrict__ z, const bf16_t* __restrict__ dh, int T, int F,
                                         bf16_t* __restrict__ dz) {
    __shared__ double pow2[BP_EXP_TABLE];
    exp_table_load(pow2);
    __syncthreads();
    const long long n = (long long)T * F;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        const long long t = i / F;
        const int j = (int)(i - t * F);
        const float g = z[t * 2 * F + j], u = z[t * 2 * F + F + j];
        const float d = bf16_value(dh[i]);
        const float sig = sigmoid(g, pow2);
        const float silu = mul(g, sig);
        const float dsilu = mul(sig, add(1.0f, mul(g, __fsub_rn(1.0f, sig))));
        const float dgate = mul(mul(d, u), dsilu);
        const float dup = mul(d, silu);
        dz[t * 2 * F + j] = bf16_rne(dgate);
        dz[t * 2 * F + F + j] = bf16_rne(dup);
    }
}
