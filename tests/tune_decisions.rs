//! Decisions a user acts on after `tune`: every value judged against the
//! live value round by round (no winner from noise, none from too few
//! rounds), relevance checked before measuring, and `apply` refusing a
//! verdict that was not measured against the value it would replace. The
//! rule is tested on simulated sweeps (seeded, so exact); the CLI on a fake
//! root tree and, as root, on a loop device.

mod common;
#[path = "common/tree.rs"]
mod tree;

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::process::Command;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use common::{json, stderr, Env};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tree::{text, Tree};
use tunelab::engine::params::ParamValue;
use tunelab::engine::Better;
use tunelab::model::run::{Flag, MetricResult, PointResult, Run, RunStatus, TrialCheck, Validity};
use tunelab::stats::summarize;
use tunelab::tune::decide::{decide, rounds_for_a_claim};
use tunelab::tune::relevance::{check, Setting};

const KNOB: &str = "vm.dirty_background_ratio";

/// One point per value with the given per-round samples.
fn results(per_value: &[(&str, Vec<f64>)]) -> Vec<PointResult> {
    per_value
        .iter()
        .map(|(v, samples)| {
            let mut params = BTreeMap::new();
            params.insert(KNOB.to_string(), ParamValue::Text(v.to_string()));
            PointResult {
                experiment: "io.record-size".into(),
                params,
                metrics: vec![MetricResult {
                    name: "write_throughput".into(),
                    unit: "B/s".into(),
                    better: Better::Higher,
                    summary: summarize(samples),
                    samples: samples.clone(),
                    warmup: vec![],
                }],
                elapsed_s: 1.0,
                ..Default::default()
            }
        })
        .collect()
}

/// A sweep of `values` (the first is live) over `rounds` rounds: every
/// round shares a drift, every trial has its own noise (`sd`, relative),
/// and value i has the relative effect `effect[i]`.
fn simulate(rng: &mut SmallRng, rounds: usize, effect: &[f64], sd: f64) -> Vec<PointResult> {
    let names = ["10", "5", "20", "40"];
    let mut per: Vec<(&str, Vec<f64>)> = names[..effect.len()]
        .iter()
        .map(|n| (*n, Vec::new()))
        .collect();
    for _ in 0..rounds {
        let drift = 1.0 + rng.gen_range(-0.2..0.2);
        for (i, e) in effect.iter().enumerate() {
            // Sum of uniforms: a bell-shaped noise without extra crates.
            let noise: f64 = (0..6).map(|_| rng.gen_range(-1.0..1.0)).sum::<f64>() / 6f64.sqrt();
            per[i]
                .1
                .push(100e6 * drift * (1.0 + e) * (1.0 + sd * noise));
        }
    }
    results(&per)
}

#[test]
fn a_knob_without_effect_gives_no_winner_from_noise() {
    let mut rng = SmallRng::seed_from_u64(39);
    for (rounds, sd) in [(30, 0.05), (30, 0.01), (10, 0.05), (3, 0.05)] {
        let mut winners = 0;
        for _ in 0..200 {
            let r = simulate(&mut rng, rounds, &[0.0, 0.0, 0.0], sd);
            let d = decide(KNOB, &r, "write_throughput", 0.02, "10").unwrap();
            winners += usize::from(d.best.is_some());
            if rounds == 3 {
                assert!(d.too_few.is_some(), "{}", d.explanation);
                assert!(d.explanation.contains("too few"), "{}", d.explanation);
            }
        }
        // Holm at 2.5% per family bounds the false winners; the noise
        // threshold lowers it further. 200 families: at most 5% is 10.
        assert!(
            winners <= 10,
            "{winners} false winners in 200 sweeps at {rounds} rounds, sd {sd}"
        );
        if rounds == 3 {
            assert_eq!(winners, 0, "3 rounds can never support a 95% claim");
        }
    }
}

