//! The memory `mem.latency` chases through: an anonymous mapping aligned
//! to 2 MiB and advised for or against transparent huge pages, and what
//! the kernel says about THP (its settings, the huge pages we got).

use super::HUGE;
use crate::experiments::common::util::map_anonymous;
use crate::units::format_size;
use crate::{Error, Result};

/// An anonymous mapping aligned to 2 MiB, advised for or against THP.
pub(super) struct Region {
    pub(super) map: *mut std::ffi::c_void,
    pub(super) map_len: usize,
    pub(super) ptr: *mut u8,
}

impl Region {
    pub(super) fn new(len: usize, thp: bool) -> Result<Self> {
        let map_len = len.div_ceil(HUGE) * HUGE + HUGE;
        let map = map_anonymous(map_len, rustix::mm::MapFlags::PRIVATE).map_err(|e| {
            Error::environment(format!(
                "cannot map {} for mem.latency: {e} (use a smaller max)",
                format_size(len as u64)
            ))
        })?;
        let ptr = ((map as usize).div_ceil(HUGE) * HUGE) as *mut u8;
        let advice = if thp {
            rustix::mm::Advice::LinuxHugepage
        } else {
            rustix::mm::Advice::LinuxNoHugepage
        };
        // SAFETY: the range is inside the mapping. Advice failure (THP not
        // built in) is reported in the notes through smaps, not fatal.
        unsafe {
            let _ = rustix::mm::madvise(ptr.cast(), len.div_ceil(HUGE) * HUGE, advice);
            std::ptr::write_bytes(ptr, 0, len);
        }
        Ok(Region { map, map_len, ptr })
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what mmap returned.
        let _ = unsafe { rustix::mm::munmap(self.map, self.map_len) };
    }
}

pub(super) fn thp_setting(which: &str) -> String {
    let s = std::fs::read_to_string(format!("/sys/kernel/mm/transparent_hugepage/{which}"))
        .unwrap_or_default();
    match (s.find('['), s.find(']')) {
        (Some(a), Some(b)) if a < b => s[a + 1..b].to_string(),
        _ => "unknown".into(),
    }
}

pub(super) fn anon_huge() -> Option<u64> {
    let s = crate::system::proc::read("self/smaps_rollup").ok()?;
    crate::system::proc::keyed::kib_bytes(&s, "AnonHugePages")
}
