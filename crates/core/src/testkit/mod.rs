//! The test kit (feature `testkit`): the in-memory twins of every port, the oracle written from
//! Paymos' contract, the generated worlds and scripted histories it judges, and the hand-off's
//! schema check. Never in a Lambda binary's tree.

pub mod memory;
pub mod model;
pub mod oracle;
pub mod schemas;
pub mod world;
