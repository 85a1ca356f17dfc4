//! Sending a malfeasance report to a list's `reports` URL (RFC 10049's server list JSON
//! and malfeasance report): HTTPS POST, retried with exponential backoff, 10 s × 1.5^(n−1)
//! capped at 24 h.

use core::fmt;
use std::time::Duration;

use gnomon_protocol::report::MEDIA_TYPE;
use gnomon_protocol::ServerList;

use crate::query::Backoff;

/// How to POST.
#[derive(Clone, Copy, Debug)]
pub struct PostPolicy {
    /// Waits between attempts (the RFC's: 10 s, × 1.5, 24 h cap).
    pub backoff: Backoff,
    /// Time for one attempt.
    pub timeout: Duration,
    /// Accept `http://` URLs whose host is 127.0.0.1, ::1 or localhost.
    /// For tests against a local listener only: real lists must use HTTPS.
    pub allow_loopback_http: bool,
}

impl Default for PostPolicy {
    fn default() -> Self {
        PostPolicy {
            backoff: Backoff {
                initial: Duration::from_secs(10),
                factor: 1.5,
                max: Duration::from_secs(86_400),
                attempts: 3,
            },
            timeout: Duration::from_secs(30),
            allow_loopback_http: false,
        }
    }
}

/// A report that was accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Posted {
    /// Attempts made.
    pub attempts: u32,
    /// The accepting status code.
    pub status: u16,
}

/// Why a report was not delivered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PostError {
    /// The URL is not HTTPS (or loopback HTTP when allowed).
    Url(String),
    /// The server refused it with a client error (4xx other than 408/429),
    /// which retrying will not change.
    Refused {
        /// Status code.
        status: u16,
        /// Attempts made.
        attempts: u32,
    },
    /// The server answered with a redirect, which is not followed.
    Redirected {
        /// Status code (3xx).
        status: u16,
        /// Where it pointed, when it said.
        location: Option<String>,
    },
    /// Every attempt failed.
    GaveUp {
        /// Attempts made.
        attempts: u32,
        /// The last failure.
        last: String,
    },
}

impl fmt::Display for PostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PostError::Url(u) => write!(f, "refusing to send a report to {u}: not an HTTPS URL"),
            PostError::Refused { status, attempts } => {
                write!(
                    f,
                    "the report was refused with HTTP {status} (attempt {attempts})"
                )
            }
            PostError::Redirected { status, location } => write!(
                f,
                "the report endpoint redirected (HTTP {status}) to {}; redirects are not followed",
                location.as_deref().unwrap_or("an unnamed location")
            ),
            PostError::GaveUp { attempts, last } => {
                write!(
                    f,
                    "the report was not delivered after {attempts} attempt(s): {last}"
                )
            }
        }
    }
}

impl std::error::Error for PostError {}

/// POST `report_json` to `url` as `application/roughtime-malfeasance+json`.
pub fn post_report(url: &str, report_json: &str, policy: &PostPolicy) -> Result<Posted, PostError> {
    if !url_allowed(url, policy.allow_loopback_http) {
        return Err(PostError::Url(url.to_string()));
    }
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(policy.timeout))
        .http_status_as_error(false)
        .max_redirects(0)
        .build()
        .into();
    let attempts = policy.backoff.attempts.max(1);
    let mut last = String::new();
    for n in 1..=attempts {
        match agent
            .post(url)
            .header("Content-Type", MEDIA_TYPE)
            .send(report_json)
        {
            Ok(resp) => {
                let status = resp.status().as_u16();
                if (200..300).contains(&status) {
                    return Ok(Posted {
                        attempts: n,
                        status,
                    });
                }
                if (300..400).contains(&status) {
                    let location = resp
                        .headers()
                        .get("location")
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_string);
                    return Err(PostError::Redirected { status, location });
                }
                if (400..500).contains(&status) && status != 408 && status != 429 {
                    return Err(PostError::Refused {
                        status,
                        attempts: n,
                    });
                }
                last = format!("HTTP {status}");
            }
            Err(e) => last = http_words(&e),
        }
        if n < attempts {
            std::thread::sleep(policy.backoff.delay(n));
        }
    }
    Err(PostError::GaveUp { attempts, last })
}

