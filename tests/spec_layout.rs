//! The files directly under `src/experiments/<family>/` are exactly the
//! experiments `tunelab list` lists (a file `name.rs` or a folder `name/`
//! for `family.name`, dashes as underscores); helpers live in
//! `src/experiments/common/`, hidden fixtures in `src/experiments/test/`.

use std::collections::BTreeSet;

#[test]
fn family_folders_hold_exactly_the_listed_experiments() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/experiments");
    let listed: BTreeSet<String> = tunelab::experiments::registry::all()
        .iter()
        .map(|e| e.spec().name.replace('-', "_"))
        .collect();
    let mut on_disk = BTreeSet::new();
    for family in std::fs::read_dir(&root).unwrap().flatten() {
        let fam = family.file_name().to_string_lossy().to_string();
        if !family.path().is_dir() || fam == "common" || fam == "test" {
            continue;
        }
        for entry in std::fs::read_dir(family.path()).unwrap().flatten() {
            let name = entry.file_name().to_string_lossy().to_string();
            let stem = match name.strip_suffix(".rs") {
                Some("mod") => continue,
                Some(stem) => stem.to_string(),
                None if entry.path().is_dir() => name,
                None => continue,
            };
            on_disk.insert(format!("{fam}.{stem}"));
        }
    }
    assert_eq!(
        on_disk, listed,
        "a file under a family folder that is not a listed experiment belongs in experiments/common/"
    );
}
