//! Issue 5 through the real binary: monitor views, time, memory, bad input.

mod common;

use common::{json, stderr, Env};

#[test]
fn monitor_vmstat_json_lines_flushed_per_sample() {
    let env = Env::new();
    let out = env.run(&[
        "monitor",
        "vmstat",
        "--interval",
        "200ms",
        "--count",
        "3",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    assert_eq!(lines.len(), 3);
    for (i, l) in lines.iter().enumerate() {
        assert_eq!(l["view"], "vmstat");
        assert_eq!(l["sample"], i as u64 + 1);
        let cpu: f64 = ["us", "sy", "id", "wa", "st"]
            .iter()
            .map(|k| l[*k].as_f64().unwrap())
            .sum();
        assert!((95.0..=105.0).contains(&cpu), "{cpu}");
        assert!(l["hints"].is_array());
    }
}

#[test]
fn monitor_views_table_and_openmetrics() {
    let env = Env::new();
    for view in ["iostat", "hogs", "irq", "dirty"] {
        let out = env.run(&["monitor", view, "-i", "200ms", "-c", "1"]);
        assert!(out.status.success(), "{view}: {}", stderr(&out));
        assert!(!out.stdout.is_empty(), "{view}");
    }
    let out = env.run(&[
        "monitor",
        "vmstat",
        "-i",
        "200ms",
        "-c",
        "1",
        "--format",
        "openmetrics",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("# TYPE tunelab_vmstat_context_switches_per_second gauge"));
    assert!(text.trim_end().ends_with("# EOF"));
    // The dirty view always ends with its summary and recommendation.
    let out = env.run(&["monitor", "dirty", "-i", "200ms", "-c", "2"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("least available memory"), "{text}");
    assert!(
        text.contains("vm.dirty_ratio + vm.dirty_background_ratio"),
        "{text}"
    );
    // psi / power / slab: data, or a clear message with an error code.
    for view in ["psi", "power", "slab"] {
        let out = env.run(&["monitor", view, "-i", "200ms", "-c", "1"]);
        let code = out.status.code().unwrap();
        assert!(code == 0 || code == 3 || code == 4, "{view}: {code}");
        if code != 0 {
            assert!(stderr(&out).contains("tunelab: error:"), "{view}");
        }
    }
}

#[test]
fn monitor_stops_cleanly_on_sigint() {
    let c = std::process::Command::new(assert_cmd::cargo::cargo_bin("tunelab"))
        .args(["monitor", "dirty", "-i", "200ms"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(700));
    unsafe { libc::kill(c.id() as i32, libc::SIGINT) };
    let t = std::time::Instant::now();
    let out = c.wait_with_output().unwrap();
    // It ends on the first SIGINT (a generous bound: a busy machine may be
    // slow to schedule it; a monitor that ignored the signal never ends).
    assert!(t.elapsed().as_secs() < 10, "{:?}", t.elapsed());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("dirty watch summary"), "{text}");
}

#[test]
fn bad_input_exit_codes() {
    let env = Env::new();
    for (args, code) in [
        (vec!["monitor", "nosuchview"], 2),
        (vec!["monitor", "vmstat", "--interval", "0"], 2),
        (vec!["monitor", "vmstat", "--interval", "-1"], 2),
        (vec!["monitor", "iostat", "-d", "nosuchdisk", "-c", "1"], 2),
        (vec!["memory", "--pid", "999999999"], 2),
        (vec!["memory"], 2),
        (vec!["time", "--no-store", "--", "no-such-command-xyz"], 2),
        (vec!["time", "--no-store"], 2),
        (vec!["time", "--no-store", "--ready", "(", "--", "true"], 2),
    ] {
        let out = env.run(&args);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("error"), "{args:?}");
    }
}

#[test]
fn time_is_stored_and_comparable() {
    let env = Env::new();
    let out = env.run(&[
        "time",
        "--json",
        "--runs",
        "5",
        "-c",
        "sleep 0.02",
        "-c",
        "sleep 0.04",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let doc = json(&out);
    assert_eq!(doc["results"][0]["experiment"], "app.time");
    assert_eq!(doc["results"][0]["params"]["command"], "sleep 0.02");
    let names: Vec<&str> = doc["results"][0]["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["wall_time", "user_time", "sys_time", "peak_rss"]);
    // Interleaved: A B A B …
    let order: Vec<&str> = doc["trials"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["command"].as_str().unwrap())
        .collect();
    assert_eq!(
        &order[..4],
        ["sleep 0.02", "sleep 0.04", "sleep 0.02", "sleep 0.04"]
    );
    let ratio = doc["comparisons"][0]["wall_time"]["ratio"]
        .as_f64()
        .unwrap();
    // A ratio of two measured times is not checked against a range (a busy
    // machine moves it); what holds on any machine: it is a ratio, and no
    // trial of `sleep S` took less than S.
    assert!(ratio.is_finite() && ratio > 0.0, "{ratio}");
    for (r, least) in doc["results"].as_array().unwrap().iter().zip([0.02, 0.04]) {
        let wall = r["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == "wall_time")
            .unwrap();
        for x in wall["samples"].as_array().unwrap() {
            assert!(x.as_f64().unwrap() >= least, "{r}");
        }
    }
    let id = doc["id"].as_str().unwrap();
    let cmp = env.run(&["compare", id, id]);
    assert!(cmp.status.success(), "{}", stderr(&cmp));
}

#[test]
fn ready_matches_the_markers_own_timestamp() {
    let env = Env::new();
    // The marker carries its own CLOCK_REALTIME timestamp, taken in the same
    // process just before the write (python3 when present; else sh + date,
    // where the fork of `date` adds scheduling noise).
    let python = std::process::Command::new("python3")
        .arg("-c")
        .arg("pass")
        .status()
        .is_ok_and(|s| s.success());
    let prog = if python {
        "exec python3 -c 'import time,sys; time.sleep(0.2); print(\"READY\", repr(time.time()), flush=True); time.sleep(5)'"
    } else {
        "sleep 0.2; echo READY $(date +%s.%N); exec sleep 5"
    };
    let out = env.run(&[
        "time",
        "--json",
        "--no-store",
        "--runs",
        "5",
        "--warmup",
        "0",
        "--shell",
        "--ready",
        "^READY",
        "--",
        prog,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let doc = json(&out);
    let mut diffs = Vec::new();
    for t in doc["trials"].as_array().unwrap() {
        let line = t["ready_line"].as_str().unwrap();
        let marker: f64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        let own = marker - t["spawn_unix_s"].as_f64().unwrap();
        let ready = t["ready_s"].as_f64().unwrap();
        assert!(ready >= 0.2, "{ready}");
        // Quit promptly (the child sleeps 5 s unless stopped).
        assert!(t["exit_s"].as_f64().unwrap() < 2.0);
        diffs.push((ready - own).abs());
    }
    diffs.sort_by(f64::total_cmp);
    eprintln!("ready − marker: {diffs:?}");
    // The line is timestamped as it arrives: the promptest of the five runs
    // agrees within 2 ms and none is 50 ms off. A busy test machine (2 CPUs
    // shared with other tests and a busy loop) delays some reads by a few
    // ms — the median was 2.2 ms once under the full suite — so no tighter
    // bound on a typical run; a reader polling every 50 ms or more would
    // miss both bounds.
    assert!(diffs[0] < 0.002, "{diffs:?}");
    assert!(diffs.iter().all(|d| *d < 0.05), "{diffs:?}");
    let m = &doc["results"][0]["metrics"];
    assert!(m
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["name"] == "ready_time"));
    assert!(m
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["name"] == "exit_time"));
}

#[test]
fn memory_of_a_command() {
    let env = Env::new();
    let out = env.run(&["memory", "--json", "--", "sh", "-c", "sleep 0.3"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let doc = json(&out);
    assert!(doc["peak"]["rss"].as_u64().unwrap() > 0);
    assert_eq!(doc["system"][0]["when"], "before");
    assert!(doc["system"][0]["memory"]["total"].as_u64().unwrap() > 0);
    let me = std::process::id().to_string();
    let out = env.run(&["memory", "--json", "--pid", &me]);
    assert!(out.status.success(), "{}", stderr(&out));
}
