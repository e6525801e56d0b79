//! Turning runs, and what `analysis` computes from them (comparisons,
//! device tables, histories), into text and documents: terminal tables,
//! JSON/CSV/Markdown exports, HTML. Rendering only.

pub mod applyview;
pub mod assemble;
pub mod charts;
pub mod compare;
pub mod devices;
pub mod diagnosis;
pub mod document;
pub mod export;
pub mod history;
pub mod html;
pub mod md_report;
pub mod monitor;
mod params;
mod pick_charts;
pub mod runview;
pub mod table;
pub mod time;
pub mod tuneview;
