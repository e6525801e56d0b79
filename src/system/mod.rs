//! Read-only facts about the machine: environment snapshot, devices, quietness.
