//! The exports other tools read, read back by those tools' own parsers:
//! OpenMetrics by `promtool check metrics`, JUnit XML by `xmllint` against
//! the Jenkins xunit JUnit schema, pprof by `go tool pprof -raw`, speedscope
//! by its published JSON schema (python jsonschema), folded stacks by
//! inferno; BMF and LAVA lines, which have no installable checker, by a
//! strict structural check (LAVA lines through `sh` with a stand-in
//! `lava-test-case` that prints the argv it got). A test whose consumer is
//! absent prints why and passes; scripts/ci-consumers.sh installs them all.
//! The figures come from `test.scripted` runs, whose trial values are
//! planted, so the expected values are known exactly.

mod common;
use common::{skip, stderr, Env};

use std::path::{Path, PathBuf};
use std::process::Command;

const FAST: &[&str] = &["--quiet-check", "0", "--warmup", "0"];

/// Where scripts/ci-consumers.sh puts the schemas it downloads.
fn consumers() -> PathBuf {
    std::env::var_os("TUNELAB_CONSUMERS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/opt/tunelab-consumers"))
}

fn have(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program} >/dev/null")])
        .status()
        .is_ok_and(|s| s.success())
}

fn scripted(env: &Env, values: &str, extra: &[&str]) {
    let p = format!("values={values}");
    let mut args = vec!["run", "test.scripted", "-p", &p];
    args.extend(FAST);
    args.extend(extra);
    let out = env.run(&args);
    assert!(out.status.success(), "{}", stderr(&out));
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// `promtool check metrics` (the Prometheus parser and linter) accepts the
/// file: exit 0 and no lint problem.
fn promtool_accepts(path: &Path) {
    if !have("promtool") {
        return skip("promtool is not installed (Debian package prometheus)");
    }
    let out = Command::new("sh")
        .arg("-c")
        .arg("promtool check metrics < \"$1\"")
        .arg("sh")
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "promtool: {}{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        stderr(&out),
        read(path)
    );
}

/// xmllint validates the file against the JUnit schema of Jenkins' xunit
/// plugin.
fn junit_schema_accepts(path: &Path) {
    let xsd = consumers().join("junit-10.xsd");
    if !have("xmllint") || !xsd.exists() {
        return skip(&format!(
            "xmllint or {} is missing (scripts/ci-consumers.sh installs them)",
            xsd.display()
        ));
    }
    let out = Command::new("xmllint")
        .arg("--noout")
        .arg("--schema")
        .arg(&xsd)
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "xmllint: {}\n{}",
        stderr(&out),
        read(path)
    );
}

/// Every line is a `lava-test-case` call that a shell splits into exactly
/// the arguments LAVA's script takes.
fn lava_lines_parse(text: &str, expect_fail: usize) {
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("lava-test-case "))
        .collect();
    assert!(!lines.is_empty(), "no lava-test-case line in:\n{text}");
    // A stand-in lava-test-case on PATH (a shell function may not have a
    // '-' in its name in POSIX sh) that prints its argc and argv.
    let bin = tempfile::tempdir().unwrap();
    let stub = bin.path().join("lava-test-case");
    std::fs::write(&stub, "#!/bin/sh\nprintf '%s|' \"$#\" \"$@\"; echo\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&stub, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("sh")
        .arg("-c")
        .arg(lines.join("\n"))
        .env("PATH", path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let mut fails = 0;
    for argv in String::from_utf8_lossy(&out.stdout).lines() {
        let a: Vec<&str> = argv.trim_end_matches('|').split('|').collect();
        let n: usize = a[0].parse().unwrap();
        assert!(n == 3 || n == 7, "argc {n}: {argv}");
        assert!(
            a[1].chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)),
            "test case name {argv}"
        );
        assert_eq!(a[2], "--result", "{argv}");
        assert!(["pass", "fail", "unknown"].contains(&a[3]), "{argv}");
        fails += usize::from(a[3] == "fail");
        if n == 7 {
            assert_eq!((a[4], a[6]), ("--measurement", "--units"), "{argv}");
            assert!(a[5].parse::<f64>().is_ok_and(f64::is_finite), "{argv}");
            assert!(!a[7].is_empty(), "{argv}");
        }
    }
    assert_eq!(fails, expect_fail, "{text}");
}

