//! Flame graph SVG from folded stacks, rendered by inferno.

use crate::model::profile::FoldedStack;

pub fn svg(folded: &[FoldedStack], title: &str) -> Result<String, String> {
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
    let mut out = Vec::new();
    inferno::flamegraph::from_lines(&mut opts, lines.iter().map(|s| s.as_str()), &mut out)
        .map_err(|e| format!("flame graph: {e}"))?;
    String::from_utf8(out).map_err(|e| format!("flame graph is not UTF-8: {e}"))
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
        assert!(svg.starts_with("<?xml"), "{}", &svg[..100.min(svg.len())]);
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
