//! The lmbench-class experiments (mem.*, ipc.*, sched.*) through the real
//! binary with tiny parameters: JSON document, metrics, series, bad input.

mod common;

use common::{json, stderr, Env};

const FAST: &[&str] = &[
    "--trials",
    "2",
    "--warmup",
    "0",
    "--quiet-check",
    "0",
    "--no-store",
    "--json",
];

fn run(env: &Env, exp: &str, params: &[&str]) -> std::process::Output {
    let t = env.target();
    let mut args = vec!["run", exp, "--target", t.to_str().unwrap()];
    args.extend(FAST);
    for p in params {
        args.extend(["-p", p]);
    }
    env.run(&args)
}

/// Run, check the document, and return its results.
fn results(exp: &str, params: &[&str], metrics: &[&str]) -> Vec<serde_json::Value> {
    let env = Env::new();
    let out = run(&env, exp, params);
    assert!(out.status.success(), "{exp}: {}", stderr(&out));
    let doc = json(&out);
    assert_eq!(doc["schema"], "tunelab.run/1");
    let results = doc["results"].as_array().expect("results").clone();
    assert!(!results.is_empty());
    for r in &results {
        assert_eq!(r["experiment"], exp);
        for name in metrics {
            let m = r["metrics"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["name"] == *name)
                .unwrap_or_else(|| panic!("{exp}: metric {name} missing: {r}"));
            assert_eq!(m["samples"].as_array().unwrap().len(), 2);
            let med = m["summary"]["median"].as_f64().unwrap();
            assert!(med > 0.0 && med.is_finite(), "{exp} {name} = {med}");
        }
    }
    assert!(env.leftovers().is_empty(), "scratch left behind");
    results
}

fn series(r: &serde_json::Value) -> Vec<serde_json::Value> {
    r["series"].as_array().cloned().unwrap_or_default()
}

fn bad(exp: &str, params: &[&str], says: &str) {
    let env = Env::new();
    let out = run(&env, exp, params);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{exp} {params:?}: {}",
        stderr(&out)
    );
    let err = stderr(&out);
    assert!(err.contains(says), "{exp} {params:?}: {err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn ipc_pipe_latency_and_bandwidth() {
    let r = results("ipc.pipe", &[], &["round_trip", "bandwidth"]);
    assert_eq!(r[0]["histograms"][0]["name"], "round_trip");
    let rt = r[0]["metrics"][0]["summary"]["median"].as_f64().unwrap();
    assert!(rt < 0.01, "a pipe round trip of {rt} s");
    results("ipc.pipe", &["test=latency", "cpu=same"], &["round_trip"]);
}

#[test]
fn ipc_unix_and_fifo() {
    results("ipc.unix", &["chunk=16k"], &["round_trip", "bandwidth"]);
    results("ipc.fifo", &[], &["round_trip"]);
}

#[test]
fn sched_messaging_sweeps_groups() {
    let r = results(
        "sched.messaging",
        &["groups=1,2", "pairs=4", "loops=20"],
        &["total_time", "message_rate"],
    );
    assert_eq!(r.len(), 2);
    results(
        "sched.messaging",
        &["groups=1", "pairs=3", "loops=10", "ipc=pipe", "size=1000"],
        &["total_time", "message_rate"],
    );
}

#[test]
fn mem_bandwidth_kernels_and_curve() {
    let r = results(
        "mem.bandwidth",
        &["size=4M", "kernel=read,write,rmw,copy,triad", "threads=1"],
        &["bandwidth"],
    );
    assert_eq!(r.len(), 5);
    for x in &r {
        let s = series(x);
        assert_eq!(s.len(), 1, "one curve per kernel");
        let pts = s[0]["points"].as_array().unwrap();
        assert!(pts.len() >= 10);
        assert_eq!(pts.last().unwrap()[0].as_f64().unwrap(), (4 << 20) as f64);
    }
    let r = results(
        "mem.bandwidth",
        &["size=4M", "kernel=copy", "threads=all", "sweep=no"],
        &["bandwidth"],
    );
    assert!(series(&r[0]).is_empty());
}

#[test]
fn mem_latency_curve_has_two_series() {
    let r = results(
        "mem.latency",
        &["max=2M", "per-doubling=2", "stride=128"],
        &["lat_mem", "lat_mem_stride"],
    );
    let s = series(&r[0]);
    assert_eq!(s.len(), 2);
    let random = s[0]["points"].as_array().unwrap();
    assert_eq!(random.len(), 23, "1 KiB .. 2 MiB, 2 per doubling");
    assert!(random.iter().all(|p| p[1].as_f64().unwrap() > 0.0));
    let notes = r[0]["notes"].to_string();
    assert!(notes.contains("THP"), "{notes}");
    results(
        "mem.latency",
        &["max=1M", "pages=thp", "curve=no"],
        &["lat_mem", "lat_mem_stride"],
    );
}

#[test]
fn mem_mmap_read_once_and_each() {
    let r = results(
        "mem.mmap-read",
        &["size=4M", "map=once,each"],
        &["read_throughput"],
    );
    assert_eq!(r.len(), 2);
    assert_eq!(r[0]["params"]["map"], "once");
    assert_eq!(r[1]["params"]["map"], "each");
    let notes = r[1]["notes"].to_string();
    assert!(notes.contains("munmap"), "{notes}");
}

