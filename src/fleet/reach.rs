//! Whether hosts answer on their ssh port, asked of all of them at once
//! before any ssh starts: a non-blocking TCP connect per address, polled
//! together with one deadline each. Spawning ssh costs milliseconds per
//! host, so an inventory of thousands of dead hosts took minutes; this
//! takes the deadline (plus name lookups), and says why a host cannot be
//! reached, which ssh's exit 255 does not.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::os::fd::OwnedFd;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::io::Errno;
use rustix::net::{AddressFamily, SocketFlags, SocketType};
use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};

use crate::safety::signals;

/// What the probe found for one host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Some address of it accepted a connection on the port.
    Answers,
    /// No address did; why, naming the address and port.
    Unreachable(String),
    /// Not known (the name lookup did not finish in time, or a signal came):
    /// ssh decides.
    Unknown,
}

/// Connections in flight at once at most (file descriptors).
const MAX_IN_FLIGHT: usize = 16_384;
/// Name lookups at once (getaddrinfo blocks; a thread each).
const LOOKUP_THREADS: usize = 8;

/// Probe `targets` (address, port): every address a name resolves to is
/// tried; a host answers when one of them accepts within `within`.
pub(crate) fn probe(targets: &[(String, u16)], within: Duration) -> Vec<Verdict> {
    let t0 = Instant::now();
    let addrs = resolve(targets, t0 + within);
    let mut verdicts: Vec<Verdict> = addrs
        .iter()
        .map(|a| match a {
            Lookup::Failed(why) => Verdict::Unreachable(why.clone()),
            Lookup::Addrs(_) | Lookup::Late => Verdict::Unknown,
        })
        .collect();
    let attempts: Vec<(usize, SocketAddr)> = addrs
        .iter()
        .enumerate()
        .filter_map(|(i, a)| match a {
            Lookup::Addrs(v) => Some(v.iter().map(move |s| (i, *s))),
            _ => None,
        })
        .flatten()
        .collect();
    let mut errors: Vec<Vec<String>> = vec![Vec::new(); targets.len()];
    let (restore, soft) = raise_fd_limit();
    let window = usize::try_from(soft)
        .unwrap_or(usize::MAX)
        .saturating_sub(128)
        .clamp(16, MAX_IN_FLIGHT);
    connect_all(&attempts, window, within, &mut verdicts, &mut errors);
    if let Some(old) = restore {
        let _ = setrlimit(Resource::Nofile, old);
    }
    for (v, errs) in verdicts.iter_mut().zip(errors) {
        if *v == Verdict::Unknown && !errs.is_empty() && signals::caught().is_none() {
            *v = Verdict::Unreachable(errs.join("; "));
        }
    }
    verdicts
}

#[derive(Clone)]
enum Lookup {
    Addrs(Vec<SocketAddr>),
    Failed(String),
    /// Not resolved before the deadline.
    Late,
}

