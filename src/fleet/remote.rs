//! Run a tunelab command on hosts over the system OpenSSH client, so users'
//! `~/.ssh/config`, agents, jump hosts and known-hosts checks apply as they
//! expect. No daemon and no protocol of our own: four ssh invocations per
//! host (architecture, cache check, upload when needed, the command).
//!
//! The binary travels over the ssh channel itself (`cat > file`), not with
//! scp: OpenSSH's scp now speaks SFTP, which a busybox/dropbear board rarely
//! has, while `sh` and `cat` are always there. It is cached on the host
//! under a name holding its checksum, so a fleet pays the copy once per
//! version.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::inventory::Host;
use super::reach::{self, Verdict};
use crate::safety::signals;
use crate::system::env::shell_quote;
use crate::{Error, Result};

/// How to reach the hosts and what to run there.
pub(crate) struct Plan<'a> {
    /// The ssh program (`ssh`, or `TUNELAB_SSH` for a wrapper).
    pub(crate) ssh: String,
    /// Extra ssh options, passed before the destination (`-F file`, `-o K=V`).
    pub(crate) ssh_options: Vec<String>,
    /// Where the static binaries are (see [`binary_for`]).
    pub(crate) binaries: Option<PathBuf>,
    /// tunelab's arguments on the host (`--json` is added in front).
    pub(crate) args: &'a [String],
    pub(crate) timeout: Duration,
    pub(crate) parallel: usize,
    /// Copy a dynamically linked binary (refused otherwise: see `elf`).
    pub(crate) allow_dynamic: bool,
}

/// What happened on one host.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct HostOutcome {
    pub(crate) host: String,
    pub(crate) arch: Option<String>,
    /// ok, failed (the command exited non-zero, or was killed: the error
    /// says by which signal), unreachable, lost (the connection broke while
    /// the command ran), timeout,
    /// interrupted or error (no binary, bad output).
    pub(crate) status: String,
    /// The remote tunelab's exit code, when it ran.
    pub(crate) exit_code: Option<i32>,
    pub(crate) seconds: f64,
    /// Whether the binary had to be copied.
    pub(crate) copied: bool,
    /// Whether the host already had it (neither: never got that far).
    #[serde(default)]
    pub(crate) cached: bool,
    pub(crate) error: Option<String>,
    /// The JSON the command printed (a run, an inspection, …).
    #[serde(skip)]
    pub(crate) output: Option<serde_json::Value>,
}

