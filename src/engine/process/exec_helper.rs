//! A tiny spawner so that a measured program's peak RSS is its own.
//!
//! Why: at execve(2) the kernel keeps the larger of the old address space's
//! peak RSS and the new program's as the process's `ru_maxrss`
//! (`setmax_mm_hiwater_rss` in exec_mmap). Spawned straight from tunelab —
//! vfork/posix_spawn shares tunelab's address space until exec, fork copies
//! its anonymous pages — `true` reported tunelab's 7.5 MiB, or 200 MiB after
//! mem.bandwidth, instead of its own ~1 MiB. A zombie has no memory left to
//! read (VmHWM is gone before wait returns), and cgroups need privileges.
//!
//! So tunelab starts itself (`/proc/self/exe`, so no second binary is needed
//! on a board) with `TUNELAB_EXEC_HELPER=<fd>` in the environment. A
//! constructor in `.init_array` sees the variable before any Rust code runs,
//! and, as a small fresh process, fork()s (a real fork: the child copies only
//! the helper's few anonymous pages, like `/usr/bin/time` does) and execs the
//! program, then reports on the fd in fixed-size binary records:
//!
//! - `PID`  (pid, CLOCK_MONOTONIC ns just before fork),
//! - `EXEC` (exec succeeded) or `FAIL` (errno of execv),
//! - `DONE` (wait status, user µs, sys µs, ru_maxrss KiB, CLOCK_MONOTONIC ns
//!   when wait4 returned).
//!
//! Wall time is thus taken in the helper, fork to wait4, like `/usr/bin/time`;
//! the helper's own start-up is not in it. The program's argv is the
//! helper's argv after argv[0] and the resolved path (read from /proc/self/cmdline, which works
//! with glibc and musl alike; musl passes no arguments to constructors).
//!
//! The helper ignores SIGINT/SIGTERM/SIGHUP/SIGQUIT, puts the program in a
//! process group of its own (tunelab kills that group on Ctrl-C or a
//! budget, and the helper reports the death), dies with tunelab
//! (PR_SET_PDEATHSIG) and makes the program die with it, so nothing is left
//! behind when tunelab is killed.
//!
//! libc: getenv, unsetenv, _exit, write, read, open, close, c_void, O_RDONLY, O_CLOEXEC, EINTR, E2BIG, EINVAL (the helper runs from .init_array before Rust's runtime: plain C calls)
//! libc: signal, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIG_IGN, SIG_DFL, prctl, PR_SET_PDEATHSIG, SIGKILL, c_ulong, getpid, getppid, pipe2, fork, setpgid, execv (fork and exec: async-signal-safe between them)
//! libc: waitpid, wait4, rusage, timeval, clock_gettime, CLOCK_MONOTONIC, timespec (the helper's own wait and clock, same runtime-free rule)

use std::ffi::c_char;

/// The environment variable that turns a tunelab process into the helper.
pub(crate) const ENV: &str = "TUNELAB_EXEC_HELPER";
const ENV_C: &[u8] = b"TUNELAB_EXEC_HELPER\0";
/// argv[0] of the helper (shows in `ps`).
pub(crate) const ARG0: &str = "tunelab-exec";

pub(crate) const TAG_PID: i64 = 1;
pub(crate) const TAG_EXEC: i64 = 2;
pub(crate) const TAG_FAIL: i64 = 3;
pub(crate) const TAG_DONE: i64 = 4;
/// One record: tag + 6 values, native-endian i64.
pub(crate) const RECORD: usize = 7 * 8;

#[used]
#[link_section = ".init_array"]
static CTOR: extern "C" fn() = ctor;

/// Referenced by the spawner so that the constructor's object file is always
/// linked into a binary that can start the helper.
pub(crate) fn ensure_linked() {
    std::hint::black_box(&CTOR);
}

extern "C" fn ctor() {
    // SAFETY: getenv before any thread exists.
    let v = unsafe { libc::getenv(ENV_C.as_ptr() as *const c_char) };
    if v.is_null() {
        return;
    }
    let mut fd: i32 = 0;
    let mut p = v as *const u8;
    // SAFETY: v is a NUL-terminated C string from the environment.
    unsafe {
        while (*p).is_ascii_digit() {
            fd = fd.saturating_mul(10).saturating_add((*p - b'0') as i32);
            p = p.add(1);
        }
        libc::unsetenv(ENV_C.as_ptr() as *const c_char);
        libc::_exit(helper(fd));
    }
}

const ARGV_BYTES: usize = 256 << 10;
const ARGV_MAX: usize = 8192;
static mut CMDLINE: [u8; ARGV_BYTES] = [0; ARGV_BYTES];
static mut ARGV: [*const c_char; ARGV_MAX] = [std::ptr::null(); ARGV_MAX];

