//! paymos-inbox's domain: pure rules and use cases. No AWS or Lambda types, no runtime and no
//! clock here; the outside world is reached through the port traits each use case declares, and
//! (feature `testkit`) their in-memory twins.
//!
//! The folders are the layers, each importing only those above it in this list:
//! [`wire`] (signatures, envelopes, work items), [`money`] (the rules of money and the write
//! vocabulary), [`roads`] (the use cases), and [`testkit`]. [`port`] is the ports' shared
//! error, below them all. Every path names its layer (`paymos_inbox_core::money::write`), so
//! an import says where it reaches; `src/tests/layers.rs` fails on an upward import or a circle.

pub mod money;
pub mod port;
pub mod roads;
pub mod wire;

#[cfg(any(test, feature = "testkit"))]
pub mod testkit;

#[cfg(test)]
mod tests;
