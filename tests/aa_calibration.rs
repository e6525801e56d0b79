//! A/A calibration of `compare` on stored runs: runs of one experiment with
//! nothing changed must give no "improved"/"regressed" verdict for any
//! pair — real samples from back-to-back runs on a loaded VM
//! (tests/fixtures/aa, written by bench/aa_compare.sh FIXTURE=…), and
//! samples drawn from one distribution with drift between runs; a 20%
//! shift injected into one run must; three trials make no claim; verdicts
//! on flagged trials are marked suspect and do not fail a pipeline unless
//! told to.

mod common;
#[path = "common/store.rs"]
mod store;

use std::collections::BTreeMap;
use std::path::Path;

use common::{json, Env};
use serde::Deserialize;
use store::store;
use tunelab::engine::Better;
use tunelab::model::run::{Flag, MetricResult, PointResult, Run, RunStatus, TrialCheck, Validity};
use tunelab::model::ParamValue;
use tunelab::stats::summarize;

#[derive(Deserialize)]
struct FixtureMetric {
    name: String,
    unit: String,
    better: Better,
    /// The samples of every run, oldest first.
    runs: Vec<Vec<f64>>,
}

#[derive(Deserialize)]
struct Fixture {
    experiment: String,
    params: BTreeMap<String, ParamValue>,
    metrics: Vec<FixtureMetric>,
}

