//! Flame graph SVG from folded stacks, rendered by inferno.

use crate::model::profile::FoldedStack;

pub(crate) fn svg(folded: &[FoldedStack], title: &str) -> Result<String, String> {
    if folded.iter().all(|f| f.samples == 0) {
        return Err("no samples to draw a flame graph from".to_string());
    }
    let lines: Vec<String> = folded
        .iter()
        .filter(|f| f.samples > 0)
        .map(|f| format!("{} {}", f.stack, f.samples))
        .collect();
    let mut opts = inferno::flamegraph::Options::default();
    opts.title = title.to_string();
    opts.count_name = "samples".to_string();
    // Deterministic colours: the same profile renders to the same SVG.
    opts.deterministic = true;
    // A fixed width: inferno's "fluid" mode has its script remove the
    // width of the page's first <svg>, which then shrinks to the browser's
    // 300 px default inside a report. Labels are fitted here instead, and
    // no script (a report holds several flame graphs, and the script's
    // element ids would clash); frames keep their hover titles.
    opts.image_width = Some(1200);
    opts.no_javascript = true;
    let mut out = Vec::new();
    inferno::flamegraph::from_lines(&mut opts, lines.iter().map(|s| s.as_str()), &mut out)
        .map_err(|e| format!("flame graph: {e}"))?;
    let text = String::from_utf8(out).map_err(|e| format!("flame graph is not UTF-8: {e}"))?;
    // The XML prologue (declaration, DOCTYPE) is not wanted inline in HTML
    // and not needed in an .svg file.
    Ok(match text.find("<svg") {
        Some(i) => text[i..].to_string(),
        None => text,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_named_frames_into_svg() {
        let f = vec![
            FoldedStack {
                stack: "app;main;hot_loop".into(),
                samples: 90,
            },
            FoldedStack {
                stack: "app;main;sys_read".into(),
                samples: 10,
            },
        ];
        let svg = svg(&f, "CPU profile <test>").unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..100.min(svg.len())]);
        assert!(
            svg.contains("width=\"1200\""),
            "a fixed width, not a fluid one"
        );
        assert!(svg.contains("hot_loop"));
        assert!(svg.contains("sys_read"));
        // The title is escaped, not injected.
        assert!(svg.contains("CPU profile &lt;test&gt;"));
    }

    #[test]
    fn empty_input_is_an_error_not_an_empty_picture() {
        assert!(svg(&[], "t").is_err());
    }
}
