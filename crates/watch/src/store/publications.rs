//! What the publisher reads and keeps: its last publication per monitor
//! key (the sequence that must only grow), and what it measured of each
//! server over its window, summed by the database.

use sqlx::Row;

use super::{Store, StoreError};

/// A publication as kept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredPublication {
    /// The monitor key's public half, base64.
    pub monitor_key: String,
    /// The document's `observatory.sequence`.
    pub sequence: u64,
    /// When it was published, µs since the epoch.
    pub published_us: i64,
    /// When it expires, µs since the epoch.
    pub expires_us: i64,
    /// The exact bytes of `/servers.json`.
    pub document: String,
    /// The armored signature, `/servers.json.sig`.
    pub signature: String,
}

/// One server's `probe` rows over a window.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProbeWindow {
    /// Rounds in it.
    pub rounds: u64,
    /// Of those, rounds answered.
    pub answered: u64,
    /// The round trips of the answered rounds, µs, newest first (at most
    /// the `limit` asked for).
    pub rtts_us: Vec<i64>,
    /// Its first answered round ever, µs.
    pub first_seen_us: Option<i64>,
    /// Its last answered round, µs.
    pub last_seen_us: Option<i64>,
}

impl Store {
    /// The last publication under `monitor_key` (base64), if any.
    pub async fn last_publication(
        &self,
        monitor_key: &str,
    ) -> Result<Option<StoredPublication>, StoreError> {
        let row = sqlx::query(
            "SELECT sequence, published_us, expires_us, document, signature FROM publications \
             WHERE monitor_key = $1",
        )
        .bind(monitor_key)
        .fetch_optional(self.pool())
        .await?;
        row.map(|r| {
            let sequence: i64 = r.try_get(0)?;
            Ok(StoredPublication {
                monitor_key: monitor_key.to_string(),
                sequence: u64::try_from(sequence)
                    .map_err(|_| StoreError::Corrupt(format!("publication sequence {sequence}")))?,
                published_us: r.try_get(1)?,
                expires_us: r.try_get(2)?,
                document: r.try_get(3)?,
                signature: r.try_get(4)?,
            })
        })
        .transpose()
    }

    /// Keeps `p` as the last publication of its key. Returns false, and
    /// keeps nothing, when the row there already has a sequence as high:
    /// another process publishing under the same key got there first, and
    /// the lower sequence must not be served.
    pub async fn save_publication(&self, p: &StoredPublication) -> Result<bool, StoreError> {
        let sequence = i64::try_from(p.sequence)
            .map_err(|_| StoreError::Corrupt(format!("publication sequence {}", p.sequence)))?;
        let done = sqlx::query(
            "INSERT INTO publications (monitor_key, sequence, published_us, expires_us, \
             document, signature) VALUES ($1, $2, $3, $4, $5, $6) \
             ON CONFLICT (monitor_key) DO UPDATE SET sequence = excluded.sequence, \
             published_us = excluded.published_us, expires_us = excluded.expires_us, \
             document = excluded.document, signature = excluded.signature \
             WHERE publications.sequence < excluded.sequence",
        )
        .bind(&p.monitor_key)
        .bind(sequence)
        .bind(p.published_us)
        .bind(p.expires_us)
        .bind(&p.document)
        .bind(&p.signature)
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// `server`'s rounds of `check` since `since_us`: how many, how many
    /// answered, the newest `limit` round trips, and its first and last
    /// answer ever.
    pub async fn probe_window(
        &self,
        server: &str,
        check: &str,
        since_us: i64,
        limit: u32,
    ) -> Result<ProbeWindow, StoreError> {
        let counts = sqlx::query(
            "SELECT COUNT(*), SUM(CASE WHEN result = 'ok' THEN 1 ELSE 0 END) FROM observations \
             WHERE server = $1 AND check_name = $2 AND time_us >= $3",
        )
        .bind(server)
        .bind(check)
        .bind(since_us)
        .fetch_one(self.pool())
        .await?;
        let rounds: i64 = counts.try_get(0)?;
        let answered: Option<i64> = counts.try_get(1)?;
        let rtts = sqlx::query(
            "SELECT rtt_us FROM observations WHERE server = $1 AND check_name = $2 \
             AND time_us >= $3 AND result = 'ok' AND rtt_us IS NOT NULL \
             ORDER BY time_us DESC LIMIT $4",
        )
        .bind(server)
        .bind(check)
        .bind(since_us)
        .bind(i64::from(limit))
        .fetch_all(self.pool())
        .await?;
        let span = sqlx::query(
            "SELECT MIN(time_us), MAX(time_us) FROM observations \
             WHERE server = $1 AND check_name = $2 AND result = 'ok'",
        )
        .bind(server)
        .bind(check)
        .fetch_one(self.pool())
        .await?;
        Ok(ProbeWindow {
            rounds: rounds.max(0) as u64,
            answered: answered.unwrap_or(0).max(0) as u64,
            rtts_us: rtts
                .iter()
                .map(|r| r.try_get(0))
                .collect::<Result<_, _>>()?,
            first_seen_us: span.try_get(0)?,
            last_seen_us: span.try_get(1)?,
        })
    }

    /// The reports (id, arrival µs) that accuse `key` (base64) and in
    /// which this monitor judged that key the liar, newest first, at most
    /// `limit`. A report accuses both signers of each contradicting pair;
    /// only the judgment names one.
    pub async fn judged_reports(
        &self,
        key: &str,
        limit: u32,
    ) -> Result<Vec<(String, i64)>, StoreError> {
        let rows = sqlx::query(
            "SELECT r.id, r.received_us FROM report_accused a JOIN reports r ON r.id = a.report_id \
             WHERE a.public_key = $1 AND a.judged = 1 ORDER BY r.received_us DESC, r.id LIMIT $2",
        )
        .bind(key)
        .bind(i64::from(limit))
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
            .collect()
    }
}