#[test]
fn a_real_effect_wins_against_the_live_value_and_says_so() {
    let mut rng = SmallRng::seed_from_u64(7);
    let r = simulate(&mut rng, 20, &[0.0, 0.10, -0.05], 0.02);
    let d = decide(KNOB, &r, "write_throughput", 0.02, "10").unwrap();
    assert_eq!(d.best.as_deref(), Some("5"), "{}", d.explanation);
    assert!(
        d.explanation
            .contains("significantly better than the live value (10)"),
        "{}",
        d.explanation
    );
    assert!(d.explanation.contains("Holm"), "{}", d.explanation);
    let c = d.of("5").unwrap();
    assert!(c.ci95_low > 1.0 && c.ratio > 1.05, "{c:?}");
    // A worse value is never "better", and the live arm is not compared
    // with itself.
    assert!(!d.of("20").unwrap().better);
    assert!(d.of("10").is_none());
}

#[test]
fn the_live_arm_must_be_in_the_sweep() {
    let mut rng = SmallRng::seed_from_u64(1);
    let r = simulate(&mut rng, 10, &[0.0, 0.1], 0.01);
    let e = decide(KNOB, &r, "write_throughput", 0.02, "2560").unwrap_err();
    assert!(e.to_string().contains("live value"), "{e}");
    assert_eq!(rounds_for_a_claim(1), 6);
}

fn point(exp: &dyn tunelab::engine::Experiment, params: &[&str]) -> tunelab::engine::Point {
    let p: Vec<String> = params.iter().map(|s| s.to_string()).collect();
    tunelab::engine::verbs::run::points(exp, &p)
        .unwrap()
        .remove(0)
}

fn warnings(
    knob: &str,
    exp: &str,
    params: &[&str],
    dev: Option<&str>,
    disk: Option<&str>,
) -> Vec<String> {
    let e = tunelab::experiments::registry::find(exp).unwrap();
    let p = point(e.as_ref(), params);
    check(&Setting {
        knob,
        exp: e.as_ref(),
        point: &p,
        target: Path::new("/srv/data"),
        knob_device: dev,
        target_disk: disk,
        swap: false,
    })
}

#[test]
fn relevance_is_judged_from_what_the_experiment_does() {
    // Read-ahead on cached reads: the done-when case.
    let w = warnings(
        "read_ahead_kb",
        "io.file-read",
        &[],
        Some("loop3"),
        Some("loop3"),
    );
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].contains("page cache") && w[0].contains("never reach loop3"),
        "{w:?}"
    );
    // …and on a disk the workload does not use.
    let w = warnings(
        "read_ahead_kb",
        "io.file-read",
        &[],
        Some("loop3"),
        Some("sda"),
    );
    assert_eq!(w.len(), 2, "{w:?}");
    assert!(w[0].contains("works in /srv/data on sda"), "{w:?}");
    // Cold reads through the cache on the knob's disk: relevant.
    assert!(warnings(
        "read_ahead_kb",
        "io.device-read",
        &[],
        Some("sda"),
        Some("sda")
    )
    .is_empty());
    // Read-ahead under O_DIRECT, dirty limits under O_DIRECT writes.
    let w = warnings(
        "read_ahead_kb",
        "io.record-size",
        &["record=1m", "mode=direct"],
        Some("sda"),
        Some("sda"),
    );
    assert!(w[0].contains("O_DIRECT"), "{w:?}");
    let w = warnings(
        "vm.dirty_ratio",
        "io.record-size",
        &["record=1m", "mode=direct"],
        None,
        Some("sda"),
    );
    assert!(w[0].contains("O_DIRECT"), "{w:?}");
    assert!(warnings(
        "vm.dirty_ratio",
        "io.record-size",
        &["record=1m", "mode=buffered"],
        None,
        None
    )
    .is_empty());
    assert!(warnings(
        "vm.dirty_ratio",
        "io.burst",
        &["mode=direct-write"],
        None,
        None
    )
    .is_empty());
    // The A/A knob: dirty expiry on cached reads writes nothing.
    let w = warnings("vm.dirty_expire_centisecs", "io.file-read", &[], None, None);
    assert!(w[0].contains("writes nothing"), "{w:?}");
    // Swap, and mount options of a file system the point does not use.
    let w = warnings("vm.swappiness", "cpu.compute", &[], None, None);
    assert!(w[0].contains("no swap"), "{w:?}");
    let w = warnings("mount", "io.atime", &["atime=noatime"], None, None);
    assert!(w[0].contains("mounts itself"), "{w:?}");
    assert!(warnings("mount", "io.atime", &["atime=current"], None, None).is_empty());
    let w = warnings(
        "mount",
        "mem.bandwidth",
        &["kernel=copy", "threads=1"],
        None,
        None,
    );
    assert!(w[0].contains("uses no files"), "{w:?}");
}

