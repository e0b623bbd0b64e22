//! Implementations of the domain's ports: DynamoDB and SQS for real, in-memory for unit tests.

pub mod aws;
pub mod dynamodb;
pub mod events;
pub mod faults;
pub mod memory;
pub mod paymos_api;
pub mod secrets;
pub mod sqs;
pub mod webhook;
