//! vmstat(8) figures, computed the way procps-ng vmstat computes them.

use serde::{Deserialize, Serialize};
use std::io;

use crate::system::proc::{Current, FromReadSI};

/// Raw cumulative counters read at one instant. Pure data: `delta()` needs
/// nothing else, so tests can build these by hand.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct VmstatCounters {
    /// Jiffies (USER_HZ ticks) from the /proc/stat "cpu" line, grouped as
    /// procps groups them: user = user+nice, system = system+irq+softirq.
    /// guest time is already inside user/nice, so it is not added again.
    pub(crate) cpu_user: u64,
    pub(crate) cpu_system: u64,
    pub(crate) cpu_idle: u64,
    pub(crate) cpu_iowait: u64,
    pub(crate) cpu_steal: u64,
    /// Total interrupts serviced ("intr" first field).
    pub(crate) intr: u64,
    /// Context switches.
    pub(crate) ctxt: u64,
    /// Instantaneous runnable / blocked-on-I/O task counts.
    pub(crate) procs_running: u64,
    pub(crate) procs_blocked: u64,
    /// KiB read from / written to block devices (/proc/vmstat pgpgin/pgpgout;
    /// the kernel already counts these in KiB, not pages).
    pub(crate) pgpgin: u64,
    pub(crate) pgpgout: u64,
    /// Pages swapped in / out.
    pub(crate) pswpin: u64,
    pub(crate) pswpout: u64,
    /// Page size in bytes, to turn swap pages into KiB.
    pub(crate) page_size: u64,
    /// Memory in bytes from /proc/meminfo.
    pub(crate) mem_free: u64,
    pub(crate) buffers: u64,
    /// Cached + SReclaimable, as procps-ng's "cache" column.
    pub(crate) cached: u64,
    /// SwapTotal - SwapFree.
    pub(crate) swap_used: u64,
}

/// One vmstat line. Memory columns are KiB; si/so/bi/bo are KiB/s; in/cs are
/// per second; us/sy/id/wa/st are % of all CPU time, rounded to integers as
/// procps does.
#[derive(Debug, Clone, Serialize, Deserialize, Default, PartialEq)]
pub(crate) struct VmstatRow {
    /// Runnable tasks minus one: the reading thread is itself running when it
    /// reads /proc/stat, so like procps we do not count it (an idle machine
    /// shows 0). Other threads of tunelab, e.g. a benchmark, are counted.
    pub(crate) r: u64,
    pub(crate) b: u64,
    pub(crate) swpd_kb: u64,
    pub(crate) free_kb: u64,
    pub(crate) buff_kb: u64,
    pub(crate) cache_kb: u64,
    pub(crate) si: f64,
    pub(crate) so: f64,
    pub(crate) bi: f64,
    pub(crate) bo: f64,
    pub(crate) in_s: f64,
    pub(crate) cs_s: f64,
    pub(crate) us: f64,
    pub(crate) sy: f64,
    pub(crate) id: f64,
    pub(crate) wa: f64,
    pub(crate) st: f64,
}

/// Read the counters now.
pub(crate) fn read() -> io::Result<VmstatCounters> {
    // One read of /proc/stat serves both procfs's KernelStats and the "intr"
    // line, which KernelStats (procfs 0.17) does not expose.
    let stat_text = crate::system::proc::read("stat")?;
    let ks = crate::system::proc::KernelStats::from_read(
        stat_text.as_bytes(),
        crate::system::proc::current_system_info(),
    )
    .map_err(to_io)?;
    let intr = parse_intr(&stat_text).unwrap_or(0);
    let vm = crate::system::proc::VmStat::current().map_err(to_io)?.0;
    let mem = crate::system::proc::Meminfo::current().map_err(to_io)?;

    let c = &ks.total;
    let g = |k: &str| vm.get(k).copied().unwrap_or(0).max(0) as u64;
    Ok(VmstatCounters {
        cpu_user: c.user + c.nice,
        cpu_system: c.system + c.irq.unwrap_or(0) + c.softirq.unwrap_or(0),
        cpu_idle: c.idle,
        cpu_iowait: c.iowait.unwrap_or(0),
        cpu_steal: c.steal.unwrap_or(0),
        intr,
        ctxt: ks.ctxt,
        procs_running: ks.procs_running.unwrap_or(0) as u64,
        procs_blocked: ks.procs_blocked.unwrap_or(0) as u64,
        pgpgin: g("pgpgin"),
        pgpgout: g("pgpgout"),
        pswpin: g("pswpin"),
        pswpout: g("pswpout"),
        page_size: crate::system::proc::page_size(),
        mem_free: mem.mem_free,
        buffers: mem.buffers,
        cached: mem.cached + mem.s_reclaimable.unwrap_or(0),
        swap_used: mem.swap_total.saturating_sub(mem.swap_free),
    })
}