/// A BMF document: benchmarks → measures → {value, lower_value,
/// upper_value}, numbers with lower ≤ value ≤ upper.
fn bmf_measures(text: &str) -> Vec<(String, String, f64, f64, f64)> {
    let v: serde_json::Value = serde_json::from_str(text).unwrap();
    let mut out = Vec::new();
    for (bench, measures) in v.as_object().expect("BMF is an object") {
        for (measure, m) in measures.as_object().expect("measures are an object") {
            let o = m.as_object().expect("a measure is an object");
            for k in o.keys() {
                assert!(
                    ["value", "lower_value", "upper_value"].contains(&k.as_str()),
                    "unknown key {k}"
                );
            }
            let f = |k: &str| o[k].as_f64().unwrap_or_else(|| panic!("{k} in {m}"));
            let (v, lo, hi) = (f("value"), f("lower_value"), f("upper_value"));
            assert!(lo <= v && v <= hi, "{bench}/{measure}: {lo} {v} {hi}");
            out.push((bench.clone(), measure.clone(), v, lo, hi));
        }
    }
    out
}

#[test]
fn a_runs_exports_are_read_by_their_consumers() {
    let env = Env::new();
    let d = env.dir.path();
    let (junit, bmf, om) = (d.join("r.xml"), d.join("r.bmf.json"), d.join("r.om"));
    let p = "values=2:2.2:1.8:2.1:1.9";
    let out = env
        .cmd()
        .args(["run", "test.scripted", "-p", p])
        .args(FAST)
        .arg("--export-junit")
        .arg(&junit)
        .arg("--export-bmf")
        .arg(&bmf)
        .arg("--export-openmetrics")
        .arg(&om)
        .arg("--lava")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    lava_lines_parse(&stdout, 0);
    assert!(stdout.contains("--measurement 2 --units"), "{stdout}");

    promtool_accepts(&om);
    let om_text = read(&om);
    assert!(om_text.ends_with("# EOF\n"), "{om_text}");
    let median_line = om_text
        .lines()
        .find(|l| l.starts_with("tunelab_result_median{"))
        .unwrap_or_else(|| panic!("{om_text}"));
    assert!(median_line.contains("metric=\"value\""), "{median_line}");
    assert!(median_line.ends_with(" 2"), "{median_line}");

    junit_schema_accepts(&junit);
    let x = read(&junit);
    assert!(x.contains("<testcase classname=\"test.scripted\""), "{x}");
    assert!(!x.contains("<failure"), "{x}");

    let m = bmf_measures(&read(&bmf));
    assert_eq!(m.len(), 1, "{m:?}");
    assert!(m[0].0.starts_with("test.scripted"), "{m:?}");
    assert_eq!((m[0].1.as_str(), m[0].2), ("value", 2.0), "{m:?}");
}

#[test]
fn a_regression_is_a_junit_failure_and_a_lava_fail_with_its_figures() {
    let env = Env::new();
    scripted(&env, "1:1.01:0.99:1.02:0.98:1", &["--trials", "6"]);
    scripted(&env, "2:2.02:1.98:2.01:1.99:2", &["--trials", "6"]);
    let d = env.dir.path();
    let (junit, bmf, om) = (d.join("c.xml"), d.join("c.bmf.json"), d.join("c.om"));
    let out = env
        .cmd()
        .args(["compare", "last~1", "last", "--lava", "--export-junit"])
        .arg(&junit)
        .arg("--export-bmf")
        .arg(&bmf)
        .arg("--export-openmetrics")
        .arg(&om)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    lava_lines_parse(&String::from_utf8_lossy(&out.stdout), 1);

    junit_schema_accepts(&junit);
    let x = read(&junit);
    assert!(x.contains("failures=\"1\""), "{x}");
    let failure = x
        .lines()
        .find(|l| l.contains("<failure"))
        .unwrap_or_else(|| panic!("{x}"));
    assert!(failure.contains("regressed"), "{failure}");
    assert!(failure.contains("ratio 2.000"), "{failure}");

    promtool_accepts(&om);
    let om_text = read(&om);
    // The regression counts as suspect when the validity guard flagged its
    // trials (another process kept a CPU busy): one of the two gauges says 1.
    let gauge = |name: &str| {
        om_text
            .lines()
            .find(|l| l.starts_with(&format!("{name}{{base=")))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or_else(|| panic!("no {name}: {om_text}"))
    };
    assert_eq!(
        gauge("tunelab_comparison_regressions") + gauge("tunelab_comparison_suspect_regressions"),
        1.0,
        "{om_text}"
    );
    let m = bmf_measures(&read(&bmf));
    assert_eq!((m[0].1.as_str(), m[0].2), ("ratio", 2.0), "{m:?}");
}

