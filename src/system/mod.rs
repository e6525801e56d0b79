//! Read-only facts about the machine: environment snapshot, devices, quietness.

pub mod board;
pub mod cpu;
pub mod device;
pub mod env;
pub mod facts;
pub mod mounts;
pub mod quiet;

pub use device::{device_for_path, BlockDevice};
pub use env::{snapshot, Environment};
pub use mounts::{mount_for_path, MountFact};
pub use quiet::{check as quietness_check, BusyProcess, Quietness};
pub mod inspect;
pub mod limits;
