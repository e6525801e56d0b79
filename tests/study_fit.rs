//! A study killed mid-way (the out-of-memory killer, a power user's
//! kill -9) leaves its scratch directory on the target; the next tunelab
//! command, whatever it is, removes it (issue 44), as `restore` does.

mod common;

use std::time::{Duration, Instant};

use common::{list, Env};

#[test]
fn the_next_tunelab_removes_the_scratch_of_a_killed_study() {
    let env = Env::new();
    let state = env.dir.path().join("state");
    let profile = env.dir.path().join("long.toml");
    std::fs::write(
        &profile,
        r#"
name = "long"
title = "File creation until killed"

[[issue]]
name = "File creation rate"
experiment = "io.metadata"
params = { files = 2000, level = "none" }
trials = 100000
"#,
    )
    .unwrap();
    let target = env.target();
    let mut child = env
        .background()
        .env("TUNELAB_STATE_DIR", &state)
        .args(["study", profile.to_str().unwrap(), "--target"])
        .arg(&target)
        .args(["--quiet-check", "0"])
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while list(&target).is_empty() {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "no scratch directory appeared in {}",
            target.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Well inside the trials: the scratch directory and its files exist.
    std::thread::sleep(Duration::from_millis(300));
    child.kill().unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), None, "killed by a signal");
    let left = list(&target);
    assert!(
        left.iter().any(|n| n.starts_with(".tunelab-scratch-")),
        "the killed study left {left:?}"
    );
    // Any command: `runs` touches no target, yet the journal names it.
    let out = env
        .cmd()
        .env("TUNELAB_STATE_DIR", &state)
        .arg("runs")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(list(&target), Vec::<String>::new(), "scratch left behind");
}
