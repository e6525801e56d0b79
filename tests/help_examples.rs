//! Every example of every verb's `--help` runs as written: the examples are
//! read from the help the binary prints, and each is run in a scratch
//! directory holding the fixtures it names (two stored runs, a file `f`, a
//! `./server` that prints "listening", a Makefile, an exported run), with a
//! private database and settings journal. An example that needs root, a
//! device, a mount point or a host of the reader's machine is skipped with
//! the reason printed; a new example without a plan here fails the test.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{is_root, skip};

/// What to do with one example.
enum Plan {
    /// Run it; any of these exit codes passes.
    Run(&'static [i32]),
    /// Run it, stop it with SIGINT after this long (a monitor until Ctrl-C); exit 0.
    Interrupt(Duration),
    /// Run it only as root (skipped otherwise, with this reason).
    Root(&'static str),
    /// Not run here: why.
    Skip(&'static str),
}

const MOUNT: &str = "names a mount point of the reader's machine (/mnt/…)";
const FLEET: &str = "names devices of a fleet (stb-1, stb-2) reached over ssh";
const SYSTEM: &str = "changes the machine's kernel settings or boot configuration";

fn plan(example: &str) -> Plan {
    use Plan::*;
    match example {
        "apply last --dry-run" => Skip("needs a stored tune run (tune changes a kernel setting)"),
        "apply last" | "apply last --force" => Skip(SYSTEM),
        "unapply vm.dirty_background_ratio" => Skip(SYSTEM),
        "tune vm.dirty_ratio --values 5,10,20 -e io.burst -p mode=direct-write -p duration=2s --trials 12"
        | "tune read_ahead_kb --device sda --values 128,1024 -e io.device-read" => Skip(SYSTEM),
        "run io.record-size -p record=4k,64k,1m -p mode=buffered,direct --target /mnt/data"
        | "inspect --target /mnt/data"
        | "advise --workload media --target /mnt/data"
        | "study storage --target /mnt/data"
        | "import /mnt/usb/results.db" => Skip(MOUNT),
        "compare --machine stb-1 --machine stb-2"
        | "report --machine stb-1 --machine stb-2 -o fleet.html"
        | "history quick --machine stb-1 --fail-on-regression"
        | "remote stb-1 stb-2 -- study quick"
        | "remote -i fleet/inventory.yml -- study fleet/nightly.toml"
        | "remote --bin target/x86_64-unknown-linux-musl/release stb-1 -- run io.api" => {
            Skip(FLEET)
        }
        "memory --pid 1234 --for 10s" | "diagnose --pid 1234 --for 5s" => {
            Skip("names a process id of the reader's machine")
        }
        "boot --ready 'login:' -- qemu-system-arm -M virt -kernel zImage -nographic" => {
            Skip("needs qemu-system-arm and a board's kernel image")
        }
        "boot --serial /dev/ttyUSB0 --reset 'relay-cycle' --ready 'login:'" => {
            Skip("needs a board on a serial port and a relay")
        }
        "study quick" | "study quick --export-markdown quick.md" => {
            if std::env::var_os("TUNELAB_SLOW_EXAMPLES").is_some() {
                Run(&[0])
            } else {
                Skip("takes minutes (TUNELAB_SLOW_EXAMPLES=1 runs it; tests/study_cli.rs runs studies)")
            }
        }
        "monitor vmstat" => Interrupt(Duration::from_secs(3)),
        // A regression between the two fixture runs is a correct answer.
        "compare last~1 last --fail-on-regression" => Run(&[0, 5]),
        "diagnose --for 10s" | "diagnose -- make -j4" => Root("diagnose's profiler needs root"),
        _ => Run(&[0]),
    }
}

/// The examples of each verb, read from its `--help`.
fn examples() -> Vec<(String, String)> {
    let bin = assert_cmd::cargo::cargo_bin("tunelab");
    let top = Command::new(&bin).arg("--help").output().unwrap();
    let top = String::from_utf8_lossy(&top.stdout).into_owned();
    let verbs: Vec<String> = top
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        // A description wrapped onto the next line is indented further.
        .filter(|l| !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next().map(String::from))
        .filter(|v| v != "help")
        .collect();
    assert!(verbs.len() > 20, "{top}");
    let mut out = Vec::new();
    for verb in verbs {
        let help = Command::new(&bin).args([&verb, "--help"]).output().unwrap();
        let help = String::from_utf8_lossy(&help.stdout).into_owned();
        let ex: Vec<String> = help
            .lines()
            .skip_while(|l| !l.starts_with("Examples:"))
            .skip(1)
            // The block ends at the first blank line (prose may follow).
            .take_while(|l| !l.trim().is_empty())
            .filter_map(|l| l.trim().strip_prefix("tunelab ").map(String::from))
            .collect();
        assert!(
            !ex.is_empty(),
            "`tunelab {verb} --help` shows no example:\n{help}"
        );
        out.extend(ex.into_iter().map(|e| (verb.clone(), e)));
    }
    out
}

/// An example as the shell runs it: a `> FILE` redirection is left out
/// (the output is read here, and a path such as /etc is not written).
fn command_line(example: &str) -> &str {
    example.split(" > ").next().unwrap_or(example)
}

/// The fixtures the examples name, in `dir`.
fn fixtures(dir: &Path, tunelab: &impl Fn(&[&str]) -> std::process::Output) {
    for _ in 0..2 {
        let o = tunelab(&["run", "ipc.pipe", "--trials", "2", "-q"]);
        assert!(o.status.success(), "fixture run: {o:?}");
    }
    let o = tunelab(&["export", "last"]);
    std::fs::write(dir.join("board-run.json"), &o.stdout).unwrap();
    std::fs::write(dir.join("f"), "a line of text to compress\n".repeat(40_000)).unwrap();
    let server = dir.join("server");
    std::fs::write(&server, "#!/bin/sh\necho listening\nexec sleep 30\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&server, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(dir.join("Makefile"), "all: a b\na:\n\ttrue\nb:\n\ttrue\n").unwrap();
}

#[test]
fn every_help_example_runs_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_path_buf();
    let bin = assert_cmd::cargo::cargo_bin("tunelab");
    let env_of = |c: &mut Command| {
        c.current_dir(&d)
            .env("TUNELAB_DB", d.join("results.db"))
            .env("TUNELAB_STATE_DIR", d.join("state"))
            .env("NO_COLOR", "1")
            .stdin(Stdio::null());
    };
    let cmd = |args: &[String]| {
        let mut c = Command::new(&bin);
        c.args(args);
        env_of(&mut c);
        c
    };
    // The examples go through the shell, quotes and all, with this build
    // first on PATH.
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let shell = |example: &str| {
        let mut c = Command::new("sh");
        c.args(["-c", &format!("exec tunelab {}", command_line(example))])
            .env("PATH", &path);
        env_of(&mut c);
        c
    };
    let tunelab = |a: &[&str]| {
        let a: Vec<String> = a.iter().map(|s| s.to_string()).collect();
        cmd(&a).output().unwrap()
    };
    fixtures(&d, &tunelab);
    let all = examples();
    let (mut ran, mut skipped) = (0, 0);
    let mut failed = Vec::new();
    let mut last_verb = String::new();
    for (verb, ex) in &all {
        // `last~1 last` are two runs of one experiment for these verbs (the
        // `run` examples stored others in between).
        if *verb != last_verb && ["compare", "report"].contains(&verb.as_str()) {
            for _ in 0..2 {
                let o = tunelab(&["run", "ipc.pipe", "--trials", "2", "-q"]);
                assert!(o.status.success(), "fixture run: {o:?}");
            }
        }
        last_verb = verb.clone();
        assert_eq!(
            ex.split_whitespace().next(),
            Some(verb.as_str()),
            "example `{ex}` of {verb}"
        );
        let (codes, stop): (&[i32], _) = match plan(ex) {
            Plan::Skip(why) => {
                skip(&format!("tunelab {ex}: {why}"));
                skipped += 1;
                continue;
            }
            Plan::Root(why) if !is_root() => {
                skip(&format!("tunelab {ex}: {why}"));
                skipped += 1;
                continue;
            }
            Plan::Root(_) => (&[0], None),
            Plan::Run(codes) => (codes, None),
            Plan::Interrupt(after) => (&[0], Some(after)),
        };
        let start = Instant::now();
        let child = shell(ex)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        if let Some(after) = stop {
            std::thread::sleep(after);
            // SAFETY: signalling our own child by its pid.
            unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        }
        let out = child.wait_with_output().unwrap();
        let code = out.status.code().unwrap_or(-1);
        eprintln!(
            "ran: tunelab {ex} → exit {code} in {:.1} s",
            start.elapsed().as_secs_f64()
        );
        ran += 1;
        if !codes.contains(&code) {
            failed.push(format!(
                "tunelab {ex}: exit {code} (expected {codes:?})\n{}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    eprintln!("{ran} examples run, {skipped} skipped, of {}", all.len());
    assert!(
        failed.is_empty(),
        "examples that fail as written:\n{}",
        failed.join("\n")
    );
    assert!(
        ran > all.len() / 2,
        "only {ran} of {} examples ran",
        all.len()
    );
}

/// Files an example names in the source tree exist there.
#[test]
fn files_the_examples_name_are_in_the_tree() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (_, ex) in examples() {
        for w in command_line(&ex).split_whitespace() {
            if w.starts_with("fleet/") {
                assert!(
                    root.join(w).is_file(),
                    "`tunelab {ex}` names {w}, which is not in the tree"
                );
            }
        }
    }
}

#[test]
fn a_redirection_is_the_shells() {
    assert_eq!(
        command_line("completions bash > /etc/x"),
        "completions bash"
    );
    assert_eq!(command_line("time -c 'gzip -kf f'"), "time -c 'gzip -kf f'");
}