#[test]
fn an_export_the_subject_cannot_have_is_refused_before_measuring() {
    let env = Env::new();
    scripted(&env, "1:1", &[]);
    let out = env.run(&["export", "last", "--format", "pprof"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("diagnosis"), "{}", stderr(&out));
    let existing = env.dir.path().join("exists.xml");
    std::fs::write(&existing, "keep").unwrap();
    let p = existing.to_string_lossy().into_owned();
    let out = env.run(&["run", "test.scripted", "--export-junit", &p]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("already exists"), "{}", stderr(&out));
    assert_eq!(read(&existing), "keep");
}

/// A stored diagnosis with a CPU profile (from the yield fixture) and
/// off-CPU stacks added here, imported into a fresh store.
fn diagnosis_run(env: &Env) -> (u64, u64) {
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/diagnose/yield-run.json"
    );
    let mut v: serde_json::Value = serde_json::from_str(&read(Path::new(fixture))).unwrap();
    v["diagnosis"]["offcpu"]["data"]["folded"] = serde_json::json!([
        { "stack": "main;worker;pthread_mutex_lock;futex_wait", "samples": 1500 },
        { "stack": "main;fsync;ext4_sync_file", "samples": 250 }
    ]);
    let cpu: u64 = v["diagnosis"]["profile"]["data"]["folded"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["samples"].as_u64().unwrap())
        .sum();
    let path = env.dir.path().join("diag.json");
    std::fs::write(&path, v.to_string()).unwrap();
    let out = env.cmd().arg("import").arg(&path).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    (cpu, 1750)
}

