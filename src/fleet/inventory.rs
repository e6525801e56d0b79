//! Hosts from the command line or an Ansible inventory (INI here, YAML in
//! `inventory_yaml`, which fills the same groups and variables).
//!
//! The INI format is Ansible's: `[group]` sections of host lines
//! (`name key=value …`), `[group:vars]` sections of `key=value` lines,
//! `[group:children]` sections naming other groups, and host lines before
//! any section belong to `ungrouped`. Of the variables, tunelab reads
//! `ansible_host`, `ansible_port`, `ansible_user` and `tunelab_dir` (where
//! the binary is cached on the host); anything else is ignored, as Ansible
//! ignores variables no module asks for. Host variables override group
//! variables, and a child group's variables override its parent's.

use std::collections::{BTreeMap, BTreeSet};

use crate::{Error, Result};

/// One machine to reach over SSH.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Host {
    /// The name shown in progress and results (the inventory name).
    pub(crate) name: String,
    /// What ssh connects to (`ansible_host`, else the name).
    pub(crate) address: String,
    pub(crate) port: Option<u16>,
    pub(crate) user: Option<String>,
    /// Directory on the host for the cached binary.
    pub(crate) dir: Option<String>,
}

impl Host {
    /// A host named on the command line: `[user@]address[:port]`.
    pub(crate) fn parse(spec: &str) -> Result<Host> {
        let bad = || {
            Error::usage(format!(
                "'{spec}' is not a host: use [user@]name[:port] (or an inventory name with --inventory)"
            ))
        };
        if spec.is_empty() || spec.starts_with('-') || spec.chars().any(char::is_whitespace) {
            return Err(bad());
        }
        let (user, rest) = match spec.split_once('@') {
            Some((u, r)) if !u.is_empty() => (Some(u.to_string()), r),
            Some(_) => return Err(bad()),
            None => (None, spec),
        };
        let (address, port) = match rest.rsplit_once(':') {
            Some((a, p)) if !a.contains(':') => {
                (a.to_string(), Some(p.parse::<u16>().map_err(|_| bad())?))
            }
            _ => (rest.to_string(), None),
        };
        if address.is_empty() {
            return Err(bad());
        }
        Ok(Host {
            name: spec.to_string(),
            address,
            port,
            user,
            dir: None,
        })
    }
}

/// A group's hosts in the order they were listed; the set makes "already
/// listed?" a lookup, so an inventory of n hosts is read in n log n.
#[derive(Debug, Default)]
struct Group {
    hosts: Vec<String>,
    listed: BTreeSet<String>,
    children: Vec<String>,
    vars: BTreeMap<String, String>,
}

impl Group {
    fn add(&mut self, host: &str) {
        if self.listed.insert(host.to_string()) {
            self.hosts.push(host.to_string());
        }
    }
}

/// A parsed inventory.
#[derive(Debug, Default)]
pub(crate) struct Inventory {
    groups: BTreeMap<String, Group>,
    /// Every host's own variables; its keys are the set of hosts.
    host_vars: BTreeMap<String, BTreeMap<String, String>>,
    /// Host names in the order they first appear.
    order: Vec<String>,
}

/// Split `key=value key2="quoted value"` into pairs.
fn pairs(s: &str, line: usize) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    let mut rest = s.trim();
    while !rest.is_empty() {
        let (key, after) = rest.split_once('=').ok_or_else(|| {
            Error::usage(format!("inventory line {line}: '{rest}' is not key=value"))
        })?;
        let (value, next) = match after.chars().next() {
            Some(q @ ('"' | '\'')) => {
                let end = after[1..].find(q).ok_or_else(|| {
                    Error::usage(format!("inventory line {line}: unterminated quote"))
                })?;
                (&after[1..1 + end], &after[2 + end..])
            }
            _ => match after.find(char::is_whitespace) {
                Some(i) => (&after[..i], &after[i..]),
                None => (after, ""),
            },
        };
        out.push((key.trim().to_string(), value.to_string()));
        rest = next.trim_start();
    }
    Ok(out)
}

impl Inventory {
    /// Declare a group (idempotent).
    #[cfg(feature = "fleet")]
    pub(super) fn add_group(&mut self, group: &str) {
        self.groups.entry(group.to_string()).or_default();
    }