/// Addresses of every target: literals parsed here, names looked up by a
/// few threads, each name once. A lookup still running at `deadline` is
/// left (its thread ends on its own) and the host is `Late`.
fn resolve(targets: &[(String, u16)], deadline: Instant) -> Vec<Lookup> {
    let mut names: Vec<(String, u16)> = Vec::new();
    let mut index: HashMap<(String, u16), usize> = HashMap::new();
    for (a, p) in targets {
        let bare = a.trim_start_matches('[').trim_end_matches(']');
        if bare.parse::<IpAddr>().is_err() && !index.contains_key(&(a.clone(), *p)) {
            index.insert((a.clone(), *p), names.len());
            names.push((a.clone(), *p));
        }
    }
    let mut found: Vec<Option<Lookup>> = (0..names.len()).map(|_| None).collect();
    if !names.is_empty() {
        let queue = Arc::new(Mutex::new(names.clone().into_iter().enumerate()));
        let (tx, rx) = mpsc::channel();
        for _ in 0..LOOKUP_THREADS.min(names.len()) {
            let (queue, tx) = (Arc::clone(&queue), tx.clone());
            // Detached: a lookup hanging past the deadline must not hold
            // the fan-out; the thread ends with its lookup.
            let _ = std::thread::Builder::new()
                .name("tunelab-resolve".into())
                .spawn(move || loop {
                    let next = queue.lock().ok().and_then(|mut q| q.next());
                    let Some((i, (name, port))) = next else { break };
                    let r = match (name.as_str(), port).to_socket_addrs() {
                        Ok(a) => {
                            let a: Vec<SocketAddr> = a.collect();
                            if a.is_empty() {
                                Lookup::Failed(format!("{name} has no address"))
                            } else {
                                Lookup::Addrs(a)
                            }
                        }
                        Err(e) => Lookup::Failed(format!("the name {name} does not resolve ({e})")),
                    };
                    if tx.send((i, r)).is_err() {
                        break;
                    }
                });
        }
        drop(tx);
        let mut left = names.len();
        while left > 0 && signals::caught().is_none() {
            let wait = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(wait.min(Duration::from_millis(100))) {
                Ok((i, r)) => {
                    found[i] = Some(r);
                    left -= 1;
                }
                Err(mpsc::RecvTimeoutError::Timeout) if Instant::now() < deadline => {}
                Err(_) => break,
            }
        }
    }
    let found: Vec<Lookup> = found
        .into_iter()
        .map(|f| f.unwrap_or(Lookup::Late))
        .collect();
    targets
        .iter()
        .map(|(a, p)| {
            let bare = a.trim_start_matches('[').trim_end_matches(']');
            match bare.parse::<IpAddr>() {
                Ok(ip) => Lookup::Addrs(vec![SocketAddr::new(ip, *p)]),
                Err(_) => match index.get(&(a.clone(), *p)) {
                    Some(&i) => found[i].clone(),
                    None => Lookup::Late,
                },
            }
        })
        .collect()
}

/// Lift the soft open-file limit towards the hard one for the probe (the
/// hard limit is the user's to grant): the limit to put back, if changed,
/// and the soft limit in force.
fn raise_fd_limit() -> (Option<Rlimit>, u64) {
    let old = getrlimit(Resource::Nofile);
    // None: unlimited.
    let soft = old.current.unwrap_or(u64::MAX);
    let cap = MAX_IN_FLIGHT as u64 + 128;
    if soft >= cap {
        return (None, soft);
    }
    let want = old.maximum.map_or(cap, |h| h.min(cap));
    let new = Rlimit {
        current: Some(want),
        maximum: old.maximum,
    };
    if want > soft && setrlimit(Resource::Nofile, new).is_ok() {
        (Some(old), want)
    } else {
        (None, soft)
    }
}

/// One connection attempt: the socket, whose address it is, its deadline.
struct Flight {
    fd: OwnedFd,
    attempt: usize,
    until: Instant,
}

