//! iostat -x figures, computed the way sysstat's iostat computes them.

use serde::{Deserialize, Serialize};
use std::io;

/// One /proc/diskstats line: cumulative counters since boot. Times are in
/// ms; sectors are always 512 B regardless of the device's block size.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct DiskCounters {
    pub(crate) name: String,
    pub(crate) major: u32,
    pub(crate) minor: u32,
    pub(crate) reads: u64,
    pub(crate) reads_merged: u64,
    pub(crate) sectors_read: u64,
    pub(crate) time_reading_ms: u64,
    pub(crate) writes: u64,
    pub(crate) writes_merged: u64,
    pub(crate) sectors_written: u64,
    pub(crate) time_writing_ms: u64,
    pub(crate) in_flight: u64,
    /// Time with at least one I/O in flight (io_ticks), the basis of %util.
    pub(crate) io_ticks_ms: u64,
    /// Sum of each I/O's time in the queue (time_in_queue), the basis of aqu-sz.
    pub(crate) weighted_ms: u64,
    /// Discard counters (Linux 4.18+); zero when the kernel lacks them.
    pub(crate) discards: u64,
    pub(crate) sectors_discarded: u64,
    pub(crate) time_discarding_ms: u64,
}

/// One iostat -x line for a device.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub(crate) struct IostatRow {
    pub(crate) device: String,
    pub(crate) r_s: f64,
    pub(crate) w_s: f64,
    /// KiB/s (sysstat's kB is 1024 B).
    pub(crate) rkb_s: f64,
    pub(crate) wkb_s: f64,
    /// Mean time per completed read / write including queueing, ms.
    pub(crate) r_await_ms: f64,
    pub(crate) w_await_ms: f64,
    /// Mean number of requests queued or in service.
    pub(crate) aqu_sz: f64,
    /// Mean request size in KiB (reads + writes + discards, as sysstat 12).
    pub(crate) areq_sz_kb: f64,
    /// % of elapsed time with I/O in flight. Capped at 100; on devices that
    /// serve requests in parallel (SSD, NVMe, RAID) 100% does not mean saturated.
    pub(crate) util_pct: f64,
}

impl From<crate::system::proc::DiskStat> for DiskCounters {
    fn from(d: crate::system::proc::DiskStat) -> Self {
        DiskCounters {
            name: d.name,
            major: d.major.max(0) as u32,
            minor: d.minor.max(0) as u32,
            reads: d.reads,
            reads_merged: d.merged,
            sectors_read: d.sectors_read,
            time_reading_ms: d.time_reading,
            writes: d.writes,
            writes_merged: d.writes_merged,
            sectors_written: d.sectors_written,
            time_writing_ms: d.time_writing,
            in_flight: d.in_progress,
            io_ticks_ms: d.time_in_progress,
            weighted_ms: d.weighted_time_in_progress,
            discards: d.discards.unwrap_or(0),
            sectors_discarded: d.sectors_discarded.unwrap_or(0),
            time_discarding_ms: d.time_discarding.unwrap_or(0),
        }
    }
}

/// All lines of /proc/diskstats (disks, partitions, loop, dm, ...).
pub(crate) fn read_all() -> io::Result<Vec<DiskCounters>> {
    let all = crate::system::proc::diskstats().map_err(super::vmstat::to_io)?;
    Ok(all.into_iter().map(DiskCounters::from).collect())
}

/// The counters of one device by kernel name, e.g. "vda".
pub(crate) fn read_one(name: &str) -> io::Result<Option<DiskCounters>> {
    Ok(read_all()?.into_iter().find(|d| d.name == name))
}

/// Difference of cumulative counters. Several diskstats fields are 32-bit
/// on some kernels (32-bit builds, old time fields): a decrease from a value
/// that fits in 32 bits is treated as one wrap, as sysstat does; any other
/// decrease (device re-created) counts as zero.
fn cdelta(prev: u64, cur: u64) -> u64 {
    if cur >= prev {
        cur - prev
    } else if prev <= u32::MAX as u64 {
        (cur + (1u64 << 32)) - prev
    } else {
        0
    }
}

