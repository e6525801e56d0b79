//! The remaining monitor sources: pressure stall information (/proc/pressure),
//! CPU frequency and idle states (/sys/devices/system/cpu), slab caches
//! (/proc/slabinfo). Each is a `read` plus a pure `delta`/`parse`.

use serde::{Deserialize, Serialize};
use std::io;
use std::path::Path;

// ---------------------------------------------------------------- PSI

/// Cumulative stall time (µs) of one resource.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct PsiCounters {
    pub(crate) resource: String,
    pub(crate) some_total_us: u64,
    pub(crate) full_total_us: Option<u64>,
    pub(crate) some_avg10: f64,
}

/// % of the interval during which some (or all) tasks were stalled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct PsiRow {
    pub(crate) resource: String,
    pub(crate) some_pct: f64,
    pub(crate) full_pct: Option<f64>,
    pub(crate) some_avg10: f64,
}

/// Parse one /proc/pressure/<resource> file.
pub(crate) fn parse_psi(resource: &str, text: &str) -> Option<PsiCounters> {
    let mut c = PsiCounters {
        resource: resource.to_string(),
        ..Default::default()
    };
    let mut found = false;
    for l in text.lines() {
        let mut w = l.split_whitespace();
        let kind = w.next()?;
        let mut total = None;
        let mut avg10 = 0.0;
        for kv in w {
            match kv.split_once('=') {
                Some(("total", v)) => total = v.parse().ok(),
                Some(("avg10", v)) => avg10 = v.parse().unwrap_or(0.0),
                _ => {}
            }
        }
        match kind {
            "some" => {
                c.some_total_us = total?;
                c.some_avg10 = avg10;
                found = true;
            }
            "full" => c.full_total_us = total,
            _ => {}
        }
    }
    found.then_some(c)
}

pub(crate) const PSI_RESOURCES: [&str; 3] = ["cpu", "memory", "io"];

/// All resources; Err(NotFound) when the kernel has no PSI.
pub(crate) fn read_psi() -> io::Result<Vec<PsiCounters>> {
    let mut out = Vec::new();
    for r in PSI_RESOURCES {
        match crate::system::proc::read(&format!("pressure/{r}")) {
            Ok(t) => out.extend(parse_psi(r, &t)),
            // EOPNOTSUPP when PSI is compiled in but disabled (psi=0).
            Err(e) if e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(95) => {}
            Err(e) => return Err(e),
        }
    }
    if out.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            "this kernel exposes no pressure stall information (/proc/pressure: needs CONFIG_PSI, and psi=1 on some kernels)",
        ));
    }
    Ok(out)
}

/// `delta_us` µs as a share of an interval of `us` µs, in % (at most 100:
/// counters can run ahead of the measured interval).
fn share_pct(delta_us: u64, us: f64) -> f64 {
    if us > 0.0 {
        (delta_us as f64 / us * 100.0).min(100.0)
    } else {
        0.0
    }
}

pub(crate) fn psi_delta(prev: &[PsiCounters], cur: &[PsiCounters], seconds: f64) -> Vec<PsiRow> {
    let us = seconds * 1e6;
    cur.iter()
        .map(|c| {
            let p = prev.iter().find(|p| p.resource == c.resource);
            let pct = |a: Option<u64>, b: u64| share_pct(b.saturating_sub(a.unwrap_or(b)), us);
            PsiRow {
                resource: c.resource.clone(),
                some_pct: pct(p.map(|p| p.some_total_us), c.some_total_us),
                full_pct: c
                    .full_total_us
                    .map(|f| pct(p.and_then(|p| p.full_total_us), f)),
                some_avg10: c.some_avg10,
            }
        })
        .collect()
}

// ---------------------------------------------------------------- power

