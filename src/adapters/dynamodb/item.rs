//! Small helpers to read and write DynamoDB attribute maps without ceremony.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

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
