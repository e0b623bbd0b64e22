//! The functions against AWS's DynamoDB Local and the fauxqs SQS emulator (the test kit starts
//! them): each handler as Lambda invokes it (function URL requests, SQS batches, stream
//! records), the signed hand-off against the Standard Webhooks reference verifiers, the
//! official signature vectors, and the binaries as built (only this crate's tests can name
//! them, `CARGO_BIN_EXE_*`). Nothing here is skipped.

#![allow(
    clippy::too_many_lines,
    reason = "an emulator test reads top to bottom as one scenario"
)]

mod archive;
mod binaries;
mod cargo_lambda;
mod deliver;
mod edges;
mod events;
mod fulfil;
mod hostile;
mod ingest;
mod logs;
mod release;
mod sam_local;
mod vectors;
