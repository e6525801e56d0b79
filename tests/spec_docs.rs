//! The worked example of docs/writing-an-experiment.md is the real,
//! compiled declaration of `test.scripted`: the doc's first rust block must
//! equal the code between the `doc:` markers of its source file.

#[test]
fn the_worked_example_is_the_scripted_experiments_code() {
    let root = env!("CARGO_MANIFEST_DIR");
    let src = std::fs::read_to_string(format!("{root}/src/experiments/test/scripted.rs")).unwrap();
    let doc = std::fs::read_to_string(format!("{root}/docs/writing-an-experiment.md")).unwrap();
    let code = src
        .split_once("// doc:begin\n")
        .and_then(|(_, rest)| rest.split_once("// doc:end"))
        .map(|(code, _)| code.trim_end())
        .expect("doc: markers in scripted.rs");
    let block = doc
        .split_once("```rust\n")
        .and_then(|(_, rest)| rest.split_once("\n```"))
        .map(|(block, _)| block.trim_end())
        .expect("a rust block in the doc");
    assert_eq!(
        block, code,
        "docs/writing-an-experiment.md's example differs from src/experiments/test/scripted.rs"
    );
}
