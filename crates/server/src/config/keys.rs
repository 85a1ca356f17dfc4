//! Every configuration key, with its flag, environment variable, accepted
//! values and default. The CLI builds its flags from this table, the file
//! parser names keys from it, and `gnomon config check` prints in its order.

/// How a key's value is written on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// One value: `--batch-size 64`.
    Value,
    /// A boolean: `--batch-disputed` means true, `--batch-disputed=false`.
    Switch,
    /// Repeatable, or comma-separated in one value: `--listen A --listen B`,
    /// `GNOMON_LISTEN=A,B`. A list given by flags or environment replaces
    /// the file's list as a whole.
    List,
}

/// One configuration key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeySpec {
    /// Dotted key as written in the file: `tcp.max-connections` is
    /// `max-connections` in the `[tcp]` table.
    pub key: &'static str,
    /// Long flag without dashes: the key with dots turned to dashes.
    pub flag: &'static str,
    /// Environment variable: `GNOMON_` and the key in upper snake case.
    pub env: &'static str,
    /// Command-line shape.
    pub kind: Kind,
    /// Placeholder for help output.
    pub value_name: &'static str,
    /// Accepted values, as error messages and help print them.
    pub expected: &'static str,
    /// The default, as `gnomon config check` prints it.
    pub default: &'static str,
    /// One-line description.
    pub help: &'static str,
}

use Kind::{List, Switch, Value};

