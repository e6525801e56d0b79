//! Units, one place for the whole crate: parsing what a person types
//! (`4k`, `256MiB`, `500ms`) and showing base-unit values (B/s, s, B, ops/s)
//! in human units. Values are stored in base units; throughput is shown in
//! MiB/s (2^20) and says so. A bottom module: it imports nothing of the crate.

/// A number and the unit after it ("4k", "1.5 s"): the split both parsers read.
fn number_and_unit(raw: &str) -> Option<(f64, &str)> {
    let s = raw.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    Some((num.parse().ok()?, unit.trim()))
}

/// Parse a byte size. Bare suffixes and `KiB`-style are binary (4k = 4096);
/// `kB`/`MB`/`GB` are decimal, as fio and dd do.
pub(crate) fn parse_size(raw: &str) -> Option<u64> {
    let (num, unit) = number_and_unit(raw)?;
    let mult: f64 = match unit {
        "" | "b" | "B" => 1.0,
        "k" | "K" | "KiB" | "kiB" | "Ki" => 1024.0,
        "m" | "M" | "MiB" | "Mi" => 1024.0 * 1024.0,
        "g" | "G" | "GiB" | "Gi" => 1024.0 * 1024.0 * 1024.0,
        "t" | "T" | "TiB" | "Ti" => 1024f64.powi(4),
        "kB" | "KB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        "TB" => 1e12,
        _ => return None,
    };
    let v = num * mult;
    if !v.is_finite() || v < 0.0 || v > u64::MAX as f64 || v.fract() != 0.0 {
        return None;
    }
    Some(v as u64)
}

/// Parse a duration into seconds: `500ms`, `3s`, `2m`, `1h`, `250us`, `1.5`.
pub(crate) fn parse_duration(raw: &str) -> Option<f64> {
    let (num, unit) = number_and_unit(raw)?;
    let mult = match unit {
        "" | "s" | "sec" => 1.0,
        "ms" => 1e-3,
        "us" | "µs" => 1e-6,
        "ns" => 1e-9,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        _ => return None,
    };
    let v = num * mult;
    (v.is_finite() && v >= 0.0).then_some(v)
}

/// Binary-unit size for display: `4 KiB`, `1.5 MiB`.
pub(crate) fn format_size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut i = 0;
    while v >= 1024.0 && i < UNITS.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    if v.fract() == 0.0 {
        format!("{v:.0} {}", UNITS[i])
    } else {
        format!("{v:.1} {}", UNITS[i])
    }
}

/// A confidence interval for a person: `low … high`, each in `human` form.
pub(crate) fn human_range(low: f64, high: f64, unit: &str) -> String {
    let (lo, hi) = (human(low, unit), human(high, unit));
    // One unit for both ends when they share it: "17.2 … 23.9 MiB/s" keeps
    // an 80-column table on one line a row.
    match (lo.rsplit_once(' '), hi.rsplit_once(' ')) {
        (Some((a, u)), Some((_, v))) if u == v => format!("{a} … {hi}"),
        _ => format!("{lo} … {hi}"),
    }
}

/// Format a value in its base unit for a person.
pub(crate) fn human(value: f64, unit: &str) -> String {
    if !value.is_finite() {
        return "–".to_string();
    }
    match unit {
        "B/s" => format!("{} MiB/s", sig(value / 1048576.0)),
        "B" => format_size(value.max(0.0) as u64),
        "s" => seconds(value),
        "ratio" => format!("{}×", sig(value)),
        // A share of a whole (0..1), shown as a percentage.
        "fraction" => format!("{}%", sig(value * 100.0)),
        "%" => format!("{:.1}%", value),
        "Hz" => format!("{} MHz", sig(value / 1e6)),
        u if u.ends_with("/s") => format!("{} {u}", si(value)),
        "" | "count" => si(value),
        u => format!("{} {u}", sig(value)),
    }
}

