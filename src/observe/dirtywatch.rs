//! The dirty page-cache watch: Dirty + Writeback against the point where the
//! kernel starts throttling writers, and what the vm.dirty_* sysctls would
//! have had to be to avoid it.
//!
//! Throttling point (balance_dirty_pages' "freerun" ceiling): the midpoint of
//! the background and the hard threshold, i.e. with the ratio settings
//!
//! ```text
//!   Dirty + Writeback > (dirty_ratio + dirty_background_ratio) / 2 % × MemAvailable
//! ```
//!
//! or with the `*_bytes` settings `(dirty_bytes + dirty_background_bytes) / 2`.
//! (The kernel measures against "dirtyable" memory, which is close to but
//! not exactly MemAvailable; `observe::dirty` keeps the kernel's own figures.)
//!
//! Everything here is pure: `observe()` takes one sample, `summary()` says
//! what was seen and the smallest settings that would have kept every sample
//! below the throttling point.

use serde::{Deserialize, Serialize};

use super::dirty::{thresholds, DirtyLimits};

/// One reading for the watch (bytes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct DirtySample {
    pub(crate) dirty: u64,
    pub(crate) writeback: u64,
    pub(crate) available: u64,
    /// Page cache (Cached + Buffers), for "largest cache seen".
    pub(crate) cache: u64,
}

/// One line of the watch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct DirtyLine {
    pub(crate) dirty_bytes: u64,
    pub(crate) writeback_bytes: u64,
    pub(crate) available_bytes: u64,
    pub(crate) cache_bytes: u64,
    pub(crate) throttle_bytes: u64,
    /// (Dirty + Writeback) / throttle point, in %.
    pub(crate) pct_of_throttle: f64,
    pub(crate) exceeded: bool,
}

/// Accumulates samples; see the module documentation.
#[derive(Debug, Clone)]
pub(crate) struct DirtyWatch {
    pub(crate) limits: DirtyLimits,
    pub(crate) samples: usize,
    pub(crate) exceeded: usize,
    pub(crate) min_available: u64,
    pub(crate) max_cache: u64,
    pub(crate) max_dirty_wb: u64,
    /// Largest (Dirty + Writeback) / MemAvailable seen, as a fraction.
    pub(crate) max_fraction: f64,
}

/// What the watch concludes at exit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct DirtySummary {
    pub(crate) samples: usize,
    pub(crate) intervals_over_threshold: usize,
    pub(crate) min_available_bytes: u64,
    pub(crate) max_cache_bytes: u64,
    pub(crate) max_dirty_writeback_bytes: u64,
    /// The inequality the sysctls must satisfy, with the sampled numbers.
    pub(crate) inequality: String,
    /// Smallest dirty_ratio + dirty_background_ratio that avoids throttling
    /// (ratio mode), None in bytes mode.
    pub(crate) min_ratio_sum: Option<u64>,
    /// Smallest dirty_ratio keeping the current background ratio.
    pub(crate) min_dirty_ratio: Option<u64>,
    pub(crate) current_background_ratio: u64,
    /// Smallest pair in the default 2:1 proportion (ratio = 2 × background).
    pub(crate) min_pair_2_to_1: Option<(u64, u64)>,
    /// Bytes mode: smallest dirty_bytes + dirty_background_bytes.
    pub(crate) min_bytes_sum: Option<u64>,
    pub(crate) advice: Vec<String>,
}

impl DirtyWatch {
    pub(crate) fn new(limits: DirtyLimits) -> Self {
        DirtyWatch {
            limits,
            samples: 0,
            exceeded: 0,
            min_available: u64::MAX,
            max_cache: 0,
            max_dirty_wb: 0,
            max_fraction: 0.0,
        }
    }

    fn bytes_mode(&self) -> bool {
        self.limits.bytes > 0
    }

    /// Throttling point for this much available memory.
    pub(crate) fn throttle_point(&self, available: u64) -> u64 {
        let (t, bg) = thresholds(available, &self.limits);
        t / 2 + bg / 2 + (t % 2 + bg % 2) / 2
    }