/// First number of the "intr" line: all interrupts since boot.
fn parse_intr(stat: &str) -> Option<u64> {
    stat.lines()
        .find_map(|l| l.strip_prefix("intr "))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

pub(crate) fn to_io(e: crate::system::proc::ProcError) -> io::Error {
    crate::system::proc::to_io(e)
}

/// Percentage rounded as procps does: (100*part + total/2) / total.
fn pct(part: u64, total: u64) -> f64 {
    if total == 0 {
        return 0.0;
    }
    ((100 * part as u128 + total as u128 / 2) / total as u128) as f64
}

/// Rates between two readings `seconds` apart. Counters that went backwards
/// (iowait can, per proc(5)) count as zero rather than wrapping.
pub(crate) fn delta(prev: &VmstatCounters, cur: &VmstatCounters, seconds: f64) -> VmstatRow {
    let d = |a: u64, b: u64| b.saturating_sub(a);
    let rate = |n: u64| {
        if seconds > 0.0 {
            n as f64 / seconds
        } else {
            0.0
        }
    };
    let kb_per_page = (cur.page_size / 1024).max(1);

    let us = d(prev.cpu_user, cur.cpu_user);
    let sy = d(prev.cpu_system, cur.cpu_system);
    let id = d(prev.cpu_idle, cur.cpu_idle);
    let wa = d(prev.cpu_iowait, cur.cpu_iowait);
    let st = d(prev.cpu_steal, cur.cpu_steal);
    let total = us + sy + id + wa + st;
    // procps shows 100% idle when no tick elapsed.
    let idle_pct = if total == 0 { 100.0 } else { pct(id, total) };

    VmstatRow {
        r: cur.procs_running.saturating_sub(1),
        b: cur.procs_blocked,
        swpd_kb: cur.swap_used / 1024,
        free_kb: cur.mem_free / 1024,
        buff_kb: cur.buffers / 1024,
        cache_kb: cur.cached / 1024,
        si: rate(d(prev.pswpin, cur.pswpin) * kb_per_page),
        so: rate(d(prev.pswpout, cur.pswpout) * kb_per_page),
        bi: rate(d(prev.pgpgin, cur.pgpgin)),
        bo: rate(d(prev.pgpgout, cur.pgpgout)),
        in_s: rate(d(prev.intr, cur.intr)),
        cs_s: rate(d(prev.ctxt, cur.ctxt)),
        us: pct(us, total),
        sy: pct(sy, total),
        id: idle_pct,
        wa: pct(wa, total),
        st: pct(st, total),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> VmstatCounters {
        VmstatCounters {
            cpu_user: 1000,
            cpu_system: 500,
            cpu_idle: 10_000,
            cpu_iowait: 100,
            cpu_steal: 0,
            intr: 50_000,
            ctxt: 80_000,
            procs_running: 1,
            procs_blocked: 0,
            pgpgin: 4_000,
            pgpgout: 8_000,
            pswpin: 10,
            pswpout: 20,
            page_size: 4096,
            mem_free: 1024 * 1024 * 1024,
            buffers: 10 * 1024 * 1024,
            cached: 500 * 1024 * 1024,
            swap_used: 0,
        }
    }

    #[test]
    fn two_second_interval() {
        let a = base();
        let mut b = a.clone();
        // 2 s on 2 CPUs at 100 Hz = 400 jiffies.
        b.cpu_user += 100;
        b.cpu_system += 50;
        b.cpu_idle += 200;
        b.cpu_iowait += 40;
        b.cpu_steal += 10;
        b.intr += 2_000;
        b.ctxt += 3_000;
        b.procs_running = 3;
        b.procs_blocked = 2;
        b.pgpgin += 1_000; // KiB
        b.pgpgout += 20_000;
        b.pswpin += 5; // pages
        b.pswpout += 50;
        b.swap_used = 8 * 1024 * 1024;
        let r = delta(&a, &b, 2.0);
        assert_eq!(r.r, 2);
        assert_eq!(r.b, 2);
        assert_eq!(r.swpd_kb, 8192);
        assert_eq!(r.free_kb, 1024 * 1024);
        assert_eq!(r.buff_kb, 10 * 1024);
        assert_eq!(r.cache_kb, 500 * 1024);
        assert_eq!(r.si, 10.0); // 5 pages * 4 KiB / 2 s
        assert_eq!(r.so, 100.0);
        assert_eq!(r.bi, 500.0);
        assert_eq!(r.bo, 10_000.0);
        assert_eq!(r.in_s, 1_000.0);
        assert_eq!(r.cs_s, 1_500.0);
        assert_eq!(
            (r.us, r.sy, r.id, r.wa, r.st),
            (25.0, 13.0, 50.0, 10.0, 3.0)
        );
    }

    #[test]
    fn rounding_like_procps() {
        // 1/3 each: procps prints 33 33 33.
        assert_eq!(pct(1, 3), 33.0);
        assert_eq!(pct(2, 3), 67.0);
        assert_eq!(pct(1, 200), 1.0); // 0.5 rounds up
        assert_eq!(pct(5, 0), 0.0);
    }

    #[test]
    fn no_ticks_and_backwards_counters() {
        let a = base();
        let mut b = a.clone();
        b.cpu_iowait -= 50; // iowait may decrease
        b.procs_running = 0;
        let r = delta(&a, &b, 1.0);
        assert_eq!(r.id, 100.0);
        assert_eq!(r.wa, 0.0);
        assert_eq!(r.r, 0);
        let r = delta(&a, &a, 0.0);
        assert_eq!(r.in_s, 0.0);
    }

    #[test]
    fn intr_line() {
        assert_eq!(
            parse_intr("cpu 1 2 3\nintr 12345 0 5 6\nctxt 9\n"),
            Some(12345)
        );
        assert_eq!(parse_intr("cpu 1 2 3\n"), None);
    }

    #[test]
    fn real_read() {
        let a = read().expect("read /proc");
        assert!(a.cpu_idle > 0 && a.ctxt > 0 && a.intr > 0);
        assert!(a.procs_running >= 1);
        assert!(a.mem_free > 0 && a.page_size >= 4096);
    }
}
