//! One wait's stack read as a cause: its class ("storage", "lock", "pipe"…),
//! the words for the cause, and the program's own function that made it.

/// Scheduler and system-call entry frames every sleep passes through,
/// however its stack is read (off-CPU samples, LatencyTOP, /proc stack):
/// they name no cause.
pub(crate) const SLEEP_FRAMES: [&str; 12] = [
    "__schedule",
    "schedule",
    "schedule_timeout",
    "schedule_hrtimeout_range",
    "schedule_hrtimeout_range_clock",
    "schedule_preempt_disabled",
    "io_schedule",
    "io_schedule_timeout",
    "do_syscall_64",
    "entry_SYSCALL_64_after_hwframe",
    "ret_from_fork",
    "ret_from_fork_asm",
];

/// Kernel frames every wait passes through: they name no cause.
pub(super) fn generic(f: &str) -> bool {
    SLEEP_FRAMES.contains(&f)
        || matches!(
            f,
            "preempt_schedule_common"
                | "entry_SYSCALL_64"
                | "x64_sys_call"
                | "syscall_exit_to_user_mode"
                | "exit_to_user_mode_loop"
        )
        || f.starts_with("0x")
}

/// User-space frames of the C library that wrap a wait: the caller of
/// interest is the first frame after them.
fn libc_wrapper(f: &str) -> bool {
    let f = f.trim_start_matches('_');
    f.starts_with("lll_")
        || f.starts_with("futex")
        || f.starts_with("GI_")
        || f.starts_with("libc_")
        || f.starts_with("syscall")
        || f.starts_with("nptl_")
        || f.starts_with("pthread_")
        || matches!(
            f,
            "read"
                | "write"
                | "fsync"
                | "fdatasync"
                | "nanosleep"
                | "clock_nanosleep"
                | "usleep"
                | "sleep"
                | "poll"
                | "ppoll"
                | "select"
                | "epoll_wait"
                | "waitpid"
                | "wait4"
                | "recv"
                | "recvfrom"
                | "recvmsg"
                | "send"
                | "sendto"
                | "accept"
                | "accept4"
                | "connect"
                | "open64"
                | "openat"
                | "sem_wait"
                | "sem_timedwait"
                | "clone3"
                | "clone"
                | "start_thread"
        )
        || f.contains("@plt")
}

fn any(frames: &[&str], names: &[&str]) -> bool {
    frames.iter().any(|f| names.contains(f))
}

fn any_prefix(frames: &[&str], prefixes: &[&str]) -> bool {
    frames
        .iter()
        .any(|f| prefixes.iter().any(|p| f.starts_with(p)))
}

/// The syscall a kernel stack is in ("fsync", "futex"), from its
/// `__x64_sys_*` / `__arm64_sys_*` / `__se_sys_*` frame.
fn syscall(kernel: &[&str]) -> Option<String> {
    kernel.iter().find_map(|f| {
        [
            "__x64_sys_",
            "__arm64_sys_",
            "__se_sys_",
            "__riscv_sys_",
            "__ia32_sys_",
        ]
        .iter()
        .find_map(|p| f.strip_prefix(p))
        .map(|s| s.to_string())
    })
}

const STORAGE_SYNC: &[&str] = &[
    "vfs_fsync_range",
    "do_fsync",
    "file_write_and_wait_range",
    "filemap_write_and_wait_range",
    "__filemap_fdatawait_range",
    "filemap_fdatawait_range",
    "folio_wait_writeback",
    "wait_on_page_writeback",
    "jbd2_log_wait_commit",
    "jbd2_complete_transaction",
    "blkdev_issue_flush",
    "submit_bio_wait",
    "ext4_sync_file",
    "xfs_file_fsync",
    "btrfs_sync_file",
    "f2fs_sync_file",
    "sync_file_range",
    "ksys_sync_file_range",
    "__x64_sys_sync",
    "ksys_sync",
];

