//! Ansible's YAML inventory format, into the same groups and variables as
//! the INI one:
//!
//! ```yaml
//! all:                       # or any group at the top level
//!   hosts:
//!     mail.example.com:      # a host, with no variables
//!   vars: { ansible_user: root }
//!   children:
//!     boards:
//!       hosts:
//!         stb-1: { ansible_host: 10.0.0.5, ansible_port: 2201 }
//!       vars:
//!         tunelab_dir: /data/tunelab
//! ```
//!
//! A group may be defined in several places (its hosts, vars and children
//! are merged), hosts directly under `all` that no other group names are
//! also in `ungrouped`, and scalar variables of any YAML type are read as
//! text (`ansible_port: 2201` is the string "2201"), as Ansible templates
//! them. Only the same four variables as in INI are used.

use yaml_rust2::{Yaml, YamlLoader};

use super::inventory::Inventory;
use crate::{Error, Result};

/// Children nested deeper than this are refused (a bound on recursion, far
/// above any real inventory).
const MAX_DEPTH: usize = 64;

fn bad(what: String) -> Error {
    Error::usage(format!("inventory (YAML): {what}"))
}

fn scalar(y: &Yaml) -> Option<String> {
    match y {
        Yaml::String(s) | Yaml::Real(s) => Some(s.clone()),
        Yaml::Integer(i) => Some(i.to_string()),
        Yaml::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

fn name_of(y: &Yaml, what: &str, group: &str) -> Result<String> {
    let n = scalar(y).ok_or_else(|| {
        bad(format!(
            "a {what} name in group '{group}' is not a plain name ({y:?})"
        ))
    })?;
    if n.contains('[') {
        return Err(bad(format!(
            "host ranges such as '{n}' are not supported; list the hosts"
        )));
    }
    Ok(n)
}

/// `key: value` pairs of a vars mapping (null: none). Lists and mappings
/// are skipped: no variable tunelab reads is one.
fn vars(y: &Yaml, whose: &str) -> Result<Vec<(String, String)>> {
    match y {
        Yaml::Null => Ok(Vec::new()),
        Yaml::Hash(h) => Ok(h
            .iter()
            .filter_map(|(k, v)| Some((scalar(k)?, scalar(v)?)))
            .collect()),
        _ => Err(bad(format!(
            "the variables of {whose} must be a mapping of name: value"
        ))),
    }
}

fn group(inv: &mut Inventory, name: &str, def: &Yaml, depth: usize) -> Result<()> {
    if depth > MAX_DEPTH {
        return Err(bad(format!(
            "groups nested more than {MAX_DEPTH} deep at '{name}'"
        )));
    }
    inv.add_group(name);
    let h = match def {
        Yaml::Null => return Ok(()),
        Yaml::Hash(h) => h,
        _ => {
            return Err(bad(format!(
                "group '{name}' must be a mapping with hosts, vars and/or children"
            )))
        }
    };
    for (k, v) in h {
        match k.as_str() {
            Some("hosts") => match v {
                Yaml::Null => {}
                Yaml::Hash(hosts) => {
                    for (hn, hv) in hosts {
                        let host = name_of(hn, "host", name)?;
                        let hv = vars(hv, &format!("host '{host}'"))?;
                        inv.add_host(name, &host, hv);
                    }
                }
                _ => {
                    return Err(bad(format!(
                        "'hosts' of group '{name}' must be a mapping of host names \
                         (a list is not Ansible's format: write `host:` per line)"
                    )))
                }
            },
            Some("vars") => {
                for (k, v) in vars(v, &format!("group '{name}'"))? {
                    inv.set_group_var(name, k, v);
                }
            }
            Some("children") => match v {
                Yaml::Null => {}
                Yaml::Hash(children) => {
                    for (cn, cv) in children {
                        let child = name_of(cn, "child group", name)?;
                        inv.add_child(name, &child);
                        group(inv, &child, cv, depth + 1)?;
                    }
                }
                _ => {
                    return Err(bad(format!(
                        "'children' of group '{name}' must be a mapping of group names"
                    )))
                }
            },
            _ => {
                return Err(bad(format!(
                    "group '{name}' has the key {k:?}; a group has only hosts, vars and children"
                )))
            }
        }
    }
    Ok(())
}

/// Nodes an inventory may expand to once aliases are resolved: far above
/// any real fleet (a host is a few nodes), far below what exhausts a board.
const MAX_NODES: u64 = 200_000;

/// Refuse, before building anything, a document nested deeper than
/// MAX_DEPTH or whose aliases expand past MAX_NODES ("billion laughs": a
/// 1 KB file of nested aliases that the loader would copy into gigabytes).
/// Walks the parser's events counting what each anchor would copy; nothing
/// is expanded.
fn check_bounds(text: &str) -> Result<()> {
    use std::collections::HashMap;
    use yaml_rust2::parser::{Event, Parser};
    let mut parser = Parser::new_from_str(text);
    let mut nodes: u64 = 0;
    // Size of each anchored node, and the open collections (anchor, nodes
    // counted before it began).
    let mut anchors: HashMap<usize, u64> = HashMap::new();
    let mut open: Vec<(usize, u64)> = Vec::new();
    loop {
        let (ev, mark) = parser.next_token().map_err(|e| bad(e.to_string()))?;
        match ev {
            Event::StreamEnd => return Ok(()),
            Event::Scalar(_, _, anchor, _) => {
                nodes += 1;
                if anchor > 0 {
                    anchors.insert(anchor, 1);
                }
            }
            Event::Alias(id) => nodes += anchors.get(&id).copied().unwrap_or(1),
            Event::SequenceStart(anchor, _) | Event::MappingStart(anchor, _) => {
                nodes += 1;
                open.push((anchor, nodes - 1));
                if open.len() > 2 * MAX_DEPTH + 8 {
                    return Err(bad(format!(
                        "nested more than {} levels deep (line {}); an inventory is a few levels",
                        2 * MAX_DEPTH + 8,
                        mark.line()
                    )));
                }
            }
            Event::SequenceEnd | Event::MappingEnd => {
                if let Some((anchor, before)) = open.pop() {
                    if anchor > 0 {
                        anchors.insert(anchor, nodes - before);
                    }
                }
            }
            _ => {}
        }
        if nodes > MAX_NODES {
            return Err(bad(format!(
                "more than {MAX_NODES} values once its aliases are expanded (line {}): \
                 refused, as a nested-alias bomb would exhaust memory; write the hosts \
                 out or use fewer aliases",
                mark.line()
            )));
        }
    }
}

pub(super) fn parse(text: &str) -> Result<Inventory> {
    check_bounds(text)?;
    let docs = YamlLoader::load_from_str(text).map_err(|e| bad(e.to_string()))?;
    let mut inv = Inventory::default();
    match docs.first() {
        None | Some(Yaml::Null) => {}
        Some(Yaml::Hash(top)) => {
            for (k, v) in top {
                let g = name_of(k, "group", "(top level)")?;
                group(&mut inv, &g, v, 0)?;
            }
        }
        Some(_) => {
            return Err(bad(
                "the top level must be a mapping of group names (e.g. all:)".into(),
            ))
        }
    }
    if docs.len() > 1 {
        return Err(bad(
            "more than one YAML document; an inventory is one mapping".into(),
        ));
    }
    inv.fill_ungrouped();
    Ok(inv)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of Ansible's "How to build your inventory" guide (YAML
    /// version of its INI example), with the variables of its "Adding
    /// variables to inventory" and "Inheriting variable values" sections.
    const ANSIBLE_DOCS: &str = r#"
ungrouped:
  hosts:
    mail.example.com:
webservers:
  hosts:
    foo.example.com:
    bar.example.com:
dbservers:
  hosts:
    one.example.com:
    two.example.com:
    three.example.com:
east:
  hosts:
    foo.example.com:
    one.example.com:
    two.example.com:
west:
  hosts:
    bar.example.com:
    three.example.com:
prod:
  children:
    east:
test:
  children:
    west:
atlanta:
  hosts:
    host1:
      http_port: 80
      maxRequestsPerChild: 808
      ansible_port: 5555
      ansible_host: 192.0.2.50
    host2:
      http_port: 303
      maxRequestsPerChild: 909
  vars:
    ntp_server: ntp.atlanta.example.com
    ansible_user: atl
"#;

    /// The "all: children:" form of the same guide, with nested children and
    /// variables on `all` and on a parent group.
    const NESTED: &str = r#"
---
all:
  hosts:
    jumper:
      ansible_port: 5555
      ansible_host: 192.0.2.50
  vars:
    ansible_user: everyone
  children:
    boards:
      vars:
        ansible_user: root
        tunelab_dir: /data/tunelab
      children:
        stb:
          hosts:
            stb-1: { ansible_host: 127.0.0.1, ansible_port: 2201 }
            stb-2:
              ansible_host: 127.0.0.1
              ansible_port: 2202
              ansible_user: tester
          vars:
            ansible_user: stbuser
        cams:
          hosts:
            cam-1:
    servers:
      hosts:
        big:
"#;

    fn names(inv: &Inventory, pattern: &str) -> Vec<String> {
        inv.select(pattern)
            .unwrap()
            .into_iter()
            .map(|h| h.name)
            .collect()
    }

    #[test]
    fn the_ansible_guide_example_resolves_groups_children_and_vars() {
        let inv = crate::fleet::load_inventory(ANSIBLE_DOCS, "hosts.yml").unwrap();
        assert_eq!(
            names(&inv, "webservers"),
            ["foo.example.com", "bar.example.com"]
        );
        assert_eq!(
            names(&inv, "prod"),
            ["foo.example.com", "one.example.com", "two.example.com"]
        );
        assert_eq!(
            names(&inv, "test"),
            ["bar.example.com", "three.example.com"]
        );
        assert_eq!(names(&inv, "ungrouped"), ["mail.example.com"]);
        assert_eq!(names(&inv, "all").len(), 8);
        let h = inv.select("host1").unwrap().remove(0);
        assert_eq!(h.address, "192.0.2.50");
        assert_eq!(h.port, Some(5555), "an integer port is read as a port");
        assert_eq!(h.user.as_deref(), Some("atl"), "group variable");
        let h2 = inv.select("host2").unwrap().remove(0);
        assert_eq!((h2.address.as_str(), h2.port), ("host2", None));
    }

    #[test]
    fn nested_children_inherit_and_override_like_ansible() {
        let inv = crate::fleet::load_inventory(NESTED, "inventory").unwrap();
        assert_eq!(names(&inv, "boards"), ["stb-1", "stb-2", "cam-1"]);
        let hosts = inv.select("stb").unwrap();
        assert_eq!(hosts[0].port, Some(2201));
        assert_eq!(
            hosts[0].user.as_deref(),
            Some("stbuser"),
            "the child group's variable beats its parent's and all's"
        );
        assert_eq!(
            hosts[0].dir.as_deref(),
            Some("/data/tunelab"),
            "from boards"
        );
        assert_eq!(
            hosts[1].user.as_deref(),
            Some("tester"),
            "host beats groups"
        );
        let cam = inv.select("cam-1").unwrap().remove(0);
        assert_eq!(cam.user.as_deref(), Some("root"), "boards beats all");
        let big = inv.select("servers").unwrap().remove(0);
        assert_eq!(big.user.as_deref(), Some("everyone"), "from all");
        assert_eq!(big.dir, None);
        assert_eq!(names(&inv, "ungrouped"), ["jumper"]);
        assert_eq!(names(&inv, "all").len(), 5);
        assert_eq!(names(&inv, "stb-2,servers"), ["stb-2", "big"]);
    }

    #[test]
    fn the_format_is_told_by_name_or_content() {
        // Same hosts as INI and as YAML without an extension.
        let ini = crate::fleet::load_inventory("[g]\nh1 ansible_port=22\n", "inventory").unwrap();
        let yaml =
            crate::fleet::load_inventory("g:\n  hosts:\n    h1:\n      ansible_port: 22\n", "inv")
                .unwrap();
        assert_eq!(ini.select("g").unwrap(), yaml.select("g").unwrap());
        assert!(crate::fleet::load_inventory("---\n", "x")
            .unwrap()
            .select("all")
            .unwrap()
            .is_empty());
    }

    #[test]
    fn mistakes_are_named() {
        for (bad, says) in [
            ("g:\n  hosts: [a, b]\n", "mapping of host names"),
            ("g:\n  host:\n    a:\n", "only hosts, vars and children"),
            ("g:\n  hosts:\n    web[01:10]:\n", "host ranges"),
            (
                "g:\n  hosts:\n    a: {ansible_port: abc}\n",
                "not a port number",
            ),
            ("g:\n  children: [x]\n", "mapping of group names"),
            ("- a\n- b\n", "top level must be a mapping"),
            ("g:\n  hosts:\n    a: [1\n", "inventory (YAML)"),
            ("g: 5\n", "must be a mapping with hosts"),
            ("g:\n  vars: [a]\n", "must be a mapping of name: value"),
        ] {
            let r = crate::fleet::load_inventory(bad, "inv.yaml")
                .and_then(|i| i.select("all").map(|_| ()));
            let e = r.expect_err(bad).to_string();
            assert!(e.contains(says), "{bad:?}: {e}");
        }
        let inv = crate::fleet::load_inventory(NESTED, "inv.yml").unwrap();
        let e = inv.select("nope").unwrap_err().to_string();
        assert!(e.contains("'nope'") && e.contains("boards"), "{e}");
    }
}
