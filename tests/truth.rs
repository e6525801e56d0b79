//! Measurement truth (issue 11 items 1, 2, 3, 6 and issue 13.9): tunelab's
//! figures checked against reference tools on the same machine, through
//! the real binary.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{json, stderr, Env};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn metric(result: &serde_json::Value, name: &str) -> Vec<f64> {
    result["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == name)
        .unwrap_or_else(|| panic!("no metric {name} in {result}"))["samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

/// `/usr/bin/time -f %M` of `argv`, KiB → B (median of 5); None without GNU time.
fn time_v_peak(argv: &[&str]) -> Option<f64> {
    if !Path::new("/usr/bin/time").exists() {
        eprintln!("skipped: /usr/bin/time missing (apt-get install time)");
        return None;
    }
    let v = (0..5)
        .map(|_| {
            let o = Command::new("/usr/bin/time")
                .args(["-f", "%M"])
                .args(argv)
                .output()
                .unwrap();
            let e = String::from_utf8_lossy(&o.stderr);
            e.lines().last().unwrap().trim().parse::<f64>().unwrap() * 1024.0
        })
        .collect();
    Some(median(v))
}

/// A small C program that touches `mib` MiB of heap and exits; None without cc.
fn allocator(dir: &Path, mib: u32) -> Option<PathBuf> {
    let src = dir.join("alloc.c");
    std::fs::write(
        &src,
        format!(
            "#include <stdlib.h>\nint main(void){{size_t n=(size_t){mib}<<20;\
             volatile char*p=malloc(n);for(size_t i=0;i<n;i+=4096)p[i]=1;return p[4096]-1;}}\n"
        ),
    )
    .unwrap();
    let bin = dir.join("alloc");
    match Command::new("cc")
        .args(["-O2", "-o"])
        .arg(&bin)
        .arg(&src)
        .status()
    {
        Ok(s) if s.success() => Some(bin),
        _ => {
            eprintln!("skipped: no C compiler (cc)");
            None
        }
    }
}

fn agree(what: &str, ours: f64, reference: f64) {
    let tol = (reference * 0.05).max(256.0 * 1024.0);
    assert!(
        (ours - reference).abs() <= tol,
        "{what}: tunelab {ours:.0} B vs /usr/bin/time -v {reference:.0} B (tolerance {tol:.0} B)"
    );
}

fn app_time_peak(env: &Env, command: &str) -> f64 {
    let t = env.target();
    let out = env.run(&[
        "run",
        "app.time",
        "--target",
        t.to_str().unwrap(),
        "--trials",
        "5",
        "--quiet-check",
        "0",
        "--no-store",
        "--json",
        "-p",
        &format!("command={command}"),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    median(metric(&json(&out)["results"][0], "peak_rss"))
}

fn memory_peak(env: &Env, argv: &[&str]) -> serde_json::Value {
    let mut args = vec!["memory", "--json", "--interval", "20ms", "--"];
    args.extend(argv);
    let out = env.run(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    json(&out)
}

/// Issue 11.1: app.time's and memory's peak RSS was tunelab's own (ru_maxrss
/// of a child spawned from tunelab includes tunelab's peak).
#[test]
fn peak_rss_agrees_with_time_v() {
    let env = Env::new();
    let Some(want_true) = time_v_peak(&["true"]) else {
        return;
    };
    agree("app.time true", app_time_peak(&env, "true"), want_true);
    let doc = memory_peak(&env, &["true"]);
    agree(
        "memory true",
        doc["peak"]["rss"].as_f64().unwrap(),
        want_true,
    );
    let Some(bin) = allocator(env.dir.path(), 48) else {
        return;
    };
    let b = bin.to_str().unwrap();
    let want = time_v_peak(&[b]).unwrap();
    assert!(want > 48.0 * 1048576.0, "the allocator touched {want} B");
    agree("app.time alloc 48 MiB", app_time_peak(&env, b), want);
    let doc = memory_peak(&env, &[b]);
    agree(
        "memory alloc 48 MiB",
        doc["peak"]["rss"].as_f64().unwrap(),
        want,
    );
}

/// Issue 13.9: `memory`'s first sample was taken at once after exec and
/// showed 4 KiB; it is now taken one interval later and says when.
#[test]
fn memory_first_sample_is_after_startup() {
    let env = Env::new();
    let out = env.run(&[
        "memory",
        "--json",
        "--interval",
        "50ms",
        "--",
        "sleep",
        "0.4",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let doc = json(&out);
    let first = &doc["process"][0];
    assert!(
        first["when"].as_str().unwrap().starts_with("first sample"),
        "{first}"
    );
    let at = first["at_s"].as_f64().expect("first sample has at_s");
    assert!(at >= 0.045, "first sample at {at} s");
    let rss = first["memory"]["rss"].as_f64().unwrap();
    assert!(rss > 256.0 * 1024.0, "first sample RSS {rss} B");
}

fn run_json(env: &Env, args: &[&str]) -> serde_json::Value {
    let out = env.run(args);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    json(&out)
}

/// Issue 11.6: io.device-read wrapped round a small device, re-reading it
/// from the page cache, and called that the device. Now every pass stops at
/// the end of the device and starts after a flush that mincore confirms.
#[test]
fn device_read_on_a_loop_device_checks_its_flush() {
    if !common::is_root() {
        eprintln!("skipped: needs root (losetup, mount)");
        return;
    }
    for tool in ["losetup", "mkfs.ext4", "mount", "umount"] {
        if Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .map_or(true, |o| !o.status.success())
        {
            eprintln!("skipped: {tool} missing");
            return;
        }
    }
    let env = Env::new();
    let img = env.dir.path().join("dev.img");
    let f = std::fs::File::create(&img).unwrap();
    f.set_len(96 << 20).unwrap();
    assert!(Command::new("mkfs.ext4")
        .args(["-q", "-F"])
        .arg(&img)
        .status()
        .unwrap()
        .success());
    let o = Command::new("losetup")
        .args(["-f", "--show"])
        .arg(&img)
        .output()
        .unwrap();
    if !o.status.success() {
        eprintln!(
            "skipped: losetup failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        return;
    }
    let dev = String::from_utf8_lossy(&o.stdout).trim().to_string();
    let mnt = env.dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let mounted = Command::new("mount")
        .arg(&dev)
        .arg(&mnt)
        .status()
        .unwrap()
        .success();
    let doc = mounted.then(|| {
        env.run(&[
            "run",
            "io.device-read",
            "--target",
            mnt.to_str().unwrap(),
            "-p",
            "source=device",
            "-p",
            "duration=1s",
            "--trials",
            "2",
            "--quiet-check",
            "0",
            "--no-store",
            "--json",
        ])
    });
    if mounted {
        let _ = Command::new("umount").arg(&mnt).status();
    }
    let _ = Command::new("losetup").args(["-d", &dev]).status();
    let out = doc.expect("mount of the loop device failed");
    assert!(out.status.success(), "{}", stderr(&out));
    let doc = json(&out);
    let r = &doc["results"][0];
    let resident = metric(r, "resident_after_flush");
    assert!(
        resident.iter().all(|&x| x <= 0.05),
        "flush left the cache full: {resident:?}"
    );
    let notes: Vec<String> = r["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_string())
        .collect();
    assert!(
        notes
            .iter()
            .any(|n| n.contains("stop at the end of the device")),
        "{notes:?}"
    );
    let buffered = median(metric(r, "buffered_read"));
    let cached = median(metric(r, "cached_read"));
    assert!(
        buffered < 0.5 * cached || notes.iter().any(|n| n.contains("memory speed")),
        "a device figure near the cached one ({buffered} vs {cached}) must be flagged: {notes:?}"
    );
}

/// Issue 11.3: test=both gave a different round trip than test=latency
/// (22-26 vs 50-58 us) because placement was left to the scheduler. With
/// the default placement (cpu=same) both runs are on one CPU; every trial
/// says where the two sides ran. (That they agree is a timing comparison:
/// bench/ipc_placement.sh prints the ratio, measured in one run.)
#[test]
fn ipc_placement_is_recorded_and_both_matches_latency() {
    let env = Env::new();
    let t = env.target();
    let run = |test: &str| {
        run_json(
            &env,
            &[
                "run",
                "ipc.pipe",
                "--target",
                t.to_str().unwrap(),
                "--trials",
                "5",
                "--warmup",
                "1",
                "--quiet-check",
                "0",
                "--no-store",
                "--json",
                "-p",
                &format!("test={test}"),
            ],
        )
    };
    let lat = run("latency");
    let both = run("both");
    let (rl, rb) = (&lat["results"][0], &both["results"][0]);
    assert_eq!(rl["params"]["cpu"], "same", "default placement");
    for r in [rl, rb] {
        assert!(metric(r, "rt_same_cpu").iter().all(|&x| x == 1.0), "{r}");
        let notes = r["notes"].to_string();
        assert!(
            notes.contains("placement (round trips, cpu=same)"),
            "{notes}"
        );
    }
    assert!(metric(rb, "bw_same_cpu").iter().all(|&x| x == 1.0));
    // Both measured the same round trips: positive, finite times, one per
    // trial. How close the two are is a timing comparison: it belongs to
    // bench/ipc_placement.sh (a shared, busy machine moves it freely).
    for r in [rl, rb] {
        let rt = metric(r, "round_trip");
        assert_eq!(rt.len(), 5, "{r}");
        assert!(rt.iter().all(|x| x.is_finite() && *x > 0.0), "{rt:?}");
    }
    assert_eq!(rb["params"]["cpu"], rl["params"]["cpu"], "same placement");
}
