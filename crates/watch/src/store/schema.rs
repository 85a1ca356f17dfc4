//! The schema's migrations, embedded in the binary.
//!
//! Listed here by hand rather than with `sqlx::migrate!`: that proc macro
//! compiles a second sqlx, with its SQLite and PostgreSQL drivers and
//! SQLite's C source, for the build host, in every build profile; on CI's
//! two cores that was minutes for one `include_str!`. The versions,
//! descriptions and checksums are what the macro would give, so a database
//! migrated by either is accepted by the other, and the test below fails
//! when a file in `migrations/` is not listed here (or the other way round).

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;

use sqlx::error::BoxDynError;
use sqlx::migrate::{Migration, MigrationSource, MigrationType, Migrator};

/// Every migration: (version, description, SQL), oldest first. The file is
/// `migrations/{version:04}_{description with '_' for ' '}.sql`.
const MIGRATIONS: &[(i64, &str, &str)] = &[
    (
        1,
        "initial",
        include_str!("../../migrations/0001_initial.sql"),
    ),
    (
        2,
        "report quota",
        include_str!("../../migrations/0002_report_quota.sql"),
    ),
    (
        3,
        "judged",
        include_str!("../../migrations/0003_judged.sql"),
    ),
    (
        4,
        "publications",
        include_str!("../../migrations/0004_publications.sql"),
    ),
];

#[derive(Debug)]
struct Embedded;

impl<'s> MigrationSource<'s> for Embedded {
    fn resolve(
        self,
    ) -> Pin<Box<dyn Future<Output = Result<Vec<Migration>, BoxDynError>> + Send + 's>> {
        Box::pin(async {
            Ok(MIGRATIONS
                .iter()
                .map(|&(version, description, sql)| {
                    Migration::new(
                        version,
                        Cow::Borrowed(description),
                        MigrationType::Simple,
                        Cow::Borrowed(sql),
                        false,
                    )
                })
                .collect())
        })
    }
}

/// The migrator for [`MIGRATIONS`].
pub(super) async fn migrator() -> Result<Migrator, sqlx::migrate::MigrateError> {
    Migrator::new(Embedded).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The embedded list and the files in migrations/ are the same set,
    /// with the same contents.
    #[test]
    fn every_file_in_migrations_is_embedded() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
        let mut files: Vec<(String, String)> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| {
                let path = e.unwrap().path();
                let name = path.file_name().unwrap().to_str().unwrap().to_owned();
                (name, std::fs::read_to_string(&path).unwrap())
            })
            .collect();
        files.sort();
        let embedded: Vec<(String, String)> = MIGRATIONS
            .iter()
            .map(|&(version, description, sql)| {
                (
                    format!("{version:04}_{}.sql", description.replace(' ', "_")),
                    sql.to_owned(),
                )
            })
            .collect();
        assert_eq!(
            files.iter().map(|f| &f.0).collect::<Vec<_>>(),
            embedded.iter().map(|f| &f.0).collect::<Vec<_>>(),
            "crates/watch/migrations and store/schema.rs's MIGRATIONS differ"
        );
        assert_eq!(files, embedded);
    }

    /// Versions rise, so the migrator applies them in order.
    #[test]
    fn versions_rise() {
        assert!(MIGRATIONS.windows(2).all(|w| w[0].0 < w[1].0));
    }
}
