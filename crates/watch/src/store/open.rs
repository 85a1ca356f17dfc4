//! Opening the store: what a database URL names in words a user can act
//! on, a first connection that gives up within a bound and says why, and
//! the database's failures told without sqlx's sentences.
//!
//! sqlx's pool retries a connection that fails until its acquire timeout
//! and then reports only that it timed out, losing the cause (a refused
//! port, a wrong password); so the first connection is made alone, bounded
//! here, and its error kept.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::AnyConnection;
use sqlx::{ConnectOptions, Connection};

use super::{Backend, Store, StoreError, ACQUIRE_TIMEOUT, MAX_CONNECTIONS};

/// How long a first connection may take before the open gives up: long
/// enough for a database across a slow network, short enough that a
/// service that cannot start says so while someone is still watching.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a store could not be opened, by what the operator can do about it
/// (and the exit status a command gives it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenCause {
    /// The database did not answer, refused the connection, or refused
    /// this user or database: a service we depend on is unavailable.
    Unavailable,
    /// The SQLite file cannot be created or opened (no such directory,
    /// no permission, not a database file).
    File,
    /// Anything else (migrating the schema failed, say).
    Other,
}

/// A store that did not open: which database, in words, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenError {
    /// [`describe`] of the URL: the SQLite file or the URL without its
    /// password.
    pub database: String,
    /// What went wrong and what to do, in words.
    pub why: String,
    /// What kind of failure it is.
    pub cause: OpenCause,
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot open {}: {}", self.database, self.why)
    }
}

/// The SQLite file a `sqlite:` URL names, made absolute (a relative path
/// is relative to the directory the service runs in, which an operator
/// reading a journal does not know).
fn sqlite_path(rest: &str) -> PathBuf {
    let path = Path::new(rest.split('?').next().unwrap_or(rest));
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// `url` as a user reads it: `the SQLite database /var/lib/gnomon/x.db`,
/// or `the database postgres://gnomon@db.example/gnomon` with the password
/// (in the authority or a `password=` parameter) left out.
pub fn describe(url: &str) -> String {
    match url.strip_prefix("sqlite:") {
        Some(rest) => format!("the SQLite database {}", sqlite_path(rest).display()),
        None => format!("the database {}", without_password(url)),
    }
}

/// What a service says before it opens `url`: which database, and for
/// one across a network how long it will wait for it.
pub fn opening(url: &str) -> String {
    if url.starts_with("sqlite:") {
        format!("opening {}", describe(url))
    } else {
        format!(
            "opening {} (giving up after {} s)",
            describe(url),
            CONNECT_TIMEOUT.as_secs()
        )
    }
}

/// `url` with its password removed: `postgres://user:secret@host/db` is
/// `postgres://user@host/db`, and a `password=` query parameter goes.
pub fn without_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let authority = match authority.rsplit_once('@') {
        Some((user, host)) => {
            let user = user.split(':').next().unwrap_or(user);
            format!("{user}@{host}")
        }
        None => authority.to_string(),
    };
    let tail = match tail.split_once('?') {
        Some((path, query)) => {
            let kept: Vec<&str> = query
                .split('&')
                .filter(|p| !p.to_ascii_lowercase().starts_with("password="))
                .collect();
            if kept.is_empty() {
                path.to_string()
            } else {
                format!("{path}?{}", kept.join("&"))
            }
        }
        None => tail.to_string(),
    };
    format!("{scheme}://{authority}{tail}")
}

/// An I/O error in words, without its `(os error N)`.
fn io_words(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::ConnectionRefused => {
            "the connection was refused (nothing listens there)".into()
        }
        io::ErrorKind::NotFound => "there is no such file or socket".into(),
        io::ErrorKind::PermissionDenied => "permission denied".into(),
        _ => {
            let text = e.to_string();
            text.split(" (os error").next().unwrap_or(&text).to_string()
        }
    }
}

