//! The roads: the use cases that move money or report on it, each through the rules of
//! [`crate::money`] and the ports it declares. Ingest records and enqueues; fulfil applies;
//! release, recheck and `mark-paid` are a person's roads; the reconciliation compares with
//! Paymos; the sweep re-sends what was never processed; the reverse check confirms; the
//! hand-off publishes what was decided and delivers it outbound.

pub mod confirm;
pub mod endpoint;
pub mod exceptions;
pub mod fulfil;
pub mod handoff;
pub mod ingest;
pub mod outbound;
pub mod reconcile;
pub mod release;
pub mod sweep;
