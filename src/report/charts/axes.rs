//! Axes: scales with human units, tick positions (linear and log) and
//! the plotters coordinate that puts ticks exactly there.

use super::*;

/// A linear f64 coordinate with ticks exactly where we want them (plotters'
/// own `with_key_points` loses the value formatter for f64 ranges). Every
/// tick label comes from the chart's label formatter.
#[derive(Debug, Clone)]
pub(super) struct Ticked {
    pub(super) lo: f64,
    pub(super) hi: f64,
    pub(super) keys: Vec<f64>,
}

impl Ticked {
    pub(super) fn new(lo: f64, hi: f64, keys: &[f64]) -> Self {
        Ticked {
            lo,
            hi,
            keys: keys.to_vec(),
        }
    }
}

impl Ranged for Ticked {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        if self.hi == self.lo {
            return (limit.0 + limit.1) / 2;
        }
        let f = ((v - self.lo) / (self.hi - self.lo)).clamp(-10.0, 10.0);
        limit.0 + ((limit.1 - limit.0) as f64 * f).round() as i32
    }

    fn key_points<H: KeyPointHint>(&self, _hint: H) -> Vec<f64> {
        self.keys.clone()
    }

    fn range(&self) -> Range<f64> {
        self.lo..self.hi
    }
}

pub(super) fn fail<E: std::fmt::Debug>(e: E) -> String {
    format!("plotting failed: {e:?}")
}

/// How values of a unit are shown on a linear axis: `display = raw * factor`.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Scale {
    pub(super) factor: f64,
    pub(super) unit: String,
}

pub(super) fn scale_for(unit: &str, max_abs: f64) -> Scale {
    let s = |factor: f64, unit: &str| Scale {
        factor,
        unit: unit.to_string(),
    };
    const KI: f64 = 1024.0;
    match unit {
        // Tables give throughput in MiB/s whatever its size: so do axes.
        "B/s" => s(1.0 / (KI * KI), "MiB/s"),
        "B" if max_abs < KI => s(1.0, "B"),
        "B" if max_abs < KI * KI => s(1.0 / KI, "KiB"),
        "B" if max_abs < KI * KI * KI => s(1.0 / (KI * KI), "MiB"),
        "B" => s(1.0 / (KI * KI * KI), "GiB"),
        "s" if max_abs < 1e-6 => s(1e9, "ns"),
        "s" if max_abs < 1e-3 => s(1e6, "µs"),
        "s" if max_abs < 1.0 => s(1e3, "ms"),
        "s" => s(1.0, "s"),
        // Clocks: the tables say MHz.
        "Hz" if max_abs >= 1e6 => s(1e-6, "MHz"),
        "Hz" if max_abs >= 1e3 => s(1e-3, "kHz"),
        "ratio" => s(1.0, "×"),
        "fraction" => s(100.0, "%"),
        "" | "count" if max_abs >= 1e6 => s(1e-6, "millions"),
        "" | "count" if max_abs >= 1e4 => s(1e-3, "thousands"),
        "" | "count" => s(1.0, ""),
        u if u.ends_with("/s") && max_abs >= 1e6 => s(1e-6, &format!("M {u}")),
        u if u.ends_with("/s") && max_abs >= 1e4 => s(1e-3, &format!("k {u}")),
        u => s(1.0, u),
    }
}

