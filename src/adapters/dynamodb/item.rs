//! Small helpers to read and write DynamoDB attribute maps without ceremony.

use std::collections::HashMap;

use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::types::AttributeValue;
use aws_smithy_runtime_api::client::result::CreateUnhandledError;

use crate::adapters::aws::port_error;
use crate::domain::ingest::PortError;

pub(crate) type Item = HashMap<String, AttributeValue>;

pub(crate) fn s(value: impl Into<String>) -> AttributeValue {
    AttributeValue::S(value.into())
}

pub(crate) fn n(value: impl ToString) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

pub(crate) fn get_s<'i>(item: &'i Item, name: &str) -> Option<&'i str> {
    item.get(name)
        .and_then(|v| v.as_s().ok())
        .map(String::as_str)
}

pub(crate) fn get_u64(item: &Item, name: &str) -> Option<u64> {
    item.get(name)
        .and_then(|v| v.as_n().ok())
        .and_then(|v| v.parse().ok())
}

pub(crate) fn get_b<'i>(item: &'i Item, name: &str) -> Option<&'i [u8]> {
    item.get(name)
        .and_then(|v| v.as_b().ok())
        .map(aws_sdk_dynamodb::primitives::Blob::as_ref)
}

/// A conditional write's answer: done, or refused by its condition (with the service error,
/// which holds the old item when the request asked for it).
pub(crate) enum Conditional<T, E> {
    Done(T),
    Refused(E),
}

/// Splits a conditional write's result: `ConditionalCheckFailedException` is an answer, every
/// other failure a [`PortError`] of its kind.
pub(crate) fn conditional<T, E, R>(
    result: Result<T, SdkError<E, R>>,
    operation: &'static str,
) -> Result<Conditional<T, E>, PortError>
where
    E: ProvideErrorMetadata + CreateUnhandledError + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    match result {
        Ok(done) => Ok(Conditional::Done(done)),
        Err(e)
            if e.as_service_error().and_then(ProvideErrorMetadata::code)
                == Some("ConditionalCheckFailedException") =>
        {
            Ok(Conditional::Refused(e.into_service_error()))
        }
        Err(e) => Err(port_error(operation, e)),
    }
}
