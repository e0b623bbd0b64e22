//! paymos-inbox's domain: pure rules and use cases. No AWS or Lambda types, no runtime and no
//! clock here; the outside world is reached through the port traits each use case declares, and
//! (feature `testkit`) their in-memory twins.

pub mod change;
pub mod confirm;
pub mod effect;
pub mod envelope;
pub mod exceptions;
pub mod fulfil;
pub mod handoff;
pub mod ingest;
pub mod invoice;
pub mod outbound;
pub mod outcome;
pub mod port;
pub mod reconcile;
pub mod record;
pub mod release;
pub mod signature;
pub mod status;
pub mod sweep;
pub mod work;
pub mod write;

#[cfg(any(test, feature = "testkit"))]
pub mod memory;
#[cfg(any(test, feature = "testkit"))]
pub mod model;
#[cfg(any(test, feature = "testkit"))]
pub mod oracle;
#[cfg(any(test, feature = "testkit"))]
pub mod schemas;
#[cfg(any(test, feature = "testkit"))]
pub mod world;

#[cfg(test)]
mod tests;
