//! The command line a user meets first: every verb's help has examples,
//! `run --help` is short, one man page per subcommand, the export flags on
//! the measuring verbs, and `remote` refusing a dynamically linked binary.

mod common;

use std::process::Command as Std;

use common::{json, stderr, Env};

const VERBS: &[&str] = &[
    "list",
    "run",
    "runs",
    "show",
    "compare",
    "export",
    "import",
    "inspect",
    "advise",
    "study",
    "tune",
    "restore",
    "completions",
    "monitor",
    "time",
    "memory",
    "report",
    "history",
    "remote",
    "diagnose",
    "boot",
];

#[test]
fn every_verb_has_examples_and_run_help_is_short() {
    let env = Env::new();
    for verb in VERBS {
        for flag in ["-h", "--help"] {
            let out = env.run(&[verb, flag]);
            assert!(out.status.success(), "{verb} {flag}: {}", stderr(&out));
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(text.contains("Examples:"), "{verb} {flag} has no examples");
            assert!(
                text.contains(&format!("tunelab {verb}")),
                "{verb} {flag}: examples do not use the verb"
            );
        }
    }
    let run = env.run(&["run", "--help"]);
    let text = String::from_utf8_lossy(&run.stdout);
    let lines = text.lines().count();
    assert!(lines < 120, "run --help is {lines} lines:\n{text}");
    assert!(text.contains("tunelab list EXP"), "{text}");
    assert!(text.contains("--export-json"), "{text}");
    // Per-experiment detail is where it belongs.
    let one = env.run(&["list", "io.record-size"]);
    assert!(String::from_utf8_lossy(&one.stdout).contains("record"));
    // JSON Lines is documented where --format is.
    let monitor = env.run(&["monitor", "--help"]);
    assert!(String::from_utf8_lossy(&monitor.stdout).contains("JSON Lines"));
}

