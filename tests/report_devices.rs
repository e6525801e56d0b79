//! `tunelab report` with several runs or a selection: the device
//! comparison `compare` prints, as an HTML or Markdown document — key
//! issues' verdicts per device, ratios to a baseline with CIs, a chart, and
//! the environment facts that differ.

mod common;

use std::collections::BTreeMap;

use common::{json, Env};
use tunelab::engine::Better;
use tunelab::model::run::{IssueVerdict, MetricResult, PointResult, Run, RunStatus, StudySummary};
use tunelab::stats::summarize;
use tunelab::store::Store;

fn run(host: &str, day: usize, value: f64, kernel: &str, verdict: &str) -> Run {
    let samples: Vec<f64> = [0.99, 1.0, 1.01, 1.005, 0.995]
        .iter()
        .map(|f| f * value)
        .collect();
    let mut env = BTreeMap::new();
    env.insert("host.name".to_string(), host.to_string());
    env.insert("kernel.release".to_string(), kernel.to_string());
    Run {
        schema: "tunelab.run/1".into(),
        id: format!("202611{day:02}-030000-{host}"),
        label: "nightly".into(),
        status: RunStatus::Complete,
        started: format!("2026-11-{day:02}T03:00:00Z"),
        finished: format!("2026-11-{day:02}T03:01:00Z"),
        tool_version: "0.1.0".into(),
        argv: vec!["tunelab".into(), "study".into(), "pvr".into()],
        environment: env,
        quietness: Default::default(),
        results: vec![PointResult {
            experiment: "io.record-size".into(),
            params: BTreeMap::new(),
            metrics: vec![MetricResult {
                name: "write_throughput".into(),
                unit: "B/s".into(),
                better: Better::Higher,
                summary: summarize(&samples),
                samples,
                warmup: vec![],
            }],
            series: vec![],
            histograms: vec![],
            notes: vec![],
            elapsed_s: 1.0,
            ..Default::default()
        }],
        samples: vec![],
        warnings: vec![],
        study: Some(StudySummary {
            profile: "pvr".into(),
            title: "PVR".into(),
            issues: vec![IssueVerdict {
                name: "Recording bandwidth".into(),
                question: String::new(),
                result: String::new(),
                verdict: verdict.into(),
                conclusion: String::new(),
                suspect: vec![],
                seconds: None,
            }],
        }),
        diagnosis: None,
    }
}

fn fleet(env: &Env) {
    let mut s = Store::open(&env.db()).unwrap();
    for r in [
        run("stb-a", 2, 40e6, "6.1.0", "pass"),
        run("stb-b", 2, 20e6, "6.1.0", "fail"),
        run("stb-c", 2, 40.2e6, "6.6.0", "pass"),
        // Older than --since: left out.
        run("stb-d", 1, 1e6, "5.10.0", "fail"),
    ] {
        s.save(&r).unwrap();
    }
}

#[test]
fn html_report_of_a_selection_compares_the_devices() {
    let env = Env::new();
    fleet(&env);
    let page = env.dir.path().join("fleet.html");
    let out = env.run(&[
        "--json",
        "report",
        "--since",
        "2026-11-02",
        "--baseline",
        "stb-a",
        "-o",
        page.to_str().unwrap(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j = json(&out);
    assert_eq!(j["runs"].as_array().unwrap().len(), 3, "{j}");
    assert_eq!(j["baseline"], "20261102-030000-stb-a");
    assert!(j["charts"].as_u64().unwrap() >= 1, "{j}");
    let html = std::fs::read_to_string(&page).unwrap();
    // The devices, the key issue's verdicts, the ratio chart, the ratio of
    // stb-b (half of stb-a) and the differing kernel.
    for want in [
        "stb-a (20261102-030000-stb-a)",
        "stb-b (20261102-030000-stb-b)",
        "stb-c (20261102-030000-stb-c)",
        "Recording bandwidth",
        "FAIL",
        "PASS",
        "<svg",
        "kernel.release",
        "6.6.0",
    ] {
        assert!(html.contains(want), "{want} missing from the report");
    }
    assert!(!html.contains("stb-d"), "stb-d ran before --since");
    assert!(
        html.contains("0.5") && html.contains("regressed"),
        "stb-b's ratio and verdict"
    );
    assert!(!html.contains("<script"), "self-contained, no scripts");
}

#[test]
fn markdown_report_of_named_runs_writes_its_chart_beside_it() {
    let env = Env::new();
    fleet(&env);
    let md = env.dir.path().join("fleet.md");
    let out = env.run(&[
        "report",
        "20261102-030000-stb-b",
        "20261102-030000-stb-a",
        "-o",
        md.to_str().unwrap(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&md).unwrap();
    assert!(
        text.contains("stb-b (20261102-030000-stb-b)") && text.contains("baseline"),
        "{text}"
    );
    assert!(text.contains("improved"), "stb-a is twice stb-b: {text}");
    assert!(text.contains("fleet-assets/"), "{text}");
    let assets: Vec<_> = std::fs::read_dir(env.dir.path().join("fleet-assets"))
        .unwrap()
        .flatten()
        .collect();
    assert!(!assets.is_empty());
    assert!(std::fs::read_to_string(assets[0].path())
        .unwrap()
        .contains("<svg"));
}

#[test]
fn device_report_mistakes_are_usage_errors() {
    let env = Env::new();
    fleet(&env);
    let out_path = |n: &str| env.dir.path().join(n).to_string_lossy().into_owned();
    // --vs with several runs, one run selected, --baseline with one run,
    // no run at all, a baseline that is not among them.
    for (args, says) in [
        (
            vec!["report", "--since", "2026-11-02", "--vs", "last"],
            "--baseline",
        ),
        (
            vec!["report", "--machine", "stb-a"],
            "two runs or more; 1 found",
        ),
        (
            vec!["report", "20261102-030000-stb-a", "--baseline", "stb-a"],
            "--vs BASE",
        ),
        (vec!["report"], "name the run"),
        (
            vec!["report", "--since", "2026-11-02", "--baseline", "nope"],
            "--baseline nope",
        ),
    ] {
        let p = out_path("x.html");
        let mut a = args.clone();
        a.extend(["-o", p.as_str()]);
        let out = env.run(&a);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(
            !env.dir.path().join("x.html").exists(),
            "{args:?} left a file"
        );
    }
}
