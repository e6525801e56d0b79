//! Dirty page cache state and the writeback thresholds that throttle writers.

use serde::{Deserialize, Serialize};
use std::io;

use crate::system::proc::Current;

/// Dirty/writeback memory and the limits that govern it, in bytes.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub(crate) struct DirtyState {
    /// Meminfo Dirty: modified page cache not yet written back.
    pub(crate) dirty_bytes: u64,
    /// Meminfo Writeback: pages being written right now.
    pub(crate) writeback_bytes: u64,
    /// Meminfo MemAvailable.
    pub(crate) available_bytes: u64,
    /// vm.dirty_bytes, or vm.dirty_ratio % of MemAvailable: writers block here.
    pub(crate) threshold_bytes: u64,
    /// vm.dirty_background_bytes, or vm.dirty_background_ratio % of
    /// MemAvailable: the flusher threads start writing here.
    pub(crate) background_threshold_bytes: u64,
    /// The kernel's own figures (/proc/vmstat nr_dirty_threshold and
    /// nr_dirty_background_threshold). They are computed from "dirtyable"
    /// memory (free + file LRU − reserves), not MemAvailable, so they are the
    /// authoritative values; ours are an explainable approximation.
    pub(crate) kernel_threshold_bytes: Option<u64>,
    pub(crate) kernel_background_threshold_bytes: Option<u64>,
}

impl DirtyState {
    /// Where balance_dirty_pages() starts throttling writers: half-way
    /// between the background and the hard threshold ("freerun" ceiling).
    pub(crate) fn throttle_point(&self) -> u64 {
        (self.threshold_bytes / 2)
            + (self.background_threshold_bytes / 2)
            + (self.threshold_bytes % 2 + self.background_threshold_bytes % 2) / 2
    }
}

/// The writeback sysctls (vm.dirty_*).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct DirtyLimits {
    pub(crate) ratio: u64,
    pub(crate) bytes: u64,
    pub(crate) background_ratio: u64,
    pub(crate) background_bytes: u64,
}

/// (threshold, background threshold) in bytes, following the kernel's
/// domain_dirty_limits(): an explicit `*_bytes` wins over the ratio, and a
/// background threshold at or above the hard one is halved from the hard one.
pub(crate) fn thresholds(available: u64, l: &DirtyLimits) -> (u64, u64) {
    let of = |ratio: u64| (available as u128 * ratio as u128 / 100) as u64;
    let thresh = if l.bytes > 0 { l.bytes } else { of(l.ratio) };
    let mut bg = if l.background_bytes > 0 {
        l.background_bytes
    } else {
        of(l.background_ratio)
    };
    if bg >= thresh {
        bg = thresh / 2;
    }
    (thresh, bg)
}

fn sysctl(name: &str) -> io::Result<u64> {
    let s = std::fs::read_to_string(crate::system::proc::path("sys/vm").join(name))?;
    s.trim()
        .parse()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("vm.{name}: {e}")))
}

/// Read the vm.dirty_* sysctls.
pub(crate) fn read_limits() -> io::Result<DirtyLimits> {
    Ok(DirtyLimits {
        ratio: sysctl("dirty_ratio")?,
        bytes: sysctl("dirty_bytes")?,
        background_ratio: sysctl("dirty_background_ratio")?,
        background_bytes: sysctl("dirty_background_bytes")?,
    })
}

/// Read the current dirty state (meminfo, sysctls, vmstat).
pub(crate) fn read() -> io::Result<DirtyState> {
    let mem = crate::system::proc::Meminfo::current().map_err(super::vmstat::to_io)?;
    let limits = read_limits()?;
    // MemAvailable exists since 3.14; before that, free + page cache is the
    // closest stand-in.
    let available = mem
        .mem_available
        .unwrap_or(mem.mem_free + mem.cached + mem.buffers);
    let (threshold_bytes, background_threshold_bytes) = thresholds(available, &limits);
    // The kernel thresholds are a bonus: missing /proc/vmstat keys are fine.
    let vm = crate::system::proc::VmStat::current()
        .map(|v| v.0)
        .unwrap_or_default();
    let page = crate::system::proc::page_size();
    let pages = |k: &str| vm.get(k).map(|&n| n.max(0) as u64 * page);
    Ok(DirtyState {
        dirty_bytes: mem.dirty,
        writeback_bytes: mem.writeback,
        available_bytes: available,
        threshold_bytes,
        background_threshold_bytes,
        kernel_threshold_bytes: pages("nr_dirty_threshold"),
        kernel_background_threshold_bytes: pages("nr_dirty_background_threshold"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    #[test]
    fn ratio_thresholds() {
        let l = DirtyLimits {
            ratio: 20,
            background_ratio: 10,
            ..Default::default()
        };
        assert_eq!(thresholds(10 * GIB, &l), (2 * GIB, GIB));
    }

    #[test]
    fn bytes_override_ratio() {
        let l = DirtyLimits {
            ratio: 0,
            bytes: 256 << 20,
            background_ratio: 10,
            background_bytes: 0,
        };
        // background 10% of 1 GiB = 102.4 MiB < 256 MiB: kept.
        assert_eq!(thresholds(GIB, &l), (256 << 20, GIB / 10));
        let l = DirtyLimits {
            bytes: 64 << 20,
            background_bytes: 16 << 20,
            ..Default::default()
        };
        assert_eq!(thresholds(GIB, &l), (64 << 20, 16 << 20));
    }

    #[test]
    fn background_above_hard_is_halved() {
        let l = DirtyLimits {
            ratio: 10,
            background_ratio: 20,
            ..Default::default()
        };
        assert_eq!(thresholds(10 * GIB, &l), (GIB, GIB / 2));
    }

    #[test]
    fn throttle_point_is_midpoint() {
        let s = DirtyState {
            threshold_bytes: 200,
            background_threshold_bytes: 100,
            ..Default::default()
        };
        assert_eq!(s.throttle_point(), 150);
        let s = DirtyState {
            threshold_bytes: u64::MAX,
            background_threshold_bytes: u64::MAX,
            ..Default::default()
        };
        assert_eq!(s.throttle_point(), u64::MAX); // no overflow
    }

    #[test]
    fn real_read() {
        let d = read().expect("read dirty state");
        assert!(d.available_bytes > 0);
        assert!(d.threshold_bytes > d.background_threshold_bytes);
        assert!(d.throttle_point() > d.background_threshold_bytes);
        if let (Some(k), Some(kb)) = (
            d.kernel_threshold_bytes,
            d.kernel_background_threshold_bytes,
        ) {
            assert!(k >= kb);
        }
    }
}
