//! `tunelab boot`: a console (here a shell script standing in for qemu)
//! timed from outside, markers found, the command stopped, a run stored.

mod common;

use std::time::Instant;

const CONSOLE: &str = "echo 'U-Boot 2024.01'; sleep 0.2; \
    echo '[    0.000000] Booting Linux on physical CPU 0x0'; sleep 0.3; \
    echo '[    0.310000] Run /init as init process'; sleep 0.2; \
    echo 'board: ready'; exec sleep 30";

#[test]
fn boots_are_timed_to_the_markers_and_the_console_is_stopped() {
    let env = common::Env::new();
    let kernel = env.dir.path().join("Image");
    std::fs::write(&kernel, vec![0u8; 12345]).unwrap();
    let log = env.dir.path().join("console.log");
    let t = Instant::now();
    let out = env.run(&[
        "--json",
        "boot",
        "--runs",
        "2",
        "--ready",
        "board: ready",
        "--kernel",
        kernel.to_str().unwrap(),
        "--log",
        log.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        CONSOLE,
    ]);
    // Each boot is stopped at the ready line, not left to its 30 s sleep.
    assert!(t.elapsed().as_secs() < 20, "{:?}", t.elapsed());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = common::json(&out);
    let p = &doc["results"][0];
    assert_eq!(p["experiment"], "app.boot");
    let m = |name: &str| {
        p["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == name)
            .unwrap_or_else(|| panic!("no metric {name} in {p}"))
            .clone()
    };
    let kernel_s = m("kernel")["summary"]["median"].as_f64().unwrap();
    let init_s = m("init")["summary"]["median"].as_f64().unwrap();
    let ready_s = m("ready")["summary"]["median"].as_f64().unwrap();
    assert!((0.15..1.5).contains(&kernel_s), "kernel {kernel_s}");
    assert!(init_s - kernel_s >= 0.25, "kernel {kernel_s} init {init_s}");
    assert!(ready_s - init_s >= 0.15, "init {init_s} ready {ready_s}");
    assert_eq!(m("ready")["summary"]["n"], 2);
    assert_eq!(m("init_printk")["samples"][0].as_f64(), Some(0.31));
    assert_eq!(m("kernel_image_size")["samples"][0].as_f64(), Some(12345.0));
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(text.matches("board: ready").count(), 2, "{text}");
    // Stored: `show` finds it.
    let shown = env.run(&["show", "last"]);
    assert!(shown.status.success());
    assert!(String::from_utf8_lossy(&shown.stdout).contains("app.boot"));
}

#[test]
fn a_boot_that_never_becomes_ready_fails_with_the_console_tail() {
    let env = common::Env::new();
    let out = env.run(&[
        "boot",
        "--runs",
        "1",
        "--ready",
        "login:",
        "--no-store",
        "--",
        "sh",
        "-c",
        "echo 'Booting Linux on physical CPU 0'; echo 'Kernel panic - not syncing'",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("'ready' marker") && err.contains("| Kernel panic"),
        "{err}"
    );
}

#[test]
fn bad_boot_arguments_are_usage_errors() {
    let env = common::Env::new();
    for args in [
        vec!["boot", "--no-store"],
        vec!["boot", "--marker", "noequals", "--", "true"],
        vec!["boot", "--ready", "(", "--", "true"],
        vec!["boot", "--runs", "0", "--", "true"],
        vec!["boot", "--", "no-such-console-command-xyz"],
    ] {
        let out = env.run(&args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let log = env.dir.path().join("exists.log");
    std::fs::write(&log, "keep me").unwrap();
    let out = env.run(&["boot", "--log", log.to_str().unwrap(), "--", "true"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "keep me");
}
