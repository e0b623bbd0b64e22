//! paymos-inbox's domain: pure rules and use cases. No AWS or Lambda types, no runtime and no
//! clock here; the outside world is reached through the port traits each use case declares, and
//! (feature `testkit`) their in-memory twins.
//!
//! The folders are the layers, each importing only those above it in this list:
//! [`wire`] (signatures, envelopes, work items), [`money`] (the rules of money and the write
//! vocabulary), [`roads`] (the use cases), and [`testkit`]. [`port`] is the ports' shared
//! error. Each module is also re-exported at the crate's root (`paymos_inbox_core::write`).

pub mod money;
pub mod port;
pub mod roads;
pub mod wire;

pub use money::{action, change, effect, invoice, outcome, record, status, write};
pub use roads::{
    confirm, exceptions, fulfil, handoff, ingest, outbound, reconcile, release, sweep,
};
pub use wire::{envelope, signature, work};

#[cfg(any(test, feature = "testkit"))]
pub mod testkit;
#[cfg(any(test, feature = "testkit"))]
pub use testkit::{memory, model, oracle, schemas, world};

#[cfg(test)]
mod tests;
