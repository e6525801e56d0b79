//! Other processes' disk I/O: bytes on the machine's whole hardware disks
//! (/proc/diskstats, disks with a /sys/block/NAME/device) minus our process
//! tree's own (/proc/PID/io).

use crate::system::proc::Root;

use super::cpu_time::tree_sum;
use super::{flag, Guard, Reading, Roots, TrialCheck, OTHER_IO_BPS, OTHER_IO_MIN_BYTES};

/// The disks to watch; none when our own I/O cannot be read.
pub(super) fn discover(roots: &Roots, skipped: &mut Vec<String>) -> Vec<String> {
    let disks = hardware_disks(roots);
    let own_io = proc_io(&roots.proc_, roots.pid).is_some();
    if disks.is_empty() {
        skipped.push(
            "other processes' disk I/O: no whole disk with a /sys/block/NAME/device in \
             /proc/diskstats"
                .to_string(),
        );
    } else if !own_io {
        skipped.push(
            "other processes' disk I/O: no /proc/PID/io (kernel without \
             CONFIG_TASK_IO_ACCOUNTING), our own I/O cannot be told from others'"
                .to_string(),
        );
    }
    if own_io {
        disks
    } else {
        Vec::new()
    }
}

impl Guard {
    /// Disk bytes of our process tree, like [`Self::own_ticks`]: reaped
    /// children's I/O is in our own /proc/PID/io.
    pub(super) fn own_io(&self) -> Option<u64> {
        tree_sum(&self.roots.proc_, self.roots.pid, self.children, proc_io)
    }

    /// Flag other processes' disk I/O.
    pub(super) fn check_disk(
        &self,
        before: &Reading,
        after: &Reading,
        seconds: f64,
        c: &mut TrialCheck,
    ) {
        if let (Some(db), Some(da), Some(ob), Some(oa)) = (
            before.disk_bytes,
            after.disk_bytes,
            before.own_io,
            after.own_io,
        ) {
            let others = da.saturating_sub(db).saturating_sub(oa.saturating_sub(ob));
            c.other_io_bytes = Some(others);
            if seconds > 0.0
                && others >= OTHER_IO_MIN_BYTES
                && others as f64 / seconds > OTHER_IO_BPS
            {
                flag(
                    c,
                    "disk-io",
                    format!(
                        "other processes read or wrote {:.1} MiB on the disks ({:.1} MiB/s)",
                        others as f64 / 1048576.0,
                        others as f64 / 1048576.0 / seconds
                    ),
                );
            }
        }
    }
}

/// Whole disks backed by hardware: names in /proc/diskstats with a
/// /sys/block/NAME/device link (partitions are not in /sys/block; loop, dm,
/// md, ram and zram devices have no device link).
pub(super) fn hardware_disks(roots: &Roots) -> Vec<String> {
    let Ok(text) = roots.proc_.read("diskstats") else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|l| l.split_whitespace().nth(2))
        .filter(|n| roots.sys.join("block").join(n).join("device").exists())
        .map(str::to_string)
        .collect()
}

/// Bytes read + written on `disks`: sectors (512 B, whatever the device's
/// block size) read are field 6, written field 10 of /proc/diskstats.
pub(super) fn parse_diskstats(text: &str, disks: &[String]) -> u64 {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if !disks.iter().any(|d| Some(&d.as_str()) == f.get(2)) {
                return None;
            }
            let read: u64 = f.get(5)?.parse().ok()?;
            let written: u64 = f.get(9)?.parse().ok()?;
            Some((read + written) * 512)
        })
        .sum()
}

/// read_bytes + write_bytes − cancelled_write_bytes of one process (its
/// reaped children included).
pub(super) fn proc_io(proc_: &Root, pid: u32) -> Option<u64> {
    let text = proc_.read_pid(pid, "io").ok()?;
    let field = |name: &str| -> Option<u64> {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))?
            .trim()
            .parse()
            .ok()
    };
    Some(
        (field("read_bytes")? + field("write_bytes")?)
            .saturating_sub(field("cancelled_write_bytes").unwrap_or(0)),
    )
}
