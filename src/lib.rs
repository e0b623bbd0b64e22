//! paymos-inbox: a receiver for Paymos payment webhooks on AWS Lambda.
//!
//! ```text
//! Paymos ──POST──▶ ingest (function URL) ──▶ deliveries table (once per event_id)
//!                         └──▶ SQS ──▶ fulfil ──▶ state table (once per inv_/wdr_/pcd_)
//! ```
//! - [`domain`]: signatures, envelopes, state machines and the use cases, behind port traits.
//! - [`adapters`]: DynamoDB and SQS implementations of the ports, and in-memory fakes.
//! - [`lambda`]: trigger translation only (function URL request, SQS batch).
//! - [`config`]: settings read once at start-up, with errors that say what to set.
//! - `local` (feature `devkit`): local emulators for the test suite and `paymos-inbox dev`.
//! - [`tools`]: reconciliation and the operator's exceptions (run by Lambdas too) and, with
//!   `devkit`, the sender simulator, `check`, the soak and the end-to-end bench.

pub mod adapters;
pub mod config;
pub mod domain;
pub mod lambda;
#[cfg(feature = "devkit")]
pub mod local;
pub mod telemetry;
pub mod tools;

#[cfg(test)]
mod tests;
