//! Whether ssh may connect somewhere other than a host's address and port:
//! a jump host, a proxy command, a `HostName` or `Port` from the ssh
//! configuration or the options. Then a host that does not answer a direct
//! TCP probe (`reach`) may still be reached by ssh, and the probe's verdict
//! is only advice. The configuration is scanned, not interpreted: any such
//! keyword anywhere (whatever `Host` block) counts.

use std::path::{Path, PathBuf};

/// Configuration keywords that change where, or from where, ssh connects.
const REDIRECTING: &[&str] = &[
    "hostname",
    "port",
    "proxycommand",
    "proxyjump",
    "match",
    "canonicalizehostname",
    "bindaddress",
    "bindinterface",
];
/// Command-line flags with the same effect (jump, port, bind address/interface).
const REDIRECTING_FLAGS: &[&str] = &["-J", "-p", "-b", "-B", "-W"];

/// Why ssh may not go straight to the host's address and port, or None
/// when it does (`options`: the words given with `-o`; `home`: where the
/// user's `.ssh/config` is).
pub(crate) fn redirection(options: &[String], homes: &[PathBuf]) -> Option<String> {
    let mut files: Option<Vec<(PathBuf, PathBuf)>> = None;
    let mut words = options.iter();
    while let Some(w) = words.next() {
        if let Some(flag) = REDIRECTING_FLAGS.iter().find(|f| w.starts_with(**f)) {
            return Some(format!("the ssh option {flag} is given"));
        }
        if let Some(rest) = w.strip_prefix("-F") {
            let file = if rest.is_empty() {
                words.next().cloned().unwrap_or_default()
            } else {
                rest.to_string()
            };
            // Its relative includes are under ~/.ssh, as for the user's file.
            let base = homes.first().map_or_else(PathBuf::new, |h| h.join(".ssh"));
            files
                .get_or_insert_with(Vec::new)
                .push((PathBuf::from(file), base));
        } else if let Some(rest) = w.strip_prefix("-o") {
            let opt = if rest.is_empty() {
                words.next().cloned().unwrap_or_default()
            } else {
                rest.to_string()
            };
            if let Some(k) = redirecting_line(&opt) {
                return Some(format!("the ssh option -o {k} is given"));
            }
        }
    }
    // -F replaces both the user's and the system's configuration.
    let files = files.unwrap_or_else(|| {
        let mut v: Vec<(PathBuf, PathBuf)> = homes
            .iter()
            .map(|h| (h.join(".ssh/config"), h.join(".ssh")))
            .collect();
        v.push(("/etc/ssh/ssh_config".into(), "/etc/ssh".into()));
        v
    });
    files
        .iter()
        .find_map(|(f, base)| scan(f, base, homes.first().map(PathBuf::as_path), 0))
}

/// The directories whose `.ssh/config` ssh reads: $HOME and the passwd entry's.
pub(crate) fn homes() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::env::var_os("HOME")
        .map(PathBuf::from)
        .into_iter()
        .collect();
    let uid = rustix::process::getuid().as_raw().to_string();
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let home = passwd.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() > 5 && f[2] == uid).then(|| PathBuf::from(f[5]))
    });
    if let Some(h) = home {
        if !v.contains(&h) {
            v.push(h);
        }
    }
    v
}

/// The redirecting keyword of one configuration line, if it is one.
fn redirecting_line(line: &str) -> Option<String> {
    let k = keyword(line)?;
    REDIRECTING.contains(&k.as_str()).then_some(k)
}

/// A configuration line's keyword, lower case (`Key value` or `Key=value`).
fn keyword(line: &str) -> Option<String> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let end = line
        .find(|c: char| c.is_whitespace() || c == '=')
        .unwrap_or(line.len());
    Some(line[..end].to_ascii_lowercase())
}

/// Scan one file and what it includes; an unreadable file counts as
/// empty (ssh skips a missing one too).
fn scan(file: &Path, base: &Path, home: Option<&Path>, depth: u32) -> Option<String> {
    if depth > 16 {
        return Some(format!("{} includes too deeply", file.display()));
    }
    let text = std::fs::read_to_string(file).ok()?;
    for line in text.lines() {
        if let Some(k) = redirecting_line(line) {
            return Some(format!("{} sets {k}", file.display()));
        }
        if keyword(line).as_deref() != Some("include") {
            continue;
        }
        let patterns = line.trim()[7..].trim_start_matches(|c: char| c == '=' || c.is_whitespace());
        for pat in patterns.split_whitespace() {
            let pat = match (pat.strip_prefix("~/"), home) {
                (Some(rest), Some(h)) => h.join(rest),
                _ if pat.starts_with('/') => PathBuf::from(pat),
                _ => base.join(pat),
            };
            let found = match expand(&pat) {
                Ok(v) => v,
                Err(why) => return Some(format!("{} includes {why}", file.display())),
            };
            for inc in found {
                if let Some(why) = scan(&inc, base, home, depth + 1) {
                    return Some(why);
                }
            }
        }
    }
    None
}

/// The files a pattern names: wildcards (`*`, `?`) in its last component
/// only; anything else is not followed (the caller then assumes the worst).
fn expand(pat: &Path) -> Result<Vec<PathBuf>, String> {
    let name = pat
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let dir = pat.parent().unwrap_or(Path::new("/"));
    if dir.to_string_lossy().contains(['*', '?', '[']) {
        return Err(format!("{} (a wildcard in a directory)", pat.display()));
    }
    if !name.contains(['*', '?', '[']) {
        return Ok(vec![pat.to_path_buf()]);
    }
    if name.contains('[') {
        return Err(format!("{} (a bracket pattern)", pat.display()));
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(Vec::new());
    };
    let mut v: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| matches(name.as_bytes(), e.file_name().to_string_lossy().as_bytes()))
        .map(|e| e.path())
        .collect();
    v.sort();
    Ok(v)
}

/// Shell-style match of `*` and `?`.
fn matches(pat: &[u8], s: &[u8]) -> bool {
    match (pat.first(), s.first()) {
        (None, None) => true,
        (Some(b'*'), _) => matches(&pat[1..], s) || (!s.is_empty() && matches(pat, &s[1..])),
        (Some(b'?'), Some(_)) => matches(&pat[1..], &s[1..]),
        (Some(p), Some(c)) if p == c => matches(&pat[1..], &s[1..]),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jump_hosts_and_host_names_are_seen_in_options_files_and_includes() {
        let d = tempfile::tempdir().unwrap();
        let plain = d.path().join("plain");
        std::fs::write(
            &plain,
            "Host *\n  User root\n  # ProxyJump gw\n  ConnectTimeout 5\n",
        )
        .unwrap();
        let o = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let f = format!("-F{}", plain.display());
        assert_eq!(redirection(&o(&[&f]), &[]), None);
        assert!(redirection(&o(&[&f, "-o", "ProxyJump=gw"]), &[]).is_some());
        assert!(redirection(&o(&["-J", "gw"]), &[]).is_some());
        std::fs::create_dir(d.path().join("conf.d")).unwrap();
        std::fs::write(
            d.path().join("conf.d/a.conf"),
            "Host b*\n HostName=10.1.1.1\n",
        )
        .unwrap();
        let inc = d.path().join("inc");
        std::fs::write(
            &inc,
            format!("Include {}/conf.d/*.conf\n", d.path().display()),
        )
        .unwrap();
        let why = redirection(&o(&["-F", inc.to_str().unwrap()]), &[]).unwrap();
        assert!(why.contains("a.conf sets hostname"), "{why}");
        assert!(matches(b"*.conf", b"x.conf") && !matches(b"*.conf", b"x.con"));
    }
}
