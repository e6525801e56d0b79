//! Fleets of machines: hosts from the command line or an Ansible inventory,
//! and tunelab commands run on them over the system OpenSSH client.

pub mod inventory;
#[cfg(feature = "fleet")]
mod inventory_yaml;
pub mod remote;
