// The tensor core's MMA step on the GPU, for the check of its model
// (src/bin/bitparity-mma-check.rs against oracles/src/mma.rs).
//
// One warp per case, one block per warp. A case is a chain of `steps`
// mma.sync.m16n8k16.row.col.f32.bf16.bf16.f32 in ascending K order, each
// step's D the next step's C (steps = 1: one step, the model's unit):
//   a: 16 rows (m) of 16 * steps bf16 (k), row-major;
//   b: 8 rows (n) of 16 * steps bf16 (k): B's columns, as "col" reads them;
//   c: 16 x 8 f32, row-major (m, n);
//   d: 16 x 8, the result's bits (bits, so that NaN payloads and the sign of
//      zero come back as the hardware wrote them).
// The fragments are the PTX ISA's for m16n8k16 with 16-bit inputs: lane l
// holds rows l / 4 and l / 4 + 8, columns (l % 4) * 2 and + 1, and + 8 for
// the last two registers of A; of B, k = (l % 4) * 2, + 1, + 8, + 9 for
// column l / 4. Two 16-bit loads make each register (the element of the
// lower k in the low half), so no 4-byte alignment is assumed.

#define BP_MMA_CHECK_THREADS 32

__device__ __forceinline__ unsigned bp_mma_pair(const unsigned short* p) {
    return (unsigned)p[0] | ((unsigned)p[1] << 16);
}

extern "C" __global__ void __launch_bounds__(BP_MMA_CHECK_THREADS)
    mma_check(const unsigned short* __restrict__ a, const unsigned short* __restrict__ b,
              const float* __restrict__ c, int steps, unsigned* __restrict__ d) {
    const int lane = threadIdx.x;
    const int g = lane >> 2;
    const int t = (lane & 3) * 2;
    const long long kk = 16LL * steps;
    const long long tile = blockIdx.x;
    const unsigned short* ca = a + tile * 16 * kk;
    const unsigned short* cb = b + tile * 8 * kk;
    const float* cc = c + tile * 128;
    float acc0 = cc[g * 8 + t], acc1 = cc[g * 8 + t + 1];
    float acc2 = cc[(g + 8) * 8 + t], acc3 = cc[(g + 8) * 8 + t + 1];
    for (int s = 0; s < steps; ++s) {
        const long long k0 = 16LL * s;
        const unsigned a0 = bp_mma_pair(ca + g * kk + k0 + t);
        const unsigned a1 = bp_mma_pair(ca + (g + 8) * kk + k0 + t);
        const unsigned a2 = bp_mma_pair(ca + g * kk + k0 + t + 8);
        const unsigned a3 = bp_mma_pair(ca + (g + 8) * kk + k0 + t + 8);
        const unsigned b0 = bp_mma_pair(cb + g * kk + k0 + t);
        const unsigned b1 = bp_mma_pair(cb + g * kk + k0 + t + 8);
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
            "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
            : "+f"(acc0), "+f"(acc1), "+f"(acc2), "+f"(acc3)
            : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    }
    unsigned* cd = d + tile * 128;
    cd[g * 8 + t] = __float_as_uint(acc0);
    cd[g * 8 + t + 1] = __float_as_uint(acc1);
    cd[(g + 8) * 8 + t] = __float_as_uint(acc2);
    cd[(g + 8) * 8 + t + 1] = __float_as_uint(acc3);
}
