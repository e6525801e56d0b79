//! Interrupt and softirq rates per source and per CPU (/proc/interrupts,
//! /proc/softirqs), like `sar -I ALL` / `sar -I SUM`.

use serde::{Deserialize, Serialize};
use std::io;

/// One source's cumulative counts per CPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IrqCounts {
    /// "24", "LOC", "NET_RX", ...
    pub(crate) source: String,
    /// Controller / device description (empty for softirqs).
    pub(crate) desc: String,
    pub(crate) per_cpu: Vec<u64>,
}

/// One source's rate over an interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct IrqRate {
    pub(crate) source: String,
    pub(crate) desc: String,
    pub(crate) kind: String,
    pub(crate) total_per_s: f64,
    pub(crate) per_cpu_per_s: Vec<f64>,
}

/// Parse /proc/interrupts or /proc/softirqs text: a header of CPU names,
/// then `SOURCE: n n n … [description]`. Lines with fewer numbers than
/// CPUs (ERR, MIS) are padded with zeros.
pub(crate) fn parse(text: &str) -> Vec<IrqCounts> {
    let mut lines = text.lines();
    let ncpu = lines
        .next()
        .map(|h| {
            h.split_whitespace()
                .filter(|w| w.starts_with("CPU"))
                .count()
        })
        .unwrap_or(0);
    let mut out = Vec::new();
    for l in lines {
        let Some((src, rest)) = l.split_once(':') else {
            continue;
        };
        let mut per_cpu = Vec::with_capacity(ncpu);
        let mut words = rest.split_whitespace().peekable();
        while per_cpu.len() < ncpu {
            match words.peek().and_then(|w| w.parse::<u64>().ok()) {
                Some(n) => {
                    per_cpu.push(n);
                    words.next();
                }
                None => break,
            }
        }
        per_cpu.resize(ncpu, 0);
        out.push(IrqCounts {
            source: src.trim().to_string(),
            desc: words.collect::<Vec<_>>().join(" "),
            per_cpu,
        });
    }
    out
}

pub(crate) fn read_interrupts() -> io::Result<Vec<IrqCounts>> {
    Ok(parse(&crate::system::proc::read("interrupts")?))
}

pub(crate) fn read_softirqs() -> io::Result<Vec<IrqCounts>> {
    Ok(parse(&crate::system::proc::read("softirqs")?))
}

/// Rates between two readings, busiest first, sources with no activity
/// left out. A source that appeared or whose counters went backwards (CPU
/// hot-unplug) counts from zero / as zero.
pub(crate) fn delta(
    prev: &[IrqCounts],
    cur: &[IrqCounts],
    seconds: f64,
    kind: &str,
) -> Vec<IrqRate> {
    if seconds <= 0.0 {
        return Vec::new();
    }
    let mut out: Vec<IrqRate> = cur
        .iter()
        .filter_map(|c| {
            let p = prev.iter().find(|p| p.source == c.source);
            let per: Vec<f64> = c
                .per_cpu
                .iter()
                .enumerate()
                .map(|(i, &n)| {
                    let before = p.and_then(|p| p.per_cpu.get(i)).copied().unwrap_or(0);
                    n.saturating_sub(before) as f64 / seconds
                })
                .collect();
            let total: f64 = per.iter().sum();
            (total > 0.0).then(|| IrqRate {
                source: c.source.clone(),
                desc: c.desc.clone(),
                kind: kind.to_string(),
                total_per_s: total,
                per_cpu_per_s: per,
            })
        })
        .collect();
    out.sort_by(|a, b| b.total_per_s.total_cmp(&a.total_per_s));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: &str =
        "           CPU0       CPU1\n  24:          1          0  IO-APIC   5-edge      ACPI:Ged\n\
                      LOC:        100        200   Local timer interrupts\n ERR:          0\n";
    const T1: &str =
        "           CPU0       CPU1\n  24:          3          0  IO-APIC   5-edge      ACPI:Ged\n\
                      LOC:        300        600   Local timer interrupts\n ERR:          0\n";

    #[test]
    fn parse_and_rates() {
        let a = parse(T0);
        assert_eq!(a.len(), 3);
        assert_eq!(a[0].source, "24");
        assert_eq!(a[0].desc, "IO-APIC 5-edge ACPI:Ged");
        assert_eq!(a[2].per_cpu, vec![0, 0]);
        let r = delta(&a, &parse(T1), 2.0, "hard");
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].source, "LOC");
        assert_eq!(r[0].total_per_s, 300.0);
        assert_eq!(r[0].per_cpu_per_s, vec![100.0, 200.0]);
        assert_eq!(r[1].total_per_s, 1.0);
    }

    #[test]
    fn softirqs_and_real() {
        let s = "                    CPU0       CPU1\n          HI:          0          0\n       TIMER:      34261      39878\n";
        let p = parse(s);
        assert_eq!(p[1].source, "TIMER");
        assert_eq!(p[1].per_cpu, vec![34261, 39878]);
        assert!(!read_interrupts().unwrap().is_empty());
    }
}
