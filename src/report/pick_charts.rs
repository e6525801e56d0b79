//! The charts of a report section. They are chosen from the shape of the
//! data, never from experiment names, so a new experiment gets charts without touching this file:
//!
//! 1. **Series**: same-named series are joined across the results of an
//!    experiment (an experiment may emit a whole curve in one point, or one
//!    point per sweep point under the same name; a repeated x keeps the last
//!    value). Series sharing x and y label and unit share a chart, one line
//!    per name. A byte x axis gets vertical lines at the cache sizes found in
//!    the experiment's notes ("sysfs data caches: L1 32 KiB, …"); when no
//!    note names them, none are drawn.
//! 2. **Sweeps** (no series): when results differ in parameters, each metric's
//!    median is drawn with its 95% CI against the numeric parameter with the
//!    most values (one line per combination of the other parameters); a
//!    textual sweep (mode, api, …) becomes bars with CI whiskers.
//!    A single point with several metrics of one unit becomes bars too.
//! 3. **Histograms**: fixed buckets as bars; a CDF from the stored
//!    percentiles (min at 0%).
//! 4. **Monitor**: timelines of Dirty/Writeback with the throttle point,
//!    CPU iowait/user/system, and disk (or vmstat bi/bo) throughput.
//!
//! Any x axis whose values span more than 10× is logarithmic.

use std::collections::BTreeMap;

use super::charts::{Axis, Bar, BarChart, BarGroup, Chart, Line, LineChart};
use super::params::{param_kinds, param_text, param_unit, varying};
use crate::model::run::{PointResult, Series};
use crate::model::ParamValue;
use crate::stats::HistogramData;
use crate::units::human;

/// Whether values spanning min..max deserve a log axis.
pub(super) fn wide(vals: impl Iterator<Item = f64>) -> bool {
    let (mut lo, mut hi) = (f64::INFINITY, 0f64);
    for v in vals {
        if !(v.is_finite() && v > 0.0) {
            return false;
        }
        lo = lo.min(v);
        hi = hi.max(v);
    }
    hi > 10.0 * lo
}

/// Cache sizes named in notes such as "sysfs data caches: L1 32 KiB, L2 1 MiB".
pub(crate) fn cache_sizes(notes: &[String]) -> Vec<(f64, String)> {
    let mut out: Vec<(f64, String)> = Vec::new();
    for n in notes {
        let Some(rest) = n.strip_prefix("sysfs data caches:") else {
            continue;
        };
        for part in rest.split(',') {
            let mut w = part.split_whitespace();
            let (Some(level), Some(num), Some(unit)) = (w.next(), w.next(), w.next()) else {
                continue;
            };
            let mult = match unit {
                "B" => 1.0,
                "KiB" => 1024.0,
                "MiB" => 1048576.0,
                "GiB" => 1073741824.0,
                _ => continue,
            };
            if let Ok(v) = num.parse::<f64>() {
                if level.starts_with('L') && !out.iter().any(|(_, l)| l == level) {
                    out.push((v * mult, level.to_string()));
                }
            }
        }
    }
    out
}

pub(super) fn experiment_charts(results: &[&PointResult], notes: &[String]) -> Vec<Chart> {
    let mut charts = series_charts(results, notes);
    if charts.is_empty() {
        charts.extend(sweep_charts(results));
    }
    charts.extend(histogram_charts(results));
    charts
}

type SeriesKey = (String, String, String, String);
/// One joined point: x, y and, when y is a metric's median, its 95% CI.
type JoinedPoint = (f64, f64, Option<(f64, f64)>);
/// Lines of one chart: name and joined points.
type NamedLines = Vec<(String, Vec<JoinedPoint>)>;

/// A one-point series that names a metric of its own result (`y_label` =
/// metric) stands for that metric at this point: it is drawn at the
/// metric's median with its CI, the value the table shows, whatever
/// aggregate the experiment put in the series (warm-up included or not).
fn as_median(r: &PointResult, s: &Series) -> Option<JoinedPoint> {
    if s.points.len() != 1 {
        return None;
    }
    let m = r.metric(&s.y_label)?;
    if m.unit != s.y_unit {
        return None;
    }
    let sm = &m.summary;
    Some((s.points[0].0, sm.median, Some((sm.ci95_low, sm.ci95_high))))
}