    /// Take one sample; returns its line (with `exceeded` set when Dirty +
    /// Writeback is above the throttling point).
    pub(crate) fn observe(&mut self, s: &DirtySample) -> DirtyLine {
        let dw = s.dirty + s.writeback;
        let throttle = self.throttle_point(s.available);
        let exceeded = dw > throttle;
        self.samples += 1;
        self.exceeded += exceeded as usize;
        self.min_available = self.min_available.min(s.available);
        self.max_cache = self.max_cache.max(s.cache);
        self.max_dirty_wb = self.max_dirty_wb.max(dw);
        if s.available > 0 {
            self.max_fraction = self.max_fraction.max(dw as f64 / s.available as f64);
        }
        DirtyLine {
            dirty_bytes: s.dirty,
            writeback_bytes: s.writeback,
            available_bytes: s.available,
            cache_bytes: s.cache,
            throttle_bytes: throttle,
            pct_of_throttle: if throttle > 0 {
                dw as f64 / throttle as f64 * 100.0
            } else {
                0.0
            },
            exceeded,
        }
    }

    pub(crate) fn summary(&self) -> DirtySummary {
        let l = &self.limits;
        let mut s = DirtySummary {
            samples: self.samples,
            intervals_over_threshold: self.exceeded,
            min_available_bytes: if self.samples == 0 {
                0
            } else {
                self.min_available
            },
            max_cache_bytes: self.max_cache,
            max_dirty_writeback_bytes: self.max_dirty_wb,
            inequality: String::new(),
            min_ratio_sum: None,
            min_dirty_ratio: None,
            current_background_ratio: l.background_ratio,
            min_pair_2_to_1: None,
            min_bytes_sum: None,
            advice: Vec::new(),
        };
        if self.bytes_mode() {
            // (dirty_bytes + background_bytes) / 2 ≥ max(Dirty + Writeback).
            let need = 2 * self.max_dirty_wb;
            s.min_bytes_sum = Some(need);
            s.inequality = format!(
                "vm.dirty_bytes + vm.dirty_background_bytes ≥ 2 × max(Dirty + Writeback) = 2 × {} = {} bytes \
                 (now {} + {} = {})",
                self.max_dirty_wb,
                need,
                l.bytes,
                l.background_bytes,
                l.bytes + l.background_bytes
            );
            if l.bytes + l.background_bytes < need {
                s.advice.push(format!(
                    "raise vm.dirty_bytes to at least {} (keeping vm.dirty_background_bytes = {})",
                    need.saturating_sub(l.background_bytes)
                        .max(l.background_bytes + 1),
                    l.background_bytes
                ));
            }
            return s;
        }
        // (R + B) / 2 % × A_i ≥ D_i for every sample  ⇔  R + B ≥ 200 × max(D_i / A_i).
        let pct200 = 200.0 * self.max_fraction;
        let sum = (pct200 - 1e-9).ceil().max(0.0) as u64;
        s.min_ratio_sum = Some(sum);
        s.inequality = format!(
            "vm.dirty_ratio + vm.dirty_background_ratio ≥ 200 × max((Dirty + Writeback) / MemAvailable) \
             = 200 × {:.4} = {:.1} (now {} + {} = {})",
            self.max_fraction,
            pct200,
            l.ratio,
            l.background_ratio,
            l.ratio + l.background_ratio
        );
        // The kernel halves a background threshold at or above the hard one,
        // so the smallest valid dirty_ratio is also > background.
        let r = sum
            .saturating_sub(l.background_ratio)
            .max(l.background_ratio + 1);
        let feasible = r <= 100;
        s.min_dirty_ratio = feasible.then_some(r);
        let b = sum.div_ceil(3).max(1);
        s.min_pair_2_to_1 = (2 * b <= 100).then_some((2 * b, b));
        if self.exceeded == 0 {
            s.advice.push(
                "writers were never throttled: the current settings are large enough for this workload"
                    .into(),
            );
        } else if feasible {
            s.advice.push(format!(
                "to avoid throttling: vm.dirty_ratio ≥ {r} with vm.dirty_background_ratio = {}{}",
                l.background_ratio,
                s.min_pair_2_to_1
                    .map(|(r2, b2)| format!(
                        ", or vm.dirty_ratio = {r2} with vm.dirty_background_ratio = {b2}"
                    ))
                    .unwrap_or_default()
            ));
        } else {
            s.advice.push(
                "no ratio up to 100% avoids throttling: the writes exceed available memory; \
                 use vm.dirty_bytes or write less at once"
                    .into(),
            );
        }
        if self.exceeded > 0 {
            s.advice.push(
                "larger dirty limits trade throttling for longer write-back bursts and more data at \
                 risk on power loss; on small machines prefer writing with fsync/O_DIRECT in chunks"
                    .into(),
            );
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn limits() -> DirtyLimits {
        DirtyLimits {
            ratio: 20,
            background_ratio: 10,
            ..Default::default()
        }
    }

    #[test]
    fn throttle_point_is_the_midpoint() {
        let w = DirtyWatch::new(limits());
        // (20 + 10) / 2 = 15% of 1000 MiB.
        assert_eq!(w.throttle_point(1000 * MIB), 150 * MIB);
    }

    #[test]
    fn synthetic_stream() {
        let mut w = DirtyWatch::new(limits());
        let stream = [
            (10, 0, 1000, 300),
            (120, 20, 900, 500), // 140 of 135: over
            (200, 40, 800, 700), // 240 of 120: over, 30% of available
            (50, 60, 850, 650),  // 110 of 127.5: below
        ];
        let mut over = Vec::new();
        for (d, wb, a, c) in stream {
            let line = w.observe(&DirtySample {
                dirty: d * MIB,
                writeback: wb * MIB,
                available: a * MIB,
                cache: c * MIB,
            });
            over.push(line.exceeded);
        }
        assert_eq!(over, [false, true, true, false]);
        let s = w.summary();
        assert_eq!(s.intervals_over_threshold, 2);
        assert_eq!(s.min_available_bytes, 800 * MIB);
        assert_eq!(s.max_cache_bytes, 700 * MIB);
        assert_eq!(s.max_dirty_writeback_bytes, 240 * MIB);
        // 200 × 240/800 = 60 → ratio + background ≥ 60.
        assert_eq!(s.min_ratio_sum, Some(60));
        assert_eq!(s.min_dirty_ratio, Some(50));
        assert_eq!(s.min_pair_2_to_1, Some((40, 20)));
        // The recommendation really avoids throttling on the same stream.
        for (r, b) in [(50, 10), (40, 20)] {
            let mut w2 = DirtyWatch::new(DirtyLimits {
                ratio: r,
                background_ratio: b,
                ..Default::default()
            });
            for (d, wb, a, c) in stream {
                w2.observe(&DirtySample {
                    dirty: d * MIB,
                    writeback: wb * MIB,
                    available: a * MIB,
                    cache: c * MIB,
                });
            }
            assert_eq!(w2.summary().intervals_over_threshold, 0, "{r}/{b}");
        }
        assert!(s.inequality.contains("60.0"), "{}", s.inequality);
    }

    #[test]
    fn never_throttled_and_infeasible() {
        let mut w = DirtyWatch::new(limits());
        w.observe(&DirtySample {
            dirty: MIB,
            available: 1000 * MIB,
            ..Default::default()
        });
        let s = w.summary();
        assert_eq!(s.intervals_over_threshold, 0);
        assert!(s.advice[0].contains("never throttled"));
        let mut w = DirtyWatch::new(limits());
        w.observe(&DirtySample {
            dirty: 900 * MIB,
            available: 1000 * MIB,
            ..Default::default()
        });
        let s = w.summary();
        assert_eq!(s.min_dirty_ratio, None);
        assert!(s.advice[0].contains("no ratio"));
    }

    #[test]
    fn bytes_mode() {
        let mut w = DirtyWatch::new(DirtyLimits {
            bytes: 64 * MIB,
            background_bytes: 16 * MIB,
            ..Default::default()
        });
        assert_eq!(w.throttle_point(u64::MAX / 4), 40 * MIB);
        assert!(
            w.observe(&DirtySample {
                dirty: 50 * MIB,
                available: 1000 * MIB,
                ..Default::default()
            })
            .exceeded
        );
        let s = w.summary();
        assert_eq!(s.min_bytes_sum, Some(100 * MIB));
        assert!(s.advice[0].contains(&(84 * MIB).to_string()));
    }
}
