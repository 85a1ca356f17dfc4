//! Monitors for the tests: keys, lists in the published form, signatures.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use ed25519_dalek::{Signer, SigningKey};
use serde_json::{json, Value};

use super::{format_utc, sshsig, MonitorKey, NAMESPACE};

/// A monitor's signing key, from a seed so runs repeat.
pub(super) struct Monitor {
    pub(super) signing: SigningKey,
    pub(super) name: String,
}

impl Monitor {
    pub(super) fn new(seed: u8, name: &str) -> Monitor {
        Monitor {
            signing: SigningKey::from_bytes(&[seed; 32]),
            name: name.to_string(),
        }
    }

    pub(super) fn key(&self) -> MonitorKey {
        MonitorKey::from_ed25519(self.signing.verifying_key().to_bytes(), &self.name)
    }

    /// An armored SSHSIG over `document` in `namespace`.
    pub(super) fn sign_in(&self, namespace: &str, document: &[u8]) -> Vec<u8> {
        let sig = self.signing.sign(&sshsig::signed_data(namespace, document));
        sshsig::armor(
            &self.signing.verifying_key().to_bytes(),
            namespace,
            &sig.to_bytes(),
        )
        .into_bytes()
    }

    pub(super) fn sign(&self, document: &[u8]) -> Vec<u8> {
        self.sign_in(NAMESPACE, document)
    }
}

/// A listed server: name, key byte, operator, addresses.
#[derive(Clone, Debug)]
pub(super) struct Server {
    pub(super) name: String,
    pub(super) key: [u8; 32],
    pub(super) operator: Option<String>,
    pub(super) addresses: Vec<String>,
}

impl Server {
    pub(super) fn new(n: u8, operator: Option<&str>) -> Server {
        Server {
            name: format!("server-{n}"),
            key: [n; 32],
            operator: operator.map(str::to_string),
            addresses: alloc::vec![format!("10.0.0.{n}:2002")],
        }
    }

    pub(super) fn json(&self, note: &str) -> Value {
        let mut v = json!({
            "name": self.name,
            "version": 1,
            "publicKeyType": "ed25519",
            "publicKey": base64::Engine::encode(&crate::report::B64, self.key),
            "addresses": self.addresses.iter().map(|a| json!({"protocol": "udp", "address": a})).collect::<Vec<_>>(),
            "measured": { "note": note },
        });
        if let Some(o) = &self.operator {
            v["operator"] = json!(o);
        }
        v
    }
}

/// A published list.
pub(super) fn document(
    monitor: &str,
    sequence: u64,
    published: i64,
    expires: i64,
    servers: &[Server],
) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "servers": servers.iter().map(|s| s.json(monitor)).collect::<Vec<_>>(),
        "reports": "https://reports.example/",
        "observatory": {
            "monitor": monitor,
            "sequence": sequence,
            "published": format_utc(published),
            "expires": format_utc(expires),
        },
    }))
    .unwrap()
}
