//! One module per subcommand.

pub(crate) mod inspect;
pub(crate) mod query;
pub(crate) mod serve;
pub(crate) mod verify_report;
