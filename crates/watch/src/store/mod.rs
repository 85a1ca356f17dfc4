//! The database behind watch and the report sink.
//!
//! One schema (`migrations/`, embedded in the binary: schema.rs)
//! runs on SQLite, the default (one file, created and migrated on first
//! start), and on PostgreSQL, for several monitors or many users sharing
//! one store. Every query is written once, for sqlx's `Any` driver, with
//! `$1`-style parameters (SQLite reads `$1` as a parameter too) and only
//! BIGINT and TEXT columns, which both backends hand back the same way.
//! Queries are checked at run time, so building needs no database.
//!
//! Times are microseconds since the Unix epoch (UTC), as `i64`.
//!
//! ```no_run
//! # async fn demo() -> Result<(), gnomon_watch::StoreError> {
//! use gnomon_watch::{Observation, ServerRow, Store};
//! let store = Store::open("sqlite:/var/lib/gnomon/watch.db").await?;
//! store
//!     .upsert_server(&ServerRow {
//!         name: "example".into(),
//!         public_key: "base64key".into(),
//!         addresses: r#"[{"protocol":"udp","address":"192.0.2.1:2002"}]"#.into(),
//!         seen_us: 1_700_000_000_000_000,
//!     })
//!     .await?;
//! store
//!     .insert_observation(&Observation::new("example", "rfc", "udp", 1_700_000_000_000_000, "ok"))
//!     .await?;
//! # Ok(()) }
//! ```

mod open;
mod publications;
mod reports;
mod schema;

use std::fmt;
use std::time::Duration;

use sqlx::{AnyPool, Row};

pub use open::{
    describe, explain, opening, without_password, OpenCause, OpenError, CONNECT_TIMEOUT,
};

pub use publications::{ProbeWindow, StoredPublication};

pub use reports::{
    report_id, Cursor, Inserted, NewReport, PageAt, ReportLine, ReportPage, ReportSummary,
    StoredReport, Usage,
};

/// Connections per pool. SQLite serialises writers anyway; PostgreSQL is
/// shared with other monitors, so a watch takes few.
const MAX_CONNECTIONS: u32 = 4;
/// Waiting for a connection (or SQLite's write lock) ends in an error, not
/// a hang.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(10);

/// Which database a [`Store`] talks to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// `sqlite:PATH`.
    Sqlite,
    /// `postgres://…` or `postgresql://…`.
    Postgres,
}

/// Why the store failed.
#[derive(Debug)]
pub enum StoreError {
    /// The URL names no backend we speak.
    Url(String),
    /// The database could not be reached or opened.
    Open(OpenError),
    /// The database refused or failed.
    Db(sqlx::Error),
    /// Migrating the schema failed.
    Migrate(sqlx::migrate::MigrateError),
    /// A stored value is not what the schema promises (hand-edited data).
    Corrupt(String),
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Url(u) => write!(
                f,
                "database URL `{}`: expected sqlite:PATH, postgres://… or postgresql://…",
                without_password(u)
            ),
            StoreError::Open(e) => e.fmt(f),
            StoreError::Db(e) => write!(f, "database: {}", explain(e)),
            StoreError::Migrate(e) => write!(f, "migrating the database: {}", migrate_words(e)),
            StoreError::Corrupt(what) => write!(f, "database holds an invalid value: {what}"),
        }
    }
}

impl std::error::Error for StoreError {}

/// A failed migration in words: a database from a newer build is the one
/// an operator can do something about.
fn migrate_words(e: &sqlx::migrate::MigrateError) -> String {
    use sqlx::migrate::MigrateError as M;
    match e {
        M::Execute(e) | M::ExecuteMigration(e, _) => explain(e),
        M::VersionMissing(v) => format!(
            "it holds migration {v}, which this build does not know: a newer gnomon made it; \
             run that version, or give another database"
        ),
        M::VersionMismatch(v) => format!(
            "its migration {v} differs from this build's: it was changed by hand or by another \
             program; give another database"
        ),
        other => other.to_string(),
    }
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        StoreError::Db(e)
    }
}

/// A server as the watch sees it (from its list).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerRow {
    /// The list's name: the key every observation refers to.
    pub name: String,
    /// Long-term public key, base64 as listed.
    pub public_key: String,
    /// The list entry's `addresses`, JSON as listed.
    pub addresses: String,
    /// When this was seen in the list; the first call sets `first_seen_us`
    /// too, later ones only move `last_seen_us`.
    pub seen_us: i64,
}

