//! `tunelab apply / applied / verify / unapply` through the real binary:
//! on a fake root tree (`--root`) from a stored synthetic tune run whose
//! verdict is computed from its samples, and live as root on a real sysctl
//! and a loop device.

mod common;
#[path = "common/tree.rs"]
mod tree;

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use common::{json, stderr, Env};
use tree::{read, text, Tree};
use tunelab::engine::params::ParamValue;
use tunelab::engine::Better;
use tunelab::model::run::{MetricResult, PointResult, Run, RunStatus};
use tunelab::stats::summarize;
use tunelab::store::Store;
use tunelab::tune::persist::{load_sysctl_files, Root};

const KNOB: &str = "vm.dirty_background_ratio";

/// A tune run of `KNOB` with one point per (value, median): five samples
/// spread ±1% around each median, as a real sweep leaves them.
fn tune_run(id: &str, original: &str, points: &[(&str, f64)]) -> Run {
    let mut env = BTreeMap::new();
    for (k, v) in [
        ("host.name", "test"),
        ("tune.knob", KNOB),
        ("tune.metric", "write_throughput"),
        ("tune.noise", "0.02"),
        ("tune.original", original),
    ] {
        env.insert(k.to_string(), v.to_string());
    }
    let results = points
        .iter()
        .map(|(v, median)| {
            let samples: Vec<f64> = [0.99, 1.0, 1.01, 1.005, 0.995, 0.998, 1.002]
                .iter()
                .map(|f| f * median)
                .collect();
            let mut params = BTreeMap::new();
            params.insert("size".to_string(), ParamValue::Int(64 << 20));
            params.insert(KNOB.to_string(), ParamValue::Text(v.to_string()));
            PointResult {
                experiment: "io.record-size".into(),
                params,
                metrics: vec![MetricResult {
                    name: "write_throughput".into(),
                    unit: "B/s".into(),
                    better: Better::Higher,
                    summary: summarize(&samples),
                    samples,
                    warmup: vec![],
                }],
                elapsed_s: 1.0,
                ..Default::default()
            }
        })
        .collect();
    Run {
        schema: "tunelab.run/1".into(),
        id: id.into(),
        label: String::new(),
        status: RunStatus::Complete,
        started: "2026-11-25T10:00:00Z".into(),
        finished: "2026-11-25T10:01:00Z".into(),
        tool_version: "0.1.0".into(),
        argv: [
            "tunelab",
            "tune",
            KNOB,
            "--values",
            "5,10,20",
            "-e",
            "io.record-size",
        ]
        .map(String::from)
        .to_vec(),
        environment: env,
        quietness: Default::default(),
        results,
        samples: vec![],
        warnings: vec![],
        study: None,
        diagnosis: None,
    }
}

/// 5 beats 10 (the original) and 20 by ~20%: a real verdict.
fn winning_run() -> Run {
    tune_run(
        "20261125-100000-test",
        "10",
        &[("5", 120e6), ("10", 100e6), ("20", 95e6)],
    )
}

