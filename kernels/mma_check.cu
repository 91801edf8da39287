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

// The same chains on Hopper's warpgroup MMA, where the kernel is compiled
// for sm_90a (the subject does so on an sm_90 GPU): one warpgroup (4 warps)
// per case, a chain of `steps` wgmma.mma_async.sync.aligned.m64n8k16 with
// A from registers and B from shared memory, C in the accumulators first.
// Warp 0 holds the case's 16 rows of A and C (its fragments as mma_check's:
// the PTX ISA gives each warp of the warpgroup the m16n8k16 layout for its
// 16 rows); warps 1 to 3 compute zeros, which are not read back. B is the
// case's 8 x 16 block as two no-swizzle core matrices along k, each 8 rows
// (n) of 8 bf16 (k) in 16 bytes: k 0..7 at byte 0, k 8..15 at byte 128.
// The descriptor's leading and stride byte offsets are both 128, so the
// second core matrix is found whichever of the two the hardware takes for
// the k direction (with n = 8 there is no other core matrix to find).
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define BP_WGMMA_CHECK_THREADS 128

__device__ __forceinline__ unsigned long long bp_wgmma_desc(const void* smem) {
    const unsigned long long addr = (unsigned)__cvta_generic_to_shared(smem);
    const unsigned long long off = 128 >> 4;
    return ((addr & 0x3ffff) >> 4) | (off << 16) | (off << 32);  // base offset 0, no swizzle
}

extern "C" __global__ void __launch_bounds__(BP_WGMMA_CHECK_THREADS)
    wgmma_check(const unsigned short* __restrict__ a, const unsigned short* __restrict__ b,
                const float* __restrict__ c, int steps, unsigned* __restrict__ d) {
    __shared__ __align__(128) unsigned short sb[2 * 8 * 8];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int g = lane >> 2;
    const int t = (lane & 3) * 2;
    const long long kk = 16LL * steps;
    const long long tile = blockIdx.x;
    const unsigned short* ca = a + tile * 16 * kk;
    const unsigned short* cb = b + tile * 8 * kk;
    const float* cc = c + tile * 128;
    const bool mine = warp == 0;
    float acc0 = mine ? cc[g * 8 + t] : 0.0f, acc1 = mine ? cc[g * 8 + t + 1] : 0.0f;
    float acc2 = mine ? cc[(g + 8) * 8 + t] : 0.0f, acc3 = mine ? cc[(g + 8) * 8 + t + 1] : 0.0f;
    const unsigned long long desc = bp_wgmma_desc(sb);
    for (int s = 0; s < steps; ++s) {
        const long long k0 = 16LL * s;
        // Every thread is past the previous step's wgmma (waited for below).
        __syncthreads();
        {
            const int i = threadIdx.x;  // core matrix i / 64, row n, element e
            const int kc = i >> 6, n = (i >> 3) & 7, e = i & 7;
            sb[i] = cb[n * kk + k0 + kc * 8 + e];
        }
        // The copies are generic-proxy writes; wgmma reads through the
        // async proxy.
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        __syncthreads();
        const unsigned a0 = mine ? bp_mma_pair(ca + g * kk + k0 + t) : 0u;
        const unsigned a1 = mine ? bp_mma_pair(ca + (g + 8) * kk + k0 + t) : 0u;
        const unsigned a2 = mine ? bp_mma_pair(ca + g * kk + k0 + t + 8) : 0u;
        const unsigned a3 = mine ? bp_mma_pair(ca + (g + 8) * kk + k0 + t + 8) : 0u;
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
        // scale-d true (d = a b + d), a and b not negated, b not transposed
        // (k-major).
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "setp.ne.b32 p, 1, 0;\n"
            "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 "
            "{%0, %1, %2, %3}, {%4, %5, %6, %7}, %8, p, 1, 1, 0;\n"
            "}\n"
            : "+f"(acc0), "+f"(acc1), "+f"(acc2), "+f"(acc3)
            : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc)
            : "memory");
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    }
    if (mine) {
        unsigned* cd = d + tile * 128;
        cd[g * 8 + t] = __float_as_uint(acc0);
        cd[g * 8 + t + 1] = __float_as_uint(acc1);
        cd[(g + 8) * 8 + t] = __float_as_uint(acc2);
        cd[(g + 8) * 8 + t + 1] = __float_as_uint(acc3);
    }
}
#endif
