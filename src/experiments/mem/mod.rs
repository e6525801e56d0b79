//! Memory hierarchy experiments (lmbench-class).

pub(crate) mod bandwidth;
pub(crate) mod latency;
pub(crate) mod mmap_read;

use crate::engine::Experiment;
use crate::experiments::common::child::PinGuard;

pub(crate) fn all() -> Vec<Box<dyn Experiment>> {
    vec![
        Box::new(latency::Latency),
        Box::new(bandwidth::Bandwidth),
        Box::new(mmap_read::MmapRead),
    ]
}

/// The `pin` parameter of the memory experiments.
pub(crate) const fn pin_param() -> crate::engine::ParamSpec {
    crate::engine::ParamSpec::new(
        "pin",
        crate::engine::ParamKind::Bool,
        "yes",
        "pin the measuring thread to the CPU it starts on (threads=all: thread i to the \
         i-th usable CPU), so no migration lands inside a timing",
    )
}

/// Pin the calling thread to the CPU it is running on now, for as long as
/// the guard lives (`pin` false: a guard that does nothing), and say where.
pub(crate) fn pin_here(pin: bool) -> crate::Result<(PinGuard, Option<usize>)> {
    let cpu = pin.then(rustix::thread::sched_getcpu);
    Ok((PinGuard::new(cpu)?, cpu))
}

/// The memory note of a point: the arrays it allocated once in prepare()
/// next to tunelab's RSS now and its peak so far (VmHWM), so a reader sees
/// that nothing else grows with the measurement.
pub(crate) fn memory_note(what: &str, bytes: u64) -> String {
    use crate::units::format_size;
    match crate::observe::procmem::read_proc(std::process::id()) {
        Ok(m) => format!(
            "memory: {what} {} set up once before the trials; tunelab RSS {}, peak so far {}",
            format_size(bytes),
            format_size(m.rss),
            format_size(m.peak_rss)
        ),
        Err(_) => format!(
            "memory: {what} {} set up once before the trials",
            format_size(bytes)
        ),
    }
}

/// Bytes this process can still allocate: MemAvailable, or the memory
/// cgroup's headroom when that is smaller (`system::limits`).
pub(crate) fn mem_available() -> Option<u64> {
    crate::system::limits::MemoryLimits::read().available()
}

/// One data or unified CPU cache level as sysfs describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CacheLevel {
    pub(crate) level: u32,
    /// Bytes.
    pub(crate) size: u64,
}

/// Data/unified caches of CPU 0 from
/// /sys/devices/system/cpu/cpu0/cache/index*/{level,type,size}, by level.
pub(crate) fn cache_levels() -> Vec<CacheLevel> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/sys/devices/system/cpu/cpu0/cache") else {
        return out;
    };
    for e in dir.flatten() {
        let p = e.path();
        if !e.file_name().to_string_lossy().starts_with("index") {
            continue;
        }
        let read = |f: &str| std::fs::read_to_string(p.join(f)).unwrap_or_default();
        if read("type").trim() == "Instruction" {
            continue;
        }
        let (Ok(level), Some(size)) = (
            read("level").trim().parse::<u32>(),
            parse_sysfs_size(read("size").trim()),
        ) else {
            continue;
        };
        out.push(CacheLevel { level, size });
    }
    out.sort_by_key(|c| c.level);
    out.dedup_by_key(|c| c.level);
    out
}

/// "32K", "1024K", "32768K", "2M" -> bytes.
pub(crate) fn parse_sysfs_size(s: &str) -> Option<u64> {
    let (num, mult) = match s.chars().last()? {
        'K' | 'k' => (&s[..s.len() - 1], 1u64 << 10),
        'M' | 'm' => (&s[..s.len() - 1], 1 << 20),
        'G' | 'g' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.trim().parse::<u64>().ok().map(|n| n * mult)
}

/// Sizes from `min` to `max` (both included), `per_doubling` per factor of
/// two, geometric, rounded down to 64 B multiples, strictly increasing.
pub(crate) fn sweep_sizes(min: u64, max: u64, per_doubling: u32) -> Vec<u64> {
    let mut out: Vec<u64> = Vec::new();
    let per = per_doubling.max(1) as f64;
    let mut k = 0u32;
    loop {
        let s = (min as f64 * 2f64.powf(k as f64 / per)).round() as u64;
        if s >= max {
            break;
        }
        let s = (s / 64 * 64).max(64.min(min));
        if out.last().is_none_or(|&l| s > l) {
            out.push(s);
        }
        k += 1;
    }
    if out.last().is_none_or(|&l| max > l) {
        out.push(max);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_geometric_and_bounded() {
        let s = sweep_sizes(1024, 256 << 20, 4);
        assert_eq!(s[0], 1024);
        assert_eq!(*s.last().unwrap(), 256 << 20);
        assert_eq!(s.len(), 18 * 4 + 1);
        assert!(s.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(sweep_sizes(4096, 4096, 2), vec![4096]);
        assert_eq!(parse_sysfs_size("32768K"), Some(32 << 20));
        assert_eq!(parse_sysfs_size("2M"), Some(2 << 20));
        assert_eq!(parse_sysfs_size("x"), None);
    }
}
