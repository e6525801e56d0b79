//! Tables on a terminal of 0 (a serial console), 40 and 80 columns, through
//! a real pseudo-terminal (openpty) so the binary sees a tty of that size:
//! `inspect`, `list`, `runs` and a study's summary stay readable — no
//! column squeezed below its longest word, run ids and experiment names
//! whole on one line, no line wider than the screen unless one word is.

mod common;

use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::{Command, Stdio};

use common::{json, Env};

/// Run tunelab with stdin and stdout on a new pty of `cols` columns
/// (0: the size a serial console reports) and return what it printed.
fn on_pty(env: &Env, cols: u16, args: &[&str]) -> String {
    on_pty_with(env, cols, args, &[])
}

/// [`on_pty`] with stderr on the pty too and these environment variables.
fn on_pty_with(env: &Env, cols: u16, args: &[&str], vars: &[(&str, &str)]) -> String {
    let mut master = -1;
    let mut slave = -1;
    let ws = libc::winsize {
        ws_row: if cols == 0 { 0 } else { 24 },
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: openpty writes two descriptors we then own.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            &ws,
        )
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // Close-on-exec, so programs other tests start meanwhile do not keep
    // this pty open.
    for fd in [master, slave] {
        // SAFETY: fd is one of the two descriptors openpty just returned.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("tunelab"));
    cmd.args(args)
        .env("TUNELAB_DB", env.db())
        .env_remove("COLUMNS")
        .env("NO_COLOR", "1")
        .stdin(Stdio::from(slave.try_clone().unwrap()));
    if vars.is_empty() {
        // Tables go to stdout; messages and progress (stderr) are not checked.
        cmd.stderr(Stdio::null());
    } else {
        cmd.env_remove("NO_COLOR")
            .stderr(Stdio::from(slave.try_clone().unwrap()));
        for (k, v) in vars {
            cmd.env(k, v);
        }
    }
    let mut child = cmd.stdout(Stdio::from(slave)).spawn().unwrap();
    // The command holds the parent's copies of the slave: close them, or
    // the master never reads EOF and this waits for ever.
    drop(cmd);
    let mut text = Vec::new();
    let mut m = std::fs::File::from(master);
    let mut buf = [0u8; 8192];
    // Read until the child closes the pty (EIO on Linux once no slave is open).
    loop {
        match m.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => text.extend_from_slice(&buf[..n]),
        }
    }
    let status = child.wait().unwrap();
    // A progress bar redraws its line after a lone carriage return: each
    // drawing is a line of its own here, so its width is checked too.
    let text = String::from_utf8_lossy(&text)
        .replace("\r\n", "\n")
        .replace('\r', "\n");
    assert!(
        status.success(),
        "tunelab {args:?} at {cols} columns: {status}\n{text}"
    );
    text
}

/// The width the output must fit: a terminal that reports 0 columns is
/// taken as 80.
fn screen(cols: u16) -> usize {
    if cols == 0 {
        80
    } else {
        cols as usize
    }
}

/// Every line fits the screen unless it holds a word longer than the room
/// a record leaves (a path or id is never split to make it fit).
fn assert_fits(text: &str, cols: u16, what: &str) {
    let w = screen(cols);
    // The run view's own heading lines (run, machine, target) and a result's
    // notes are free text, not a table: the terminal wraps them; only tables
    // are laid out here.
    let heading = |l: &str| {
        ["run ", "machine: ", "target: ", "  note: "]
            .iter()
            .any(|p| l.starts_with(p))
    };
    for line in text.lines().filter(|l| !heading(l)) {
        let width = line.chars().count();
        let longest = line
            .split_whitespace()
            .map(|x| x.chars().count())
            .max()
            .unwrap_or(0);
        assert!(
            width <= w || longest + 16 > w,
            "{what} at {cols} columns: a line of {width} > {w}:\n{line}\n---\n{text}"
        );
    }
    // The old failure: columns squeezed to one character, one letter per line.
    let one_letter = text
        .lines()
        .filter(|l| l.trim().chars().filter(|c| c.is_alphanumeric()).count() == 1)
        .count();
    assert!(
        one_letter * 4 < text.lines().count().max(4),
        "{what} at {cols} columns: {one_letter} lines hold a single letter\n{text}"
    );
}

