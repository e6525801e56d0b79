//! Turning runs, and what `analysis` computes from them (comparisons,
//! device tables, histories), into text and documents: terminal tables,
//! JSON/CSV/Markdown exports, HTML. Rendering only.

pub(crate) mod applyview;
pub(crate) mod assemble;
pub(crate) mod charts;
pub(crate) mod compare;
pub(crate) mod devices;
pub(crate) mod diagnosis;
pub(crate) mod document;
pub(crate) mod export;
pub(crate) mod history;
pub(crate) mod html;
pub(crate) mod md_report;
pub(crate) mod monitor;
mod params;
mod pick_charts;
pub(crate) mod runview;
pub(crate) mod table;
pub(crate) mod time;
pub(crate) mod tuneview;
