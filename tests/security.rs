//! State that cannot steer root (issue 42): a journal is obeyed only from a
//! state directory owned by the user running tunelab and writable by no one
//! else, and only for paths tunelab itself changes, reached without
//! symbolic links. Each probe of the issue is one test; none may change
//! anything outside its temporary directory.

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;

use common::Env;

/// A pid that is not running (a child that has been reaped).
fn dead_pid() -> u32 {
    let mut c = std::process::Command::new("true").spawn().unwrap();
    let pid = c.id();
    c.wait().unwrap();
    pid
}

fn text(o: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

struct Lab {
    env: Env,
    state: PathBuf,
    /// A marked test tree with a knob tunelab changes (vm.dirty_ratio).
    root: PathBuf,
}

impl Lab {
    fn new() -> Lab {
        let env = Env::new();
        let state = env.dir.path().join("state");
        fs::create_dir(&state).unwrap();
        fs::set_permissions(&state, fs::Permissions::from_mode(0o700)).unwrap();
        let root = env.dir.path().join("root");
        fs::create_dir_all(root.join("proc/sys/vm")).unwrap();
        fs::write(root.join(".tunelab-fake-root"), "test tree\n").unwrap();
        fs::write(root.join("proc/sys/vm/dirty_ratio"), "61").unwrap();
        Lab { env, state, root }
    }

    fn knob(&self) -> PathBuf {
        self.root.join("proc/sys/vm/dirty_ratio")
    }

    /// A journal left by a dead tunelab holding `saved` (JSON).
    fn journal(&self, saved: serde_json::Value) {
        let e = serde_json::json!([{
            "knob": "probe",
            "pid": dead_pid(),
            "pid_start": null,
            "started": "2026-11-27T00:00:00Z",
            "saved": saved,
        }]);
        let p = self.state.join("journal.json");
        fs::write(&p, serde_json::to_vec(&e).unwrap()).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o600)).unwrap();
    }

    fn dirty_ratio_entry(&self) -> serde_json::Value {
        serde_json::json!({"kind": "files", "files": [{
            "path": self.knob(), "original": "60", "applied": "61", "pending": null}]})
    }

    fn run(&self, args: &[&str]) -> Output {
        self.env
            .cmd()
            .env("TUNELAB_STATE_DIR", &self.state)
            .args(args)
            .output()
            .unwrap()
    }

    fn journal_left(&self) -> bool {
        self.state.join("journal.json").exists()
    }
}

fn read(p: &Path) -> String {
    fs::read_to_string(p).unwrap().trim().to_string()
}

