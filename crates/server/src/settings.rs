//! What the serving loops follow while they run, as plain data: the
//! worker settings ([`WorkerConfig`], with the VERS lists of each scheme),
//! swapped whole by a reload ([`LiveConfig`]), and the clock state the key
//! thread sets ([`ClockState`]).
//!
//! The UDP workers, the AF_XDP path and the TCP handlers read these; the
//! engine makes them and the key thread writes the clock state. It sits
//! below all of them, so that the key epochs (which take a batch's VERS
//! list) and the TCP side import no loop. `worker` re-exports every item,
//! so `worker::WorkerConfig` and the rest keep their paths.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64};
use std::sync::Arc;

use arc_swap::ArcSwap;
use gnomon_protocol::{Acceptor, ProfileSet, ResponderOptions, Scheme, Version, PROFILES};

use crate::limit::LimitConfig;

/// What workers share with the clock thread: the current radius and
/// whether the server may answer at all.
#[derive(Debug)]
pub struct ClockState {
    /// Radius to advertise, µs.
    pub radius_us: AtomicU64,
    /// False when the clock is unsynchronized and the policy is to refuse.
    pub answering: AtomicBool,
    /// What the kernel last said about synchronization (false when it
    /// could not be asked).
    pub synchronized: AtomicBool,
    /// The errno of the last failed attempt to read the kernel's clock
    /// state, 0 when the last attempt succeeded.
    pub read_error: AtomicI32,
}

impl ClockState {
    /// A state answering with `radius_us`.
    pub fn new(radius_us: u64) -> ClockState {
        ClockState {
            radius_us: AtomicU64::new(radius_us),
            answering: AtomicBool::new(true),
            synchronized: AtomicBool::new(true),
            read_error: AtomicI32::new(0),
        }
    }
}

/// Per-worker settings.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkerConfig {
    /// Largest batch read and answered at once.
    pub max_batch: usize,
    /// Requests older than this (kernel receive time to now) are dropped.
    pub max_queue_delay_us: u64,
    /// What requests are accepted.
    pub acceptor: Acceptor,
    /// Responder options.
    pub options: ResponderOptions,
    /// VERS: the versions this server answers, ascending, one list per
    /// signature scheme (an SREP lists only its key's scheme's versions).
    pub vers: VersLists,
    /// Grease (RFC 10049 §7): responses per million sent with a broken
    /// signature. 0 by default.
    pub grease_per_million: u32,
    /// A testing aid, never set from configuration files: the worker fails
    /// with an error once it has received this many datagrams, so the path
    /// that takes the whole process down can be exercised for real.
    pub fail_after: Option<u64>,
    /// When a receive returns less than a full batch, wait until its oldest
    /// request has been queued this long and read again, so one signature
    /// covers more requests at moderate load. 0: answer at once.
    pub batch_wait_us: u64,
    /// Deny and allow lists, rate per source prefix, signature budget.
    pub limit: LimitConfig,
}

/// The versions a server lists in VERS, split by signature scheme once,
/// when the configuration is made, so that a batch picks its identity's
/// list without allocating: an Ed25519 SREP never names 0x90000001, and
/// an ML-DSA-44 one lists exactly the ML-DSA-44 versions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VersLists {
    ed25519: Vec<Version>,
    ml_dsa_44: Vec<Version>,
}

impl VersLists {
    /// `versions` (ascending) split by the scheme of the profile of each;
    /// a number no profile has is listed under Ed25519.
    pub fn new(versions: &[Version]) -> VersLists {
        let scheme = |v: &Version| {
            PROFILES
                .iter()
                .find(|p| p.version == *v)
                .map_or(Scheme::Ed25519, |p| p.scheme)
        };
        let of = |s| {
            versions
                .iter()
                .filter(|v| scheme(v) == s)
                .copied()
                .collect()
        };
        VersLists {
            ed25519: of(Scheme::Ed25519),
            ml_dsa_44: of(Scheme::MlDsa44),
        }
    }

    /// The list for an identity of `scheme`.
    pub fn for_scheme(&self, scheme: Scheme) -> &[Version] {
        match scheme {
            Scheme::Ed25519 => &self.ed25519,
            Scheme::MlDsa44 => &self.ml_dsa_44,
        }
    }
}

impl From<Vec<Version>> for VersLists {
    fn from(versions: Vec<Version>) -> VersLists {
        VersLists::new(&versions)
    }
}

/// What a UDP worker accepts: the configured profiles that go over UDP
/// (never ML-DSA-44: its answer is far larger than any request, docs/PQ.md)
/// and that some identity held now can sign, so a request offering several
/// versions is answered in one that can be.
pub fn udp_acceptor(acceptor: &Acceptor, signable: ProfileSet) -> Acceptor {
    Acceptor {
        profiles: ProfileSet(acceptor.profiles.over_udp().0 & signable.0),
        min_size: acceptor.min_size,
    }
}

/// The settings every worker follows, swapped whole by a configuration
/// reload (`Engine::reload`). A worker loads it once per batch: one atomic
/// load and a pointer comparison, no lock and no allocation.
pub type LiveConfig = Arc<ArcSwap<WorkerConfig>>;

/// A [`LiveConfig`] holding `config`.
pub fn live(config: WorkerConfig) -> LiveConfig {
    Arc::new(ArcSwap::from_pointee(config))
}
