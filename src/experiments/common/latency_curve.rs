//! The curve analysis of `mem.latency`: cache plateaus and the steps
//! between them, derived from a (working set, latency) curve and the cache
//! sizes sysfs reports, with plausibility warnings. Pure: tested on
//! synthetic curves.

use crate::units::format_size;

/// A latency plateau of the curve.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Plateau {
    /// "L1", "L2", "L3", "DRAM".
    pub(crate) name: String,
    /// Working-set range used (bytes).
    pub(crate) from: f64,
    pub(crate) to: f64,
    /// Median latency of the curve points in the range (None: no point in it).
    pub(crate) latency: Option<f64>,
}

/// Plateaus, steps and plausibility of a latency curve.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Analysis {
    pub(crate) plateaus: Vec<Plateau>,
    /// For each cache level: (sysfs size, working set where the curve steps up).
    pub(crate) steps: Vec<(f64, Option<f64>)>,
    pub(crate) warnings: Vec<String>,
}

impl Analysis {
    /// Lines for the result's notes.
    pub(crate) fn describe(&self) -> Vec<String> {
        let mut out = Vec::new();
        let p: Vec<String> = self
            .plateaus
            .iter()
            .map(|p| match p.latency {
                Some(l) => format!("{} {:.2} ns", p.name, l * 1e9),
                None => format!("{} n/a", p.name),
            })
            .collect();
        if p.is_empty() {
            // No cache sizes in sysfs (some ARM kernels, VMs): nothing to place
            // the plateaus by; the curve itself is still in the series.
            out.push(
                "plateaus (random chase): not placed — the kernel reports no cache sizes \
                 (/sys/devices/system/cpu/cpu0/cache); read the curve in the series"
                    .to_string(),
            );
        } else {
            out.push(format!("plateaus (random chase): {}", p.join(", ")));
        }
        let s: Vec<String> = self
            .steps
            .iter()
            .enumerate()
            .map(|(i, (size, at))| {
                format!(
                    "L{} {} -> step at {}",
                    i + 1,
                    format_size(*size as u64),
                    at.map_or("n/a".into(), |a| format_size(a as u64))
                )
            })
            .collect();
        if !s.is_empty() {
            out.push(format!(
                "cache steps (sysfs size -> curve): {}",
                s.join(", ")
            ));
        }
        out.extend(self.warnings.iter().cloned());
        out
    }
}

