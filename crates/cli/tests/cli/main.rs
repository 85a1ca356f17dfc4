//! The cli crate's integration tests, one binary (each module was
//! once a binary of its own): the shared helpers first, then the tests.

mod client_support;
mod fleet_support;
mod https_support;
mod serve_support;
mod ssh_support;
mod sync_support;
mod watch_support;
mod xdp_support;

mod bench_cli;
mod config_cli;
mod defaults;
mod deploy_kubernetes;
mod doc_liar;
mod exit_codes;
mod fleet;
mod grammar;
mod health_cli;
mod hostile_clock;
mod hostile_flood;
mod hostile_http;
mod hostile_tcp;
mod hostile_udp;
mod inspect_cli;
mod minority_liars;
mod now_cli;
mod now_floor;
mod observatory;
mod pkcs11_token;
mod pq_cli;
mod pq_serve;
mod pq_sync_watch;
mod query_cli;
mod query_resolver;
mod query_serve;
mod query_words;
mod relay_proof;
mod reload;
mod report_server;
mod sequence_cli;
mod serve;
mod serve_output;
mod service_database;
mod service_logs;
mod signed_lists;
mod silenced_voters;
mod static_image;
mod sync_chrony;
mod sync_cli;
mod sync_faketime;
mod sync_grammar;
mod sync_list;
mod sync_metrics;
mod sync_service;
mod sync_signed;
mod systemd;
mod tool_grammar;
mod watch_browser;
mod watch_cli;
mod watch_http;
mod watch_publish;
mod watch_states;
mod xdp_netns;

/// Tests that load the machine (floods, load generators, storms of
/// signals, a browser) hold this while they run, so no two of them run at
/// once. As binaries of their own they never met; in one binary two would
/// measure each other rather than the server (seen: a reload under load
/// outlasting its load, a sink's flood refused, the now socket's hostile
/// clients beside a report flood).
pub(crate) fn heavy() -> std::sync::MutexGuard<'static, ()> {
    static HEAVY: std::sync::Mutex<()> = std::sync::Mutex::new(());
    HEAVY.lock().unwrap_or_else(|p| p.into_inner())
}
