//! paymos-inbox's developer kit, behind the `paymos-inbox` command line.
//!
//! - [`tools`]: the sender simulator, `check`, the soak, the end-to-end bench, the operator's
//!   exceptions and the hand-off's `events` commands.
//! - [`faults`]: fault injection around the ports, for the soak.
//! - [`words`]: how a count is said to a person ([`counted`]).
//!
//! The domain is `paymos-inbox-core`, the adapters `paymos-inbox-aws`, the Lambda functions
//! `paymos-inbox-lambda`, the local pipeline (`dev`'s emulators and event sources)
//! `paymos-inbox-local`.

pub mod faults;
pub mod tools;
pub mod words;

pub use words::counted;