fn send(fd: i32, rec: [i64; 7]) {
    let mut b = [0u8; RECORD];
    for (i, v) in rec.iter().enumerate() {
        b[i * 8..i * 8 + 8].copy_from_slice(&v.to_ne_bytes());
    }
    // SAFETY: b is a valid buffer; a write of <= PIPE_BUF bytes is atomic.
    unsafe {
        while libc::write(fd, b.as_ptr() as *const libc::c_void, RECORD) < 0
            && errno() == libc::EINTR
        {}
    }
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// CLOCK_MONOTONIC in ns (the clock `Instant` uses on Linux).
// time_t and c_long are 32-bit on some ARM boards: the casts are not no-ops there.
#[allow(clippy::unnecessary_cast)]
pub(crate) fn mono_ns() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: fills ts.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as i64 * 1_000_000_000 + ts.tv_nsec as i64
}

/// The helper's whole life; returns its exit code. Plain libc only, no
/// allocation: everything it touches lands in the child's copy.
// time_t and c_long are 32-bit on some ARM boards: the casts are not no-ops there.
#[allow(clippy::unnecessary_cast)]
unsafe fn helper(out: i32) -> i32 {
    let fail = |e: i32| {
        send(out, [TAG_FAIL, e as i64, 0, 0, 0, 0, 0]);
        1
    };
    // argv of the program = our cmdline after argv[0].
    let fd = libc::open(
        crate::system::proc::SELF_CMDLINE.as_ptr(),
        libc::O_RDONLY | libc::O_CLOEXEC,
    );
    if fd < 0 {
        return fail(errno());
    }
    let buf = &raw mut CMDLINE;
    let base = buf as *mut u8;
    let mut len = 0usize;
    loop {
        let r = libc::read(fd, base.add(len) as *mut libc::c_void, ARGV_BYTES - 1 - len);
        if r > 0 {
            len += r as usize;
            if len >= ARGV_BYTES - 1 {
                libc::close(fd);
                return fail(libc::E2BIG);
            }
        } else if r < 0 && errno() == libc::EINTR {
            continue;
        } else {
            break;
        }
    }
    libc::close(fd);
    *base.add(len) = 0;
    let argv = &raw mut ARGV;
    let av = argv as *mut *const c_char;
    let mut n = 0usize;
    let mut start = 0usize;
    for i in 0..len {
        if *base.add(i) == 0 {
            if n + 1 >= ARGV_MAX {
                return fail(libc::E2BIG);
            }
            *av.add(n) = base.add(start) as *const c_char;
            n += 1;
            start = i + 1;
        }
    }
    // argv: [helper name, resolved path, the program's own argv…].
    if n < 3 {
        return fail(libc::EINVAL);
    }
    *av.add(n) = std::ptr::null();
    let path = *av.add(1);
    let prog = av.add(2);

    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
        libc::signal(sig, libc::SIG_IGN);
    }
    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
    let me = libc::getpid();
    let mut ep = [0i32; 2];
    if libc::pipe2(ep.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
        return fail(errno());
    }
    let t0 = mono_ns();
    let pid = libc::fork();
    if pid < 0 {
        return fail(errno());
    }
    if pid == 0 {
        libc::close(ep[0]);
        libc::close(out);
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
            libc::signal(sig, libc::SIG_DFL);
        }
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
        // Its own process group, so tunelab can kill the program with
        // everything it started (a shell's children too) on a budget or a
        // signal, while the helper lives on to report.
        libc::setpgid(0, 0);
        if libc::getppid() != me {
            libc::_exit(127);
        }
        // The program keeps the argv[0] it was given (ps, pgrep and the
        // program itself see `sleep`, not `/usr/bin/sleep`).
        libc::execv(path, prog);
        let e = errno();
        libc::write(ep[1], &e as *const i32 as *const libc::c_void, 4);
        libc::_exit(127);
    }
    libc::close(ep[1]);
    send(out, [TAG_PID, pid as i64, t0, 0, 0, 0, 0]);
    let mut e: i32 = 0;
    let r = loop {
        let r = libc::read(ep[0], &mut e as *mut i32 as *mut libc::c_void, 4);
        if r < 0 && errno() == libc::EINTR {
            continue;
        }
        break r;
    };
    libc::close(ep[0]);
    if r == 4 {
        let mut st = 0;
        libc::waitpid(pid, &mut st, 0);
        return fail(e);
    }
    send(out, [TAG_EXEC, 0, 0, 0, 0, 0, 0]);
    let mut st = 0;
    let mut ru: libc::rusage = std::mem::zeroed();
    loop {
        let r = libc::wait4(pid, &mut st, 0, &mut ru);
        if r == pid {
            break;
        }
        if r < 0 && errno() == libc::EINTR {
            continue;
        }
        return fail(errno());
    }
    let t1 = mono_ns();
    let us = |t: libc::timeval| t.tv_sec as i64 * 1_000_000 + t.tv_usec as i64;
    send(
        out,
        [
            TAG_DONE,
            st as i64,
            us(ru.ru_utime),
            us(ru.ru_stime),
            ru.ru_maxrss as i64,
            t1,
            0,
        ],
    );
    0
}