/// Every key, in the order `gnomon config check` prints them.
pub static KEYS: &[KeySpec] = &[
    KeySpec {
        key: "listen",
        flag: "listen",
        env: "GNOMON_LISTEN",
        kind: List,
        value_name: "ADDR:PORT",
        expected: "distinct socket addresses such as 127.0.0.1:5319 or [::1]:5319 (at least one)",
        default: "[\"127.0.0.1:5319\"]",
        help: "Addresses to serve, UDP and (if enabled) TCP",
    },
    KeySpec {
        key: "workers",
        flag: "workers",
        env: "GNOMON_WORKERS",
        kind: Value,
        value_name: "N",
        expected: "an integer in 1..=256",
        default: "the number of available cores",
        help: "Worker threads, each with its own socket per address",
    },
    KeySpec {
        key: "batch-size",
        flag: "batch-size",
        env: "GNOMON_BATCH_SIZE",
        kind: Value,
        value_name: "N",
        expected: "an integer in 1..=1024",
        default: "64",
        help: "Most requests signed together in one batch",
    },
    KeySpec {
        key: "recv-buffer",
        flag: "recv-buffer",
        env: "GNOMON_RECV_BUFFER",
        kind: Value,
        value_name: "BYTES",
        expected: "an integer in 65536..=1073741824 (bytes)",
        default: "4194304",
        help: "Kernel receive buffer per socket, bytes",
    },
    KeySpec {
        key: "max-queue-delay",
        flag: "max-queue-delay",
        env: "GNOMON_MAX_QUEUE_DELAY",
        kind: Value,
        value_name: "DURATION",
        expected: "a duration in 1ms..=1m, such as \"500ms\"",
        default: "\"500ms\"",
        help: "Requests that waited in the socket longer are dropped unanswered",
    },
    KeySpec {
        key: "batch-wait",
        flag: "batch-wait",
        env: "GNOMON_BATCH_WAIT",
        kind: Value,
        value_name: "DURATION",
        expected: "a duration in 0ms..=10ms, such as \"100us\"",
        default: "\"100us\"",
        help: "With less than a full batch read, wait until the oldest request is this old, then read again (one signature for more requests)",
    },
    KeySpec {
        key: "versions",
        flag: "versions",
        env: "GNOMON_VERSIONS",
        kind: List,
        value_name: "VERSION",
        expected: "\"all\", or profile names (google, draft-01 … draft-12, draft-14, rfc-10049) \
         or version numbers (1, 0x8000000b)",
        default: "[\"all\"]",
        help: "Protocol versions answered",
    },
    KeySpec {
        key: "batch-disputed",
        flag: "batch-disputed",
        env: "GNOMON_BATCH_DISPUTED",
        kind: Switch,
        value_name: "BOOL",
        expected: "true or false",
        default: "false",
        help:
            "Batch versions whose Merkle orientation implementations dispute (else one per batch)",
    },
    KeySpec {
        key: "google-nonce",
        flag: "google-nonce",
        env: "GNOMON_GOOGLE_NONCE",
        kind: Switch,
        value_name: "BOOL",
        expected: "true or false",
        default: "false",
        help: "Add a top-level NONC to Google-protocol responses, as Cloudflare does",
    },
    KeySpec {
        key: "min-request-size",
        flag: "min-request-size",
        env: "GNOMON_MIN_REQUEST_SIZE",
        kind: Value,
        value_name: "BYTES",
        expected: "an integer in 256..=1024 (bytes)",
        default: "1024",
        help: "Smallest request datagram answered",
    },
    KeySpec {
        key: "key-file",
        flag: "key-file",
        env: "GNOMON_KEY_FILE",
        kind: List,
        value_name: "FILE",
        expected: "paths of long-term key files made by `gnomon keygen`",
        default: "[] (an ephemeral key, not for production)",
        help: "Long-term key files, one identity each; the first answers requests without SRV",
    },
    KeySpec {
        key: "offline-dir",
        flag: "offline-dir",
        env: "GNOMON_OFFLINE_DIR",
        kind: List,
        value_name: "DIR",
        expected: "paths of directories written by `gnomon delegate`",
        default: "[]",
        help: "Offline delegation directories, one identity each (after the key files)",
    },
    KeySpec {
        key: "metrics",
        flag: "metrics",
        env: "GNOMON_METRICS",
        kind: Value,
        value_name: "ADDR:PORT",
        expected: "a socket address such as 127.0.0.1:9319, or \"off\"",
        default: "\"off\"",
        help: "Serve Prometheus metrics and /health on this address",
    },
    KeySpec {
        key: "grease",
        flag: "grease",
        env: "GNOMON_GREASE",
        kind: Value,
        value_name: "FRACTION",
        expected: "a number in 0.0..=0.5",
        default: "0.0",
        help: "Fraction of responses deliberately broken (RFC 10049 §7)",
    },
    KeySpec {
        key: "clock.radius-floor",
        flag: "clock-radius-floor",
        env: "GNOMON_CLOCK_RADIUS_FLOOR",
        kind: Value,
        value_name: "DURATION",
        expected: "a duration in 1s..=1h, such as \"3s\"",
        default: "\"3s\"",
        help: "Smallest radius advertised; the kernel's error estimate is used when larger",
    },
    KeySpec {
        key: "clock.unsynchronized",
        flag: "clock-unsynchronized",
        env: "GNOMON_CLOCK_UNSYNCHRONIZED",
        kind: Value,
        value_name: "POLICY",
        expected: "\"refuse\" or \"answer-with-radius\"",
        default: "\"answer-with-radius\"",
        help: "What to do while the kernel says the clock is unsynchronized",
    },
    KeySpec {
        key: "clock.unsynchronized-radius",
        flag: "clock-unsynchronized-radius",
        env: "GNOMON_CLOCK_UNSYNCHRONIZED_RADIUS",
        kind: Value,
        value_name: "DURATION",
        expected: "a duration in 1s..=1h, at least clock.radius-floor",
        default: "\"1m\"",
        help: "Radius advertised while unsynchronized (answer-with-radius only)",
    },
    KeySpec {
        key: "online-key.validity",
        flag: "online-key-validity",
        env: "GNOMON_ONLINE_KEY_VALIDITY",
        kind: Value,
        value_name: "DURATION",
        expected: "a duration in 10m..=30d, longer than online-key.rotate-every plus its jitter",
        default: "\"1d\"",
        help: "Validity of each online key's delegation",
    },
    KeySpec {
        key: "online-key.rotate-every",
        flag: "online-key-rotate-every",
        env: "GNOMON_ONLINE_KEY_ROTATE_EVERY",
        kind: Value,
        value_name: "DURATION",
        expected: "a duration in 1m..=30d",
        default: "\"12h\"",
        help: "How often a new online key is minted",
    },
    KeySpec {
        key: "online-key.jitter",
        flag: "online-key-jitter",
        env: "GNOMON_ONLINE_KEY_JITTER",
        kind: Value,
        value_name: "PERCENT",
        expected: "an integer in 0..=50 (percent)",
        default: "10",
        help: "Rotation jitter, percent of the rotation period",
    },
    KeySpec {
        key: "tcp.enable",
        flag: "tcp-enable",
        env: "GNOMON_TCP_ENABLE",
        kind: Switch,
        value_name: "BOOL",
        expected: "true or false",
        default: "true",
        help: "Serve TCP for the versions that define it",
    },
    KeySpec {
        key: "tcp.max-connections",
        flag: "tcp-max-connections",
        env: "GNOMON_TCP_MAX_CONNECTIONS",
        kind: Value,
        value_name: "N",
        expected: "an integer in 1..=1000000",
        default: "1024",
        help: "Open TCP connections at most",
    },
    KeySpec {
        key: "tcp.idle-timeout",
        flag: "tcp-idle-timeout",
        env: "GNOMON_TCP_IDLE_TIMEOUT",
        kind: Value,
        value_name: "DURATION",
        expected: "a duration in 1s..=1h, such as \"30s\"",
        default: "\"30s\"",
        help: "Close a TCP connection idle this long",
    },
    KeySpec {
        key: "tcp.read-timeout",
        flag: "tcp-read-timeout",
        env: "GNOMON_TCP_READ_TIMEOUT",
        kind: Value,
        value_name: "DURATION",
        expected: "a duration in 100ms..=1m, such as \"5s\"",
        default: "\"5s\"",
        help: "Close a TCP connection whose started frame is not complete in this time",
    },
    KeySpec {
        key: "tcp.max-frame",
        flag: "tcp-max-frame",
        env: "GNOMON_TCP_MAX_FRAME",
        kind: Value,
        value_name: "BYTES",
        expected: "an integer in 1024..=65536 (bytes)",
        default: "4096",
        help: "Longest TCP frame body accepted",
    },
    KeySpec {
        key: "log.format",
        flag: "log-format",
        env: "GNOMON_LOG_FORMAT",
        kind: Value,
        value_name: "FORMAT",
        expected: "\"text\" or \"json\"",
        default: "\"text\"",
        help: "Log line format",
    },
    KeySpec {
        key: "log.level",
        flag: "log-level",
        env: "GNOMON_LOG_LEVEL",
        kind: Value,
        value_name: "LEVEL",
        expected: "\"error\", \"warn\", \"info\", \"debug\" or \"trace\"",
        default: "\"info\"",
        help: "Least severe level logged",
    },
];

/// The key named `name` (dotted file key, flag, or environment variable).
pub fn lookup(name: &str) -> Option<&'static KeySpec> {
    KEYS.iter()
        .find(|k| k.key == name || k.flag == name || k.env == name)
}
