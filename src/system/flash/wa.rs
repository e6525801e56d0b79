//! Write amplification of any storage point: the bytes the block device
//! under the scratch directory counted written (/sys/class/block/NAME/stat,
//! the block layer's own count) over the
//! bytes this process handed to write calls (/proc/self/io `wchar`), from
//! before the point's preparation (pre-filled files are bytes the device
//! took for the point) to after its last trial and a syncfs of the scratch
//! file system (what the point left in the page cache is its writes too).
//! The runner reads both once a point, outside the trials, and turns the
//! differences into one note on the point.
//!
//! Neither eMMC nor SD exposes a bytes-written counter in sysfs, and NVMe's
//! is in the SMART log, not sysfs: the block layer's count is the device
//! count here, and the note says so.

use std::fs;
use std::path::Path;

use crate::units::format_size;

/// Cumulative counters, read at the start and the end of a counted span.
#[derive(Debug, Clone, Copy)]
struct Reading {
    app: u64,
    device_sectors: u64,
}

/// What one point wrote, preparation included.
#[derive(Debug)]
pub(crate) struct WriteCount {
    /// Kernel name of the device counted (the partition or loop device).
    device: String,
    /// The scratch directory, synced before the last reading.
    dir: std::path::PathBuf,
    before: Option<Reading>,
    app: u64,
    device_bytes: u64,
    /// Spans counted (start/stop pairs whose readings both succeeded).
    spans: usize,
}

/// Bytes this process passed to write(2) and friends, all threads.
fn app_written() -> Option<u64> {
    let text = super::super::proc::read("self/io").ok()?;
    parse_wchar(&text)
}

/// Field 7 of a block device's `stat` (Documentation/block/stat.rst):
/// sectors written, in 512-byte units whatever the device's block size.
fn sectors_written(stat: &str) -> Option<u64> {
    stat.split_whitespace().nth(6)?.parse().ok()
}

fn parse_wchar(text: &str) -> Option<u64> {
    super::super::proc::keyed::number(text, "wchar")
}

impl WriteCount {
    /// The counter for the device holding `dir`; None where `dir` is on no
    /// block device (tmpfs) or diskstats has no line for it.
    pub(crate) fn for_dir(dir: &Path) -> Option<WriteCount> {
        let dev = crate::system::device_for_path(dir)?;
        let c = WriteCount {
            device: dev.name,
            dir: dir.to_path_buf(),
            before: None,
            app: 0,
            device_bytes: 0,
            spans: 0,
        };
        c.read().map(|_| c)
    }

    fn read(&self) -> Option<Reading> {
        let stat = fs::read_to_string(format!("/sys/class/block/{}/stat", self.device)).ok()?;
        Some(Reading {
            app: app_written()?,
            device_sectors: sectors_written(&stat)?,
        })
    }

    /// Before the counted work.
    pub(crate) fn start(&mut self) {
        self.before = self.read();
    }

    /// After it: sync the file system, then add what it wrote (nothing if
    /// a reading failed).
    pub(crate) fn stop(&mut self) {
        if let Ok(d) = fs::File::open(&self.dir) {
            let _ = rustix::fs::syncfs(&d);
        }
        if let (Some(a), Some(b)) = (self.before.take(), self.read()) {
            self.app += b.app.saturating_sub(a.app);
            self.device_bytes += b.device_sectors.saturating_sub(a.device_sectors) * 512;
            self.spans += 1;
        }
    }

    /// The point's note, or None when its trials wrote nothing (a
    /// read-only point: other processes' writes are no amplification).
    pub(crate) fn note(&self) -> Option<String> {
        (self.spans > 0 && self.app > 0)
            .then(|| note_text(&self.device, self.app, self.device_bytes))
    }
}

/// The prefix every write-amplification note starts with.
pub(crate) const NOTE_PREFIX: &str = "write amplification";

fn note_text(device: &str, app: u64, device_bytes: u64) -> String {
    let wa = if app > 0 {
        format!("{:.3}", device_bytes as f64 / app as f64)
    } else {
        "n/a (the application wrote nothing)".into()
    };
    format!(
        "{NOTE_PREFIX} {wa}: app_bytes={app} ({}) written by tunelab's write calls \
         (/proc/self/io wchar), device_bytes={device_bytes} ({}) written to {device} \
         (the block layer's count in /sys/class/block; the device's own counter is not \
         readable in sysfs), from before the point's preparation to after its last trial \
         and a syncfs of the scratch file system",
        format_size(app),
        format_size(device_bytes)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wchar_is_read_from_proc_self_io() {
        let text = "rchar: 10\nwchar: 4096\nsyscr: 1\nsyscw: 1\nwrite_bytes: 0\n";
        assert_eq!(parse_wchar(text), Some(4096));
        assert_eq!(parse_wchar("rchar: 1\n"), None);
        let stat = "  100 0 800 5  42 3 2048 9 0 10 14 0 0 0 0";
        assert_eq!(sectors_written(stat), Some(2048));
    }

    #[test]
    fn the_note_round_trips_and_divides() {
        let n = note_text("loop3", 1_000_000, 1_031_168);
        assert!(n.starts_with("write amplification 1.031:"), "{n}");
        assert!(
            n.contains("app_bytes=1000000 ") && n.contains("device_bytes=1031168 "),
            "{n}"
        );
        assert!(note_text("sda1", 0, 4096).contains("n/a"));
    }

    #[test]
    fn a_trial_that_writes_is_counted_on_a_block_device() {
        let dir = tempfile::tempdir().unwrap();
        let Some(mut c) = WriteCount::for_dir(dir.path()) else {
            return; // tmpfs or no diskstats: nothing to count here
        };
        c.start();
        std::fs::write(dir.path().join("f"), vec![7u8; 1 << 16]).unwrap();
        c.stop();
        assert!(c.app >= 1 << 16, "{c:?}");
        assert!(c.note().is_some());
    }
}
