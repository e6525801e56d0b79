//! Which machine a stored run is from, for `compare` and `history` alike
//! (its own file so that compare and devices do not import each other).

use crate::model::run::Run;

pub(crate) use crate::model::run::FLEET_HOST;

/// The machine a run is from: its inventory name when `remote` brought it
/// back, else its host name.
pub(crate) fn machine_of(r: &Run) -> Option<&String> {
    r.machine()
}
