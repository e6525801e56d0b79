//! The validity guard's flags reach the user: a stored run whose trials
//! were flagged shows `suspect:` lines in `show` and in the HTML report, and
//! a run stored before the guard existed (no `validity`) still loads.

mod common;

use common::{json, stderr, Env};
use tunelab::model::run::Run;

/// A real measured run (JSON), stored by the binary with --no-store off.
fn measured(env: &Env) -> serde_json::Value {
    let t = env.target();
    let out = env.run(&[
        "run",
        "io.file-read",
        "-p",
        "size=1M",
        "--trials",
        "5",
        "--quiet-check",
        "0",
        "--no-store",
        "--json",
        "--target",
        t.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    json(&out)
}

fn store(env: &Env, v: serde_json::Value) {
    let run: Run = serde_json::from_value(v).expect("a run loads");
    let mut s = tunelab::store::Store::open(&env.db()).unwrap();
    s.save(&run).unwrap();
}

#[test]
fn flagged_trials_are_shown_in_tables_and_reports() {
    let env = Env::new();
    let mut v = measured(&env);
    let trials = v["results"][0]["validity"]["trials"]
        .as_array_mut()
        .expect("the run carries per-trial checks");
    assert!(trials.len() >= 5);
    // Whatever this machine's load did to the trials, start from clean
    // ones, then mark the last trial as a hot board would.
    for t in trials.iter_mut() {
        t.as_object_mut().unwrap().remove("flags");
    }
    let last = trials.last_mut().unwrap();
    last["flags"] = serde_json::json!([{
        "kind": "thermal",
        "detail": "cpu-thermal at 85.0 °C, at or above its 80.0 °C trip point"
    }]);
    v["id"] = "20990101-000000-beef".into();
    store(&env, v);
    let show = env.run(&["show", "20990101-000000-beef"]);
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(
        text.contains("suspect:") && text.contains("1 of 5 trials flagged: cpu-thermal at 85.0 °C"),
        "{text}"
    );
    let html = env.dir.path().join("r.html");
    let out = env.run(&[
        "report",
        "20990101-000000-beef",
        "-o",
        html.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("1 of 5 trials flagged"),
        "report lists the suspect point"
    );
}

#[test]
fn runs_stored_before_the_guard_still_load() {
    let env = Env::new();
    let mut v = measured(&env);
    // What an older tunelab wrote: no validity anywhere.
    v["results"][0].as_object_mut().unwrap().remove("validity");
    v["id"] = "20200101-000000-0001".into();
    store(&env, v);
    let out = env.run(&["show", "20200101-000000-0001", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let back = json(&out);
    assert!(back["results"][0].get("validity").is_none());
    let text =
        String::from_utf8_lossy(&env.run(&["show", "20200101-000000-0001"]).stdout).to_string();
    assert!(!text.contains("suspect:"), "{text}");
}
