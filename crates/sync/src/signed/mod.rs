//! Signed server lists: lists published by monitors (`gnomon watch
//! --publish-key`), fetched by URL and believed only under pinned keys,
//! k of n (gnomon_protocol::signed_list holds the rules; here the
//! fetching, the keys as given, and what sync keeps of them).
//!
//! ```text
//!  servers-key (text or .pub) ──▶ keys ──▶ Pins (threshold k)
//!  servers-url ──▶ fetch::fetch ──▶ per URL Accepted | NotAccepted, merged k of n
//! ```

pub mod fetch;
pub mod monitors;
pub mod store;

pub use crate::config::keys::{key_name, load_key, pins};
pub use fetch::{fetch, signature_url, Fetch, Fetched, NotAccepted};
pub use monitors::{judged_now, Kept, Monitors, Standing};

#[cfg(test)]
pub(crate) mod testing;
#[cfg(test)]
mod tests;
