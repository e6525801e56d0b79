//! The tunelab binary: everything lives in the library; this only exits with
//! the code the CLI decided.

fn main() {
    std::process::exit(tunelab::cli::main());
}