/// A database failure in words: sqlx's own sentences (a pool that "timed
/// out while waiting for an open connection", "error returned from
/// database: (code: 14)") say neither what nor why to an operator.
pub fn explain(e: &sqlx::Error) -> String {
    match e {
        sqlx::Error::PoolTimedOut => format!(
            "no connection to the database within {} s (it stopped answering, or every \
             connection is busy)",
            ACQUIRE_TIMEOUT.as_secs()
        ),
        sqlx::Error::PoolClosed => "the connection to the database is closed".into(),
        sqlx::Error::Io(e) => io_words(e),
        sqlx::Error::Tls(e) => format!("TLS with the database failed: {e}"),
        sqlx::Error::Database(d) => match sqlite_code(d.as_ref()) {
            // SQLite's primary result codes (sqlite3.h).
            Some(5 | 6) => "the database file is locked by another program".into(),
            Some(8) => "the database file is read-only to this user".into(),
            Some(13) => "the disk holding the database is full".into(),
            Some(14) => "the database file cannot be opened".into(),
            Some(26) => "the file is not an SQLite database".into(),
            _ => format!("the database refused: {}", d.message()),
        },
        other => other.to_string(),
    }
}

/// SQLite's primary result code of `d`, when SQLite raised it (sqlx
/// gives the extended code, whose low byte is the primary one).
fn sqlite_code(d: &(dyn sqlx::error::DatabaseError + 'static)) -> Option<i32> {
    d.try_downcast_ref::<sqlx::sqlite::SqliteError>()?;
    Some(d.code()?.parse::<i32>().ok()? & 0xff)
}

/// Why the SQLite file at `path` cannot be opened, read from the file
/// system: the directory that is missing or not writable, or the file
/// that is not a file.
fn sqlite_file_problem(path: &Path, sqlx_words: String) -> String {
    let parent = path.parent().unwrap_or(Path::new("/"));
    if path.is_dir() {
        return format!("{} is a directory; give the path of a file", path.display());
    }
    if !parent.exists() {
        return format!(
            "the directory {} does not exist; create it, or give a path in one that does",
            parent.display()
        );
    }
    if !parent.is_dir() {
        return format!("{} is not a directory", parent.display());
    }
    let test = if path.exists() {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map(drop)
    } else {
        // What SQLite would do first: create the file.
        std::fs::File::create_new(path).map(|_| {
            let _ = std::fs::remove_file(path);
        })
    };
    match test {
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            let what = if path.exists() {
                format!("{} is not writable", path.display())
            } else {
                format!("the directory {} is not writable", parent.display())
            };
            format!(
                "{what} by this user; give it to the user running gnomon, or choose another path"
            )
        }
        Err(e) => io_words(&e),
        Ok(()) => sqlx_words,
    }
}

/// The first connection's error as an [`OpenError`].
fn refused(url: &str, backend: Backend, e: &sqlx::Error) -> OpenError {
    let database = describe(url);
    let words = explain(e);
    match backend {
        Backend::Sqlite => {
            let path = sqlite_path(url.strip_prefix("sqlite:").unwrap_or(url));
            let why = match e {
                sqlx::Error::Database(d) if sqlite_code(d.as_ref()) == Some(14) => {
                    sqlite_file_problem(&path, words)
                }
                _ => words,
            };
            OpenError {
                database,
                why,
                cause: OpenCause::File,
            }
        }
        Backend::Postgres => {
            let hint = match e {
                sqlx::Error::Io(_) | sqlx::Error::Tls(_) => {
                    "; start PostgreSQL there, or correct the host and port of the database URL"
                }
                sqlx::Error::Database(_) => {
                    "; correct the user, password or database name of the URL (the database \
                     must exist: createdb)"
                }
                _ => "",
            };
            OpenError {
                database,
                why: format!("{words}{hint}"),
                cause: OpenCause::Unavailable,
            }
        }
    }
}