/// A duration with an adaptive unit: `812 ns`, `3.42 µs`, `12.1 ms`, `2.50 s`.
pub(crate) fn seconds(v: f64) -> String {
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
pub(crate) fn sig(v: f64) -> String {
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
pub(crate) fn si(v: f64) -> String {
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
pub(crate) fn pct(v: f64) -> String {
    if v.is_finite() {
        format!("{:.1}%", v * 100.0)
    } else {
        "–".to_string()
    }
}

/// A UTC date and time from seconds since the epoch: (year, month, day,
/// hour, minute, second). Howard Hinnant's days-to-civil algorithm; enough
/// for time stamps, without a date crate in the board binary.
pub(crate) fn utc(epoch_seconds: u64) -> (i64, u32, u32, u32, u32, u32) {
    let days = (epoch_seconds / 86_400) as i64;
    let rem = epoch_seconds % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    let (h, mi, s) = (rem / 3600, rem % 3600 / 60, rem % 60);
    (y, m, d, h as u32, mi as u32, s as u32)
}

/// Seconds and nanoseconds since the epoch, now (0 before 1970).
fn since_epoch() -> (u64, u32) {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| (d.as_secs(), d.subsec_nanos()))
        .unwrap_or((0, 0))
}

/// Now in UTC as RFC 3339, whole seconds: `2026-11-25T15:28:47Z`.
pub(crate) fn now_rfc3339() -> String {
    let (y, mo, d, h, mi, s) = utc(since_epoch().0);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
}

/// Now in UTC as RFC 3339 with nanoseconds: `2026-11-25T15:28:47.123456789Z`.
pub(crate) fn now_rfc3339_nanos() -> String {
    let (secs, ns) = since_epoch();
    let (y, mo, d, h, mi, s) = utc(secs);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{ns:09}Z")
}

/// Now in UTC as `20261125-152847` (run ids).
pub(crate) fn now_stamp() -> String {
    let (y, mo, d, h, mi, s) = utc(since_epoch().0);
    format!("{y:04}{mo:02}{d:02}-{h:02}{mi:02}{s:02}")
}

/// The ASCII spelling of `s`, for a terminal whose locale is not UTF-8
/// (`report::table::plain`); a character without one becomes `?`.
pub(crate) fn to_ascii(s: &str) -> String {
    if s.is_ascii() {
        return s.to_string();
    }
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_ascii() {
            o.push(c);
            continue;
        }
        o.push_str(match c {
            '─' | '━' | '═' | '┄' | '╌' | '‐' | '‑' | '–' | '−' | '·' | '•' => {
                "-"
            }
            '—' => "--",
            '│' | '┃' | '║' | '┆' | '▏' => "|",
            '┼' | '├' | '┤' | '┬' | '┴' | '┌' | '┐' | '└' | '┘' | '╞' | '╡' | '╪' => {
                "+"
            }
            'µ' | 'μ' => "u",
            '…' => "...",
            '→' | '⟶' => "->",
            '←' => "<-",
            '↑' => "^",
            '↓' => "v",
            '⇒' => "=>",
            '≥' => ">=",
            '≤' => "<=",
            '≠' => "!=",
            '≈' | '∼' => "~",
            '±' => "+-",
            '×' => "x",
            '÷' => "/",
            '°' => " deg",
            '²' => "^2",
            '³' => "^3",
            '½' => "1/2",
            '√' => "sqrt",
            '∞' => "inf",
            'Δ' | 'δ' => "d",
            'σ' => "sd",
            'λ' => "lambda",
            '✓' | '✔' => "ok",
            '✗' | '✘' => "x",
            '█' | '▇' | '▆' | '▅' => "#",
            '▄' | '▃' | '▂' | '▁' => "_",
            '‘' | '’' | '′' => "'",
            '“' | '”' | '″' => "\"",
            '\u{a0}' | '\u{2009}' | '\u{202f}' => " ",
            _ => "?",
        });
    }
    o
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

    #[test]
    fn sizes_parse_with_binary_and_decimal_units() {
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("4k"), Some(4096));
        assert_eq!(parse_size("4KiB"), Some(4096));
        assert_eq!(parse_size("256MiB"), Some(256 << 20));
        assert_eq!(parse_size("1M"), Some(1 << 20));
        assert_eq!(parse_size("1MB"), Some(1_000_000));
        assert_eq!(parse_size("1.5k"), Some(1536));
        assert_eq!(parse_size("12x"), None);
        assert_eq!(parse_size("abc"), None);
        assert_eq!(parse_size("-4k"), None);
        assert_eq!(parse_size("0.3"), None);
    }

    #[test]
    fn durations_parse_to_seconds() {
        assert_eq!(parse_duration("500ms"), Some(0.5));
        assert_eq!(parse_duration("60s"), Some(60.0));
        assert_eq!(parse_duration("2m"), Some(120.0));
        assert_eq!(parse_duration("1.5"), Some(1.5));
        assert_eq!(parse_duration("5 parsecs"), None);
    }

    #[test]
    fn format_size_is_readable() {
        assert_eq!(format_size(4096), "4 KiB");
        assert_eq!(format_size(1536), "1.5 KiB");
        assert_eq!(format_size(256 << 20), "256 MiB");
    }

    #[test]
    fn utc_dates_follow_the_calendar() {
        assert_eq!(utc(0), (1970, 1, 1, 0, 0, 0));
        // 2000-02-29 (a leap day of a century leap year) 12:34:56.
        assert_eq!(utc(951_827_696), (2000, 2, 29, 12, 34, 56));
        // 2026-11-25T15:28:47Z and the last second of 2100 (not a leap year).
        assert_eq!(utc(1_795_620_527), (2026, 11, 25, 15, 28, 47));
        assert_eq!(utc(4_133_980_799), (2100, 12, 31, 23, 59, 59));
        let s = now_rfc3339();
        assert_eq!(
            (s.len(), &s[4..5], &s[10..11], &s[19..]),
            (20, "-", "T", "Z")
        );
        assert_eq!(now_rfc3339_nanos().len(), 30);
        assert_eq!(now_stamp().len(), 15);
    }

    #[test]
    fn ascii_spelling_of_every_glyph() {
        let s = to_ascii("3.4 µs … a → b ≥ 2 ± 1 · ─│ 3×2 ≤");
        assert!(s.is_ascii(), "{s}");
        assert_eq!(s, "3.4 us ... a -> b >= 2 +- 1 - -| 3x2 <=");
    }
}
