//! SVG charts for `tunelab report`, drawn with plotters' SVG backend.
//!
//! The charts are plain data (line charts, bar charts, a forest plot) that
//! know nothing about experiments: `report::document` decides what to draw.
//! Values arrive in base units (B, s, B/s, …) and are shown in human units
//! (MiB/s, µs, KiB…): linear axes are scaled and say their unit, log axes
//! label every tick with `units::human`. Text stays text (`<text>` elements,
//! generic `sans-serif`): no font files, no scripts, nothing from the network.
//! Legends are drawn in a strip below the plot so they never hide data.
//! Drawing is feature "charts" (plotters); without it (the static board
//! build) the charts are still chosen but `render` says they were left out.
#![cfg_attr(not(feature = "charts"), allow(dead_code, unused_imports))]

use std::ops::Range;

#[cfg(feature = "charts")]
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
#[cfg(feature = "charts")]
use plotters::coord::Shift;
#[cfg(feature = "charts")]
use plotters::prelude::*;

use crate::units::{human, sig};

#[cfg(feature = "charts")]
mod axes;
#[cfg(feature = "charts")]
mod bars;
#[cfg(feature = "charts")]
mod forest;
pub(crate) mod latency_plot;
#[cfg(feature = "charts")]
mod line;

use crate::model::Better;
use crate::stats::Verdict;
use crate::units::format_size;
#[cfg(feature = "charts")]
use axes::*;
#[cfg(feature = "charts")]
use bars::render_bars;
#[cfg(feature = "charts")]
use forest::render_forest;
#[cfg(feature = "charts")]
use line::render_line;

const WIDTH: u32 = 820;
const PLOT_HEIGHT: u32 = 380;
const LEGEND_ROW: u32 = 20;
const FONT: &str = "sans-serif";

#[cfg(feature = "charts")]
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
#[cfg(feature = "charts")]
const GREY: RGBColor = RGBColor(110, 110, 110);
#[cfg(feature = "charts")]
const LIGHT: RGBColor = RGBColor(225, 225, 225);

#[cfg(feature = "charts")]
fn colour(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// Why a chart is missing from a build without feature "charts".
#[cfg(not(feature = "charts"))]
pub(crate) const NO_CHARTS: &str =
    "this tunelab was built without charts (feature \"charts\"; the \
    static board build leaves them out): import the run on a host (`tunelab import`) and run \
    `tunelab report` there for the charts";

/// One axis: what it shows, in which base unit, and whether it is logarithmic.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Axis {
    pub(crate) label: String,
    /// Base unit of the values ("B", "s", "B/s", "%", "count", …).
    pub(crate) unit: String,
    pub(crate) log: bool,
}

impl Axis {
    pub(crate) fn new(label: impl Into<String>, unit: impl Into<String>) -> Self {
        Axis {
            label: label.into(),
            unit: unit.into(),
            log: false,
        }
    }

    pub(crate) fn log(mut self, log: bool) -> Self {
        self.log = log;
        self
    }
}

/// One curve. `ci` is empty or holds a (low, high) y interval per point,
/// drawn as an error bar.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Line {
    pub(crate) name: String,
    pub(crate) points: Vec<(f64, f64)>,
    pub(crate) ci: Vec<(f64, f64)>,
    pub(crate) dashed: bool,
}

/// x/y curves, with optional labelled reference lines.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LineChart {
    pub(crate) title: String,
    pub(crate) x: Axis,
    pub(crate) y: Axis,
    pub(crate) lines: Vec<Line>,
    /// Vertical reference lines (x in base units, label), e.g. cache sizes.
    pub(crate) vlines: Vec<(f64, String)>,
    /// Horizontal reference lines (y in base units, label), e.g. a threshold.
    pub(crate) hlines: Vec<(f64, String)>,
}

/// One bar: value with an optional (low, high) whisker.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Bar {
    pub(crate) value: f64,
    pub(crate) ci: Option<(f64, f64)>,
}

/// Bars of one colour, one per category (None: no bar there).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct BarGroup {
    pub(crate) name: String,
    pub(crate) bars: Vec<Option<Bar>>,
}

/// Bars per category, grouped side by side when there are several groups.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct BarChart {
    pub(crate) title: String,
    pub(crate) x_label: String,
    pub(crate) categories: Vec<String>,
    pub(crate) y: Axis,
    pub(crate) groups: Vec<BarGroup>,
}

/// One row of a forest plot: a ratio with its CI.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ForestRow {
    pub(crate) label: String,
    pub(crate) ratio: f64,
    pub(crate) low: f64,
    pub(crate) high: f64,
    pub(crate) verdict: Verdict,
    /// Which way is better for the metric: drawn as "better →" or
    /// "← better" on the row, so 1.3× on a latency does not read as a gain.
    pub(crate) better: Option<Better>,
}