fn series_charts(results: &[&PointResult], notes: &[String]) -> Vec<Chart> {
    // (x label, x unit, y label, y unit) → lines by name, in order seen;
    // whether every point of the group is a table median.
    let mut groups: Vec<(SeriesKey, NamedLines)> = Vec::new();
    let mut medians: Vec<bool> = Vec::new();
    for (r, s) in results
        .iter()
        .flat_map(|r| r.series.iter().map(move |s| (*r, s)))
    {
        let median = as_median(r, s);
        let Series {
            name,
            x_label,
            x_unit,
            y_label,
            y_unit,
            points,
        } = s;
        let key = (
            x_label.clone(),
            x_unit.clone(),
            y_label.clone(),
            y_unit.clone(),
        );
        let gi = match groups.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => {
                groups.push((key, Vec::new()));
                medians.push(true);
                groups.len() - 1
            }
        };
        medians[gi] &= median.is_some();
        let lines = &mut groups[gi].1;
        let li = match lines.iter().position(|(n, _)| n == name) {
            Some(i) => i,
            None => {
                lines.push((name.clone(), Vec::new()));
                lines.len() - 1
            }
        };
        let line = &mut lines[li].1;
        let joined: Vec<JoinedPoint> = match median {
            Some(p) => vec![p],
            None => points.iter().map(|&(x, y)| (x, y, None)).collect(),
        };
        for p in joined {
            match line.iter_mut().find(|q| q.0 == p.0) {
                Some(q) => *q = p,
                None => line.push(p),
            }
        }
    }
    let caches = cache_sizes(notes);
    groups
        .into_iter()
        .zip(medians)
        .map(|(((xl, xu, yl, yu), lines), medians)| {
            let log = wide(lines.iter().flat_map(|(_, p)| p.iter().map(|p| p.0)));
            let ylog = wide(lines.iter().flat_map(|(_, p)| p.iter().map(|p| p.1)));
            let lines: Vec<Line> = lines
                .into_iter()
                .map(|(name, mut points)| {
                    points.sort_by(|a, b| a.0.total_cmp(&b.0));
                    Line {
                        name,
                        ci: if points.iter().all(|p| p.2.is_some()) {
                            points.iter().filter_map(|p| p.2).collect()
                        } else {
                            Vec::new()
                        },
                        points: points.iter().map(|p| (p.0, p.1)).collect(),
                        ..Default::default()
                    }
                })
                .collect();
            let vlines = if xu == "B" {
                caches.clone()
            } else {
                Vec::new()
            };
            Chart::Line(LineChart {
                // Say what is plotted: the table's medians, or a curve the
                // experiment recorded besides its trials.
                title: if medians {
                    format!("{yl} vs {xl} (median, 95% CI)")
                } else {
                    format!("{yl} vs {xl} (curve recorded by the experiment)")
                },
                x: Axis::new(xl, xu).log(log),
                y: Axis::new(yl, yu).log(ylog),
                lines,
                vlines,
                hlines: Vec::new(),
            })
        })
        .collect()
}

/// Metric names in order of first appearance.
fn metric_names(results: &[&PointResult]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for m in results.iter().flat_map(|r| &r.metrics) {
        if !out.iter().any(|(n, _)| *n == m.name) {
            out.push((m.name.clone(), m.unit.clone()));
        }
    }
    out
}