#[test]
fn ipc_ctxsw_ring_and_curves() {
    let r = results(
        "ipc.ctxsw",
        &["procs=2,4", "size=0,16k", "cpu=same"],
        &["ctxsw", "hop"],
    );
    assert_eq!(r.len(), 4, "2 sizes x 2 ring sizes");
    for (i, x) in r.iter().enumerate() {
        let hop = x["metrics"][1]["summary"]["median"].as_f64().unwrap();
        assert!(hop < 0.01, "a ring hop of {hop} s");
        let s = series(x);
        assert_eq!(s.len(), 1);
        let pts = s[0]["points"].as_array().unwrap();
        // procs varies fastest: the second point of each size has the whole curve.
        assert_eq!(pts.len(), i % 2 + 1, "{x}");
        assert!(s[0]["name"].as_str().unwrap().contains("cpu=same"));
    }
    assert!(r[0]["notes"].to_string().contains("overhead"));
    results(
        "ipc.ctxsw",
        &["procs=3", "size=4k", "cpu=any"],
        &["ctxsw", "hop"],
    );
}

#[test]
fn bad_parameters_are_usage_errors() {
    bad("mem.latency", &["max=0"], "out of range");
    bad("mem.latency", &["max=64k", "stride=64k"], "stride");
    bad("mem.latency", &["stride=24"], "multiple of 16");
    bad("mem.latency", &["min=1M", "max=64k"], "min");
    bad("mem.bandwidth", &["size=0"], "out of range");
    bad("mem.bandwidth", &["size=1T"], "memory");
    bad("ipc.pipe", &["chunk=0"], "out of range");
    bad("sched.messaging", &["groups=0"], "out of range");
    bad(
        "sched.messaging",
        &["groups=10000", "pairs=1000"],
        "processes",
    );
    bad("mem.mmap-read", &["size=0"], "out of range");
    bad("mem.mmap-read", &["size=60G"], "page cache");
    bad("mem.mmap-read", &["map=twice"], "map");
    bad("ipc.ctxsw", &["procs=1"], "out of range");
    bad("ipc.ctxsw", &["procs=8000000"], "processes");
    bad("ipc.ctxsw", &["cpu=split"], "cpu");
    bad("ipc.ctxsw", &["procs=30000", "size=64M"], "memory");
}

/// Run with stdout/stderr discarded and return the exit code and the
/// child's peak RSS (wait4's ru_maxrss) in bytes.
fn peak_rss(env: &Env, exp: &str, params: &[&str]) -> (i32, u64) {
    use std::os::unix::process::ExitStatusExt;
    let t = env.target();
    let mut cmd = env.background();
    cmd.args(["run", exp, "--target", t.to_str().unwrap()])
        .args(FAST);
    for p in params {
        cmd.args(["-p", p]);
    }
    // Reaped by wait4 below, which also gives the rusage.
    #[allow(clippy::zombie_processes)]
    let child = cmd.spawn().expect("spawn tunelab");
    let mut status = 0;
    // SAFETY: rusage is plain data filled by wait4 for our own child.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut ru) };
    assert_eq!(pid, child.id() as i32, "wait4");
    let code = std::process::ExitStatus::from_raw(status)
        .code()
        .unwrap_or(-1);
    (code, ru.ru_maxrss as u64 * 1024)
}

#[test]
fn peak_rss_is_the_arrays_plus_a_few_mb() {
    const MIB: u64 = 1 << 20;
    let env = Env::new();
    for (exp, params, arrays) in [
        (
            "mem.bandwidth",
            &["kernel=copy", "threads=1", "sweep=no", "size=64M"][..],
            128 * MIB,
        ),
        ("mem.latency", &["max=64M", "curve=no"][..], 64 * MIB),
    ] {
        let (code, rss) = peak_rss(&env, exp, params);
        assert_eq!(code, 0, "{exp}");
        // The arrays are really touched, and nothing else grows with them.
        assert!(
            rss > arrays && rss < arrays + 16 * MIB,
            "{exp}: peak RSS {} MiB for {} MiB of arrays",
            rss / MIB,
            arrays / MIB
        );
    }
    assert!(env.leftovers().is_empty());
}

#[test]
fn trial_time_sets_how_long_a_trial_repeats_its_work() {
    let env = Env::new();
    let t = env.target();
    let pipe = |extra: &[&str]| {
        let mut args = vec!["run", "ipc.pipe", "--target", t.to_str().unwrap()];
        args.extend(FAST);
        args.extend(["-p", "test=latency"]);
        args.extend(extra);
        env.run(&args)
    };
    let notes = |out: &std::process::Output| {
        assert!(out.status.success(), "{}", stderr(out));
        json(out)["results"][0]["notes"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|n| n.as_str().map(String::from))
            .collect::<Vec<_>>()
    };
    let default = notes(&pipe(&[]));
    assert!(
        default
            .iter()
            .any(|n| n.contains("until a trial lasts 200 ms")),
        "{default:?}"
    );
    assert!(!default.iter().any(|n| n.starts_with("trial time")));
    let short = notes(&pipe(&["--trial-time", "30ms"]));
    assert!(
        short
            .iter()
            .any(|n| n.contains("until a trial lasts 30 ms")),
        "{short:?}"
    );
    assert!(
        short
            .iter()
            .any(|n| n.starts_with("trial time 30 ms (default 200 ms)")),
        "{short:?}"
    );
    let out = pipe(&["--trial-time", "2m"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("1ms to 60s"), "{}", stderr(&out));
}
