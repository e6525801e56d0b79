//! JUnit XML, the report CI systems gate on (GitLab, Jenkins, GitHub
//! actions): one test suite per study, experiment or compared experiment,
//! one test case per key issue, metric or comparison row. FAIL and
//! regressed are failures with the figures in the message; a key issue
//! without a verdict (measurement missing) is an error.

use std::fmt::Write as _;

use super::cases::{cases, Case, Outcome};
use super::{Exporter, Subject};
use crate::Result;

pub(crate) struct JUnit;

impl Exporter for JUnit {
    fn name(&self) -> &'static str {
        "junit"
    }
    fn about(&self) -> &'static str {
        "JUnit XML for CI gates: FAIL and regressed are failures"
    }
    fn export(&self, s: &Subject) -> Result<Vec<u8>> {
        Ok(xml(&cases(s)).into_bytes())
    }
}

/// Text in an XML attribute or element: markup escaped, and characters
/// XML 1.0 cannot carry (controls other than tab/newline) dropped.
pub(crate) fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' => out.push_str("&#10;"),
            '\t' => out.push_str("&#9;"),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => {}
            c => out.push(c),
        }
    }
    out
}

fn count(cases: &[&Case], o: Outcome) -> usize {
    cases.iter().filter(|c| c.outcome == o).count()
}

/// Summed from +0.0: an empty f64 sum is -0.0, which the JUnit schema's
/// time pattern rejects.
fn seconds(cases: &[&Case]) -> f64 {
    cases
        .iter()
        .filter_map(|c| c.seconds)
        .fold(0.0, |a, b| a + b)
}

pub(crate) fn xml(all: &[Case]) -> String {
    let mut suites: Vec<&str> = Vec::new();
    for c in all {
        if !suites.contains(&c.suite.as_str()) {
            suites.push(&c.suite);
        }
    }
    let all_refs: Vec<&Case> = all.iter().collect();
    let mut s = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        s,
        "<testsuites name=\"tunelab\" tests=\"{}\" failures=\"{}\" errors=\"{}\" time=\"{:.3}\">",
        all.len(),
        count(&all_refs, Outcome::Fail),
        count(&all_refs, Outcome::Error),
        seconds(&all_refs)
    );
    for suite in suites {
        let cs: Vec<&Case> = all.iter().filter(|c| c.suite == suite).collect();
        let _ = writeln!(
            s,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"0\" \
             time=\"{:.3}\">",
            escape(suite),
            cs.len(),
            count(&cs, Outcome::Fail),
            count(&cs, Outcome::Error),
            seconds(&cs)
        );
        for c in cs {
            let time = c
                .seconds
                .map(|t| format!(" time=\"{t:.3}\""))
                .unwrap_or_default();
            let _ = writeln!(
                s,
                "    <testcase classname=\"{}\" name=\"{}\"{time}>",
                escape(suite),
                escape(&c.name)
            );
            let msg = escape(&c.message);
            match c.outcome {
                Outcome::Fail => {
                    let _ = writeln!(
                        s,
                        "      <failure type=\"verdict\" message=\"{msg}\">{msg}</failure>"
                    );
                }
                Outcome::Error => {
                    let _ = writeln!(
                        s,
                        "      <error type=\"no-verdict\" message=\"{msg}\">{msg}</error>"
                    );
                }
                Outcome::Pass => {
                    let _ = writeln!(s, "      <system-out>{msg}</system-out>");
                }
            }
            s.push_str("    </testcase>\n");
        }
        s.push_str("  </testsuite>\n");
    }
    s.push_str("</testsuites>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_and_controls_are_escaped() {
        assert_eq!(
            escape("a<b & \"c\"\u{1}\n"),
            "a&lt;b &amp; &quot;c&quot;&#10;"
        );
    }
}
