//! The profiler half of `diagnose` on this machine's real kernel: sampling a
//! child that spins in a known function, a syscall-heavy exec'd child,
//! inherit into grandchildren, the whole system, counters, the cache-miss
//! profile (skipped with its reason where there is no PMU) and a flame
//! graph of a real profile. Each test that the kernel forbids prints why
//! and returns.
#![cfg(feature = "profile")]

use std::ffi::CString;
use std::time::{Duration, Instant};

use tunelab::diagnose::profile::{self, Event, Request, Scope};
use tunelab::model::profile::Profile;

/// A child forked stopped: it waits for one byte on a pipe, then runs
/// `body` (async-signal-safe only: it is a fork of a threaded process) and
/// exits. Mirrors how `diagnose -- CMD` starts its command.
struct Child {
    pid: i32,
    release_fd: i32,
}

fn fork_stopped(body: impl FnOnce()) -> Child {
    let mut fds = [0i32; 2];
    // SAFETY: pipe writes two fds into the array.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: the child only reads, runs `body` and _exits.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        unsafe {
            libc::close(fds[1]);
            let mut b = 0u8;
            libc::read(fds[0], &mut b as *mut u8 as *mut libc::c_void, 1);
        }
        body();
        unsafe { libc::_exit(0) };
    }
    unsafe { libc::close(fds[0]) };
    Child {
        pid,
        release_fd: fds[1],
    }
}

impl Child {
    fn release(&self) {
        let b = 1u8;
        // SAFETY: writing one byte from a valid buffer to our pipe end.
        unsafe {
            libc::write(self.release_fd, &b as *const u8 as *const libc::c_void, 1);
            libc::close(self.release_fd);
        }
    }

    fn wait(&self) -> i32 {
        let mut status = 0;
        // SAFETY: waiting for our own child.
        unsafe { libc::waitpid(self.pid, &mut status, 0) };
        status
    }
}

fn thread_cpu_ms() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1000 + ts.tv_nsec as u64 / 1_000_000
}

