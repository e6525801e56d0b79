//! `tunelab report`: runs made with the real binary become a self-contained
//! HTML report (charts as inline SVG, no scripts, nothing from the network)
//! and a Markdown report with SVG files; headless Chromium renders the HTML.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{is_root, json, skip, stderr, Env};

/// Two runs of a fast sweep (file size is swept: 16× range, so a log axis).
fn two_runs(env: &Env) {
    let t = env.target();
    for label in ["before", "after"] {
        let out = env.run(&[
            "run",
            "io.file-read",
            "-p",
            "size=512k,2M,8M",
            "-p",
            "chunk=64k",
            "--trials",
            "3",
            "--warmup",
            "0",
            "--quiet-check",
            "0",
            "--label",
            label,
            "--target",
            t.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "run failed: {}", stderr(&out));
    }
}

/// The `<svg …>…</svg>` elements of a document.
fn svgs(doc: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = doc;
    while let Some(i) = rest.find("<svg") {
        let tail = &rest[i..];
        let end = tail.find("</svg>").map_or(tail.len(), |e| e + 6);
        out.push(&tail[..end]);
        rest = &tail[end..];
    }
    out
}

fn shapes(svg: &str) -> usize {
    ["<path", "<polyline", "<rect", "<circle", "<line"]
        .iter()
        .map(|t| svg.matches(t).count())
        .sum()
}

#[test]
fn html_report_with_comparison_is_self_contained() {
    let env = Env::new();
    two_runs(&env);
    let html = env.dir.path().join("report.html");
    let out = env.run(&[
        "report",
        "last",
        "--vs",
        "last~1",
        "-o",
        html.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("wrote"), "{}", stderr(&out));
    let doc = std::fs::read_to_string(&html).unwrap();

    for section in [
        "<h2>Comparison</h2>",
        "<h2>System</h2>",
        "<h2>io.file-read</h2>",
        "Environment differences",
        "<h3>Verdicts</h3>",
        "read_throughput",
        "cpu.model",
        "kernel.release",
        "MiB/s",
    ] {
        assert!(doc.contains(section), "report lacks {section}");
    }
    // The comparison comes first after the header.
    let (c, s) = (
        doc.find("<h2>Comparison").unwrap(),
        doc.find("<h2>System").unwrap(),
    );
    assert!(c < s);
    // The labels differ between the runs, so argv is an environment difference.
    assert!(doc.contains("tool.argv"));

    let charts = svgs(&doc);
    // Forest plot + throughput vs size; the monitor adds timelines when it sampled.
    assert!(charts.len() >= 2, "{} charts", charts.len());
    for svg in &charts {
        assert!(svg.ends_with("</svg>"), "unterminated svg");
        assert!(
            shapes(svg) > 10,
            "chart with {} shapes:\n{svg}",
            shapes(svg)
        );
        assert!(svg.contains("<text"), "chart without labels");
    }
    assert!(doc.contains("new / base: ratio of medians"));
    assert!(doc.contains("read_throughput vs size"));
    assert!(
        doc.contains("(log scale)"),
        "16× size range is on a log axis"
    );

    // Self-contained: no scripts, no external resources, nothing fetched.
    let lower = doc.to_ascii_lowercase();
    assert!(!lower.contains("<script"));
    for attr in [
        "src=\"http",
        "href=\"http",
        "src='http",
        "href='http",
        "url(http",
        "@import",
    ] {
        assert!(!lower.contains(attr), "external reference {attr}");
    }
    assert!(!lower.contains("http://") && !lower.contains("https://"));

    // Never overwrite; unknown formats are usage errors.
    let again = env.run(&["report", "last", "-o", html.to_str().unwrap()]);
    assert_eq!(again.status.code(), Some(2), "{}", stderr(&again));
    assert!(stderr(&again).contains("already exists"));
    assert_eq!(std::fs::read_to_string(&html).unwrap(), doc);
    let pdf = env.dir.path().join("report.pdf");
    let bad = env.run(&["report", "last", "-o", pdf.to_str().unwrap()]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(!pdf.exists());
    let missing = env.run(&["report", "nosuchrun", "-o", "/nonexistent/x.html"]);
    assert_eq!(missing.status.code(), Some(2), "{}", stderr(&missing));

    chromium_renders(&html, charts.len());
    if let Some(r) = visual_check(&html, "comparison") {
        assert_eq!(r["charts"].as_u64(), Some(charts.len() as u64));
        assert!(r["verdicts_on_first_screen"].as_u64() > Some(0), "{r}");
    }
}

#[test]
fn markdown_report_writes_svg_assets() {
    let env = Env::new();
    two_runs(&env);
    let md = env.dir.path().join("r.md");
    let out = env.run(&[
        "report",
        "last",
        "--vs",
        "last~1",
        "-o",
        md.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = std::fs::read_to_string(&md).unwrap();
    for s in [
        "## Comparison",
        "## System",
        "## io.file-read",
        "| read_throughput |",
    ] {
        assert!(text.contains(s), "markdown lacks {s}");
    }
    let assets = env.dir.path().join("r-assets");
    let mut files: Vec<String> = common::list(&assets);
    files.sort();
    assert!(files.len() >= 2, "{files:?}");
    for f in &files {
        assert!(text.contains(&format!("](r-assets/{f})")), "{f} not linked");
        let svg = std::fs::read_to_string(assets.join(f)).unwrap();
        assert!(svg.starts_with("<svg") && shapes(&svg) > 10, "{f}");
    }
    // A second report to the same name touches nothing.
    let again = env.run(&["report", "last", "-o", md.to_str().unwrap()]);
    assert_eq!(again.status.code(), Some(2));
    assert_eq!(std::fs::read_to_string(&md).unwrap(), text);
}

fn find_chromium() -> Option<PathBuf> {
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .find_map(|name| {
            std::env::var_os("PATH").and_then(|paths| {
                std::env::split_paths(&paths)
                    .map(|d| d.join(name))
                    .find(|p| p.is_file())
            })
        })
}

/// Install Debian's chromium when missing and we may (root with apt-get).
fn ensure_chromium() -> Result<PathBuf, String> {
    if let Some(p) = find_chromium() {
        return Ok(p);
    }
    if !is_root() {
        return Err("chromium is not installed and we are not root".into());
    }
    if !Path::new("/usr/bin/apt-get").exists() {
        return Err("chromium is not installed and there is no apt-get".into());
    }
    eprintln!("installing chromium with apt-get (this can take a minute)…");
    let install = |args: &[&str]| {
        Command::new("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    };
    if !install(&["install", "-y", "-q", "chromium"]) {
        eprintln!("apt-get install failed; updating the package lists and retrying…");
        if !(install(&["update", "-q"]) && install(&["install", "-y", "-q", "chromium"])) {
            return Err("apt-get install chromium failed".into());
        }
    }
    eprintln!("chromium installed");
    find_chromium().ok_or_else(|| "chromium installed but not found on PATH".into())
}

fn chromium(bin: &Path, profile: &Path, extra: &[String], html: &Path) -> std::process::Output {
    Command::new(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(format!("file://{}", html.display()))
        .output()
        .expect("start chromium")
}

/// Checks a rendered report from inside the page: no text overflows its
/// box, nothing sticks out of the page, every chart's axis titles are
/// drawn, no chart text is clipped at the picture's edge or overlaps
/// another, and where the
/// verdicts sit on a 1400×900 first screen. The result is written into the
/// DOM as JSON for `--dump-dom` to carry out.
const DOM_CHECK: &str = r#"<script>
(function () {
  const bad = [];
  const main = document.querySelector('main') || document.body;
  const mr = main.getBoundingClientRect();
  const name = (e) => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') +
    ' "' + (e.textContent || '').trim().slice(0, 50) + '"';
  for (const e of main.querySelectorAll('td,th,h1,h2,h3,p,li,summary,figcaption,span,a')) {
    if (e.closest('details:not([open])') && !e.closest('summary')) continue;
    if (e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).display !== 'inline') {
      bad.push('text overflows its box: ' + name(e) + ' ' + e.scrollWidth + '>' + e.clientWidth);
    }
    const r = e.getBoundingClientRect();
    if (r.width > 0 && (r.right > mr.right + 1 || r.left < mr.left - 1)) {
      bad.push('outside the page: ' + name(e) + ' right ' + Math.round(r.right) + ' > ' + Math.round(mr.right));
    }
  }
  if (document.documentElement.scrollWidth > window.innerWidth + 1) {
    bad.push('the page scrolls sideways: ' + document.documentElement.scrollWidth);
  }
  let charts = 0;
  for (const svg of main.querySelectorAll('svg')) {
    const sr = svg.getBoundingClientRect();
    const texts = Array.from(svg.querySelectorAll('text'));
    if (!svg.classList.contains('chart')) continue;
    charts++;
    const title = (svg.querySelector('title') || {}).textContent || '?';
    for (const axis of ['x', 'y']) {
      const want = (svg.getAttribute('data-' + axis + '-axis') || '').trim();
      if (!want) { bad.push('chart without a ' + axis + ' axis title: ' + title); continue; }
      if (!texts.some((t) => t.textContent.trim() === want)) {
        bad.push('chart ' + title + ': ' + axis + ' axis title "' + want + '" not drawn');
      }
    }
    // No two labels overlap (a tick under an axis title, a ratio's label
    // over "better →"): every pair of text boxes, 1 px of tolerance.
    const boxes = texts.filter((t) => t.textContent.trim()).map((t) => [t.textContent.trim(), t.getBoundingClientRect()]);
    for (let i = 0; i < boxes.length; i++) {
      for (let j = i + 1; j < boxes.length; j++) {
        const [ta, a] = boxes[i];
        const [tb, b] = boxes[j];
        if (a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1) {
          bad.push('chart ' + title + ': "' + ta.slice(0, 30) + '" overlaps "' + tb.slice(0, 30) + '"');
        }
      }
    }
    for (const t of texts) {
      if (!t.textContent.trim()) continue;
      if (t.textContent.includes('…')) {
        bad.push('chart ' + title + ': label shortened to "' + t.textContent.trim() + '"');
      }
      const r = t.getBoundingClientRect();
      if (r.left < sr.left - 2 || r.right > sr.right + 2 || r.top < sr.top - 2 || r.bottom > sr.bottom + 2) {
        bad.push('chart ' + title + ': text "' + t.textContent.trim().slice(0, 40) + '" is cut at the edge');
      }
    }
  }
  const verdicts = Array.from(document.querySelectorAll('#study td.pass, #study td.fail, #study td.warn, #comparison td.pass, #comparison td.fail, #comparison td.warn, #devices td.pass, #devices td.fail, #devices td.warn'));
  const first = verdicts.length ? verdicts[0].getBoundingClientRect().bottom + window.scrollY : null;
  const onFirstScreen = verdicts.filter((v) => v.getBoundingClientRect().bottom + window.scrollY <= 900).length;
  const pre = document.createElement('pre');
  pre.id = 'tunelab-dom-check';
  pre.textContent = JSON.stringify({ bad: bad, charts: charts, verdicts: verdicts.length,
    first_verdict_bottom: first, verdicts_on_first_screen: onFirstScreen,
    width: window.innerWidth });
  document.body.appendChild(pre);
})();
</script>"#;

/// The DOM check's findings for `html` rendered at 1400×900.
fn dom_check(bin: &Path, html: &Path) -> serde_json::Value {
    let tmp = tempfile::tempdir().unwrap();
    let page = tmp.path().join("checked.html");
    let doc = std::fs::read_to_string(html).unwrap();
    std::fs::write(
        &page,
        doc.replacen("</body>", &format!("{DOM_CHECK}</body>"), 1),
    )
    .unwrap();
    let out = chromium(
        bin,
        &tmp.path().join("profile"),
        &["--window-size=1400,900".into(), "--dump-dom".into()],
        &page,
    );
    let dom = String::from_utf8_lossy(&out.stdout);
    let start = dom
        .find("<pre id=\"tunelab-dom-check\">")
        .unwrap_or_else(|| {
            panic!(
                "no DOM check result; chromium said {}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    let text = &dom[start..];
    let text = &text[text.find('>').unwrap() + 1..text.find("</pre>").unwrap()];
    let text = text
        .replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// Render `html` in Chromium and check its DOM; keeps a 1400×900 first
/// screen and a full-page screenshot in TUNELAB_REPORT_SHOT_DIR as `kind-*.png`.
fn visual_check(html: &Path, kind: &str) -> Option<serde_json::Value> {
    let bin = match ensure_chromium() {
        Ok(b) => b,
        Err(why) => {
            skip(&format!("headless Chromium check: {why}"));
            return None;
        }
    };
    let r = dom_check(&bin, html);
    eprintln!("{kind} report DOM check: {r}");
    if let Ok(dir) = std::env::var("TUNELAB_REPORT_SHOT_DIR") {
        let tmp = tempfile::tempdir().unwrap();
        for (size, suffix) in [("1400,900", "first-screen"), ("1400,6000", "page")] {
            let shot = Path::new(&dir).join(format!("{kind}-{suffix}.png"));
            let _ = std::fs::remove_file(&shot);
            chromium(
                &bin,
                &tmp.path().join(suffix),
                &[
                    format!("--screenshot={}", shot.display()),
                    format!("--window-size={size}"),
                ],
                html,
            );
        }
    }
    let bad = r["bad"].as_array().unwrap();
    assert!(
        bad.is_empty(),
        "{kind} report: {}",
        serde_json::to_string_pretty(bad).unwrap()
    );
    Some(r)
}

fn chromium_renders(html: &Path, svg_count: usize) {
    let bin = match ensure_chromium() {
        Ok(b) => b,
        Err(why) => return skip(&format!("headless Chromium check: {why}")),
    };
    let tmp = tempfile::tempdir().unwrap();
    let shot = tmp.path().join("shot.png");
    let out = chromium(
        &bin,
        &tmp.path().join("profile"),
        &[
            format!("--screenshot={}", shot.display()),
            "--window-size=1280,4000".into(),
        ],
        html,
    );
    let size = std::fs::metadata(&shot).map(|m| m.len()).unwrap_or(0);
    assert!(
        size > 20_000,
        "screenshot {size} bytes; chromium said: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let png = std::fs::read(&shot).unwrap();
    assert_eq!(&png[1..4], b"PNG");
    // Keep a copy for people to look at (target/ is ignored by git).
    if let Ok(dir) = std::env::var("TUNELAB_REPORT_SHOT_DIR") {
        let _ = std::fs::copy(&shot, Path::new(&dir).join("report-shot.png"));
        let _ = std::fs::copy(html, Path::new(&dir).join("report.html"));
    }
    eprintln!("chromium screenshot: {size} bytes");

    let dom = chromium(
        &bin,
        &tmp.path().join("profile2"),
        &["--dump-dom".to_string()],
        html,
    );
    let dom = String::from_utf8_lossy(&dom.stdout);
    assert!(dom.contains("<h2>System</h2>"), "DOM lacks the report");
    let parsed = svgs(&dom);
    assert_eq!(parsed.len(), svg_count, "svg elements lost in parsing");
    for svg in parsed {
        assert!(shapes(svg) > 10, "empty chart after parsing");
    }
}

/// The issue's end-to-end outcome: `study quick` completes with a summary
/// table, stores one run, and its HTML report renders in headless Chromium.
#[test]
fn study_quick_is_stored_once_and_its_report_renders() {
    let env = Env::new();
    let t = env.target();
    let out = env.run(&[
        "study",
        "quick",
        "--quiet-check",
        "0",
        "--target",
        t.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("key issue") && text.contains("verdict") && text.contains("conclusion"),
        "{text}"
    );
    // To a pipe (`study quick 2>&1 | cat`), each key issue's line says the
    // time elapsed and what is left.
    let err = stderr(&out);
    assert!(
        err.lines()
            .any(|l| l.contains("[2/") && l.contains(" elapsed, ") && l.contains(" left")),
        "{err}"
    );
    let runs = json(&env.run(&["runs", "--json"]));
    assert_eq!(
        runs.as_array().unwrap().len(),
        1,
        "one study, one stored run"
    );
    let run = json(&env.run(&["show", "last", "--json"]));
    let issues = run["study"]["issues"].as_array().unwrap();
    assert!(issues.len() >= 10, "{} key issues", issues.len());
    assert!(issues
        .iter()
        .all(|i| ["pass", "fail", "marginal", "info", "unknown"]
            .contains(&i["verdict"].as_str().unwrap())));
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());

    let html = env.dir.path().join("quick.html");
    let out = env.run(&["report", "last", "-o", html.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let doc = std::fs::read_to_string(&html).unwrap();
    assert!(doc.contains("Study summary"));
    let charts = svgs(&doc);
    assert!(charts.len() >= 10, "only {} charts", charts.len());
    for svg in &charts {
        assert!(
            shapes(svg) > 10,
            "an empty chart: {}",
            &svg[..svg.len().min(300)]
        );
    }
    // The answer first: verdicts before the experiments, system facts last.
    let (study, system) = (
        doc.find("<section id=\"study\">").unwrap(),
        doc.find("<section id=\"system\">").unwrap(),
    );
    assert!(study < doc.find("<section id=\"exp-").unwrap() && system > study);
    chromium_renders(&html, charts.len());
    if let Some(r) = visual_check(&html, "study") {
        // The first screen (1400×900) shows the verdicts.
        let first = r["first_verdict_bottom"].as_f64().expect("verdict cells");
        assert!(first <= 900.0, "first verdict ends at {first} px: {r}");
        assert!(r["verdicts_on_first_screen"].as_u64() >= Some(3), "{r}");
    }
}

/// Reports of the other kinds — history, several devices of a fleet and a
/// diagnosis — pass the same DOM check.
#[test]
fn history_fleet_and_diagnosis_reports_pass_the_dom_check() {
    let env = Env::new();
    let t = env.target();
    for i in 0..6 {
        let out = env.run(&[
            "run",
            "io.file-read",
            "-p",
            "size=512k,2M",
            "-p",
            "chunk=64k",
            "--trials",
            "3",
            "--warmup",
            "0",
            "--quiet-check",
            "0",
            "--label",
            &format!("night {i}"),
            "--target",
            t.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "run failed: {}", stderr(&out));
    }
    let dir = env.dir.path();
    let history = dir.join("history.html");
    let out = env.run(&[
        "history",
        "io.file-read",
        "--html",
        history.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));

    // Two boards of a fleet: the last two runs as `remote` would have
    // stored them, under their inventory names.
    let newest = [
        json(&env.run(&["show", "last", "--json"])),
        json(&env.run(&["show", "last~1", "--json"])),
    ];
    for (mut run, host) in newest.into_iter().zip(["stb-1", "stb-2"]) {
        run["id"] = format!("fleet-{host}").into();
        run["environment"]["fleet.host"] = host.into();
        let f = dir.join(format!("{host}.json"));
        std::fs::write(&f, serde_json::to_string(&run).unwrap()).unwrap();
        let out = env.run(&["import", f.to_str().unwrap()]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let runs = String::from_utf8_lossy(&env.run(&["runs"]).stdout).to_string();
    assert!(
        runs.contains("stb-1") && runs.contains("stb-2"),
        "runs shows fleet names: {runs}"
    );
    let show = String::from_utf8_lossy(&env.run(&["show", "fleet-stb-1"]).stdout).to_string();
    assert!(show.contains("recorded on: stb-1"), "{show}");
    let fleet = dir.join("fleet.html");
    let out = env.run(&[
        "compare",
        "--machine",
        "stb-1",
        "--machine",
        "stb-2",
        "--html",
        fleet.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let doc = std::fs::read_to_string(&fleet).unwrap();
    assert!(
        doc.contains("stb-2: io.file-read"),
        "fleet chart rows name the device"
    );

    let diag = env.run(&["diagnose", "--for", "1s", "--label", "idle"]);
    let diagnosis = dir.join("diagnosis.html");
    let have_diagnosis = diag.status.success() && {
        let out = env.run(&["report", "last", "-o", diagnosis.to_str().unwrap()]);
        assert!(out.status.success(), "{}", stderr(&out));
        true
    };
    if !have_diagnosis {
        skip(&format!("diagnose --for 1s failed: {}", stderr(&diag)));
    }
    // A clock chart is in the table's unit (MHz) with whole CPU numbers on
    // its axis, not raw Hz over 0.2 … 0.8.
    let out = env.run(&["run", "cpu.clock", "--trials", "3", "-q"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let clock = dir.join("clock.html");
    let out = env.run(&["report", "last", "-o", clock.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let doc = std::fs::read_to_string(&clock).unwrap();
    // The monitor section's timelines (there when the run lasted a
    // sampler interval or more, as it does on a loaded machine) are not the
    // clock's charts.
    let charts: Vec<&str> = svgs(&doc)
        .into_iter()
        .filter(|svg| !svg.contains("time since the run started (s)"))
        .collect();
    // Two cores at one clock make an all-equal chart: a line says so instead.
    assert!(
        !charts.is_empty() || doc.contains("No chart of clock"),
        "a clock chart or the line saying why there is none"
    );
    for svg in &charts {
        let texts: Vec<String> = svg
            .split("<text")
            .skip(1)
            .filter_map(|t| t.split_once('>').and_then(|(_, r)| r.split_once("</text>")))
            .map(|(t, _)| t.trim().to_string())
            .collect();
        assert!(texts.iter().any(|t| t.contains("(MHz)")), "{texts:?}");
        for t in &texts {
            if let Ok(v) = t.parse::<f64>() {
                assert!(v < 1e6, "a tick in raw Hz: {t} in {texts:?}");
                assert_eq!(v.fract(), 0.0, "CPU and MHz ticks are whole: {texts:?}");
            }
        }
    }
    for (kind, page) in [
        ("history", &history),
        ("fleet", &fleet),
        ("diagnosis", &diagnosis),
        ("clock", &clock),
    ] {
        if kind == "diagnosis" && !have_diagnosis {
            continue;
        }
        if let Some(r) = visual_check(page, kind) {
            if kind == "history" || kind == "fleet" {
                assert!(r["charts"].as_u64() >= Some(1), "{kind}: {r}");
            }
        }
    }
}
