//! The protocol crate's integration tests, one binary (each module was
//! once a binary of its own): the shared helpers first, then the tests.

mod common;
mod corpus_gen;
mod corpus_read;
mod props;
mod vectorfiles;

mod chain_report;
mod corpus;
mod ml_dsa;
mod no_alloc;
mod proof;
mod proptests;
mod proptests_json;
mod proptests_proof;
mod quorum_adversary;
mod requests;
mod roundtrip;
mod serverlist;
mod signed_list;
mod vectors_butterfield;
mod vectors_cloudflare;
mod vectors_draft19;
mod vectors_roughenough;
mod vectors_roughly;
mod vectors_sturdy;
mod vectors_tannerryan_pq;
mod verify_errors;
