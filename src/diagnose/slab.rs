//! Section 6, slab churn. With CONFIG_SLUB_STATS the per-cache counters
//! `/sys/kernel/slab/*/{alloc,free}_{fastpath,slowpath}` are read before
//! and after the interval (`slabinfo -AD`'s view: allocations, frees and
//! the fast-path share); otherwise `/proc/slabinfo` is sampled at 10 Hz and
//! the changes of each cache's active objects are summed: net changes
//! between samples, a lower bound of the real churn.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{overhead, thread_cpu_s, Sampled, Ticker};
use crate::model::diagnosis::{Section, SlabCache, SlabReport};
use crate::observe::pressure::{parse_slabinfo, SlabCounts};

/// Caches kept, busiest first.
pub(crate) const TOP: usize = 15;

const STAT_FILES: [&str; 4] = [
    "alloc_fastpath",
    "alloc_slowpath",
    "free_fastpath",
    "free_slowpath",
];

/// "123456 C0=100 C1=23" → the total.
pub(crate) fn parse_stat(text: &str) -> Option<u64> {
    text.split_whitespace().next()?.parse().ok()
}

/// SLUB_STATS counters of each cache: [alloc fast, alloc slow, free fast,
/// free slow], with its object size and active objects. Merged caches
/// (":A-0000192") are named after the caches that alias them.
pub(crate) fn read_slub_stats(root: &Path) -> BTreeMap<String, ([u64; 4], u64, u64)> {
    let dir = root.join("sys/kernel/slab");
    let mut aliases: HashMap<PathBuf, Vec<String>> = HashMap::new();
    let mut real = Vec::new();
    let Ok(rd) = std::fs::read_dir(&dir) else {
        return BTreeMap::new();
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        let path = e.path();
        match std::fs::read_link(&path) {
            Ok(target) => {
                let t = dir.join(target);
                let t = t.canonicalize().unwrap_or(t);
                aliases.entry(t).or_default().push(name);
            }
            Err(_) => real.push((name, path)),
        }
    }
    let mut out = BTreeMap::new();
    for (name, path) in real {
        let mut v = [0u64; 4];
        let mut ok = true;
        for (i, f) in STAT_FILES.iter().enumerate() {
            match std::fs::read_to_string(path.join(f))
                .ok()
                .and_then(|t| parse_stat(&t))
            {
                Some(n) => v[i] = n,
                None => ok = false,
            }
        }
        if !ok {
            continue;
        }
        let num = |f: &str| {
            std::fs::read_to_string(path.join(f))
                .ok()
                .and_then(|t| parse_stat(&t))
                .unwrap_or(0)
        };
        let canon = path.canonicalize().unwrap_or(path.clone());
        let display = if name.starts_with(':') {
            let mut a = aliases.get(&canon).cloned().unwrap_or_default();
            a.sort();
            if a.is_empty() {
                name
            } else {
                a.join(",")
            }
        } else {
            name
        };
        out.insert(display, (v, num("object_size"), num("objects")));
    }
    out
}

/// `slabinfo -AD`-style rows from two readings of the SLUB_STATS counters.
pub(crate) fn slub_delta(
    before: &BTreeMap<String, ([u64; 4], u64, u64)>,
    after: &BTreeMap<String, ([u64; 4], u64, u64)>,
    seconds: f64,
) -> Vec<SlabCache> {
    busiest(after.iter().map(|(name, (a, size, objs))| {
        let b = before.get(name).map(|x| x.0).unwrap_or(*a);
        let d: Vec<u64> = (0..4).map(|i| a[i].saturating_sub(b[i])).collect();
        let allocs = d[0] + d[1];
        let frees = d[2] + d[3];
        let share = |fast: u64, all: u64| (all > 0).then(|| fast as f64 / all as f64 * 100.0);
        SlabCache {
            alloc_fast_pct: share(d[0], allocs),
            free_fast_pct: share(d[2], frees),
            ..counted(name, *size, *objs, allocs, frees, seconds)
        }
    }))
}

