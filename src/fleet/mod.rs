//! Fleets of machines: hosts from the command line or an Ansible inventory,
//! and tunelab commands run on them over the system OpenSSH client.

pub mod elf;
pub(crate) mod inventory;
#[cfg(feature = "fleet")]
mod inventory_yaml;
pub(crate) mod reach;
pub(crate) mod remote;
mod ssh_config;

use crate::Result;
use inventory::Inventory;

/// An inventory file's text in either of Ansible's formats: YAML when the
/// name ends in .yml/.yaml or the text starts like YAML (`---`, or a first
/// line `name:`), INI otherwise — as Ansible tries its plugins. (Here, not in
/// `inventory`, so the INI and YAML readers do not import each other.)
pub(crate) fn load_inventory(text: &str, file_name: &str) -> Result<Inventory> {
    check_text(text, file_name)?;
    let lower = file_name.to_ascii_lowercase();
    let first = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with(';'))
        .unwrap_or("");
    let yaml = lower.ends_with(".yml")
        || lower.ends_with(".yaml")
        || first.starts_with("---")
        || (first.ends_with(':') && !first.contains('=') && !first.starts_with('['));
    if yaml {
        parse_yaml(text)
    } else {
        Inventory::parse(text)
    }
}

/// Largest inventory read: thousands of hosts fit in far less.
pub(crate) const MAX_INVENTORY_BYTES: u64 = 4 << 20;

/// An inventory is text of a bounded size (a binary file is bad input).
fn check_text(text: &str, file_name: &str) -> Result<()> {
    if text.len() as u64 > MAX_INVENTORY_BYTES {
        return Err(crate::Error::usage(format!(
            "inventory {file_name} is larger than {} MiB: not an inventory",
            MAX_INVENTORY_BYTES >> 20
        )));
    }
    if text.contains('\0') {
        return Err(crate::Error::usage(format!(
            "inventory {file_name} is not text (it holds NUL bytes): give an Ansible INI or YAML inventory"
        )));
    }
    Ok(())
}

#[cfg(feature = "fleet")]
fn parse_yaml(text: &str) -> Result<Inventory> {
    inventory_yaml::parse(text)
}

#[cfg(not(feature = "fleet"))]
fn parse_yaml(_: &str) -> Result<Inventory> {
    Err(crate::Error::usage(
        "this tunelab was built without YAML inventories (the board build leaves out \
         feature 'fleet'): write the inventory in Ansible's INI format",
    ))
}