/// A tick label: up to 3 significant digits, no trailing zeros.
pub(super) fn tick(v: f64) -> String {
    if v.abs() < 1e-9 {
        return "0".into();
    }
    let s = sig(v);
    if s.contains('.') && !s.contains('e') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// "10.0 µs" → "10 µs", "1.50 MiB/s" → "1.5 MiB/s": tick labels need no
/// trailing zeros.
pub(super) fn trim_number(s: &str) -> String {
    let (num, rest) = s.split_once(' ').unwrap_or((s, ""));
    let num = if num.contains('.') && !num.contains('e') {
        num.trim_end_matches('0').trim_end_matches('.')
    } else {
        num
    };
    if rest.is_empty() {
        num.to_string()
    } else {
        format!("{num} {rest}")
    }
}

/// Axis description with its unit: "record (KiB)".
pub(super) fn desc(label: &str, unit: &str) -> String {
    if unit.is_empty() {
        label.to_string()
    } else {
        format!("{label} ({unit})")
    }
}

/// A prepared axis: coordinate transform, range, tick positions and labels.
pub(super) struct Prepared {
    pub(super) log: bool,
    pub(super) factor: f64,
    pub(super) unit: String,
    pub(super) lo: f64,
    pub(super) hi: f64,
    /// Tick positions in coordinate space.
    pub(super) keys: Vec<f64>,
    pub(super) desc: String,
}

impl Prepared {
    /// Base-unit value → plotting coordinate.
    pub(super) fn map(&self, v: f64) -> f64 {
        if self.log {
            v.log10()
        } else {
            v * self.factor
        }
    }

    pub(super) fn label(&self, c: f64) -> String {
        if self.log {
            let v = 10f64.powf(c);
            if self.unit == "B" {
                format_size(v.round().max(0.0) as u64)
            } else {
                let text = trim_number(&human(v, &self.unit));
                // The title carries a unit every tick shares.
                match log_unit(&self.unit) {
                    Some(u) => text
                        .strip_suffix(u.as_str())
                        .map_or(text.clone(), |t| trim_number(t.trim_end())),
                    None => text,
                }
            }
        } else {
            tick(c)
        }
    }
}

/// Prepare an axis for the values `vals` (base units, finite). Linear axes
/// start at 0 when `from_zero` and every value is non-negative.
pub(super) fn prepare(axis: &Axis, vals: &[f64], from_zero: bool) -> Prepared {
    let vals: Vec<f64> = vals
        .iter()
        .copied()
        .filter(|v| v.is_finite() && (!axis.log || *v > 0.0))
        .collect();
    let (mut min, mut max) = vals
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| {
            (a.min(v), b.max(v))
        });
    if vals.is_empty() {
        (min, max) = if axis.log { (1.0, 10.0) } else { (0.0, 1.0) };
    }
    if axis.log {
        let (l0, l1) = (min.log10(), max.log10());
        let pad = ((l1 - l0) * 0.04).max(0.1);
        let (lo, hi) = (l0 - pad, l1 + pad);
        Prepared {
            log: true,
            factor: 1.0,
            unit: axis.unit.clone(),
            lo,
            hi,
            keys: log_keys(&axis.unit, lo, hi),
            desc: match log_unit(&axis.unit) {
                Some(u) => format!("{} ({u}, log scale)", axis.label),
                None => format!("{} (log scale)", axis.label),
            },
        }
    } else {
        let sc = scale_for(&axis.unit, min.abs().max(max.abs()));
        let (mut lo, mut hi) = (min * sc.factor, max * sc.factor);
        if from_zero && lo >= 0.0 {
            lo = 0.0;
        }
        let span = hi - lo;
        let pad = if span > 0.0 {
            span * 0.06
        } else {
            (hi.abs() * 0.1).max(1e-9)
        };
        if !(from_zero && lo == 0.0) {
            lo -= pad;
        }
        hi += pad;
        let mut keys = linear_keys(lo, hi, 7);
        // Whole numbers (a CPU, a thread count) get whole ticks: CPUs 0
        // and 1 had an axis of 0.2 … 0.8.
        let whole = !vals.is_empty() && vals.iter().all(|v| (v * sc.factor).fract() == 0.0);
        if whole && keys.iter().any(|k| k.fract() != 0.0) {
            keys.retain(|k| k.fract() == 0.0);
        }
        Prepared {
            log: false,
            factor: sc.factor,
            unit: axis.unit.clone(),
            lo,
            hi,
            keys,
            desc: desc(&axis.label, &sc.unit),
        }
    }
}

/// The unit every tick of a log axis shares (their labels carry it too);
/// None when ticks change unit along the axis (bytes, seconds).
fn log_unit(unit: &str) -> Option<String> {
    match unit {
        "B/s" => Some("MiB/s".into()),
        "B" | "s" | "" | "count" => None,
        "ratio" => Some("×".into()),
        "fraction" | "%" => Some("%".into()),
        u => Some(u.to_string()),
    }
}

/// About `n` "nice" tick positions (1-2-5 steps) between lo and hi.
pub(super) fn linear_keys(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    let span = hi - lo;
    if !(span.is_finite() && span > 0.0) {
        return vec![lo];
    }
    let raw = span / n.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let mut v = (lo / step).ceil() * step;
    let mut out = Vec::new();
    while v <= hi + step * 1e-9 && out.len() < 50 {
        // Snap values like 0.30000000000000004 to the step grid.
        out.push((v / step).round() * step);
        v += step;
    }
    out
}

/// Tick positions (log10 of the value) for a log axis spanning 10^lo..10^hi:
/// powers of two for bytes, 1-2-5 decades otherwise; at most ~9 ticks.
pub(super) fn log_keys(unit: &str, lo: f64, hi: f64) -> Vec<f64> {
    // Throughput is shown in MiB/s: nice numbers of MiB/s, not of B/s.
    if unit == "B/s" {
        let m = 1048576f64.log10();
        return log_keys("MiB/s", lo - m, hi - m)
            .into_iter()
            .map(|k| k + m)
            .collect();
    }
    let mut vals: Vec<f64> = Vec::new();
    if unit == "B" {
        let (a, b) = (
            (lo / 2f64.log10()).ceil() as i64,
            (hi / 2f64.log10()).floor() as i64,
        );
        let n = (b - a + 1).max(1);
        let step = ((n + 8) / 9).max(1);
        // Prefer multiples of the step (e.g. 1 KiB, 4 KiB, 16 KiB…).
        let mut e = a + (step - a.rem_euclid(step)) % step;
        while e <= b {
            vals.push(2f64.powi(e as i32));
            e += step;
        }
    } else {
        let (a, b) = (lo.floor() as i64, hi.ceil() as i64);
        let decades = (b - a).max(1);
        let mults: &[f64] = if decades <= 2 {
            &[1.0, 2.0, 5.0]
        } else if decades <= 4 {
            &[1.0, 3.0]
        } else {
            &[1.0]
        };
        let step = ((decades + 8) / 9).max(1);
        let mut d = a;
        while d <= b {
            for m in mults {
                vals.push(m * 10f64.powi(d as i32));
            }
            d += step;
        }
    }
    let keys: Vec<f64> = vals
        .into_iter()
        .map(f64::log10)
        .filter(|k| *k >= lo && *k <= hi)
        .collect();
    if keys.is_empty() {
        vec![(lo + hi) / 2.0]
    } else {
        keys
    }
}