#[test]
fn apply_survives_a_reboot_verify_sees_drift_and_unapply_restores() {
    let t = Tree::new();
    t.store(&winning_run());

    // --dry-run changes nothing, not even the store.
    let before = t.snapshot();
    let out = t.run(&["apply", "last", "--dry-run"]);
    assert!(out.status.success(), "{}", text(&out));
    let s = text(&out);
    assert!(s.contains("dry run") && s.contains("10 → 5"), "{s}");
    assert!(
        s.contains("90-tunelab-vm.dirty_background_ratio.conf"),
        "{s}"
    );
    assert_eq!(t.snapshot(), before);
    assert!(t.journal_empty());
    let out = t.run(&["--json", "applied", "--all"]);
    assert_eq!(json(&out).as_array().unwrap().len(), 0);

    // apply: one drop-in with the winning value, live value set.
    let out = t.run(&["apply", "last"]);
    assert!(out.status.success(), "{}", text(&out));
    let s = text(&out);
    assert!(
        s.contains("re-measure the same workload now: tunelab run io.record-size -p size="),
        "{s}"
    );
    let dropin = fs::read_to_string(t.dropin()).unwrap();
    assert!(dropin.starts_with("# Written by tunelab apply"), "{dropin}");
    assert!(dropin.contains("run 20261125-100000-test"), "{dropin}");
    assert!(
        dropin.contains("vm.dirty_background_ratio: 10 → 5"),
        "{dropin}"
    );
    assert!(dropin.contains("95% CI"), "{dropin}");
    assert!(
        dropin.ends_with("\nvm.dirty_background_ratio = 5\n"),
        "{dropin}"
    );
    let ours: Vec<_> = fs::read_dir(t.root.join("etc/sysctl.d")).unwrap().collect();
    assert_eq!(ours.len(), 2, "one drop-in next to the user's file");
    assert_eq!(
        read(&t.root.join("etc/sysctl.d/10-user.conf")),
        "vm.swappiness = 10"
    );
    assert_eq!(t.live(), "5");
    assert!(t.journal_empty());
    let listed = json(&t.run(&["--json", "applied"]));
    assert_eq!(listed[0]["id"], KNOB);
    assert_eq!(listed[0]["old"], "10");
    assert_eq!(listed[0]["new"], "5");
    // Before/after: a run measured after apply is compared with the tune
    // run; compare and report --vs name the applied change and its verdict.
    let mut after = tune_run("20991231-000000-after", "5", &[("5", 121e6)]);
    after.started = "2099-12-31T00:00:00Z".into();
    after.finished = "2099-12-31T00:01:00Z".into();
    t.store(&after);
    let out = t
        .env
        .run(&["compare", "20261125-100000-test", "20991231-000000-after"]);
    assert!(out.status.success(), "{}", text(&out));
    let want = "applied between these runs: vm.dirty_background_ratio 10 → 5 \
                (tunelab apply of run 20261125-100000-test";
    assert!(text(&out).contains(want), "{}", text(&out));
    let md = t.root.join("after.md");
    let md_s = md.to_str().unwrap();
    let out = t.env.run(&[
        "report",
        "20991231-000000-after",
        "--vs",
        "20261125-100000-test",
        "-o",
        md_s,
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let report = fs::read_to_string(&md).unwrap();
    assert!(
        report.contains(want) && report.contains("95% CI"),
        "{report}"
    );
    // A second apply of the same knob is refused.
    let out = t.run(&["apply", "last"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));

    let out = t.run(&["verify"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("in place"), "{}", text(&out));

    // Simulated reboot: the kernel's defaults, then the boot-time load of
    // every sysctl file (sysctl --system order).
    t.set_live("10");
    fs::write(t.root.join("proc/sys/vm/swappiness"), "60").unwrap();
    let loaded = load_sysctl_files(&Root::new(Some(&t.root))).unwrap();
    assert!(
        loaded.contains(&(KNOB.to_string(), "5".to_string())),
        "{loaded:?}"
    );
    assert_eq!(t.live(), "5");
    let out = t.run(&["verify"]);
    assert!(out.status.success(), "{}", text(&out));

    // Drift by hand: reported (exit 5) with what tunelab can tell.
    t.set_live("7");
    let out = t.run(&["verify"]);
    assert_eq!(out.status.code(), Some(5), "{}", text(&out));
    let s = text(&out);
    assert!(
        s.contains("drifted") && s.contains("changed by hand"),
        "{s}"
    );
    // A later file that sets it is named as the cause.
    fs::write(
        t.root.join("etc/sysctl.d/99-local.conf"),
        "vm.dirty_background_ratio = 7\n",
    )
    .unwrap();
    let checks = json(&t.run(&["--json", "verify"]));
    assert_eq!(checks[0]["status"], "drifted");
    assert!(
        checks[0]["cause"]
            .as_str()
            .unwrap()
            .contains("99-local.conf"),
        "{checks}"
    );
    fs::remove_file(t.root.join("etc/sysctl.d/99-local.conf")).unwrap();

    // unapply leaves someone else's live value alone…
    let out = t.run(&["unapply", KNOB, "--dry-run"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("left alone"), "{}", text(&out));
    assert!(t.dropin().exists());
    // …and with the value back in place restores the pre-apply one.
    t.set_live("5");
    let before = t.snapshot();
    let out = t.run(&["unapply", KNOB, "--dry-run"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(t.snapshot(), before, "unapply --dry-run changed the tree");
    let out = t.run(&["unapply", KNOB]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(!t.dropin().exists());
    assert_eq!(t.live(), "10");
    assert_eq!(
        read(&t.root.join("etc/sysctl.d/10-user.conf")),
        "vm.swappiness = 10"
    );
    assert!(t.journal_empty());
    let all = json(&t.run(&["--json", "applied", "--all"]));
    assert_eq!(all[0]["state"], "unapplied");
    let out = t.run(&["verify"]);
    assert!(out.status.success(), "{}", text(&out));
}

#[test]
fn a_users_file_of_the_same_name_is_never_touched() {
    let t = Tree::new();
    t.store(&winning_run());
    fs::write(t.dropin(), "# mine\nvm.dirty_background_ratio = 3\n").unwrap();
    let before = t.snapshot();
    let out = t.run(&["apply", "last"]);
    assert_eq!(out.status.code(), Some(4), "{}", text(&out));
    assert!(
        stderr(&out).contains("not written by tunelab"),
        "{}",
        text(&out)
    );
    assert_eq!(t.snapshot(), before);
    assert!(t.journal_empty());
    // Nor removed by unapply: nothing is recorded as applied.
    let out = t.run(&["unapply", "all"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert_eq!(t.snapshot(), before);
}

#[test]
fn no_significant_improvement_is_refused_unless_forced() {
    let t = Tree::new();
    t.store(&tune_run(
        "20261125-110000-test",
        "10",
        &[("5", 100.5e6), ("10", 100e6)],
    ));
    let before = t.snapshot();
    let out = t.run(&["apply", "last"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(stderr(&out).contains("--force"), "{}", text(&out));
    assert_eq!(t.snapshot(), before);
    let out = t.run(&["apply", "last", "--force"]);
    assert!(out.status.success(), "{}", text(&out));
    let d = fs::read_to_string(t.dropin()).unwrap();
    assert!(d.contains("NOT significantly better"), "{d}");
}

#[test]
fn a_kill_during_apply_or_unapply_leaves_the_old_or_the_new_state() {
    let t = Tree::new();
    t.store(&winning_run());
    let clean = t.snapshot();
    for step in ["apply-journalled", "apply-live", "apply-files"] {
        let out = t.run_env(&["apply", "last"], &[("TUNELAB_TEST_KILL_AT", step)]);
        assert_eq!(
            out.status.code(),
            None,
            "{step}: not killed: {}",
            text(&out)
        );
        assert!(!t.journal_empty(), "{step}");
        // The next command rolls the dead apply back: the old state.
        let out = t.run(&["applied"]);
        assert!(out.status.success(), "{}", text(&out));
        assert_eq!(t.snapshot(), clean, "{step}: {}", text(&out));
        assert!(t.journal_empty(), "{step}");
    }
    // Killed once the store has it: the next command keeps the change.
    let out = t.run_env(
        &["apply", "last"],
        &[("TUNELAB_TEST_KILL_AT", "apply-stored")],
    );
    assert_eq!(out.status.code(), None, "not killed: {}", text(&out));
    let out = t.run(&["verify"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("kept apply"), "{}", text(&out));
    assert!(t.journal_empty());
    let applied = t.snapshot();
    assert_ne!(applied, clean);
    for step in ["unapply-journalled", "unapply-live", "unapply-files"] {
        let out = t.run_env(&["unapply", KNOB], &[("TUNELAB_TEST_KILL_AT", step)]);
        assert_eq!(
            out.status.code(),
            None,
            "{step}: not killed: {}",
            text(&out)
        );
        // Rolled back to the applied state (file and live value).
        let out = t.run(&["verify"]);
        assert!(out.status.success(), "{step}: {}", text(&out));
        assert_eq!(t.snapshot(), applied, "{step}");
    }
    let out = t.run_env(
        &["unapply", KNOB],
        &[("TUNELAB_TEST_KILL_AT", "unapply-stored")],
    );
    assert_eq!(out.status.code(), None, "not killed: {}", text(&out));
    let out = t.run(&["applied"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("nothing applied"), "{}", text(&out));
    assert_eq!(t.snapshot(), clean);
    assert!(t.journal_empty());
}

/// What the store says of KNOB and what the tree holds agree: applied with
/// the drop-in and the applied live value, or neither.
fn agree(t: &Tree, what: &str) -> bool {
    let applied = Store::open(&t.env.db())
        .unwrap()
        .changes()
        .unwrap()
        .iter()
        .any(|c| c.knob == KNOB && c.state == "applied");
    let file = t.dropin().exists();
    let live = t.live();
    let ok = if applied {
        file && live == "5"
    } else {
        !file && live == "10"
    };
    assert!(
        ok,
        "{what}: store applied={applied}, drop-in={file}, live={live}, journal {}",
        fs::read_to_string(t.state.join("journal.json")).unwrap_or_default()
    );
    applied
}

/// SIGKILL (strace fault injection) at the Nth call of every write-like
/// system call of `apply` and `unapply`, N = 1, 2, … until the verb runs
/// through: after each kill, `restore` leaves store and system agreeing.
#[test]
fn a_kill_at_any_write_rename_or_unlink_is_settled_by_restore() {
    let strace = std::process::Command::new("strace").arg("-V").output();
    if !strace.is_ok_and(|o| o.status.success()) {
        return common::skip("strace is not installed (apt-get install strace)");
    }
    let t = Tree::new();
    t.store(&winning_run());
    let bin = assert_cmd::cargo::cargo_bin("tunelab");
    let mut kills = 0;
    for (verb, args) in [("apply", ["apply", "last"]), ("unapply", ["unapply", KNOB])] {
        for calls in [
            "write,pwrite64",
            "rename,renameat,renameat2",
            "link,linkat",
            "unlink,unlinkat",
            "fsync,fdatasync",
        ] {
            for n in 1.. {
                // Each round starts from the verb's own starting state.
                let applied = agree(&t, "start");
                if applied != (verb == "unapply") {
                    let a = if applied {
                        ["unapply", KNOB]
                    } else {
                        ["apply", "last"]
                    };
                    let out = t.run(&a);
                    assert!(out.status.success(), "{}", text(&out));
                }
                let out = std::process::Command::new("strace")
                    .args(["-f", "-qq", "-o", "/dev/null", "-e"])
                    .arg(format!("inject={calls}:signal=SIGKILL:when={n}"))
                    .arg(&bin)
                    .args(args)
                    .arg("--root")
                    .arg(&t.root)
                    .env("TUNELAB_DB", t.env.db())
                    .env("TUNELAB_STATE_DIR", &t.state)
                    .output()
                    .unwrap();
                if out.status.code().is_some() {
                    assert!(out.status.success(), "{verb} {calls} #{n}: {}", text(&out));
                    agree(&t, &format!("{verb} ran through"));
                    break;
                }
                kills += 1;
                let out = t
                    .env
                    .cmd()
                    .env("TUNELAB_STATE_DIR", &t.state)
                    .arg("restore")
                    .output()
                    .unwrap();
                assert!(out.status.success(), "{verb} {calls} #{n}: {}", text(&out));
                agree(&t, &format!("{verb} killed at {calls} #{n}"));
                assert!(t.journal_empty(), "{verb} {calls} #{n}");
            }
        }
    }
    assert!(kills > 10, "only {kills} kills");
}

#[test]
fn without_root_the_verbs_refuse_with_exit_3() {
    if !common::is_root() {
        return common::skip("needs root to switch to an unprivileged user");
    }
    let env = Env::new();
    std::fs::set_permissions(
        env.dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let bin = assert_cmd::cargo::cargo_bin("tunelab");
    for args in [
        &["apply", "last"][..],
        &["verify"][..],
        &["unapply", "all"][..],
    ] {
        let out = std::process::Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&bin)
            .args(args)
            .env("TUNELAB_DB", env.dir.path().join("nobody.db"))
            .env("TUNELAB_STATE_DIR", env.dir.path().join("nobody-state"))
            .env("HOME", env.dir.path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(3), "{args:?}: {}", text(&out));
        assert!(stderr(&out).contains("needs root"), "{}", text(&out));
    }
}

/// Live, as root, on the real vm.dirty_background_ratio and
/// /etc/sysctl.d: apply, verify, drift, unapply; restored at the end.
#[test]
fn live_apply_of_a_real_sysctl_and_unapply() {
    let live = Path::new("/proc/sys/vm/dirty_background_ratio");
    let dropin = Path::new("/etc/sysctl.d/90-tunelab-vm.dirty_background_ratio.conf");
    if !common::is_root() || dropin.exists() {
        return common::skip("needs root and no existing tunelab drop-in");
    }
    struct Restore(String, String);
    impl Drop for Restore {
        fn drop(&mut self) {
            let _ = fs::write("/proc/sys/vm/dirty_background_bytes", &self.1);
            if self.1 == "0" {
                let _ = fs::write("/proc/sys/vm/dirty_background_ratio", &self.0);
            }
            let p = "/etc/sysctl.d/90-tunelab-vm.dirty_background_ratio.conf";
            if fs::read_to_string(p).is_ok_and(|t| t.contains("run 20261125-120000-live")) {
                let _ = fs::remove_file(p);
            }
        }
    }
    let orig = read(live);
    let _guard = Restore(
        orig.clone(),
        read(Path::new("/proc/sys/vm/dirty_background_bytes")),
    );
    let other = if orig == "7" { "6" } else { "7" };
    let env = Env::new();
    let state = env.dir.path().join("state");
    let run = tune_run(
        "20261125-120000-live",
        &orig,
        &[(other, 120e6), (orig.as_str(), 100e6)],
    );
    Store::open(&env.db()).unwrap().save(&run).unwrap();
    let go = |args: &[&str]| {
        env.cmd()
            .env("TUNELAB_STATE_DIR", &state)
            .args(args)
            .output()
            .unwrap()
    };
    let out = go(&["apply", "last"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(read(live), other);
    assert!(fs::read_to_string(dropin)
        .unwrap()
        .ends_with(&format!("= {other}\n")));
    assert!(go(&["verify"]).status.success());
    fs::write(live, &orig).unwrap();
    let out = go(&["verify"]);
    assert_eq!(out.status.code(), Some(5), "{}", text(&out));
    fs::write(live, other).unwrap();
    let out = go(&["unapply", KNOB]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(read(live), orig);
    assert!(!dropin.exists());
}

/// Sweeping nr_requests through 0 on a lab loop device: the kernel sets
/// its minimum instead, and the run stores that value with a note.
#[test]
fn a_clamped_nr_requests_is_stored_as_what_the_kernel_set() {
    if !common::is_root() || !Path::new("/dev/loop-control").exists() {
        return common::skip("needs root and loop devices");
    }
    let env = Env::new();
    let t = env.target();
    let out = env
        .cmd()
        .env("TUNELAB_STATE_DIR", env.dir.path().join("state"))
        .args([
            "tune",
            "nr_requests",
            "--values",
            "0,64",
            "--experiment",
            "io.device-read",
            "-p",
            "duration=200ms",
            "-p",
            "size=32M",
            "--fs",
            "ext4",
            "--fs-size",
            "256M",
            "--min-trials",
            "2",
            "--max-trials",
            "3",
            "--quiet-check",
            "0",
            "--target",
            t.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("nr_requests=0: the kernel set"), "{err}");
    let run = json(&env.run(&["show", "last", "--json"]));
    let results = run["results"].as_array().unwrap();
    let vals: Vec<&str> = results
        .iter()
        .map(|r| r["params"]["nr_requests"].as_str().unwrap())
        .collect();
    // The two values and the live one (tune measures it as an arm).
    assert_eq!(vals.len(), 3, "{vals:?}");
    assert_ne!(vals[0], "0", "stored as requested, not as set: {vals:?}");
    let clamped = &results[0];
    assert!(
        clamped["notes"].as_array().unwrap().iter().any(|n| n
            .as_str()
            .unwrap()
            .contains("nr_requests=0: the kernel set")),
        "{clamped}"
    );
    // The header names the lab's loop device, not the host disk.
    assert!(
        run["environment"]["target.device"]
            .as_str()
            .unwrap()
            .contains("loop"),
        "{}",
        run["environment"]
    );
    assert_eq!(run["environment"]["tune.knob"], "nr_requests");
}

/// Save `edit` of the stored record of KNOB over it (as anyone with write
/// access to the store could).
fn edit_record(t: &Tree, edit: impl FnOnce(&mut tunelab::model::applied::AppliedChange)) {
    let mut s = Store::open(&t.env.db()).unwrap();
    let mut c = s
        .changes()
        .unwrap()
        .into_iter()
        .find(|c| c.knob == KNOB)
        .unwrap();
    edit(&mut c);
    s.save_change(&c).unwrap();
}

#[test]
fn an_edited_applied_record_cannot_make_unapply_write_elsewhere() {
    let t = Tree::new();
    t.store(&winning_run());
    let out = t.run(&["apply", "last"]);
    assert!(out.status.success(), "{}", text(&out));
    let applied = t.snapshot();
    let core = Path::new("/proc/sys/kernel/core_pattern");
    let core_before = fs::read_to_string(core).unwrap_or_default();
    // A file elsewhere that carries tunelab's header.
    let victim = t.env.dir.path().join("victim.conf");
    fs::write(&victim, format!("{}\nx\n", tunelab::tune::persist::HEADER)).unwrap();
    type Edit = Box<dyn Fn(&mut tunelab::model::applied::AppliedChange)>;
    let core_old = core_before.trim().to_string();
    let victim_path = victim.display().to_string();
    let edits: Vec<(Edit, &str)> = vec![
        (
            // Its own value as "old": even a failure cannot change it.
            Box::new(move |c| {
                c.live = vec!["/proc/sys/kernel/core_pattern".into()];
                c.old = core_old.clone();
            }),
            "not a setting tunelab changes",
        ),
        (
            Box::new(move |c| c.files[0].path = victim_path.clone()),
            "not a file `tunelab apply` writes",
        ),
        (
            Box::new(|c| c.old = "|/tmp/x.sh %p".into()),
            "not a setting value",
        ),
    ];
    let good = Store::open(&t.env.db()).unwrap().changes().unwrap();
    for (edit, why) in edits {
        edit_record(&t, &*edit);
        let out = t.run(&["unapply", KNOB]);
        assert_ne!(out.status.code(), Some(0), "{why}: {}", text(&out));
        assert!(text(&out).contains(why), "{why}: {}", text(&out));
        assert_eq!(t.snapshot(), applied, "{why}");
        assert!(victim.exists());
        assert_eq!(fs::read_to_string(core).unwrap_or_default(), core_before);
        Store::open(&t.env.db())
            .unwrap()
            .save_change(&good[0])
            .unwrap();
    }
    let out = t.run(&["unapply", KNOB]);
    assert!(out.status.success(), "{}", text(&out));
}

#[test]
fn a_record_of_another_machine_is_ignored() {
    let t = Tree::new();
    t.store(&winning_run());
    let out = t.run(&["apply", "last"]);
    assert!(out.status.success(), "{}", text(&out));
    let applied = t.snapshot();
    edit_record(&t, |c| {
        c.machine_id = "0123456789abcdef0123456789abcdef".into()
    });
    let out = t.run(&["applied"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("ignored the applied record")
            && text(&out).contains("recorded on 0123456789abcdef"),
        "{}",
        text(&out)
    );
    let out = t.run(&["unapply", KNOB]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert_eq!(t.snapshot(), applied);
}
