use super::*;

fn sample() -> (Vec<&'static str>, Vec<Vec<String>>) {
    let header = vec!["id", "machine", "experiments"];
    let rows = vec![
        vec![
            "20261125T114512-3f9a2c".to_string(),
            "board-1".to_string(),
            "io.record-size io.api mem.latency mem.bandwidth ipc.pipe sched.wakeup".to_string(),
        ],
        vec![
            "20261125T120001-77aa01".to_string(),
            "(none)".to_string(),
            "io.file-read".to_string(),
        ],
    ];
    (header, rows)
}

fn widest(s: &str) -> usize {
    widest_line(s)
}

#[test]
fn a_table_that_fits_keeps_its_natural_layout() {
    let (h, r) = sample();
    let s = Terminal::PIPE.layout(&h, r.clone(), 500);
    assert_eq!(s, natural(&h, r, HEADER_RULE_UTF8, 1));
}

#[test]
fn at_80_columns_long_text_wraps_but_ids_stay_whole() {
    let (h, r) = sample();
    let s = Terminal::PIPE.layout(&h, r, 80);
    assert!(widest(&s) <= 80, "{s}");
    assert!(s.contains("20261125T114512-3f9a2c"), "{s}");
    assert!(s.contains("20261125T120001-77aa01"), "{s}");
    // The long experiment list was wrapped between names, not inside one.
    for name in ["io.record-size", "mem.bandwidth", "sched.wakeup"] {
        assert!(s.contains(name), "{name} split:\n{s}");
    }
}

#[test]
fn too_narrow_for_the_columns_prints_records() {
    let (h, r) = sample();
    let s = Terminal::PIPE.layout(&h, r, 40);
    assert!(widest(&s) <= 40, "{s}");
    assert!(s.contains("id           20261125T114512-3f9a2c"), "{s}");
    assert!(s.contains("machine      (none)"), "{s}");
    assert!(s.contains("experiments  io.record-size io.api"), "{s}");
}

#[test]
fn a_word_wider_than_the_screen_splits_only_at_its_slashes() {
    let long = "/very/long/path/".repeat(6);
    let s = Terminal::PIPE.layout(&["path"], vec![vec![long.clone()]], 30);
    // Pieces end at a '/' and join back into the path.
    let joined: String = s.lines().skip(2).map(str::trim_end).collect();
    assert_eq!(joined, long, "{s}");
    assert!(
        s.lines().skip(2).all(|l| l.trim_end().ends_with('/')),
        "{s}"
    );
}

#[test]
fn wrap_breaks_between_words_only() {
    assert_eq!(wrap("aa bb cc", 5), vec!["aa bb", "cc"]);
    assert_eq!(wrap("abcdefgh x", 3), vec!["abcdefgh", "x"]);
    assert_eq!(wrap("", 3), vec![""]);
}

#[test]
fn run_on_keeps_items_whole_and_the_head_indent() {
    let items: Vec<String> = ["p50=6.28 µs", "p90=7.12 µs", "p99=9.40 µs"]
        .map(String::from)
        .to_vec();
    let s = run_on_at("  round_trip (9 samples):", &items, 4, 40);
    assert_eq!(
        s,
        "  round_trip (9 samples): p50=6.28 µs\n    p90=7.12 µs p99=9.40 µs\n"
    );
    // Off a terminal: one line, exactly as before.
    let s = run_on_at("x:", &items, 4, usize::MAX);
    assert_eq!(s, "x: p50=6.28 µs p90=7.12 µs p99=9.40 µs\n");
}

#[test]
fn one_rule_under_the_header_and_nothing_else() {
    let rows = vec![vec!["a".into(), "1".into()], vec!["b".into(), "2".into()]];
    let s = Terminal::PIPE.layout(&["k", "v"], rows, 80);
    let rules = s.lines().filter(|l| l.contains('─')).count();
    assert_eq!(rules, 1, "{s}");
    assert_eq!(s.lines().count(), 4, "header, rule, two rows:\n{s}");
}

