//! What is computed from stored runs, for `report` to render and the CLI to
//! print: two runs compared point by point (`compare`), several devices
//! against a baseline (`devices`), a metric's history with its change
//! points (`history`). Nothing here renders, and nothing here imports
//! `report` (tests/architecture.rs keeps it so).

pub mod compare;
pub mod devices;
pub mod history;
