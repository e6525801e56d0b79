//! CLI verdicts and exit codes on `test.scripted` runs: the trial values are
//! planted, so the outcome does not depend on a timing gap on a noisy
//! machine.

mod common;
use common::{json, stderr, Env};

const FAST: &[&str] = &["--quiet-check", "0", "--warmup", "0"];

fn scripted(env: &Env, values: &str, extra: &[&str]) -> std::process::Output {
    let p = format!("values={values}");
    let mut args = vec!["run", "test.scripted", "-p", &p];
    args.extend(FAST);
    args.extend(extra);
    env.run(&args)
}

#[test]
fn a_planted_regression_is_regressed_and_exits_5_on_request() {
    let env = Env::new();
    let base = scripted(&env, "1:1.01:0.99:1.02:0.98:1", &["--trials", "6"]);
    assert!(base.status.success(), "{}", stderr(&base));
    let slow = scripted(&env, "2:2.02:1.98:2.01:1.99:2", &["--trials", "6"]);
    assert!(slow.status.success(), "{}", stderr(&slow));

    let out = env.run(&["compare", "last~1", "last", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let m = &json(&out)["pairs"][0]["metrics"][0];
    assert_eq!(m["name"], "value", "{m}");
    assert_eq!(m["verdict"], "regressed", "{m}");
    // Medians 1.0 and 2.0 exactly: the planted values, nothing measured.
    assert_eq!(m["base_median"].as_f64(), Some(1.0), "{m}");
    assert_eq!(m["new_median"].as_f64(), Some(2.0), "{m}");

    // --trust-suspect: a busy machine's flagged trials must not hide the exit.
    let out = env.run(&[
        "compare",
        "last~1",
        "last",
        "--fail-on-regression",
        "--trust-suspect",
    ]);
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    // The other way round it is an improvement: no regression, exit 0.
    let out = env.run(&["compare", "last", "last~1", "--fail-on-regression"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn a_scripted_failure_exits_1_and_bad_values_exit_2() {
    let env = Env::new();
    let out = scripted(&env, "1", &["-p", "fail=2"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("fails as scripted"),
        "{}",
        stderr(&out)
    );
    let out = scripted(&env, "1:oops", &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("'oops'"), "{}", stderr(&out));
}

#[test]
fn the_scripted_experiment_is_hidden_but_runs() {
    let env = Env::new();
    let list = env.run(&["list"]);
    assert!(list.status.success());
    assert!(!String::from_utf8_lossy(&list.stdout).contains("test.scripted"));
    let help = env.run(&["run", "--help"]);
    assert!(!String::from_utf8_lossy(&help.stdout).contains("test.scripted"));
    let one = env.run(&["list", "test.scripted"]);
    assert!(one.status.success(), "{}", stderr(&one));
    let out = scripted(&env, "3:3:3", &["--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let doc = json(&out);
    let s = &doc["results"][0]["metrics"][0]["summary"];
    assert_eq!(s["mean"].as_f64(), Some(3.0), "{s}");
}
