//! What the guard records, serialised with each stored point: a [`Flag`]
//! per disturbance, a [`TrialCheck`] per measured trial and the point's
//! [`Validity`] (trials, skipped sources, discarded warm-up). Apart from the
//! guard so the stored format reads in one place.

use serde::{Deserialize, Serialize};

/// One flag: what happened during a trial, in words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Flag {
    /// `throttle`, `clock`, `thermal`, `steal`, `load`, `disk-io`, `swap`,
    /// `cache-drop` or `scratch-full`.
    pub kind: String,
    pub detail: String,
}

/// What the guard saw around one measured trial.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TrialCheck {
    /// Seconds the trial took (wall clock, guard readings excluded).
    pub seconds: f64,
    /// Lowest and highest scaling_cur_freq seen on any CPU (MHz).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freq_mhz_min: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freq_mhz_max: Option<f64>,
    /// Hottest thermal zone (°C).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temp_c_max: Option<f64>,
    /// Steal time, % of all CPU time during the trial.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steal_pct: Option<f64>,
    /// Other processes' CPU, % of one CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_cpu_pct: Option<f64>,
    /// Bytes other processes read from and wrote to the disks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_io_bytes: Option<u64>,
    /// Pages swapped in + out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swap_pages: Option<u64>,
    /// Free bytes of the scratch file system after the trial.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scratch_free: Option<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<Flag>,
}

/// The guard's record of one point: a check per measured trial and the
/// sources this machine does not have. Also says how many measured trials
/// the runner discarded as warm-up (their values are the last entries of
/// each metric's `warmup`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Validity {
    /// Measured trials discarded automatically as warm-up.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub warmup_discarded: usize,
    /// Why (the outlier test that discarded them).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub warmup_reason: String,
    /// One per measured trial in order, discarded warm-up trials first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trials: Vec<TrialCheck>,
    /// Sources not available here, with the reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<String>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Validity {
    pub(crate) fn is_empty(&self) -> bool {
        *self == Validity::default()
    }

    /// The summarised trials' checks (discarded warm-up trials excluded).
    pub(crate) fn kept(&self) -> &[TrialCheck] {
        self.trials
            .get(self.warmup_discarded.min(self.trials.len())..)
            .unwrap_or(&[])
    }

    /// "2 of 5 trials flagged: other processes used up to 85% of a CPU; …"
    /// when any summarised trial is flagged.
    pub(crate) fn suspect_summary(&self) -> Option<String> {
        let kept = self.kept();
        let flagged = kept.iter().filter(|t| !t.flags.is_empty()).count();
        if flagged == 0 {
            return None;
        }
        // One line per kind: the first detail seen, with how many trials.
        let mut kinds: Vec<(&str, &str, usize)> = Vec::new();
        for f in kept.iter().flat_map(|t| &t.flags) {
            match kinds.iter_mut().find(|(k, _, _)| *k == f.kind) {
                Some(k) => k.2 += 1,
                None => kinds.push((&f.kind, &f.detail, 1)),
            }
        }
        let what: Vec<String> = kinds
            .iter()
            .map(|(k, d, n)| {
                if *n > 1 {
                    format!("{k} in {n} (e.g. {d})")
                } else {
                    d.to_string()
                }
            })
            .collect();
        Some(format!(
            "{flagged} of {} trials flagged: {}",
            kept.len(),
            what.join("; ")
        ))
    }
}
