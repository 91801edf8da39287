// kernels/moe_combine.cu compiled for the CPU and run on it, to check its
// kernels without a GPU (scripts/moe-combine-host-emulation drives it with
// random cases and compares every output with the `serial` profile as
// python/providers/tests/pure_moe_combine.py computes it).
//
// Each CUDA thread of a kernel that synchronises (moe_dispatch_rank,
// moe_dispatch_scan, moe_combine_bwd_dw) is a std::thread, with a real
// barrier per warp (__syncwarp, and the two steps of every shuffle) and per
// block (__syncthreads); a thread that returns drops out of both, as an
// exited CUDA thread does. The other kernels run their threads one after
// another. Blocks run one after another. __fadd_rn and __fmul_rn are one
// IEEE f32 operation each, which x86-64's SSE arithmetic is too (compiled
// with -ffp-contract=off, no fast math: no contraction, no flush to zero).
// What it cannot show: the GPU's scheduling and memory model (lanes of a
// warp here advance only at the barriers), NVRTC's code, and the atomic
// scatter's nondeterminism (its atomics are serialised by a mutex).
//
// Input (stdin), per case, whitespace-separated integers: T H E k cap off
// ld N gy gx (cap: -1 for none, else min(C, T); N: N_slots; gy and gx:
// grid sizes for the launches that take any), then ids[T*k], the weights'
// bits[T*k], padding[T] (0/1), and the bits of x, x_exp, dy and g_disp as
// laid out in memory (offset off, row stride ld; T, N, T and N rows).
// Output, per case: one line per output (its name, then its values' bits:
// slot as i32 bits), then "end".

#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#define __device__
#define __global__
#define __forceinline__ inline
#define __restrict__ __restrict
#define __launch_bounds__(...)
#define __shared__
// common.cuh's inline PTX (its division helpers, unused here) compiles to nothing.
#define asm(...) (void)0

struct dim { unsigned x = 1, y = 1, z = 1; };
thread_local dim threadIdx, blockIdx;
dim blockDim, gridDim;

struct Warp {
    std::barrier<> bar{32};
    uint32_t ex[32];
};
thread_local Warp* my_warp = nullptr;
thread_local std::barrier<>* my_block = nullptr;
std::mutex atomic_mu;

static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
static inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
static inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
template <class T> static inline T __ldg(const T* p) { return *p; }
static inline void __syncwarp(unsigned = 0xffffffffu) { my_warp->bar.arrive_and_wait(); }
static inline void __syncthreads() { my_block->arrive_and_wait(); }
template <class T> static inline T xchg(T v, int src, int lane, bool keep) {
    uint32_t b; std::memcpy(&b, &v, 4);
    my_warp->ex[lane] = b;
    my_warp->bar.arrive_and_wait();
    uint32_t r = keep ? b : my_warp->ex[src];
    my_warp->bar.arrive_and_wait();
    T out; std::memcpy(&out, &r, 4); return out;
}
static inline int lane_id() { return threadIdx.x & 31; }
template <class T> static inline T __shfl_sync(unsigned, T v, int src) { return xchg(v, src & 31, lane_id(), false); }
template <class T> static inline T __shfl_xor_sync(unsigned, T v, int o) { return xchg(v, lane_id() ^ o, lane_id(), false); }
template <class T> static inline T __shfl_up_sync(unsigned, T v, unsigned d) {
    int l = lane_id(); return xchg(v, l - (int)d, l, l < (int)d);
}
static inline float atomicAdd(float* p, float v) { std::lock_guard<std::mutex> g(atomic_mu); float o = *p; *p = o + v; return o; }
using std::min; using std::max;

// moe_dispatch_rank's dynamic shared memory (blocks run one at a time).
namespace bp { namespace moe { unsigned rank_sh[1 << 20]; } }
#include "../kernels/moe_combine.cu"

// Runs a kernel over grid x block, with the launch contract's shapes;
// threaded: one std::thread per thread of a block.
static void launch(dim grid, dim block, bool threaded, const std::function<void()>& body) {
    gridDim = grid; blockDim = block;
    for (unsigned by = 0; by < grid.y; ++by)
        for (unsigned bx = 0; bx < grid.x; ++bx) {
            unsigned n = block.x;
            if (!threaded) {
                for (unsigned t = 0; t < n; ++t) { blockIdx = {bx, by, 0}; threadIdx = {t, 0, 0}; body(); }
                continue;
            }
            std::barrier<> bbar((std::ptrdiff_t)n);
            std::vector<std::unique_ptr<Warp>> warps;
            for (unsigned w = 0; w < (n + 31) / 32; ++w) warps.emplace_back(new Warp());
            std::vector<std::thread> ts;
            for (unsigned t = 0; t < n; ++t)
                ts.emplace_back([&, t] {
                    blockIdx = {bx, by, 0}; threadIdx = {t, 0, 0};
                    my_warp = warps[t / 32].get(); my_block = &bbar;
                    body();
                    my_warp->bar.arrive_and_drop();
                    bbar.arrive_and_drop();
                });
            for (auto& t : ts) t.join();
        }
}

