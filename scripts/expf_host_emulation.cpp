// kernels/expf.cuh compiled for the CPU, to check bp::exp_cr on all 2^32
// inputs without a GPU (scripts/expf-host-emulation runs it). Each CUDA
// intrinsic it uses is one IEEE double operation rounded to nearest, which
// x86-64's SSE2 arithmetic is too (compiled with -ffp-contract=off, no fast
// math: no contraction, no flush to zero; __fma_rn is std::fma, one
// rounding), so this computes the GPU's bits. What it
// cannot show: that the GPU's compiler and hardware honour those semantics
// (the exhaustive check on the GPU does).
//
// Output: one line per block of 2^24 inputs (block index, FNV-1a 64 of the
// results' bits, any NaN written as 0x7fc00000), the same lines as
// `cargo run --release -p oracles --example expf_digest` prints for the CPU
// reference.

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#define __device__
#define __forceinline__ inline
#define __noinline__

static struct {
    unsigned x;
} threadIdx = {0};
static struct {
    unsigned x;
} blockDim = {1};

static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dsub_rn(double a, double b) { return a - b; }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline double __fma_rn(double a, double b, double c) { return std::fma(a, b, c); }
static inline int __double2loint(double d) {
    uint64_t b;
    std::memcpy(&b, &d, sizeof b);
    return static_cast<int>(static_cast<uint32_t>(b));
}
static inline int __double2hiint(double d) {
    uint64_t b;
    std::memcpy(&b, &d, sizeof b);
    return static_cast<int>(static_cast<uint32_t>(b >> 32));
}
static inline double __hiloint2double(int hi, int lo) {
    const uint64_t b = (static_cast<uint64_t>(static_cast<uint32_t>(hi)) << 32) | static_cast<uint32_t>(lo);
    double d;
    std::memcpy(&d, &b, sizeof d);
    return d;
}
static inline float __double2float_rn(double d) { return static_cast<float>(d); }
static inline unsigned __float_as_uint(float f) {
    unsigned u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}
static inline float __uint_as_float(unsigned u) {
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}
static inline double __longlong_as_double(long long v) {
    double d;
    std::memcpy(&d, &v, sizeof d);
    return d;
}

#include "../kernels/expf.cuh"

static const unsigned kBlockBits = 24;

static double pow2_table[BP_EXP_TABLE];

static uint64_t block_digest(uint64_t block) {
    uint64_t h = 0xcbf29ce484222325ull;
    const uint64_t first = block << kBlockBits;
    for (uint64_t i = 0; i < (1ull << kBlockBits); ++i) {
        const float x = __uint_as_float(static_cast<unsigned>(first + i));
        const float y = bp::exp_cr(x, pow2_table);
        unsigned b = __float_as_uint(y);
        if (y != y) b = 0x7fc00000u;
        for (int k = 0; k < 4; ++k) {
            h ^= (b >> (8 * k)) & 0xffu;
            h *= 0x100000001b3ull;
        }
    }
    return h;
}

int main() {
    bp::exp_table_load(pow2_table);
    const uint64_t blocks = 1ull << (32 - kBlockBits);
    std::vector<uint64_t> digest(blocks);
    unsigned threads = std::thread::hardware_concurrency();
    if (threads == 0) threads = 1;
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] {
            for (uint64_t b = t; b < blocks; b += threads) digest[b] = block_digest(b);
        });
    }
    for (auto& th : pool) th.join();
    for (uint64_t b = 0; b < blocks; ++b) std::printf("%3llu %016llx\n", (unsigned long long)b, (unsigned long long)digest[b]);
    return 0;
}