/// What every connection runs first.
async fn prepare(conn: &mut AnyConnection, backend: Backend) -> Result<(), sqlx::Error> {
    if backend == Backend::Sqlite {
        // Readers (the web pages) do not wait for the writer.
        sqlx::query("PRAGMA journal_mode = WAL")
            .execute(&mut *conn)
            .await?;
        sqlx::query("PRAGMA foreign_keys = ON")
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

impl Store {
    /// Connects to `url` and migrates the schema to this build's version,
    /// giving up after [`CONNECT_TIMEOUT`] without a first connection.
    ///
    /// `sqlite:PATH` creates the file when it does not exist (a bare
    /// `sqlite:PATH` gets `?mode=rwc`; a URL with its own query is used as
    /// written). `postgres://…` needs the database to exist.
    pub async fn open(url: &str) -> Result<Store, StoreError> {
        Store::open_within(url, CONNECT_TIMEOUT).await
    }

    /// [`Store::open`], giving up after `timeout` without a first
    /// connection (the error says which database and why).
    pub async fn open_within(url: &str, timeout: Duration) -> Result<Store, StoreError> {
        sqlx::any::install_default_drivers();
        let (backend, full) = if let Some(rest) = url.strip_prefix("sqlite:") {
            let full = if rest.contains('?') {
                url.to_string()
            } else {
                format!("{url}?mode=rwc")
            };
            (Backend::Sqlite, full)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            (Backend::Postgres, url.to_string())
        } else {
            return Err(StoreError::Url(url.to_string()));
        };
        let options = AnyConnectOptions::from_str(&full)
            .map_err(|e| {
                StoreError::Open(OpenError {
                    database: describe(url),
                    why: format!("the URL cannot be read ({e})"),
                    cause: OpenCause::Other,
                })
            })?
            // Statements are ours, not the operator's: sqlx would log
            // each (and any slow one) in its own words.
            .disable_statement_logging();
        // Prepared as the pool's will be: a file that is not a database
        // fails only at its first statement, and in the pool that failure
        // would be retried until the acquire timeout and then lost.
        let first = async {
            let mut conn = options.connect().await?;
            let prepared = prepare(&mut conn, backend).await;
            let _ = conn.close().await;
            prepared
        };
        match tokio::time::timeout(timeout, first).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(StoreError::Open(refused(url, backend, &e))),
            Err(_) => {
                return Err(StoreError::Open(OpenError {
                    database: describe(url),
                    why: format!(
                        "no answer within {} s; check that the database runs there and that \
                         no firewall drops the connection",
                        timeout.as_secs_f64()
                    ),
                    cause: OpenCause::Unavailable,
                }))
            }
        }
        let pool = AnyPoolOptions::new()
            .max_connections(MAX_CONNECTIONS)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .after_connect(move |conn, _| Box::pin(prepare(conn, backend)))
            .connect_with(options)
            .await
            .map_err(|e| StoreError::Open(refused(url, backend, &e)))?;
        super::schema::migrator()
            .await
            .map_err(StoreError::Migrate)?
            .run(&pool)
            .await
            .map_err(StoreError::Migrate)?;
        Ok(Store { pool, backend })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_is_said_without_its_password() {
        assert_eq!(
            without_password("postgres://gnomon:s3cret@db.example:5432/watch"),
            "postgres://gnomon@db.example:5432/watch"
        );
        assert_eq!(
            without_password("postgresql://u:p:q@h/d?sslmode=disable&password=x"),
            "postgresql://u@h/d?sslmode=disable"
        );
        assert_eq!(
            without_password("postgres://h/d?password=x"),
            "postgres://h/d"
        );
        assert_eq!(
            without_password("postgres://gnomon@/watch?host=/run/postgresql"),
            "postgres://gnomon@/watch?host=/run/postgresql"
        );
        assert!(describe("sqlite:rel.db").starts_with("the SQLite database /"));
        assert!(describe("sqlite:/var/x.db?mode=ro").ends_with("/var/x.db"));
    }
}
