//! Digests of the CPU reference over all 2^32 inputs, one line per block of
//! 2^24 (block index, FNV-1a 64 of the results' bits, any NaN written as
//! 0x7fc00000): the same lines scripts/expf_host_emulation.cpp prints for
//! kernels/expf.cuh compiled for the CPU, so that `diff` compares the GPU
//! code's logic with the reference on every input, without a GPU
//! (scripts/expf-host-emulation).
//!
//! ```text
//! cargo run --release -p oracles --example expf_digest
//! ```

use oracles::expf::exp_f32;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

const BLOCK_BITS: u32 = 24;

fn block_digest(block: u64) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let first = block << BLOCK_BITS;
    for i in 0..1u64 << BLOCK_BITS {
        let y = exp_f32(f32::from_bits((first + i) as u32));
        let b = if y.is_nan() { 0x7fc0_0000 } else { y.to_bits() };
        for k in 0..4 {
            h ^= ((b >> (8 * k)) & 0xff) as u64;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

fn main() {
    let blocks = 1usize << (32 - BLOCK_BITS);
    let next = AtomicUsize::new(0);
    let out = Mutex::new(vec![0u64; blocks]);
    let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let b = next.fetch_add(1, Ordering::Relaxed);
                if b >= blocks {
                    break;
                }
                let d = block_digest(b as u64);
                out.lock().unwrap_or_else(|e| e.into_inner())[b] = d;
            });
        }
    });
    for (b, d) in out.into_inner().unwrap_or_else(|e| e.into_inner()).iter().enumerate() {
        println!("{b:3} {d:016x}");
    }
}
