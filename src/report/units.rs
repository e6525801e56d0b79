//! Human units for display now live in the bottom module `crate::units`.
//! This re-export keeps `report::units::…` paths of other branches compiling
//! until they are merged; new code imports `crate::units`.

pub use crate::units::{human, pct, seconds, si, sig};