fn whole_words(text: &str, words: &[&str], what: &str, cols: u16) {
    for w in words {
        assert!(
            text.lines().any(|l| l.contains(w)),
            "{what} at {cols} columns: '{w}' is not whole on one line\n{text}"
        );
    }
}

#[test]
fn tables_are_readable_at_0_40_and_80_columns() {
    let env = Env::new();
    // One short study stores a run for `runs` and prints a summary table.
    let dir = env.dir.path();
    let profile = dir.join("tiny.toml");
    std::fs::write(
        &profile,
        "name = \"tiny\"\ntitle = \"One quick key issue\"\n\
         description = \"table layout test\"\n\n\
         [[issue]]\nname = \"Pipe round trip\"\n\
         question = \"How long does a byte take to go through a pipe and back, and is that fast enough for a frame loop?\"\n\
         experiment = \"ipc.pipe\"\ntrials = 2\nwarmup = 0\n",
    )
    .unwrap();
    let names: Vec<String> = json(&env.run(&["list", "--json"]))
        .as_array()
        .expect("list --json is an array")
        .iter()
        .filter_map(|e| e["name"].as_str().map(String::from))
        .collect();
    assert!(names.len() > 10, "{names:?}");
    let mut run_id = String::new();
    for cols in [0u16, 40, 80] {
        let study = on_pty(&env, cols, &["study", profile.to_str().unwrap()]);
        assert_fits(&study, cols, "study summary");
        whole_words(&study, &["Pipe", "round", "trip"], "study summary", cols);
        let runs = on_pty(&env, cols, &["runs"]);
        assert_fits(&runs, cols, "runs");
        if run_id.is_empty() {
            let v = json(&env.run(&["runs", "--json"]));
            run_id = v[0]["id"].as_str().unwrap().to_string();
        }
        whole_words(&runs, &[run_id.as_str()], "runs", cols);
        let list = on_pty(&env, cols, &["list"]);
        assert_fits(&list, cols, "list");
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        whole_words(&list, &names, "list", cols);
        let target = env.target();
        let inspect = on_pty(
            &env,
            cols,
            &["inspect", "--target", target.to_str().unwrap()],
        );
        assert_fits(&inspect, cols, "inspect");
    }
}

/// The monitor views (scrolling lines, not tables) fit 80 columns too, and
/// short listings stay short on a console that reports no width.
#[test]
fn monitor_views_fit_80_columns_and_listings_stay_short() {
    let env = Env::new();
    for view in ["vmstat", "iostat", "irq", "dirty", "hogs", "psi", "power"] {
        let text = on_pty(&env, 80, &["monitor", view, "-i", "200ms", "-c", "2"]);
        for line in text.lines() {
            assert!(
                line.chars().count() <= 80,
                "monitor {view}: a line of {} columns:\n{line}\n---\n{text}",
                line.chars().count()
            );
        }
    }
    let target = env.target();
    let inspect = on_pty(&env, 0, &["inspect", "--target", target.to_str().unwrap()]);
    assert!(
        inspect.lines().count() < 80,
        "inspect at width 0: {} lines\n{inspect}",
        inspect.lines().count()
    );
    assert_fits(&inspect, 0, "inspect");
    for _ in 0..4 {
        let o = env.run(&["run", "ipc.pipe", "--trials", "2", "-q"]);
        assert!(o.status.success(), "{o:?}");
    }
    let runs = on_pty(&env, 0, &["runs", "-n", "4"]);
    assert!(
        runs.lines().count() < 12,
        "runs -n 4 at width 0: {} lines\n{runs}",
        runs.lines().count()
    );
    assert_fits(&runs, 0, "runs");
    // One rule, under the header.
    let rules = runs
        .lines()
        .filter(|l| l.trim_start().starts_with('─'))
        .count();
    assert_eq!(rules, 1, "{runs}");
}