#[test]
fn repeated_leading_cells_are_folded() {
    let r = |a: &str, b: &str, c: &str| vec![a.to_string(), b.to_string(), c.to_string()];
    let f = fold(vec![
        r("fs", "type", "ext4"),
        r("fs", "opts", "rw"),
        r("cpu", "opts", "rw"),
    ]);
    assert_eq!(f[1], r("", "opts", "rw"));
    // A cell is folded only with every cell to its left.
    assert_eq!(f[2], r("cpu", "opts", "rw"));
}

#[test]
fn long_words_split_at_their_break_points_only() {
    assert_eq!(
        split_word("/sys/block/sda/queue/scheduler", 16),
        vec!["/sys/block/sda/", "queue/scheduler"]
    );
    assert_eq!(
        split_word("mem.bandwidth_huge", 8),
        vec!["mem.bandwidth_huge"]
    );
    // No break within 6 of "relatime,x": that piece stays whole.
    assert_eq!(split_long("rw,relatime,x y", 6), "rw,\nrelatime,x y");
}

#[test]
fn a_first_column_naming_groups_goes_above_its_rows() {
    let r = |a: &str, b: &str, c: &str| vec![a.to_string(), b.to_string(), c.to_string()];
    let params = "mode=direct record=128 KiB size=32 MiB queue=deep";
    let rows = fold(vec![
        r(params, "write_throughput_nofsync", "1270 MiB/s"),
        r(params, "read_throughput", "736 MiB/s"),
        r(
            "mode=cached record=4 KiB",
            "read_throughput",
            "2.1 GiB/s\n(cached)",
        ),
    ]);
    let s = Terminal::PIPE.layout(&["params", "metric", "median"], rows, 50);
    assert!(widest(&s) <= 50, "{s}");
    let lines: Vec<&str> = s.lines().collect();
    // Header, rule, then each group's name above its rows, one line a row.
    assert_eq!(lines.len(), 2 + 1 + 2 + 1 + 2, "{s}");
    assert!(
        lines[0].contains("metric") && !lines[0].contains("params"),
        "{s}"
    );
    assert_eq!(lines[2], params, "{s}");
    assert!(
        lines[3].contains("write_throughput_nofsync") && lines[3].contains("1270"),
        "{s}"
    );
    assert!(
        lines[4].contains("read_throughput") && lines[4].contains("736"),
        "{s}"
    );
    assert_eq!(lines[5], "mode=cached record=4 KiB", "{s}");
    assert!(
        lines[6].contains("2.1 GiB/s") && lines[7].contains("(cached)"),
        "{s}"
    );
    // Rows whose first cells are all distinct are not groups: no change.
    let (h, rows) = sample();
    assert!(grouped::grouped(&h, &rows, 50, HEADER_RULE_UTF8).is_none());
}

#[test]
fn grouped_rows_wrap_under_their_header_when_they_must() {
    let r = |a: &str, b: &str, c: &str, d: &str| {
        vec![a.to_string(), b.to_string(), c.to_string(), d.to_string()]
    };
    let rows = fold(vec![
        r(
            "io.record-size record=4 KiB",
            "write_throughput",
            "0.799× … 1.04×",
            "inconclusive (suspect)",
        ),
        r(
            "io.record-size record=4 KiB",
            "read_throughput",
            "0.847× … 1.03×",
            "improved",
        ),
    ]);
    let s = Terminal::PIPE.layout(&["result", "metric", "95% CI", "verdict"], rows, 40);
    assert!(widest(&s) <= 40, "{s}");
    let lines: Vec<&str> = s.lines().collect();
    assert!(lines[0].starts_with("metric"), "{s}");
    assert_eq!(lines[2], "io.record-size record=4 KiB", "{s}");
    // Each row's verdict starts in the header's verdict column.
    let at = |l: &str, w: &str| l.find(w).map(|b| l[..b].chars().count());
    assert_eq!(at(lines[3], "inconclusive"), at(lines[0], "verdict"), "{s}");
    assert!(s.contains("(suspect)"), "{s}");
}
