//! Line charts (series, sweeps with CI bands, timelines).
//!
//! A line joins points only where the data is dense enough to be a curve
//! (timelines, a curve the experiment swept finely); a sweep of a few
//! points is drawn as markers with their CI, because a straight segment
//! across a log axis would claim values that were never measured.

use super::*;

/// Points from which a series is drawn as a connected curve.
pub(super) const DENSE: usize = 12;

pub(super) fn render_line(c: &LineChart) -> Result<String, String> {
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
        let mut chart = chart_on(
            &plot,
            &c.title,
            Ticked::new(x.lo, x.hi, &x.keys),
            Ticked::new(y.lo, y.hi, &y.keys),
            y_area(&y),
            x_right(&x),
        )?;
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
            let mark = if l.dashed {
                Mark::Dashed
            } else if pts.len() >= DENSE {
                Mark::Line
            } else {
                Mark::Points
            };
            // The radius of the dots on the points, if any.
            let dots = match mark {
                Mark::Dashed => {
                    chart
                        .draw_series(DashedLineSeries::new(pts.clone(), 8, 5, style))
                        .map_err(fail)?;
                    None
                }
                Mark::Line => {
                    chart
                        .draw_series(LineSeries::new(pts.clone(), style))
                        .map_err(fail)?;
                    (pts.len() <= 60).then_some(3)
                }
                Mark::Points | Mark::Bar => Some(5),
            };
            if let Some(r) = dots {
                chart
                    .draw_series(PointSeries::of_element(
                        pts.clone(),
                        r,
                        col.filled(),
                        &|c, s, st| Circle::new(c, s, st),
                    ))
                    .map_err(fail)?;
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
            legend_entries.push((l.name.clone(), col, mark));
        }
        if legend_h > 0 {
            draw_legend(&legend, &legend_entries, cols)?;
        }
        root.present().map_err(fail)?;
    }
    Ok(tag_axes(svg, &x.desc, &y.desc))
}
