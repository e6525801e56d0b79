//! A fake root tree (the hidden --root) for the tests of `tune`/`apply`:
//! /proc/sys/vm with the dirty pair at 10 / 0 and swappiness at 60, and
//! /etc/sysctl.d with a user's unrelated file. Included with
//! `#[path = "common/tree.rs"] mod tree;` beside `mod common;`.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

use tunelab::model::run::Run;
use tunelab::store::Store;

use crate::common::Env;

pub struct Tree {
    pub env: Env,
    pub root: PathBuf,
    pub state: PathBuf,
}

impl Tree {
    pub fn new() -> Tree {
        let env = Env::new();
        let root = env.dir.path().join("root");
        let state = env.dir.path().join("state");
        let vm = root.join("proc/sys/vm");
        fs::create_dir_all(&vm).unwrap();
        // A fake root says so, or the journal refuses to restore below it.
        fs::write(root.join(".tunelab-fake-root"), "test tree\n").unwrap();
        // Values as tunelab writes them (no newline): snapshots compare bytes.
        fs::write(vm.join("dirty_background_ratio"), "10").unwrap();
        fs::write(vm.join("dirty_background_bytes"), "0").unwrap();
        fs::write(vm.join("swappiness"), "60").unwrap();
        fs::create_dir_all(root.join("etc/sysctl.d")).unwrap();
        fs::write(
            root.join("etc/sysctl.d/10-user.conf"),
            "vm.swappiness = 10\n",
        )
        .unwrap();
        Tree { env, root, state }
    }

    pub fn store(&self, run: &Run) {
        Store::open(&self.env.db()).unwrap().save(run).unwrap();
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.run_env(args, &[])
    }

    pub fn run_env(&self, args: &[&str], extra: &[(&str, &str)]) -> Output {
        let mut c = self.env.cmd();
        c.env("TUNELAB_STATE_DIR", &self.state);
        for (k, v) in extra {
            c.env(k, v);
        }
        c.args(args).arg("--root").arg(&self.root).output().unwrap()
    }

    pub fn live(&self) -> String {
        read(&self.root.join("proc/sys/vm/dirty_background_ratio"))
    }

    pub fn set_live(&self, v: &str) {
        fs::write(self.root.join("proc/sys/vm/dirty_background_ratio"), v).unwrap();
    }

    pub fn dropin(&self) -> PathBuf {
        self.root
            .join("etc/sysctl.d/90-tunelab-vm.dirty_background_ratio.conf")
    }

    /// Every file of the tree with its content.
    pub fn snapshot(&self) -> BTreeMap<PathBuf, String> {
        fn walk(d: &Path, out: &mut BTreeMap<PathBuf, String>) {
            for e in fs::read_dir(d).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    walk(&p, out);
                } else {
                    out.insert(p.clone(), fs::read_to_string(&p).unwrap_or_default());
                }
            }
        }
        let mut out = BTreeMap::new();
        walk(&self.root, &mut out);
        out
    }

    pub fn journal_empty(&self) -> bool {
        !self.state.join("journal.json").exists()
    }
}

pub fn read(p: &Path) -> String {
    fs::read_to_string(p).unwrap().trim().to_string()
}

/// A command's stdout and stderr, for assertion messages.
pub fn text(o: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}
