//! Tests of the boot-log parsing and timing, on recorded console logs.

use super::*;
use rustix::termios::LocalModes;

fn qemu_console() -> Vec<(f64, &'static str)> {
    vec![
        (0.90, "\x1b[2J\x1b[01;01H"),
        (
            1.00,
            "[    0.000000] Booting Linux on physical CPU 0x0000000000 [0x410fd034]\r",
        ),
        (
            1.01,
            "[    0.000000] Linux version 6.1.0-50-arm64 (debian-kernel@lists.debian.org)",
        ),
        (3.50, "[    2.411000] Freeing unused kernel memory: 6528K"),
        (3.52, "[    2.430000] Run /init as init process"),
        (4.10, "tunelab-lab: ready"),
        (4.20, "reboot: Power down"),
    ]
}

#[test]
fn markers_are_found_in_order_with_the_kernel_clock() {
    let ready = Regex::new("tunelab-lab: ready").unwrap();
    let mut t = Tracker::new(marker_list(&[], Some(&ready)));
    let mut done_at = None;
    for (s, l) in qemu_console() {
        if t.line(s, l) {
            done_at = Some(s);
            break;
        }
    }
    assert_eq!(done_at, Some(4.10));
    let b = t.finish(false);
    assert_eq!(b.first_output_s, Some(0.90));
    assert!(b.missed.is_empty());
    let names: Vec<&str> = b.hits.iter().map(|h| h.marker.as_str()).collect();
    assert_eq!(names, ["kernel", "init", "ready"]);
    assert_eq!(b.hits[0].at_s, 1.00);
    assert_eq!(b.hits[0].printk_s, Some(0.0));
    // The first init pattern to match wins ("Freeing…" comes first).
    assert_eq!(b.hits[1].at_s, 3.50);
    assert_eq!(b.hits[1].printk_s, Some(2.411));
    assert_eq!(b.hits[2].printk_s, None);
    assert!(!b.hits[0].line.contains('\r'));
}

#[test]
fn user_markers_replace_defaults_and_missing_ones_are_listed() {
    let user = [
        Marker::new("init", "never printed").unwrap(),
        Marker::new("net", "eth0: link up").unwrap(),
    ];
    let list = marker_list(&user, None);
    let names: Vec<&str> = list.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["kernel", "init", "net"]);
    let mut t = Tracker::new(list);
    assert!(!t.line(0.5, "Booting Linux on physical CPU 0x0"));
    assert!(t.line(2.0, "eth0: link up 100Mbps"));
    let b = t.finish(false);
    assert_eq!(b.missed, ["init"]);
    assert!(Marker::new("bad name", "x").is_err());
    assert_eq!(Marker::new("x", "(").unwrap_err().exit_code(), 2);
}

#[test]
fn an_unfinished_boot_names_the_marker_and_shows_the_last_lines() {
    let ready = Regex::new("login:").unwrap();
    let mut t = Tracker::new(marker_list(&[], Some(&ready)));
    t.line(0.1, "[    0.000000] Booting Linux on physical CPU 0x0");
    t.line(
        0.2,
        "Kernel panic - not syncing: VFS: Unable to mount root fs",
    );
    let e = t.unfinished("the console ended");
    assert_eq!(e.exit_code(), 1);
    let m = e.to_string();
    assert!(
        m.contains("'ready' marker") && m.contains("seen: kernel"),
        "{m}"
    );
    assert!(m.contains("| Kernel panic"), "{m}");
}

#[test]
fn printk_stamps() {
    assert_eq!(printk_time("[    1.234567] x"), Some(1.234567));
    assert_eq!(printk_time("[12345.000001] x"), Some(12345.000001));
    assert_eq!(printk_time("no stamp"), None);
    assert_eq!(printk_time("[ abc] x"), None);
}

