//! Section 4, lock contention: `/proc/lock_stat` (CONFIG_LOCK_STAT) is
//! switched on through the journal (`kernel.lock_stat`), cleared, read at
//! the end of the interval and switched back. Top lock classes by
//! contentions with wait/hold times (µs, as the kernel prints them) and the
//! call sites that waited. Format: Documentation/locking/lockstat.rst.

use std::path::Path;

use super::knob::Switched;
use super::{overhead, thread_cpu_s};
use crate::model::diagnosis::{LockReport, LockRow, Section};

/// The switch and the statistics, below `root` (/proc's layout is the
/// layer's).
fn knob(root: &Path) -> std::path::PathBuf {
    crate::system::proc::Root::under(root).sysctl_file("kernel.lock_stat")
}
fn stats(root: &Path) -> std::path::PathBuf {
    crate::system::proc::Root::under(root).file("lock_stat")
}
/// Lock classes kept, most contended first.
pub(crate) const TOP: usize = 15;

/// Why the section cannot run here.
pub(crate) fn unavailable(root: &Path) -> String {
    if !stats(root).exists() {
        "no /proc/lock_stat: the kernel is built without CONFIG_LOCK_STAT (a debug option; \
         distribution kernels leave it off because it slows every lock)"
            .into()
    } else {
        "lock statistics could not be switched on".into()
    }
}

/// Parse /proc/lock_stat (versions 0.3 and 0.4): lock classes with their
/// first block of contention points, most contended first.
pub(crate) fn parse(text: &str) -> Vec<LockRow> {
    let mut rows: Vec<LockRow> = Vec::new();
    // 0: before the first separator after a class; 1: in its first block
    // of call sites; 2: later blocks (holders' sites), skipped.
    let mut block = 0;
    for line in text.lines() {
        let t = line.trim();
        if t.is_empty() || t.starts_with("lock_stat version") || t.starts_with("class name") {
            continue;
        }
        if t.chars().all(|c| c == '-') {
            if t.len() > 40 {
                continue; // the header rule
            }
            block += 1;
            continue;
        }
        if t.chars().all(|c| c == '.') {
            block = 0;
            continue;
        }
        if let Some(row) = class_line(t) {
            rows.push(row);
            block = 0;
            continue;
        }
        if block == 1 {
            if let (Some(row), Some(site)) = (rows.last_mut(), site_line(t)) {
                row.contention_points.push(site);
            }
        }
    }
    rows.sort_by(|a, b| {
        b.contentions
            .cmp(&a.contentions)
            .then(b.wait_total_us.total_cmp(&a.wait_total_us))
    });
    rows
}

/// "&mm->mmap_sem-W:  46  84  0.26 …" → a row. The name ends at the colon
/// followed only by numbers (names may hold colons).
fn class_line(t: &str) -> Option<LockRow> {
    let mut search = t;
    let mut offset = 0;
    while let Some(i) = search.find(':') {
        let name = &t[..offset + i];
        let nums: Vec<f64> = t[offset + i + 1..]
            .split_whitespace()
            .map(|w| w.parse::<f64>())
            .collect::<Result<_, _>>()
            .unwrap_or_default();
        if nums.len() == 12 || nums.len() == 10 {
            // 0.4 adds waittime-avg after waittime-total and holdtime-avg at the end.
            let v4 = nums.len() == 12;
            let (acq_b, acq) = if v4 { (6, 7) } else { (5, 6) };
            return Some(LockRow {
                class: name.trim().to_string(),
                con_bounces: nums[0] as u64,
                contentions: nums[1] as u64,
                wait_min_us: nums[2],
                wait_max_us: nums[3],
                wait_total_us: nums[4],
                acq_bounces: nums[acq_b] as u64,
                acquisitions: nums[acq] as u64,
                hold_min_us: nums[acq + 1],
                hold_max_us: nums[acq + 2],
                hold_total_us: nums[acq + 3],
                contention_points: Vec::new(),
            });
        }
        offset += i + 1;
        search = &t[offset..];
    }
    None
}

