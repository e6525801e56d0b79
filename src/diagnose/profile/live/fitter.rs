//! The profiler's rate fitted to its CPU budget while it samples: the
//! reader measures its own CPU time per record when it wakes (a buffer half
//! full), at most once a second, and sets the
//! sampling frequency that keeps it within its share of one CPU
//! (`diagnose::budget::rate_for`), on every event at once.

use std::os::fd::AsRawFd;
use std::time::Duration;

use super::super::collected::Collected;
use super::super::common;
use super::open::Opened;

/// The sampling rate fitted to a share of one CPU while sampling.
#[derive(Debug, Clone, Copy)]
pub(in super::super) struct Adapt {
    /// Fraction of one CPU the reader may use.
    pub(crate) share: f64,
    /// The rate now, Hz.
    pub(crate) hz: u64,
    /// The rate asked (never exceeded).
    pub(crate) max_hz: u64,
}

// _IOW('$', 4, u64): a new sample period, or frequency for a freq event;
// threads created later inherit it.
const PERF_EVENT_IOC_PERIOD: rustix::ioctl::Opcode = 0x4008_2404;

/// Set every event's sampling frequency to `hz`; false when the kernel
/// refused (the rate then stays).
fn set_rate(opened: &Opened, hz: u64) -> bool {
    let fds = opened
        .samplers
        .iter()
        .map(|s| s.as_raw_fd())
        .chain(opened.redirected.iter().map(|c| c.as_raw_fd()));
    let mut ok = true;
    for fd in fds {
        // SAFETY: fd is an open perf event owned here; the kernel reads one u64.
        let rc = unsafe {
            let fd = std::os::fd::BorrowedFd::borrow_raw(fd);
            rustix::ioctl::ioctl(
                fd,
                rustix::ioctl::Setter::<PERF_EVENT_IOC_PERIOD, u64>::new(hz),
            )
        };
        ok &= rc.is_ok();
    }
    ok
}

/// Once a second: the reader's CPU per record since the last check sets
/// the rate that fits its share (records, not only samples: the mmap and
/// task records cost the reader too).
pub(super) struct Fitter {
    adapt: Adapt,
    cost: crate::diagnose::budget::Cost,
    since: std::time::Instant,
    cpu0: u64,
    records: u64,
}

impl Fitter {
    pub(super) fn new(adapt: Adapt) -> Fitter {
        Fitter {
            adapt,
            cost: Default::default(),
            since: std::time::Instant::now(),
            cpu0: common::thread_cpu_ns(),
            records: 0,
        }
    }

    pub(super) fn after_pass(&mut self, records: u64, opened: &Opened, out: &mut Collected) {
        use crate::diagnose::budget::{rate_for, MIN_PROFILE_HZ};
        self.records += records;
        if self.since.elapsed() < Duration::from_secs(1) || self.records == 0 {
            return;
        }
        let cpu = common::thread_cpu_ns().saturating_sub(self.cpu0) as f64 * 1e-9;
        let per = self.cost.add(cpu / self.records as f64);
        let hz = rate_for(per, self.adapt.share, MIN_PROFILE_HZ, self.adapt.max_hz);
        if hz != self.adapt.hz && set_rate(opened, hz) {
            self.adapt.hz = hz;
            out.rates.push(hz);
        }
        self.since = std::time::Instant::now();
        self.cpu0 = common::thread_cpu_ns();
        self.records = 0;
    }
}
