//! Guard zones: every device buffer of a CUDA subject sits between two
//! zones of canary values, checked after each pass. A kernel that writes
//! past either end of any buffer (an off-by-one in a loop bound, a row index
//! that reaches T, a negative offset) fails the case with the buffer, the
//! side and the element it hit, where before it would pass whenever the
//! stray write landed on memory nothing reads. The input buffers' zones hold
//! NaNs (as the gaps of a strided input do), so a read past either end of an
//! input corrupts the output it feeds. The outputs a kernel must write in
//! full start as the canary as well ([`Guarded::unwritten`]): an element a
//! kernel never writes fails the comparison instead of reading back as the
//! zero it may well be.
//!
//! The zones catch stray accesses to global memory within [`GUARD_BYTES`] of
//! a buffer. `BITPARITY_GUARDS=off` leaves them out (for compute-sanitizer,
//! which checks every access against the allocation itself). Shared memory, registers and accesses that jump further are out
//! of their reach (`bitparity mutants --sanitizer` runs the kernels under
//! compute-sanitizer for those).

use super::device::dev_err;
use super::GAP_POISON;
use crate::subject::SubjectError;
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DeviceRepr, ValidAsZeroBits};
use std::mem::size_of;
use std::sync::{Arc, OnceLock};

/// Bytes of guard before and after each buffer. A multiple of 256, so that
/// a buffer's first element keeps the allocation's 256-byte alignment: the
/// kernels' vector loads and stores, and the offset/stride property's
/// misaligned views, see the same alignment as without guards.
pub const GUARD_BYTES: usize = 1024;

/// An element type of a guarded buffer and the value its guards hold.
pub trait Canary: DeviceRepr + ValidAsZeroBits + Copy + Unpin + 'static {
    /// The guard's fill. For the float types a NaN with a payload that no
    /// arithmetic produces (a kernel writing its own NaN still differs).
    const FILL: Self;
    /// The bits, for comparison (a NaN is not equal to itself) and messages.
    fn bits(self) -> u64;
}

impl Canary for f32 {
    const FILL: f32 = GAP_POISON;
    fn bits(self) -> u64 {
        self.to_bits() as u64
    }
}

/// bf16 bits: a NaN whose payload (0x2d) no rounding of an f32 NaN to bf16
/// produces from the kernels' own NaNs (0x7fc0 and 0xffc0).
impl Canary for u16 {
    const FILL: u16 = 0x7fad;
    fn bits(self) -> u64 {
        self as u64
    }
}

impl Canary for u32 {
    const FILL: u32 = 0xa5a5_a5a5;
    fn bits(self) -> u64 {
        self as u64
    }
}

impl Canary for u8 {
    const FILL: u8 = 0xa5;
    fn bits(self) -> u64 {
        self as u64
    }
}

/// A device buffer of `len` elements between two guard zones. Kernels get
/// the address of its first element ([`Guarded::arg`]); the zones stay
/// untouched by every correct kernel.
pub struct Guarded<T> {
    buf: CudaSlice<T>,
    len: usize,
    /// The device address of element 0 (past the front zone).
    ptr: u64,
    name: &'static str,
}

/// Whether this process puts zones around its buffers (`BITPARITY_GUARDS`,
/// checked at start-up: an unreadable value never gets here).
fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| crate::knobs::guards().unwrap_or(true))
}

impl<T: Canary> Guarded<T> {
    /// Elements in each zone when zones are on.
    const ZONE: usize = GUARD_BYTES / size_of::<T>();

    fn zone() -> usize {
        if enabled() {
            Self::ZONE
        } else {
            0
        }
    }

    /// A buffer holding `data`.
    pub fn upload(stream: &Arc<CudaStream>, name: &'static str, data: &[T]) -> Result<Self, SubjectError> {
        let z = Self::zone();
        let mut host = Vec::with_capacity(data.len() + 2 * z);
        host.extend(std::iter::repeat_n(T::FILL, z));
        host.extend_from_slice(data);
        host.extend(std::iter::repeat_n(T::FILL, z));
        let buf = stream.clone_htod(&host).map_err(dev_err("upload"))?;
        Ok(Self::around(buf, data.len(), stream, name))
    }

    /// An output every correct kernel writes in full: its elements start as
    /// the canary too, so an element the kernel never writes reads back as
    /// [`Canary::FILL`] (a NaN of a payload no arithmetic makes, 0xa5 bytes
    /// for integers) and fails the comparison, where a zeroed buffer would
    /// pass wherever the right value is +0.0 or 0 (a padding row's gradient,
    /// a column tile placed one column off).
    pub fn unwritten(stream: &Arc<CudaStream>, name: &'static str, len: usize) -> Result<Self, SubjectError> {
        let host = vec![T::FILL; len + 2 * Self::zone()];
        let buf = stream.clone_htod(&host).map_err(dev_err("allocation"))?;
        Ok(Self::around(buf, len, stream, name))
    }

    /// A buffer of `len` zeros (zeroed on the device: an output's
    /// allocation costs no host copy of its size): for the outputs a kernel
    /// accumulates into.
    pub fn zeros(stream: &Arc<CudaStream>, name: &'static str, len: usize) -> Result<Self, SubjectError> {
        let z = Self::zone();
        let mut buf = stream.alloc_zeros::<T>(len + 2 * z).map_err(dev_err("allocation"))?;
        if z > 0 {
            let fill = vec![T::FILL; z];
            stream.memcpy_htod(&fill, &mut buf.slice_mut(..z)).map_err(dev_err("guard fill"))?;
            stream.memcpy_htod(&fill, &mut buf.slice_mut(z + len..)).map_err(dev_err("guard fill"))?;
        }
        Ok(Self::around(buf, len, stream, name))
    }

