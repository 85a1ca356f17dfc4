//! Sentences for the errors of server lists and malfeasance reports.
//!
//! These reach people (`gnomon query --servers`, `gnomon sync`, `gnomon
//! verify-report`, the report sink's answers), who should read what is
//! wrong with their file, not the name of an enum variant.

use core::fmt;

use crate::report::{EntryError, ReportParseError, Unverifiable};
use crate::serverlist::{AddressError, ListError, Unusable};

impl fmt::Display for ListError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ListError::Json { line, column } => {
                write!(f, "not valid JSON (line {line}, column {column})")
            }
            ListError::NotAnObject => f.write_str("the top level is not a JSON object"),
            ListError::NoServers => f.write_str("there is no `servers` array"),
            ListError::WrongType("servers") => f.write_str("`servers` is not an array"),
            ListError::WrongType("sources") => {
                f.write_str("`sources` is not an array of URL strings")
            }
            ListError::WrongType(key) => write!(f, "`{key}` is not a string"),
        }
    }
}

impl fmt::Display for Unusable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unusable::NotAnObject => f.write_str("the entry is not a JSON object"),
            Unusable::Missing(key) => write!(f, "it has no `{key}`"),
            Unusable::WrongType("addresses") => f.write_str("`addresses` is not an array"),
            Unusable::WrongType("version") => {
                f.write_str("`version` is neither a number nor a version string")
            }
            Unusable::WrongType(key) => write!(f, "`{key}` is not a string"),
            Unusable::KeyType => f.write_str("`publicKeyType` is neither ed25519 nor ml-dsa-44"),
            Unusable::KeyEncoding => f.write_str("`publicKey` is neither base64 nor hex"),
            Unusable::KeyLength(scheme, n) => write!(
                f,
                "`publicKey` is {n} bytes long; an {scheme} key has {}",
                scheme.public_len()
            ),
            Unusable::UnknownVersion(v) => {
                write!(
                    f,
                    "`version` {v:#010x} is not a Roughtime version gnomon knows"
                )
            }
            Unusable::BadVersion => f.write_str("`version` is not a version gnomon knows"),
            Unusable::NoAddress(None) => f.write_str("it lists no address"),
            Unusable::NoAddress(Some(e)) => write!(f, "no usable address: {e}"),
        }
    }
}

impl fmt::Display for AddressError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AddressError::Shape => "an address is not an object with `protocol` and `address`",
            AddressError::Protocol => "`protocol` is neither udp nor tcp",
            AddressError::MissingPort => "the address has no :port",
            AddressError::Port => "the port is not a number from 0 to 65535",
            AddressError::EmptyHost => "the host is empty",
            AddressError::UnbracketedIpv6 => {
                "an IPv6 address must be in brackets: [2001:db8::1]:2002"
            }
            AddressError::Brackets => "the brackets of an IPv6 address do not match",
            AddressError::Ipv6 => "the text in brackets is not an IPv6 address",
            AddressError::ZoneId => "an IPv6 zone (%eth0) has no place in a list",
            AddressError::Ipv4 => "digits and dots that are not an IPv4 address",
            AddressError::Hostname => "the host is not a valid DNS name",
        })
    }
}

/// ` in entry N of responses`, or nothing at the top level.
struct Where(Option<usize>);

impl fmt::Display for Where {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            // Counted from 1, as verify-report numbers its rows.
            Some(i) => write!(f, " in entry {} of `responses`", i + 1),
            None => Ok(()),
        }
    }
}

impl fmt::Display for ReportParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReportParseError::Json { line, column } => {
                write!(f, "not valid JSON (line {line}, column {column})")
            }
            ReportParseError::NotAnObject => f.write_str("the top level is not a JSON object"),
            ReportParseError::Missing { entry, field } => {
                write!(f, "`{field}` is missing{}", Where(*entry))
            }
            ReportParseError::WrongType { entry, field } => {
                write!(f, "`{field}` has the wrong JSON type{}", Where(*entry))
            }
            ReportParseError::Base64 { entry, field } => {
                write!(f, "`{field}` of entry {entry} is not base64")
            }
            ReportParseError::TooManyEntries => {
                write!(
                    f,
                    "more than {} entries in `responses`",
                    crate::report::MAX_REPORT_ENTRIES
                )
            }
            ReportParseError::LegacyLengths => {
                f.write_str("the old form's `nonces` and `responses` differ in length")
            }
        }
    }
}

impl fmt::Display for EntryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EntryError::PublicKeyLength(n) => write!(
                f,
                "`publicKey` is {n} bytes long; keys are 32 (Ed25519) or 1312 (ML-DSA-44) bytes"
            ),
            // The reasons are worded by the client (describe_verify_error),
            // which knows what to tell a user about each.
            EntryError::Verify(_) => f.write_str("the response does not verify"),
        }
    }
}

impl fmt::Display for Unverifiable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unverifiable::LegacyForm => f.write_str(
                "a report of the old form (drafts before 12) names no keys and holds no \
                 requests: nothing in it can be verified",
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use alloc::string::ToString;

    use super::*;

    #[test]
    fn sentences_not_variant_names() {
        let all = [
            ListError::WrongType("servers").to_string(),
            Unusable::Missing("publicKey").to_string(),
            ReportParseError::Missing {
                entry: None,
                field: "responses",
            }
            .to_string(),
            ReportParseError::WrongType {
                entry: Some(2),
                field: "request",
            }
            .to_string(),
        ];
        assert_eq!(all[0], "`servers` is not an array");
        assert_eq!(all[2], "`responses` is missing");
        assert_eq!(
            all[3],
            "`request` has the wrong JSON type in entry 3 of `responses`"
        );
        for s in &all {
            assert!(!s.contains("WrongType") && !s.contains("Missing"), "{s}");
            assert!(!s.contains('{') && !s.contains('('), "{s}");
        }
    }
}
