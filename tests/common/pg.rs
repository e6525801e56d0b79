//! A private schema on the PostgreSQL test server (`TUNELAB_TEST_PG`),
//! dropped on drop. Shared by the integration tests (tests/common) and the
//! store's unit tests (included there with `#[path]`).

/// A schema of its own on the test server.
pub struct PgSchema {
    server: String,
    name: String,
}

impl PgSchema {
    /// None when `TUNELAB_TEST_PG` is unset (the caller says it skips).
    pub fn new() -> Option<PgSchema> {
        let server = std::env::var("TUNELAB_TEST_PG")
            .ok()
            .filter(|u| !u.is_empty())?;
        let name = format!("tl_test_{:08x}", rand::random::<u32>());
        let mut c = postgres::Client::connect(&server, postgres::NoTls)
            .unwrap_or_else(|e| panic!("TUNELAB_TEST_PG is set but {e}"));
        c.batch_execute(&format!("CREATE SCHEMA {name}")).unwrap();
        Some(PgSchema { server, name })
    }

    /// What a user passes to `--db`: the server with this schema in use.
    pub fn url(&self) -> String {
        let sep = if self.server.contains('?') { '&' } else { '?' };
        format!(
            "{}{sep}options=-c%20search_path%3D{}",
            self.server, self.name
        )
    }
}

impl Drop for PgSchema {
    fn drop(&mut self) {
        if let Ok(mut c) = postgres::Client::connect(&self.server, postgres::NoTls) {
            let _ = c.batch_execute(&format!("DROP SCHEMA {} CASCADE", self.name));
        }
    }
}