/// (class, cause) of one wait from its kernel and user frames (leaf first).
pub(crate) fn classify(kernel: &[&str], user: &[&str]) -> (&'static str, String) {
    let sc = syscall(kernel);
    let futex =
        any_prefix(kernel, &["futex_", "__futex_", "do_futex"]) || sc.as_deref() == Some("futex");
    if futex {
        let is = |names: &[&str]| {
            user.iter()
                .any(|u| names.iter().any(|n| u.trim_start_matches('_') == *n))
        };
        if is(&[
            "pthread_mutex_lock",
            "pthread_mutex_lock_full",
            "pthread_mutex_timedlock",
            "pthread_mutex_clocklock",
            "lll_lock_wait",
            "lll_lock_wait_private",
            "pthread_rwlock_rdlock",
            "pthread_rwlock_wrlock",
            "pthread_rwlock_timedrdlock",
            "pthread_rwlock_timedwrlock",
            "mtx_lock",
        ]) {
            let api = user
                .iter()
                .find(|u| u.contains("rwlock"))
                .map_or("pthread_mutex_lock", |_| "pthread_rwlock");
            return ("lock", format!("futex: {api} (a user-space lock)"));
        }
        if is(&[
            "pthread_cond_wait",
            "pthread_cond_timedwait",
            "pthread_cond_clockwait",
            "cnd_wait",
        ]) {
            return (
                "condvar",
                "futex: pthread_cond_wait (condition variable)".into(),
            );
        }
        if is(&[
            "pthread_join",
            "pthread_clockjoin_ex",
            "pthread_timedjoin_np",
            "thrd_join",
        ]) {
            return (
                "join",
                "futex: waits for threads to finish (pthread_join)".into(),
            );
        }
        if is(&["sem_wait", "sem_timedwait", "sem_clockwait"]) {
            return ("lock", "futex: sem_wait (a semaphore)".into());
        }
        return ("futex", "futex (caller not recognised)".into());
    }
    if any(kernel, &["do_wait", "kernel_wait4", "__do_sys_wait4"]) {
        return ("join", "wait4 (waits for its own child process)".into());
    }
    if any(kernel, STORAGE_SYNC) {
        let what = match sc.as_deref() {
            Some(s) => s.to_string(),
            None => "sync".into(),
        };
        return ("storage", format!("{what}{SYNC_WAIT}"));
    }
    if any(
        kernel,
        &["balance_dirty_pages", "balance_dirty_pages_ratelimited"],
    ) {
        // A write held back until the device writes dirty pages: waiting
        // for the storage to write, as a sync is (one cause, one row).
        return (
            "storage",
            format!("write (dirty-page throttling){SYNC_WAIT}"),
        );
    }
    if any_prefix(
        kernel,
        &[
            "try_to_free_pages",
            "shrink_",
            "__alloc_pages_slowpath",
            "throttle_direct_reclaim",
            "mem_cgroup_handle_over_high",
            "reclaim_throttle",
        ],
    ) {
        return (
            "reclaim",
            "memory reclaim (allocation waits for free pages)".into(),
        );
    }
    let faulting = any(
        kernel,
        &["exc_page_fault", "handle_mm_fault", "do_user_addr_fault"],
    );
    if faulting {
        return (
            "page-fault",
            "major page fault (waits for a page from storage or swap)".into(),
        );
    }
    if any_prefix(
        kernel,
        &[
            "hrtimer_nanosleep",
            "do_nanosleep",
            "common_nsleep",
            "clock_nanosleep",
        ],
    ) || matches!(
        sc.as_deref(),
        Some("nanosleep" | "clock_nanosleep" | "pause")
    ) {
        return ("sleep", "timer sleep (nanosleep)".into());
    }
    if any_prefix(
        kernel,
        &["pipe_read", "anon_pipe_read", "pipe_wait_readable"],
    ) {
        return ("pipe", "pipe read (waits for its writer)".into());
    }
    if any_prefix(
        kernel,
        &["pipe_write", "anon_pipe_write", "pipe_wait_writable"],
    ) {
        return ("pipe", "pipe write (waits for its reader)".into());
    }
    if any_prefix(
        kernel,
        &[
            "unix_stream_read",
            "unix_dgram_recvmsg",
            "sk_wait_data",
            "tcp_recvmsg",
            "inet_csk_accept",
            "sock_alloc_send",
            "sk_stream_wait",
            "udp_recvmsg",
            "__skb_wait_for_more_packets",
        ],
    ) {
        return ("socket", "socket (waits for its peer)".into());
    }
    if any_prefix(
        kernel,
        &[
            "do_epoll_wait",
            "ep_poll",
            "do_sys_poll",
            "do_select",
            "core_sys_select",
        ],
    ) {
        return ("poll", "poll/epoll/select (waits for an event)".into());
    }
    if any_prefix(kernel, &["n_tty_read", "tty_read", "wait_woken"]) {
        return ("terminal", "terminal read".into());
    }
    if any_prefix(
        kernel,
        &[
            "filemap_read",
            "filemap_get_pages",
            "folio_wait_bit",
            "blk_",
            "submit_bio",
        ],
    ) {
        return ("storage", "storage read (page-cache miss)".into());
    }
    if any_prefix(kernel, &["do_sched_yield"]) {
        return ("yield", "sched_yield".into());
    }
    let first = kernel
        .iter()
        .find(|f| !generic(f))
        .map(|f| f.to_string())
        .or(sc)
        .unwrap_or_else(|| "(no kernel stack)".into());
    ("other", first)
}

