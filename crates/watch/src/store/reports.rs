//! Malfeasance reports in the store: insert once (deduplicated by the
//! SHA-256 of the report's canonical content), read back exactly as
//! received, list by accused server.

use gnomon_protocol::Report;
use sha2::{Digest, Sha256};
use sqlx::Row;

use super::{Store, StoreError};

/// A verified report to keep.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewReport {
    /// [`report_id`] of the parsed report.
    pub id: String,
    /// When it arrived, µs since the epoch.
    pub received_us: i64,
    /// The sender's /24 or /48 ("192.0.2.0/24", "2001:db8:1::/48").
    pub sender_prefix: String,
    /// The body exactly as received.
    pub body: String,
    /// The verdict when received ("malfeasance").
    pub verdict: String,
    /// Entries in the report.
    pub entries: i64,
    /// Contradicting pairs found.
    pub contradictions: i64,
    /// Long-term keys (base64) of the servers it accuses, each once.
    pub accused: Vec<String>,
}

/// A report as stored.
pub type StoredReport = NewReport;

/// One line of the audit list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReportSummary {
    /// Accused key (base64).
    pub accused: String,
    /// The report.
    pub id: String,
    /// When it arrived.
    pub received_us: i64,
    /// Its verdict when received.
    pub verdict: String,
}

/// What [`Store::insert_report`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inserted {
    /// Stored.
    New,
    /// A report with the same id was already there; nothing was written.
    Duplicate,
}

/// The report's id and dedup key: lowercase hex SHA-256 over its entries'
/// decoded bytes, each field length-prefixed. Two encodings of the same
/// report (whitespace, key order, base64 padding) get the same id; any
/// change to a request, response, key or rand gets another.
pub fn report_id(report: &Report) -> String {
    let mut h = Sha256::new();
    h.update(b"gnomon report v1\0");
    h.update((report.entries.len() as u64).to_be_bytes());
    for e in &report.entries {
        let rand = e.rand.as_deref();
        h.update([u8::from(rand.is_some())]);
        for field in [rand.unwrap_or(&[]), &e.public_key, &e.request, &e.response] {
            h.update((field.len() as u64).to_be_bytes());
            h.update(field);
        }
    }
    hex::encode(h.finalize())
}

impl Store {
    /// Stores a report and its accusations in one transaction, unless one
    /// with the same id is already there.
    pub async fn insert_report(&self, r: &NewReport) -> Result<Inserted, StoreError> {
        let mut tx = self.pool().begin().await?;
        let done = sqlx::query(
            "INSERT INTO reports (id, received_us, sender_prefix, body, verdict, entries, \
             contradictions) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING",
        )
        .bind(&r.id)
        .bind(r.received_us)
        .bind(&r.sender_prefix)
        .bind(&r.body)
        .bind(&r.verdict)
        .bind(r.entries)
        .bind(r.contradictions)
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 0 {
            return Ok(Inserted::Duplicate);
        }
        for key in &r.accused {
            sqlx::query(
                "INSERT INTO report_accused (report_id, public_key) VALUES ($1, $2) \
                 ON CONFLICT DO NOTHING",
            )
            .bind(&r.id)
            .bind(key)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(Inserted::New)
    }

    /// The report with this id.
    pub async fn report(&self, id: &str) -> Result<Option<StoredReport>, StoreError> {
        let Some(row) = sqlx::query(
            "SELECT id, received_us, sender_prefix, body, verdict, entries, contradictions \
             FROM reports WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(self.pool())
        .await?
        else {
            return Ok(None);
        };
        let accused = sqlx::query(
            "SELECT public_key FROM report_accused WHERE report_id = $1 ORDER BY public_key",
        )
        .bind(id)
        .fetch_all(self.pool())
        .await?
        .iter()
        .map(|r| r.try_get(0))
        .collect::<Result<Vec<String>, _>>()?;
        Ok(Some(NewReport {
            id: row.try_get(0)?,
            received_us: row.try_get(1)?,
            sender_prefix: row.try_get(2)?,
            body: row.try_get(3)?,
            verdict: row.try_get(4)?,
            entries: row.try_get(5)?,
            contradictions: row.try_get(6)?,
            accused,
        }))
    }

    /// Every (accused key, report) pair, by key, newest report first; at
    /// most `limit` lines.
    pub async fn reports_by_accused(&self, limit: u32) -> Result<Vec<ReportSummary>, StoreError> {
        let rows = sqlx::query(
            "SELECT a.public_key, r.id, r.received_us, r.verdict FROM report_accused a \
             JOIN reports r ON r.id = a.report_id \
             ORDER BY a.public_key, r.received_us DESC, r.id LIMIT $1",
        )
        .bind(i64::from(limit))
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|r| {
                Ok(ReportSummary {
                    accused: r.try_get(0)?,
                    id: r.try_get(1)?,
                    received_us: r.try_get(2)?,
                    verdict: r.try_get(3)?,
                })
            })
            .collect()
    }
}