/// One check of one server in one version at one time. `(server, version,
/// check, time_us)` is unique: a second insert of the same key is ignored.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Observation {
    /// [`ServerRow::name`]; the server must have been upserted first.
    pub server: String,
    /// The version probed, by profile name ("rfc", "draft-12", "google").
    pub version: String,
    /// The check ("udp", "tcp", "batch", …).
    pub check: String,
    /// When the probe was sent, µs since the epoch.
    pub time_us: i64,
    /// "ok", or a short failure reason (a label, not a sentence).
    pub result: String,
    /// Free text for the history page.
    pub detail: Option<String>,
    /// Round-trip time, µs.
    pub rtt_us: Option<i64>,
    /// Offset of the server's midpoint from the reference, µs.
    pub offset_us: Option<i64>,
    /// RADI, µs.
    pub radius_us: Option<i64>,
    /// Delegation window MINT, µs.
    pub cert_min_us: Option<i64>,
    /// Delegation window MAXT, µs.
    pub cert_max_us: Option<i64>,
    /// The response packet as received.
    pub response: Option<Vec<u8>>,
}

impl Observation {
    /// An observation with only its key and result; set the rest by field.
    pub fn new(server: &str, version: &str, check: &str, time_us: i64, result: &str) -> Self {
        Observation {
            server: server.into(),
            version: version.into(),
            check: check.into(),
            time_us,
            result: result.into(),
            ..Observation::default()
        }
    }
}

/// The database: a small pool, cheap to clone.
#[derive(Clone, Debug)]
pub struct Store {
    pool: AnyPool,
    backend: Backend,
}

impl Store {
    /// Which backend this is.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Closes every connection (waits for queries in flight).
    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// Adds a server, or updates its key, addresses and `last_seen_us`.
    pub async fn upsert_server(&self, s: &ServerRow) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO servers (name, public_key, addresses, first_seen_us, last_seen_us) \
             VALUES ($1, $2, $3, $4, $4) \
             ON CONFLICT (name) DO UPDATE SET public_key = excluded.public_key, \
             addresses = excluded.addresses, last_seen_us = excluded.last_seen_us",
        )
        .bind(&s.name)
        .bind(&s.public_key)
        .bind(&s.addresses)
        .bind(s.seen_us)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Every server, by name, with `seen_us` = its last sighting.
    pub async fn servers(&self) -> Result<Vec<ServerRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT name, public_key, addresses, last_seen_us FROM servers ORDER BY name",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(ServerRow {
                    name: r.try_get(0)?,
                    public_key: r.try_get(1)?,
                    addresses: r.try_get(2)?,
                    seen_us: r.try_get(3)?,
                })
            })
            .collect()
    }

    /// Records an observation. Returns false when one with the same key
    /// was already there (nothing changes then).
    pub async fn insert_observation(&self, o: &Observation) -> Result<bool, StoreError> {
        insert_observation(&self.pool, o).await
    }

    /// Records several observations in one transaction (a round's rows:
    /// one commit, not one each). Returns how many were new.
    pub async fn insert_observations(&self, all: &[Observation]) -> Result<usize, StoreError> {
        let mut tx = self.pool.begin().await?;
        let mut n = 0;
        for o in all {
            n += insert_observation(&mut *tx, o).await? as usize;
        }
        tx.commit().await?;
        Ok(n)
    }

    /// One `check` of `server` in `since_us..=until_us`, summed into
    /// buckets of `bucket_us` by the database: at most (until - since) /
    /// bucket + 1 rows come back however many were recorded, oldest
    /// bucket first.
    pub async fn buckets(
        &self,
        server: &str,
        check: &str,
        (since_us, until_us): (i64, i64),
        bucket_us: i64,
    ) -> Result<Vec<Bucket>, StoreError> {
        // Integer division on both backends; AVG is cast back to BIGINT
        // (PostgreSQL's AVG is NUMERIC, SQLite's REAL).
        let rows = sqlx::query(
            "SELECT MIN(time_us), COUNT(*), SUM(CASE WHEN result = 'ok' THEN 1 ELSE 0 END), \
             CAST(AVG(rtt_us) AS BIGINT), CAST(AVG(offset_us) AS BIGINT), \
             CAST(AVG(radius_us) AS BIGINT) FROM observations \
             WHERE server = $1 AND check_name = $2 AND time_us >= $3 AND time_us <= $5 \
             GROUP BY (time_us - $3) / $4 ORDER BY 1",
        )
        .bind(server)
        .bind(check)
        .bind(since_us)
        .bind(bucket_us.max(1))
        .bind(until_us)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(Bucket {
                    first_us: r.try_get(0)?,
                    count: r.try_get(1)?,
                    ok: r.try_get(2)?,
                    rtt_us: r.try_get(3)?,
                    offset_us: r.try_get(4)?,
                    radius_us: r.try_get(5)?,
                })
            })
            .collect()
    }

    /// The time of `server`'s oldest `check` at or after `since_us`.
    pub async fn first_time(
        &self,
        server: &str,
        check: &str,
        since_us: i64,
    ) -> Result<Option<i64>, StoreError> {
        let row = sqlx::query(
            "SELECT MIN(time_us) FROM observations \
             WHERE server = $1 AND check_name = $2 AND time_us >= $3",
        )
        .bind(server)
        .bind(check)
        .bind(since_us)
        .fetch_one(&self.pool)
        .await?;
        Ok(row.try_get(0)?)
    }

    /// A server's observations with `time_us >= since_us`, oldest first,
    /// at most `limit`.
    pub async fn observations(
        &self,
        server: &str,
        since_us: i64,
        limit: u32,
    ) -> Result<Vec<Observation>, StoreError> {
        let rows = sqlx::query(&format!(
            "{OBSERVATION_COLUMNS} WHERE server = $1 AND time_us >= $2 \
             ORDER BY time_us, version, check_name LIMIT $3"
        ))
        .bind(server)
        .bind(since_us)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(observation_from_row).collect()
    }

    /// The newest observation of every (server, version, check): what the
    /// status page shows.
    pub async fn latest_observations(&self) -> Result<Vec<Observation>, StoreError> {
        let rows = sqlx::query(&format!(
            "{OBSERVATION_COLUMNS} o WHERE time_us = (SELECT MAX(time_us) FROM observations i \
             WHERE i.server = o.server AND i.version = o.version AND i.check_name = o.check_name) \
             ORDER BY server, version, check_name"
        ))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(observation_from_row).collect()
    }

    /// Rows in `table`, for tests and metrics. `table` is one of ours.
    pub async fn count(&self, table: Table) -> Result<i64, StoreError> {
        let sql = format!("SELECT COUNT(*) FROM {}", table.name());
        Ok(sqlx::query(&sql).fetch_one(&self.pool).await?.try_get(0)?)
    }

    pub(crate) fn pool(&self) -> &AnyPool {
        &self.pool
    }
}