/// Ratios new/base with CIs, a line at 1 and dashed lines at 1 ± noise.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ForestPlot {
    pub(crate) title: String,
    pub(crate) rows: Vec<ForestRow>,
    pub(crate) noise: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Chart {
    Line(LineChart),
    Bar(BarChart),
    Forest(ForestPlot),
}

impl Chart {
    pub(crate) fn title(&self) -> &str {
        match self {
            Chart::Line(c) => &c.title,
            Chart::Bar(c) => &c.title,
            Chart::Forest(c) => &c.title,
        }
    }

    /// Why the chart would say nothing its table does not: one point, or
    /// every value the same (an axis of one value has no scale: all-zero
    /// values drew ticks "1.00e-9, 0, 0"). None for a chart worth drawing.
    pub(crate) fn degenerate(&self) -> Option<&'static str> {
        let (points, ys): (usize, Vec<f64>) = match self {
            Chart::Line(c) => {
                let mut xs: Vec<f64> = c
                    .lines
                    .iter()
                    .flat_map(|l| l.points.iter().map(|p| p.0))
                    .collect();
                xs.sort_by(f64::total_cmp);
                xs.dedup();
                let ys = c
                    .lines
                    .iter()
                    .flat_map(|l| l.points.iter().map(|p| p.1))
                    .collect();
                (xs.len(), ys)
            }
            Chart::Bar(c) => {
                let ys: Vec<f64> = c
                    .groups
                    .iter()
                    .flat_map(|g| g.bars.iter().flatten().map(|b| b.value))
                    .collect();
                (ys.len(), ys)
            }
            Chart::Forest(c) => (c.rows.len(), Vec::new()),
        };
        if points < 2 {
            return Some("one point");
        }
        let first = ys.first().copied();
        if first.is_some_and(|f| ys.iter().all(|&y| y == f)) {
            return Some("every value is the same");
        }
        None
    }

    /// The chart as a standalone SVG document, or why it could not be drawn.
    #[cfg(feature = "charts")]
    pub(crate) fn render(&self) -> Result<String, String> {
        match self {
            Chart::Line(c) => render_line(c),
            Chart::Bar(c) => render_bars(c),
            Chart::Forest(c) => render_forest(c),
        }
    }

    #[cfg(not(feature = "charts"))]
    pub(crate) fn render(&self) -> Result<String, String> {
        Err(NO_CHARTS.to_string())
    }
}

/// A legend name as drawn: whole unless wider than one full-width column.
fn legend_name(name: &str) -> String {
    let room = WIDTH - 40 - 32;
    let mut n = name.chars().count();
    let mut s = name.to_string();
    while n > 8 && text_width(&s, 15) > room {
        n -= 1;
        s = shorten(name, n);
    }
    s
}

/// Height of the legend strip for `n` entries laid out in columns.
fn legend_layout(names: &[String]) -> (u32, usize) {
    if names.len() <= 1 {
        return (0, 1);
    }
    let longest = names
        .iter()
        .map(|n| text_width(&legend_name(n), 15))
        .max()
        .unwrap_or(0);
    let col_w = (longest + 44).max(120);
    let cols = ((WIDTH - 40) / col_w).clamp(1, 4) as usize;
    let rows = names.len().div_ceil(cols) as u32;
    (rows * LEGEND_ROW + 10, cols)
}

/// How a legend entry (and its data) is drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Mark {
    /// A line with markers at the measured points.
    Line,
    Dashed,
    /// Markers only: the points between were not measured.
    Points,
    Bar,
}

#[cfg(feature = "charts")]
/// Draw legend entries (colour, mark, name) in `area`.
fn draw_legend(
    area: &DrawingArea<SVGBackend, Shift>,
    entries: &[(String, RGBColor, Mark)],
    cols: usize,
) -> Result<(), String> {
    let col_w = ((WIDTH - 40) as usize / cols) as i32;
    for (i, (name, c, mark)) in entries.iter().enumerate() {
        let x = 40 + (i % cols) as i32 * col_w;
        let y = 8 + (i / cols) as i32 * LEGEND_ROW as i32;
        let style = ShapeStyle::from(c).stroke_width(2);
        match mark {
            Mark::Dashed => {
                area.draw(&PathElement::new(vec![(x, y), (x + 8, y)], style))
                    .map_err(fail)?;
                area.draw(&PathElement::new(vec![(x + 13, y), (x + 22, y)], style))
                    .map_err(fail)?;
            }
            Mark::Line => {
                area.draw(&PathElement::new(vec![(x, y), (x + 22, y)], style))
                    .map_err(fail)?;
                area.draw(&Circle::new((x + 11, y), 3, c.filled()))
                    .map_err(fail)?;
            }
            Mark::Points => {
                area.draw(&Circle::new((x + 11, y), 4, c.filled()))
                    .map_err(fail)?;
            }
            Mark::Bar => {
                area.draw(&Rectangle::new(
                    [(x + 4, y - 6), (x + 18, y + 6)],
                    c.filled(),
                ))
                .map_err(fail)?;
            }
        }
        area.draw(&Text::new(
            legend_name(name),
            (x + 28, y - 6),
            (FONT, 15).into_font().color(&BLACK),
        ))
        .map_err(fail)?;
    }
    Ok(())
}

