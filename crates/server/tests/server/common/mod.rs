//! Settings shared by the engine and TCP tests.

use std::time::Duration;

use gnomon_protocol::{Acceptor, ResponderOptions, Version};
use gnomon_server::limit::LimitConfig;
use gnomon_server::worker::WorkerConfig;
use gnomon_server::EngineConfig;

/// Batches of up to `max_batch`, every version, a 5 s stale limit, no
/// grease, no fault, no batch wait, the default limits (loopback is
/// allow-listed).
pub(crate) fn worker_config(max_batch: usize) -> WorkerConfig {
    WorkerConfig {
        max_batch,
        max_queue_delay_us: 5_000_000,
        acceptor: Acceptor::default(),
        options: ResponderOptions {
            batch_disputed: true,
            google_nonce: false,
        },
        vers: vec![Version::RFC, Version::DRAFT_12_TO_19].into(),
        grease_per_million: 0,
        fail_after: None,
        batch_wait_us: 0,
        limit: LimitConfig::default(),
    }
}

/// One worker on `listen`, an hour's keys, no TCP.
pub(crate) fn config(listen: &str, worker: WorkerConfig) -> EngineConfig {
    EngineConfig {
        listen: vec![listen.parse().unwrap()],
        workers: 1,
        recv_buffer: Some(4 << 20),
        worker,
        key_validity: Duration::from_secs(3600),
        key_rotation: Duration::from_secs(1800),
        key_rotation_jitter_percent: 0,
        radius_floor_us: 3_000_000,
        // This machine's kernel may call its clock unsynchronized.
        unsynchronized_radius_us: Some(10_000_000),
        xdp: None,
        tcp: None,
    }
}
