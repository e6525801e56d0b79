//! Save fixture runs into a test environment's store. Included with
//! `#[path = "common/store.rs"] mod store;` beside `mod common;`.

use tunelab::model::run::Run;
use tunelab::store::Store;

use crate::common::Env;

pub fn store(env: &Env, runs: &[Run]) {
    let mut s = Store::open(&env.db()).unwrap();
    for r in runs {
        s.save(r).unwrap();
    }
}