fn median(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// Derive the L1.. and DRAM plateaus of a (working set B, latency s) curve
/// from the cache sizes sysfs reports (ascending by level), find where the
/// curve steps between levels, and flag implausible results.
///
/// Level k's plateau is the median latency of the points in
/// (1.5 x size(k-1), sqrt(size(k-1) x size(k))] (the lower half of its range
/// on a log scale; (1.5 x size(k-1), 0.75 x size(k)] when that holds no
/// point, and (0, 0.75 x size(1)] for L1); DRAM's of the points >= 2 x the
/// last cache. The step between two levels is the first size past the lower
/// level's range where the latency exceeds the geometric mean of the two
/// plateaus; a step more than 3x away from the sysfs size, or a level not at
/// least 10% slower than the one before it, is flagged.
pub(crate) fn analyse(curve: &[(f64, f64)], caches: &[u64]) -> Analysis {
    let mut a = Analysis::default();
    let mut prev = 0.0f64;
    for (i, &c) in caches.iter().enumerate() {
        let (from, full) = (prev * 1.5, c as f64 * 0.75);
        // The lower half (log scale) of the range: a shared cache may hold
        // only part of its size for us, and its upper half is then already
        // on the way to the next level.
        let half = if prev > 0.0 {
            (prev * c as f64).sqrt().min(full)
        } else {
            full
        };
        let inside = |to: f64| -> Vec<f64> {
            curve
                .iter()
                .filter(|(s, _)| *s > from && *s <= to)
                .map(|p| p.1)
                .collect()
        };
        let (to, mut v) = match inside(half) {
            v if !v.is_empty() => (half, v),
            _ => (full, inside(full)),
        };
        a.plateaus.push(Plateau {
            name: format!("L{}", i + 1),
            from,
            to,
            latency: median(&mut v),
        });
        prev = c as f64;
    }
    if let Some(&llc) = caches.last() {
        let from = llc as f64 * 2.0;
        let mut v: Vec<f64> = curve
            .iter()
            .filter(|(s, _)| *s >= from)
            .map(|p| p.1)
            .collect();
        a.plateaus.push(Plateau {
            name: "DRAM".into(),
            from,
            to: f64::INFINITY,
            latency: median(&mut v),
        });
    }
    for (i, &c) in caches.iter().enumerate() {
        let (lo, hi) = (&a.plateaus[i], &a.plateaus[i + 1]);
        let step = match (lo.latency, hi.latency) {
            (Some(l), Some(h)) if h > l => {
                let threshold = (l * h).sqrt();
                curve
                    .iter()
                    .find(|(s, y)| *s > lo.from && *y > threshold)
                    .map(|p| p.0)
            }
            _ => None,
        };
        if let Some(s) = step {
            let r = s / c as f64;
            if r < 1.0 / 3.0 {
                a.warnings.push(format!(
                    "the curve steps up at {} but sysfs says L{} is {}: this process gets a \
                     smaller share of the cache (shared with other cores or, on a VM, other \
                     tenants), or with pages=4k the TLB reach ends first (try pages=thp)",
                    format_size(s as u64),
                    i + 1,
                    format_size(c)
                ));
            } else if r > 3.0 {
                a.warnings.push(format!(
                    "implausible: the curve steps up at {} but sysfs says L{} is only {}",
                    format_size(s as u64),
                    i + 1,
                    format_size(c)
                ));
            }
        }
        a.steps.push((c as f64, step));
    }
    let known: Vec<&Plateau> = a.plateaus.iter().filter(|p| p.latency.is_some()).collect();
    for w in known.windows(2) {
        let (l, h) = (w[0].latency.unwrap_or(0.0), w[1].latency.unwrap_or(0.0));
        if h < l * 1.1 {
            a.warnings.push(format!(
                "implausible: {} ({:.2} ns) is not slower than {} ({:.2} ns)",
                w[1].name,
                h * 1e9,
                w[0].name,
                l * 1e9
            ));
        }
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::mem::sweep_sizes;

    const CACHES: [u64; 3] = [32 << 10, 1 << 20, 32 << 20];

    fn synthetic(f: impl Fn(u64) -> f64) -> Vec<(f64, f64)> {
        sweep_sizes(1024, 256 << 20, 4)
            .into_iter()
            .map(|s| (s as f64, f(s)))
            .collect()
    }

    /// 1, 4 and 12 ns up to each of `caches`, 80 ns beyond the last.
    fn steps_at(caches: [u64; 3], s: u64) -> f64 {
        [1e-9, 4e-9, 12e-9, 80e-9][caches.iter().take_while(|&&c| s > c).count()]
    }

    fn steps(s: u64) -> f64 {
        steps_at(CACHES, s)
    }

    #[test]
    fn plateaus_and_steps_of_a_clean_curve() {
        let a = analyse(&synthetic(steps), &CACHES);
        let lat: Vec<f64> = a.plateaus.iter().map(|p| p.latency.unwrap()).collect();
        assert_eq!(lat, [1e-9, 4e-9, 12e-9, 80e-9]);
        assert!(lat.windows(2).all(|w| w[0] < w[1]), "monotonic plateaus");
        assert!(a.warnings.is_empty(), "{:?}", a.warnings);
        for (size, at) in &a.steps {
            let at = at.expect("a step per level");
            assert!(at > *size && at < size * 1.3, "step {at} for cache {size}");
        }
    }

    #[test]
    fn smooth_transitions_still_find_the_steps() {
        // Latency ramps over a doubling after each cache size.
        let ramp = |s: u64| {
            let x = s as f64;
            let mut lat = 1e-9;
            for (c, add) in [(32768.0, 3e-9), (1048576.0, 8e-9), (33554432.0, 68e-9)] {
                lat += add * ((x / c).log2().clamp(0.0, 1.0));
            }
            lat
        };
        let a = analyse(&synthetic(ramp), &CACHES);
        assert!(a.warnings.is_empty(), "{:?}", a.warnings);
        let lat: Vec<f64> = a.plateaus.iter().map(|p| p.latency.unwrap()).collect();
        assert!(lat.windows(2).all(|w| w[0] < w[1]), "{lat:?}");
    }

    #[test]
    fn implausible_results_are_flagged() {
        // "DRAM" faster than L3.
        let a = analyse(
            &synthetic(|s| if s > 64 << 20 { 5e-9 } else { steps(s) }),
            &CACHES,
        );
        assert!(
            a.warnings
                .iter()
                .any(|w| w.contains("DRAM") && w.contains("L3")),
            "{:?}",
            a.warnings
        );
        // The L2 step at 4 MiB instead of 1 MiB.
        let a = analyse(
            &synthetic(|s| steps_at([32 << 10, 4 << 20, 32 << 20], s)),
            &CACHES,
        );
        assert!(
            a.warnings.iter().any(|w| w.contains("L2")),
            "{:?}",
            a.warnings
        );
    }

    #[test]
    fn an_l3_share_smaller_than_sysfs_is_explained_not_called_implausible() {
        // The curve leaves L3 at 8 MiB of a 32 MiB cache (a busy shared L3).
        let a = analyse(
            &synthetic(|s| if s > 8 << 20 { 80e-9 } else { steps(s) }),
            &CACHES,
        );
        assert_eq!(a.warnings.len(), 1, "{:?}", a.warnings);
        assert!(a.warnings[0].contains("smaller share"), "{:?}", a.warnings);
        assert!(!a.warnings[0].contains("implausible"));
        let lat: Vec<f64> = a.plateaus.iter().map(|p| p.latency.unwrap()).collect();
        assert!(lat.windows(2).all(|w| w[0] < w[1]), "{lat:?}");
    }

    #[test]
    fn no_caches_no_plateaus() {
        let a = analyse(&synthetic(steps), &[]);
        assert!(a.plateaus.is_empty() && a.steps.is_empty() && a.warnings.is_empty());
        // The note says why there are none instead of ending in ": ".
        let d = a.describe();
        assert_eq!(d.len(), 1, "{d:?}");
        assert!(
            d[0].contains("not placed") && !d[0].ends_with(": "),
            "{d:?}"
        );
    }
}
