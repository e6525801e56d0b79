//! `tunelab remote` against a real fleet on this machine: an OpenSSH server
//! on a loopback port with throwaway keys, reached under two host names, one
//! host that does not answer, one whose target is read-only, one that runs
//! past its timeout, one whose tunelab is killed — and the runs stored locally (and in PostgreSQL when
//! TUNELAB_TEST_PG is set).

mod common;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{is_root, json, Env};

struct Sshd {
    child: Child,
    port: u16,
    client_config: PathBuf,
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn keygen(path: &Path) {
    let ok = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(path)
        .status()
        .unwrap()
        .success();
    assert!(ok, "ssh-keygen failed");
}

/// An sshd of our own, or why not.
fn sshd(dir: &Path) -> Result<Sshd, String> {
    if !is_root() {
        return Err("needs root to start sshd".into());
    }
    let bin = ["/usr/sbin/sshd", "/usr/bin/sshd"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .ok_or("sshd is not installed (apt-get install openssh-server)")?;
    if Command::new("ssh").arg("-V").output().is_err() {
        return Err("the ssh client is missing".into());
    }
    // Privilege separation directory sshd insists on.
    std::fs::create_dir_all("/run/sshd").map_err(|e| e.to_string())?;
    keygen(&dir.join("host_key"));
    keygen(&dir.join("id"));
    std::fs::copy(dir.join("id.pub"), dir.join("authorized_keys")).unwrap();
    let port = free_port();
    let cfg = dir.join("sshd_config");
    std::fs::write(
        &cfg,
        format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\n\
             AuthorizedKeysFile {d}/authorized_keys\nPidFile {d}/sshd.pid\n\
             StrictModes no\nUsePAM no\nPermitRootLogin yes\nPasswordAuthentication no\n\
             KbdInteractiveAuthentication no\nAcceptEnv XDG_DATA_HOME\n",
            d = dir.display()
        ),
    )
    .unwrap();
    let child = Command::new(bin)
        .args(["-D", "-e", "-f"])
        .arg(&cfg)
        .stdout(Stdio::null())
        .stderr(Stdio::from(
            std::fs::File::create(dir.join("sshd.log")).unwrap(),
        ))
        .spawn()
        .map_err(|e| format!("cannot start sshd: {e}"))?;
    let client_config = dir.join("ssh_config");
    std::fs::write(
        &client_config,
        format!(
            "Host *\n  IdentityFile {d}/id\n  UserKnownHostsFile {d}/known_hosts\n\
             StrictHostKeyChecking accept-new\n  User root\n  ConnectTimeout 5\n",
            d = dir.display()
        ),
    )
    .unwrap();
    let t0 = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if t0.elapsed() > Duration::from_secs(10) {
            return Err(format!(
                "sshd did not listen: {}",
                std::fs::read_to_string(dir.join("sshd.log")).unwrap_or_default()
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(Sshd {
        child,
        port,
        client_config,
    })
}

fn inventory(env: &Env, port: u16) -> PathBuf {
    let d = env.dir.path();
    let path = d.join("inventory.ini");
    std::fs::write(
        &path,
        format!(
            "[boards]\nb1 ansible_host=127.0.0.1 tunelab_dir={d}/cache-b1\n\
             b2 ansible_host=localhost tunelab_dir={d}/cache-b2\n\
             [boards:vars]\nansible_port={port}\n\
             [dead]\ngone ansible_host=127.0.0.1 ansible_port=1\n\
             [lab:children]\nboards\ndead\n",
            d = d.display()
        ),
    )
    .unwrap();
    path
}

const QUICK: &[&str] = &[
    "run",
    "ipc.pipe",
    "-p",
    "test=latency",
    "--trials",
    "2",
    "--no-store",
];

#[test]
fn a_loopback_fleet_runs_stores_and_reports_each_failure() {
    let env = Env::new();
    let server = match sshd(env.dir.path()) {
        Ok(s) => s,
        Err(why) => {
            eprintln!("SKIPPED fleet_remote: {why}");
            return;
        }
    };
    let inv = inventory(&env, server.port);
    let cfg = format!("-F {}", server.client_config.display());
    let mut args = vec![
        "--json",
        "remote",
        "--allow-dynamic",
        "--inventory",
        inv.to_str().unwrap(),
        "lab",
    ];
    args.extend(["-o", &cfg, "--timeout", "60s", "--"]);
    args.extend(QUICK);
    let out = env.run(&args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "one host is unreachable: {err}");
    assert!(
        err.contains("1 of 3 host(s) did not complete: gone"),
        "{err}"
    );
    assert!(
        err.contains("[b1] copying"),
        "progress carries the host name: {err}"
    );
    let doc = json(&out);
    let hosts = doc["hosts"].as_array().unwrap();
    let by = |n: &str| hosts.iter().find(|h| h["host"] == n).unwrap().clone();
    for name in ["b1", "b2"] {
        let h = by(name);
        assert_eq!(h["status"], "ok", "{h}");
        assert_eq!(h["arch"], std::env::consts::ARCH);
        assert_eq!(h["copied"], true);
        assert!(h["run"].is_string(), "{h}");
    }
    assert_eq!(by("gone")["status"], "unreachable");
    assert!(
        by("gone")["error"].as_str().unwrap().contains("refused"),
        "{}",
        by("gone")
    );
    // Both runs are in the local store, with the host that measured them.
    let runs = json(&env.run(&["--json", "runs"]));
    assert_eq!(runs.as_array().unwrap().len(), 2, "{runs}");
    // b1 and b2 are one machine (one host name), as boards cloned from one
    // image are: the inventory name stored with each run tells them apart.
    let out = env.run(&["--json", "compare", "--machine", "b1", "--machine", "b2"]);
    assert_eq!(out.status.code(), Some(0), "{}", common::stderr(&out));
    let machines: Vec<String> = json(&out)["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["machine"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(machines, ["b1", "b2"]);

    // Into the fleet's PostgreSQL store, when the test server is there.
    match common::pg::PgSchema::new() {
        None => eprintln!("SKIPPED the PostgreSQL part: TUNELAB_TEST_PG is not set"),
        Some(pg) => {
            let url = pg.url();
            let mut a = vec![
                "--db",
                url.as_str(),
                "remote",
                "--allow-dynamic",
                "--inventory",
                inv.to_str().unwrap(),
            ];
            a.extend(["boards", "-o", &cfg, "--"]);
            a.extend(QUICK);
            let out = env.run(&a);
            assert_eq!(
                out.status.code(),
                Some(0),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let runs = json(&env.run(&["--db", url.as_str(), "--json", "runs"]));
            assert_eq!(runs.as_array().unwrap().len(), 2, "{runs}");
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                !err.contains(url.as_str()),
                "the database URL (with its password) is never printed"
            );
        }
    }

    // Again: the binary is cached by checksum, not copied.
    let mut again = vec![
        "--json",
        "remote",
        "--allow-dynamic",
        "--inventory",
        inv.to_str().unwrap(),
        "b1",
    ];
    again.extend(["-o", &cfg, "--"]);
    again.extend(QUICK);
    let out = env.run(&again);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(json(&out)["hosts"][0]["copied"], false);

    // A read-only target fails on the host with its own message and exit code.
    let ro = env.dir.path().join("ro");
    std::fs::create_dir(&ro).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "ro,size=1m", "tunelab-ro"])
        .arg(&ro)
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if mounted {
        let out = env.run(&[
            "remote",
            "--allow-dynamic",
            "--inventory",
            inv.to_str().unwrap(),
            "b2",
            "-o",
            &cfg,
            "--",
            "run",
            "io.record-size",
            "--target",
            ro.to_str().unwrap(),
            "--no-store",
        ]);
        let _ = Command::new("umount").arg(&ro).status();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{text}");
        assert!(
            text.contains("failed") && text.contains("exited 4"),
            "{text}"
        );
    }

    // A host that runs past its timeout is stopped and reported; the run
    // there never finished, so nothing new is stored.
    let before = json(&env.run(&["--json", "runs"]))
        .as_array()
        .unwrap()
        .len();
    let out = env.run(&[
        "remote",
        "--allow-dynamic",
        "--inventory",
        inv.to_str().unwrap(),
        "b1",
        "-o",
        &cfg,
        "--timeout",
        "3s",
        "--",
        "time",
        "--runs",
        "1",
        "--",
        "sleep",
        "30",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("timeout"), "{text}");
    // ...and the host's tunelab does not run on unattended: killing ssh
    // closes its stdin, and its stdin guard stops it as on a hangup, long
    // before the 30 s sleep would have ended.
    let cache = env.dir.path().join("cache-b1");
    let t0 = Instant::now();
    while !remote_tunelabs(&cache).is_empty() {
        assert!(
            t0.elapsed() < Duration::from_secs(15),
            "the timed-out remote tunelab still runs: {:?}",
            remote_tunelabs(&cache)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let after = json(&env.run(&["--json", "runs"]))
        .as_array()
        .unwrap()
        .len();
    assert_eq!(after, before);

    // A host whose tunelab is killed (SIGKILL, as the OOM killer or a
    // watchdog would) is reported as killed with its signal, not as
    // unreachable: ssh exits 255 for a remote command that died by a signal,
    // the code it uses for its own failures.
    let mut remote = env.background();
    remote.args([
        "remote",
        "--allow-dynamic",
        "--inventory",
        inv.to_str().unwrap(),
        "b1",
        "-o",
        &cfg,
        "--timeout",
        "60s",
        "--",
        "time",
        "--runs",
        "1",
        "--",
        "sleep",
        "30",
    ]);
    let child = remote
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    let victim = loop {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the remote tunelab never started"
        );
        // None is left from the timed-out run (checked above): one that is
        // still there 300 ms later is the victim (a short-lived probe of the
        // binary may be seen first and be gone by the kill).
        if let Some(&pid) = remote_tunelabs(&cache).first() {
            std::thread::sleep(Duration::from_millis(300));
            if remote_tunelabs(&cache).contains(&pid) {
                break pid;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(Command::new("kill")
        .args(["-KILL", &victim.to_string()])
        .status()
        .unwrap()
        .success());
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("killed by signal 9") && !text.contains("unreachable"),
        "{text}"
    );
    assert!(
        t0.elapsed() < Duration::from_secs(25),
        "not waited for the sleep"
    );
}

/// The pids of `tunelab … time` processes running from a host's binary
/// cache (their executable lives under `cache`).
fn remote_tunelabs(cache: &Path) -> Vec<u32> {
    let mut found = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return found;
    };
    for e in dir.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let exe = std::fs::read_link(e.path().join("exe")).unwrap_or_default();
        let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let args: Vec<&[u8]> = cmd.split(|b| *b == 0).collect();
        if exe.starts_with(cache) && args.iter().any(|a| *a == b"time") {
            found.push(pid);
        }
    }
    found
}

#[test]
fn remote_arguments_are_checked_before_connecting() {
    let env = Env::new();
    let out = env.run(&["remote", "-oProxyCommand=x", "--", "inspect"]);
    assert_eq!(out.status.code(), Some(2));
    let out = env.run(&["remote", "--", "inspect"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no hosts"));
    let out = env.run(&["remote", "h1"]);
    assert_eq!(out.status.code(), Some(2), "ARGS after -- are required");
    let out = env.run(&["remote", "h1", "--", "remote", "h2", "--", "inspect"]);
    assert_eq!(out.status.code(), Some(2));
    let inv = env.dir.path().join("inv.ini");
    std::fs::write(&inv, "[g]\nh1\n").unwrap();
    let out = env.run(&[
        "remote",
        "--inventory",
        inv.to_str().unwrap(),
        "nope",
        "--",
        "inspect",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("'nope'"));
}

/// Two names of one machine sharing a tunelab_dir copy the binary at the
/// same time, again and again: each upload has its own temporary name and
/// is renamed atomically, so neither fails (it did 1 in 2 tries). The runs
/// they bring back are stored here and not in the hosts' default database.
#[test]
fn hosts_sharing_a_directory_copy_without_racing_and_store_nothing_there() {
    let env = Env::new();
    let server = match sshd(env.dir.path()) {
        Ok(s) => s,
        Err(why) => {
            eprintln!("SKIPPED fleet_remote: {why}");
            return;
        }
    };
    let d = env.dir.path();
    let inv = d.join("shared.ini");
    std::fs::write(
        &inv,
        format!(
            "[boards]\nb1 ansible_host=127.0.0.1\nb2 ansible_host=localhost\n\
             [boards:vars]\nansible_port={}\ntunelab_dir={}/shared\n",
            server.port,
            d.display()
        ),
    )
    .unwrap();
    let cfg = format!("-F {}", server.client_config.display());
    let host_data = d.join("host-data");
    let set_env = format!("-oSetEnv=XDG_DATA_HOME={}", host_data.display());
    for round in 0..4 {
        let _ = std::fs::remove_dir_all(d.join("shared"));
        let out = env.run(&[
            "--json",
            "remote",
            "--inventory",
            inv.to_str().unwrap(),
            "boards",
            "-o",
            &cfg,
            "-o",
            &set_env,
            "--timeout",
            "60s",
            "--allow-dynamic",
            "--",
            "run",
            "ipc.pipe",
            "-p",
            "test=latency",
            "--trials",
            "2",
        ]);
        let err = common::stderr(&out);
        assert_eq!(out.status.code(), Some(0), "round {round}: {err}");
        let doc = json(&out);
        for h in doc["hosts"].as_array().unwrap() {
            assert_eq!(h["status"], "ok", "round {round}: {h}");
        }
        let left: Vec<String> = common::list(&d.join("shared"))
            .into_iter()
            .filter(|n| n.contains(".part"))
            .collect();
        assert!(left.is_empty(), "round {round}: {left:?}");
    }
    assert!(
        !host_data.join("tunelab").exists(),
        "the hosts stored runs in their own default database"
    );
    let runs = json(&env.run(&["--json", "runs"]));
    assert_eq!(runs.as_array().unwrap().len(), 8, "{runs}");
}
