//! Section 8, start-up anatomy of a short command (`diagnose -- CMD`): exec
//! to exit time and page faults (wait4's rusage) over repeated runs, the
//! dynamic linker's own statistics (glibc's `LD_DEBUG=statistics`:
//! relocations and the time spent in ld.so) and the libraries it loaded
//! (`LD_DEBUG=libs`), each with default lazy binding and with
//! `LD_BIND_NOW=1` — what prelinking used to attack. Medians throughout.
//! Runs after the diagnosed interval, so it never disturbs it.
//!
//! libc: WIFEXITED, WEXITSTATUS (wait4's raw status, from safety::child)

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use super::{overhead, thread_cpu_s, Say};
use crate::model::diagnosis::{LinkerStats, Section, StartupReport, StartupRuns};
use crate::safety::scratch::Scratch;
use crate::units::seconds;

/// Commands that ran longer than this are not repeated.
pub(crate) const MAX_RUN_S: f64 = 2.0;

/// glibc's "runtime linker statistics" of one process.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct LdStats {
    pub(crate) linker: LinkerStats,
    /// Objects whose initialisers ld.so called (the loaded libraries).
    pub(crate) libraries: Vec<String>,
}

/// Parse an `LD_DEBUG=statistics,libs` log (LD_DEBUG_OUTPUT file).
pub(crate) fn parse_ld_debug(text: &str) -> Option<LdStats> {
    let mut s = LdStats::default();
    let mut found = false;
    for line in text.lines() {
        // "     2927:\t  total startup time in dynamic loader: 161415 cycles"
        let body = match line.split_once(':') {
            Some((pid, rest)) if pid.trim().chars().all(|c| c.is_ascii_digit()) => rest.trim(),
            _ => line.trim(),
        };
        let Some((key, val)) = body.rsplit_once(": ") else {
            continue;
        };
        let key = key.trim();
        let mut w = val.split_whitespace();
        let first = w.next().unwrap_or("");
        let unit = w.next().unwrap_or("");
        let num = first.parse::<f64>().ok();
        match key {
            "total startup time in dynamic loader" => {
                s.linker.startup = num?;
                s.linker.unit = unit.to_string();
                found = true;
            }
            "time needed for relocation" => s.linker.relocation = num.unwrap_or(0.0),
            "time needed to load objects" => s.linker.load_objects = num.unwrap_or(0.0),
            "number of relocations" => s.linker.relocations = num.unwrap_or(0.0) as u64,
            "number of relocations from cache" => {
                s.linker.relocations_from_cache = num.unwrap_or(0.0) as u64
            }
            "number of relative relocations" => {
                s.linker.relative_relocations = num.unwrap_or(0.0) as u64
            }
            "final number of relocations" => s.linker.final_relocations = num.unwrap_or(0.0) as u64,
            "calling init" => {
                let lib = val.trim().to_string();
                if !s.libraries.contains(&lib) {
                    s.libraries.push(lib);
                }
            }
            _ => {}
        }
    }
    found.then_some(s)
}

struct One {
    wall_s: f64,
    minflt: u64,
    majflt: u64,
    pid: i32,
    ok: bool,
}