template <class T> static std::vector<T> readv(size_t n) {
    std::vector<T> v(n);
    for (auto& x : v) { unsigned long long b; std::cin >> b; uint32_t u = (uint32_t)b; std::memcpy(&x, &u, 4); }
    return v;
}
template <class T> static void print(const char* name, const std::vector<T>& v) {
    std::cout << name;
    for (auto& x : v) { uint32_t u; std::memcpy(&u, &x, 4); std::cout << ' ' << u; }
    std::cout << '\n';
}

int main() {
    int T, H, E, k, off, cap, N, gy, gx;
    long long ld;
    while (std::cin >> T >> H >> E >> k >> cap >> off >> ld >> N >> gy >> gx) {
        auto span = [&](int rows) { return rows ? (size_t)(off + (long long)(rows - 1) * ld + H) : (size_t)0; };
        auto ids = readv<unsigned>((size_t)T * k);
        auto w = readv<float>((size_t)T * k);
        auto pad8 = readv<unsigned>(T);
        std::vector<unsigned char> pad(pad8.begin(), pad8.end());
        auto x = readv<float>(span(T));
        auto x_exp = readv<float>(span(N));
        auto dy = readv<float>(span(T));
        auto g_disp = readv<float>(span(N));
        const int C = 64, nchunks = (T + C - 1) / C;
        std::vector<int> slot((size_t)T * k, 0x5a5a5a5a), slot_src(N, 0x5a5a5a5a);
        std::vector<unsigned> chunk_counts((size_t)nchunks * E, 0xa5a5a5a5u), counts(E, 0xa5a5a5a5u), offsets(E + 1, 0xa5a5a5a5u);
        const float canary = __uint_as_float(0x7fc0deadu);
        std::vector<float> x_disp((size_t)N * H, canary), y((size_t)T * H, canary), dx_exp((size_t)N * H, canary),
            dw((size_t)T * k, canary), dx((size_t)T * H, canary), ys((size_t)T * H, canary), dxs((size_t)T * H, canary);
        unsigned tiles = (H + 255) / 256;
        launch({(unsigned)((nchunks + 3) / 4), 1, 1}, {128, 1, 1}, true,
               [&] { moe_dispatch_rank(ids.data(), pad.data(), T, E, k, slot.data(), chunk_counts.data()); });
        launch({1, 1, 1}, {1024, 1, 1}, true,
               [&] { moe_dispatch_scan(nchunks, E, cap, chunk_counts.data(), counts.data(), offsets.data()); });
        launch({(unsigned)gx, 1, 1}, {256, 1, 1}, false, [&] {
            moe_dispatch_slots(ids.data(), T, E, k, cap, chunk_counts.data(), offsets.data(), slot.data(), slot_src.data());
        });
        if ((int)offsets[E] != N) { std::cerr << "offsets[E] = " << offsets[E] << " but N = " << N << "\n"; }
        if (N) launch({tiles, (unsigned)std::min(N, gy), 1}, {256, 1, 1}, false,
                      [&] { moe_dispatch_copy(x.data(), off, ld, H, k, slot_src.data(), N, x_disp.data()); });
        launch({tiles, (unsigned)std::min(T, gy), 1}, {256, 1, 1}, false,
               [&] { moe_combine_gather(x_exp.data(), off, ld, T, H, k, slot.data(), w.data(), y.data()); });
        if (N) launch({tiles, (unsigned)std::min(N, gy), 1}, {256, 1, 1}, false, [&] {
            moe_combine_bwd_dx_exp(dy.data(), off, ld, H, k, slot_src.data(), w.data(), N, dx_exp.data());
        });
        launch({(unsigned)gx, 1, 1}, {256, 1, 1}, true,
               [&] { moe_combine_bwd_dw(dy.data(), x_exp.data(), off, ld, T, H, k, slot.data(), dw.data()); });
        launch({tiles, (unsigned)std::min(T, gy), 1}, {256, 1, 1}, false,
               [&] { moe_combine_bwd_dx(g_disp.data(), off, ld, T, H, k, slot.data(), dx.data()); });
        launch({(unsigned)gx, 1, 1}, {256, 1, 1}, false, [&] { moe_zero_f32(ys.data(), (long long)T * H); });
        launch({(unsigned)gx, 1, 1}, {256, 1, 1}, false, [&] { moe_zero_f32(dxs.data(), (long long)T * H); });
        if (N) launch({tiles, (unsigned)std::min(N, gy), 1}, {256, 1, 1}, false, [&] {
            moe_combine_scatter(x_exp.data(), off, ld, H, k, slot_src.data(), w.data(), N, ys.data());
        });
        if (N) launch({tiles, (unsigned)std::min(N, gy), 1}, {256, 1, 1}, false, [&] {
            moe_combine_scatter_bwd_dx(g_disp.data(), off, ld, H, k, slot_src.data(), N, dxs.data());
        });
        print("slot", slot); print("counts", counts); print("x_disp", x_disp); print("y", y);
        print("dx_exp", dx_exp); print("dw", dw); print("dx", dx); print("y_scatter", ys); print("dx_scatter", dxs);
        std::cout << "end" << std::endl;
    }
}
