//! Which machine a stored run is from, for `compare` and `history` alike
//! (its own file so that compare and devices do not import each other).

use crate::model::run::Run;

/// Environment key of the inventory name a run came from (`remote`).
pub const FLEET_HOST: &str = "fleet.host";

/// The machine a run is from: its inventory name when `remote` brought it
/// back, else its host name.
pub fn machine_of(r: &Run) -> Option<&String> {
    r.environment
        .get(FLEET_HOST)
        .or_else(|| r.environment.get("host.name"))
}
