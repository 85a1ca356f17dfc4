//! The instruction-count gate (docs/COST.md, "The gate"): callgrind counts
//! of the request path's stages, compared with a committed baseline.
//!
//! Instruction counts rather than time: they repeat exactly from run to run
//! and machine to machine of one kind, so a 2 % threshold can be strict
//! without flaking, on a shared CI machine where timings move by 10 %.
pub mod callgrind;
pub mod compare;
pub mod fixture;
pub mod ledger;
pub mod stages;
pub mod versions;
