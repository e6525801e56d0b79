//! Shared helpers for the integration tests: run the real binary with a
//! private database and target.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Output;

use assert_cmd::Command;

pub mod pg;
use tempfile::TempDir;

pub struct Env {
    pub dir: TempDir,
}

impl Default for Env {
    fn default() -> Self {
        Self::new()
    }
}

impl Env {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join("target")).unwrap();
        Env { dir }
    }

    pub fn db(&self) -> PathBuf {
        self.dir.path().join("results.db")
    }

    pub fn target(&self) -> PathBuf {
        self.dir.path().join("target")
    }

    pub fn cmd(&self) -> Command {
        let mut c = Command::cargo_bin("tunelab").unwrap();
        c.env("TUNELAB_DB", self.db()).env_remove("NO_COLOR");
        c
    }

    /// A plain `std::process::Command` (to spawn, signal or wait4 on) with
    /// the private database and the output discarded.
    pub fn background(&self) -> std::process::Command {
        let mut c = std::process::Command::new(assert_cmd::cargo::cargo_bin("tunelab"));
        c.env("TUNELAB_DB", self.db())
            .env_remove("NO_COLOR")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        c
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd().args(args).output().unwrap()
    }

    /// Entries left in the target directory.
    pub fn leftovers(&self) -> Vec<String> {
        list(&self.target())
    }
}

pub fn list(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

pub fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}):\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub fn is_root() -> bool {
    unsafe { libc_geteuid() == 0 }
}

extern "C" {
    #[link_name = "geteuid"]
    fn libc_geteuid() -> u32;
}

/// Print why a test is skipped (visible with --nocapture and in CI logs).
pub fn skip(reason: &str) {
    eprintln!("SKIPPED: {reason}");
}
