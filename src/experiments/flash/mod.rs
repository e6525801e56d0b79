//! Flash: what a card, eMMC or stick does with reads and writes — its
//! allocation unit and page, how many units it keeps open, its write cache
//! and steady state, and whether it holds what it claims (docs/flash.md).

pub(crate) mod au_size;
pub(crate) mod capacity;
pub(crate) mod open_units;
pub(crate) mod steady_state;

use crate::engine::Experiment;

pub(crate) fn all() -> Vec<Box<dyn Experiment>> {
    vec![
        Box::new(au_size::AuSize),
        Box::new(open_units::OpenUnits),
        Box::new(steady_state::SteadyState),
        Box::new(capacity::Capacity),
    ]
}
