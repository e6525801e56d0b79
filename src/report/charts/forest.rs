//! The forest plot of a comparison: one ratio and its CI per row.

use super::*;

pub(super) fn verdict_colour(v: Verdict) -> RGBColor {
    match v {
        Verdict::Improved => RGBColor(30, 140, 60),
        Verdict::Regressed => RGBColor(200, 30, 30),
        Verdict::NoChange => RGBColor(90, 90, 90),
        Verdict::Inconclusive => RGBColor(210, 130, 0),
    }
}

pub(super) fn render_forest(c: &ForestPlot) -> Result<String, String> {
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
    // Direction: one arrow on the axis when every row agrees, else one per row.
    let dirs: Vec<Option<Better>> = rows.iter().map(|r| r.better).collect();
    let same = dirs.windows(2).all(|w| w[0] == w[1]);
    let direction = match (same, dirs.first().copied().flatten()) {
        (true, Some(Better::Higher)) => "← worse | better →",
        (true, Some(Better::Lower)) => "← better | worse →",
        (true, None) => "",
        (false, _) => "better: see each row",
    };
    let mut x = prepare(&Axis::new("new / base", "ratio").log(log), &xs, false);
    if !direction.is_empty() {
        x.desc = format!("{}   {direction}", x.desc);
    }
    // Row labels are drawn whole: the label area grows to the longest.
    let labels: Vec<String> = rows.iter().map(|r| shorten(&r.label, 90)).collect();
    let longest = labels.iter().map(|l| text_width(l, 15)).max().unwrap_or(0);
    let label_w = (longest + 20).max(80) + 30;
    let tag_w = if same { 0 } else { 90 };
    let width = WIDTH.max(label_w + 420 + tag_w);
    let height = 100 + 26 * n as u32;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (width, height)).into_drawing_area();
        root.fill(&WHITE).map_err(fail)?;
        let keys: Vec<f64> = (0..n).map(|i| i as f64).collect();
        let mut chart = ChartBuilder::on(&root)
            .caption(&c.title, (FONT, caption_size(&c.title, width)))
            .margin(12)
            // The per-row "better" tags go in a right margin: a right label
            // area repeated the row labels there, under the tags and clipped.
            .margin_right(12 + tag_w)
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
                .y_desc("result · metric")
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
            if !same {
                let tag = match r.better {
                    Some(Better::Higher) => "better →",
                    Some(Better::Lower) => "← better",
                    None => "",
                };
                let (px, py) = chart.backend_coord(&(x.hi, yy));
                root.draw(&Text::new(
                    tag,
                    (px + 10, py - 8),
                    (FONT, 14).into_font().color(&GREY),
                ))
                .map_err(fail)?;
            }
        }
        root.present().map_err(fail)?;
    }
    Ok(tag_axes(svg, &x.desc, "result · metric"))
}
