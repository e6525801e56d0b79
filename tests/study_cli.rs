//! Studies through the real binary: broken profiles run nothing; a small
//! profile produces verdicts and one stored run.

mod common;

use common::{json, stderr, Env};

fn profile(env: &Env, name: &str, text: &str) -> String {
    let p = env.dir.path().join(name);
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

#[test]
fn broken_profiles_give_line_numbered_errors_and_run_nothing() {
    let env = Env::new();
    let t = env.target();
    let cases = [
        ("unknown.toml", "name = \"x\"\ntitle = \"t\"\n\n[[issue]]\nname = \"a\"\nexperiment = \"io.nope\"\n", "line 6: unknown experiment 'io.nope'"),
        (
            "criterion.toml",
            "name = \"x\"\ntitle = \"t\"\n[[issue]]\nname = \"a\"\nexperiment = \"io.file-read\"\n[[issue.criteria]]\nmetric = \"speed\"\nop = \">=\"\nvalue = 1\n",
            "line 6: criterion: io.file-read has no metric 'speed'",
        ),
        (
            "events.toml",
            "name = \"x\"\ntitle = \"t\"\n[[issue]]\nname = \"a\"\nexperiment = \"io.stream\"\n[[issue.criteria]]\nmetric = \"miss_ratio\"\nop = \"<=\"\nvalue = \"1%\"\nevents = \"frames\"\n",
            "line 6: criterion: events: io.stream has no metric 'frames'",
        ),
        (
            "events-fps.toml",
            "name = \"x\"\ntitle = \"t\"\n[[issue]]\nname = \"a\"\nexperiment = \"io.stream\"\n[[issue.criteria]]\nmetric = \"record_fps\"\nop = \">=\"\nvalue = 30\nevents = \"frames_due\"\n",
            "line 6: criterion: events: record_fps is in ops/s, not a proportion",
        ),
        ("syntax.toml", "name = \"x\"\ntitle = \"t\"\n[[issue]\nname = \"a\"\n", "line 3"),
        ("param.toml", "name = \"x\"\ntitle = \"t\"\n[[issue]]\nname = \"a\"\nexperiment = \"io.file-read\"\nparams = { size = \"huge\" }\n", "line 6"),
    ];
    for (file, text, needle) in cases {
        let p = profile(&env, file, text);
        let out = env.run(&[
            "study",
            &p,
            "--quiet-check",
            "0",
            "--target",
            t.to_str().unwrap(),
        ]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{file}: {err}");
        assert!(
            err.contains(needle),
            "{file}: expected '{needle}' in: {err}"
        );
        assert_eq!(
            err.trim().lines().count(),
            1,
            "{file}: one-line error: {err}"
        );
    }
    assert!(
        !env.db().exists()
            || json(&env.run(&["runs", "--json"]))
                .as_array()
                .unwrap()
                .is_empty(),
        "nothing ran"
    );
    let out = env.run(&["study", "no-such-profile"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("built-in profiles are quick"));
}

#[test]
fn a_profile_runs_judges_and_stores_one_run() {
    let env = Env::new();
    let t = env.target();
    let p = profile(
        &env,
        "small.toml",
        r#"
name = "small"
title = "Two cached-read key issues"

[[issue]]
name = "Fast enough"
question = "Cached reads above 1 MB/s?"
experiment = "io.file-read"
params = { size = "4M", chunk = "64k" }
trials = 3
[[issue.criteria]]
metric = "read_throughput"
op = ">="
value = "1MB/s"

[[issue]]
name = "Impossible"
question = "Cached reads above 1 PB/s?"
experiment = "io.file-read"
params = { size = "4M", chunk = "4k" }
trials = 3
[[issue.criteria]]
metric = "read_throughput"
op = ">="
value = "1000000GB/s"

[[issue]]
name = "Reference only"
experiment = "io.file-read"
params = { size = "4M", chunk = "1m" }
trials = 2
"#,
    );
    let out = env.run(&[
        "study",
        &p,
        "--quiet-check",
        "0",
        "--warmup",
        "0",
        "--target",
        t.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("key issue")
            && text.contains("PASS")
            && text.contains("FAIL")
            && text.contains("INFO"),
        "{text}"
    );
    let runs = json(&env.run(&["runs", "--json"]));
    assert_eq!(
        runs.as_array().unwrap().len(),
        1,
        "one study = one stored run"
    );
    let run = json(&env.run(&["show", "last", "--json"]));
    let verdicts: Vec<&str> = run["study"]["issues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["verdict"].as_str().unwrap())
        .collect();
    assert_eq!(verdicts, ["pass", "fail", "info"]);
    assert_eq!(run["results"].as_array().unwrap().len(), 3);
    // `show` gives the verdicts and the time per key issue again, as the
    // study printed them.
    let shown = env.run(&["show", "last"]);
    assert!(shown.status.success(), "{}", stderr(&shown));
    let shown = String::from_utf8_lossy(&shown.stdout);
    let row = |name: &str| shown.lines().find(|l| l.contains(name)).unwrap_or("");
    assert!(
        row("| Fast enough").contains("PASS")
            && row("| Impossible").contains("FAIL")
            && row("| Reference only").contains("INFO"),
        "{shown}"
    );
    let times = &shown[shown.find("time per key issue:").expect(&shown)..];
    for name in ["Fast enough", "Impossible", "Reference only", "total"] {
        assert!(times.contains(name), "{times}");
    }
    assert!(env.leftovers().is_empty());
}

/// The validity guard's per-trial checks travel with the run (JSON output
/// and the stored copy), a verdict on flagged trials says so, and no
/// warm-up advice is pushed onto the user.
#[test]
fn every_measured_trial_is_checked_and_stored() {
    let env = Env::new();
    let t = env.target();
    let p = profile(
        &env,
        "guarded.toml",
        r#"
name = "guarded"
title = "One cached-read key issue"

[[issue]]
name = "Cached reads"
experiment = "io.file-read"
params = { size = "4M", chunk = "64k" }
trials = 6
warmup = 1
[[issue.criteria]]
metric = "read_throughput"
op = ">="
value = "1MB/s"
"#,
    );
    let out = env.run(&[
        "study",
        &p,
        "--quiet-check",
        "0",
        "--target",
        t.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(!err.contains("--warmup"), "no warm-up advice: {err}");
    let run = json(&env.run(&["show", "last", "--json"]));
    let r = &run["results"][0];
    let v = &r["validity"];
    let trials = v["trials"].as_array().expect("per-trial checks stored");
    let discarded = v["warmup_discarded"].as_u64().unwrap_or(0) as usize;
    let m = &r["metrics"][0];
    assert_eq!(m["samples"].as_array().unwrap().len(), 6, "6 kept trials");
    assert_eq!(trials.len(), 6 + discarded, "one check per measured trial");
    assert_eq!(
        m["warmup"].as_array().unwrap().len(),
        1 + discarded,
        "configured and discarded warm-up trials are kept"
    );
    for c in trials {
        assert!(c["seconds"].as_f64().unwrap() > 0.0, "{c}");
        // io.file-read writes in a scratch directory: its file system's
        // free space is read after every trial (statvfs works everywhere;
        // CPU shares need a trial longer than a clock tick).
        assert!(c["scratch_free"].as_u64().is_some(), "{c}");
    }
    let flagged = trials[discarded..]
        .iter()
        .any(|c| c["flags"].as_array().is_some_and(|f| !f.is_empty()));
    let issue = &run["study"]["issues"][0];
    let suspect = issue["suspect"].as_array().is_some_and(|s| !s.is_empty());
    assert_eq!(
        flagged, suspect,
        "a verdict on flagged trials says so: {issue}"
    );
    if suspect {
        assert!(
            issue["conclusion"]
                .as_str()
                .unwrap()
                .contains("on suspect data"),
            "{issue}"
        );
    }
    let text = String::from_utf8_lossy(&env.run(&["show", "last"]).stdout).to_string();
    assert_eq!(text.contains("suspect:"), flagged, "{text}");
}

/// The drift a verdict's interval is widened by is learned from this
/// machine's stored runs of the point once 4 are stored: planted trials of
/// 0.99–1.01 against a need of ≤ 1.05 are MARGINAL under the default ±10%
/// (1.01 could be 1.11 in another run), and PASS once four stored runs of
/// the point agree exactly.
#[test]
fn the_drift_between_runs_is_learned_from_the_stored_runs() {
    let env = Env::new();
    let p = profile(
        &env,
        "planted.toml",
        r#"
name = "planted"
title = "A planted value near its need"

[[issue]]
name = "Near the need"
question = "Is the value at most 1.05?"
experiment = "test.scripted"
params = { values = "1:1.01:0.99:1:1.01:0.99" }
trials = 6
[[issue.criteria]]
metric = "value"
op = "<="
value = 1.05
"#,
    );
    let study = || {
        let out = env.run(&["study", &p, "--quiet-check", "0", "--warmup", "0"]);
        assert!(out.status.success(), "{}", stderr(&out));
        let run = json(&env.run(&["show", "last", "--json"]));
        run["study"]["issues"][0].clone()
    };
    for _ in 0..4 {
        let v = study();
        assert_eq!(v["verdict"], "marginal", "{v}");
        assert!(
            v["result"].as_str().unwrap().contains("±10% between runs:"),
            "{v}"
        );
    }
    let v = study();
    assert_eq!(v["verdict"], "pass", "{v}");
    assert!(
        !v["result"].as_str().unwrap().contains("between runs"),
        "{v}"
    );
}
