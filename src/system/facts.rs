//! A configuration fact and the ordered list `inspect` shows: each with the
//! file it came from. Its own file so that `inspect` and `board` (which
//! fills in board facts) both build on it without importing each other.

use std::fs;
use std::path::Path;

use serde::Serialize;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct Fact {
    pub(crate) section: &'static str,
    pub(crate) key: String,
    pub(crate) value: String,
    /// Where the value was read (a file, or how it was derived).
    pub(crate) source: String,
}

/// Facts in the order they are shown.
#[derive(Debug, Default, Clone, Serialize)]
pub(crate) struct Facts(pub(crate) Vec<Fact>);

impl Facts {
    pub(super) fn add(
        &mut self,
        section: &'static str,
        key: &str,
        value: impl Into<String>,
        source: impl Into<String>,
    ) {
        self.0.push(Fact {
            section,
            key: key.to_string(),
            value: value.into(),
            source: source.into(),
        });
    }

    /// Read a sysfs/procfs file into a fact if it exists.
    pub(super) fn file(
        &mut self,
        section: &'static str,
        key: &str,
        path: impl AsRef<Path>,
    ) -> Option<String> {
        let path = path.as_ref();
        let v = fs::read_to_string(path).ok()?.trim().to_string();
        self.add(section, key, v.clone(), path.display().to_string());
        Some(v)
    }

    /// Facts from key/value pairs (section "given"): for tests and replays.
    #[cfg(test)]
    pub(crate) fn from_pairs(pairs: &[(&str, &str)]) -> Facts {
        let mut f = Facts::default();
        for (k, v) in pairs {
            f.add("given", k, *v, "given");
        }
        f
    }

    pub(crate) fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|f| f.key == key)
            .map(|f| f.value.as_str())
    }

    pub(crate) fn get_u64(&self, key: &str) -> Option<u64> {
        self.get(key)?.split_whitespace().next()?.parse().ok()
    }
}
