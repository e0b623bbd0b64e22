//! paymos-inbox's developer kit, behind the `paymos-inbox` command line.
//!
//! - [`local`]: local AWS (DynamoDB Local, fauxqs) for the test suite and `paymos-inbox dev`.
//! - [`tools`]: the sender simulator, `check`, the soak, the end-to-end bench, the operator's
//!   exceptions and the hand-off's `events` commands.
//! - [`faults`]: fault injection around the ports, for the soak.
//! - [`words`]: how a count is said to a person ([`counted`]).
//!
//! The domain is `paymos-inbox-core`, the adapters `paymos-inbox-aws`, the Lambda functions
//! `paymos-inbox-lambda`.

pub mod faults;
pub mod local;
pub mod tools;
pub mod words;

pub use words::counted;
