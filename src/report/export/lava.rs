//! LAVA test-case lines for device farms: `lava-test-case NAME --result
//! pass|fail|unknown [--measurement X --units U]`, one per key issue, metric
//! or comparison row. A LAVA test definition runs them (`tunelab … --lava |
//! sh`, or prints them where its test shell reads them), so names and
//! units keep to characters that need no shell quoting.

use std::fmt::Write as _;

use super::cases::{cases, Outcome};
use super::{Exporter, Subject};
use crate::Result;

pub(crate) struct Lava;

impl Exporter for Lava {
    fn name(&self) -> &'static str {
        "lava"
    }
    fn about(&self) -> &'static str {
        "lava-test-case lines for LAVA device farms"
    }
    fn export(&self, s: &Subject) -> Result<Vec<u8>> {
        Ok(lines(s).into_bytes())
    }
}

/// `s` with every character outside [A-Za-z0-9._-] (and `keep`) turned
/// into '_', runs of '_' folded, µ spelled u.
pub(crate) fn word(s: &str, keep: &[char]) -> String {
    let mut out = String::new();
    for c in s.replace('µ', "u").chars() {
        let c = if c.is_ascii_alphanumeric() || "._-".contains(c) || keep.contains(&c) {
            c
        } else {
            '_'
        };
        if !(c == '_' && out.ends_with('_')) {
            out.push(c);
        }
    }
    let out = out.trim_matches('_').to_string();
    if out.is_empty() {
        "_".into()
    } else {
        out
    }
}

pub(crate) fn lines(s: &Subject) -> String {
    let mut out = String::new();
    let mut seen: Vec<String> = Vec::new();
    for c in cases(s) {
        let base = word(&format!("{}_{}", c.suite, c.name), &[]);
        // LAVA keys results by name: a repeated name gets a counter.
        let mut name = base.clone();
        let mut k = 1;
        while seen.contains(&name) {
            k += 1;
            name = format!("{base}_{k}");
        }
        seen.push(name.clone());
        let result = match c.outcome {
            Outcome::Pass => "pass",
            Outcome::Fail => "fail",
            Outcome::Error => "unknown",
        };
        let _ = write!(out, "lava-test-case {name} --result {result}");
        if let Some((v, unit)) = c.measurement.filter(|(v, _)| v.is_finite()) {
            let _ = write!(
                out,
                " --measurement {v} --units {}",
                word(&unit, &['/', '%'])
            );
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_need_no_quoting() {
        assert_eq!(
            word("io.stream size=64 MiB throughput", &[]),
            "io.stream_size_64_MiB_throughput"
        );
        assert_eq!(word("µs", &[]), "us");
        assert_eq!(word("MB/s", &['/', '%']), "MB/s");
        assert_eq!(word("'$(x)'", &[]), "x");
    }
}
