//! The "Examples:" section of every subcommand's `--help` (and man page):
//! the few commands people run most, as they would type them. A test parses
//! each example with the real clap definitions, so none goes stale.

/// (verb, examples as (command line without "tunelab ", what it does)).
pub(crate) const EXAMPLES: &[(&str, &[(&str, &str)])] = &[
    (
        "apply",
        &[
            (
                "apply last --dry-run",
                "what the newest tune run's winner would write, changing nothing",
            ),
            (
                "apply last",
                "keep the winning value across boots (only with a CI-backed improvement)",
            ),
            (
                "apply last --force",
                "keep it although the CI shows no improvement",
            ),
        ],
    ),
    (
        "applied",
        &[
            ("applied", "what tunelab has applied and still holds"),
            (
                "applied --all --json",
                "every change, undone ones too, as data",
            ),
        ],
    ),
    (
        "verify",
        &[
            (
                "verify",
                "live values against the applied ones; exit 5 on drift",
            ),
            ("verify --json", "the same as data"),
        ],
    ),
    (
        "unapply",
        &[
            (
                "unapply all --dry-run",
                "what undoing every change would do",
            ),
            (
                "unapply vm.dirty_background_ratio",
                "remove its file and restore the value from before apply",
            ),
        ],
    ),
    (
        "list",
        &[
            ("list", "every experiment with its summary"),
            (
                "list io.record-size",
                "one experiment: method, parameters, metrics",
            ),
            ("list --json", "the same as data"),
        ],
    ),
    (
        "run",
        &[
            (
                "run io.record-size",
                "the default sweep in the current directory",
            ),
            (
                "run io.record-size -p record=4k,64k,1m -p mode=buffered,direct --target /mnt/data",
                "a 3×2 sweep on another file system",
            ),
            (
                "run mem.latency --trials 5 --label before",
                "fixed trial count, labelled",
            ),
            (
                "run io.file-read --export-json r.json --export-csv r.csv",
                "store the run and also write it to new files",
            ),
        ],
    ),
    (
        "runs",
        &[
            ("runs", "stored runs, newest first"),
            ("runs -n 5", "the five newest"),
            ("runs --json", "as data"),
        ],
    ),
    (
        "show",
        &[
            ("show last", "the newest run: results, environment, notes"),
            ("show last~1 --json", "the one before, as data"),
        ],
    ),
    (
        "compare",
        &[
            (
                "compare last~1 last",
                "before (base) vs after (new): ratios, CIs, verdicts",
            ),
            (
                "compare last~1 last --fail-on-regression",
                "exit 5 on a regression (for CI)",
            ),
            (
                "compare --machine stb-1 --machine stb-2",
                "two devices of a fleet",
            ),
            (
                "compare last~1 last --html cmp.html",
                "the same as an HTML page",
            ),
        ],
    ),
    (
        "export",
        &[
            ("export last", "the newest run as JSON on stdout"),
            (
                "export last -f csv -o last.csv",
                "one row per metric, to a new file",
            ),
            ("export last -f md", "tables for a wiki or a pull request"),
        ],
    ),
    (
        "import",
        &[
            ("import board-run.json", "a run exported on another machine"),
            (
                "import /mnt/usb/results.db",
                "every run of a copied result database",
            ),
        ],
    ),
    (
        "inspect",
        &[
            (
                "inspect",
                "the facts that decide performance, with their source",
            ),
            (
                "inspect --target /mnt/data",
                "including that file system and its disk",
            ),
        ],
    ),
    (
        "advise",
        &[
            ("advise", "findings for this machine and its stored runs"),
            (
                "advise --workload media --target /mnt/data",
                "for media streams on that file system",
            ),
        ],
    ),
    (
        "study",
        &[
            (
                "study quick",
                "a few minutes: the key issues, each with a verdict",
            ),
            (
                "study storage --target /mnt/data",
                "the storage profile on that file system",
            ),
            (
                "study set-top --dry-run",
                "what the profile would run, and how long",
            ),
            (
                "study quick --export-markdown quick.md",
                "also write the verdicts to a new file",
            ),
        ],
    ),
    (
        "tune",
        &[
            (
                "tune vm.dirty_ratio --values 5,10,20 -e io.burst -p mode=direct-write -p duration=2s --trials 12",
                "sweep a sysctl against an experiment; always restored",
            ),
            (
                "tune read_ahead_kb --device sda --values 128,1024 -e io.device-read",
                "a block-queue knob of one disk",
            ),
        ],
    ),
    (
        "restore",
        &[
            ("restore", "put back settings a killed tunelab left changed"),
            (
                "restore --all",
                "also those of tunelab processes still running",
            ),
        ],
    ),
    (
        "completions",
        &[
            (
                "completions bash > /etc/bash_completion.d/tunelab",
                "bash completion",
            ),
            ("completions man", "the tunelab(1) man page on stdout"),
            (
                "completions man --dir man1",
                "tunelab.1 and one page per subcommand (man tunelab-run)",
            ),
        ],
    ),
    (
        "monitor",
        &[
            ("monitor vmstat", "one line per second until Ctrl-C"),
            (
                "monitor hogs -n 5 --count 10",
                "the 5 busiest tasks, 10 samples",
            ),
            (
                "monitor iostat --json --count 3",
                "JSON Lines: one JSON object per sample and line",
            ),
        ],
    ),
    (
        "time",
        &[
            (
                "time -- ls /",
                "start-up to exit of one program, hyperfine-style",
            ),
            (
                "time -c 'gzip -kf f' -c 'zstd -qf f' --shell",
                "two commands compared (-f: the warm-up runs leave f.gz, f.zst)",
            ),
            (
                "time --ready 'listening' -- ./server",
                "time to a line on the program's output, then stop it",
            ),
            (
                "time --export-json t.json -- ls /",
                "also write the result to a new file",
            ),
        ],
    ),
    (
        "memory",
        &[
            (
                "memory -- ls /",
                "RSS, PSS, peak of a program and the system around it",
            ),
            (
                "memory --pid 1234 --for 10s",
                "a running process, sampled for 10 s",
            ),
        ],
    ),
    (
        "report",
        &[
            (
                "report last -o last.html",
                "one self-contained HTML page with charts",
            ),
            (
                "report last --vs last~1 -o before-after.html",
                "with a comparison first",
            ),
            (
                "report last -o last.md",
                "Markdown with the charts as SVG files",
            ),
            (
                "report --machine stb-1 --machine stb-2 -o fleet.html",
                "devices of a fleet side by side",
            ),
        ],
    ),
    (
        "history",
        &[
            (
                "history io.record-size",
                "medians over time and the change points",
            ),
            (
                "history quick --machine stb-1 --fail-on-regression",
                "a study on one device; exit 5 on a regression",
            ),
            ("history io.file-read --html hist.html", "as an HTML page"),
        ],
    ),
    (
        "remote",
        &[
            (
                "remote stb-1 stb-2 -- study quick",
                "run a study on two hosts over ssh",
            ),
            (
                "remote -i fleet/inventory.yml -- study fleet/nightly.toml",
                "every host of an inventory file (fleet/ of the source tree)",
            ),
            (
                "remote --bin target/x86_64-unknown-linux-musl/release stb-1 -- run io.api",
                "with the static binaries from that directory",
            ),
        ],
    ),
    (
        "diagnose",
        &[
            (
                "diagnose --for 10s",
                "what the whole machine waits on for 10 s",
            ),
            ("diagnose --pid 1234 --for 5s", "one process"),
            ("diagnose -- make -j4", "a command from start to exit"),
        ],
    ),
    (
        "boot",
        &[
            (
                "boot --ready 'login:' -- qemu-system-arm -M virt -kernel zImage -nographic",
                "boot time of an emulated board, 5 boots",
            ),
            (
                "boot --serial /dev/ttyUSB0 --reset 'relay-cycle' --ready 'login:'",
                "a real board on its serial console",
            ),
        ],
    ),
];

