//! OpenMetrics text (Prometheus, Grafana, GitLab metrics reports): one
//! writer for `monitor`'s per-sample gauges and for the gauges of a run or a
//! comparison. Families are grouped, label values escaped, non-finite values
//! spelled as the format wants (NaN, +Inf, -Inf), and the text ends in
//! `# EOF`.

use std::fmt::Write as _;

use super::{Exporter, Subject};
use crate::Result;

pub(crate) struct OpenMetrics;

impl Exporter for OpenMetrics {
    fn name(&self) -> &'static str {
        "openmetrics"
    }
    fn about(&self) -> &'static str {
        "OpenMetrics text gauges (Prometheus, Grafana, GitLab metrics reports)"
    }
    fn export(&self, s: &Subject) -> Result<Vec<u8>> {
        let (gauges, help) = gauges(s);
        Ok(text(&gauges, None, &|name| help_of(&help, name)).into_bytes())
    }
}

/// (metric name, labels as `k="v",…`, value).
pub(crate) type Gauge = (String, String, f64);

/// A sample value as OpenMetrics spells it.
fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        v.to_string()
    }
}

/// A label value with `\`, `"` and newlines escaped.
pub(crate) fn label_value(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// `k="v",…` from pairs.
pub(crate) fn labels(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", label_value(v)))
        .collect::<Vec<_>>()
        .join(",")
}

/// The exposition: one `# TYPE … gauge` family per name in first-seen
/// order (with `# HELP` when `help` knows the name), each sample with the
/// optional timestamp in seconds.
pub(crate) fn text(
    metrics: &[Gauge],
    timestamp_s: Option<f64>,
    help: &dyn Fn(&str) -> Option<String>,
) -> String {
    let mut s = String::new();
    let mut seen: Vec<&str> = Vec::new();
    let ts = timestamp_s.map(|t| format!(" {t:.3}")).unwrap_or_default();
    for (name, _, _) in metrics {
        if seen.contains(&name.as_str()) {
            continue;
        }
        seen.push(name);
        let _ = writeln!(s, "# TYPE {name} gauge");
        if let Some(h) = help(name) {
            let _ = writeln!(
                s,
                "# HELP {name} {}",
                h.replace('\\', "\\\\").replace('\n', "\\n")
            );
        }
        for (n, l, v) in metrics.iter().filter(|m| &m.0 == name) {
            let l = if l.is_empty() {
                String::new()
            } else {
                format!("{{{l}}}")
            };
            let _ = writeln!(s, "{n}{l} {}{ts}", number(*v));
        }
    }
    s.push_str("# EOF\n");
    s
}

fn help_of(help: &[(&'static str, &'static str)], name: &str) -> Option<String> {
    help.iter()
        .find(|(n, _)| *n == name)
        .map(|(_, h)| h.to_string())
}

type Help = Vec<(&'static str, &'static str)>;

fn gauges(s: &Subject) -> (Vec<Gauge>, Help) {
    let mut g: Vec<Gauge> = Vec::new();
    let mut push = |name: &str, l: String, v: f64| g.push((name.to_string(), l, v));
    let help: Help;
    match *s {
        Subject::Run(r) | Subject::Timed(r, _) => {
            help = vec![
                (
                    "tunelab_result_median",
                    "Median of a metric's trials, in the unit of the unit label",
                ),
                (
                    "tunelab_result_ci95_low",
                    "Lower bound of the 95% confidence interval of the median",
                ),
                (
                    "tunelab_result_ci95_high",
                    "Upper bound of the 95% confidence interval of the median",
                ),
                ("tunelab_result_trials", "Trials summarised"),
                (
                    "tunelab_key_issue_verdict",
                    "A study's key issue: 1 for its verdict label",
                ),
            ];
            for p in &r.results {
                let params = p.params_label();
                for m in &p.metrics {
                    let l = labels(&[
                        ("run", &r.id),
                        ("experiment", &p.experiment),
                        ("params", &params),
                        ("metric", &m.name),
                        ("unit", &m.unit),
                    ]);
                    let x = &m.summary;
                    push("tunelab_result_median", l.clone(), x.median);
                    push("tunelab_result_ci95_low", l.clone(), x.ci95_low);
                    push("tunelab_result_ci95_high", l.clone(), x.ci95_high);
                    push("tunelab_result_trials", l, x.n as f64);
                }
            }
            if let Some(st) = &r.study {
                for i in &st.issues {
                    let l = labels(&[
                        ("run", &r.id),
                        ("study", &st.profile),
                        ("issue", &i.name),
                        ("verdict", &i.verdict),
                    ]);
                    push("tunelab_key_issue_verdict", l, 1.0);
                }
            }
        }
        Subject::Comparison(c) => {
            help = vec![
                (
                    "tunelab_comparison_ratio",
                    "Median of the new run over median of the base run",
                ),
                (
                    "tunelab_comparison_ratio_ci95_low",
                    "Lower bound of the ratio's 95% confidence interval",
                ),
                (
                    "tunelab_comparison_ratio_ci95_high",
                    "Upper bound of the ratio's 95% confidence interval",
                ),
                ("tunelab_comparison_regressions", "Metrics that regressed"),
                (
                    "tunelab_comparison_suspect_regressions",
                    "Metrics that regressed on trials the validity guard flagged",
                ),
            ];
            for p in &c.pairs {
                let params = p.params();
                for m in &p.metrics {
                    let x = m.comparison();
                    let l = labels(&[
                        ("base", &c.base),
                        ("new", &c.new),
                        ("experiment", &p.experiment),
                        ("params", &params),
                        ("metric", &m.name),
                        ("verdict", x.verdict.as_str()),
                    ]);
                    push("tunelab_comparison_ratio", l.clone(), x.ratio);
                    push("tunelab_comparison_ratio_ci95_low", l.clone(), x.ci95_low);
                    push("tunelab_comparison_ratio_ci95_high", l, x.ci95_high);
                }
            }
            let l = labels(&[("base", &c.base), ("new", &c.new)]);
            push(
                "tunelab_comparison_regressions",
                l.clone(),
                c.regressions as f64,
            );
            push(
                "tunelab_comparison_suspect_regressions",
                l,
                c.suspect_regressions as f64,
            );
        }
        Subject::Devices(c) => {
            help = vec![
                (
                    "tunelab_device_median",
                    "Median of a metric on a device, in the unit of the unit label",
                ),
                (
                    "tunelab_device_ratio",
                    "Median on the device over median on the baseline device",
                ),
                (
                    "tunelab_device_regressions",
                    "Metrics of some device that regressed against the baseline",
                ),
            ];
            let base = c.devices.get(c.baseline).map_or("", |d| d.name.as_str());
            for m in &c.metrics {
                for (i, d) in c.devices.iter().enumerate() {
                    if let Some(Some(median)) = m.medians.get(i) {
                        let l = labels(&[
                            ("device", &d.name),
                            ("experiment", &m.experiment),
                            ("params", &m.params),
                            ("metric", &m.metric),
                            ("unit", &m.unit),
                        ]);
                        push("tunelab_device_median", l, *median);
                    }
                    if let Some(Some(x)) = m.vs_baseline.get(i) {
                        let l = labels(&[
                            ("device", &d.name),
                            ("baseline", base),
                            ("experiment", &m.experiment),
                            ("params", &m.params),
                            ("metric", &m.metric),
                            ("verdict", x.verdict.as_str()),
                        ]);
                        push("tunelab_device_ratio", l, x.ratio);
                    }
                }
            }
            push(
                "tunelab_device_regressions",
                labels(&[("baseline", base)]),
                c.regressions as f64,
            );
        }
    }
    (g, help)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_grouped_values_and_labels_spelled_as_the_format_wants() {
        let m = vec![
            ("a".to_string(), labels(&[("x", "q\"\\")]), f64::INFINITY),
            ("b".to_string(), String::new(), f64::NAN),
            ("a".to_string(), String::new(), 0.5),
        ];
        let help = |n: &str| (n == "a").then(|| "an a".to_string());
        assert_eq!(
            text(&m, None, &help),
            "# TYPE a gauge\n# HELP a an a\na{x=\"q\\\"\\\\\"} +Inf\na 0.5\n# TYPE b gauge\nb NaN\n# EOF\n"
        );
    }
}
