//! Tests of starting a program, watching its ready line and reading its rusage.

use super::*;

#[test]
fn words() {
    assert_eq!(
        split_words(r#"grep -e 'a b' "c\"d" e\ f"#).unwrap(),
        ["grep", "-e", "a b", "c\"d", "e f"]
    );
    assert_eq!(split_words("x ''").unwrap(), ["x", ""]);
    assert!(split_words("  ").is_err());
    assert!(split_words("'open").is_err());
    assert_eq!(argv_for("a | b", true).unwrap()[2], "a | b");
}

#[test]
fn signals_by_name() {
    assert_eq!(
        parse_signal("term"),
        Ok(rustix::process::Signal::TERM.as_raw())
    );
    assert_eq!(
        parse_signal("SIGINT"),
        Ok(rustix::process::Signal::INT.as_raw())
    );
    assert_eq!(parse_signal("9"), Ok(9));
    assert!(parse_signal("bogus").is_err());
}

#[test]
fn start_ready_quit_reap() {
    let re = Regex::new("^READY").unwrap();
    let argv: Vec<String> = ["sh", "-c", "echo noise; echo READY >&2; exec sleep 5"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut s = start(&argv, Some(&re), None).unwrap();
    match s.wait_ready(Duration::from_secs(5)) {
        ReadyOutcome::Ready(_, line) => assert_eq!(line, "READY"),
        _ => panic!("no ready line"),
    }
    s.quit(Quit::Signal(rustix::process::Signal::TERM.as_raw()));
    let r = s.reap().unwrap();
    assert_eq!(r.signal, Some(rustix::process::Signal::TERM.as_raw()));
    assert!(r.peak_rss > 0);
    let e = start(&["no-such-cmd-xyz".to_string()], None, None)
        .err()
        .unwrap();
    assert_eq!(e.exit_code(), 2);
}
