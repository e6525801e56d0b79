//! The tunelab binary: everything lives in the library; this only wires
//! the experiment registry into the CLI and exits with the code the CLI
//! decided.

fn main() {
    use tunelab::experiments::registry;
    let experiments = tunelab::engine::catalog::Catalog {
        all: registry::all,
        find: registry::find,
        param_kind: registry::param_kind,
    };
    std::process::exit(tunelab::cli::main(&experiments));
}