#[test]
fn lines_are_stamped_when_their_first_byte_arrives() {
    // A writer that sends half a line, waits, then the rest: the line's
    // time is the first half's arrival, not the newline's.
    let (r, w) = rustix::pipe::pipe().unwrap();
    let (r, mut w) = (std::fs::File::from(r), std::fs::File::from(w));
    let (tx, rx) = channel();
    read_lines(r, tx);
    let start = Instant::now();
    use std::io::Write;
    w.write_all(b"Booting Linux ").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    w.write_all(b"on physical CPU 0\nlast line without newline")
        .unwrap();
    drop(w);
    let mut tracker = Tracker::new(default_markers());
    let mut logged = Vec::new();
    let (how, _) = follow(
        &rx,
        Some(start),
        &mut tracker,
        Duration::from_secs(10),
        &mut |s, l| logged.push((s, l.to_string())),
    )
    .unwrap();
    assert!(matches!(how, Waited::Closed));
    assert_eq!(logged.len(), 2, "{logged:?}");
    assert!(logged[0].0 < 0.2, "{logged:?}");
    assert_eq!(logged[1].1, "last line without newline");
    let b = tracker.finish(false);
    assert_eq!(b.missed, ["init"]);
}

/// A pseudo-terminal stands in for the board's serial line.
fn pty() -> (std::fs::File, std::path::PathBuf) {
    use rustix::pty::{grantpt, openpt, ptsname, unlockpt, OpenptFlags};
    let m = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).unwrap();
    grantpt(&m).unwrap();
    unlockpt(&m).unwrap();
    let path = ptsname(&m, Vec::new())
        .unwrap()
        .to_string_lossy()
        .into_owned();
    (std::fs::File::from(m), path.into())
}

fn lflag(path: &std::path::Path) -> rustix::termios::LocalModes {
    let f = std::fs::File::open(path).unwrap();
    rustix::termios::tcgetattr(&f).unwrap().local_modes
}

#[test]
fn a_serial_line_is_read_raw_from_its_first_byte_and_restored() {
    use std::io::Write;
    let (mut master, slave) = pty();
    let before = lflag(&slave);
    assert!(
        before.contains(LocalModes::ICANON),
        "a fresh pty is canonical"
    );
    {
        let port = Serial::open(&slave, 115200).unwrap();
        let raw = lflag(&slave);
        assert!(
            !raw.intersects(LocalModes::ICANON | LocalModes::ECHO),
            "raw mode"
        );
        let (tx, rx) = channel();
        read_lines(port.reader().unwrap(), tx);
        let first_write = std::time::Instant::now();
        master
            .write_all(b"U-Boot\r\nBooting Linux on physical CPU 0\r\n")
            .unwrap();
        std::thread::sleep(Duration::from_millis(200));
        master
            .write_all(b"[    0.5] Run /init as init process\r\n")
            .unwrap();
        let mut t = Tracker::new(default_markers());
        let (how, _) = follow(&rx, None, &mut t, Duration::from_secs(10), &mut |_, _| {}).unwrap();
        let span = first_write.elapsed().as_secs_f64();
        assert!(matches!(how, Waited::Done));
        let b = t.finish(false);
        // Time zero is the first byte: U-Boot's line is at 0. A later line
        // is timed when it arrived, after that byte and before now (how
        // long after depends on when the reader thread ran, not asserted).
        assert_eq!(b.first_output_s, Some(0.0));
        assert!(
            (0.0..=span).contains(&b.hits[1].at_s),
            "{:?} within {span} s",
            b.hits
        );
        assert_eq!(b.hits[1].printk_s, Some(0.5));
        assert_eq!(b.hits[1].line, "[    0.5] Run /init as init process");
    }
    assert_eq!(lflag(&slave), before, "settings restored on drop");
    let e = Serial::open(std::path::Path::new("/dev/null"), 115200)
        .err()
        .unwrap();
    assert_eq!(e.exit_code(), 2, "{e}");
    let e = Serial::open(&slave, 12345).err().unwrap();
    assert_eq!(e.exit_code(), 2, "{e}");
    let e = Serial::open(std::path::Path::new("/dev/no-such-tty"), 115200)
        .err()
        .unwrap();
    assert_eq!(e.exit_code(), 4, "{e}");
}

#[test]
fn the_kernel_of_a_qemu_command_line() {
    let argv: Vec<String> = ["qemu", "-m", "64", "-kernel", "/k/vmlinuz", "-append", "x"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(kernel_in_argv(&argv), Some("/k/vmlinuz"));
    assert_eq!(kernel_in_argv(&argv[..2]), None);
}
