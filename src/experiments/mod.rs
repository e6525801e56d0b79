//! The experiment registry: one file per experiment, grouped by family.

pub mod app;
pub mod common;
pub mod cpu;
pub mod flash;
pub mod io;
pub mod ipc;
pub mod mem;
pub mod registry;
pub mod sched;
pub mod test;
pub mod work;

use crate::engine::Experiment;

/// Every experiment this build knows, in `list` order.
pub fn all() -> Vec<Box<dyn Experiment>> {
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
