//! `tunelab history`: change points over a stored history, exit 5 on a
//! regression in the newest segment, nothing on pure noise; and `compare`
//! of several devices selected from the same store.

mod common;
#[path = "common/store.rs"]
mod store;

use std::collections::BTreeMap;

use common::{json, Env};
use store::store;
use tunelab::engine::Better;
use tunelab::model::run::{MetricResult, PointResult, Run, RunStatus};
use tunelab::stats::summarize;

fn run(i: usize, value: f64, kernel: &str) -> Run {
    run_on("board1", i, value, kernel)
}

fn run_on(host: &str, i: usize, value: f64, kernel: &str) -> Run {
    // A little spread inside each run and a wobble between runs, as on a
    // real machine.
    let wobble = 1.0 + 0.01 * ((i as f64) * 2.3).sin();
    let samples: Vec<f64> = [0.99, 1.0, 1.01, 1.005, 0.995]
        .iter()
        .map(|f| f * value * wobble)
        .collect();
    let mut env = BTreeMap::new();
    env.insert("host.name".to_string(), host.to_string());
    env.insert("kernel.release".to_string(), kernel.to_string());
    Run {
        schema: "tunelab.run/1".into(),
        id: format!("20261101-0000{i:02}-{host}"),
        label: format!("nightly {i}"),
        status: RunStatus::Complete,
        started: format!("2026-11-{:02}T03:00:00Z", i + 1),
        finished: format!("2026-11-{:02}T03:01:00Z", i + 1),
        tool_version: "0.1.0".into(),
        argv: vec!["tunelab".into(), "run".into(), "io.record-size".into()],
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
        study: None,
        diagnosis: None,
    }
}

#[test]
fn a_step_in_the_newest_runs_fails_the_pipeline_and_names_the_kernel_change() {
    let env = Env::new();
    let mut runs: Vec<Run> = (0..10).map(|i| run(i, 50e6, "6.1.0")).collect();
    runs.extend((10..15).map(|i| run(i, 35e6, "6.6.0")));
    store(&env, &runs);
    let out = env.run(&["history", "io.record-size", "--fail-on-regression"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{text}\n{err}");
    assert!(text.contains("kernel.release: 6.1.0 → 6.6.0"), "{text}");
    assert!(text.contains("a regression"), "{text}");
    assert!(err.contains("write_throughput"), "{err}");

    let out = env.run(&[
        "--json",
        "history",
        "io.record-size",
        "--metric",
        "write_throughput",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let h = json(&out);
    assert_eq!(h["schema"], "tunelab.history/1");
    let s = &h["series"][0];
    assert_eq!(s["entries"].as_array().unwrap().len(), 15);
    assert_eq!(s["changes"][0]["index"], 10);
    assert_eq!(s["changes"][0]["run"], "20261101-000010-board1");
    assert_eq!(s["newest_regressed"], true);

    let page = env.dir.path().join("trend.html");
    let out = env.run(&[
        "history",
        "io.record-size",
        "--html",
        page.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("<svg") && html.contains("kernel.release: 6.1.0 → 6.6.0"));
    let out = env.run(&[
        "history",
        "io.record-size",
        "--html",
        page.to_str().unwrap(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "an existing file is never overwritten"
    );
}

/// A gate over a series too short for any change point cannot fail, so it
/// must not pass as if nothing regressed: exit 2 with the reason.
#[test]
fn a_gate_over_too_few_runs_says_nothing_was_judged() {
    let env = Env::new();
    let runs: Vec<Run> = (0..3).map(|i| run(i, 50e6, "6.1.0")).collect();
    store(&env, &runs);
    let out = env.run(&["history", "io.record-size", "--fail-on-regression"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("the longest has 3") && err.contains("nothing was judged"),
        "{err}"
    );
    // Without the gate the same history is shown and exits 0.
    let out = env.run(&["history", "io.record-size"]);
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn noise_and_improvements_pass() {
    let env = Env::new();
    let mut runs: Vec<Run> = (0..10).map(|i| run(i, 50e6, "6.1.0")).collect();
    runs.extend((10..14).map(|i| run(i, 70e6, "6.1.0")));
    store(&env, &runs);
    let out = env.run(&["history", "io.record-size", "--fail-on-regression"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("▲ change"), "{text}");
    assert!(
        text.contains("environment: identical on both sides"),
        "{text}"
    );
}

#[test]
fn unknown_subjects_and_metrics_are_usage_errors() {
    let env = Env::new();
    store(
        &env,
        &(0..4).map(|i| run(i, 1e6, "6.1")).collect::<Vec<_>>(),
    );
    let out = env.run(&["history", "io.nothing"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no stored run measured 'io.nothing'"));
    let out = env.run(&["history", "io.record-size", "--metric", "nope"]);
    assert_eq!(out.status.code(), Some(2));
    let out = env.run(&["history", "io.record-size", "--min-segment", "1"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn devices_selected_by_machine_are_compared_with_a_baseline() {
    let env = Env::new();
    let mut runs = vec![
        run_on("stb-a", 0, 40e6, "6.1.0"),
        run_on("stb-b", 1, 20e6, "6.1.0"),
        run_on("stb-c", 2, 40e6, "6.6.0"),
    ];
    // An older run of stb-a: the selection takes each machine's newest.
    let mut old = run_on("stb-a", 3, 1e6, "5.10");
    old.started = "2026-10-01T00:00:00Z".into();
    old.id = "20261001-old-stb-a".into();
    runs.push(old);
    store(&env, &runs);
    let out = env.run(&[
        "--json",
        "compare",
        "--machine",
        "stb-a",
        "--machine",
        "stb-b",
        "--machine",
        "stb-c",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let c = json(&out);
    assert_eq!(c["schema"], "tunelab.devices/1");
    let devices: Vec<&str> = c["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["machine"].as_str().unwrap())
        .collect();
    assert_eq!(devices, ["stb-a", "stb-b", "stb-c"]);
    assert_eq!(
        c["devices"][0]["run"], "20261101-000000-stb-a",
        "the newest run of stb-a"
    );
    let vs = &c["metrics"][0]["vs_baseline"];
    assert_eq!(vs[1]["verdict"], "regressed");
    assert!((vs[1]["ratio"].as_f64().unwrap() - 0.5).abs() < 0.02);
    assert!(c["environment_diff"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["key"] == "kernel.release"));

    let page = env.dir.path().join("devices.html");
    let out = env.run(&[
        "compare",
        "--since",
        "2026-11-01",
        "--baseline",
        "stb-b",
        "--fail-on-regression",
        "--html",
        page.to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "nothing is worse than stb-b: {text}"
    );
    assert!(
        text.contains("stb-b (20261101-000001-stb-b) — baseline"),
        "{text}"
    );
    assert!(std::fs::read_to_string(&page).unwrap().contains("<svg"));

    let out = env.run(&[
        "compare",
        "--machine",
        "stb-a",
        "--machine",
        "stb-b",
        "--fail-on-regression",
    ]);
    assert_eq!(out.status.code(), Some(5));
    let out = env.run(&["compare", "--machine", "nobody"]);
    assert_eq!(out.status.code(), Some(2));
    let out = env.run(&["compare", "--machine", "stb-a", "--baseline", "zzz", "last"]);
    assert_eq!(out.status.code(), Some(2));
}
