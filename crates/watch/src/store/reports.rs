//! Malfeasance reports in the store: insert once (deduplicated by the
//! SHA-256 of the report's canonical content), kept as canonical JSON with
//! its size and the check made on arrival, listed newest first a page at a
//! time, summed per sender for the quotas, and expired by age.

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
    /// The report as canonical JSON (`Report::to_json` of the parsed
    /// body: no padding, no unknown members). Its length is the size the
    /// quotas count.
    pub body: String,
    /// The verdict when received ("malfeasance").
    pub verdict: String,
    /// Entries in the report.
    pub entries: i64,
    /// Contradicting pairs found.
    pub contradictions: i64,
    /// Long-term keys (base64) of the servers it accuses, each once.
    pub accused: Vec<String>,
    /// The check made when it arrived (`check_json`), served by
    /// `/reports/ID/verify`; None for a row stored before it was kept.
    pub check_json: Option<String>,
}

/// A report as stored.
pub type StoredReport = NewReport;

impl NewReport {
    /// The bytes it takes, as the quotas count them: its canonical body
    /// and its stored check.
    pub fn stored_size(&self) -> i64 {
        (self.body.len() + self.check_json.as_ref().map_or(0, String::len)) as i64
    }
}

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

/// One line of an audit page: a report and the keys it accuses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReportLine {
    /// The report.
    pub id: String,
    /// When it arrived.
    pub received_us: i64,
    /// Its verdict when received.
    pub verdict: String,
    /// Bytes stored: the canonical body and the stored check.
    pub size: i64,
    /// The keys it accuses (base64), sorted.
    pub accused: Vec<String>,
    /// Of those, the ones this monitor judged lying ([`Store::mark_judged`]).
    pub judged: Vec<String>,
}

/// A place in the newest-first list of reports: the (arrival time, id) of
/// a line. Its text form is `TIME-ID`, what the pages' links carry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cursor {
    /// The line's `received_us`.
    pub received_us: i64,
    /// The line's id.
    pub id: String,
}

impl Cursor {
    /// The cursor at `line`.
    pub fn at(line: &ReportLine) -> Cursor {
        Cursor {
            received_us: line.received_us,
            id: line.id.clone(),
        }
    }

    /// Reads `TIME-ID` (a decimal time, 64 lowercase hex digits).
    pub fn parse(s: &str) -> Option<Cursor> {
        let (t, id) = s.split_once('-')?;
        let ok = id.len() == 64 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        ok.then_some(())?;
        Some(Cursor {
            received_us: t.parse().ok()?,
            id: id.to_string(),
        })
    }
}

impl std::fmt::Display for Cursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.received_us, self.id)
    }
}

/// Which page of the newest-first list [`Store::reports_page`] reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PageAt {
    /// The newest reports.
    Newest,
    /// The reports just older than the cursor (the next page).
    Before(Cursor),
    /// The reports just newer than the cursor (the previous page).
    After(Cursor),
}

/// A page of the newest-first list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReportPage {
    /// Newest first.
    pub lines: Vec<ReportLine>,
    /// There are older reports (a next page).
    pub older: bool,
    /// There are newer reports (a previous page).
    pub newer: bool,
}

