//! SVG charts for `tunelab report`, drawn with plotters' SVG backend.
//!
//! The charts are plain data (line charts, bar charts, a forest plot) that
//! know nothing about experiments: `report::document` decides what to draw.
//! Values arrive in base units (B, s, B/s, …) and are shown in human units
//! (MiB/s, µs, KiB…): linear axes are scaled and say their unit, log axes
//! label every tick with `units::human`. Text stays text (`<text>` elements,
//! generic `sans-serif`): no font files, no scripts, nothing from the network.
//! Legends are drawn in a strip below the plot so they never hide data.

use std::ops::Range;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::Shift;
use plotters::prelude::*;

use super::units::{human, sig};
use crate::engine::params::format_size;
use crate::stats::Verdict;

const WIDTH: u32 = 820;
const PLOT_HEIGHT: u32 = 380;
const LEGEND_ROW: u32 = 20;
const FONT: &str = "sans-serif";

/// Distinguishable colours (the "tab10" palette).
const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];
const GREY: RGBColor = RGBColor(110, 110, 110);
const LIGHT: RGBColor = RGBColor(225, 225, 225);

fn colour(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// One axis: what it shows, in which base unit, and whether it is logarithmic.
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    pub label: String,
    /// Base unit of the values ("B", "s", "B/s", "%", "count", …).
    pub unit: String,
    pub log: bool,
}

impl Axis {
    pub fn new(label: impl Into<String>, unit: impl Into<String>) -> Self {
        Axis {
            label: label.into(),
            unit: unit.into(),
            log: false,
        }
    }

    pub fn log(mut self, log: bool) -> Self {
        self.log = log;
        self
    }
}

/// One curve. `ci` is empty or holds a (low, high) y interval per point,
/// drawn as an error bar.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Line {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    pub ci: Vec<(f64, f64)>,
    pub dashed: bool,
}

/// x/y curves, with optional labelled reference lines.
#[derive(Debug, Clone, PartialEq)]
pub struct LineChart {
    pub title: String,
    pub x: Axis,
    pub y: Axis,
    pub lines: Vec<Line>,
    /// Vertical reference lines (x in base units, label), e.g. cache sizes.
    pub vlines: Vec<(f64, String)>,
    /// Horizontal reference lines (y in base units, label), e.g. a threshold.
    pub hlines: Vec<(f64, String)>,
}

/// One bar: value with an optional (low, high) whisker.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bar {
    pub value: f64,
    pub ci: Option<(f64, f64)>,
}

/// Bars of one colour, one per category (None: no bar there).
#[derive(Debug, Clone, PartialEq)]
pub struct BarGroup {
    pub name: String,
    pub bars: Vec<Option<Bar>>,
}

/// Bars per category, grouped side by side when there are several groups.
#[derive(Debug, Clone, PartialEq)]
pub struct BarChart {
    pub title: String,
    pub x_label: String,
    pub categories: Vec<String>,
    pub y: Axis,
    pub groups: Vec<BarGroup>,
}

/// One row of a forest plot: a ratio with its CI.
#[derive(Debug, Clone, PartialEq)]
pub struct ForestRow {
    pub label: String,
    pub ratio: f64,
    pub low: f64,
    pub high: f64,
    pub verdict: Verdict,
}

/// Ratios new/base with CIs, a line at 1 and dashed lines at 1 ± noise.
#[derive(Debug, Clone, PartialEq)]
pub struct ForestPlot {
    pub title: String,
    pub rows: Vec<ForestRow>,
    pub noise: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Chart {
    Line(LineChart),
    Bar(BarChart),
    Forest(ForestPlot),
}

impl Chart {
    pub fn title(&self) -> &str {
        match self {
            Chart::Line(c) => &c.title,
            Chart::Bar(c) => &c.title,
            Chart::Forest(c) => &c.title,
        }
    }

