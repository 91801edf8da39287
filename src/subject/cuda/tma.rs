//! Tensor maps for Hopper's bulk tensor copies (TMA,
//! `cp.async.bulk.tensor`): the descriptor of a global matrix that a
//! kernel's copying thread reads boxes of, encoded on the host by the
//! driver (`cuTensorMapEncodeTiled`) and passed to the kernel by value.

use super::device::dev_err;
use crate::subject::SubjectError;
use cudarc::driver::{sys, DeviceRepr};

/// A `CUtensorMap`: 128 opaque bytes, the kernel's `TmaDesc` parameter
/// (`const __grid_constant__`).
#[repr(transparent)]
#[derive(Clone, Copy)]
pub struct TensorMap(sys::CUtensorMap);

// SAFETY: plain bytes with the size and alignment of the kernel's parameter
// type; the launch copies them.
unsafe impl DeviceRepr for TensorMap {}

/// Columns of a box: 64 bf16, one 128-byte row of the 128-byte swizzle
/// (the kernels' shared-memory layout, which wgmma reads).
pub const BOX_COLS: u32 = 64;

impl TensorMap {
    /// All zeros: the parameter of a launch that does not copy through
    /// maps.
    pub fn unused() -> Self {
        // SAFETY: CUtensorMap is plain integers; zeros are a valid value.
        TensorMap(unsafe { std::mem::zeroed() })
    }

    /// The bf16 matrix of `rows` x `cols` at device address `ptr`, row r at
    /// `ptr + 2 ld r`, read in boxes of `box_rows` x [`BOX_COLS`] with the
    /// 128-byte swizzle, zeros outside the matrix. `None` where TMA cannot
    /// address it: `ptr` not 16-byte aligned, or rows not a multiple of 16
    /// bytes apart (`ld` not a multiple of 8).
    pub fn bf16(ptr: u64, rows: usize, cols: usize, ld: usize, box_rows: u32) -> Result<Option<Self>, SubjectError> {
        if !ptr.is_multiple_of(16) || !ld.is_multiple_of(8) || rows == 0 || cols == 0 || ld < cols {
            return Ok(None);
        }
        let dims = [cols as u64, rows as u64];
        let strides = [2 * ld as u64];
        let boxes = [BOX_COLS, box_rows];
        let elements = [1u32, 1];
        let mut map = Self::unused();
        // SAFETY: the arrays hold rank (2) dims and boxes, rank - 1 strides;
        // the driver only writes `map`. Its checks (address and stride
        // alignment, box sizes, dims within 2^32) are repeated above or hold
        // by construction (box_rows <= 256, the callers'; sizes within i32,
        // the plan's); a refusal is returned as an error, never launched.
        let r = unsafe {
            sys::cuTensorMapEncodeTiled(
                &mut map.0,
                sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
                2,
                ptr as *mut std::ffi::c_void,
                dims.as_ptr(),
                strides.as_ptr(),
                boxes.as_ptr(),
                elements.as_ptr(),
                sys::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
                sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
                sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                sys::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
            )
        };
        r.result().map_err(dev_err("cuTensorMapEncodeTiled"))?;
        Ok(Some(map))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What TMA cannot address is refused before the driver is asked (no
    /// GPU needed): the kernel then copies with cp.async.
    #[test]
    fn unaligned_rows_get_no_map() {
        for (ptr, ld) in [(0x1000 + 2, 64), (0x1000 + 8, 64), (0x1000, 63), (0x1000, 4100), (0x1000, 7)] {
            assert!(TensorMap::bf16(ptr, 4, 7.min(ld), ld, 64).expect("no driver call").is_none(), "{ptr:#x} {ld}");
        }
        assert!(TensorMap::bf16(0x1000, 0, 8, 8, 64).expect("no driver call").is_none());
        assert!(TensorMap::bf16(0x1000, 4, 16, 8, 64).expect("no driver call").is_none(), "ld < cols");
    }
}
