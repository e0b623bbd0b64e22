//! The domain: pure rules and use cases. No AWS or Lambda types here; the outside world is
//! reached through the port traits each use case declares.

pub mod confirm;
pub mod effect;
pub mod envelope;
pub mod fulfil;
pub mod handoff;
pub mod ingest;
pub mod invoice;
pub mod outbound;
pub mod outcome;
pub mod release;
pub mod signature;
pub mod status;
pub mod sweep;
pub mod work;