/// Bytes of reports stored: by everyone, and by one sender prefix.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Every report's size, summed.
    pub total: i64,
    /// The sizes of the reports from the prefix asked about.
    pub source: i64,
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
             contradictions, size, check_json) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
             ON CONFLICT DO NOTHING",
        )
        .bind(&r.id)
        .bind(r.received_us)
        .bind(&r.sender_prefix)
        .bind(&r.body)
        .bind(&r.verdict)
        .bind(r.entries)
        .bind(r.contradictions)
        .bind(r.stored_size())
        .bind(r.check_json.as_deref())
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

    /// Marks `key` (base64) as the one this monitor judged lying among
    /// those report `id` accuses; false when the report does not accuse it.
    pub async fn mark_judged(&self, id: &str, key: &str) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE report_accused SET judged = 1 WHERE report_id = $1 AND public_key = $2",
        )
        .bind(id)
        .bind(key)
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected() > 0)
    }

    /// The report with this id.
    pub async fn report(&self, id: &str) -> Result<Option<StoredReport>, StoreError> {
        let Some(row) = sqlx::query(
            "SELECT id, received_us, sender_prefix, body, verdict, entries, contradictions, \
             check_json FROM reports WHERE id = $1",
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
            check_json: row.try_get(7)?,
        }))
    }

    /// Whether a report with this id is stored.
    pub async fn has_report(&self, id: &str) -> Result<bool, StoreError> {
        let row = sqlx::query("SELECT COUNT(*) FROM reports WHERE id = $1")
            .bind(id)
            .fetch_one(self.pool())
            .await?;
        Ok(row.try_get::<i64, _>(0)? > 0)
    }

    /// Bytes of reports stored in all, and from `prefix`. Both sums read
    /// only the (sender_prefix, size) index, never a body.
    pub async fn report_usage(&self, prefix: &str) -> Result<Usage, StoreError> {
        // SUM is NUMERIC on PostgreSQL: cast back to BIGINT for both.
        let total = sqlx::query("SELECT CAST(COALESCE(SUM(size), 0) AS BIGINT) FROM reports")
            .fetch_one(self.pool())
            .await?
            .try_get(0)?;
        let source = sqlx::query(
            "SELECT CAST(COALESCE(SUM(size), 0) AS BIGINT) FROM reports \
             WHERE sender_prefix = $1",
        )
        .bind(prefix)
        .fetch_one(self.pool())
        .await?
        .try_get(0)?;
        Ok(Usage { total, source })
    }

    /// Keeps the check of a report stored without one (its size grows by
    /// the check's).
    pub async fn set_report_check(&self, id: &str, check_json: &str) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE reports SET check_json = $2, size = LENGTH(body) + $3 \
             WHERE id = $1 AND check_json IS NULL",
        )
        .bind(id)
        .bind(check_json)
        .bind(check_json.len() as i64)
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// Deletes every report received before `before_us` (and its
    /// accusations), in one transaction. Returns how many went.
    pub async fn expire_reports(&self, before_us: i64) -> Result<u64, StoreError> {
        let mut tx = self.pool().begin().await?;
        sqlx::query(
            "DELETE FROM report_accused WHERE report_id IN \
             (SELECT id FROM reports WHERE received_us < $1)",
        )
        .bind(before_us)
        .execute(&mut *tx)
        .await?;
        let done = sqlx::query("DELETE FROM reports WHERE received_us < $1")
            .bind(before_us)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(done.rows_affected())
    }

    /// At most `limit` reports of the newest-first list at `at`, each with
    /// the keys it accuses. Whatever anyone sends, every report stays
    /// reachable: the order is arrival (then id), not anything a sender
    /// chooses, and each page links to the next by cursor.
    pub async fn reports_page(&self, at: &PageAt, limit: u32) -> Result<ReportPage, StoreError> {
        let limit = i64::from(limit.max(1));
        let (filter, order) = match at {
            PageAt::Newest => ("", "DESC"),
            PageAt::Before(_) => (
                "WHERE received_us < $2 OR (received_us = $2 AND id < $3)",
                "DESC",
            ),
            PageAt::After(_) => (
                "WHERE received_us > $2 OR (received_us = $2 AND id > $3)",
                "ASC",
            ),
        };
        let sql = format!(
            "SELECT r.id, r.received_us, r.verdict, r.size, a.public_key, a.judged FROM \
             (SELECT id, received_us, verdict, size FROM reports {filter} \
              ORDER BY received_us {order}, id {order} LIMIT $1) r \
             LEFT JOIN report_accused a ON a.report_id = r.id \
             ORDER BY r.received_us {order}, r.id {order}, a.public_key"
        );
        let mut q = sqlx::query(&sql).bind(limit + 1);
        if let PageAt::Before(c) | PageAt::After(c) = at {
            q = q.bind(c.received_us).bind(&c.id);
        }
        let rows = q.fetch_all(self.pool()).await?;
        let mut lines: Vec<ReportLine> = Vec::new();
        for r in &rows {
            let id: String = r.try_get(0)?;
            let key: Option<String> = r.try_get(4)?;
            if lines.last().is_none_or(|l| l.id != id) {
                lines.push(ReportLine {
                    id,
                    received_us: r.try_get(1)?,
                    verdict: r.try_get(2)?,
                    size: r.try_get(3)?,
                    accused: Vec::new(),
                    judged: Vec::new(),
                });
            }
            let judged: Option<i64> = r.try_get(5)?;
            if let (Some(k), Some(l)) = (key, lines.last_mut()) {
                if judged.unwrap_or(0) != 0 {
                    l.judged.push(k.clone());
                }
                l.accused.push(k);
            }
        }
        let more = lines.len() as i64 > limit;
        lines.truncate(limit as usize);
        let mut page = ReportPage::default();
        match at {
            PageAt::Newest => page.older = more,
            PageAt::Before(_) => {
                page.older = more;
                page.newer = true;
            }
            PageAt::After(_) => {
                lines.reverse();
                page.newer = more;
                page.older = true;
            }
        }
        page.lines = lines;
        Ok(page)
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
