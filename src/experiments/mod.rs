//! The experiment registry: one file per experiment, grouped by family.

pub(crate) mod app;
pub mod common;
pub(crate) mod cpu;
pub(crate) mod flash;
pub(crate) mod io;
pub(crate) mod ipc;
pub(crate) mod mem;
pub mod registry;
pub(crate) mod sched;
pub(crate) mod test;
pub(crate) mod work;

use crate::engine::Experiment;

/// Every experiment this build knows, in `list` order.
pub(crate) fn all() -> Vec<Box<dyn Experiment>> {
    let mut v: Vec<Box<dyn Experiment>> = Vec::new();
    v.extend(io::all());
    v.extend(flash::all());
    v.extend(mem::all());
    v.extend(ipc::all());
    v.extend(sched::all());
    v.extend(app::all());
    v.extend(work::all());
    v.extend(cpu::all());
    v.extend(test::all());
    v
}