/// A cache's row from its allocations and frees over `seconds` (no
/// fast-path split: only SLUB_STATS counts that).
fn counted(
    name: &str,
    obj_size: u64,
    active_objs: u64,
    allocs: u64,
    frees: u64,
    seconds: f64,
) -> SlabCache {
    SlabCache {
        name: name.to_string(),
        obj_size,
        active_objs,
        allocs,
        frees,
        alloc_fast_pct: None,
        free_fast_pct: None,
        churn_per_s: if seconds > 0.0 {
            (allocs + frees) as f64 / seconds
        } else {
            0.0
        },
    }
}

/// The caches that allocated or freed anything, the busiest first, at most
/// `TOP` of them.
fn busiest(rows: impl Iterator<Item = SlabCache>) -> Vec<SlabCache> {
    let mut rows: Vec<SlabCache> = rows.filter(|c| c.allocs + c.frees > 0).collect();
    rows.sort_by(|a, b| {
        (b.allocs + b.frees)
            .cmp(&(a.allocs + a.frees))
            .then(a.name.cmp(&b.name))
    });
    rows.truncate(TOP);
    rows
}

/// Sums of the rises and falls of each cache's active objects between
/// /proc/slabinfo samples.
#[derive(Default)]
pub(crate) struct SlabinfoSampler {
    root: PathBuf,
    last: HashMap<String, SlabCounts>,
    rises: HashMap<String, u64>,
    falls: HashMap<String, u64>,
    error: Option<String>,
}

impl SlabinfoSampler {
    pub(crate) fn new(root: &Path) -> Self {
        SlabinfoSampler {
            root: root.to_path_buf(),
            ..Default::default()
        }
    }

    /// Account one reading of /proc/slabinfo.
    pub(crate) fn feed(&mut self, text: &str) {
        for c in parse_slabinfo(text) {
            if let Some(p) = self.last.get(&c.name) {
                if c.active_objs > p.active_objs {
                    *self.rises.entry(c.name.clone()).or_default() += c.active_objs - p.active_objs;
                } else {
                    *self.falls.entry(c.name.clone()).or_default() += p.active_objs - c.active_objs;
                }
            }
            self.last.insert(c.name.clone(), c);
        }
    }

    pub(crate) fn rows(&self, seconds: f64) -> Vec<SlabCache> {
        busiest(self.last.values().map(|c| {
            let allocs = self.rises.get(&c.name).copied().unwrap_or(0);
            let frees = self.falls.get(&c.name).copied().unwrap_or(0);
            counted(&c.name, c.obj_size, c.active_objs, allocs, frees, seconds)
        }))
    }
}

impl Sampled for SlabinfoSampler {
    fn sample(&mut self) {
        match crate::system::proc::Root::under(&self.root).read("slabinfo") {
            Ok(t) => self.feed(&t),
            Err(e) => {
                self.error.get_or_insert_with(|| e.to_string());
            }
        }
    }
}

pub(crate) enum Collector {
    Slub {
        root: PathBuf,
        before: BTreeMap<String, ([u64; 4], u64, u64)>,
        cpu_s: f64,
    },
    Slabinfo(Ticker<SlabinfoSampler>),
}

const PERIOD_MS: u64 = 100;

impl Collector {
    pub(crate) fn start(
        root: &Path,
        pace: Option<std::sync::Arc<super::budget::Pace>>,
    ) -> Collector {
        let cpu0 = thread_cpu_s();
        let before = read_slub_stats(root);
        if !before.is_empty() {
            return Collector::Slub {
                root: root.to_path_buf(),
                before,
                cpu_s: thread_cpu_s() - cpu0,
            };
        }
        Collector::Slabinfo(Ticker::adaptive(
            "slab",
            SlabinfoSampler::new(root),
            Duration::from_millis(PERIOD_MS),
            // No cap that matters: a slow board spent 300 ms per read of
            // /proc/slabinfo, so there it is read at the ends only (net
            // change: the lower bound the method states anyway).
            Duration::from_secs(3600),
            super::budget::READER_SHARE,
            pace,
        ))
    }