fn export_to(env: &Env, format: &str) -> PathBuf {
    let path = env.dir.path().join(format!("profile.{format}"));
    let out = env
        .cmd()
        .args(["export", "last", "--format", format, "--output"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{format}: {}", stderr(&out));
    path
}

#[test]
fn pprof_is_read_by_go_tool_pprof() {
    let env = Env::new();
    let (cpu, offcpu) = diagnosis_run(&env);
    let path = export_to(&env, "pprof");
    if !have("go") {
        return skip("go is not installed (Debian package golang-go): go tool pprof");
    }
    let out = Command::new("go")
        .args(["tool", "pprof", "-raw"])
        .arg(&path)
        .env("HOME", env.dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "go tool pprof: {}", stderr(&out));
    let raw = String::from_utf8_lossy(&out.stdout);
    assert!(raw.contains("samples/count off_cpu/microseconds"), "{raw}");
    // -raw prints each sample as "VALUES: location ids"; the columns sum to
    // the stored profiles' totals.
    let mut sums = [0u64; 2];
    let samples = raw.split("Samples:").nth(1).unwrap_or_default();
    for line in samples.lines().take_while(|l| !l.starts_with("Locations")) {
        let Some((values, _)) = line.split_once(':') else {
            continue;
        };
        let v: Vec<u64> = values
            .split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect();
        if v.len() == 2 {
            sums[0] += v[0];
            sums[1] += v[1];
        }
    }
    assert_eq!(sums, [cpu, offcpu], "{raw}");
    assert!(raw.contains("futex_wait"), "{raw}");
}

#[test]
fn speedscope_matches_its_published_schema() {
    let env = Env::new();
    let (cpu, offcpu) = diagnosis_run(&env);
    let path = export_to(&env, "speedscope");
    let doc: serde_json::Value = serde_json::from_str(&read(&path)).unwrap();
    let weights = |i: usize| -> u64 {
        doc["profiles"][i]["weights"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w.as_u64().unwrap())
            .sum()
    };
    assert_eq!((weights(0), weights(1)), (cpu, offcpu));
    assert_eq!(doc["profiles"][1]["unit"], "microseconds");
    let schema = consumers().join("speedscope-schema.json");
    let ok = Command::new("python3")
        .args(["-c", "import jsonschema"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok || !schema.exists() {
        return skip(&format!(
            "python3 jsonschema or {} is missing (scripts/ci-consumers.sh)",
            schema.display()
        ));
    }
    let out = Command::new("python3")
        .args([
            "-c",
            "import json,sys,jsonschema; jsonschema.validate(json.load(open(sys.argv[2])), \
             json.load(open(sys.argv[1])))",
        ])
        .arg(&schema)
        .arg(&path)
        .output()
        .unwrap();
    assert!(out.status.success(), "jsonschema: {}", stderr(&out));
}

#[test]
fn folded_stacks_are_read_by_inferno() {
    let env = Env::new();
    let (cpu, offcpu) = diagnosis_run(&env);
    for (format, total) in [("folded", cpu), ("folded-off-cpu", offcpu)] {
        let text = read(&export_to(&env, format));
        let sum: u64 = text
            .lines()
            .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
            .sum();
        assert_eq!(sum, total, "{format}: {text}");
        #[cfg(feature = "flamegraph")]
        {
            let mut svg = Vec::new();
            let mut opts = inferno::flamegraph::Options::default();
            inferno::flamegraph::from_lines(&mut opts, text.lines(), &mut svg)
                .unwrap_or_else(|e| panic!("inferno rejects {format}: {e}"));
            assert!(String::from_utf8_lossy(&svg).contains("<svg"));
        }
    }
}

#[test]
fn bash_completion_offers_experiments_knobs_and_runs() {
    let env = Env::new();
    scripted(&env, "1:1", &[]);
    let out = env.run(&["completions", "bash"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let script = String::from_utf8_lossy(&out.stdout).into_owned();
    for word in ["io.cache", "cpu.clock", "vm.dirty_ratio", "read_ahead_kb"] {
        assert!(script.contains(word), "no {word} in the bash script");
    }
    assert!(!script.contains("@tunelab-run-ids@"), "placeholder left");
    let ids = env.run(&["completions", "run-ids"]);
    assert!(ids.status.success(), "{}", stderr(&ids));
    let ids = String::from_utf8_lossy(&ids.stdout).into_owned();
    let id = ids
        .lines()
        .nth(1)
        .unwrap_or_else(|| panic!("{ids}"))
        .to_string();
    if !have("bash") {
        return skip("bash is not installed");
    }
    // Complete as bash does, with the binary on PATH for the run ids.
    let bin = assert_cmd::cargo::cargo_bin("tunelab");
    let dir = bin.parent().unwrap();
    let file = env.dir.path().join("tunelab.bash");
    std::fs::write(&file, &script).unwrap();
    let complete = |words: &str| -> String {
        let sh = format!(
            "source \"$1\"; COMP_WORDS=({words}); COMP_CWORD=$((${{#COMP_WORDS[@]}}-1)); \
             COMP_LINE=\"${{COMP_WORDS[*]}}\"; COMP_POINT=${{#COMP_LINE}}; \
             _tunelab tunelab \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"; \
             printf '%s\\n' \"${{COMPREPLY[@]}}\""
        );
        let out = Command::new("bash")
            .arg("-c")
            .arg(&sh)
            .arg("bash")
            .arg(&file)
            .env("TUNELAB_DB", env.db())
            .env(
                "PATH",
                format!(
                    "{}:{}",
                    dir.display(),
                    std::env::var("PATH").unwrap_or_default()
                ),
            )
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let run = complete("tunelab run io.");
    assert!(run.lines().any(|l| l == "io.cache"), "{run}");
    let tune = complete("tunelab tune vm.dirty_r");
    assert!(tune.lines().any(|l| l == "vm.dirty_ratio"), "{tune}");
    let show = complete("tunelab show ''");
    assert!(show.lines().any(|l| l == id), "{show}");
    assert!(show.lines().any(|l| l == "last"), "{show}");
}