    /// The chart as a standalone SVG document, or why it could not be drawn.
    pub fn render(&self) -> Result<String, String> {
        match self {
            Chart::Line(c) => render_line(c),
            Chart::Bar(c) => render_bars(c),
            Chart::Forest(c) => render_forest(c),
        }
    }
}

/// A linear f64 coordinate with ticks exactly where we want them (plotters'
/// own `with_key_points` loses the value formatter for f64 ranges). Every
/// tick label comes from the chart's label formatter.
#[derive(Debug, Clone)]
struct Ticked {
    lo: f64,
    hi: f64,
    keys: Vec<f64>,
}

impl Ticked {
    fn new(lo: f64, hi: f64, keys: &[f64]) -> Self {
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

fn fail<E: std::fmt::Debug>(e: E) -> String {
    format!("plotting failed: {e:?}")
}

/// How values of a unit are shown on a linear axis: `display = raw * factor`.
#[derive(Debug, Clone, PartialEq)]
struct Scale {
    factor: f64,
    unit: String,
}

fn scale_for(unit: &str, max_abs: f64) -> Scale {
    let s = |factor: f64, unit: &str| Scale {
        factor,
        unit: unit.to_string(),
    };
    const KI: f64 = 1024.0;
    match unit {
        "B/s" if max_abs < KI * KI => s(1.0 / KI, "KiB/s"),
        "B/s" => s(1.0 / (KI * KI), "MiB/s"),
        "B" if max_abs < KI => s(1.0, "B"),
        "B" if max_abs < KI * KI => s(1.0 / KI, "KiB"),
        "B" if max_abs < KI * KI * KI => s(1.0 / (KI * KI), "MiB"),
        "B" => s(1.0 / (KI * KI * KI), "GiB"),
        "s" if max_abs < 1e-6 => s(1e9, "ns"),
        "s" if max_abs < 1e-3 => s(1e6, "µs"),
        "s" if max_abs < 1.0 => s(1e3, "ms"),
        "s" => s(1.0, "s"),
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
fn tick(v: f64) -> String {
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
fn trim_number(s: &str) -> String {
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
fn desc(label: &str, unit: &str) -> String {
    if unit.is_empty() {
        label.to_string()
    } else {
        format!("{label} ({unit})")
    }
}

/// A prepared axis: coordinate transform, range, tick positions and labels.
struct Prepared {
    log: bool,
    factor: f64,
    unit: String,
    lo: f64,
    hi: f64,
    /// Tick positions in coordinate space.
    keys: Vec<f64>,
    desc: String,
}

impl Prepared {
    /// Base-unit value → plotting coordinate.
    fn map(&self, v: f64) -> f64 {
        if self.log {
            v.log10()
        } else {
            v * self.factor
        }
    }

    fn label(&self, c: f64) -> String {
        if self.log {
            let v = 10f64.powf(c);
            if self.unit == "B" {
                format_size(v.round().max(0.0) as u64)
            } else {
                trim_number(&human(v, &self.unit))
            }
        } else {
            tick(c)
        }
    }
}

/// Prepare an axis for the values `vals` (base units, finite). Linear axes
/// start at 0 when `from_zero` and every value is non-negative.
fn prepare(axis: &Axis, vals: &[f64], from_zero: bool) -> Prepared {
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
            desc: format!("{} (log scale)", axis.label),
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
        Prepared {
            log: false,
            factor: sc.factor,
            unit: axis.unit.clone(),
            lo,
            hi,
            keys: linear_keys(lo, hi, 7),
            desc: desc(&axis.label, &sc.unit),
        }
    }
}

/// About `n` "nice" tick positions (1-2-5 steps) between lo and hi.
fn linear_keys(lo: f64, hi: f64, n: usize) -> Vec<f64> {
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
fn log_keys(unit: &str, lo: f64, hi: f64) -> Vec<f64> {
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

/// Height of the legend strip for `n` entries laid out in columns.
fn legend_layout(names: &[String]) -> (u32, usize) {
    if names.len() <= 1 {
        return (0, 1);
    }
    let longest = names.iter().map(|n| n.chars().count()).max().unwrap_or(0);
    let col_w = (longest as u32 * 8 + 44).max(120);
    let cols = ((WIDTH - 40) / col_w).clamp(1, 4) as usize;
    let rows = names.len().div_ceil(cols) as u32;
    (rows * LEGEND_ROW + 10, cols)
}

/// Draw legend entries (colour, dashed, name) in `area`.
fn draw_legend(
    area: &DrawingArea<SVGBackend, Shift>,
    entries: &[(String, RGBColor, bool)],
    cols: usize,
) -> Result<(), String> {
    let col_w = ((WIDTH - 40) as usize / cols) as i32;
    for (i, (name, c, dashed)) in entries.iter().enumerate() {
        let x = 40 + (i % cols) as i32 * col_w;
        let y = 8 + (i / cols) as i32 * LEGEND_ROW as i32;
        let style = ShapeStyle::from(c).stroke_width(2);
        if *dashed {
            area.draw(&PathElement::new(vec![(x, y), (x + 8, y)], style))
                .map_err(fail)?;
            area.draw(&PathElement::new(vec![(x + 13, y), (x + 22, y)], style))
                .map_err(fail)?;
        } else {
            area.draw(&PathElement::new(vec![(x, y), (x + 22, y)], style))
                .map_err(fail)?;
            area.draw(&Circle::new((x + 11, y), 3, c.filled()))
                .map_err(fail)?;
        }
        let max_chars = (col_w as usize / 8).saturating_sub(5).max(8);
        area.draw(&Text::new(
            shorten(name, max_chars),
            (x + 28, y - 6),
            (FONT, 15).into_font().color(&BLACK),
        ))
        .map_err(fail)?;
    }
    Ok(())
}

/// At most `n` characters, with an ellipsis when cut.
pub fn shorten(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(n.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

fn finite(p: &(f64, f64)) -> bool {
    p.0.is_finite() && p.1.is_finite()
}

fn render_line(c: &LineChart) -> Result<String, String> {
    // Points a log axis cannot show are dropped, never drawn at a wrong place.
    let keep = |p: &(f64, f64)| finite(p) && (!c.x.log || p.0 > 0.0) && (!c.y.log || p.1 > 0.0);
    let lines: Vec<(&Line, Vec<usize>)> = c
        .lines
        .iter()
        .map(|l| {
            let idx = (0..l.points.len())
                .filter(|&i| keep(&l.points[i]))
                .collect::<Vec<_>>();
            (l, idx)
        })
        .filter(|(_, idx)| !idx.is_empty())
        .collect();
    if lines.is_empty() {
        return Err("no data points to draw".into());
    }
    let mut xs: Vec<f64> = Vec::new();
    let mut ys: Vec<f64> = Vec::new();
    for (l, idx) in &lines {
        for &i in idx {
            xs.push(l.points[i].0);
            ys.push(l.points[i].1);
            if let Some(&(lo, hi)) = l.ci.get(i) {
                ys.extend([lo, hi]);
            }
        }
    }
    let x = prepare(&c.x, &xs, false);
    ys.extend(c.hlines.iter().map(|h| h.0));
    let y = prepare(&c.y, &ys, true);
    // Reference lines outside the data range are not drawn (they would
    // squash the curves).
    let vlines: Vec<&(f64, String)> = c
        .vlines
        .iter()
        .filter(|(v, _)| v.is_finite() && (!c.x.log || *v > 0.0))
        .filter(|(v, _)| {
            let m = x.map(*v);
            m >= x.lo && m <= x.hi
        })
        .collect();

    let names: Vec<String> = lines.iter().map(|(l, _)| l.name.clone()).collect();
    let (legend_h, cols) = legend_layout(&names);
    let mut svg = String::new();
    {
        let root =
            SVGBackend::with_string(&mut svg, (WIDTH, PLOT_HEIGHT + legend_h)).into_drawing_area();
        root.fill(&WHITE).map_err(fail)?;
        let (plot, legend) = root.split_vertically(PLOT_HEIGHT);
        let mut chart = ChartBuilder::on(&plot)
            .caption(&c.title, (FONT, 20))
            .margin(12)
            .x_label_area_size(52)
            .y_label_area_size(84)
            .build_cartesian_2d(
                Ticked::new(x.lo, x.hi, &x.keys),
                Ticked::new(y.lo, y.hi, &y.keys),
            )
            .map_err(fail)?;
        let xf = |v: &f64| x.label(*v);
        let yf = |v: &f64| y.label(*v);
        {
            let mut mesh = chart.configure_mesh();
            mesh.x_desc(x.desc.as_str())
                .y_desc(y.desc.as_str())
                .x_label_formatter(&xf)
                .y_label_formatter(&yf)
                .label_style((FONT, 15))
                .axis_desc_style((FONT, 16))
                .light_line_style(LIGHT.mix(0.5))
                .bold_line_style(LIGHT)
                .x_labels(x.keys.len())
                .y_labels(y.keys.len());
            mesh.draw().map_err(fail)?;
        }
        for (v, label) in &vlines {
            let m = x.map(*v);
            chart
                .draw_series(DashedLineSeries::new(
                    vec![(m, y.lo), (m, y.hi)],
                    4,
                    4,
                    GREY.stroke_width(1),
                ))
                .map_err(fail)?;
            chart
                .draw_series(std::iter::once(Text::new(
                    format!(" {label}"),
                    (m, y.hi),
                    (FONT, 14).into_font().color(&GREY),
                )))
                .map_err(fail)?;
        }
        for (v, label) in &c.hlines {
            if !v.is_finite() {
                continue;
            }
            let m = y.map(*v);
            chart
                .draw_series(DashedLineSeries::new(
                    vec![(x.lo, m), (x.hi, m)],
                    6,
                    4,
                    RED.stroke_width(1),
                ))
                .map_err(fail)?;
            // Text hangs below its anchor: lift it above the line.
            let above = (m + (y.hi - y.lo) * 0.065).min(y.hi);
            chart
                .draw_series(std::iter::once(Text::new(
                    label.clone(),
                    (x.lo + (x.hi - x.lo) * 0.01, above),
                    (FONT, 14).into_font().color(&RED),
                )))
                .map_err(fail)?;
        }
        let mut legend_entries = Vec::new();
        for (i, (l, idx)) in lines.iter().enumerate() {
            let col = colour(i);
            let mut pts: Vec<(f64, f64)> = idx
                .iter()
                .map(|&i| (x.map(l.points[i].0), y.map(l.points[i].1)))
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            let style = col.stroke_width(2);
            if l.dashed {
                chart
                    .draw_series(DashedLineSeries::new(pts.clone(), 8, 5, style))
                    .map_err(fail)?;
            } else {
                chart
                    .draw_series(LineSeries::new(pts.clone(), style))
                    .map_err(fail)?;
                if pts.len() <= 60 {
                    chart
                        .draw_series(PointSeries::of_element(
                            pts.clone(),
                            3,
                            col.filled(),
                            &|c, s, st| Circle::new(c, s, st),
                        ))
                        .map_err(fail)?;
                }
            }
            for &i in idx {
                let Some(&(lo, hi)) = l.ci.get(i) else {
                    continue;
                };
                if !(lo.is_finite() && hi.is_finite()) || (c.y.log && lo <= 0.0) {
                    continue;
                }
                let px = x.map(l.points[i].0);
                let (ylo, yhi) = (y.map(lo), y.map(hi));
                let w = (x.hi - x.lo) * 0.006;
                let st = col.stroke_width(1);
                for seg in [
                    vec![(px, ylo), (px, yhi)],
                    vec![(px - w, ylo), (px + w, ylo)],
                    vec![(px - w, yhi), (px + w, yhi)],
                ] {
                    chart
                        .draw_series(std::iter::once(PathElement::new(seg, st)))
                        .map_err(fail)?;
                }
            }
            legend_entries.push((l.name.clone(), col, l.dashed));
        }
        if legend_h > 0 {
            draw_legend(&legend, &legend_entries, cols)?;
        }
        root.present().map_err(fail)?;
    }
    Ok(svg)
}

fn render_bars(c: &BarChart) -> Result<String, String> {
    let n = c.categories.len();
    if n == 0 || c.groups.is_empty() {
        return Err("no bars to draw".into());
    }
    let mut ys = vec![0.0];
    for g in &c.groups {
        for b in g.bars.iter().flatten() {
            ys.push(b.value);
            if let Some((lo, hi)) = b.ci {
                ys.extend([lo, hi]);
            }
        }
    }
    let y = prepare(&c.y, &ys, true);
    let names: Vec<String> = c.groups.iter().map(|g| g.name.clone()).collect();
    let (legend_h, cols) = legend_layout(&names);
    let plot_w = WIDTH as usize - 100;
    let max_chars = (plot_w / n / 8).clamp(3, 30);
    let cats: Vec<String> = c.categories.iter().map(|s| shorten(s, max_chars)).collect();
    let mut svg = String::new();
    {
        let root =
            SVGBackend::with_string(&mut svg, (WIDTH, PLOT_HEIGHT + legend_h)).into_drawing_area();
        root.fill(&WHITE).map_err(fail)?;
        let (plot, legend) = root.split_vertically(PLOT_HEIGHT);
        let keys: Vec<f64> = (0..n).map(|i| i as f64).collect();
        let mut chart = ChartBuilder::on(&plot)
            .caption(&c.title, (FONT, 20))
            .margin(12)
            .x_label_area_size(52)
            .y_label_area_size(84)
            .build_cartesian_2d(
                Ticked::new(-0.5, n as f64 - 0.5, &keys),
                Ticked::new(y.lo, y.hi, &y.keys),
            )
            .map_err(fail)?;
        let xf = |v: &f64| {
            let i = v.round();
            if (v - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < n {
                cats[i as usize].clone()
            } else {
                String::new()
            }
        };
        let yf = |v: &f64| y.label(*v);
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_desc(c.x_label.as_str())
            .y_desc(y.desc.as_str())
            .x_label_formatter(&xf)
            .y_label_formatter(&yf)
            .x_labels(n)
            .y_labels(y.keys.len())
            .label_style((FONT, 15))
            .axis_desc_style((FONT, 16))
            .light_line_style(LIGHT.mix(0.5))
            .bold_line_style(LIGHT)
            .draw()
            .map_err(fail)?;
        let k = c.groups.len() as f64;
        let slot = 0.8 / k;
        let mut legend_entries = Vec::new();
        for (gi, g) in c.groups.iter().enumerate() {
            let col = colour(gi);
            for (ci, b) in g.bars.iter().enumerate() {
                let Some(b) = b else { continue };
                if !b.value.is_finite() {
                    continue;
                }
                let x0 = ci as f64 - 0.4 + gi as f64 * slot + slot * 0.08;
                let x1 = x0 + slot * 0.84;
                let base = if y.lo > 0.0 { y.lo } else { 0.0 };
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        [(x0, base), (x1, y.map(b.value))],
                        col.mix(0.85).filled(),
                    )))
                    .map_err(fail)?;
                if let Some((lo, hi)) = b.ci {
                    if lo.is_finite() && hi.is_finite() {
                        let xm = (x0 + x1) / 2.0;
                        let w = (x1 - x0) * 0.25;
                        let (ylo, yhi) = (y.map(lo), y.map(hi));
                        for seg in [
                            vec![(xm, ylo), (xm, yhi)],
                            vec![(xm - w, ylo), (xm + w, ylo)],
                            vec![(xm - w, yhi), (xm + w, yhi)],
                        ] {
                            chart
                                .draw_series(std::iter::once(PathElement::new(
                                    seg,
                                    BLACK.stroke_width(1),
                                )))
                                .map_err(fail)?;
                        }
                    }
                }
            }
            legend_entries.push((g.name.clone(), col, false));
        }
        if legend_h > 0 {
            draw_legend(&legend, &legend_entries, cols)?;
        }
        root.present().map_err(fail)?;
    }
    Ok(svg)
}

fn verdict_colour(v: Verdict) -> RGBColor {
    match v {
        Verdict::Improved => RGBColor(30, 140, 60),
        Verdict::Regressed => RGBColor(200, 30, 30),
        Verdict::NoChange => RGBColor(90, 90, 90),
        Verdict::Inconclusive => RGBColor(210, 130, 0),
    }
}

fn render_forest(c: &ForestPlot) -> Result<String, String> {
    let rows: Vec<&ForestRow> = c
        .rows
        .iter()
        .filter(|r| r.ratio.is_finite() && r.ratio > 0.0)
        .collect();
    if rows.is_empty() {
        return Err("no ratios to draw".into());
    }
    let n = rows.len();
    let mut xs = vec![1.0 - c.noise, 1.0 + c.noise];
    for r in &rows {
        xs.push(r.ratio);
        if r.low.is_finite() && r.low > 0.0 {
            xs.push(r.low);
        }
        if r.high.is_finite() && r.high > 0.0 {
            xs.push(r.high);
        }
    }
    let (min, max) = xs
        .iter()
        .fold((f64::INFINITY, 0f64), |(a, b), &v| (a.min(v), b.max(v)));
    let log = min > 0.0 && max / min > 4.0;
    let x = prepare(&Axis::new("new / base", "ratio").log(log), &xs, false);
    let labels: Vec<String> = rows.iter().map(|r| shorten(&r.label, 60)).collect();
    let longest = labels.iter().map(|l| l.chars().count()).max().unwrap_or(0) as u32;
    let label_w = (longest * 8 + 16).clamp(80, 480);
    let height = 100 + 26 * n as u32;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH.max(label_w + 420), height))
            .into_drawing_area();
        root.fill(&WHITE).map_err(fail)?;
        let keys: Vec<f64> = (0..n).map(|i| i as f64).collect();
        let mut chart = ChartBuilder::on(&root)
            .caption(&c.title, (FONT, 20))
            .margin(12)
            .x_label_area_size(52)
            .y_label_area_size(label_w)
            .build_cartesian_2d(
                Ticked::new(x.lo, x.hi, &x.keys),
                Ticked::new(-0.6, n as f64 - 0.4, &keys),
            )
            .map_err(fail)?;
        // Row i is drawn from the top.
        let row_y = |i: usize| (n - 1 - i) as f64;
        let xf = |v: &f64| {
            if x.log {
                x.label(*v)
            } else {
                format!("{}×", tick(*v))
            }
        };
        let yf = |v: &f64| {
            let i = v.round();
            if (v - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < n {
                labels[n - 1 - i as usize].clone()
            } else {
                String::new()
            }
        };
        {
            let mut mesh = chart.configure_mesh();
            mesh.disable_y_mesh()
                .x_desc(x.desc.as_str())
                .x_label_formatter(&xf)
                .y_label_formatter(&yf)
                .y_labels(n)
                .label_style((FONT, 15))
                .axis_desc_style((FONT, 16))
                .light_line_style(LIGHT.mix(0.5))
                .bold_line_style(LIGHT)
                .x_labels(x.keys.len());
            mesh.draw().map_err(fail)?;
        }
        let (ylo, yhi) = (-0.6, n as f64 - 0.4);
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(x.map(1.0), ylo), (x.map(1.0), yhi)],
                BLACK.stroke_width(1),
            )))
            .map_err(fail)?;
        for v in [1.0 - c.noise, 1.0 + c.noise] {
            if v > 0.0 {
                chart
                    .draw_series(DashedLineSeries::new(
                        vec![(x.map(v), ylo), (x.map(v), yhi)],
                        5,
                        4,
                        GREY.stroke_width(1),
                    ))
                    .map_err(fail)?;
            }
        }
        for (i, r) in rows.iter().enumerate() {
            let col = verdict_colour(r.verdict);
            let yy = row_y(i);
            if r.low.is_finite() && r.high.is_finite() && r.low > 0.0 {
                let (a, b) = (x.map(r.low), x.map(r.high));
                for seg in [
                    vec![(a, yy), (b, yy)],
                    vec![(a, yy - 0.2), (a, yy + 0.2)],
                    vec![(b, yy - 0.2), (b, yy + 0.2)],
                ] {
                    chart
                        .draw_series(std::iter::once(PathElement::new(seg, col.stroke_width(2))))
                        .map_err(fail)?;
                }
            }
            chart
                .draw_series(std::iter::once(Circle::new(
                    (x.map(r.ratio), yy),
                    5,
                    col.filled(),
                )))
                .map_err(fail)?;
        }
        root.present().map_err(fail)?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(s: &str, pat: &str) -> usize {
        s.matches(pat).count()
    }

    #[test]
    fn line_chart_with_log_axis_and_ci() {
        let c = Chart::Line(LineChart {
            title: "read_throughput vs chunk".into(),
            x: Axis::new("chunk", "B").log(true),
            y: Axis::new("read_throughput", "B/s"),
            lines: vec![Line {
                name: "read_throughput".into(),
                points: vec![(4096.0, 1e9), (65536.0, 3e9), (1048576.0, 2.5e9)],
                ci: vec![(0.9e9, 1.1e9), (2.9e9, 3.1e9), (2.4e9, 2.6e9)],
                dashed: false,
            }],
            vlines: vec![(32768.0, "L1".into())],
            hlines: vec![],
        });
        let svg = c.render().unwrap();
        assert!(svg.starts_with("<svg"));
        assert!(svg.contains("MiB/s"), "y axis unit");
        assert!(svg.contains("4 KiB") && svg.contains("1 MiB"), "log ticks");
        assert!(svg.contains(">\nL1\n") || svg.contains("L1"));
        assert!(count(&svg, "<circle") >= 3);
        assert!(count(&svg, "<polyline") + count(&svg, "<path") >= 5);
    }

    #[test]
    fn bars_forest_and_degenerate_input() {
        let bars = Chart::Bar(BarChart {
            title: "t".into(),
            x_label: "mode".into(),
            categories: vec!["buffered".into(), "direct".into()],
            y: Axis::new("write", "B/s"),
            groups: vec![BarGroup {
                name: "w".into(),
                bars: vec![
                    Some(Bar {
                        value: 1e8,
                        ci: Some((0.9e8, 1.1e8)),
                    }),
                    None,
                ],
            }],
        });
        let svg = bars.render().unwrap();
        assert!(svg.contains("buffered") && svg.contains("<rect"));
        let forest = Chart::Forest(ForestPlot {
            title: "f".into(),
            rows: vec![ForestRow {
                label: "io.x <a> & b".into(),
                ratio: 0.5,
                low: 0.45,
                high: 0.55,
                verdict: Verdict::Regressed,
            }],
            noise: 0.02,
        });
        let svg = forest.render().unwrap();
        assert!(svg.contains("&lt;a&gt; &amp; b"), "text is escaped");
        let empty = Chart::Line(LineChart {
            title: "e".into(),
            x: Axis::new("x", "B").log(true),
            y: Axis::new("y", "s"),
            lines: vec![Line {
                name: "n".into(),
                points: vec![(0.0, 1.0), (f64::NAN, 2.0)],
                ..Default::default()
            }],
            vlines: vec![],
            hlines: vec![],
        });
        assert!(empty.render().is_err());
        // A single point still draws.
        let one = Chart::Line(LineChart {
            title: "one".into(),
            x: Axis::new("t", "s"),
            y: Axis::new("y", "%"),
            lines: vec![Line {
                name: "n".into(),
                points: vec![(1.0, 0.0)],
                ..Default::default()
            }],
            vlines: vec![],
            hlines: vec![(5.0, "limit".into())],
        });
        assert!(one.render().unwrap().contains("limit"));
    }

    #[test]
    fn tick_labels_drop_trailing_zeros() {
        assert_eq!(trim_number("10.0 µs"), "10 µs");
        assert_eq!(trim_number("1.50 MiB/s"), "1.5 MiB/s");
        assert_eq!(trim_number("100 ns"), "100 ns");
        assert_eq!(tick(2.50), "2.5");
        assert_eq!(tick(3000.0), "3000");
    }

    #[test]
    fn log_keys_are_powers_of_two_for_bytes() {
        let k = log_keys("B", 4096f64.log10() - 0.1, 1048576f64.log10() + 0.1);
        let v: Vec<u64> = k.iter().map(|k| 10f64.powf(*k).round() as u64).collect();
        assert_eq!(v.first(), Some(&4096));
        assert_eq!(v.last(), Some(&1048576));
        assert!(v.len() <= 9);
    }
}