/// At most `n` characters, with an ellipsis when cut.
pub(crate) fn shorten(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(n.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

/// Mark a rendered chart for readers and checks: `class="chart"` and the
/// axis titles as drawn (`data-x-axis`, `data-y-axis`), so a test can find
/// each title among the chart's `<text>` elements.
fn tag_axes(svg: String, x: &str, y: &str) -> String {
    let attr = |s: &str| esc(s);
    svg.replacen(
        "<svg ",
        &format!(
            "<svg class=\"chart\" data-x-axis=\"{}\" data-y-axis=\"{}\" ",
            attr(x),
            attr(y)
        ),
        1,
    )
}

/// Width in pixels of `s` in the 15 px sans-serif of tick labels, on the
/// generous side (wide glyphs, DejaVu Sans): labels are sized from this, so
/// an underestimate would clip them at the picture's edge.
fn text_width(s: &str, px: u32) -> u32 {
    let units: f64 = s
        .chars()
        .map(|c| match c {
            'i' | 'l' | 'j' | '.' | ',' | ':' | ';' | '\'' | '|' | '!' | ' ' => 0.35,
            'f' | 't' | 'r' | '(' | ')' | '[' | ']' | '-' | '/' => 0.45,
            'm' | 'w' | 'M' | 'W' | '%' | '@' | '…' | '×' | '→' | '←' => 0.95,
            c if c.is_ascii_uppercase() => 0.72,
            _ => 0.62,
        })
        .sum();
    (units * px as f64).ceil() as u32
}

/// The plot of a line or bar chart (full width, a legend below it):
/// titled, with room for the tick labels on both axes.
#[cfg(feature = "charts")]
fn chart_on<'a, 'b>(
    plot: &'a DrawingArea<SVGBackend<'b>, Shift>,
    title: &str,
    x: Ticked,
    y: Ticked,
    y_area: u32,
    right: u32,
) -> Result<ChartContext<'a, SVGBackend<'b>, Cartesian2d<Ticked, Ticked>>, String> {
    ChartBuilder::on(plot)
        .caption(title, (FONT, caption_size(title, WIDTH)))
        .margin(12)
        .margin_right(right.max(12))
        .x_label_area_size(52)
        .y_label_area_size(y_area)
        .build_cartesian_2d(x, y)
        .map_err(fail)
}

/// Room right of the plot for the last x tick label, centred on the plot's
/// right edge when the axis ends on a tick ("100 ms" on a log axis was
/// cut at the edge of the picture).
#[cfg(feature = "charts")]
fn x_right(x: &Prepared) -> u32 {
    x.keys
        .iter()
        .filter(|k| (*k - x.hi).abs() <= (x.hi - x.lo).abs() * 0.05)
        .map(|k| text_width(&x.label(*k), 15) / 2 + 4)
        .max()
        .unwrap_or(0)
}

/// Room left of the plot for the widest y tick label, the tick and the
/// rotated axis title beside it (a fixed 84 px put "3000000000" under the
/// title).
#[cfg(feature = "charts")]
fn y_area(y: &Prepared) -> u32 {
    let widest = y
        .keys
        .iter()
        .map(|k| text_width(&y.label(*k), 15))
        .max()
        .unwrap_or(0);
    (widest + 44).max(84)
}

/// The title's font size: 20 px, smaller when the title would not fit.
fn caption_size(title: &str, width: u32) -> u32 {
    let at20 = text_width(title, 20).max(1);
    let room = width.saturating_sub(24);
    if at20 <= room {
        20
    } else {
        (20 * room / at20).max(11)
    }
}

fn finite(p: &(f64, f64)) -> bool {
    p.0.is_finite() && p.1.is_finite()
}

/// Escape text for HTML element content and attribute values.
pub(crate) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(all(test, feature = "charts"))]
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
                better: Some(Better::Lower),
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