/// Frequency and idle-state counters of one CPU.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct CpuPower {
    pub(crate) cpu: usize,
    pub(crate) governor: Option<String>,
    pub(crate) freq_khz: Option<u64>,
    /// (state name, cumulative residency µs, entries).
    pub(crate) idle: Vec<(String, u64, u64)>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct PowerRow {
    pub(crate) cpu: usize,
    pub(crate) governor: Option<String>,
    pub(crate) freq_mhz: Option<f64>,
    /// (state, % of the interval resident, entries per second).
    pub(crate) idle: Vec<(String, f64, f64)>,
}

fn read_trim(p: &Path) -> Option<String> {
    std::fs::read_to_string(p)
        .ok()
        .map(|s| s.trim().to_string())
}

/// Every online CPU; Err(NotFound) when neither cpufreq nor cpuidle exists.
pub(crate) fn read_power() -> io::Result<Vec<CpuPower>> {
    let base = Path::new("/sys/devices/system/cpu");
    let mut out = Vec::new();
    for e in std::fs::read_dir(base)?.flatten() {
        let name = e.file_name();
        let Some(n) = name
            .to_str()
            .and_then(|s| s.strip_prefix("cpu"))
            .and_then(|s| s.parse::<usize>().ok())
        else {
            continue;
        };
        let dir = e.path();
        let mut c = CpuPower {
            cpu: n,
            governor: read_trim(&dir.join("cpufreq/scaling_governor")),
            freq_khz: read_trim(&dir.join("cpufreq/scaling_cur_freq")).and_then(|s| s.parse().ok()),
            idle: Vec::new(),
        };
        let mut k = 0;
        loop {
            let st = dir.join(format!("cpuidle/state{k}"));
            let Some(name) = read_trim(&st.join("name")) else {
                break;
            };
            let time = read_trim(&st.join("time"))
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            let usage = read_trim(&st.join("usage"))
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            c.idle.push((name, time, usage));
            k += 1;
        }
        out.push(c);
    }
    out.sort_by_key(|c| c.cpu);
    if out
        .iter()
        .all(|c| c.governor.is_none() && c.freq_khz.is_none() && c.idle.is_empty())
    {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            "this machine exposes no CPU frequency (cpufreq) or idle-state (cpuidle) information \
             (common in virtual machines and containers)",
        ));
    }
    Ok(out)
}

pub(crate) fn power_delta(prev: &[CpuPower], cur: &[CpuPower], seconds: f64) -> Vec<PowerRow> {
    let us = seconds * 1e6;
    cur.iter()
        .map(|c| {
            let p = prev.iter().find(|p| p.cpu == c.cpu);
            let idle = c
                .idle
                .iter()
                .map(|(name, t, u)| {
                    let (pt, pu) = p
                        .and_then(|p| p.idle.iter().find(|s| &s.0 == name))
                        .map(|s| (s.1, s.2))
                        .unwrap_or((*t, *u));
                    let pct = share_pct(t.saturating_sub(pt), us);
                    let rate = if seconds > 0.0 {
                        u.saturating_sub(pu) as f64 / seconds
                    } else {
                        0.0
                    };
                    (name.clone(), pct, rate)
                })
                .collect();
            PowerRow {
                cpu: c.cpu,
                governor: c.governor.clone(),
                freq_mhz: c.freq_khz.map(|k| k as f64 / 1000.0),
                idle,
            }
        })
        .collect()
}

// ---------------------------------------------------------------- slab

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SlabCounts {
    pub(crate) name: String,
    pub(crate) active_objs: u64,
    pub(crate) num_objs: u64,
    pub(crate) obj_size: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct SlabRow {
    pub(crate) name: String,
    pub(crate) active_objs: u64,
    pub(crate) obj_size: u64,
    /// Memory held by all objects of the cache (num_objs × objsize).
    pub(crate) bytes: u64,
    /// Net change of active objects per second (/proc/slabinfo has no
    /// allocation counter: this is net churn, a lower bound of the real one).
    pub(crate) churn_per_s: f64,
}

pub(crate) fn parse_slabinfo(text: &str) -> Vec<SlabCounts> {
    text.lines()
        .filter(|l| !l.starts_with("slabinfo") && !l.starts_with('#'))
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            Some(SlabCounts {
                name: w.next()?.to_string(),
                active_objs: w.next()?.parse().ok()?,
                num_objs: w.next()?.parse().ok()?,
                obj_size: w.next()?.parse().ok()?,
            })
        })
        .collect()
}

