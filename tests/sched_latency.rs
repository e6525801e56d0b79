//! `sched.latency` through the real binary: a known noise source (a
//! SCHED_FIFO-99 thread spinning 5 ms every 50 ms on CPU 0) must show as a
//! spike of at least 3 ms and be named as its cause; without it, it is not
//! named. Also the load mix and bad input.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{is_root, json, skip, stderr, Env};

const SPINNER: &str = "tl-test-spin";

fn run(env: &Env, params: &[&str]) -> std::process::Output {
    let t = env.target();
    let mut args = vec![
        "run",
        "sched.latency",
        "--target",
        t.to_str().unwrap(),
        "--trials",
        "2",
        "--warmup",
        "0",
        "--quiet-check",
        "0",
        "--no-store",
        "--json",
    ];
    for p in params {
        args.extend(["-p", p]);
    }
    env.run(&args)
}

fn metric_max(r: &serde_json::Value, name: &str) -> f64 {
    r["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == name)
        .unwrap_or_else(|| panic!("metric {name} missing: {r}"))["summary"]["max"]
        .as_f64()
        .unwrap()
}

fn notes(r: &serde_json::Value) -> Vec<String> {
    r["notes"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter_map(|n| n.as_str().map(String::from))
        .collect()
}

/// A SCHED_FIFO-99 thread pinned to CPU 0: spins 5 ms, sleeps 45 ms.
fn spinner(stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u32> {
    std::thread::Builder::new()
        .name(SPINNER.into())
        .spawn(move || {
            // SAFETY: pin and set the policy of this thread.
            let tid = unsafe {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(0, &mut set);
                assert_eq!(
                    libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set),
                    0
                );
                let sp = libc::sched_param { sched_priority: 99 };
                assert_eq!(libc::sched_setscheduler(0, libc::SCHED_FIFO, &sp), 0);
                libc::gettid() as u32
            };
            while !stop.load(Ordering::Relaxed) {
                let t = Instant::now();
                while t.elapsed() < Duration::from_millis(5) {
                    std::hint::spin_loop();
                }
                std::thread::sleep(Duration::from_millis(45));
            }
            tid
        })
        .unwrap()
}

#[test]
fn a_fifo_spinner_is_the_named_cause_of_its_spikes() {
    if !is_root() {
        return skip("sched.latency spinner test needs root (SCHED_FIFO 99, perf_event_open)");
    }
    let env = Env::new();
    let params = ["cpus=0", "duration=1s", "threshold=1ms"];

    // Without the spinner: no cause names it.
    let out = run(&env, &params);
    assert!(out.status.success(), "{}", stderr(&out));
    let quiet = json(&out)["results"][0].clone();
    let quiet_notes = notes(&quiet);
    assert!(
        !quiet_notes.iter().any(|n| n.contains(SPINNER)),
        "{quiet_notes:#?}"
    );
    assert!(
        quiet_notes
            .iter()
            .any(|n| n.contains("[method perf-switch]") || n.contains("method perf-switch")),
        "the method is stated: {quiet_notes:#?}"
    );

    // With it: a spike of about 5 ms on CPU 0, and the spinner named.
    let stop = Arc::new(AtomicBool::new(false));
    let h = spinner(stop.clone());
    let out = run(&env, &params);
    stop.store(true, Ordering::Relaxed);
    let tid = h.join().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let r = json(&out)["results"][0].clone();
    let max = metric_max(&r, "lat_max");
    assert!(max >= 3e-3, "lat_max {max} s with a 5 ms spinner");
    let cpu0 = r["histograms"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["name"] == "wake-up latency cpu0")
        .expect("cpu0 histogram")
        .clone();
    assert!(cpu0["max"].as_f64().unwrap() >= 3e-3, "{cpu0}");
    let named = format!(
        "thread '{SPINNER}' pid {} tid {tid} (FIFO 99)",
        std::process::id()
    );
    let all = notes(&r);
    let cause = all
        .iter()
        .find(|n| n.starts_with("spike cause: cpu 0:") && n.contains(&named))
        .unwrap_or_else(|| panic!("no cause names {named}: {all:#?}"));
    assert!(cause.contains("knob: thread priority"), "{cause}");
    let spikes = r["series"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "spikes cpu0")
        .expect("spike timeline");
    assert!(spikes["points"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p[1].as_f64().unwrap() >= 3e-3));
    assert!(env.leftovers().is_empty(), "scratch left behind");
}

#[test]
fn runs_under_a_load_mix_and_says_so() {
    let env = Env::new();
    let out = run(
        &env,
        &[
            "cpus=0",
            "duration=300ms",
            "load=storage+memory+messaging",
            "causes=irq",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let r = json(&out)["results"][0].clone();
    assert!(metric_max(&r, "lat_max") > 0.0);
    let all = notes(&r).join("\n");
    assert!(all.contains("storage: "), "{all}");
    assert!(all.contains("memory: "), "{all}");
    assert!(all.contains("messaging: sched.messaging"), "{all}");
    assert!(env.leftovers().is_empty(), "scratch left behind");
}

#[test]
fn bad_input_is_a_usage_error() {
    let env = Env::new();
    for (p, says) in [
        (&["load=disk"][..], "'disk' is not a load"),
        (&["cpus=99999"][..], "not online"),
        (
            &["duration=60ms", "period=10ms"][..],
            "fewer than 10 periods",
        ),
    ] {
        let out = run(&env, p);
        assert_eq!(out.status.code(), Some(2), "{p:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{p:?}: {}", stderr(&out));
    }
}
