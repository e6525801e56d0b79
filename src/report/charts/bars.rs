//! Bar charts with CI whiskers (grouped).

use super::*;

pub(super) fn render_bars(c: &BarChart) -> Result<String, String> {
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
    // Category labels are never cut: when they do not fit side by side,
    // every k-th is shown in full (a label longer than the plot is the
    // only one shortened).
    let plot_w = WIDTH - 120;
    let cats: Vec<String> = c.categories.iter().map(|s| shorten(s, 80)).collect();
    let widest = cats
        .iter()
        .map(|s| text_width(s, 15) + 12)
        .max()
        .unwrap_or(0);
    let every = (widest as usize * n).div_ceil(plot_w as usize).max(1);
    let mut svg = String::new();
    {
        let root =
            SVGBackend::with_string(&mut svg, (WIDTH, PLOT_HEIGHT + legend_h)).into_drawing_area();
        root.fill(&WHITE).map_err(fail)?;
        let (plot, legend) = root.split_vertically(PLOT_HEIGHT);
        let keys: Vec<f64> = (0..n).map(|i| i as f64).collect();
        let mut chart = chart_on(
            &plot,
            &c.title,
            Ticked::new(-0.5, n as f64 - 0.5, &keys),
            Ticked::new(y.lo, y.hi, &y.keys),
            y_area(&y),
            0,
        )?;
        let xf = |v: &f64| {
            let i = v.round();
            if (v - i).abs() < 1e-6
                && i >= 0.0
                && (i as usize) < n
                && (i as usize).is_multiple_of(every)
            {
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
            legend_entries.push((g.name.clone(), col, Mark::Bar));
        }
        if legend_h > 0 {
            draw_legend(&legend, &legend_entries, cols)?;
        }
        root.present().map_err(fail)?;
    }
    Ok(tag_axes(svg, &c.x_label, &y.desc))
}
