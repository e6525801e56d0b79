//! Turning runs into text: terminal tables, JSON/CSV/Markdown exports,
//! comparisons.

pub mod comparison;
pub mod export;
pub mod runview;
pub mod table;
pub mod units;
