//! Use-case tests: the domain's use cases on the in-memory ports, table-driven, in
//! milliseconds and with no emulator. What only DynamoDB and SQS can prove (their conditions,
//! the transaction's atomicity, the queue's redelivery) is proven in `crates/aws/tests/emulators` and `crates/lambda/tests/emulators`, which also runs
//! these histories against DynamoDB and asserts the same outcomes.

#![allow(
    clippy::too_many_lines,
    reason = "a use-case test reads top to bottom as one history"
)]

mod allin;
mod conditions;
mod confirm;
mod exceptions;
mod fulfil;
mod heat;
mod ingest;
mod layers;
mod outbound;
mod paymos_word;
mod projects;
mod reconcile;
mod release;
mod schemas;
mod until_a_person;
mod world;