fn run_once(argv: &[String], env: &[(&str, String)]) -> std::io::Result<One> {
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    // Its own process group and mortal with tunelab; killed with its group
    // on a cancelling signal (safety::child).
    crate::safety::child::contain(&mut cmd);
    let t0 = Instant::now();
    let child = cmd.spawn()?;
    let pid = child.id() as i32;
    let w = crate::safety::child::wait_cancellable(pid)?;
    let (status, ru) = (w.status, w.rusage);
    let wall_s = w.exited.duration_since(t0).as_secs_f64();
    Ok(One {
        wall_s,
        minflt: ru.ru_minflt as u64,
        majflt: ru.ru_majflt as u64,
        pid,
        ok: libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn mode(
    argv: &[String],
    runs: u32,
    bind_now: bool,
    scratch: &Path,
) -> Result<(StartupRuns, Vec<String>), String> {
    let label = if bind_now { "LD_BIND_NOW=1" } else { "default" };
    let base: Vec<(&str, String)> = if bind_now {
        vec![("LD_BIND_NOW", "1".into())]
    } else {
        Vec::new()
    };
    let mut timed = Vec::new();
    for _ in 0..runs {
        crate::safety::signals::check().map_err(|e| e.to_string())?;
        timed.push(run_once(argv, &base).map_err(|e| format!("cannot run {}: {e}", argv[0]))?);
    }
    // The linker's statistics from separate runs: LD_DEBUG's own logging
    // would inflate the timed runs.
    let mut stats = Vec::new();
    for i in 0..runs.min(3) {
        let prefix = scratch.join(format!("ld-{label}-{i}"));
        let mut env = base.clone();
        env.push(("LD_DEBUG", "statistics,libs".into()));
        env.push(("LD_DEBUG_OUTPUT", prefix.to_string_lossy().to_string()));
        let one = run_once(argv, &env).map_err(|e| e.to_string())?;
        let file = format!("{}.{}", prefix.to_string_lossy(), one.pid);
        if let Some(s) = std::fs::read_to_string(&file)
            .ok()
            .and_then(|t| parse_ld_debug(&t))
        {
            stats.push(s);
        }
    }
    let libs = stats
        .first()
        .map(|s| s.libraries.clone())
        .unwrap_or_default();
    let med = |f: &dyn Fn(&LdStats) -> f64| median(stats.iter().map(f).collect());
    let linker = (!stats.is_empty()).then(|| LinkerStats {
        startup: med(&|s| s.linker.startup),
        relocation: med(&|s| s.linker.relocation),
        load_objects: med(&|s| s.linker.load_objects),
        unit: stats[0].linker.unit.clone(),
        relocations: med(&|s| s.linker.relocations as f64) as u64,
        relocations_from_cache: med(&|s| s.linker.relocations_from_cache as f64) as u64,
        relative_relocations: med(&|s| s.linker.relative_relocations as f64) as u64,
        final_relocations: med(&|s| s.linker.final_relocations as f64) as u64,
    });
    let failed = timed.iter().filter(|o| !o.ok).count();
    Ok((
        StartupRuns {
            mode: label.into(),
            runs: timed.len() as u32,
            wall_s: median(timed.iter().map(|o| o.wall_s).collect()),
            minor_faults: median(timed.iter().map(|o| o.minflt as f64).collect()) as u64,
            major_faults: median(timed.iter().map(|o| o.majflt as f64).collect()) as u64,
            linker,
            failed_runs: failed as u32,
        },
        libs,
    ))
}

/// Repeat the command `runs` times per mode, when its diagnosed run was short.
pub(crate) fn analyse(
    argv: &[String],
    first_run_s: f64,
    runs: u32,
    say: Say,
) -> Section<StartupReport> {
    if runs == 0 {
        return Section::skipped("start-up anatomy switched off (--startup-runs 0)");
    }
    if first_run_s > MAX_RUN_S {
        return Section::skipped(format!(
            "the command ran {}: start-up anatomy repeats it {} times and is meant for short \
             programs (under {})",
            seconds(first_run_s),
            2 * runs + 2 * runs.min(3),
            seconds(MAX_RUN_S)
        ));
    }
    say(&format!(
        "start-up anatomy: {runs} timed runs and {} LD_DEBUG runs per mode (default, LD_BIND_NOW=1)…",
        runs.min(3)
    ));
    let scratch = match Scratch::create(None) {
        Ok(s) => s,
        Err(e) => return Section::skipped(format!("no scratch directory for LD_DEBUG logs: {e}")),
    };
    let cpu0 = thread_cpu_s();
    let t0 = Instant::now();
    let r = (|| {
        let (default, libraries) = mode(argv, runs, false, scratch.path())?;
        let (bind_now, _) = mode(argv, runs, true, scratch.path())?;
        Ok::<_, String>((default, bind_now, libraries))
    })();
    let wall = t0.elapsed().as_secs_f64();
    drop(scratch);
    match r {
        Ok((default, bind_now, libraries)) => {
            let no_ld = default.linker.is_none();
            Section::Present {
                data: StartupReport {
                    default,
                    bind_now: Some(bind_now),
                    libraries,
                    method: format!(
                        "{runs} runs per mode, output to /dev/null, exec to exit timed on the \
                         monotonic clock, page faults from wait4 (the process only, not its \
                         children); the dynamic linker's statistics and libraries from {} more \
                         runs per mode with LD_DEBUG=statistics,libs written to a scratch file; \
                         medians.{}",
                        runs.min(3),
                        if no_ld {
                            " No LD_DEBUG output: a static program, or a C library other than \
                             glibc (musl has no LD_DEBUG)."
                        } else {
                            ""
                        }
                    ),
                },
                overhead: overhead(
                    thread_cpu_s() - cpu0,
                    wall,
                    0,
                    "ran after the diagnosed interval, so it did not disturb it",
                ),
            }
        }
        Err(e) => Section::skipped(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::test_support::fixture;

    #[test]
    fn glibc_statistics_and_libs() {
        let t = fixture("ld-debug.2927");
        let s = parse_ld_debug(&t).unwrap();
        assert_eq!(s.linker.startup, 161415.0);
        assert_eq!(s.linker.unit, "cycles");
        assert_eq!(s.linker.relocation, 29107.0);
        assert_eq!(s.linker.load_objects, 29088.0);
        assert_eq!(
            (
                s.linker.relocations,
                s.linker.relocations_from_cache,
                s.linker.relative_relocations
            ),
            (87, 7, 16)
        );
        assert_eq!(s.linker.final_relocations, 88);
        assert_eq!(
            s.libraries,
            vec![
                "/lib64/ld-linux-x86-64.so.2",
                "/lib/x86_64-linux-gnu/libc.so.6"
            ]
        );
        assert_eq!(parse_ld_debug("nothing here\n"), None);
        assert_eq!(median(vec![3.0, 1.0, 2.0, 10.0]), 2.5);
    }
}
