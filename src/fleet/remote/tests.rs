use super::*;

#[test]
fn remote_answers_are_checked_before_they_become_paths() {
    let d = tempfile::tempdir().unwrap();
    let e = binary_for("../../secret", Some(d.path())).unwrap_err();
    assert!(e.to_string().contains("not a known architecture"), "{e}");
    assert_eq!(e.exit_code(), 4);
    assert!(checked_arch("aarch64\n../x").is_err() && checked_home("/home/pi").is_ok());
    for bad in ["../../etc", "/home/../etc", "relative", "/a\nb"] {
        assert!(checked_home(bad).is_err(), "{bad}");
    }
}

#[test]
fn checksum_is_fnv1a() {
    // Published FNV-1a 64 test vectors.
    assert_eq!(checksum(b""), 0xcbf29ce484222325);
    assert_eq!(checksum(b"a"), 0xaf63dc4c8601ec8c);
    assert_eq!(checksum(b"foobar"), 0x85944171f73967e8);
}

#[test]
fn binaries_are_found_in_the_build_layouts() {
    let d = tempfile::tempdir().unwrap();
    assert!(binary_for("aarch64", Some(d.path())).is_err());
    let p = d.path().join("aarch64-unknown-linux-musl/board");
    std::fs::create_dir_all(&p).unwrap();
    std::fs::write(p.join("tunelab"), b"x").unwrap();
    assert_eq!(
        binary_for("aarch64", Some(d.path())).unwrap(),
        p.join("tunelab")
    );
    assert!(binary_for(std::env::consts::ARCH, None).is_ok());
    let other = if std::env::consts::ARCH == "aarch64" {
        "x86_64"
    } else {
        "aarch64"
    };
    assert_eq!(binary_for(other, None).unwrap_err().exit_code(), 2);
}

#[test]
fn build_static_output_directory_serves_as_bin() {
    // scripts/build-static.sh writes target/static/tunelab-<arch>-linux-musl;
    // `--bin target/static` did not find it before.
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("tunelab-aarch64-linux-musl");
    std::fs::write(&f, b"x").unwrap();
    assert_eq!(binary_for("aarch64", Some(d.path())).unwrap(), f);
}

#[test]
fn ssh_command_line_keeps_the_host_out_of_option_parsing() {
    let plan = Plan {
        ssh: "ssh".into(),
        ssh_options: vec!["-F".into(), "/tmp/cfg".into()],
        binaries: None,
        args: &[],
        timeout: Duration::from_secs(1),
        parallel: 1,
        allow_dynamic: false,
    };
    let h = Host::parse("root@b1:2222").unwrap();
    let c = ssh(&plan, &h);
    let args: Vec<String> = c
        .get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        args,
        [
            "-o",
            "BatchMode=yes",
            "-F",
            "/tmp/cfg",
            "-p",
            "2222",
            "-l",
            "root",
            "--",
            "b1"
        ]
    );
}