/// A stored tune run of KNOB: `live` recorded as measured (None: an old
/// run), values with their medians (7 rounds, ±1% spread).
fn tune_run(id: &str, env_extra: &[(&str, &str)], points: &[(&str, f64)]) -> Run {
    let mut env = BTreeMap::new();
    for (k, v) in [
        ("host.name", "test"),
        ("tune.knob", KNOB),
        ("tune.metric", "write_throughput"),
        ("tune.noise", "0.02"),
    ]
    .iter()
    .chain(env_extra)
    {
        env.insert(k.to_string(), v.to_string());
    }
    let spread = [0.99, 1.0, 1.01, 1.005, 0.995, 0.998, 1.002];
    let per: Vec<(&str, Vec<f64>)> = points
        .iter()
        .map(|(v, m)| (*v, spread.iter().map(|f| f * m).collect()))
        .collect();
    Run {
        schema: "tunelab.run/1".into(),
        id: id.into(),
        label: String::new(),
        status: RunStatus::Complete,
        started: "2026-11-26T10:00:00Z".into(),
        finished: "2026-11-26T10:01:00Z".into(),
        tool_version: "0.1.0".into(),
        argv: [
            "/somewhere/tunelab",
            "tune",
            KNOB,
            "--values",
            "5,20",
            "-e",
            "io.record-size",
        ]
        .map(String::from)
        .to_vec(),
        environment: env,
        quietness: Default::default(),
        results: results(&per),
        samples: vec![],
        warnings: vec![],
        study: None,
        diagnosis: None,
    }
}