#[test]
fn one_man_page_per_subcommand_that_man_reads() {
    let env = Env::new();
    let dir = env.dir.path().join("man1");
    let out = env.run(&["completions", "man", "--dir", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let mut pages = common::list(&dir);
    pages.sort();
    assert!(pages.contains(&"tunelab.1".to_string()), "{pages:?}");
    for verb in VERBS {
        let page = format!("tunelab-{verb}.1");
        assert!(pages.contains(&page), "{page} missing from {pages:?}");
    }
    let run = std::fs::read_to_string(dir.join("tunelab-run.1")).unwrap();
    assert!(run.contains(".TH tunelab-run"), "title");
    // The examples verbatim (no fill: clap_mangen's EXTRA reflowed and
    // hyphenated them), and a SYNOPSIS with every option's argument.
    assert!(
        run.contains(".SH EXAMPLES\n.nf\n"),
        "examples in the man page"
    );
    assert!(!run.contains(".SH EXTRA"), "examples under EXTRA");
    assert!(
        run.contains("tunelab run io.record\\-size \\-p record=4k,64k,1m"),
        "an example verbatim"
    );
    let synopsis = &run[run.find(".SH SYNOPSIS").unwrap()..run.find(".SH DESCRIPTION").unwrap()];
    assert!(
        synopsis.contains("\\fB\\-\\-target\\fR\\ \\fIDIR\\fR"),
        "option arguments in the synopsis: {synopsis}"
    );
    // The experiments come from the registry main.rs hands the CLI.
    assert!(
        run.contains("io.record\\-size"),
        "tunelab-run.1 lists experiments"
    );
    // Never overwritten: a second run refuses and leaves the pages as they are.
    let again = env.run(&["completions", "man", "--dir", dir.to_str().unwrap()]);
    assert_eq!(again.status.code(), Some(2), "{}", stderr(&again));
    assert!(stderr(&again).contains("already exists"));
    assert_eq!(
        std::fs::read_to_string(dir.join("tunelab-run.1")).unwrap(),
        run
    );
    // `man tunelab-run` from the generated pages, when man is installed.
    let manpath = env.dir.path();
    match Std::new("man")
        .env("MANPATH", manpath)
        .env("MANPAGER", "cat")
        .env("PAGER", "cat")
        .env("MANWIDTH", "100")
        .args(["tunelab-run"])
        .output()
    {
        Ok(o) if o.status.success() => {
            let text = String::from_utf8_lossy(&o.stdout);
            assert!(text.contains("tunelab-run"), "{text}");
            assert!(text.contains("EXAMPLES"), "{text}");
        }
        Ok(o) => common::skip(&format!(
            "man tunelab-run: {}",
            String::from_utf8_lossy(&o.stderr)
        )),
        Err(e) => common::skip(&format!("man is not installed: {e}")),
    }
}

#[test]
fn export_flags_write_new_files_and_never_overwrite() {
    let env = Env::new();
    let t = env.target();
    let dir = env.dir.path();
    let (j, c, m) = (dir.join("r.json"), dir.join("r.csv"), dir.join("r.md"));
    let run = |label: &str, extra: &[&str]| {
        let mut args = vec![
            "run",
            "io.file-read",
            "-p",
            "size=512k",
            "-p",
            "chunk=64k",
            "--trials",
            "3",
            "--warmup",
            "0",
            "--quiet-check",
            "0",
            "--label",
            label,
            "--target",
            t.to_str().unwrap(),
        ];
        args.extend(extra);
        env.run(&args)
    };
    let out = run(
        "before",
        &[
            "--export-json",
            j.to_str().unwrap(),
            "--export-csv",
            c.to_str().unwrap(),
            "--export-markdown",
            m.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let stored = json(&env.run(&["show", "last", "--json"]));
    let exported: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&j).unwrap()).unwrap();
    assert_eq!(exported["id"], stored["id"], "the stored run is exported");
    let csv = std::fs::read_to_string(&c).unwrap();
    assert!(csv.starts_with("run_id,experiment,params,metric"), "{csv}");
    assert!(csv.contains("read_throughput"));
    let md = std::fs::read_to_string(&m).unwrap();
    assert!(md.contains("| params | metric | median"), "{md}");

    // An existing file is refused before anything is measured.
    let before = env.run(&["runs", "--json"]);
    let n = json(&before).as_array().unwrap().len();
    let again = run("again", &["--export-json", j.to_str().unwrap()]);
    assert_eq!(again.status.code(), Some(2), "{}", stderr(&again));
    assert!(
        stderr(&again).contains("already exists"),
        "{}",
        stderr(&again)
    );
    assert_eq!(
        json(&env.run(&["runs", "--json"]))
            .as_array()
            .unwrap()
            .len(),
        n
    );
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&std::fs::read_to_string(&j).unwrap()).unwrap(),
        exported
    );

    // compare exports the comparison.
    let out = run("after", &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let (cj, cc, cm) = (dir.join("c.json"), dir.join("c.csv"), dir.join("c.md"));
    let out = env.run(&[
        "compare",
        "last~1",
        "last",
        "--export-json",
        cj.to_str().unwrap(),
        "--export-csv",
        cc.to_str().unwrap(),
        "--export-markdown",
        cm.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&cj).unwrap()).unwrap();
    assert!(
        doc["pairs"].as_array().is_some_and(|p| !p.is_empty()),
        "{doc}"
    );
    let csv = std::fs::read_to_string(&cc).unwrap();
    assert!(
        csv.lines().count() >= 2 && csv.contains(",read_throughput,"),
        "{csv}"
    );
    let md = std::fs::read_to_string(&cm).unwrap();
    assert!(
        md.contains("new/base") && md.contains("read_throughput"),
        "{md}"
    );

    // time, hyperfine-style.
    let tj = dir.join("t.json");
    let out = env.run(&[
        "time",
        "--runs",
        "3",
        "--export-json",
        tj.to_str().unwrap(),
        "--",
        "true",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&tj).unwrap()).unwrap();
    assert!(
        doc["trials"].as_array().is_some_and(|t| t.len() >= 3),
        "{doc}"
    );
}

#[test]
fn remote_refuses_a_dynamically_linked_binary_unless_told() {
    let me = assert_cmd::cargo::cargo_bin("tunelab");
    let bytes = std::fs::read(&me).unwrap();
    let env = Env::new();
    let out = env.run(&[
        "remote",
        "--timeout",
        "5s",
        "nosuchhost.invalid",
        "--",
        "inspect",
    ]);
    if tunelab::fleet::elf::interpreter(&bytes).is_some() {
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains("dynamically linked") && err.contains("--allow-dynamic"),
            "{err}"
        );
        assert!(
            !err.contains("running on"),
            "refused before connecting: {err}"
        );
    }
    // Told to, it goes on (and here fails to reach the host): the binary
    // column says nothing was copied, not "cached".
    let out = env.run(&[
        "remote",
        "--allow-dynamic",
        "--timeout",
        "10s",
        "-o",
        "-o BatchMode=yes -o ConnectTimeout=3",
        "nosuchhost.invalid",
        "--",
        "inspect",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        !text.contains("cached") && !text.contains("copied"),
        "{text}"
    );
}
