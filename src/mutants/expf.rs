//! The exp check for the mutants of the exp headers: `bp::exp_cr` (the
//! mutated `expf.cuh`, `expf_hard.cuh` or `common.cuh`, through
//! `kernels/expf_check.cu`) against the CPU's correctly rounded
//! `oracles::expf::exp_f32`, bit for bit, on a sample of the f32 inputs.
//! The exhaustive check (`bitparity-expf-check`, all 2^32 inputs) takes
//! seconds of every core; a campaign runs a child per core, so each gets
//! this sample instead:
//! - every input of the hard-case table (as compiled into this binary) and
//!   its neighbours, so that a table entry off by one is caught;
//! - the inputs around the edges of the range (0, 1, +-87, the overflow
//!   and underflow thresholds, the infinities and NaNs);
//! - 256 windows spread evenly over all 2^32 bit patterns.

use crate::subject::cuda::expf::ExpfCheckDevice;
use crate::subject::cuda::HEADERS;
use crate::subject::SubjectError;
use oracles::expf::exp_f32;
use oracles::same_bits;

/// Inputs per window.
const WINDOW: u32 = 4096;

/// The (first input's bits, count) windows of the sample.
pub fn windows() -> Vec<(u32, u32)> {
    let mut w: Vec<(u32, u32)> = hard_inputs().into_iter().map(|x| (x.saturating_sub(8), 17)).collect();
    // 0, 1, exp_cr's switch to the reference path (|x| = 87), the
    // thresholds where e^x overflows (88.72) and flushes to 0 (-103.97), the
    // ends of the oracle's range, the infinities and NaNs.
    for edge in
        [0.0f32, -0.0, 1.0, -1.0, 87.0, -87.0, 88.72284, -103.97208, 89.0, -110.0, f32::INFINITY, f32::NEG_INFINITY]
    {
        w.push((edge.to_bits().saturating_sub(WINDOW / 2), WINDOW));
    }
    let step = (1u64 << 32) / 256;
    w.extend((0..256u64).map(|i| ((i * step + i * 977) as u32, WINDOW)));
    w.into_iter().map(|(s, n)| (s, n.min((u32::MAX - s).saturating_add(1).max(1)))).collect()
}

/// The inputs of the hard-case table of the `expf_hard.cuh` built in: the
/// `0x...u` literals of its `input` array.
fn hard_inputs() -> Vec<u32> {
    let Some(h) = HEADERS.iter().find(|h| h.name == "expf_hard.cuh") else { return Vec::new() };
    let Some(start) = h.text.find("input[") else { return Vec::new() };
    let body = &h.text[start..];
    let body = &body[..body.find("};").unwrap_or(body.len())];
    body.lines()
        .filter_map(|l| l.trim().strip_prefix("0x"))
        .filter_map(|l| u32::from_str_radix(l.split('u').next()?, 16).ok())
        .collect()
}

/// Runs the sample on the loaded check kernel: `Ok(None)` when every
/// result matches; `Ok(Some((window, message)))` at the first window with
/// a mismatch, or whose launch failed (a fault, a hang), as an op's case
/// fails on a device error.
pub fn check() -> Result<Option<(u64, String)>, String> {
    let mut dev = ExpfCheckDevice::open(WINDOW).map_err(|e| e.to_string())?;
    let mut host = vec![0u32; WINDOW as usize];
    for (i, (start, n)) in windows().into_iter().enumerate() {
        let out = &mut host[..n as usize];
        match dev.run(start, out) {
            Err(e @ SubjectError::Device(_)) => return Ok(Some((i as u64, e.to_string()))),
            r => r.map_err(|e| e.to_string())?,
        }
        for (j, &got) in out.iter().enumerate() {
            let x = f32::from_bits(start + j as u32);
            let want = exp_f32(x);
            if !same_bits(f32::from_bits(got), want) {
                let msg = format!(
                    "exp({x:e}) (bits {:#010x}): got {got:#010x}, correctly rounded {:#010x}",
                    x.to_bits(),
                    want.to_bits()
                );
                return Ok(Some((i as u64, msg)));
            }
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sample_holds_every_hard_case_and_stays_in_range() {
        let hard = hard_inputs();
        assert_eq!(hard.len(), 25, "{hard:x?}");
        let w = windows();
        for x in hard {
            assert!(w.iter().any(|&(s, n)| s <= x && (x as u64) < s as u64 + n as u64), "{x:#x}");
        }
        assert!(w.iter().all(|&(s, n)| n >= 1 && s as u64 + n as u64 <= 1 << 32));
        assert!(w.iter().map(|&(_, n)| n as u64).sum::<u64>() > 1_000_000);
    }
}
