//! Sustained writes until a steady state, like fio's `ss=` but in windows
//! of time long enough for a slow card: the rate of each window (default
//! 1 s) is kept; the state is steady when the last K windows' rates stay
//! within a range around their mean and their fitted line changes by less
//! than a share of the mean across them (fio's `bw:` range and `bw_slope:`).
//! A card's write cache shows as a burst before the drop: the bytes it took
//! beyond what the steady rate alone would have delivered in the same time
//! are its size (the intercept of the steady line on the bytes axis).

use super::{Cancel, FlashIo};
use crate::Result;

/// The steady-state rule.
#[derive(Clone, Debug)]
pub struct Rule {
    /// Window length (s).
    pub(crate) window: f64,
    /// Windows the rule looks at (fio's ss_dur = windows × window).
    pub(crate) windows: usize,
    /// Largest (max − min) / mean of the windows' rates.
    pub(crate) range: f64,
    /// Largest change of the fitted line across the windows, over the mean.
    pub(crate) slope: f64,
}

impl Default for Rule {
    fn default() -> Rule {
        Rule {
            window: 1.0,
            windows: 10,
            range: 0.25,
            slope: 0.1,
        }
    }
}

/// What to write: `streams` sequential streams, each in its own region of
/// `spacing` bytes (wrapping inside it), one `chunk` each in turn.
#[derive(Clone, Debug)]
pub struct Load {
    pub streams: usize,
    pub spacing: u64,
    pub chunk: u64,
    /// Bytes written before the rule starts looking (the previous
    /// pattern's data still draining from the cache).
    pub skip: u64,
    /// A cache burst must be seen, or this many bytes written, before a
    /// steady state counts (else a long burst would pass for it).
    pub min_bytes: u64,
    pub max_time: f64,
}

/// One window of the timeline.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Window {
    /// End of the window, seconds from the first write.
    pub(crate) end: f64,
    /// Bytes written from the first write to the end of the window.
    pub(crate) written: u64,
    pub(crate) rate: f64,
}

#[derive(Clone, Debug, Default)]
pub struct Outcome {
    pub(crate) timeline: Vec<Window>,
    /// Mean rate of the steady windows, when the rule held.
    pub steady: Option<f64>,
    /// Index of the first steady window.
    pub(crate) steady_from: usize,
    /// Rate of the first window.
    pub burst_rate: f64,
    /// Whether a window fell below 70% of the first one's rate.
    pub(crate) dropped: bool,
    /// Write latencies (s) in the steady windows, sorted.
    pub(crate) latencies: Vec<f64>,
    pub(crate) written: u64,
    pub(crate) elapsed: f64,
}

impl Outcome {
    /// The cache: bytes written beyond the steady line, when a burst was seen.
    pub fn cache_bytes(&self) -> f64 {
        let Some(s) = self.steady else { return 0.0 };
        if !self.dropped || self.burst_rate < 1.3 * s {
            return 0.0;
        }
        let w = &self.timeline[self.steady_from..];
        let b0 = w.iter().map(|w| w.written as f64 - s * w.end).sum::<f64>() / w.len() as f64;
        b0.max(0.0)
    }

    /// Bytes written at the burst rate before the drop.
    pub(crate) fn burst_bytes(&self) -> f64 {
        match self.steady {
            Some(s) if self.burst_rate > s => {
                self.cache_bytes() * self.burst_rate / (self.burst_rate - s)
            }
            _ => 0.0,
        }
    }

    /// The q-quantile (0..1) of the steady windows' write latencies.
    pub fn latency(&self, q: f64) -> f64 {
        let v = &self.latencies;
        if v.is_empty() {
            return 0.0;
        }
        let i = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
        v[i]
    }
}