/// Spin in user space until this thread has used `ms` of CPU time (not
/// wall time: on the shared test machine the child may get a fraction of a
/// CPU, and CPU time is what cpu-clock samples and task-clock count).
#[inline(never)]
#[no_mangle]
pub extern "C" fn tunelab_test_spin_here(ms: u64) -> u64 {
    let end = thread_cpu_ms() + ms;
    let mut x = 1u64;
    while thread_cpu_ms() < end {
        for _ in 0..200_000 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
    x
}

#[inline(never)]
#[no_mangle]
pub extern "C" fn tunelab_test_grandchild_spin(ms: u64) -> u64 {
    let end = thread_cpu_ms() + ms;
    let mut x = 3u64;
    while thread_cpu_ms() < end {
        for _ in 0..200_000 {
            x = std::hint::black_box(x.rotate_left(5) ^ 0x9e3779b97f4a7c15);
        }
    }
    x
}

fn req(scope: Scope) -> Request {
    Request {
        scope,
        event: Event::Auto,
        frequency_hz: 999,
        call_graph: true,
        budget_share: 0.0,
        own_until_exec: false,
    }
}

fn start_or_skip(r: &Request) -> Option<profile::Running> {
    match profile::start(r) {
        Ok(p) => Some(p),
        Err(e) => {
            eprintln!("skipped: the kernel does not allow this profile here: {e}");
            None
        }
    }
}

fn top_user(p: &Profile) -> Vec<String> {
    p.symbols
        .iter()
        .filter(|r| !r.image.starts_with("[kernel"))
        .map(|r| r.symbol.clone())
        .collect()
}

fn show(p: &Profile) {
    eprintln!(
        "event {} ({}), {} samples ({} user, {} kernel), lost {}",
        p.event, p.event_reason, p.samples, p.user_samples, p.kernel_samples, p.lost
    );
    for r in p.symbols.iter().take(8) {
        eprintln!(
            "{:>6} {:>6.2}%  {:<24} {}",
            r.samples, r.percent, r.image, r.symbol
        );
    }
    eprintln!("overhead: {}", p.overhead.summary);
}

#[test]
fn busy_function_is_the_top_user_symbol() {
    let child = fork_stopped(|| {
        tunelab_test_spin_here(1200);
    });
    let Some(run) = start_or_skip(&req(Scope::Process { pid: child.pid })) else {
        child.release();
        child.wait();
        return;
    };
    child.release();
    child.wait();
    // The target is gone but still attached: its ring buffers report
    // POLLHUP from now on, which must not make the reader spin.
    std::thread::sleep(Duration::from_millis(300));
    let p = run.finish().expect("finish");
    show(&p);
    // 1.2 s of CPU at 999 Hz is ~1200 cpu-clock samples; frequency mode
    // starts from a guessed period and converges, so ask for half.
    assert!(p.samples >= 600, "only {} samples", p.samples);
    let users = top_user(&p);
    assert_eq!(
        users.first().map(String::as_str),
        Some("tunelab_test_spin_here"),
        "{users:?}"
    );
    let top = p
        .symbols
        .iter()
        .find(|r| r.symbol == "tunelab_test_spin_here")
        .unwrap();
    assert!(top.percent > 50.0, "spin function only {:.1}%", top.percent);
    assert!(
        !top.image.is_empty() && !top.image.starts_with('['),
        "image {}",
        top.image
    );
    let sum: f64 = p.symbols.iter().map(|r| r.percent).sum();
    assert!((sum - 100.0).abs() < 1e-6, "percentages sum to {sum}");
    assert_eq!(p.samples, p.user_samples + p.kernel_samples);
    // Folded stacks are rooted at the process name and end in the leaf.
    assert!(p
        .folded
        .iter()
        .any(|f| f.stack.ends_with(";tunelab_test_spin_here") && f.samples > 0));
    // The profiler's own cost is measured and stated.
    assert!(p.overhead.interval_ms >= 1200.0, "{:?}", p.overhead);
    assert!(p.overhead.reader_cpu_ms > 0.0, "{:?}", p.overhead);
    assert!(p.overhead.summary.contains("% of one CPU"));
    assert!(p.overhead.cpu_percent_of_one_cpu < 5.0, "{:?}", p.overhead);
    // A flame graph of a real profile names the function.
    let svg = profile::flamegraph_svg(&p.folded, "spin").unwrap();
    assert!(svg.contains("tunelab_test_spin_here"));
}

#[test]
fn children_forked_after_start_are_profiled() {
    let child = fork_stopped(|| {
        // SAFETY: fork again in the already forked, single-threaded child.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            tunelab_test_grandchild_spin(800);
            unsafe { libc::_exit(0) };
        }
        tunelab_test_spin_here(800);
        let mut st = 0;
        unsafe { libc::waitpid(pid, &mut st, 0) };
    });
    let Some(run) = start_or_skip(&req(Scope::Process { pid: child.pid })) else {
        child.release();
        child.wait();
        return;
    };
    child.release();
    child.wait();
    let p = run.finish().expect("finish");
    show(&p);
    let users = top_user(&p);
    let rank = |name: &str| users.iter().position(|s| s == name);
    assert!(
        rank("tunelab_test_spin_here").is_some_and(|r| r < 3),
        "{users:?}"
    );
    assert!(
        rank("tunelab_test_grandchild_spin").is_some_and(|r| r < 3),
        "grandchild not profiled: {users:?}"
    );
}