    /// Put a host into a group, with its own variables (merged when the
    /// host is listed again).
    #[cfg(feature = "fleet")]
    pub(super) fn add_host(&mut self, group: &str, name: &str, vars: Vec<(String, String)>) {
        self.groups.entry(group.to_string()).or_default().add(name);
        self.note_host(name).extend(vars);
    }

    /// The host's variables, the host first recorded in `order` if new.
    fn note_host(&mut self, name: &str) -> &mut BTreeMap<String, String> {
        if !self.host_vars.contains_key(name) {
            self.order.push(name.to_string());
        }
        self.host_vars.entry(name.to_string()).or_default()
    }

    #[cfg(feature = "fleet")]
    pub(super) fn add_child(&mut self, parent: &str, child: &str) {
        self.add_group(child);
        let g = self.groups.entry(parent.to_string()).or_default();
        if !g.children.iter().any(|c| c == child) {
            g.children.push(child.to_string());
        }
    }

    #[cfg(feature = "fleet")]
    pub(super) fn set_group_var(&mut self, group: &str, key: String, value: String) {
        self.groups
            .entry(group.to_string())
            .or_default()
            .vars
            .insert(key, value);
    }

    /// Ansible's implicit `ungrouped`: hosts that belong to no group but `all`.
    #[cfg(feature = "fleet")]
    pub(super) fn fill_ungrouped(&mut self) {
        let grouped: BTreeSet<&String> = self
            .groups
            .iter()
            .filter(|(g, _)| *g != "all" && *g != "ungrouped")
            .flat_map(|(_, grp)| &grp.listed)
            .collect();
        let lonely: Vec<String> = self
            .order
            .iter()
            .filter(|h| !grouped.contains(h))
            .cloned()
            .collect();
        let g = self.groups.entry("ungrouped".into()).or_default();
        for h in lonely {
            g.add(&h);
        }
    }