/// FNV-1a 64 of the binary: names the cached copy. Not a security check —
/// whoever can write the cache directory can run code as that user anyway.
fn checksum(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ *b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The `uname -m` answers a local path may be built from: anything else a
/// host reports (`../../secret`) is refused before it becomes a path.
pub(crate) const ARCHES: &[&str] = &[
    "x86_64",
    "i386",
    "i486",
    "i586",
    "i686",
    "aarch64",
    "aarch64_be",
    "arm64",
    "armv5tel",
    "armv6l",
    "armv7l",
    "armv8l",
    "arm",
    "riscv32",
    "riscv64",
    "mips",
    "mipsel",
    "mips64",
    "mips64el",
    "ppc",
    "ppc64",
    "ppc64le",
    "s390x",
    "loongarch64",
];

/// A host's `uname -m`, checked against [`ARCHES`].
pub(crate) fn checked_arch(arch: &str) -> Result<&str> {
    if ARCHES.contains(&arch) {
        return Ok(arch);
    }
    let shown: String = arch
        .chars()
        .take(64)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    Err(Error::environment(format!(
        "the host answered '{shown}' to uname -m, which is not a known architecture ({}): \
         refused, no file is looked up or copied for it; check the host's shell profile \
         prints nothing before the command",
        ARCHES.join(", ")
    )))
}

/// A host's $HOME: an absolute path without `..`, `.` or control characters
/// (the remote cache directory is built from it).
pub(crate) fn checked_home(home: &str) -> Result<&str> {
    let p = Path::new(home);
    let dots = home.split('/').any(|c| c == ".." || c == ".");
    let plain = p.is_absolute() && home.len() <= 4096 && !dots && !home.contains(char::is_control);
    if plain {
        Ok(home)
    } else {
        Err(Error::environment(format!(
            "the host reported HOME={:?}, not a plain absolute path: refused (give the host \
             a dir= in the inventory to choose where tunelab is cached)",
            home.chars().take(200).collect::<String>()
        )))
    }
}

/// The static binary for a host's `uname -m`. With a directory, the board
/// build's layouts are tried; without one, this very binary serves hosts of
/// its own architecture.
pub(crate) fn binary_for(arch: &str, dir: Option<&Path>) -> Result<PathBuf> {
    let arch = checked_arch(arch)?;
    let triple = format!("{arch}-unknown-linux-musl");
    if let Some(dir) = dir {
        if dir.is_file() {
            return Ok(dir.to_path_buf());
        }
        let candidates = [
            dir.join(format!("tunelab-{arch}")),
            // scripts/build-static.sh's names: --bin target/static.
            dir.join(format!("tunelab-{arch}-linux-musl")),
            dir.join(arch).join("tunelab"),
            dir.join(&triple).join("board").join("tunelab"),
            dir.join(&triple).join("release").join("tunelab"),
        ];
        return candidates
            .iter()
            .find(|p| p.is_file())
            .cloned()
            .ok_or_else(|| {
                Error::usage(format!(
                "no tunelab binary for {arch} in {} (looked for tunelab-{arch}, tunelab-{arch}-linux-musl, {arch}/tunelab, \
                 {triple}/board/tunelab); build it with scripts/build-static.sh",
                dir.display()
            ))
            });
    }
    if arch == std::env::consts::ARCH {
        return std::env::current_exe()
            .map_err(|e| Error::environment(format!("cannot find this tunelab binary: {e}")));
    }
    Err(Error::usage(format!(
        "the host is {arch} and this tunelab is {}: give --bin DIR with the static builds \
         (scripts/build-static.sh)",
        std::env::consts::ARCH
    )))
}

/// Whether `args` (tunelab's, on the host) record runs into the default
/// database, which `remote` stores on this side instead.
fn makes_runs(args: &[String]) -> bool {
    let verb = args.iter().find(|a| !a.starts_with('-'));
    let names_db = args
        .iter()
        .any(|a| a == "--db" || a.starts_with("--db=") || a == "--no-store");
    !names_db
        && verb.is_some_and(|v| {
            ["run", "study", "tune", "time", "boot", "diagnose", "memory"].contains(&v.as_str())
        })
}

/// Base ssh invocation for a host: options, port, user, `--`, destination.
fn ssh(plan: &Plan, host: &Host) -> Command {
    let mut c = Command::new(&plan.ssh);
    // ssh dies with tunelab, SIGKILL included (the thread that forks it
    // waits for it), so no connection goes on unattended.
    crate::safety::child::contain(&mut c);
    // BatchMode: never stop at a password prompt nobody can answer.
    c.arg("-o").arg("BatchMode=yes");
    c.args(&plan.ssh_options);
    if let Some(p) = host.port {
        c.arg("-p").arg(p.to_string());
    }
    if let Some(u) = &host.user {
        c.arg("-l").arg(u);
    }
    c.arg("--").arg(&host.address);
    c
}

/// A finished ssh invocation.
struct Done {
    code: Option<i32>,
    stdout: Vec<u8>,
    stderr: String,
}

/// What the remote command's stdin gets.
enum Input<'a> {
    /// /dev/null.
    Nothing,
    /// These bytes, then end of file.
    Bytes(&'a [u8]),
    /// Nothing, but held open until ssh ends: the remote tunelab's stdin
    /// guard (`signals::STDIN_GUARD`) sees end of file only when the
    /// connection goes (a timeout here kills ssh, which sends no hangup
    /// without a tty).
    HeldOpen,
}

/// Run one ssh command with a deadline; stderr lines are passed to `line`
/// as they arrive; `input` says what its stdin gets.
fn call(
    mut cmd: Command,
    input: Input,
    deadline: Instant,
    line: &(dyn Fn(&str) + Sync),
) -> std::result::Result<Done, &'static str> {
    cmd.stdin(match input {
        Input::Nothing => Stdio::null(),
        Input::Bytes(_) | Input::HeldOpen => Stdio::piped(),
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child: Child = cmd.spawn().map_err(|_| "cannot start ssh")?;
    let stdin = child.stdin.take();
    // `_held` is dropped (closed) when this function returns, after ssh ended.
    let (mut stdin, input, _held) = match input {
        Input::Bytes(b) => (stdin, Some(b), None),
        Input::HeldOpen => (None, None, stdin),
        Input::Nothing => (None, None, None),
    };
    let mut out = child.stdout.take().expect("piped");
    let err = child.stderr.take().expect("piped");
    std::thread::scope(|s| {
        if let (Some(mut w), Some(bytes)) = (stdin.take(), input) {
            s.spawn(move || {
                let _ = w.write_all(bytes);
            });
        }
        let so = s.spawn(move || {
            let mut v = Vec::new();
            let _ = out.read_to_end(&mut v);
            v
        });
        let se = s.spawn(move || {
            let mut all = String::new();
            for l in BufReader::new(err)
                .lines()
                .map_while(std::result::Result::ok)
            {
                line(&l);
                all.push_str(&l);
                all.push('\n');
            }
            all
        });
        let status = loop {
            if let Ok(Some(st)) = child.try_wait() {
                break Ok(st);
            }
            let why = if signals::caught().is_some() {
                "interrupted"
            } else if Instant::now() >= deadline {
                "timeout"
            } else {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            };
            // The whole group (`contain` made ssh lead one): a ProxyCommand
            // or a wrapper's children would hold the pipes open otherwise.
            if let Ok(pid) = i32::try_from(child.id()) {
                // ssh's own group.
                if let Some(p) = rustix::process::Pid::from_raw(pid) {
                    let _ = rustix::process::kill_process_group(p, rustix::process::Signal::KILL);
                }
            }
            let _ = child.kill();
            let _ = child.wait();
            break Err(why);
        };
        let stdout = so.join().unwrap_or_default();
        let stderr = se.join().unwrap_or_default();
        status.map(|st| Done {
            code: st.code(),
            stdout,
            stderr,
        })
    })
}

/// ssh's own failures exit 255; the remote command's exit code otherwise.
fn unreachable(d: &Done) -> bool {
    d.code == Some(255)
}

fn last_line(s: &str) -> String {
    s.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
        .to_string()
}

/// ssh's last words on a failed connection, or what is known without them.
fn ssh_said(d: &Done) -> String {
    match last_line(&d.stderr) {
        l if l.is_empty() => format!(
            "ssh exited {} without a message (run ssh -v to the host to see why)",
            d.code.map_or("by a signal".into(), |c| c.to_string())
        ),
        l => l,
    }
}

fn on_host(plan: &Plan, host: &Host, say: &(dyn Fn(&str) + Sync)) -> HostOutcome {
    let t0 = Instant::now();
    let deadline = t0 + plan.timeout;
    let mut o = HostOutcome {
        host: host.name.clone(),
        arch: None,
        status: "error".into(),
        exit_code: None,
        seconds: 0.0,
        copied: false,
        cached: false,
        error: None,
        output: None,
    };
    let quiet = |_: &str| {};
    let fail = |mut o: HostOutcome, status: &str, e: String| {
        o.status = status.into();
        o.error = Some(e);
        o.seconds = t0.elapsed().as_secs_f64();
        o
    };
    // 1. Architecture and home directory.
    let mut c = ssh(plan, host);
    c.arg("uname -m; echo \"${HOME:-/tmp}\"");
    let d = match call(c, Input::Nothing, deadline, &quiet) {
        Ok(d) => d,
        Err(why) => return fail(o, why, format!("{why} while connecting")),
    };
    if unreachable(&d) || d.code != Some(0) {
        return fail(o, "unreachable", ssh_said(&d));
    }
    let text = String::from_utf8_lossy(&d.stdout);
    let mut lines = text.lines();
    let arch = lines.next().unwrap_or("").trim().to_string();
    let home = lines.next().unwrap_or("/tmp").trim().to_string();
    if let Err(e) = checked_arch(&arch) {
        return fail(o, "error", e.to_string());
    }
    o.arch = Some(arch.clone());
    // 2. The binary, cached by checksum.
    let local = match binary_for(&arch, plan.binaries.as_deref()) {
        Ok(p) => p,
        Err(e) => return fail(o, "error", e.to_string()),
    };
    let bytes = match std::fs::read(&local) {
        Ok(b) => b,
        Err(e) => return fail(o, "error", format!("cannot read {}: {e}", local.display())),
    };
    if let (false, Some(interp)) = (plan.allow_dynamic, super::elf::interpreter(&bytes)) {
        return fail(o, "error", super::elf::refusal(&local, &interp));
    }
    let dir = match &host.dir {
        Some(d) => d.clone(),
        None => match checked_home(&home) {
            Ok(h) => format!("{h}/.cache/tunelab"),
            Err(e) => return fail(o, "error", e.to_string()),
        },
    };
    let remote = format!("{dir}/tunelab-{:016x}", checksum(&bytes));
    let q = shell_quote(&remote);
    let mut c = ssh(plan, host);
    c.arg(format!("test -x {q} && echo cached"));
    match call(c, Input::Nothing, deadline, &quiet) {
        Ok(d) if unreachable(&d) => return fail(o, "unreachable", ssh_said(&d)),
        Ok(d) if String::from_utf8_lossy(&d.stdout).trim() == "cached" => o.cached = true,
        Ok(_) => {
            say(&format!(
                "copying {} ({} bytes) to {remote}",
                local.display(),
                bytes.len()
            ));
            // A temporary name of this upload alone (a random part, and the
            // host shell's pid): hosts sharing a directory, or one host under
            // two names, never write or rename each other's copy; mv is atomic.
            let part = format!(
                "{}.$$",
                shell_quote(&format!("{remote}.part-{:08x}", rand::random::<u32>()))
            );
            let mut c = ssh(plan, host);
            c.arg(format!(
                "mkdir -p {d} && cat > {part} && chmod 755 {part} && mv -f {part} {q} \
                 || {{ rm -f {part}; exit 1; }}",
                d = shell_quote(&dir)
            ));
            match call(c, Input::Bytes(&bytes), deadline, &quiet) {
                Ok(d) if d.code == Some(0) => o.copied = true,
                Ok(d) => {
                    return fail(
                        o,
                        "error",
                        format!("copying the binary failed: {}", last_line(&d.stderr)),
                    )
                }
                Err(why) => return fail(o, why, format!("{why} while copying the binary")),
            }
        }
        Err(why) => return fail(o, why, format!("{why} while checking the cache")),
    }
    // 3. The command, with its progress streamed under the host's name.
    // The stdin guard: when this side gives up (timeout, Ctrl-C) and ssh
    // goes, the host's tunelab reads end of file and stops as on a hangup,
    // restoring what it changed, instead of running on unattended.
    let mut line = vec![format!("{}=1", signals::STDIN_GUARD)];
    // The run comes back here and is stored here: on the host it goes to an
    // in-memory database, not the host's default one (no unrequested flash
    // writes on a board). Commands that read the host's store, or name a
    // database, keep it.
    if makes_runs(plan.args) {
        line.push("TUNELAB_DB=:memory:".to_string());
    }
    line.extend([q, "--json".to_string()]);
    line.extend(plan.args.iter().map(|a| shell_quote(a)));
    // `; exit $?` keeps the host's shell from exec'ing tunelab: killed by a
    // signal, it then exits 128+N, where sshd would report a bare signal
    // that ssh turns into 255, the code of its own failures.
    let mut c = ssh(plan, host);
    c.arg(format!("{}; exit $?", line.join(" ")));
    let d = match call(c, Input::HeldOpen, deadline, say) {
        Ok(d) => d,
        Err(why) => {
            return fail(
                o,
                why,
                format!(
                    "{why} while running (after {:.0} s)",
                    t0.elapsed().as_secs_f64()
                ),
            )
        }
    };
    if unreachable(&d) {
        // Steps 1 and 2 reached the host: now the connection (or the host)
        // went away while tunelab ran.
        return fail(
            o,
            "lost",
            format!(
                "the connection to the host was lost while tunelab ran (after {:.0} s): {}",
                t0.elapsed().as_secs_f64(),
                last_line(&d.stderr)
            ),
        );
    }
    o.exit_code = d.code;
    o.seconds = t0.elapsed().as_secs_f64();
    let stdout = String::from_utf8_lossy(&d.stdout);
    o.output = serde_json::from_str(stdout.trim()).ok();
    if d.code == Some(0) {
        o.status = "ok".into();
    } else {
        o.status = "failed".into();
        o.error = Some(match d.code {
            Some(c) if c > 128 && c < 128 + 65 => format!(
                "tunelab was killed by signal {} on the host (exit {c}): {}",
                c - 128,
                last_line(&d.stderr)
            ),
            c => format!(
                "tunelab exited {} on the host: {}",
                c.map_or("by a signal".into(), |c| c.to_string()),
                last_line(&d.stderr)
            ),
        });
    }
    o
}

/// How long the TCP probe waits for a host's port (one SYN retransmit fits).
pub(crate) const PROBE_WAIT: Duration = Duration::from_secs(3);

/// Probe every host's ssh port at once before any ssh starts: a host that
/// does not answer is unreachable with the cause (no ssh spawned for it).
/// Skipped when ssh may connect elsewhere (a wrapper in TUNELAB_SSH, a jump
/// host, `HostName`, `Port` … in its configuration): ssh decides alone.
fn pre_check(plan: &Plan, hosts: &[Host], say: &(dyn Fn(&str, &str) + Sync)) -> Vec<Verdict> {
    let unknown = || vec![Verdict::Unknown; hosts.len()];
    if plan.ssh != "ssh" {
        return unknown();
    }
    if let Some(why) =
        super::ssh_config::redirection(&plan.ssh_options, &super::ssh_config::homes())
    {
        if hosts.len() > 1 {
            say(
                "*",
                &format!("no direct reachability check ({why}): ssh tries every host"),
            );
        }
        return unknown();
    }
    let targets: Vec<(String, u16)> = hosts
        .iter()
        .map(|h| (h.address.clone(), h.port.unwrap_or(22)))
        .collect();
    reach::probe(&targets, PROBE_WAIT.min(plan.timeout))
}

/// Run the plan on every host, at most `parallel` at once; `say(host, line)`
/// reports progress. Outcomes come back in the hosts' order.
pub(crate) fn run(
    plan: &Plan,
    hosts: &[Host],
    say: &(dyn Fn(&str, &str) + Sync),
) -> Vec<HostOutcome> {
    let t0 = Instant::now();
    let verdicts = pre_check(plan, hosts, say);
    let probed = t0.elapsed().as_secs_f64();
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<HostOutcome>>> = Mutex::new(
        hosts
            .iter()
            .zip(&verdicts)
            .map(|(h, v)| match v {
                Verdict::Unreachable(why) => Some(HostOutcome {
                    host: h.name.clone(),
                    arch: None,
                    status: "unreachable".into(),
                    exit_code: None,
                    seconds: probed,
                    copied: false,
                    cached: false,
                    error: Some(why.clone()),
                    output: None,
                }),
                _ => None,
            })
            .collect(),
    );
    std::thread::scope(|s| {
        for _ in 0..plan.parallel.clamp(1, hosts.len().max(1)) {
            s.spawn(|| loop {
                // After a signal no host is started: the first SIGTERM ends
                // a fan-out over thousands of hosts at once (hosts never
                // started are left out of the outcomes).
                if signals::caught().is_some() {
                    break;
                }
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(host) = hosts.get(i) else { break };
                if matches!(verdicts[i], Verdict::Unreachable(_)) {
                    continue;
                }
                let o = on_host(plan, host, &|l: &str| say(&host.name, l));
                results.lock().unwrap_or_else(|p| p.into_inner())[i] = Some(o);
            });
        }
    });
    results
        .into_inner()
        .unwrap_or_else(|p| p.into_inner())
        .into_iter()
        .flatten()
        .collect()
}

#[cfg(test)]
mod tests;