/// The examples of `verb` as help text.
pub(crate) fn text(verb: &str) -> Option<String> {
    let (_, ex) = EXAMPLES.iter().find(|(v, _)| *v == verb)?;
    let mut s = String::from("Examples:\n");
    for (cmd, what) in ex.iter() {
        s.push_str(&format!("  # {what}\n  tunelab {cmd}\n"));
    }
    if verb == "run" {
        s.push_str(
            "\nExperiments: tunelab list · one experiment's method, parameters and metrics: \
             tunelab list EXP (or tunelab run EXP --help)\n",
        );
    }
    Some(s)
}

/// Add the examples to every subcommand that has some.
pub(crate) fn add(mut cmd: clap::Command) -> clap::Command {
    for (verb, _) in EXAMPLES {
        if let Some(t) = text(verb) {
            cmd = cmd.mut_subcommand(*verb, |c| c.after_help(t));
        }
    }
    cmd
}

/// A man page as clap_mangen renders it, with two sections redone: the
/// SYNOPSIS gives every option with its argument (`-o|--output FILE`, kept
/// on one line), and the help's closing text (the examples, which clap_mangen
/// filed under EXTRA and reflowed, hyphenating "di- rect") becomes EXAMPLES,
/// verbatim (no fill), with minus signs that paste as typed.
#[cfg(feature = "completions")]
pub(crate) fn man_page(roff: &str, cmd: &clap::Command) -> String {
    let mut out = replace_section(roff, "SYNOPSIS", &synopsis(cmd));
    if let Some(text) = cmd.get_after_long_help().or(cmd.get_after_help()) {
        let text = text.to_string();
        if let Some(body) = text.strip_prefix("Examples:\n") {
            let verbatim: String = body
                .lines()
                .map(|l| format!("{}\n", roff_line(l)))
                .collect();
            out = replace_section(
                &out,
                "EXTRA",
                &format!(".SH EXAMPLES\n.nf\n{verbatim}.fi\n"),
            );
        }
    }
    out
}