/// TERM=dumb: no escape sequence at all (no cursor movement, no colour, no
/// progress bar); LANG=C: pure ASCII — over several verbs, stdout and stderr.
#[test]
fn dumb_terminals_get_no_escapes_and_c_locales_get_ascii() {
    let env = Env::new();
    let target = env.target();
    let t = target.to_str().unwrap();
    let verbs: [&[&str]; 6] = [
        &["run", "ipc.pipe", "--trials", "2"],
        &["runs"],
        &["show", "last"],
        &["inspect", "--target", t],
        &["list"],
        &["run", "--help"],
    ];
    for args in verbs {
        let dumb = on_pty_with(&env, 80, args, &[("TERM", "dumb"), ("LANG", "C.UTF-8")]);
        assert!(
            !dumb.contains('\x1b'),
            "TERM=dumb tunelab {args:?} sent an escape:\n{dumb:?}"
        );
        let c = on_pty_with(
            &env,
            80,
            args,
            &[
                ("TERM", "xterm"),
                ("LANG", "C"),
                ("LC_ALL", ""),
                ("LC_CTYPE", ""),
            ],
        );
        let odd: String = c.chars().filter(|ch| !ch.is_ascii()).collect();
        assert!(
            odd.is_empty(),
            "LANG=C tunelab {args:?} printed {odd:?}:\n{c}"
        );
    }
}

/// Every line within `w` columns once escape sequences are taken out: no
/// exemption, free text included.
fn assert_within(text: &str, w: usize, what: &str) {
    for line in text.lines() {
        let mut shown = String::new();
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            if c == '\x1b' {
                // CSI: ESC [ parameters final-byte
                if chars.peek() == Some(&'[') {
                    chars.next();
                    for d in chars.by_ref() {
                        if d.is_ascii_alphabetic() {
                            break;
                        }
                    }
                }
                continue;
            }
            shown.push(c);
        }
        let width = shown.chars().count();
        assert!(
            width <= w,
            "{what}: a line of {width} > {w} columns:\n{shown}\n---\n{text}"
        );
    }
}

/// The run, its view and a comparison — a 9-metric sweep with long
/// parameter labels, the tables that fell back to records before — fit 80
/// columns line for line, the live progress bar included.
#[test]
fn a_sweep_its_view_and_a_comparison_fit_80_columns() {
    let env = Env::new();
    let target = env.target();
    let t = target.to_str().unwrap();
    let tty = [("TERM", "xterm"), ("LANG", "C.UTF-8")];
    for _ in 0..2 {
        let run = on_pty_with(
            &env,
            80,
            &[
                "run",
                "io.record-size",
                "--target",
                t,
                "-p",
                "size=1M",
                "-p",
                "record=4k,16k,64k",
                "--trials",
                "2",
            ],
            &tty,
        );
        assert_within(&run, 80, "run io.record-size");
    }
    let show = on_pty_with(&env, 80, &["show", "last"], &tty);
    assert_within(&show, 80, "show");
    // One line a metric row under its point's parameters, not a record.
    assert!(
        show.contains("mode=direct record=16 KiB size=1 MiB work=fixed\n"),
        "{show}"
    );
    assert!(
        show.lines()
            .any(|l| l.trim_start().starts_with("read_throughput") && l.contains("MiB/s")),
        "{show}"
    );
    let compare = on_pty_with(&env, 80, &["compare", "last~1", "last"], &tty);
    assert_within(&compare, 80, "compare");
    assert!(
        compare
            .lines()
            .any(|l| l.trim_start().starts_with("write_throughput") && l.contains('×')),
        "{compare}"
    );
    for cols in [0u16, 80] {
        let compare = on_pty(&env, cols, &["compare", "last~1", "last"]);
        assert_within(&compare, 80, "compare");
        assert!(compare.lines().count() < 60, "{compare}");
    }
}
