//! # gnomon-watch
//!
//! The monitor of Roughtime servers: a prober that checks every server of
//! a list on a schedule with the client's own code, the latest state and
//! history it keeps, and the web page, metrics and JSON that show them;
//! and the report sink's database ([`store`]: SQLite by default,
//! PostgreSQL for shared deployments, one schema).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod history;
pub mod http;
pub mod probe;
pub mod publish;
pub mod sink;
pub mod state;
pub mod store;
pub mod view;
pub mod web;

pub use store::{
    report_id, Backend, Inserted, NewReport, Observation, OpenCause, OpenError, ProbeWindow,
    ReportSummary, ServerRow, Store, StoreError, StoredPublication, StoredReport, Table,
};
