//! Memory of one process (/proc/<pid>/smaps_rollup and status) and of the
//! whole system the way `free` reports it (/proc/meminfo).

use crate::system::proc::Current;
use serde::{Deserialize, Serialize};
use std::io;

/// One process's memory at one instant, bytes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct ProcMem {
    pub(crate) rss: u64,
    /// Proportional set size: shared pages divided among their users.
    pub(crate) pss: Option<u64>,
    pub(crate) vsz: u64,
    pub(crate) shared: Option<u64>,
    pub(crate) private: Option<u64>,
    pub(crate) swap: Option<u64>,
    /// VmHWM: the kernel's own peak RSS of the process.
    pub(crate) peak_rss: u64,
}

/// `free`: used = total − free − buff/cache (procps-ng ≥ 3.3.10), bytes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct SystemMem {
    pub(crate) total: u64,
    pub(crate) used: u64,
    pub(crate) free: u64,
    pub(crate) shared: u64,
    pub(crate) buff_cache: u64,
    pub(crate) available: u64,
    pub(crate) swap_used: u64,
}

fn kb_field(text: &str, key: &str) -> Option<u64> {
    crate::system::proc::keyed::kib_bytes(text, key)
}

/// Pure: build a ProcMem from the text of `status` and (optionally)
/// `smaps_rollup`.
pub(crate) fn parse_proc(status: &str, rollup: Option<&str>) -> Option<ProcMem> {
    let rss = kb_field(status, "VmRSS")?;
    let mut m = ProcMem {
        rss,
        vsz: kb_field(status, "VmSize").unwrap_or(0),
        peak_rss: kb_field(status, "VmHWM").unwrap_or(rss),
        ..Default::default()
    };
    if let Some(r) = rollup {
        let f = |k| kb_field(r, k).unwrap_or(0);
        m.pss = kb_field(r, "Pss");
        m.shared = Some(f("Shared_Clean") + f("Shared_Dirty"));
        m.private = Some(f("Private_Clean") + f("Private_Dirty"));
        m.swap = kb_field(r, "Swap");
    }
    Some(m)
}

/// Read a process; Err(NotFound) when it does not exist (or is a zombie
/// without memory).
pub(crate) fn read_proc(pid: u32) -> io::Result<ProcMem> {
    let status = crate::system::proc::read_pid(pid, "status")?;
    let rollup = crate::system::proc::read_pid(pid, "smaps_rollup").ok();
    parse_proc(&status, rollup.as_deref()).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("process {pid} has no memory (kernel thread or exited)"),
        )
    })
}

/// `free`'s figures from /proc/meminfo as procfs reads it (in bytes).
pub(crate) fn system_mem(m: &crate::system::proc::Meminfo) -> SystemMem {
    let buff_cache = m.buffers + m.cached + m.s_reclaimable.unwrap_or(0);
    SystemMem {
        total: m.mem_total,
        used: m.mem_total.saturating_sub(m.mem_free + buff_cache),
        free: m.mem_free,
        shared: m.shmem.unwrap_or(0),
        buff_cache,
        available: m.mem_available.unwrap_or(m.mem_free + buff_cache),
        swap_used: m.swap_total.saturating_sub(m.swap_free),
    }
}

/// /proc/meminfo, through procfs.
pub(crate) fn read_meminfo() -> io::Result<crate::system::proc::Meminfo> {
    crate::system::proc::Meminfo::current().map_err(super::vmstat::to_io)
}

pub(crate) fn read_system() -> io::Result<SystemMem> {
    Ok(system_mem(&read_meminfo()?))
}

/// Running maxima over samples of one process.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct ProcPeak {
    pub(crate) samples: usize,
    pub(crate) rss: u64,
    pub(crate) pss: u64,
    pub(crate) vsz: u64,
}

impl ProcPeak {
    pub(crate) fn add(&mut self, m: &ProcMem) {
        self.samples += 1;
        self.rss = self.rss.max(m.rss).max(m.peak_rss);
        self.pss = self.pss.max(m.pss.unwrap_or(0));
        self.vsz = self.vsz.max(m.vsz);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_status_and_rollup() {
        let status = "Name:\tx\nVmPeak:\t  2000 kB\nVmSize:\t  1800 kB\nVmHWM:\t   900 kB\nVmRSS:\t   800 kB\n";
        let rollup = "00400000-7fff [rollup]\nRss:  800 kB\nPss:  500 kB\nShared_Clean:  300 kB\n\
                      Shared_Dirty:  20 kB\nPrivate_Clean: 100 kB\nPrivate_Dirty: 380 kB\nSwap: 0 kB\n";
        let m = parse_proc(status, Some(rollup)).unwrap();
        assert_eq!(m.rss, 800 * 1024);
        assert_eq!(m.vsz, 1800 * 1024);
        assert_eq!(m.peak_rss, 900 * 1024);
        assert_eq!(m.pss, Some(500 * 1024));
        assert_eq!(m.shared, Some(320 * 1024));
        assert_eq!(m.private, Some(480 * 1024));
        assert!(parse_proc("Name:\tkthreadd\n", None).is_none());
        let mut p = ProcPeak::default();
        p.add(&m);
        assert_eq!(p.rss, 900 * 1024);
    }

    #[test]
    fn free_arithmetic() {
        use crate::system::proc::FromBufRead;
        // The fields procfs requires, then those `free` reads.
        let t = "MemTotal: 1000 kB\nMemFree: 100 kB\nMemAvailable: 600 kB\nBuffers: 50 kB\n\
                 Cached: 300 kB\nSwapCached: 0 kB\nActive: 0 kB\nInactive: 0 kB\n\
                 SwapTotal: 0 kB\nSwapFree: 0 kB\nDirty: 0 kB\nWriteback: 0 kB\nMapped: 0 kB\n\
                 Slab: 0 kB\nCommitted_AS: 0 kB\nVmallocTotal: 0 kB\nVmallocUsed: 0 kB\n\
                 VmallocChunk: 0 kB\nShmem: 10 kB\nSReclaimable: 50 kB\n";
        let s = system_mem(&crate::system::proc::Meminfo::from_buf_read(t.as_bytes()).unwrap());
        assert_eq!(s.buff_cache, 400 * 1024);
        assert_eq!(s.used, 500 * 1024);
        assert_eq!(s.available, 600 * 1024);
        let me = read_proc(std::process::id()).unwrap();
        assert!(me.rss > 0 && me.pss.is_some());
        assert!(read_system().unwrap().total > 0);
    }
}
