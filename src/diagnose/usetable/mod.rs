//! Section 1, the USE table (utilisation, saturation, errors) for CPUs,
//! memory, each disk and each network interface over the interval, from
//! the same counters as `monitor` (observe::vmstat, iostat, pressure) read
//! before and after, plus the run queue sampled at 10 Hz; the one or two
//! rows that stand out are named in plain words.
//!
//! `snapshot` reads the counters at one end of the interval, `rows` turns
//! two snapshots into the table; here the collector that takes them.

mod rows;
mod snapshot;

use std::path::{Path, PathBuf};
use std::time::Duration;

pub(crate) use rows::build;
pub(crate) use snapshot::{parse_loadavg_running, Snapshot};

use super::{overhead, thread_cpu_s, Sampled, Ticker};
use crate::model::diagnosis::{Section, UseTable};

/// The run queue sampled: (sum of runnable tasks, samples).
pub(crate) struct RunQueue {
    root: PathBuf,
    sum: u64,
    n: u64,
    max: u64,
}

impl Sampled for RunQueue {
    fn sample(&mut self) {
        if let Some(r) = crate::system::proc::Root::under(&self.root)
            .read("loadavg")
            .ok()
            .and_then(|t| parse_loadavg_running(&t))
        {
            // The sampling thread itself is running while it reads, and
            // tunelab's other samplers may be too (they tick together): on
            // an idle one-CPU board they alone read as "5 runnable".
            let r = r.saturating_sub(1 + own_running_threads(&self.root));
            self.sum += r;
            self.max = self.max.max(r);
            self.n += 1;
        }
    }
}

/// tunelab's own threads other than the caller that are running or
/// runnable now (state R in `proc/self/task/*/stat` under `root`; 0 when it
/// cannot be read, as under a test's fake root).
fn own_running_threads(root: &Path) -> u64 {
    // Through rustix (the raw syscall): a static musl build can link libc's
    // gettid() as a null weak symbol (the x86_64 board binary crashed here).
    let me = rustix::thread::gettid().as_raw_nonzero().get().to_string();
    let Ok(dir) =
        std::fs::read_dir(crate::system::proc::Root::under(root).pid_file("self", "task"))
    else {
        return 0;
    };
    dir.flatten()
        .filter(|e| e.file_name().to_str() != Some(me.as_str()))
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .filter(|stat| super::procs::parse_stat(stat).is_some_and(|(_, state, _)| state == 'R'))
        .count() as u64
}

pub(crate) struct Collector {
    root: PathBuf,
    before: Snapshot,
    ticker: Ticker<RunQueue>,
    cpu_s: f64,
}

impl Collector {
    pub(crate) fn start(
        root: &Path,
        pace: Option<std::sync::Arc<super::budget::Pace>>,
    ) -> Collector {
        let cpu0 = thread_cpu_s();
        let before = Snapshot::read(root);
        Collector {
            root: root.to_path_buf(),
            before,
            cpu_s: thread_cpu_s() - cpu0,
            ticker: Ticker::adaptive(
                "runqueue",
                RunQueue {
                    root: root.to_path_buf(),
                    sum: 0,
                    n: 0,
                    max: 0,
                },
                Duration::from_millis(100),
                Duration::from_secs(5),
                super::budget::READER_SHARE,
                pace,
            ),
        }
    }

    pub(crate) fn finish(self, interval: f64) -> Section<UseTable> {
        let (rq, cpu, n) = self.ticker.stop();
        let cpu0 = thread_cpu_s();
        let after = Snapshot::read(&self.root);
        let rq_mean = (rq.n > 0).then(|| rq.sum as f64 / rq.n as f64);
        let whole_disks = whole_disks(&self.root);
        let mut table = build(
            &self.before,
            &after,
            interval,
            super::cpus(),
            rq_mean.map(|m| (m, rq.max, rq.n)),
            &whole_disks,
        );
        table.method = format!(
            "{} {}",
            table.method,
            super::every(interval, n, super::budget::READER_SHARE)
        );
        Section::Present {
            data: table,
            overhead: overhead(
                cpu + self.cpu_s + thread_cpu_s() - cpu0,
                interval,
                n + 2,
                "two readings of the counters, the run queue periodically",
            ),
        }
    }
}

/// Whole disks (/sys/block entries), so partitions are not counted twice.
fn whole_disks(root: &Path) -> Vec<String> {
    std::fs::read_dir(root.join("sys/block"))
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #[test]
    fn this_thread_is_not_counted_among_its_own_running_threads() {
        // Other test threads may be running, so only the bound is certain.
        let n = super::own_running_threads(std::path::Path::new("/"));
        let threads = crate::system::proc::tids(std::process::id() as i32)
            .unwrap()
            .len() as u64;
        assert!(n < threads, "{n} of {threads}");
        assert_eq!(
            super::own_running_threads(std::path::Path::new("/nonexistent")),
            0
        );
    }
}
