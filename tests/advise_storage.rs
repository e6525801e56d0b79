//! Issue 11 item 7 through the real binary: a filesystem-lab run on a
//! throttled loop device (`--fs ext4 --throttle …`) is stored with the host
//! target's environment; `advise` for the host's directory must not cite its
//! figures as the host disk's. Root only (loop devices, mounts, cgroups);
//! skipped with the reason otherwise.

mod common;

use common::{json, stderr, Env};

#[test]
fn a_throttled_lab_run_is_not_evidence_for_the_host_disk() {
    if !common::is_root() {
        return common::skip("needs root (--fs and --throttle)");
    }
    if !std::path::Path::new("/dev/loop-control").exists() {
        return common::skip("no loop device support (/dev/loop-control missing)");
    }
    let env = Env::new();
    let out = env
        .cmd()
        .args(["run", "io.record-size", "--fs", "ext4", "--fs-size", "64M"])
        .args(["--throttle", "read=5MB/s,write=5MB/s", "--quiet-check", "0"])
        .args(["-p", "mode=direct", "-p", "record=1m", "-p", "size=8M"])
        .args(["--trials", "3", "--warmup", "0", "--target"])
        .arg(env.target())
        .output()
        .unwrap();
    let err = stderr(&out);
    if !out.status.success() {
        if err.contains("cgroup") || err.contains("mkfs") || err.contains("loop") {
            return common::skip(&format!("the lab cannot run here: {err}"));
        }
        panic!("lab run failed: {err}");
    }
    // The result says where it ran: the lab's loop device, throttled.
    let run = json(&env.run(&["show", "last", "--json"]));
    let storage = &run["results"][0]["storage"];
    assert_eq!(storage["lab"], "ext4", "{storage}");
    assert!(
        storage["disk"].as_str().unwrap().starts_with("loop"),
        "{storage}"
    );
    assert!(storage["throttle"]
        .as_str()
        .unwrap()
        .contains("write=5000000"));
    assert_ne!(run["environment"]["target.disk"], storage["disk"]);
    // advise for the host's directory: no finding or evidence from that run.
    let id = run["id"].as_str().unwrap();
    let a = env
        .cmd()
        .arg("advise")
        .arg("--target")
        .arg(env.target())
        .arg("--json")
        .output()
        .unwrap();
    assert!(a.status.success(), "{}", stderr(&a));
    let text = String::from_utf8_lossy(&a.stdout).to_string();
    assert!(!text.contains(id), "advice cites the lab run: {text}");
    let advice = json(&a);
    let ids: Vec<&str> = advice["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap())
        .collect();
    assert!(!ids.contains(&"vm.dirty-stall"), "{text}");
}