/// iostat -x values between two readings `seconds` apart.
pub(crate) fn delta(prev: &DiskCounters, cur: &DiskCounters, seconds: f64) -> IostatRow {
    let mut row = IostatRow {
        device: cur.name.clone(),
        ..Default::default()
    };
    if seconds <= 0.0 {
        return row;
    }
    let ms = seconds * 1000.0;
    let rd = cdelta(prev.reads, cur.reads);
    let wr = cdelta(prev.writes, cur.writes);
    let dc = cdelta(prev.discards, cur.discards);
    let rsec = cdelta(prev.sectors_read, cur.sectors_read);
    let wsec = cdelta(prev.sectors_written, cur.sectors_written);
    let dsec = cdelta(prev.sectors_discarded, cur.sectors_discarded);
    let per = |num: u64, den: u64| {
        if den == 0 {
            0.0
        } else {
            num as f64 / den as f64
        }
    };

    row.r_s = rd as f64 / seconds;
    row.w_s = wr as f64 / seconds;
    row.rkb_s = rsec as f64 / 2.0 / seconds;
    row.wkb_s = wsec as f64 / 2.0 / seconds;
    row.r_await_ms = per(cdelta(prev.time_reading_ms, cur.time_reading_ms), rd);
    row.w_await_ms = per(cdelta(prev.time_writing_ms, cur.time_writing_ms), wr);
    row.aqu_sz = cdelta(prev.weighted_ms, cur.weighted_ms) as f64 / ms;
    row.areq_sz_kb = per(rsec + wsec + dsec, rd + wr + dc) / 2.0;
    row.util_pct = (cdelta(prev.io_ticks_ms, cur.io_ticks_ms) as f64 / ms * 100.0).min(100.0);
    row
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev() -> DiskCounters {
        DiskCounters {
            name: "vda".into(),
            major: 254,
            minor: 0,
            reads: 1000,
            sectors_read: 80_000,
            time_reading_ms: 5_000,
            writes: 2000,
            sectors_written: 160_000,
            time_writing_ms: 9_000,
            io_ticks_ms: 10_000,
            weighted_ms: 14_000,
            ..Default::default()
        }
    }

    #[test]
    fn one_second_of_io() {
        let a = dev();
        let mut b = a.clone();
        b.reads += 100; // 100 reads of 64 KiB, 2 ms each
        b.sectors_read += 100 * 128;
        b.time_reading_ms += 200;
        b.writes += 50; // 50 writes of 8 KiB, 10 ms each
        b.sectors_written += 50 * 16;
        b.time_writing_ms += 500;
        b.io_ticks_ms += 400;
        b.weighted_ms += 700;
        let r = delta(&a, &b, 1.0);
        assert_eq!(r.device, "vda");
        assert_eq!(r.r_s, 100.0);
        assert_eq!(r.w_s, 50.0);
        assert_eq!(r.rkb_s, 6400.0);
        assert_eq!(r.wkb_s, 400.0);
        assert_eq!(r.r_await_ms, 2.0);
        assert_eq!(r.w_await_ms, 10.0);
        assert!((r.aqu_sz - 0.7).abs() < 1e-12);
        assert!((r.areq_sz_kb - 6800.0 / 150.0).abs() < 1e-12);
        assert!((r.util_pct - 40.0).abs() < 1e-12);
    }

    #[test]
    fn half_second_interval_and_util_cap() {
        let a = dev();
        let mut b = a.clone();
        b.writes += 10;
        b.sectors_written += 80;
        b.io_ticks_ms += 520; // tick accounting can exceed the wall interval
        let r = delta(&a, &b, 0.5);
        assert_eq!(r.w_s, 20.0);
        assert_eq!(r.wkb_s, 80.0);
        assert_eq!(r.util_pct, 100.0);
        assert_eq!(r.r_await_ms, 0.0); // no reads: 0, not NaN
        assert_eq!(r.areq_sz_kb, 4.0);
    }

    #[test]
    fn idle_and_degenerate() {
        let a = dev();
        let r = delta(&a, &a, 1.0);
        assert_eq!(r.util_pct, 0.0);
        assert_eq!(r.areq_sz_kb, 0.0);
        assert!(r.r_await_ms.is_finite());
        assert_eq!(delta(&a, &a, 0.0).r_s, 0.0);
    }

    #[test]
    fn counter_wrap() {
        assert_eq!(cdelta(10, 15), 5);
        assert_eq!(cdelta(u32::MAX as u64 - 1, 3), 5);
        assert_eq!(cdelta(1 << 40, 5), 0);
    }

    #[test]
    fn discards_count_in_request_size() {
        let a = dev();
        let mut b = a.clone();
        b.discards += 1;
        b.sectors_discarded += 2048; // one 1 MiB discard
        b.writes += 1;
        b.sectors_written += 8;
        let r = delta(&a, &b, 1.0);
        assert_eq!(r.areq_sz_kb, (2048.0 + 8.0) / 2.0 / 2.0);
    }

    #[test]
    fn real_read() {
        let all = read_all().expect("read /proc/diskstats");
        assert!(!all.is_empty());
        if let Some(root) = crate::system::device_for_path(std::path::Path::new("/")) {
            assert!(read_one(&root.name).unwrap().is_some());
        }
    }
}
