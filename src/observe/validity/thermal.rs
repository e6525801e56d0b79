//! The thermal sources: every zone's temperature against its lowest
//! passive/hot/critical trip point, CPU cooling devices in a non-zero state,
//! and the x86 `thermal_throttle/*_throttle_count` counters.

use std::path::PathBuf;

use super::{flag, numbered, read_i64, read_u64, Guard, Reading, Roots, TrialCheck};

#[derive(Debug, Clone)]
pub(super) struct Zone {
    pub(super) name: String,
    pub(super) temp: PathBuf,
    /// Lowest passive/hot/critical trip point (m°C).
    pub(super) trip_mc: Option<i64>,
}

#[derive(Debug, Clone)]
pub(super) struct Cooling {
    pub(super) name: String,
    pub(super) cur: PathBuf,
    pub(super) max_state: u64,
}

/// The CPUs' thermal_throttle counter files.
pub(super) fn throttle_counters(
    cpus: &[(u32, PathBuf)],
    skipped: &mut Vec<String>,
) -> Vec<PathBuf> {
    let throttle: Vec<PathBuf> = cpus
        .iter()
        .flat_map(|(_, d)| {
            ["core_throttle_count", "package_throttle_count"]
                .into_iter()
                .map(move |f| d.join("thermal_throttle").join(f))
        })
        .filter(|p| p.exists())
        .collect();
    if throttle.is_empty() {
        skipped.push(
            "throttle counters: no /sys/devices/system/cpu/cpu*/thermal_throttle (not exposed \
             on this CPU)"
                .to_string(),
        );
    }
    throttle
}

/// The readable thermal zones with their trip points, and the CPU cooling
/// devices.
pub(super) fn discover(roots: &Roots, skipped: &mut Vec<String>) -> (Vec<Zone>, Vec<Cooling>) {
    let thermal = roots.sys.join("class/thermal");
    let zones: Vec<Zone> = numbered(&thermal, "thermal_zone")
        .into_iter()
        .filter(|(_, d)| read_i64(&d.join("temp")).is_some())
        .map(|(n, d)| {
            let name = std::fs::read_to_string(d.join("type"))
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| format!("thermal_zone{n}"));
            // trip_point_N_type / trip_point_N_temp, N from 0 until
            // a type is missing.
            let mut lowest: Option<i64> = None;
            for k in 0..32 {
                let ty = match std::fs::read_to_string(d.join(format!("trip_point_{k}_type"))) {
                    Ok(t) => t,
                    Err(_) => break,
                };
                if !matches!(ty.trim(), "passive" | "hot" | "critical") {
                    continue;
                }
                if let Some(t) = read_i64(&d.join(format!("trip_point_{k}_temp"))) {
                    if t > 0 {
                        lowest = Some(lowest.map_or(t, |l: i64| l.min(t)));
                    }
                }
            }
            Zone {
                name,
                temp: d.join("temp"),
                trip_mc: lowest,
            }
        })
        .collect();
    if zones.is_empty() {
        skipped.push("thermal: no readable /sys/class/thermal/thermal_zone*/temp".to_string());
    }
    let cooling: Vec<Cooling> = numbered(&thermal, "cooling_device")
        .into_iter()
        .filter_map(|(_, d)| {
            let ty = std::fs::read_to_string(d.join("type")).ok()?;
            let ty = ty.trim().to_string();
            let l = ty.to_lowercase();
            let cpu = l.contains("cpu") || l.contains("processor") || l.contains("powerclamp");
            (cpu && d.join("cur_state").exists()).then(|| Cooling {
                max_state: read_u64(&d.join("max_state")).unwrap_or(0),
                name: ty,
                cur: d.join("cur_state"),
            })
        })
        .collect();
    (zones, cooling)
}

impl Guard {
    /// Flag a zone at its trip point, an active cooling device and a moved
    /// throttle counter; return the hottest temperature seen (m°C).
    pub(super) fn check_thermal(
        &self,
        before: &Reading,
        after: &Reading,
        c: &mut TrialCheck,
    ) -> Option<i64> {
        // Thermal.
        let mut hottest: Option<i64> = None;
        let mut tripped = None;
        for &(i, t) in before.temps.iter().chain(&after.temps) {
            hottest = Some(hottest.map_or(t, |h| h.max(t)));
            if let Some(trip) = self.zones[i].trip_mc.filter(|trip| t >= *trip) {
                tripped.get_or_insert((i, t, trip));
            }
        }
        if let Some((i, t, trip)) = tripped {
            flag(
                c,
                "thermal",
                format!(
                    "{} at {:.1} °C, at or above its {:.1} °C trip point",
                    self.zones[i].name,
                    t as f64 / 1000.0,
                    trip as f64 / 1000.0
                ),
            );
        }
        for (k, cd) in self.cooling.iter().enumerate() {
            let state = after
                .cooling
                .get(k)
                .copied()
                .max(before.cooling.get(k).copied())
                .unwrap_or(0);
            if state > 0 {
                flag(
                    c,
                    "thermal",
                    format!(
                        "cooling device {} active (state {state} of {}): the CPU is held back",
                        cd.name, cd.max_state
                    ),
                );
                break;
            }
        }
        if let (Some(b), Some(a)) = (before.throttle, after.throttle) {
            if a > b {
                flag(
                    c,
                    "throttle",
                    format!(
                        "the CPU throttled itself {} times (thermal_throttle counters)",
                        a - b
                    ),
                );
            }
        }
        hottest
    }
}
