//! Human units for display. Values are stored in base units (B/s, s, B,
//! ops/s); throughput is shown in MiB/s (2^20) and says so.

/// Format a value in its base unit for a person.
pub fn human(value: f64, unit: &str) -> String {
    if !value.is_finite() {
        return "–".to_string();
    }
    match unit {
        "B/s" => format!("{} MiB/s", sig(value / 1048576.0)),
        "B" => crate::engine::params::format_size(value.max(0.0) as u64),
        "s" => seconds(value),
        "ratio" => format!("{}×", sig(value)),
        // A share of a whole (0..1), shown as a percentage.
        "fraction" => format!("{}%", sig(value * 100.0)),
        "%" => format!("{:.1}%", value),
        u if u.ends_with("/s") => format!("{} {u}", si(value)),
        "" | "count" => si(value),
        u => format!("{} {u}", sig(value)),
    }
}

/// A duration with an adaptive unit: `812 ns`, `3.42 µs`, `12.1 ms`, `2.50 s`.
pub fn seconds(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0 s".to_string()
    } else if a < 1e-6 {
        format!("{} ns", sig(v * 1e9))
    } else if a < 1e-3 {
        format!("{} µs", sig(v * 1e6))
    } else if a < 1.0 {
        format!("{} ms", sig(v * 1e3))
    } else {
        format!("{} s", sig(v))
    }
}

/// Three significant digits, no exponent for everyday magnitudes.
pub fn sig(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".to_string()
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else if a >= 0.001 {
        format!("{v:.3}")
    } else {
        format!("{v:.2e}")
    }
}

/// SI prefixes for rates and counts: `1.23 k`, `45.6 M`.
pub fn si(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{} G", sig(v / 1e9))
    } else if a >= 1e6 {
        format!("{} M", sig(v / 1e6))
    } else if a >= 1e4 {
        format!("{} k", sig(v / 1e3))
    } else {
        sig(v)
    }
}

/// A ±percentage of the median for the CI half-width.
pub fn pct(v: f64) -> String {
    if v.is_finite() {
        format!("{:.1}%", v * 100.0)
    } else {
        "–".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_are_explicit() {
        assert_eq!(human(1048576.0 * 512.0, "B/s"), "512 MiB/s");
        assert_eq!(human(0.0123, "s"), "12.3 ms");
        assert_eq!(human(3.4e-6, "s"), "3.40 µs");
        assert_eq!(human(4096.0, "B"), "4 KiB");
        assert_eq!(human(0.0123, "fraction"), "1.23%");
        assert_eq!(human(12345.0, "ops/s"), "12.3 k ops/s");
        assert_eq!(human(f64::NAN, "s"), "–");
    }
}