fn sweep_charts(results: &[&PointResult]) -> Vec<Chart> {
    let specs = param_kinds(results);
    let vary = varying(results);
    let metrics = metric_names(results);
    if results.len() < 2 || vary.is_empty() {
        return single_point_bars(results);
    }
    let distinct = |k: &String| {
        let mut v: Vec<String> = results
            .iter()
            .map(|r| param_text(&specs, k, r.params.get(k)))
            .collect();
        v.sort();
        v.dedup();
        v.len()
    };
    let numeric = |k: &String| {
        results
            .iter()
            .all(|r| r.params.get(k).and_then(ParamValue::as_f64).is_some())
    };
    let x_key = vary
        .iter()
        .filter(|k| numeric(k))
        .max_by_key(|k| distinct(k))
        .cloned();
    let cat_key = x_key.clone().unwrap_or_else(|| vary[0].clone());
    let others: Vec<&String> = vary.iter().filter(|k| **k != cat_key).collect();
    let group_of = |r: &PointResult| {
        if others.is_empty() {
            String::new()
        } else {
            others
                .iter()
                .map(|k| param_text(&specs, k, r.params.get(*k)))
                .collect::<Vec<_>>()
                .join(" ")
        }
    };
    let mut group_names: Vec<String> = Vec::new();
    for r in results {
        let g = group_of(r);
        if !group_names.contains(&g) {
            group_names.push(g);
        }
    }
    let mut charts = Vec::new();
    for (metric, unit) in &metrics {
        if let Some(xk) = &x_key {
            let mut lines: Vec<Line> = Vec::new();
            for g in &group_names {
                let mut pts: Vec<(f64, f64, (f64, f64))> = results
                    .iter()
                    .filter(|r| group_of(r) == *g)
                    .filter_map(|r| {
                        let x = r.params.get(xk)?.as_f64()?;
                        let s = &r.metric(metric)?.summary;
                        Some((x, s.median, (s.ci95_low, s.ci95_high)))
                    })
                    .collect();
                pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                if pts.is_empty() {
                    continue;
                }
                lines.push(Line {
                    name: if g.is_empty() {
                        metric.clone()
                    } else {
                        g.clone()
                    },
                    points: pts.iter().map(|p| (p.0, p.1)).collect(),
                    ci: pts.iter().map(|p| p.2).collect(),
                    dashed: false,
                });
            }
            let log = wide(lines.iter().flat_map(|l| l.points.iter().map(|p| p.0)));
            let ylog = wide(lines.iter().flat_map(|l| l.points.iter().map(|p| p.1)));
            charts.push(Chart::Line(LineChart {
                title: format!("{metric} vs {xk} (median, 95% CI)"),
                x: Axis::new(xk.clone(), param_unit(&specs, xk)).log(log),
                y: Axis::new(metric.clone(), unit.clone()).log(ylog),
                lines,
                vlines: Vec::new(),
                hlines: Vec::new(),
            }));
        } else {
            let mut cats: Vec<String> = Vec::new();
            for r in results {
                let c = param_text(&specs, &cat_key, r.params.get(&cat_key));
                if !cats.contains(&c) {
                    cats.push(c);
                }
            }
            let groups: Vec<BarGroup> = group_names
                .iter()
                .map(|g| BarGroup {
                    name: if g.is_empty() {
                        metric.clone()
                    } else {
                        g.clone()
                    },
                    bars: cats
                        .iter()
                        .map(|c| {
                            let r = results.iter().find(|r| {
                                group_of(r) == *g
                                    && param_text(&specs, &cat_key, r.params.get(&cat_key)) == *c
                            })?;
                            let s = &r.metric(metric)?.summary;
                            Some(Bar {
                                value: s.median,
                                ci: Some((s.ci95_low, s.ci95_high)),
                            })
                        })
                        .collect(),
                })
                .collect();
            charts.push(Chart::Bar(BarChart {
                title: format!("{metric} by {cat_key} (median, 95% CI)"),
                x_label: cat_key.clone(),
                categories: cats
                    .iter()
                    .map(|c| c.split_once('=').map_or(c.clone(), |(_, v)| v.to_string()))
                    .collect(),
                y: Axis::new(metric.clone(), unit.clone()),
                groups,
            }));
        }
    }
    charts
}

/// One point with several metrics of the same unit: bars of the medians.
fn single_point_bars(results: &[&PointResult]) -> Vec<Chart> {
    let mut charts = Vec::new();
    for r in results {
        let mut units: Vec<&str> = Vec::new();
        for m in &r.metrics {
            if !units.contains(&m.unit.as_str()) {
                units.push(&m.unit);
            }
        }
        for u in units {
            let ms: Vec<_> = r.metrics.iter().filter(|m| m.unit == u).collect();
            if ms.len() < 2 {
                continue;
            }
            charts.push(Chart::Bar(BarChart {
                // The unit is on the axis, scaled as the table shows it.
                title: format!("{} metrics (median, 95% CI)", r.experiment),
                x_label: "metric".into(),
                categories: ms.iter().map(|m| m.name.clone()).collect(),
                y: Axis::new("median", u),
                groups: vec![BarGroup {
                    name: r.params_label(),
                    bars: ms
                        .iter()
                        .map(|m| {
                            Some(Bar {
                                value: m.summary.median,
                                ci: Some((m.summary.ci95_low, m.summary.ci95_high)),
                            })
                        })
                        .collect(),
                }],
            }));
        }
    }
    charts
}

