//! One module per subcommand.

pub(crate) mod bench;
pub(crate) mod client_out;
pub(crate) mod completions;
pub(crate) mod config;
pub(crate) mod delegate;
pub(crate) mod health;
pub(crate) mod inspect;
pub(crate) mod keygen;
pub(crate) mod logging;
pub(crate) mod now;
pub(crate) mod outcome;
pub(crate) mod query;
pub(crate) mod query_sequence;
pub(crate) mod relay;
pub(crate) mod report_server;
pub(crate) mod serve;
pub(crate) mod service;
pub(crate) mod signed_servers;
pub(crate) mod sync;
pub(crate) mod sync_exit;
pub(crate) mod verify_proof;
pub(crate) mod verify_report;
pub(crate) mod watch;
pub(crate) mod watch_config;