/// `roff` with the section `name` (from its `.SH` line to the next) replaced.
#[cfg(feature = "completions")]
fn replace_section(roff: &str, name: &str, with: &str) -> String {
    let head = format!(".SH {name}\n");
    let Some(start) = roff.find(&head) else {
        return roff.to_string();
    };
    let rest = &roff[start + head.len()..];
    let end = rest
        .find("\n.SH ")
        .map_or(roff.len(), |i| start + head.len() + i + 1);
    format!("{}{with}{}", &roff[..start], &roff[end..])
}

/// One line of text for roff: backslashes and minus signs escaped, a
/// leading `.` or `'` made literal.
#[cfg(feature = "completions")]
fn roff_line(l: &str) -> String {
    let t = l.replace('\\', "\\e").replace('-', "\\-");
    if t.starts_with('.') || t.starts_with('\'') {
        format!("\\&{t}")
    } else {
        t
    }
}

/// `tunelab run [-p|--param KEY=V]... [--target DIR] … EXP`: every option
/// with its argument, an option and its argument joined by a non-breaking
/// space so the page never splits them.
#[cfg(feature = "completions")]
fn synopsis(cmd: &clap::Command) -> String {
    use clap::ArgAction;
    let name = cmd.get_bin_name().unwrap_or(cmd.get_name());
    let mut parts = vec![format!("\\fB{}\\fR", roff_line(name))];
    for a in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
        let value = || {
            a.get_value_names()
                .map(|v| {
                    v.iter()
                        .map(|s| s.to_string())
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .unwrap_or_else(|| a.get_id().as_str().to_uppercase())
        };
        let many = matches!(a.get_action(), ArgAction::Append | ArgAction::Count);
        let dots = if many { "..." } else { "" };
        if a.is_positional() {
            let v = roff_line(&value());
            parts.push(if a.is_required_set() {
                format!("\\fI{v}\\fR{dots}")
            } else {
                format!("[\\fI{v}\\fR]{dots}")
            });
            continue;
        }
        let flag = match (a.get_short(), a.get_long()) {
            (Some(s), Some(l)) => format!("\\fB\\-{s}\\fR|\\fB\\-\\-{}\\fR", roff_line(l)),
            (Some(s), None) => format!("\\fB\\-{s}\\fR"),
            (None, Some(l)) => format!("\\fB\\-\\-{}\\fR", roff_line(l)),
            (None, None) => continue,
        };
        let takes = matches!(a.get_action(), ArgAction::Set | ArgAction::Append);
        let arg = if takes {
            format!("{flag}\\ \\fI{}\\fR", roff_line(&value()))
        } else {
            flag
        };
        parts.push(if a.is_required_set() {
            format!("{arg}{dots}")
        } else {
            format!("[{arg}]{dots}")
        });
    }
    if cmd.has_subcommands() {
        parts.push("\\fICOMMAND\\fR".to_string());
    }
    format!(".SH SYNOPSIS\n{}\n", parts.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Shell-like splitting of an example ('quoted words' stay one word);
    /// a redirection (`> FILE`) is not part of the command.
    fn words(cmd: &str) -> Vec<String> {
        let mut out = vec!["tunelab".to_string()];
        let mut cur = String::new();
        let mut quoted = false;
        let mut any = false;
        for c in cmd.split('>').next().unwrap_or("").chars() {
            match c {
                '\'' => {
                    quoted = !quoted;
                    any = true;
                }
                ' ' if !quoted => {
                    if any {
                        out.push(std::mem::take(&mut cur));
                        any = false;
                    }
                }
                c => {
                    cur.push(c);
                    any = true;
                }
            }
        }
        if any {
            out.push(cur);
        }
        out
    }

    #[cfg(feature = "completions")]
    #[test]
    fn man_pages_keep_examples_verbatim_and_option_arguments() {
        let mut cmd = crate::cli::command();
        cmd.build();
        let time = cmd
            .find_subcommand("time")
            .cloned()
            .unwrap_or_else(|| panic!("no time"));
        let man = clap_mangen::Man::new(time.clone());
        let mut buf = Vec::new();
        man.render(&mut buf).unwrap();
        let page = man_page(&String::from_utf8(buf).unwrap(), &time);
        assert!(!page.contains(".SH EXTRA"), "{page}");
        let ex = &page[page.find(".SH EXAMPLES").unwrap()..];
        assert!(ex.starts_with(".SH EXAMPLES\n.nf\n"), "{ex}");
        assert!(ex.contains("tunelab time \\-\\- ls /\n"), "{ex}");
        let syn = &page[page.find(".SH SYNOPSIS").unwrap()..page.find(".SH DESCRIPTION").unwrap()];
        assert!(
            syn.contains("\\fB\\-\\-export\\-json\\fR\\ \\fIFILE\\fR"),
            "{syn}"
        );
    }

    #[test]
    fn every_subcommand_has_examples_that_parse() {
        let cmd = crate::cli::command();
        for sub in cmd.get_subcommands() {
            let name = sub.get_name();
            if name.starts_with("__") || sub.is_hide_set() {
                continue;
            }
            assert!(text(name).is_some(), "{name} has no examples");
        }
        for (verb, ex) in EXAMPLES {
            assert!((2..=4).contains(&ex.len()), "{verb}: {} examples", ex.len());
            for (line, _) in ex.iter() {
                assert!(line.starts_with(verb), "{line} is not an example of {verb}");
                let argv = words(line);
                if let Err(e) = crate::cli::command().try_get_matches_from(&argv) {
                    panic!("example `tunelab {line}` does not parse: {e}");
                }
            }
        }
    }
}