/// The program's own functions that made the wait, nearest first: user
/// frames after the C library's wrappers, unresolved addresses left out.
pub(crate) fn caller(user: &[(&str, &str)], program: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    let mut in_program = false;
    for (image, sym) in user {
        if sym.starts_with("0x") {
            continue;
        }
        let lib = c_library_image(image);
        // The C library's frames on top of the program's: by the mapping
        // (a shared libc), or by name where libc is linked into the
        // program itself (a static binary: `__lll_lock_wait ←
        // ___pthread_mutex_lock` in the program's own file).
        if !in_program && (lib || libc_wrapper(sym) || c_library_internal(sym)) {
            continue;
        }
        if matches!(
            *sym,
            "start_thread"
                | "clone3"
                | "clone"
                | "__libc_start_call_main"
                | "__libc_start_main"
                | "_start"
        ) {
            break;
        }
        // Past the program's own frames the loader calls nothing: an ld.so
        // name there is a stale word the stack scan took for a return
        // address (`main ← _dl_map_object_from_fd`).
        if in_program && image.starts_with("ld-") {
            break;
        }
        in_program |= *image == program || !lib;
        out.push(sym);
        if out.len() == 2 {
            break;
        }
    }
    out.join(" ← ")
}

/// The C library's (or the dynamic loader's) own file, by the mapping's name.
pub(crate) fn c_library_image(image: &str) -> bool {
    let base = image.rsplit('/').next().unwrap_or(image);
    base.starts_with("libc.")
        || base.starts_with("libc-")
        || base.starts_with("ld-")
        || base.starts_with("libpthread")
        || base.starts_with("libm.")
        || base.starts_with("libm-")
        || base.starts_with("ld-musl")
        || base.starts_with("libc.musl")
}

/// glibc's internal names (its ifunc variants `__strcmp_evex`,
/// `__memcpy_avx_unaligned_erms`, `__memcpy_aarch64_simd`, its lock paths
/// `__lll_lock_wait`, `___pthread_mutex_lock`): a C library function even
/// where the library is linked into the program (a static binary).
pub(crate) fn c_library_internal(sym: &str) -> bool {
    if !sym.starts_with("__") {
        return false;
    }
    let f = sym.trim_start_matches('_');
    [
        "mem",
        "str",
        "wcs",
        "wmem",
        "stp",
        "lll_",
        "pthread_",
        "futex",
        "libc_",
        "GI_",
        "nptl_",
        "IO_",
        "malloc",
        "libc_malloc",
        "int_malloc",
        "int_free",
        "free",
        "calloc",
        "realloc",
        "syscall",
        "clock_",
        "nanosleep",
        "read",
        "write",
        "fsync",
        "fdatasync",
        "sem_",
        "qsort",
        "tunable",
        "sched_",
    ]
    .iter()
    .any(|p| f.starts_with(p))
}

/// What a synchronous storage wait says after its syscall: the syscalls
/// (fsync, fdatasync, unlinkat's discard…) are one cause, one row.
pub(super) const SYNC_WAIT: &str = ": waits for the storage to write";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleeps_pipes_and_the_unknown() {
        assert_eq!(
            classify(
                &[
                    "__schedule",
                    "do_nanosleep",
                    "hrtimer_nanosleep",
                    "__x64_sys_clock_nanosleep"
                ],
                &[]
            )
            .0,
            "sleep"
        );
        assert_eq!(classify(&["anon_pipe_read", "vfs_read"], &[]).0, "pipe");
        assert_eq!(classify(&["__schedule", "do_epoll_wait"], &[]).0, "poll");
        let (c, what) = classify(&["__schedule", "some_driver_wait"], &[]);
        assert_eq!((c, what.as_str()), ("other", "some_driver_wait"));
    }

    #[test]
    fn a_loader_frame_past_the_program_is_not_its_caller() {
        let user = [
            ("libc.so.6", "fdatasync"),
            ("stdio_log", "main"),
            ("ld-linux-x86-64.so.2", "_dl_map_object_from_fd"),
        ];
        assert_eq!(caller(&user, "stdio_log"), "main");
    }

    #[test]
    fn a_static_programs_libc_lock_frames_are_not_its_caller() {
        // aarch64, glibc linked in: every frame is in the program's file.
        let user = [
            ("mutex", "__lll_lock_wait"),
            ("mutex", "___pthread_mutex_lock"),
            ("mutex", "contended_update"),
            ("mutex", "worker"),
        ];
        assert_eq!(caller(&user, "mutex"), "contended_update ← worker");
        // A shared libc is judged by its mapping, whatever the name.
        let user = [("/usr/lib/libc.so.6", "some_new_wait"), ("prog", "update")];
        assert_eq!(caller(&user, "prog"), "update");
    }

    #[test]
    fn libc_internal_names() {
        for f in [
            "__strcmp_evex",
            "__memcpy_aarch64_simd",
            "__lll_lock_wait",
            "___pthread_mutex_lock",
        ] {
            assert!(c_library_internal(f), "{f}");
        }
        for f in ["main", "hot_loop", "__my_helper", "_start_worker"] {
            assert!(!c_library_internal(f), "{f}");
        }
    }
}
