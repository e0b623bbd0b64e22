//! The merchant's tools behind the `paymos-inbox` command line: a simulated Paymos sender, the
//! six-step idempotency check and reconciliation. They use the library's own signing, ledger
//! and transitions; nothing is implemented twice.

pub mod bench_e2e;
pub mod check;
pub mod exceptions;
pub mod handoff;
pub mod send;
pub mod soak;
pub mod when;