    fn around(buf: CudaSlice<T>, len: usize, stream: &Arc<CudaStream>, name: &'static str) -> Self {
        let base = buf.device_ptr(stream).0;
        Self { ptr: base + (Self::zone() * size_of::<T>()) as u64, buf, len, name }
    }

    /// The kernel argument: the address of element 0, as a pointer
    /// parameter takes it (8 bytes).
    pub fn arg(&self) -> &u64 {
        &self.ptr
    }

    /// Zeroes the buffer's elements (not its zones).
    pub fn zero(&mut self, stream: &Arc<CudaStream>) -> Result<(), SubjectError> {
        let z = Self::zone();
        stream.memset_zeros(&mut self.buf.slice_mut(z..z + self.len)).map_err(dev_err("zeroing"))
    }

    /// Copies the elements back (the stream's work before is waited for).
    pub fn read(&self, stream: &Arc<CudaStream>) -> Result<Vec<T>, SubjectError> {
        let z = Self::zone();
        stream.clone_dtoh(&self.buf.slice(z..z + self.len)).map_err(dev_err("read-back"))
    }

    /// Copies elements `range` back (the stream's work before is waited
    /// for); a range past the buffer is an error.
    pub fn read_range(&self, stream: &Arc<CudaStream>, range: std::ops::Range<usize>) -> Result<Vec<T>, SubjectError> {
        if range.start > range.end || range.end > self.len {
            return Err(SubjectError::Device(format!("{}: elements {range:?} of {}", self.name, self.len)));
        }
        let z = Self::zone();
        stream.clone_dtoh(&self.buf.slice(z + range.start..z + range.end)).map_err(dev_err("read-back"))
    }

    /// Reads both zones back: an error naming the first element a kernel
    /// changed on each side.
    pub fn check(&self, stream: &Arc<CudaStream>) -> Result<(), SubjectError> {
        let z = Self::zone();
        if z == 0 {
            return Ok(());
        }
        let front = stream.clone_dtoh(&self.buf.slice(..z)).map_err(dev_err("guard read-back"))?;
        let back = stream.clone_dtoh(&self.buf.slice(z + self.len..)).map_err(dev_err("guard read-back"))?;
        match damage(&front, &back) {
            None => Ok(()),
            Some(d) => Err(SubjectError::OutOfBounds(format!(
                "{} ({} x {}): {d}",
                self.name,
                self.len,
                std::any::type_name::<T>()
            ))),
        }
    }
}

/// What a kernel changed in a buffer's zones (`front` before element 0,
/// `back` after the last): the changed element nearest the buffer on each
/// side, and how many changed. `None` when both zones hold only the fill.
pub fn damage<T: Canary>(front: &[T], back: &[T]) -> Option<String> {
    let changed = |zone: &[T]| zone.iter().filter(|v| v.bits() != T::FILL.bits()).count();
    let width = 2 * size_of::<T>();
    let hex = |v: T| format!("{:#0w$x}", v.bits(), w = width + 2);
    let mut sides = Vec::new();
    if let Some(i) = front.iter().rposition(|v| v.bits() != T::FILL.bits()) {
        sides.push(format!(
            "{} element(s) before its start changed, the nearest at index -{} (now {})",
            changed(front),
            front.len() - i,
            hex(front[i])
        ));
    }
    if let Some(i) = back.iter().position(|v| v.bits() != T::FILL.bits()) {
        sides.push(format!(
            "{} element(s) past its end changed, the nearest at index len+{i} (now {})",
            changed(back),
            hex(back[i])
        ));
    }
    (!sides.is_empty())
        .then(|| format!("a write out of bounds: {}; the guard holds {}", sides.join("; "), hex(T::FILL)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn untouched_zones_are_no_damage_even_for_nan_fills() {
        let z = vec![f32::FILL; 4];
        assert_eq!(damage(&z, &z), None);
    }

    #[test]
    fn damage_names_the_nearest_changed_element_on_each_side() {
        let mut front = vec![u32::FILL; 8];
        let mut back = vec![u32::FILL; 8];
        front[7] = 0; // index -1
        front[2] = 5;
        back[3] = 7; // index len+3
        let d = damage(&front, &back).expect("damage");
        assert!(d.contains("2 element(s) before its start changed, the nearest at index -1 (now 0x00000000)"), "{d}");
        assert!(d.contains("1 element(s) past its end changed, the nearest at index len+3 (now 0x00000007)"), "{d}");
        assert!(d.contains("the guard holds 0xa5a5a5a5"), "{d}");
    }

    #[test]
    fn a_kernel_nan_differs_from_the_float_fills() {
        // The canonical NaNs a kernel may write are not the guards' NaNs.
        let back = [f32::NAN];
        assert!(damage::<f32>(&[], &back).is_some());
        let bf16_nan: u16 = 0x7fc0;
        assert!(damage::<u16>(&[], &[bf16_nan]).is_some());
        assert!(f32::from_bits(f32::FILL.bits() as u32).is_nan());
        assert_eq!(u16::FILL & 0x7f80, 0x7f80, "the bf16 fill is a NaN");
        assert_ne!(u16::FILL & 0x7f, 0, "the bf16 fill is a NaN");
    }

    #[test]
    fn zones_keep_the_allocations_alignment() {
        assert_eq!(GUARD_BYTES % 256, 0);
        assert_eq!(Guarded::<u16>::ZONE * 2, GUARD_BYTES);
        assert_eq!(Guarded::<u8>::ZONE, GUARD_BYTES);
    }
}