#[test]
fn apply_refuses_a_run_that_never_measured_the_live_value() {
    let t = Tree::new();
    // An old run: the live value 10 was recorded but not swept.
    t.store(&tune_run(
        "20261126-100000-old",
        &[("tune.original", "10")],
        &[("5", 120e6), ("20", 100e6)],
    ));
    let out = t.run(&["apply", "last"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let e = stderr(&out);
    assert!(
        e.contains("did not measure the value that was live (10)"),
        "{e}"
    );
    assert!(
        e.contains("tunelab tune vm.dirty_background_ratio --values 5,20"),
        "{e}"
    );
    // --force does not make an unmeasured baseline measured.
    let out = t.run(&["apply", "last", "--force"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(!t.dropin().exists());
}

#[test]
fn apply_refuses_when_the_live_value_changed_since_the_sweep() {
    let t = Tree::new();
    t.store(&tune_run(
        "20261126-110000-live",
        &[("tune.original", "10"), ("tune.live", "10")],
        &[("5", 120e6), ("20", 100e6), ("10", 100e6)],
    ));
    fs::write(t.root.join("proc/sys/vm/dirty_background_ratio"), "7").unwrap();
    let out = t.run(&["apply", "last", "--dry-run"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        stderr(&out).contains("is 7 now, but run 20261126-110000-live measured"),
        "{}",
        text(&out)
    );
    // Back at the measured live value: the verdict is against it.
    fs::write(t.root.join("proc/sys/vm/dirty_background_ratio"), "10").unwrap();
    let out = t.run(&["--json", "apply", "last", "--dry-run"]);
    assert!(out.status.success(), "{}", text(&out));
    let j = json(&out);
    assert_eq!(j["dry_run"], true);
    assert!(j["longest_s"].as_f64().unwrap() > 0.0);
    assert_eq!(j["verdict"]["baseline"], "10");
    assert!(j["plan"]["change"]["verdict"]
        .as_str()
        .unwrap()
        .contains("vs the live value (10)"));
    let out = t.run(&["apply", "last"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("5 vs the live value (10)"),
        "{}",
        text(&out)
    );
    assert!(fs::read_to_string(t.dropin()).unwrap().ends_with("= 5\n"));
}

#[test]
fn apply_refuses_a_sweep_that_warned_the_knob_was_not_exercised() {
    let t = Tree::new();
    t.store(&tune_run(
        "20261126-120000-irrelevant",
        &[
            ("tune.live", "10"),
            (
                "tune.relevance",
                "io.file-read writes nothing through the page cache",
            ),
        ],
        &[("5", 120e6), ("10", 100e6)],
    ));
    let out = t.run(&["apply", "last"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let e = stderr(&out);
    assert!(
        e.contains("may not exercise") && e.contains("--force"),
        "{e}"
    );
    assert!(!t.dropin().exists());
    let out = t.run(&["apply", "last", "--force"]);
    assert!(out.status.success(), "{}", text(&out));
}

/// Flag every trial of the point of `value` as run under other load.
fn flag_trials(run: &mut Run, value: &str) {
    for p in run
        .results
        .iter_mut()
        .filter(|p| p.params.get(KNOB).map(|v| v.to_string()).as_deref() == Some(value))
    {
        let check = TrialCheck {
            flags: vec![Flag {
                kind: "load".into(),
                detail: "other processes used up to 90% of a CPU".into(),
            }],
            ..Default::default()
        };
        p.validity = Validity {
            trials: vec![check; p.metrics[0].samples.len()],
            ..Default::default()
        };
    }
}

#[test]
fn a_verdict_on_flagged_trials_is_suspect_and_apply_needs_trust_suspect() {
    let mut run = tune_run(
        "20261126-130000-busy",
        &[("tune.original", "10"), ("tune.live", "10")],
        &[("5", 120e6), ("10", 100e6)],
    );
    let clean = decide(KNOB, &run.results, "write_throughput", 0.02, "10").unwrap();
    assert_eq!(clean.best.as_deref(), Some("5"), "{}", clean.explanation);
    assert!(clean.suspect.is_none() && !clean.explanation.contains("suspect"));
    // Only the live arm was disturbed: the comparison rests on it too.
    flag_trials(&mut run, "10");
    let d = decide(KNOB, &run.results, "write_throughput", 0.02, "10").unwrap();
    assert_eq!(d.best.as_deref(), Some("5"), "{}", d.explanation);
    let why = d.suspect.as_deref().expect("suspect");
    assert!(
        why.contains(&format!("{KNOB}=10: 7 of 7 trials flagged")),
        "{why}"
    );
    assert!(
        d.explanation.contains("(suspect: ") && d.explanation.contains("--trust-suspect"),
        "{}",
        d.explanation
    );

    let t = Tree::new();
    t.store(&run);
    // Refused, also with --force (a missing win is not the question here).
    for extra in [&[][..], &["--force"][..]] {
        let out = t.run(&[&["apply", "last"][..], extra].concat());
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        let e = stderr(&out);
        assert!(
            e.contains("rests on trials the validity guard flagged")
                && e.contains("--trust-suspect")
                && e.contains("tunelab tune vm.dirty_background_ratio"),
            "{e}"
        );
        assert!(!t.dropin().exists());
    }
    let out = t.run(&["--json", "apply", "last", "--trust-suspect", "--dry-run"]);
    assert!(out.status.success(), "{}", text(&out));
    let j = json(&out);
    assert!(j["verdict"]["suspect"]
        .as_str()
        .unwrap()
        .contains("flagged"));
    assert!(
        j["plan"]["change"]["verdict"]
            .as_str()
            .unwrap()
            .contains("(suspect: "),
        "{j}"
    );
    let out = t.run(&["apply", "last", "--trust-suspect"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(fs::read_to_string(t.dropin()).unwrap().ends_with("= 5\n"));
}

#[test]
fn dry_runs_answer_in_json_and_say_how_long() {
    let _knob = hold_dirty_expire();
    let t = Tree::new();
    let out = t.run(&["unapply", "all", "--dry-run"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("nothing applied"), "{}", text(&out));
    let out = t
        .env
        .cmd()
        .args([
            "--json",
            "tune",
            "vm.dirty_expire_centisecs",
            "--values",
            "500,1500",
        ])
        .args(["-e", "io.file-read", "--dry-run", "--target"])
        .arg(t.env.target())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let j = json(&out);
    assert_eq!(j["dry_run"], true);
    let live = fs::read_to_string("/proc/sys/vm/dirty_expire_centisecs").unwrap();
    let vals: Vec<&str> = j["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(
        vals.contains(&live.trim()),
        "the live value is an arm: {vals:?}"
    );
    assert!(j["longest_s"].as_f64().unwrap() >= j["budget_s"].as_f64().unwrap());
    assert!(j["rounds"]["min"].as_u64().unwrap() as usize >= rounds_for_a_claim(2));
    assert!(
        j["warnings"][0]
            .as_str()
            .unwrap()
            .contains("writes nothing"),
        "{j}"
    );
}

/// As root on a loop device: the done-when of issue 39 item 4 — read-ahead
/// under a cached read warns, and apply of that run refuses.
#[test]
fn read_ahead_under_cached_reads_warns_and_apply_refuses() {
    if !common::is_root() || !Path::new("/dev/loop-control").exists() {
        return common::skip("needs root and loop devices");
    }
    let env = Env::new();
    let img = env.dir.path().join("dev.img");
    fs::write(&img, vec![0u8; 8 << 20]).unwrap();
    let dev = sh("losetup", &["--find", "--show", img.to_str().unwrap()]);
    let name = dev.trim_start_matches("/dev/").to_string();
    struct Detach(String);
    impl Drop for Detach {
        fn drop(&mut self) {
            let _ = Command::new("losetup").args(["-d", &self.0]).status();
        }
    }
    let _detach = Detach(dev.clone());
    let state = env.dir.path().join("state");
    let out = env
        .cmd()
        .env("TUNELAB_STATE_DIR", &state)
        .args([
            "tune",
            "read_ahead_kb",
            "--device",
            &name,
            "--values",
            "128,1024",
        ])
        .args([
            "-e",
            "io.file-read",
            "-p",
            "size=4M",
            "--trials",
            "3",
            "--quiet-check",
            "0",
        ])
        .arg("--target")
        .arg(env.target())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let e = stderr(&out);
    assert!(e.contains("never reach") && e.contains(&name), "{e}");
    assert!(
        text(&out).contains("than the live value ("),
        "{}",
        text(&out)
    );
    let run = json(&env.run(&["show", "last", "--json"]));
    assert!(run["environment"]["tune.relevance"]
        .as_str()
        .unwrap()
        .contains("page cache"));
    assert!(
        run["environment"]["tune.live"].is_string(),
        "{}",
        run["environment"]
    );
    let out = env
        .cmd()
        .env("TUNELAB_STATE_DIR", &state)
        .args(["apply", "last", "--dry-run"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
}

fn sh(cmd: &str, args: &[&str]) -> String {
    let out = Command::new(cmd).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{cmd}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Held by every test here that sweeps or reads the live
/// vm.dirty_expire_centisecs: a sweep claims the setting machine-wide (a
/// second tunelab refuses it), and a value read mid-sweep is the sweep's,
/// not the original.
static DIRTY_EXPIRE: Mutex<()> = Mutex::new(());

fn hold_dirty_expire() -> MutexGuard<'static, ()> {
    DIRTY_EXPIRE.lock().unwrap_or_else(|e| e.into_inner())
}

/// vm.dirty_expire_centisecs (the knob the sweeps below change), its live
/// value, and two values near it that differ from it.
fn dirty_expire_and_two_other_values() -> (&'static str, String, String) {
    let knob = "/proc/sys/vm/dirty_expire_centisecs";
    let original = fs::read_to_string(knob).unwrap().trim().to_string();
    let n: u64 = original.parse().unwrap();
    (knob, original, format!("{},{}", n + 7, n + 11))
}

/// SIGINT during a sweep: exit 130, and the rounds every value finished
/// are stored with the run, marked interrupted.
#[test]
fn ctrl_c_during_a_sweep_keeps_the_finished_rounds() {
    if !common::is_root() {
        return common::skip("needs root to change sysctls");
    }
    let _knob = hold_dirty_expire();
    let env = Env::new();
    let (knob, original, values) = dirty_expire_and_two_other_values();
    let mut child = env
        .background()
        .env("TUNELAB_STATE_DIR", env.dir.path().join("state"))
        .args(["tune", "vm.dirty_expire_centisecs", "--values", &values])
        .args([
            "-e",
            "io.file-read",
            "-p",
            "size=4M",
            "--trial-time",
            "20ms",
        ])
        .args([
            "--min-trials",
            "1000",
            "--max-trials",
            "1000",
            "--budget",
            "60s",
        ])
        .args(["--quiet-check", "0", "--target"])
        .arg(env.target())
        .spawn()
        .unwrap();
    // Wait for a few whole rounds, seen as the knob moving between the
    // arms' values (each holds it for a 20 ms trial at least): a fixed sleep
    // ended the sweep before its first round on a loaded machine.
    let t0 = Instant::now();
    let mut last = original.clone();
    let mut moves = 0;
    while moves < 12 && t0.elapsed() < Duration::from_secs(90) {
        let now = fs::read_to_string(knob).unwrap().trim().to_string();
        if now != last {
            moves += 1;
            last = now;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(
        moves >= 12,
        "the sweep moved the knob {moves} times in 90 s"
    );
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    assert_eq!(
        fs::read_to_string(knob).unwrap().trim(),
        original,
        "restored"
    );
    let run = json(&env.run(&["show", "last", "--json"]));
    assert_eq!(run["status"], "interrupted", "{}", run["status"]);
    let res = run["results"].as_array().unwrap();
    assert_eq!(res.len(), 3, "two values and the live arm");
    let counts: Vec<usize> = res
        .iter()
        .map(|r| r["metrics"][0]["samples"].as_array().unwrap().len())
        .collect();
    assert!(
        counts[0] >= 1 && counts.iter().all(|c| *c == counts[0]),
        "whole rounds: {counts:?}"
    );
    assert!(
        res[0]["notes"].to_string().contains("interrupted"),
        "{}",
        res[0]["notes"]
    );
}

/// `tune --json` prints the run as `run --json` does, plus its decisions:
/// one per lab file system, each against the live value it measured. Three
/// rounds are too few for a claim among two values, so none is named.
#[test]
fn tune_json_carries_its_decision_against_the_live_value() {
    if !common::is_root() {
        return common::skip("needs root to change sysctls");
    }
    let _knob = hold_dirty_expire();
    let env = Env::new();
    let (knob, original, values) = dirty_expire_and_two_other_values();
    let out = env
        .cmd()
        .env("TUNELAB_STATE_DIR", env.dir.path().join("state"))
        .args([
            "--json",
            "tune",
            "vm.dirty_expire_centisecs",
            "--values",
            &values,
        ])
        .args([
            "-e",
            "io.file-read",
            "-p",
            "size=1M",
            "--trial-time",
            "20ms",
        ])
        .args(["--trials", "3", "--quiet-check", "0", "--target"])
        .arg(env.target())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(fs::read_to_string(knob).unwrap().trim(), original);
    let j = json(&out);
    assert!(j["id"].is_string() && j["results"].is_array(), "{j}");
    let ds = j["decisions"].as_array().expect("a decisions array");
    assert_eq!(ds.len(), 1, "{j}");
    assert!(ds[0]["fs"].is_null(), "{}", ds[0]);
    let d = &ds[0]["decision"];
    assert_eq!(d["live"], original.as_str(), "{d}");
    assert!(d["best"].is_null(), "3 rounds cannot carry a claim: {d}");
    assert!(d["too_few"].as_u64().is_some_and(|r| r > 3), "{d}");
    let compared: Vec<&str> = d["comparisons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["value"].as_str().unwrap())
        .collect();
    assert_eq!(compared.len(), 2, "{d}");
    assert!(
        d["explanation"].as_str().unwrap().contains("live value"),
        "{d}"
    );
}