    pub(crate) fn finish(self, interval: f64) -> Section<SlabReport> {
        match self {
            Collector::Slub {
                root,
                before,
                cpu_s,
            } => {
                let cpu0 = thread_cpu_s();
                let after = read_slub_stats(&root);
                let caches = slub_delta(&before, &after, interval);
                Section::Present {
                    data: SlabReport {
                        source: "slub_stats".into(),
                        caches,
                        method: "CONFIG_SLUB_STATS counters /sys/kernel/slab/*/{alloc,free}_\
                                 {fastpath,slowpath} read before and after the interval (as \
                                 slabinfo -AD); merged caches named after their aliases"
                            .into(),
                    },
                    overhead: overhead(
                        cpu_s + thread_cpu_s() - cpu0,
                        interval,
                        2,
                        "two readings of every cache's counters",
                    ),
                }
            }
            Collector::Slabinfo(t) => {
                let (s, cpu, n) = t.stop();
                if let (Some(e), true) = (&s.error, s.last.is_empty()) {
                    return Section::skipped(format!(
                        "no CONFIG_SLUB_STATS counters in /sys/kernel/slab and /proc/slabinfo is \
                         unreadable ({e}; it is root-only)"
                    ));
                }
                Section::Present {
                    data: SlabReport {
                        source: "slabinfo".into(),
                        caches: s.rows(interval),
                        method: format!(
                            "no CONFIG_SLUB_STATS here: /proc/slabinfo sampled {} and the rises (counted as allocations) and falls (frees) of each \
                             cache's active objects summed — net changes between samples, so a \
                             lower bound of the real churn, with no fast/slow-path split",
                            super::every(interval, n, super::budget::READER_SHARE)
                        ),
                    },
                    overhead: overhead(cpu, interval, n, "the sampling thread"),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::test_support::FIXTURES;

    #[test]
    fn slub_stats_with_aliases() {
        let before = read_slub_stats(&Path::new(FIXTURES).join("before"));
        let after = read_slub_stats(&Path::new(FIXTURES).join("after"));
        assert_eq!(before.len(), 3, "{before:?}");
        let rows = slub_delta(&before, &after, 2.0);
        assert_eq!(rows[0].name, "kmalloc-512");
        assert_eq!(rows[0].allocs, 300_000);
        assert_eq!(rows[0].frees, 299_000);
        assert!((rows[0].alloc_fast_pct.unwrap() - 20.0).abs() < 1e-9);
        assert!((rows[0].churn_per_s - 299_500.0).abs() < 1e-9);
        // The merged cache is named after the caches that alias it.
        assert_eq!(rows[1].name, "kmalloc-192,skbuff_head_cache");
        assert_eq!(rows[1].obj_size, 192);
        assert_eq!(rows.len(), 2, "an idle cache is left out");
    }

    #[test]
    fn slabinfo_sums_rises_and_falls() {
        let mut s = SlabinfoSampler::default();
        let t = |n: u64| {
            format!(
                "slabinfo - version: 2.1\n# name <active_objs> <num_objs> <objsize> …\n\
                 kmalloc-512 {n} 4096 512 16 2 : tunables 0 0 0 : slabdata 256 256 0\n\
                 dentry 100 100 192 21 1 : tunables 0 0 0 : slabdata 5 5 0\n"
            )
        };
        for n in [1000, 1500, 900, 1200] {
            s.feed(&t(n));
        }
        let rows = s.rows(1.0);
        assert_eq!(rows.len(), 1);
        assert_eq!((rows[0].allocs, rows[0].frees), (800, 600));
        assert_eq!(rows[0].churn_per_s, 1400.0);
    }
}
