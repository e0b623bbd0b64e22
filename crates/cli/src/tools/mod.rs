//! The merchant's tools behind the `paymos-inbox` command line: a simulated Paymos sender, the
//! six-step idempotency check and reconciliation, and the stack's alarm states for the console.
//! They use the library's own signing, ledger and transitions; nothing is implemented twice.

pub mod alarms;
pub mod bench_e2e;
pub mod check;
pub mod exceptions;
pub mod handoff;
pub mod send;
pub mod soak;
pub mod when;