/// "&mm->mmap_sem  96  [<ffffffff815351c4>] __do_page_fault+0x1d4/0x510".
fn site_line(t: &str) -> Option<(u64, String)> {
    let open = t.find("[<")?;
    let close = t[open..].find(">]")? + open;
    let count = t[..open].split_whitespace().last()?.parse().ok()?;
    let sym = t[close + 2..].trim();
    let sym = if sym.is_empty() {
        t[open + 2..close].to_string()
    } else {
        sym.to_string()
    };
    Some((count, sym))
}

/// lock_stat switched on and cleared for the interval.
pub(crate) struct Session {
    knob: Switched,
    root: std::path::PathBuf,
    cpu_s: f64,
}

impl Session {
    /// Switch on and clear; Err is the skip reason.
    pub(crate) fn begin(root: &Path) -> Result<Session, String> {
        if !stats(root).exists() || !knob(root).exists() {
            return Err(unavailable(root));
        }
        let cpu0 = thread_cpu_s();
        let knob = Switched::on("kernel.lock_stat", &knob(root), "1")?;
        // Writing 0 clears the statistics gathered so far.
        std::fs::write(stats(root), "0")
            .map_err(|e| format!("cannot clear /proc/lock_stat: {e}"))?;
        Ok(Session {
            knob,
            root: root.to_path_buf(),
            cpu_s: thread_cpu_s() - cpu0,
        })
    }

    /// Read the statistics and switch lock_stat back.
    pub(crate) fn finish(mut self, interval: f64) -> Section<LockReport> {
        let cpu0 = thread_cpu_s();
        let text = std::fs::read_to_string(stats(&self.root));
        let restored = self.knob.restore();
        let text = match text {
            Ok(t) => t,
            Err(e) => return Section::skipped(format!("cannot read /proc/lock_stat: {e}")),
        };
        let mut locks = parse(&text);
        locks.retain(|l| l.contentions > 0 || l.acquisitions > 0);
        locks.truncate(TOP);
        let cpu = self.cpu_s + thread_cpu_s() - cpu0;
        Section::Present {
            data: LockReport {
                locks,
                method: format!(
                    "kernel.lock_stat switched on through the knob journal, /proc/lock_stat cleared, \
                     read after the interval; {restored}"
                ),
            },
            overhead: overhead(
                cpu,
                interval,
                1,
                "reading and parsing; lock_stat itself also slows every kernel lock while on",
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::test_support::fixture;

    #[test]
    fn parses_the_documented_layout() {
        let text = fixture("proc/lock_stat");
        let rows = parse(&text);
        assert_eq!(rows.len(), 5, "{rows:#?}");
        let top = &rows[0];
        assert_eq!(top.class, "&(&n->list_lock)->rlock");
        assert_eq!(top.contentions, 48211);
        assert_eq!(top.acquisitions, 912044);
        assert!((top.wait_max_us - 812.44).abs() < 1e-9);
        assert!((top.hold_total_us - 401233.5).abs() < 1e-9);
        assert_eq!(
            top.contention_points[0],
            (30122, "get_partial_node.part.0+0x4f/0x1c0".to_string())
        );
        assert_eq!(
            top.contention_points.len(),
            2,
            "holders' block is not mixed in"
        );
        let mm = rows.iter().find(|r| r.class == "&mm->mmap_lock-R").unwrap();
        assert_eq!(mm.contentions, 100);
        assert_eq!(mm.contention_points.len(), 1);
    }

    #[test]
    fn version_03_has_no_average_columns() {
        let t = "lock_stat version 0.3\n\
            ----------------------------------------------------------------------------------\n\
            class name con-bounces contentions waittime-min waittime-max waittime-total acq-bounces acquisitions holdtime-min holdtime-max holdtime-total\n\
            ----------------------------------------------------------------------------------\n\
            \n  &mm->mmap_sem-W:  5843  10462  2.89  138824.72  14217159.52  18965  84205  1.81  5031.07  725293.65\n";
        let r = parse(t);
        assert_eq!(r[0].contentions, 10462);
        assert_eq!(r[0].acquisitions, 84205);
        assert!((r[0].hold_total_us - 725293.65).abs() < 1e-9);
    }
}
