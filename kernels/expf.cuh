// The correctly rounded f32 exponential of bitparity's kernels (SPEC section
// 2: transcendentals are the exactly rounded f32 of the true value).
//
// placeholder, replaced by the expf branch: (float)exp((double)x) rounds
// twice (the double result, then to f32), so it is not correctly rounded on
// every input and makes no conformance claim; it only gives router.cu the
// signature it calls, bp::exp_cr(float) -> float, so that it compiles.

#pragma once

namespace bp {

__device__ __forceinline__ float exp_cr(float x) { return (float)exp((double)x); }

}  // namespace bp