/// One bucket of [`Store::buckets`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bucket {
    /// Its oldest row's time.
    pub first_us: i64,
    /// Rows in it.
    pub count: i64,
    /// Of those, rows whose result is "ok".
    pub ok: i64,
    /// Mean round trip of those that have one.
    pub rtt_us: Option<i64>,
    /// Mean offset of those that have one.
    pub offset_us: Option<i64>,
    /// Mean radius of those that have one.
    pub radius_us: Option<i64>,
}

async fn insert_observation<'e>(
    db: impl sqlx::Executor<'e, Database = sqlx::Any>,
    o: &Observation,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "INSERT INTO observations (server, version, check_name, time_us, result, detail, \
         rtt_us, offset_us, radius_us, cert_min_us, cert_max_us, response_hex) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) \
         ON CONFLICT DO NOTHING",
    )
    .bind(&o.server)
    .bind(&o.version)
    .bind(&o.check)
    .bind(o.time_us)
    .bind(&o.result)
    .bind(o.detail.as_deref())
    .bind(o.rtt_us)
    .bind(o.offset_us)
    .bind(o.radius_us)
    .bind(o.cert_min_us)
    .bind(o.cert_max_us)
    .bind(o.response.as_deref().map(hex::encode))
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// The store's tables, for [`Store::count`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Table {
    /// `servers`.
    Servers,
    /// `observations`.
    Observations,
    /// `reports`.
    Reports,
    /// `report_accused`.
    ReportAccused,
    /// `publications`.
    Publications,
}

impl Table {
    fn name(self) -> &'static str {
        match self {
            Table::Servers => "servers",
            Table::Observations => "observations",
            Table::Reports => "reports",
            Table::ReportAccused => "report_accused",
            Table::Publications => "publications",
        }
    }
}

const OBSERVATION_COLUMNS: &str = "SELECT server, version, check_name, time_us, result, detail, \
     rtt_us, offset_us, radius_us, cert_min_us, cert_max_us, response_hex FROM observations";

fn observation_from_row(r: &sqlx::any::AnyRow) -> Result<Observation, StoreError> {
    let response: Option<String> = r.try_get(11)?;
    let response = response
        .map(|h| hex::decode(&h).map_err(|_| StoreError::Corrupt(format!("response_hex {h:?}"))))
        .transpose()?;
    Ok(Observation {
        server: r.try_get(0)?,
        version: r.try_get(1)?,
        check: r.try_get(2)?,
        time_us: r.try_get(3)?,
        result: r.try_get(4)?,
        detail: r.try_get(5)?,
        rtt_us: r.try_get(6)?,
        offset_us: r.try_get(7)?,
        radius_us: r.try_get(8)?,
        cert_min_us: r.try_get(9)?,
        cert_max_us: r.try_get(10)?,
        response,
    })
}
