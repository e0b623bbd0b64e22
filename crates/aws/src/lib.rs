//! paymos-inbox's AWS adapters: DynamoDB, SQS, EventBridge, Secrets Manager and the Paymos API
//! behind the domain's ports. The only crate that spells an attribute name or a queue URL.

pub mod aws;
pub mod dynamodb;
pub mod events;
pub mod lambda;
pub mod paymos_api;
pub mod secrets;
pub mod sqs;
pub mod trace;
pub mod webhook;
