//! PLACEHOLDER for helper diagprof's src/diagnose/profile/: only the agreed
//! signatures, so `diagnose` builds before that half is merged. Every call
//! reports the section as skipped with this reason; nothing is measured
//! here. The lead deletes this file and the `#[path]` line in
//! diagnose/mod.rs when merging diagprof's profiler.

use crate::engine::profile_model::{Counters, FoldedStack, Profile};

const NOT_BUILT: &str = "the CPU profiler (diagnose::profile) is not part of this build yet";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    Process { pid: i32 },
    System,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    Auto,
    CacheMisses,
}

#[derive(Debug, Clone)]
pub struct Request {
    pub scope: Scope,
    pub event: Event,
    pub frequency_hz: u64,
    pub call_graph: bool,
}

pub struct Running(());

pub fn start(_req: &Request) -> Result<Running, String> {
    Err(NOT_BUILT.into())
}

impl Running {
    pub fn finish(self) -> Result<Profile, String> {
        Err(NOT_BUILT.into())
    }
}

pub struct RunningCounters(());

pub fn start_counters(_scope: &Scope) -> Result<RunningCounters, String> {
    Err(NOT_BUILT.into())
}

impl RunningCounters {
    pub fn finish(self) -> Counters {
        Counters::default()
    }
}

pub fn flamegraph_svg(_folded: &[FoldedStack], _title: &str) -> Result<String, String> {
    Err(NOT_BUILT.into())
}
