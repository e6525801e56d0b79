//! The CPU lines of /proc/stat ("cpu  user nice system idle iowait irq
//! softirq steal guest guest_nice" and one "cpuN" line per CPU), in
//! USER_HZ ticks. Parsed in place without allocating, because the validity
//! guard and the latency-cause snapshots read /proc/stat around every trial.
//! (procfs's `KernelStats` serves the readers that want the whole file.)

/// Columns kept: user .. guest_nice.
const COLS: usize = 10;

/// One CPU line: the columns the kernel printed, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CpuTimes {
    cols: [u64; COLS],
    /// How many columns the line had (old kernels print fewer).
    pub(crate) n: usize,
}

impl CpuTimes {
    /// The numbers after the line's name ("cpu", "cpu3"); words that are not
    /// numbers are skipped.
    fn parse_values<'a>(words: impl Iterator<Item = &'a str>) -> CpuTimes {
        let mut t = CpuTimes {
            cols: [0; COLS],
            n: 0,
        };
        for v in words.filter_map(|x| x.parse().ok()).take(COLS) {
            t.cols[t.n] = v;
            t.n += 1;
        }
        t
    }

    /// Column `i` (0 user, 1 nice, 2 system, 3 idle, 4 iowait, 5 irq,
    /// 6 softirq, 7 steal, 8 guest, 9 guest_nice); 0 when not printed.
    pub(crate) fn col(&self, i: usize) -> u64 {
        if i < self.n {
            self.cols[i]
        } else {
            0
        }
    }

    /// user + nice + system.
    pub(crate) fn busy_user_system(&self) -> u64 {
        self.col(0) + self.col(1) + self.col(2)
    }

    /// The first eight columns: guest and guest_nice are already inside
    /// user and nice, so they are not added again.
    pub(crate) fn total(&self) -> u64 {
        (0..8).map(|i| self.col(i)).sum()
    }

    /// Column 7.
    pub(crate) fn steal(&self) -> u64 {
        self.col(7)
    }
}

/// The all-CPU "cpu " line of /proc/stat text.
pub(crate) fn total(stat: &str) -> Option<CpuTimes> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    Some(CpuTimes::parse_values(line.split_whitespace().skip(1)))
}

/// The "cpuN" lines of /proc/stat text, as (N, times).
pub(crate) fn per_cpu(stat: &str) -> impl Iterator<Item = (usize, CpuTimes)> + '_ {
    stat.lines().filter_map(|l| {
        let mut w = l.split_whitespace();
        let cpu = w.next()?.strip_prefix("cpu")?.parse().ok()?;
        Some((cpu, CpuTimes::parse_values(w)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  10 2 3 100 5 1 1 7 4 0\ncpu0 4 1 1 50 2 0 0 3 0 0\n\
                        cpu1 6 1 2 50 3 1 1 4 4 0\nintr 99 1 2\nctxt 5\n";

    #[test]
    fn the_total_line_and_each_cpu() {
        let t = total(STAT).unwrap();
        assert_eq!(t.n, 10);
        assert_eq!(t.busy_user_system(), 15);
        assert_eq!(t.steal(), 7);
        assert_eq!(t.total(), 10 + 2 + 3 + 100 + 5 + 1 + 1 + 7);
        let v: Vec<(usize, u64)> = per_cpu(STAT).map(|(c, t)| (c, t.steal())).collect();
        assert_eq!(v, [(0, 3), (1, 4)]);
    }

    #[test]
    fn old_kernels_print_fewer_columns() {
        // 2.6.10 and older: no steal; 2.4: four columns.
        let t = total("cpu 1 2 3 4\n").unwrap();
        assert_eq!((t.n, t.steal(), t.total()), (4, 0, 10));
        assert!(total("intr 1\n").is_none());
        assert_eq!(per_cpu("cpu 1 2\nprocs_running 1\n").count(), 0);
    }
}
