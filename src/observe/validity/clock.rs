//! The CPU clock source: every CPU's `cpufreq/scaling_cur_freq` and
//! `scaling_max_freq`, and the governor that says whether a moving clock is
//! a disturbance (fixed-frequency governors) or the governor's normal work.

use std::path::PathBuf;

use super::{flag, Guard, Reading, TrialCheck, FREQ_CHANGE};

#[derive(Debug, Clone)]
pub(super) struct CpuFreq {
    pub(super) cur: PathBuf,
    pub(super) limit: PathBuf,
}

/// The CPUs' cpufreq files and the fixed-frequency governor, if any.
pub(super) fn discover(
    cpus: &[(u32, PathBuf)],
    skipped: &mut Vec<String>,
) -> (Vec<CpuFreq>, Option<String>) {
    let freqs: Vec<CpuFreq> = cpus
        .iter()
        .map(|(_, d)| d.join("cpufreq"))
        .filter(|d| d.join("scaling_cur_freq").exists())
        .map(|d| CpuFreq {
            cur: d.join("scaling_cur_freq"),
            limit: d.join("scaling_max_freq"),
        })
        .collect();
    let mut fixed_governor = None;
    if freqs.is_empty() {
        skipped.push(
            "CPU clock: no cpufreq/scaling_cur_freq in /sys/devices/system/cpu/cpu* (no \
             cpufreq driver, or a VM)"
                .to_string(),
        );
    } else if let Some((_, d)) = cpus.first() {
        let g = std::fs::read_to_string(d.join("cpufreq/scaling_governor")).unwrap_or_default();
        let g = g.trim();
        if matches!(g, "performance" | "powersave" | "userspace") {
            fixed_governor = Some(g.to_string());
        }
    }
    (freqs, fixed_governor)
}

pub(super) fn mhz(khz: u64) -> f64 {
    khz as f64 / 1000.0
}

impl Guard {
    /// Flag a moved frequency limit, and a moved clock under a fixed
    /// governor; return the lowest and highest clock seen (kHz).
    pub(super) fn check_clock(
        &self,
        before: &Reading,
        after: &Reading,
        c: &mut TrialCheck,
    ) -> (Option<u64>, Option<u64>) {
        let curs = before.freq.iter().chain(&after.freq).map(|f| f.0);
        let (fmin, fmax) = (curs.clone().min(), curs.max());
        for (i, (b, a)) in before.freq.iter().zip(&after.freq).enumerate() {
            if b.1 != a.1 && b.1 > 0 && a.1 > 0 {
                flag(
                    c,
                    "throttle",
                    format!(
                        "cpu{i}'s frequency limit moved from {:.0} to {:.0} MHz (thermal or power capping)",
                        mhz(b.1),
                        mhz(a.1)
                    ),
                );
                break;
            }
        }
        if let Some(g) = &self.fixed_governor {
            for (i, (b, a)) in before.freq.iter().zip(&after.freq).enumerate() {
                let (lo, hi) = (b.0.min(a.0) as f64, b.0.max(a.0) as f64);
                if lo > 0.0 && hi / lo - 1.0 > FREQ_CHANGE {
                    flag(
                        c,
                        "clock",
                        format!(
                            "cpu{i}'s clock moved from {:.0} to {:.0} MHz under the {g} governor",
                            mhz(b.0),
                            mhz(a.0)
                        ),
                    );
                    break;
                }
            }
        }
        (fmin, fmax)
    }
}