#[test]
fn syscall_heavy_exec_shows_kernel_symbols() {
    let dd = CString::new("/bin/dd").unwrap();
    let args: Vec<CString> = [
        "dd",
        "if=/dev/zero",
        "of=/dev/null",
        "bs=512",
        "count=400000",
    ]
    .iter()
    .map(|s| CString::new(*s).unwrap())
    .collect();
    let mut argv: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    let child = fork_stopped(move || unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY);
        libc::dup2(null, 2);
        libc::execv(dd.as_ptr(), argv.as_ptr());
        libc::_exit(127);
    });
    let Some(run) = start_or_skip(&req(Scope::Process { pid: child.pid })) else {
        child.release();
        child.wait();
        return;
    };
    child.release();
    let status = child.wait();
    let p = run.finish().expect("finish");
    show(&p);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "dd failed: {status}"
    );
    if !p.kernel_included {
        eprintln!("skipped the kernel checks: {}", p.event_reason);
        return;
    }
    assert!(p.samples >= 20, "only {} samples", p.samples);
    assert!(
        p.kernel_samples * 2 > p.samples,
        "dd of /dev/zero should be mostly kernel time: {} of {}",
        p.kernel_samples,
        p.samples
    );
    let named_kernel = p
        .symbols
        .iter()
        .filter(|r| r.image == "[kernel]" && !r.symbol.starts_with("0x"))
        .map(|r| r.samples)
        .sum::<u64>();
    assert!(
        named_kernel * 2 > p.kernel_samples,
        "most kernel samples should resolve through kallsyms: {named_kernel} of {}",
        p.kernel_samples
    );
    // dd and libc addresses resolve even when a sample was read before
    // the MMAP2 record of its library (another CPU's ring buffer).
    let unknown: u64 = p
        .symbols
        .iter()
        .filter(|r| r.image == "[unknown]")
        .map(|r| r.samples)
        .sum();
    assert!(
        unknown * 20 < p.samples,
        "{unknown} of {} samples in no known mapping",
        p.samples
    );
    // The comm after exec names the stacks, and kernel stacks run down
    // to dd's own frames (call chains cross the user/kernel boundary).
    assert!(
        p.folded.iter().any(|f| f.stack.starts_with("dd;")),
        "{:?}",
        &p.folded[..3.min(p.folded.len())]
    );
    assert!(!p.callgraph.is_empty());
    assert!(p.callgraph.iter().any(|e| !e.callers.is_empty()));
}

#[test]
fn whole_system_profile_sees_a_spinning_process() {
    let child = fork_stopped(|| {
        tunelab_test_spin_here(1000);
    });
    let Some(run) = start_or_skip(&req(Scope::System)) else {
        child.release();
        child.wait();
        return;
    };
    child.release();
    child.wait();
    let p = run.finish().expect("finish");
    show(&p);
    assert!(p.scope.starts_with("whole system"), "{}", p.scope);
    // Other helpers share the machine: the spinner must be prominent, not
    // necessarily first.
    let users = top_user(&p);
    let rank = users.iter().position(|s| s == "tunelab_test_spin_here");
    assert!(
        rank.is_some_and(|r| r < 10),
        "{:?}",
        &users[..10.min(users.len())]
    );
}

#[test]
fn counters_of_a_spinning_child() {
    let child = fork_stopped(|| {
        tunelab_test_spin_here(600);
    });
    let c = match profile::start_counters(&Scope::Process { pid: child.pid }) {
        Ok(c) => c,
        Err(e) => {
            child.release();
            child.wait();
            eprintln!("skipped: {e}");
            return;
        }
    };
    child.release();
    child.wait();
    let c = c.finish();
    for k in &c.counters {
        eprintln!(
            "{:<18} {:?} {} ({:.2} running) {}",
            k.name, k.value, k.unit, k.running_fraction, k.unavailable
        );
    }
    let names: Vec<&str> = c.counters.iter().map(|k| k.name.as_str()).collect();
    for n in [
        "task-clock",
        "context-switches",
        "cpu-migrations",
        "page-faults",
        "cycles",
        "instructions",
        "cache-references",
        "cache-misses",
        "branch-misses",
    ] {
        assert!(names.contains(&n), "{n} missing from {names:?}");
    }
    let tc = c.counters.iter().find(|k| k.name == "task-clock").unwrap();
    let ns = tc
        .value
        .expect("task-clock is a software event, always available");
    assert_eq!(tc.unit, "ns");
    // The child spun for 600 ms; under shared load it may get less CPU,
    // but not less than a third, and never more than the wall time.
    assert!(
        ns > 200e6 && ns < c.interval_ms * 1e6 * 1.05,
        "task-clock {ns} ns over {} ms",
        c.interval_ms
    );
    // Every counter either has a value or says why not.
    for k in &c.counters {
        assert!(k.value.is_some() || !k.unavailable.is_empty(), "{k:?}");
    }
    let cycles = c.counters.iter().find(|k| k.name == "cycles").unwrap();
    match (cycles.value, c.ipc) {
        (Some(_), ipc) => assert!(ipc.is_some_and(|i| i > 0.0)),
        (None, ipc) => {
            assert!(ipc.is_none());
            eprintln!("no cycles here: {}", cycles.unavailable);
        }
    }
}

