// The SwiGLU epilogues of the shared expert (docs/ops/shared_expert.md) on the
// f32 results g and u of the gate and up dot products, every operation one
// rounding (common.cuh). kernels/shared_expert.cu and shared_expert_tc.cu keep
// their own copies of these lines, so that their mutants (kernels/mutants.toml)
// keep their ids, and so does shared_expert_cublas.cu (a test compares its copy
// with the strict kernel's); the functions are the same.

#pragma once

#include "common.cuh"
#include "expf.cuh"

namespace bp {
namespace swiglu {

typedef unsigned short bf16_t;

// A bf16 as the f32 it is exactly.
__device__ __forceinline__ float bf16_value(bf16_t v) { return __uint_as_float((unsigned)v << 16); }

// RN-even of an f32 to bf16: NaN stays NaN (quiet bit set, sign kept: a NaN
// whose payload lies only in the low half would otherwise become inf), a
// finite value past the largest bf16 rounds to inf, subnormals are rounded
// like any other value (no flush).
__device__ __forceinline__ bf16_t bf16_rne(float x) {
    const unsigned b = __float_as_uint(x);
    if (x != x) return (bf16_t)((b >> 16) | 0x0040u);
    return (bf16_t)((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}

// sigmoid as docs/ops/router.md#the-sigmoid: 1 / (1 + exp(-g)), exp correctly rounded.
__device__ __forceinline__ float sigmoid(float g, const double* pow2) {
    return div(1.0f, add(1.0f, exp_cr(-g, pow2)));
}

// The forward: h = bf16((g * sig) * u).
__device__ __forceinline__ bf16_t h_value(float g, float u, const double* pow2) {
    return bf16_rne(mul(mul(g, sigmoid(g, pow2)), u));
}

// The backward at dh = d: dgate = (d * u) * dsilu, dup = d * silu, with
// silu = g * sig and dsilu = sig * (1 + g * (1 - sig)); each rounded to bf16.
__device__ __forceinline__ void dz_values(float g, float u, float d, const double* pow2, bf16_t* dgate,
                                          bf16_t* dup) {
    const float sig = sigmoid(g, pow2);
    const float silu = mul(g, sig);
    const float dsilu = mul(sig, add(1.0f, mul(g, __fsub_rn(1.0f, sig))));
    *dgate = bf16_rne(mul(mul(d, u), dsilu));
    *dup = bf16_rne(mul(d, silu));
}

}  // namespace swiglu
}  // namespace bp