/// Err(PermissionDenied) for non-root users (the file is mode 0400).
pub(crate) fn read_slabinfo() -> io::Result<Vec<SlabCounts>> {
    Ok(parse_slabinfo(&crate::system::proc::read("slabinfo")?))
}

/// Caches sorted by churn, then by object count.
pub(crate) fn slab_delta(prev: &[SlabCounts], cur: &[SlabCounts], seconds: f64) -> Vec<SlabRow> {
    let mut rows: Vec<SlabRow> = cur
        .iter()
        .map(|c| {
            let before = prev
                .iter()
                .find(|p| p.name == c.name)
                .map_or(c.active_objs, |p| p.active_objs);
            SlabRow {
                name: c.name.clone(),
                active_objs: c.active_objs,
                obj_size: c.obj_size,
                bytes: c.num_objs * c.obj_size,
                churn_per_s: if seconds > 0.0 {
                    c.active_objs.abs_diff(before) as f64 / seconds
                } else {
                    0.0
                },
            }
        })
        .collect();
    rows.sort_by(|a, b| {
        b.churn_per_s
            .total_cmp(&a.churn_per_s)
            .then(b.active_objs.cmp(&a.active_objs))
    });
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn psi() {
        let a = parse_psi(
            "io",
            "some avg10=1.00 avg60=0 avg300=0 total=1000000\nfull avg10=0 avg60=0 avg300=0 total=500000\n",
        )
        .unwrap();
        let b = parse_psi(
            "io",
            "some avg10=2.50 avg60=0 avg300=0 total=1250000\nfull avg10=0 avg60=0 avg300=0 total=600000\n",
        )
        .unwrap();
        let r = psi_delta(&[a], &[b], 1.0);
        assert_eq!(r[0].some_pct, 25.0);
        assert_eq!(r[0].full_pct, Some(10.0));
        assert_eq!(r[0].some_avg10, 2.5);
        assert!(parse_psi("cpu", "nonsense").is_none());
    }

    #[test]
    fn power() {
        let a = vec![CpuPower {
            cpu: 0,
            governor: Some("schedutil".into()),
            freq_khz: Some(2_400_000),
            idle: vec![("C1".into(), 1_000_000, 10)],
        }];
        let mut b = a.clone();
        b[0].idle[0].1 += 600_000;
        b[0].idle[0].2 += 50;
        let r = power_delta(&a, &b, 2.0);
        assert_eq!(r[0].freq_mhz, Some(2400.0));
        assert_eq!(r[0].idle[0], ("C1".into(), 30.0, 25.0));
    }

    #[test]
    fn slab() {
        let t0 = "slabinfo - version: 2.1\n# name <active_objs> ...\n\
                  dentry 1000 1200 192 21 1 : tunables 0 0 0 : slabdata 0 0 0\n\
                  kmalloc-64 500 512 64 64 1 : tunables 0 0 0 : slabdata 0 0 0\n";
        let t1 = "slabinfo - version: 2.1\n# name <active_objs> ...\n\
                  dentry 1100 1200 192 21 1 : tunables 0 0 0 : slabdata 0 0 0\n\
                  kmalloc-64 200 512 64 64 1 : tunables 0 0 0 : slabdata 0 0 0\n";
        let r = slab_delta(&parse_slabinfo(t0), &parse_slabinfo(t1), 1.0);
        assert_eq!(r[0].name, "kmalloc-64");
        assert_eq!(r[0].churn_per_s, 300.0);
        assert_eq!(r[1].bytes, 1200 * 192);
    }
}
