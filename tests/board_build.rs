//! The board build (`--no-default-features`, as scripts/build-static.sh
//! builds it): no PostgreSQL client, SQLite and reports still work.
//! Run with `cargo test --no-default-features --test board_build`.

mod common;

#[cfg(not(feature = "fleet"))]
#[test]
fn a_postgres_url_is_a_clear_usage_error_in_a_board_build() {
    let env = common::Env::new();
    let out = env.run(&["--db", "postgres://fleet:s3cret@127.0.0.1/tunelab", "runs"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("this build has no PostgreSQL client") && err.contains("SQLite path"),
        "{err}"
    );
    assert!(!err.contains("s3cret"), "{err}");
}

#[cfg(not(feature = "fleet"))]
#[test]
fn a_board_build_stores_in_sqlite_and_reports() {
    let env = common::Env::new();
    let out = env.run(&[
        "run",
        "work.sort",
        "-p",
        "n=1000",
        "--trials",
        "2",
        "--quiet-check",
        "0",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let runs = common::json(&env.run(&["--json", "runs"]));
    assert_eq!(runs.as_array().map(|a| a.len()), Some(1), "{runs}");
    let html = env.dir.path().join("r.html");
    let out = env.run(&["report", "last", "-o", html.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(std::fs::read_to_string(&html)
        .unwrap()
        .contains("work.sort"));
}

#[cfg(not(feature = "completions"))]
#[test]
fn completions_and_man_pages_left_out_of_a_board_build_say_where_to_get_them() {
    let env = common::Env::new();
    for (shell, what) in [("bash", "shell completions"), ("man", "man pages")] {
        let out = env.run(&["completions", shell]);
        assert_eq!(out.status.code(), Some(2), "completions {shell}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!("built without {what}"))
                && err.contains(&format!("tunelab completions {shell}"))
                && err.contains("host build"),
            "{err}"
        );
        assert!(
            out.stdout.is_empty(),
            "nothing printed for completions {shell}"
        );
    }
}