    pub(crate) fn parse(text: &str) -> Result<Inventory> {
        let mut inv = Inventory::default();
        // (group, kind) of the current section; kind: hosts, vars or children.
        let mut section = ("ungrouped".to_string(), "hosts");
        for (i, raw) in text.lines().enumerate() {
            let n = i + 1;
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
                continue;
            }
            if let Some(head) = line.strip_prefix('[') {
                let head = head.strip_suffix(']').ok_or_else(|| {
                    Error::usage(format!("inventory line {n}: '{line}' lacks its closing ]"))
                })?;
                section = match head.split_once(':') {
                    Some((g, "vars")) => (g.to_string(), "vars"),
                    Some((g, "children")) => (g.to_string(), "children"),
                    Some((_, other)) => {
                        return Err(Error::usage(format!(
                            "inventory line {n}: unknown section kind ':{other}' (use :vars or :children)"
                        )))
                    }
                    None => (head.to_string(), "hosts"),
                };
                inv.groups.entry(section.0.clone()).or_default();
                continue;
            }
            let group = inv.groups.entry(section.0.clone()).or_default();
            match section.1 {
                "vars" => {
                    for (k, v) in pairs(line, n)? {
                        group.vars.insert(k, v);
                    }
                }
                "children" => group.children.push(line.to_string()),
                _ => {
                    let (name, vars) = match line.split_once(char::is_whitespace) {
                        Some((h, v)) => (h.to_string(), v),
                        None => (line.to_string(), ""),
                    };
                    if name.contains('[') {
                        return Err(Error::usage(format!(
                            "inventory line {n}: host ranges such as '{name}' are not supported; list the hosts"
                        )));
                    }
                    group.add(&name);
                    let hv = inv.note_host(&name);
                    for (k, v) in pairs(vars, n)? {
                        hv.insert(k, v);
                    }
                }
            }
        }
        for (name, g) in &inv.groups {
            if let Some(c) = g.children.iter().find(|c| !inv.groups.contains_key(*c)) {
                return Err(Error::usage(format!(
                    "inventory: group '{name}' names the child group '{c}', which is not defined"
                )));
            }
        }
        Ok(inv)
    }

    /// Every host of a group, its child groups included (cycles are cut),
    /// in listing order; `have` holds what `out` holds.
    fn members<'a>(
        &'a self,
        group: &str,
        seen: &mut BTreeSet<String>,
        have: &mut BTreeSet<&'a str>,
        out: &mut Vec<&'a str>,
    ) {
        if !seen.insert(group.to_string()) {
            return;
        }
        if let Some(g) = self.groups.get(group) {
            for h in &g.hosts {
                if have.insert(h) {
                    out.push(h);
                }
            }
            for c in &g.children {
                self.members(c, seen, have, out);
            }
        }
    }

    fn all_members(&self, group: &str) -> Vec<&str> {
        let mut out = Vec::new();
        self.members(group, &mut BTreeSet::new(), &mut BTreeSet::new(), &mut out);
        out
    }

    /// For each host, the groups that contain it, parents before children
    /// (so a child's variables are applied after, and win over, its
    /// parent's). Each group is expanded once, not once per host.
    fn groups_by_host(&self) -> BTreeMap<&str, Vec<&str>> {
        let mut holding: BTreeMap<&str, Vec<(&str, usize)>> = BTreeMap::new();
        for name in self.groups.keys() {
            let members = self.all_members(name);
            for h in &members {
                holding
                    .entry(h)
                    .or_default()
                    .push((name.as_str(), members.len()));
            }
        }
        let depth = self.depths();
        holding
            .into_iter()
            .map(|(h, mut gs)| {
                // Parents before children (deeper groups win, as in
                // Ansible), then the group holding more hosts, then by name.
                gs.sort_by(|a, b| {
                    let (da, db) = (depth.get(a.0), depth.get(b.0));
                    da.cmp(&db).then(b.1.cmp(&a.1)).then(a.0.cmp(b.0))
                });
                (h, gs.into_iter().map(|(g, _)| g).collect())
            })
            .collect()
    }

    /// Each group's depth in the tree: 0 without a parent, else one more
    /// than its deepest parent (a cycle is cut where it closes).
    fn depths(&self) -> BTreeMap<&str, usize> {
        let mut parents: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (name, g) in &self.groups {
            for c in &g.children {
                parents.entry(c.as_str()).or_default().push(name.as_str());
            }
        }
        fn depth<'a>(
            g: &'a str,
            parents: &BTreeMap<&'a str, Vec<&'a str>>,
            done: &mut BTreeMap<&'a str, usize>,
            open: &mut BTreeSet<&'a str>,
        ) -> usize {
            if let Some(d) = done.get(g) {
                return *d;
            }
            if !open.insert(g) {
                return 0;
            }
            let d = parents.get(g).map_or(0, |ps| {
                ps.iter()
                    .map(|p| depth(p, parents, done, open) + 1)
                    .max()
                    .unwrap_or(0)
            });
            open.remove(g);
            done.insert(g, d);
            d
        }
        let mut done = BTreeMap::new();
        for name in self.groups.keys() {
            depth(name, &parents, &mut done, &mut BTreeSet::new());
        }
        done
    }

    fn host(&self, name: &str, groups: &[&str]) -> Result<Host> {
        let mut vars: BTreeMap<String, String> = BTreeMap::new();
        for g in groups {
            vars.extend(self.groups[*g].vars.clone());
        }
        if let Some(all) = self.groups.get("all") {
            for (k, v) in &all.vars {
                vars.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
        vars.extend(self.host_vars.get(name).cloned().unwrap_or_default());
        let port = match vars.get("ansible_port") {
            Some(p) => Some(p.parse::<u16>().map_err(|_| {
                Error::usage(format!(
                    "inventory: host {name} has ansible_port={p}, not a port number"
                ))
            })?),
            None => None,
        };
        Ok(Host {
            name: name.to_string(),
            address: vars
                .get("ansible_host")
                .cloned()
                .unwrap_or_else(|| name.to_string()),
            port,
            user: vars.get("ansible_user").cloned(),
            dir: vars.get("tunelab_dir").cloned(),
        })
    }

    /// The hosts a pattern names: `all`, a group, or a host; comma lists.
    pub(crate) fn select(&self, pattern: &str) -> Result<Vec<Host>> {
        let mut names: Vec<&str> = Vec::new();
        for part in pattern.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            if part == "all" {
                names.extend(self.order.iter().map(String::as_str));
            } else if self.groups.contains_key(part) {
                names.extend(self.all_members(part));
            } else if let Some((h, _)) = self.host_vars.get_key_value(part) {
                names.push(h);
            } else {
                return Err(Error::usage(format!(
                    "'{part}' is neither a group nor a host of the inventory (groups: {})",
                    self.groups.keys().cloned().collect::<Vec<_>>().join(", ")
                )));
            }
        }
        let mut seen = BTreeSet::new();
        names.retain(|n| seen.insert(*n));
        let groups = self.groups_by_host();
        names
            .iter()
            .map(|n| self.host(n, groups.get(n).map_or(&[][..], Vec::as_slice)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INV: &str = r#"
# boards in the lab
stb-0 ansible_host=10.0.0.5

[boards]
stb-1 ansible_host=127.0.0.1 ansible_port=2201
stb-2 ansible_host=127.0.0.1 ansible_port=2202 ansible_user=tester

[boards:vars]
ansible_user=root
tunelab_dir="/tmp/tune lab"

[servers]
big ansible_user=admin

[lab:children]
boards
servers

[lab:vars]
ansible_user=labuser
ansible_port=22
"#;

    #[test]
    fn groups_children_and_variables_resolve_like_ansible() {
        let inv = Inventory::parse(INV).unwrap();
        let hosts = inv.select("lab").unwrap();
        let names: Vec<&str> = hosts.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(names, ["stb-1", "stb-2", "big"]);
        let stb1 = &hosts[0];
        assert_eq!(stb1.address, "127.0.0.1");
        assert_eq!(stb1.port, Some(2201), "host variable beats group variables");
        assert_eq!(
            stb1.user.as_deref(),
            Some("root"),
            "child group beats parent"
        );
        assert_eq!(stb1.dir.as_deref(), Some("/tmp/tune lab"));
        assert_eq!(hosts[1].user.as_deref(), Some("tester"));
        assert_eq!(hosts[2].user.as_deref(), Some("admin"));
        assert_eq!(hosts[2].port, Some(22), "inherited from lab");
        assert_eq!(inv.select("all").unwrap().len(), 4);
        assert_eq!(inv.select("ungrouped").unwrap()[0].address, "10.0.0.5");
        assert_eq!(inv.select("stb-2,boards").unwrap().len(), 2);
    }

    #[test]
    fn mistakes_are_named() {
        let inv = Inventory::parse(INV).unwrap();
        let e = inv.select("nope").unwrap_err().to_string();
        assert!(e.contains("'nope'") && e.contains("boards"), "{e}");
        for bad in [
            "[boards\nx",
            "[g:weird]\n",
            "[g:children]\nmissing\n",
            "[g]\nh ansible_port=abc\n",
            "[g]\nweb[01:10]\n",
            "[g:vars]\nnot a pair\n",
        ] {
            let r = Inventory::parse(bad).and_then(|i| i.select("all").map(|_| ()));
            let r = r.and_then(|_| Inventory::parse(bad)?.select("g").map(|_| ()));
            assert!(r.is_err(), "{bad:?} was accepted");
        }
    }

    /// Issue 42: 10,000 hosts took minutes (each host's groups were found
    /// by expanding every group, each expansion a linear search per host).
    /// Now each group is expanded once; this checks the result at that
    /// scale (its time is bench/inventory_scale.sh's to measure).
    #[test]
    fn ten_thousand_hosts_resolve_in_order_with_their_groups() {
        let mut ini = String::from("[boards:vars]\nansible_user=root\n[boards]\n");
        for i in 0..10_000 {
            ini.push_str(&format!(
                "b{i} ansible_host=127.0.0.1 ansible_port={}\n",
                1 + i % 2
            ));
        }
        ini.push_str("[lab:children]\nboards\n[lab:vars]\nansible_user=lab\ntunelab_dir=/d\n");
        let inv = Inventory::parse(&ini).unwrap();
        let hosts = inv.select("all").unwrap();
        assert_eq!(hosts.len(), 10_000);
        assert_eq!(hosts[9_999].name, "b9999");
        assert!(hosts.iter().all(|h| h.user.as_deref() == Some("root")));
        assert!(hosts.iter().all(|h| h.dir.as_deref() == Some("/d")));
        assert_eq!(inv.select("lab,b5").unwrap().len(), 10_000);
    }

    #[test]
    fn command_line_hosts() {
        let h = Host::parse("root@board.local:2222").unwrap();
        assert_eq!(
            (h.user.as_deref(), h.address.as_str(), h.port),
            (Some("root"), "board.local", Some(2222))
        );
        let h = Host::parse("board").unwrap();
        assert_eq!((h.user, h.port), (None, None));
        for bad in ["", "-oProxyCommand=x", "a b", "@x", "x:notaport", "u@"] {
            assert!(Host::parse(bad).is_err(), "{bad:?}");
        }
    }
}
