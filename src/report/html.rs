//! The HTML report: one self-contained file. Inline CSS, inline `<svg>`
//! charts, no `<script>`, no fonts, images or styles from anywhere else, so
//! it opens offline, in a mail attachment or an archive years later.

use super::document::{Block, Document, Figure, Table};

/// Escape text for HTML (lives with the charts, which draw SVG text too).
pub(crate) use super::charts::esc;

const CSS: &str = "\
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:0;color:#1d1d1f;background:#fafafa;line-height:1.4}
main{max-width:1100px;margin:0 auto;padding:1.5em 2em 3em;background:#fff}
h1{font-size:1.6em;margin:.2em 0 .4em}
h2{font-size:1.3em;margin:2em 0 .5em;padding-bottom:.2em;border-bottom:2px solid #d0d7de}
h3{font-size:1.05em;margin:1.4em 0 .4em}
nav{font-size:.9em;margin:.5em 0 1em}
nav a{margin-right:1em;color:#0550ae;text-decoration:none;white-space:nowrap;display:inline-block}
table{border-collapse:collapse;margin:.5em 0 1em;font-size:.85em}
th,td{border:1px solid #d0d7de;padding:.25em .55em;text-align:left;vertical-align:top}
th{background:#f0f3f6}
td{overflow-wrap:anywhere}
td.num{text-align:right;font-variant-numeric:tabular-nums;overflow-wrap:normal;white-space:nowrap}
p.facts{font-size:.9em;color:#424a53;margin:.2em 0 .6em}
p.facts span{margin-right:1.4em;display:inline-block}
p.facts b{color:#1d1d1f;font-weight:600;margin-right:.3em}
details{margin:.5em 0 1em}
summary{cursor:pointer;color:#0550ae}
td details{margin:0}
td summary{color:#1d1d1f}
table.facts td:first-child{font-weight:600;white-space:nowrap}
td.pass{background:#dafbe1;color:#116329;font-weight:600}
td.fail{background:#ffebe9;color:#a40e26;font-weight:600}
td.warn{background:#fff8c5;color:#7d4e00;font-weight:600}
figure{margin:1em 0;border:1px solid #e5e7eb;padding:.5em;display:inline-block;max-width:100%;box-sizing:border-box}
figure svg{max-width:100%;height:auto;display:block}
figcaption{font-size:.85em;color:#57606a;margin-top:.3em}
ul.notes{font-size:.9em;color:#424a53}
ul.warnings li{color:#7d4e00}
p.chart-error{color:#a40e26;font-style:italic}
.muted{color:#57606a;font-size:.85em}
";

/// Numbers (with a unit), CIs and percentages are right-aligned: the first
/// word is a number once a sign, `%` or `×` is taken off.
fn numeric(s: &str) -> bool {
    let first = s.split_whitespace().next().unwrap_or("");
    let core = first
        .trim_start_matches(['±', '≥'])
        .trim_end_matches(['%', '×']);
    !core.is_empty() && core.parse::<f64>().is_ok()
}

fn table(t: &Table, class: Option<&str>) -> String {
    let mut s = match class {
        Some(c) => format!("<table class=\"{c}\">\n<thead><tr>"),
        None => "<table>\n<thead><tr>".to_string(),
    };
    for h in &t.header {
        s.push_str(&format!("<th>{}</th>", esc(h)));
    }
    s.push_str("</tr></thead>\n<tbody>\n");
    for r in &t.rows {
        s.push_str("<tr>");
        for c in r {
            let class = match c.class {
                Some(k) => Some(k),
                None if numeric(&c.text) => Some("num"),
                None => None,
            };
            let text = if c.class == Some("fold") {
                cell_text(&c.text)
            } else {
                esc(&c.text)
            };
            let class = class.filter(|k| *k != "fold");
            match class {
                Some(k) => s.push_str(&format!("<td class=\"{k}\">{text}</td>")),
                None => s.push_str(&format!("<td>{text}</td>")),
            }
        }
        s.push_str("</tr>\n");
    }
    s.push_str("</tbody>\n</table>\n");
    s
}

/// A cell marked "fold" (a kernel command line): when very long, folded
/// behind its beginning.
fn cell_text(t: &str) -> String {
    const LONG: usize = 120;
    if t.chars().count() <= LONG {
        return esc(t);
    }
    let head: String = t.chars().take(80).collect();
    format!(
        "<details><summary>{}…</summary>{}</details>",
        esc(&head),
        esc(t)
    )
}

fn blocks(bs: &[Block]) -> String {
    let mut s = String::new();
    for b in bs {
        match b {
            Block::Heading(h) => s.push_str(&format!("<h3>{}</h3>\n", esc(h))),
            Block::Text(t) => s.push_str(&format!("<p>{}</p>\n", esc(t))),
            Block::Table(t) => s.push_str(&table(t, None)),
            Block::Figure(f) => s.push_str(&figure(f)),
            Block::Notes(n) => s.push_str(&list(n, "notes")),
            Block::Warnings(w) => s.push_str(&list(w, "warnings")),
            Block::Collapsed(summary, inner) => s.push_str(&format!(
                "<details>\n<summary>{}</summary>\n{}</details>\n",
                esc(summary),
                blocks(inner)
            )),
        }
    }
    s
}

/// An SVG document from plotters as inline HTML: the XML namespace is
/// implied in HTML, so the attribute (a URL) is dropped; a title makes the
/// chart accessible.
fn inline_svg(svg: &str, title: &str) -> String {
    let body = svg
        .replacen(" xmlns=\"http://www.w3.org/2000/svg\"", "", 1)
        .replacen("<svg ", "<svg role=\"img\" ", 1);
    match body.find('>') {
        Some(i) => format!(
            "{}\n<title>{}</title>{}",
            &body[..=i],
            esc(title),
            &body[i + 1..]
        ),
        None => body,
    }
}

fn figure(f: &Figure) -> String {
    match &f.svg {
        Ok(svg) => format!(
            "<figure>\n{}\n<figcaption>{}</figcaption>\n</figure>\n",
            inline_svg(svg, &f.title),
            esc(&f.title)
        ),
        Err(e) => format!(
            "<p class=\"chart-error\">Chart “{}” not drawn: {}</p>\n",
            esc(&f.title),
            esc(e)
        ),
    }
}

fn list(items: &[String], class: &str) -> String {
    let mut s = format!("<ul class=\"{class}\">\n");
    for i in items {
        s.push_str(&format!("<li>{}</li>\n", esc(i)));
    }
    s.push_str("</ul>\n");
    s
}

pub(crate) fn render(doc: &Document) -> String {
    let mut s =
        String::from("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    s.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    s.push_str("<meta name=\"generator\" content=\"tunelab report\">\n");
    s.push_str(&format!("<title>{}</title>\n", esc(&doc.title)));
    s.push_str(&format!(
        "<style>\n{CSS}</style>\n</head>\n<body>\n<main>\n"
    ));
    s.push_str(&format!("<h1>{}</h1>\n", esc(&doc.title)));
    // Run facts on a few lines, not a table: the answer comes next.
    s.push_str("<p class=\"facts\">");
    for (k, v) in &doc.facts {
        s.push_str(&format!("<span><b>{}</b>{}</span> ", esc(k), esc(v)));
    }
    s.push_str("</p>\n");
    s.push_str("<nav>");
    for sec in &doc.sections {
        s.push_str(&format!("<a href=\"#{}\">{}</a>", sec.id, esc(&sec.title)));
    }
    s.push_str("</nav>\n");
    for sec in &doc.sections {
        s.push_str(&format!(
            "<section id=\"{}\">\n<h2>{}</h2>\n",
            sec.id,
            esc(&sec.title)
        ));
        s.push_str(&blocks(&sec.blocks));
        s.push_str("</section>\n");
    }
    s.push_str(
        "<p class=\"muted\">Generated by tunelab. Values are medians with bootstrap 95% \
         confidence intervals; throughput in MiB/s (2^20 bytes per second).</p>\n",
    );
    s.push_str("</main>\n</body>\n</html>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_inlines() {
        assert_eq!(
            esc("<a href='x'>&\"</a>"),
            "&lt;a href=&#39;x&#39;&gt;&amp;&quot;&lt;/a&gt;"
        );
        let svg = "<svg width=\"10\" height=\"10\" viewBox=\"0 0 10 10\" xmlns=\"http://www.w3.org/2000/svg\">\n<rect/></svg>";
        let i = inline_svg(svg, "a<b");
        assert!(!i.contains("http"));
        assert!(i.contains("<title>a&lt;b</title>"));
        assert!(i.starts_with("<svg role=\"img\" width"));
        assert!(numeric("7101 MiB/s") && numeric("±1.3%") && numeric("0.903×") && numeric("3"));
        assert!(
            !numeric("20261121-003512-56c0")
                && !numeric("0.1.0")
                && !numeric("2026-11-21T00:35:12Z")
        );
    }
}
