//! The command line against AWS's DynamoDB Local, the fauxqs SQS emulator and moto (the test kit
//! starts them): `check`, `send`, the operator's commands, the soak, the hand-off's `events`
//! commands, and `template.yaml` (what `dev` builds its stack from, and each function's
//! least privilege). Nothing here is skipped: if an emulator cannot start, every test that
//! needs it fails and says why.

#![allow(
    clippy::too_many_lines,
    reason = "an emulator test reads top to bottom as one scenario"
)]

mod alarms;
mod audit;
mod check;
mod cli;
#[path = "../../../core/src/tests/conditions.rs"]
mod conditions;
mod console;
mod deploy_lines;
mod endpoint;
mod exceptions;
mod exits;
mod handoff;
mod privileges;
mod readme;
mod soak;
mod template;
mod tools;
mod version;