#[test]
fn a_trusted_journal_of_a_dead_run_is_restored() {
    // The control for the refusals below: same journal, trusted directory.
    let l = Lab::new();
    l.journal(l.dirty_ratio_entry());
    let out = l.run(&["runs"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(read(&l.knob()), "60", "{}", text(&out));
    assert!(!l.journal_left());
}

#[test]
fn a_journal_others_may_write_is_refused_even_by_runs() {
    let l = Lab::new();
    l.journal(l.dirty_ratio_entry());
    // Group- or world-writable directory, then a writable journal file.
    fs::set_permissions(&l.state, fs::Permissions::from_mode(0o777)).unwrap();
    for args in [&["runs"][..], &["restore"][..]] {
        let out = l.run(args);
        assert_eq!(read(&l.knob()), "61", "{args:?}: {}", text(&out));
        let t = text(&out);
        assert!(t.contains("refused tunelab's state directory"), "{t}");
        assert!(t.contains("rm -r") && t.contains("ls -la"), "{t}");
    }
    assert_eq!(l.run(&["restore"]).status.code(), Some(4));
    fs::set_permissions(&l.state, fs::Permissions::from_mode(0o700)).unwrap();
    let j = l.state.join("journal.json");
    fs::set_permissions(&j, fs::Permissions::from_mode(0o622)).unwrap();
    let out = l.run(&["restore"]);
    assert_eq!(out.status.code(), Some(4), "{}", text(&out));
    assert!(
        text(&out).contains("writable by its group"),
        "{}",
        text(&out)
    );
    assert_eq!(read(&l.knob()), "61");
    assert!(l.journal_left());
}

#[test]
fn a_journal_owned_by_another_user_is_refused() {
    if !common::is_root() {
        return common::skip("needs root to give the state directory to another user");
    }
    let l = Lab::new();
    l.journal(l.dirty_ratio_entry());
    std::os::unix::fs::chown(&l.state, Some(65534), Some(65534)).unwrap();
    let out = l.run(&["runs"]);
    let t = text(&out);
    assert!(t.contains("owned by uid 65534"), "{t}");
    assert_eq!(read(&l.knob()), "61", "{t}");
    let out = l.run(&["restore"]);
    assert_eq!(out.status.code(), Some(4), "{}", text(&out));
    assert_eq!(read(&l.knob()), "61");
    // The journal file alone owned by someone else: refused too.
    std::os::unix::fs::chown(&l.state, Some(0), Some(0)).unwrap();
    std::os::unix::fs::chown(l.state.join("journal.json"), Some(65534), None).unwrap();
    let out = l.run(&["restore"]);
    assert_eq!(out.status.code(), Some(4), "{}", text(&out));
    assert_eq!(read(&l.knob()), "61");
}

/// Refused entries are dropped from the journal with their content shown,
/// and nothing is written.
fn refused(l: &Lab, saved: serde_json::Value, why: &str) {
    l.journal(saved);
    let out = l.run(&["restore"]);
    let t = text(&out);
    assert!(t.contains("refused a journal entry"), "{t}");
    assert!(t.contains(why), "{why}: {t}");
    assert!(!l.journal_left(), "{t}");
}

#[test]
fn a_journal_naming_core_pattern_or_a_foreign_file_is_refused() {
    let l = Lab::new();
    // Its own current value as the "original": even a failure of this test
    // cannot change the machine's core_pattern.
    let core = Path::new("/proc/sys/kernel/core_pattern");
    let before = fs::read_to_string(core).unwrap_or_default();
    refused(
        &l,
        serde_json::json!({"kind": "files", "files": [{
            "path": core, "original": before.trim(), "applied": "x", "pending": null}]}),
        "not a setting tunelab changes",
    );
    // A plain file below a marked tree that is no knob.
    let other = l.root.join("etc/passwd");
    fs::create_dir_all(other.parent().unwrap()).unwrap();
    fs::write(&other, "root:x:0:0\n").unwrap();
    refused(
        &l,
        serde_json::json!({"kind": "files", "files": [{
            "path": other, "original": "owned", "applied": "root:x:0:0", "pending": null}]}),
        "not a setting tunelab changes",
    );
    assert_eq!(fs::read_to_string(&other).unwrap(), "root:x:0:0\n");
}

#[test]
fn a_journal_remounting_the_root_file_system_is_refused() {
    let l = Lab::new();
    let mounts = || fs::read_to_string("/proc/self/mountinfo").unwrap();
    let before = mounts();
    refused(
        &l,
        serde_json::json!({"kind": "mount", "mount_point": "/", "original": ["ro"],
            "applied": null}),
        "root file system",
    );
    assert_eq!(mounts(), before);
}

#[test]
fn a_persist_entry_through_a_symlinked_directory_is_refused() {
    let l = Lab::new();
    let elsewhere = l.env.dir.path().join("elsewhere");
    fs::create_dir_all(&elsewhere).unwrap();
    fs::create_dir_all(l.root.join("etc")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, l.root.join("etc/sysctl.d")).unwrap();
    let via_link = l.root.join("etc/sysctl.d/90-tunelab-vm.dirty_ratio.conf");
    refused(
        &l,
        serde_json::json!({"kind": "persist", "files": [{
            "path": via_link, "before": "vm.dirty_ratio = 1\n", "after": null}]}),
        "symbolic link",
    );
    // A directory merely named tunelab* is not tunelab's either.
    let named = l.env.dir.path().join("tunelab-evil/x.conf");
    refused(
        &l,
        serde_json::json!({"kind": "persist", "files": [{
            "path": named, "before": "pwned\n", "after": null}]}),
        "not a file `tunelab apply` writes",
    );
    assert!(fs::read_dir(&elsewhere).unwrap().next().is_none());
    assert!(!named.exists());
}

#[test]
fn stale_temporary_journals_of_dead_runs_are_removed() {
    let l = Lab::new();
    let dead = l.state.join(format!("journal.json.{}", dead_pid()));
    let live = l.state.join(format!("journal.json.{}", std::process::id()));
    fs::write(&dead, "[").unwrap();
    fs::write(&live, "[").unwrap();
    let out = l.run(&["restore"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(!dead.exists());
    assert!(live.exists(), "a running process's temporary journal stays");
    // The next journal open (any verb) does it too.
    fs::write(&dead, "[").unwrap();
    let out = l.run(&["runs"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(!dead.exists());
}

/// `verify` run by another user says what it needs root for (reading
/// root's records), not that it "changes system configuration": it
/// changes nothing.
#[test]
fn verify_as_a_user_says_it_only_reads_roots_records() {
    if !common::is_root()
        || std::process::Command::new("setpriv")
            .arg("--help")
            .output()
            .is_err()
    {
        return common::skip("needs root and setpriv to run as another user");
    }
    let dir = tempfile::tempdir().unwrap();
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o777)).unwrap();
    let out = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(assert_cmd::cargo::cargo_bin("tunelab"))
        .arg("verify")
        .env("HOME", dir.path())
        .env("TUNELAB_DB", dir.path().join("none.db"))
        .env_remove("TUNELAB_STATE_DIR")
        .output()
        .unwrap();
    let t = text(&out);
    if t.contains("Permission denied") && t.contains("tunelab") && out.status.code() != Some(3) {
        return common::skip("the test binary is not readable by nobody here");
    }
    assert_eq!(out.status.code(), Some(3), "{t}");
    assert!(
        t.contains("verify changes nothing")
            && t.contains("needs root to read what apply recorded"),
        "{t}"
    );
    assert!(!t.contains("changes system configuration"), "{t}");
}