const MAX_BUCKET_CHARTS: usize = 12;

fn histogram_charts(results: &[&PointResult]) -> Vec<Chart> {
    let specs = param_kinds(results);
    let vary = varying(results);
    let point_name = |r: &PointResult| {
        if vary.is_empty() {
            String::new()
        } else {
            vary.iter()
                .map(|k| param_text(&specs, k, r.params.get(k)))
                .collect::<Vec<_>>()
                .join(" ")
        }
    };
    let mut charts = Vec::new();
    // Many fine buckets (sched.latency): one OSADL-style log-count plot per point.
    for r in results {
        let hs: Vec<_> = r.histograms.iter().map(|h| (h.name.clone(), h)).collect();
        let title = format!("{} {}", r.experiment, point_name(r));
        charts.extend(super::charts::latency_plot::log_count(title.trim(), &hs));
    }
    let mut buckets = 0;
    for r in results {
        for h in &r.histograms {
            if h.buckets.is_empty()
                || h.buckets.len() > super::charts::latency_plot::MANY_BUCKETS
                || h.count == 0
                || buckets >= MAX_BUCKET_CHARTS
            {
                continue;
            }
            buckets += 1;
            let cats = h
                .buckets
                .iter()
                .map(|b| match b.high {
                    Some(_) => human(b.low, &h.unit),
                    None => format!("≥{}", human(b.low, &h.unit)),
                })
                .collect();
            let pn = point_name(r);
            charts.push(Chart::Bar(BarChart {
                title: format!(
                    "{} histogram{}",
                    h.name,
                    if pn.is_empty() {
                        String::new()
                    } else {
                        format!(" ({pn})")
                    }
                ),
                x_label: "bucket (lower edge)".into(),
                categories: cats,
                y: Axis::new("count", "count"),
                groups: vec![BarGroup {
                    name: h.name.clone(),
                    bars: h
                        .buckets
                        .iter()
                        .map(|b| {
                            Some(Bar {
                                value: b.count as f64,
                                ci: None,
                            })
                        })
                        .collect(),
                }],
            }));
        }
    }
    // One CDF per distribution name, one line per point.
    let mut by_name: BTreeMap<&str, Vec<(&PointResult, &HistogramData)>> = BTreeMap::new();
    for r in results {
        for h in &r.histograms {
            if h.count > 0 && !h.percentiles.is_empty() {
                by_name.entry(&h.name).or_default().push((r, h));
            }
        }
    }
    for (name, hs) in by_name {
        let lines: Vec<Line> = hs
            .iter()
            .map(|(r, h)| {
                let mut points = vec![(h.min, 0.0)];
                points.extend(h.percentiles.iter().map(|p| (p.value, p.p)));
                let pn = point_name(r);
                Line {
                    name: if pn.is_empty() { name.to_string() } else { pn },
                    points,
                    ..Default::default()
                }
            })
            .collect();
        let log = wide(lines.iter().flat_map(|l| l.points.iter().map(|p| p.0)));
        let unit = hs[0].1.unit.clone();
        charts.push(Chart::Line(LineChart {
            title: format!("{name}: cumulative distribution (min, p50, p90, p99, p99.9, max)"),
            x: Axis::new(name, unit).log(log),
            y: Axis::new("percentile", "%"),
            lines,
            vlines: Vec::new(),
            hlines: Vec::new(),
        }));
    }
    charts
}

pub(super) fn median_of(mut v: Vec<f64>) -> f64 {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_sizes_come_from_notes() {
        let notes = vec![
            "other".to_string(),
            "sysfs data caches: L1 48 KiB, L2 1.2 MiB, L3 unknown".to_string(),
        ];
        let c = cache_sizes(&notes);
        assert_eq!(c.len(), 2);
        assert_eq!(c[0], (49152.0, "L1".to_string()));
        assert!((c[1].0 - 1.2 * 1048576.0).abs() < 1.0);
        assert!(cache_sizes(&["sysfs data caches: unknown".into()]).is_empty());
    }

    #[test]
    fn wide_ranges_get_a_log_axis() {
        assert!(wide([4096.0, 1048576.0].into_iter()));
        assert!(!wide([1.0, 5.0].into_iter()));
        assert!(!wide([0.0, 100.0].into_iter()));
    }
}