fn fixture(name: &str) -> Fixture {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/aa")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Run `i` of the fixture, every sample times `scale`.
fn run(f: &Fixture, i: usize, scale: f64) -> Run {
    let mut env = BTreeMap::new();
    env.insert("host.name".to_string(), "aa-host".to_string());
    env.insert("machine.id".to_string(), "aa-machine".to_string());
    let metrics = f
        .metrics
        .iter()
        .map(|m| {
            let samples: Vec<f64> = m.runs[i].iter().map(|x| x * scale).collect();
            MetricResult {
                name: m.name.clone(),
                unit: m.unit.clone(),
                better: m.better,
                summary: summarize(&samples),
                samples,
                warmup: vec![],
            }
        })
        .collect();
    Run {
        schema: "tunelab.run/1".into(),
        id: format!("20261127-1200{i:02}-{}", (scale * 100.0) as u32),
        label: String::new(),
        status: RunStatus::Complete,
        started: format!("2026-11-27T12:{i:02}:00Z"),
        finished: format!("2026-11-27T12:{i:02}:30Z"),
        tool_version: "0.1.0".into(),
        argv: vec!["tunelab".into(), "run".into(), f.experiment.clone()],
        environment: env,
        quietness: Default::default(),
        results: vec![PointResult {
            experiment: f.experiment.clone(),
            params: f.params.clone(),
            metrics,
            elapsed_s: 1.0,
            ..Default::default()
        }],
        samples: vec![],
        warnings: vec![],
        study: None,
        diagnosis: None,
    }
}

/// Verdicts of every metric of `compare a b --json`.
fn verdicts(env: &Env, a: &str, b: &str, extra: &[&str]) -> Vec<serde_json::Value> {
    let mut args = vec!["--json", "compare", a, b];
    args.extend(extra);
    let out = env.run(&args);
    assert_eq!(out.status.code(), Some(0), "{}", common::stderr(&out));
    let c = json(&out);
    c["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["metrics"].as_array().unwrap().clone())
        .collect()
}

const FIXTURES: &[&str] = &["ipc.pipe.json", "io.file-read.json", "mem.bandwidth.json"];

#[test]
fn no_pair_of_aa_runs_gets_a_verdict() {
    for name in FIXTURES {
        let f = fixture(name);
        let runs: Vec<Run> = (0..f.metrics[0].runs.len())
            .map(|i| run(&f, i, 1.0))
            .collect();
        assert!(runs.len() >= 6, "{name}: {} runs", runs.len());
        let env = Env::new();
        store(&env, &runs);
        let mut judged = 0;
        for x in 0..runs.len() {
            for y in x + 1..runs.len() {
                for m in verdicts(&env, &runs[x].id, &runs[y].id, &[]) {
                    judged += 1;
                    let v = m["verdict"].as_str().unwrap();
                    assert!(
                        v == "no_change" || v == "inconclusive",
                        "{name} {} vs {}: {} {v}: {}",
                        runs[x].id,
                        runs[y].id,
                        m["name"],
                        m["reason"]
                    );
                    assert!(m["basis"].as_str().unwrap().contains("between-run noise"));
                }
            }
        }
        assert!(judged >= 15, "{name}: {judged} verdicts");
    }
}

/// `runs` runs of 10 samples from one distribution (about 1.5% spread
/// within a run) with a drift of up to ±4% between runs, deterministic.
fn drifting(runs: usize) -> Fixture {
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut uniform = move || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    let samples = (0..runs)
        .map(|_| {
            let drift = 1.0 + 0.08 * (uniform() - 0.5);
            (0..10)
                .map(|_| {
                    // Sum of four uniforms: bell-shaped, σ ≈ 1.5%.
                    let z: f64 = (0..4).map(|_| uniform() - 0.5).sum();
                    200e6 * drift * (1.0 + 0.026 * z)
                })
                .collect()
        })
        .collect();
    Fixture {
        experiment: "mem.bandwidth".into(),
        params: BTreeMap::new(),
        metrics: vec![FixtureMetric {
            name: "bandwidth".into(),
            unit: "B/s".into(),
            better: Better::Higher,
            runs: samples,
        }],
    }
}

#[test]
fn drift_between_runs_alone_gives_no_verdict() {
    let f = drifting(8);
    let runs: Vec<Run> = (0..8).map(|i| run(&f, i, 1.0)).collect();
    let env = Env::new();
    store(&env, &runs);
    for x in 0..runs.len() {
        for y in x + 1..runs.len() {
            for with in [&[][..], &["--no-history"][..]] {
                for m in verdicts(&env, &runs[x].id, &runs[y].id, with) {
                    let v = m["verdict"].as_str().unwrap();
                    assert!(
                        v == "no_change" || v == "inconclusive",
                        "{x} {y} {with:?}: {}",
                        m["reason"]
                    );
                }
            }
        }
    }
}

/// A real 20% shift is found, against the floor learned from the other
/// runs and against the stated default floor alike.
#[test]
fn a_twenty_percent_shift_is_still_found() {
    let f = drifting(8);
    let mut runs: Vec<Run> = (0..8).map(|i| run(&f, i, 1.0)).collect();
    // The last run again, every sample 20% lower.
    let mut shifted = run(&f, 7, 0.8);
    shifted.started = "2026-11-27T13:00:00Z".into();
    runs.push(shifted.clone());
    let env = Env::new();
    store(&env, &runs);
    let m = &verdicts(&env, &runs[7].id, &shifted.id, &[])[0];
    assert_eq!(m["verdict"], "regressed", "{}", m["reason"]);
    assert_eq!(m["noise_floor"]["runs"], 8);
    assert!(
        m["basis"]
            .as_str()
            .unwrap()
            .contains("learned from 8 other runs"),
        "{}",
        m["basis"]
    );
    let m = &verdicts(&env, &runs[7].id, &shifted.id, &["--no-history"])[0];
    assert_eq!(m["verdict"], "regressed", "{}", m["reason"]);
    assert!(m["basis"]
        .as_str()
        .unwrap()
        .contains("±10% between-run noise assumed"));
    // And the other way round it is an improvement.
    let m = &verdicts(&env, &shifted.id, &runs[7].id, &[])[0];
    assert_eq!(m["verdict"], "improved", "{}", m["reason"]);
}

#[test]
fn three_trials_are_too_few_for_a_claim() {
    let f = fixture("mem.bandwidth.json");
    let mut a = run(&f, 0, 1.0);
    let mut b = run(&f, 1, 0.5);
    for r in [&mut a, &mut b] {
        for m in &mut r.results[0].metrics {
            m.samples.truncate(3);
            m.summary = summarize(&m.samples);
        }
    }
    let env = Env::new();
    store(&env, &[a.clone(), b.clone()]);
    for m in verdicts(&env, &a.id, &b.id, &[]) {
        assert_eq!(m["verdict"], "inconclusive");
        assert!(
            m["basis"]
                .as_str()
                .unwrap()
                .contains("too few trials for a 95% claim (n=3"),
            "{}",
            m["basis"]
        );
    }
}

/// Every kept trial of the new run flagged for other processes' load.
fn flag_all(r: &mut Run) {
    let n = r.results[0].metrics[0].samples.len();
    let load = TrialCheck {
        flags: vec![Flag {
            kind: "load".into(),
            detail: "other processes used 95% of a CPU".into(),
        }],
        ..Default::default()
    };
    r.results[0].validity = Validity {
        trials: vec![load; n],
        ..Default::default()
    };
}

#[test]
fn suspect_regressions_are_marked_and_do_not_fail_unless_trusted() {
    let f = fixture("mem.bandwidth.json");
    let base = run(&f, 0, 1.0);
    let mut new = run(&f, 1, 0.5);
    flag_all(&mut new);
    let env = Env::new();
    store(&env, &[base.clone(), new.clone()]);
    for m in verdicts(&env, &base.id, &new.id, &[]) {
        assert_eq!(m["verdict"], "regressed");
        assert_eq!(m["suspect"], true);
    }
    let out = env.run(&["compare", &base.id, &new.id, "--fail-on-regression"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let err = common::stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{text}\n{err}");
    assert!(text.contains("regressed (suspect)"), "{text}");
    assert!(text.contains("suspect: mem.bandwidth"), "{text}");
    assert!(
        err.contains("not failing") && err.contains("--trust-suspect"),
        "{err}"
    );
    let out = env.run(&[
        "compare",
        &base.id,
        &new.id,
        "--fail-on-regression",
        "--trust-suspect",
    ]);
    assert_eq!(out.status.code(), Some(5), "{}", common::stderr(&out));
    // The HTML report marks them too.
    let page = env.dir.path().join("cmp.html");
    let out = env.run(&[
        "report",
        &new.id,
        "--vs",
        &base.id,
        "--output",
        page.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", common::stderr(&out));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("regressed (suspect)"),
        "no suspect mark in the HTML"
    );
}
