//! The Lambda binaries as built, against the emulators the developer kit starts. They live in
//! this crate because only its own tests can name its binaries (`CARGO_BIN_EXE_*`); the harness
//! and the fake Paymos API are the emulator suite's own (`crates/cli/tests/it`).

#![allow(
    clippy::too_many_lines,
    reason = "an emulator test reads top to bottom as one scenario"
)]

#[path = "../../../cli/tests/it/harness.rs"]
mod harness;
#[path = "../../../cli/tests/it/paymos_fake.rs"]
#[allow(
    dead_code,
    reason = "the emulator suite's fake API: this suite uses part of it"
)]
mod paymos_fake;

mod binaries;