/// Connect to every attempt, at most `window` at once; the first address
/// of a host that accepts makes it `Answers`; each failure is noted.
fn connect_all(
    attempts: &[(usize, SocketAddr)],
    window: usize,
    within: Duration,
    verdicts: &mut [Verdict],
    errors: &mut [Vec<String>],
) {
    let mut next = 0;
    let mut flying: Vec<Flight> = Vec::new();
    loop {
        if signals::caught().is_some() {
            return;
        }
        while flying.len() < window && next < attempts.len() {
            let (host, addr) = attempts[next];
            if verdicts[host] != Verdict::Answers {
                match start(&addr) {
                    Ok(Some(fd)) => flying.push(Flight {
                        fd,
                        attempt: next,
                        until: Instant::now() + within,
                    }),
                    Ok(None) => verdicts[host] = Verdict::Answers,
                    Err(e) => errors[host].push(cause(e, &addr)),
                }
            }
            next += 1;
        }
        if flying.is_empty() {
            return;
        }
        let now = Instant::now();
        let soonest = flying.iter().map(|f| f.until).min().unwrap_or(now);
        let wait = soonest
            .saturating_duration_since(now)
            .min(Duration::from_millis(100));
        let ready: Vec<bool> = {
            let mut fds: Vec<PollFd> = flying
                .iter()
                .map(|f| PollFd::new(&f.fd, PollFlags::OUT))
                .collect();
            let ts = Timespec {
                tv_sec: wait.as_secs() as _,
                tv_nsec: wait.subsec_nanos() as _,
            };
            match poll(&mut fds, Some(&ts)) {
                Ok(_) => fds.iter().map(|p| !p.revents().is_empty()).collect(),
                Err(Errno::INTR) => vec![false; flying.len()],
                Err(_) => vec![false; flying.len()],
            }
        };
        let now = Instant::now();
        let mut keep = Vec::with_capacity(flying.len());
        for (f, r) in flying.into_iter().zip(ready) {
            let (host, addr) = attempts[f.attempt];
            if r {
                match rustix::net::sockopt::socket_error(&f.fd) {
                    Ok(Ok(())) => verdicts[host] = Verdict::Answers,
                    Ok(Err(e)) | Err(e) => errors[host].push(cause(e, &addr)),
                }
            } else if now >= f.until {
                errors[host].push(format!(
                    "no answer from {addr} within {} s",
                    within.as_secs_f64()
                ));
            } else if verdicts[host] != Verdict::Answers {
                keep.push(f);
            }
        }
        flying = keep;
    }
}

/// A non-blocking connect: `None` when it connected at once.
fn start(addr: &SocketAddr) -> std::result::Result<Option<OwnedFd>, Errno> {
    let family = match addr {
        SocketAddr::V4(_) => AddressFamily::INET,
        SocketAddr::V6(_) => AddressFamily::INET6,
    };
    let fd = rustix::net::socket_with(
        family,
        SocketType::STREAM,
        SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
        None,
    )?;
    match rustix::net::connect(&fd, addr) {
        Ok(()) => Ok(None),
        Err(Errno::INPROGRESS) | Err(Errno::INTR) => Ok(Some(fd)),
        Err(e) => Err(e),
    }
}

/// The cause of a failed connect, in words, with where it went.
fn cause(e: Errno, addr: &SocketAddr) -> String {
    match e {
        Errno::CONNREFUSED => format!("connection refused on {addr}"),
        Errno::HOSTUNREACH => format!("no route to host {addr} (host unreachable)"),
        Errno::NETUNREACH => format!("network unreachable for {addr}"),
        Errno::TIMEDOUT => format!("connection to {addr} timed out"),
        Errno::MFILE | Errno::NFILE => {
            format!("cannot open a socket for {addr}: too many open files")
        }
        e => format!(
            "cannot connect to {addr}: {}",
            std::io::Error::from_raw_os_error(e.raw_os_error())
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusing_port_and_a_bad_name_are_named() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let open = l.local_addr().unwrap().port();
        // A port just freed refuses.
        let closed = {
            let t = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            t.local_addr().unwrap().port()
        };
        let v = probe(
            &[
                ("127.0.0.1".into(), open),
                ("127.0.0.1".into(), closed),
                ("no-such-host.invalid".into(), 22),
            ],
            Duration::from_secs(2),
        );
        assert_eq!(v[0], Verdict::Answers);
        assert_eq!(
            v[1],
            Verdict::Unreachable(format!("connection refused on 127.0.0.1:{closed}"))
        );
        match &v[2] {
            Verdict::Unreachable(w) => assert!(w.contains("does not resolve"), "{w}"),
            // A resolver that does not answer in time leaves it to ssh.
            Verdict::Unknown => {}
            v => panic!("{v:?}"),
        }
    }
}