/// Why an HTTP exchange failed, in words rather than ureq's ("io:
/// Connection refused (os error 111)").
fn http_words(e: &ureq::Error) -> String {
    match e {
        ureq::Error::Io(io) => crate::error::io_words(io),
        ureq::Error::Timeout(_) => "timed out".into(),
        ureq::Error::HostNotFound => "the host name does not resolve".into(),
        ureq::Error::ConnectionFailed => "the connection failed".into(),
        ureq::Error::BadUri(why) => format!("not a usable URL ({why})"),
        other => crate::error::plain(&other.to_string()),
    }
}

fn url_allowed(url: &str, loopback_http: bool) -> bool {
    let lower = url.to_ascii_lowercase();
    if lower.starts_with("https://") {
        return true;
    }
    let Some(rest) = lower.strip_prefix("http://") else {
        return false;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => authority.split(':').next().unwrap_or(""),
    };
    loopback_http && matches!(host, "127.0.0.1" | "::1" | "localhost")
}

/// The list's `reports` URL. The list parser keeps only HTTPS; with
/// `allow_loopback_http` a loopback `http://` URL in the raw document is
/// taken too (tests).
pub fn reports_url(
    list_json: &[u8],
    list: &ServerList,
    allow_loopback_http: bool,
) -> Option<String> {
    if let Some(u) = &list.reports {
        return Some(u.clone());
    }
    if !allow_loopback_http {
        return None;
    }
    let doc: serde_json::Value = serde_json::from_slice(list_json).ok()?;
    let url = doc.get("reports")?.as_str()?;
    url_allowed(url, true).then(|| url.to_string())
}

/// Why [`reports_url`] found nothing, in a sentence: a list that names an
/// `http://` URL must hear that, not that it names none.
pub fn no_reports_url(list_json: &[u8]) -> String {
    let doc: Option<serde_json::Value> = serde_json::from_slice(list_json).ok();
    match doc.as_ref().and_then(|d| d.get("reports")) {
        None => "the list names no `reports` URL".into(),
        Some(serde_json::Value::String(u)) => format!(
            "the list's `reports` URL {u:?} is not HTTPS, and reports are only sent over HTTPS"
        ),
        Some(_) => "the list's `reports` is not a URL string".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_missing_url_is_explained() {
        assert_eq!(no_reports_url(b"{}"), "the list names no `reports` URL");
        let plain = no_reports_url(br#"{"reports":"http://example.net/r"}"#);
        assert!(
            plain.contains("\"http://example.net/r\" is not HTTPS"),
            "{plain}"
        );
        assert!(no_reports_url(br#"{"reports":7}"#).contains("not a URL string"));
    }

    #[test]
    fn only_https_unless_loopback_is_allowed() {
        assert!(url_allowed("https://example.net/r", false));
        assert!(url_allowed("HTTPS://example.net/r", false));
        assert!(!url_allowed("http://example.net/r", true));
        assert!(!url_allowed("http://127.0.0.1:80/r", false));
        assert!(url_allowed("http://127.0.0.1:8080/r", true));
        assert!(url_allowed("http://[::1]:8080/r", true));
        assert!(url_allowed("http://localhost/r", true));
        assert!(!url_allowed("http://127.0.0.1.example.net/r", true));
        assert!(!url_allowed("ftp://127.0.0.1/r", true));
    }

    #[test]
    fn rfc_report_backoff() {
        let b = PostPolicy::default().backoff;
        assert_eq!(b.delay(1), Duration::from_secs(10));
        assert_eq!(b.delay(2), Duration::from_secs(15));
        assert_eq!(b.delay(3), Duration::from_millis(22_500));
        assert_eq!(b.delay(100), Duration::from_secs(86_400));
    }
}