#[test]
fn cache_miss_profile_runs_or_says_why_not() {
    let child = fork_stopped(|| {
        tunelab_test_spin_here(300);
    });
    let r = Request {
        event: Event::CacheMisses,
        ..req(Scope::Process { pid: child.pid })
    };
    match profile::start(&r) {
        Ok(run) => {
            child.release();
            child.wait();
            let p = run.finish().expect("finish");
            show(&p);
            assert_eq!(p.event, "cache-misses");
        }
        Err(e) => {
            child.release();
            child.wait();
            eprintln!("cache-miss profile skipped: {e}");
            assert!(e.starts_with("cache-misses: "), "{e}");
            assert!(e.len() > "cache-misses: ".len() + 10, "{e}");
        }
    }
}

#[test]
fn a_pid_that_does_not_exist_is_a_reason_not_a_panic() {
    let e = profile::start(&req(Scope::Process { pid: i32::MAX }))
        .err()
        .expect("no such process");
    assert!(e.contains(&i32::MAX.to_string()), "{e}");
    let e = profile::start_counters(&Scope::Process { pid: i32::MAX })
        .err()
        .expect("no such process");
    assert!(e.contains("not found"), "{e}");
}

/// For bench/profile_vs_perf.sh: profile `TUNELAB_PROFILE_CMD` (run by
/// /bin/sh) and print the top symbols as "percent<TAB>symbol".
#[test]
#[ignore]
fn print_profile_of_command() {
    let Ok(cmd) = std::env::var("TUNELAB_PROFILE_CMD") else {
        eprintln!("set TUNELAB_PROFILE_CMD");
        return;
    };
    let sh = CString::new("/bin/sh").unwrap();
    let args: Vec<CString> = ["sh", "-c", &cmd]
        .iter()
        .map(|s| CString::new(*s).unwrap())
        .collect();
    let mut argv: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    let child = fork_stopped(move || unsafe {
        libc::execv(sh.as_ptr(), argv.as_ptr());
        libc::_exit(127);
    });
    let run = profile::start(&req(Scope::Process { pid: child.pid })).expect("start");
    let t0 = Instant::now();
    child.release();
    child.wait();
    let wall = t0.elapsed();
    let p = run.finish().expect("finish");
    println!("WALL_MS\t{:.0}", wall.as_secs_f64() * 1e3);
    println!("SAMPLES\t{}", p.samples);
    println!("OVERHEAD\t{}", p.overhead.summary);
    for r in p.symbols.iter().take(15) {
        println!("ROW\t{:.2}\t{}", r.percent, r.symbol);
    }
    // TUNELAB_PROFILE_SVG=path: also write the flame graph there.
    if let Ok(path) = std::env::var("TUNELAB_PROFILE_SVG") {
        let svg = profile::flamegraph_svg(&p.folded, &format!("CPU profile: {cmd}")).expect("svg");
        std::fs::write(&path, svg).expect("write svg");
    }
}
