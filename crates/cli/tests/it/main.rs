//! Integration tests: one binary, against AWS's DynamoDB Local and the fauxqs SQS emulator
//! (started by the harness on free loopback ports unless AWS_ENDPOINT_URL_DYNAMODB /
//! AWS_ENDPOINT_URL_SQS point at running ones). Nothing here is skipped: if an emulator cannot
//! start, every test that needs it fails and says why.

#![allow(
    clippy::too_many_lines,
    reason = "an emulator test reads top to bottom as one scenario"
)]

mod harness;

mod archive;
mod check;
mod cli;
mod contract;
mod cost;
mod deliver;
mod edges;
mod events;
mod exceptions;
mod fulfil;
mod handoff;
mod hostile;
mod ingest;
mod logs;
mod model;
mod paymos_fake;
mod privileges;
mod reconcile;
mod reverse;
mod soak;
mod template;
mod tools;
mod truth;
mod vectors;