/// Write until the rule holds (or `max_time`). `buf` is one chunk.
pub fn run(
    io: &mut dyn FlashIo,
    load: &Load,
    rule: &Rule,
    buf: &[u8],
    cancel: Cancel,
) -> Result<Outcome> {
    let chunk = load.chunk;
    let per_stream = (load.spacing / chunk).max(1) * chunk;
    let mut pos = vec![0u64; load.streams];
    let mut out = Outcome::default();
    // Latencies of the last `windows` windows, one list per window.
    let mut lat: std::collections::VecDeque<Vec<f64>> = Default::default();
    let mut cur: Vec<f64> = Vec::new();
    let t0 = io.now();
    let mut win_start = 0.0;
    let mut win_bytes = 0u64;
    let mut written = 0u64;
    let mut k = 0usize;
    loop {
        cancel()?;
        let s = k % load.streams;
        let off = s as u64 * load.spacing + pos[s];
        pos[s] = (pos[s] + chunk) % per_stream;
        k += 1;
        let a = io.now();
        io.write_at(&buf[..chunk as usize], off)?;
        let b = io.now();
        cur.push(b - a);
        written += chunk;
        win_bytes += chunk;
        let t = b - t0;
        if t - win_start < rule.window {
            continue;
        }
        let rate = win_bytes as f64 / (t - win_start);
        out.timeline.push(Window {
            end: t,
            written,
            rate,
        });
        if out.timeline.len() == 1 {
            out.burst_rate = rate;
        } else if rate < 0.7 * out.burst_rate {
            out.dropped = true;
        }
        lat.push_back(std::mem::take(&mut cur));
        if lat.len() > rule.windows {
            lat.pop_front();
        }
        win_start = t;
        win_bytes = 0;
        out.written = written;
        out.elapsed = t;
        let n = out.timeline.len();
        // The rule looks only at windows that begin after the skipped bytes.
        if n >= rule.windows {
            let from = n - rule.windows;
            let before = if from == 0 {
                0
            } else {
                out.timeline[from - 1].written
            };
            if before >= load.skip && (out.dropped || written >= load.min_bytes) {
                if let Some(mean) = steady(&out.timeline[from..], rule) {
                    out.steady = Some(mean);
                    out.steady_from = from;
                    break;
                }
            }
        }
        if t >= load.max_time {
            break;
        }
    }
    out.latencies = lat.into_iter().flatten().collect();
    out.latencies.sort_by(f64::total_cmp);
    Ok(out)
}

/// A window of values fitted once: what both steady-state rules (this
/// one, fio's; and io.random's, SNIA's) test.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Fit {
    pub(crate) mean: f64,
    pub(crate) lo: f64,
    pub(crate) hi: f64,
    /// |change| of the least-squares line from the first value to the last.
    pub(crate) change: f64,
}

/// Mean, extremes and the fitted line's change across `ys` (x = 0..n-1).
pub(crate) fn fit(ys: &[f64]) -> Fit {
    let n = ys.len() as f64;
    let mean = ys.iter().sum::<f64>() / n;
    let (lo, hi) = ys
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), &y| (lo.min(y), hi.max(y)));
    let xm = (n - 1.0) / 2.0;
    let (mut sxy, mut sxx) = (0.0, 0.0);
    for (i, y) in ys.iter().enumerate() {
        sxy += (i as f64 - xm) * (y - mean);
        sxx += (i as f64 - xm).powi(2);
    }
    let change = if sxx > 0.0 {
        (sxy / sxx * (n - 1.0)).abs()
    } else {
        0.0
    };
    Fit {
        mean,
        lo,
        hi,
        change,
    }
}

/// The windows' mean rate when they pass the rule.
pub(crate) fn steady(w: &[Window], rule: &Rule) -> Option<f64> {
    let rates: Vec<f64> = w.iter().map(|w| w.rate).collect();
    let f = fit(&rates);
    (f.mean > 0.0 && f.hi - f.lo <= rule.range * f.mean && f.change <= rule.slope * f.mean)
        .then_some(f.mean)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(rates: &[f64]) -> Vec<Window> {
        rates
            .iter()
            .enumerate()
            .map(|(i, &rate)| Window {
                end: i as f64,
                written: 0,
                rate,
            })
            .collect()
    }

    #[test]
    fn flat_windows_are_steady_and_a_ramp_is_not() {
        let rule = Rule::default();
        assert_eq!(steady(&w(&[10.0, 11.0, 9.0, 10.0]), &rule), Some(10.0));
        assert_eq!(steady(&w(&[8.0, 9.0, 10.0, 11.0, 12.0]), &rule), None);
        assert_eq!(steady(&w(&[10.0, 10.0, 5.0, 10.0]), &rule), None);
    }
}
