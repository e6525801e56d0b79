//! Page-aligned buffers of random bytes: incompressible, not dedupable, and
//! usable with O_DIRECT.

use std::alloc::{alloc_zeroed, dealloc, Layout};

use rand::{RngCore, SeedableRng};

use crate::{Error, Result};

/// Alignment that satisfies O_DIRECT on every device we know (4 KiB).
pub(crate) const DIRECT_ALIGN: usize = 4096;

pub(crate) struct AlignedBuf {
    ptr: *mut u8,
    layout: Layout,
}

// The buffer is plain owned memory.
unsafe impl Send for AlignedBuf {}

impl AlignedBuf {
    /// A zeroed buffer of `len` bytes aligned to `DIRECT_ALIGN`.
    pub(crate) fn zeroed(len: usize) -> Result<Self> {
        let size = len.max(1).div_ceil(DIRECT_ALIGN) * DIRECT_ALIGN;
        let layout = Layout::from_size_align(size, DIRECT_ALIGN)
            .map_err(|_| Error::usage(format!("buffer of {len} bytes is too large")))?;
        // SAFETY: layout has non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err(Error::environment(format!(
                "cannot allocate a {len}-byte buffer: not enough memory (use a smaller size)"
            )));
        }
        Ok(AlignedBuf { ptr, layout })
    }

    /// An aligned buffer filled with random bytes (seeded, so reruns write
    /// the same data).
    pub(crate) fn random(len: usize, seed: u64) -> Result<Self> {
        let mut b = Self::zeroed(len)?;
        rand::rngs::SmallRng::seed_from_u64(seed).fill_bytes(b.as_mut_slice());
        Ok(b)
    }

    /// The allocated length (a multiple of 4 KiB, at least what was asked).
    pub(crate) fn len(&self) -> usize {
        self.layout.size()
    }

    pub(crate) fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr is valid for layout.size() bytes for our lifetime.
        unsafe { std::slice::from_raw_parts(self.ptr, self.layout.size()) }
    }

    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and we hold &mut self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.layout.size()) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout in zeroed().
        unsafe { dealloc(self.ptr, self.layout) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_buffer_is_aligned_and_not_constant() {
        let b = AlignedBuf::random(10_000, 1).unwrap();
        assert_eq!(b.as_slice().as_ptr() as usize % DIRECT_ALIGN, 0);
        assert_eq!(b.len(), 12_288);
        let zeros = b.as_slice().iter().filter(|&&x| x == 0).count();
        assert!(zeros < 200, "random bytes should rarely be zero: {zeros}");
    }
}
