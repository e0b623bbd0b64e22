//! The wire: what arrives from Paymos and travels between the functions, read exactly as sent.
//! The signature over the raw bytes, the event envelope, and the work item ingest hands to
//! fulfil. Nothing here knows a rule of money.

pub mod envelope;
pub mod signature;
pub mod work;
