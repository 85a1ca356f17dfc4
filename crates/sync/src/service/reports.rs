//! Malfeasance reports sent: each POST on a thread of its own, and the
//! wait for them before a one-shot run exits.

use std::time::{Duration, Instant};

use gnomon_client::{no_reports_url, post_report, reports_url, PostPolicy};

use super::Service;

impl Service {
    /// POST on a thread of its own: the RFC's backoff takes minutes, and
    /// the rounds must not wait for it.
    pub(super) fn send_report(&mut self, body: String) {
        if !self.settings.report {
            return;
        }
        let url = self
            .settings
            .report_url
            .clone()
            .or_else(|| reports_url(&self.list.raw, &self.list.list, self.loopback_reports));
        let Some(url) = url else {
            (self.log)(&format!(
                "a server lied; {}: the report is only kept",
                no_reports_url(&self.list.raw)
            ));
            return;
        };
        let policy = PostPolicy {
            allow_loopback_http: self.loopback_reports,
            ..PostPolicy::default()
        };
        let log = self.log.clone();
        let done = self.reports_done.0.clone();
        let metrics = self.metrics.clone();
        let spawned = std::thread::Builder::new()
            .name("gnomon-report".into())
            .spawn(move || {
                let posted = post_report(&url, &body, &policy);
                metrics.report(posted.is_ok());
                match posted {
                    Ok(p) => log(&format!(
                        "report posted to {url} (HTTP {}, attempt {})",
                        p.status, p.attempts
                    )),
                    Err(e) => log(&format!("report NOT delivered to {url}: {e}")),
                }
                let _ = done.send(());
            });
        match spawned {
            Ok(_) => self.reports_pending += 1,
            Err(e) => (self.log)(&format!("cannot start the report thread: {e}")),
        }
    }

    /// Wait up to `patience` for the reports being sent (before a one-shot
    /// run exits); says when some are left behind.
    pub fn wait_for_reports(&mut self, patience: Duration) {
        let until = Instant::now() + patience;
        while self.reports_pending > 0 {
            let left = until.saturating_duration_since(Instant::now());
            match self.reports_done.1.recv_timeout(left) {
                Ok(()) => self.reports_pending -= 1,
                Err(_) => {
                    (self.log)(&format!(
                        "{} report(s) still being sent; leaving them (they are kept in the state directory)",
                        self.reports_pending
                    ));
                    return;
                }
            }
        }
    }
}
