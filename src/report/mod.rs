//! Turning runs into text: terminal tables, JSON/CSV/Markdown exports,
//! comparisons.

pub mod charts;
pub mod comparison;
pub mod devices;
pub mod diagnosis;
pub mod document;
pub mod export;
pub mod history;
pub mod html;
pub mod md_report;
mod params;
mod pick_charts;
pub mod runview;
pub mod table;
