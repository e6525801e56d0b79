//! The counters the USE table is computed from, read at one end of the
//! interval: /proc/vmstat, diskstats, PSI, /proc/net/dev, meminfo, link
//! speeds and tunelab's own CPU time.

use std::collections::BTreeMap;
use std::path::Path;

use super::super::workload::parse_stat_figures;
use crate::observe::iostat::{self, DiskCounters};
use crate::observe::pressure::{self, PsiCounters};
use crate::observe::vmstat::{self, VmstatCounters};

/// One interface of /proc/net/dev.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct NetCounters {
    pub(crate) name: String,
    pub(crate) rx_bytes: u64,
    pub(crate) rx_errs: u64,
    pub(crate) rx_drop: u64,
    pub(crate) rx_fifo: u64,
    pub(crate) tx_bytes: u64,
    pub(crate) tx_errs: u64,
    pub(crate) tx_drop: u64,
    pub(crate) tx_fifo: u64,
    pub(crate) tx_colls: u64,
}

pub(crate) fn parse_net_dev(text: &str) -> Vec<NetCounters> {
    text.lines()
        .filter_map(|l| {
            let (name, rest) = l.split_once(':')?;
            let v: Vec<u64> = rest
                .split_whitespace()
                .map(|w| w.parse().ok())
                .collect::<Option<_>>()?;
            if v.len() < 16 {
                return None;
            }
            Some(NetCounters {
                name: name.trim().to_string(),
                rx_bytes: v[0],
                rx_errs: v[2],
                rx_drop: v[3],
                rx_fifo: v[4],
                tx_bytes: v[8],
                tx_errs: v[10],
                tx_drop: v[11],
                tx_fifo: v[12],
                tx_colls: v[13],
            })
        })
        .collect()
}

/// "key value" lines (/proc/vmstat) or "Key: value kB" (/proc/meminfo).
pub(crate) fn parse_keyed(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let k = w.next()?.trim_end_matches(':').to_string();
            let v = w.next()?.parse().ok()?;
            Some((k, v))
        })
        .collect()
}

/// Runnable tasks from /proc/loadavg's "running/total" field.
pub(crate) fn parse_loadavg_running(text: &str) -> Option<u64> {
    text.split_whitespace()
        .nth(3)?
        .split('/')
        .next()?
        .parse()
        .ok()
}

/// Everything read at one end of the interval.
#[derive(Debug, Clone, Default)]
pub(crate) struct Snapshot {
    pub(crate) vm: Option<VmstatCounters>,
    pub(crate) disks: Vec<DiskCounters>,
    pub(crate) psi: Vec<PsiCounters>,
    pub(crate) net: Vec<NetCounters>,
    pub(crate) vmstat: BTreeMap<String, u64>,
    pub(crate) meminfo: BTreeMap<String, u64>,
    /// Link speed of each interface, Mb/s (/sys/class/net/IF/speed).
    pub(crate) speeds: BTreeMap<String, u64>,
    /// tunelab's own user and system time, clock ticks (/proc/self/stat):
    /// left out of the CPU figures.
    pub(crate) own_ticks: Option<(u64, u64)>,
}

impl Snapshot {
    pub(crate) fn read(root: &Path) -> Snapshot {
        Snapshot {
            vm: vmstat::read().ok(),
            disks: iostat::read_all().unwrap_or_default(),
            psi: pressure::read_psi().unwrap_or_default(),
            net: crate::system::proc::Root::under(root)
                .read("net/dev")
                .map(|t| parse_net_dev(&t))
                .unwrap_or_default(),
            vmstat: crate::system::proc::Root::under(root)
                .read("vmstat")
                .map(|t| parse_keyed(&t))
                .unwrap_or_default(),
            meminfo: crate::system::proc::Root::under(root)
                .read("meminfo")
                .map(|t| parse_keyed(&t))
                .unwrap_or_default(),
            speeds: link_speeds(root),
            own_ticks: crate::system::proc::read_pid("self", "stat")
                .ok()
                .and_then(|t| parse_stat_figures(&t))
                .map(|(_, _, u, s)| (u, s)),
        }
    }
}

fn link_speeds(root: &Path) -> BTreeMap<String, u64> {
    let Ok(rd) = std::fs::read_dir(root.join("sys/class/net")) else {
        return BTreeMap::new();
    };
    rd.flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            // Reading speed of a link that is down fails with EINVAL.
            let s = std::fs::read_to_string(e.path().join("speed")).ok()?;
            let s: i64 = s.trim().parse().ok()?;
            (s > 0).then_some((name, s as u64))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::test_support::fixture;

    #[test]
    fn net_dev_and_loadavg() {
        let t = fixture("proc/net/dev");
        let n = parse_net_dev(&t);
        assert_eq!(n.len(), 2);
        assert_eq!(n[1].name, "eth0");
        assert_eq!(n[1].rx_bytes, 91_234_567);
        assert_eq!((n[1].rx_errs, n[1].rx_drop), (2, 17));
        assert_eq!(
            (n[1].tx_bytes, n[1].tx_errs, n[1].tx_colls),
            (4_567_890, 0, 3)
        );
        assert_eq!(
            parse_loadavg_running("0.52 0.58 0.59 7/419 12345\n"),
            Some(7)
        );
    }
}
