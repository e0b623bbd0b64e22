//! Small helpers to read and write DynamoDB attribute maps without ceremony.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::types::{AttributeValue, ConsumedCapacity};
use aws_smithy_runtime_api::client::result::CreateUnhandledError;

use crate::aws::port_error;
use paymos_inbox_core::roads::ingest::PortError;

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

/// The item under `key` (`name` = the table's hash key), read consistently.
pub(crate) async fn get(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    (name, key): (&str, &str),
) -> Result<Option<Item>, PortError> {
    Ok(client
        .get_item()
        .table_name(table)
        .key(name, s(key))
        .consistent_read(true)
        .send()
        .await
        .map_err(|e| port_error("DynamoDB GetItem", e))?
        .item)
}

/// Every item `query` finds, page after page: the SDK's paginator follows `LastEvaluatedKey`,
/// one request a page, as a hand-written loop would.
pub(crate) async fn query_all(
    query: aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder,
) -> Result<Vec<Item>, PortError> {
    query
        .into_paginator()
        .items()
        .send()
        .try_collect()
        .await
        .map_err(|e| port_error("DynamoDB Query", e))
}

/// Every item of `table` that `filter` (an expression and its string values) keeps, read
/// consistently page by page: for operators' tools and checks, never a hot path.
pub(crate) async fn scan(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    filter: Option<(&str, &[(&str, &str)])>,
) -> Result<Vec<Item>, PortError> {
    let mut request = client.scan().table_name(table).consistent_read(true);
    if let Some((expression, values)) = filter {
        request = request.filter_expression(expression);
        if expression.contains("#status") {
            request = request.expression_attribute_names("#status", "status");
        }
        if expression.contains("#state") {
            request = request.expression_attribute_names("#state", "state");
        }
        for (name, value) in values {
            request = request.expression_attribute_values(*name, s(*value));
        }
    }
    request
        .into_paginator()
        .items()
        .send()
        .try_collect()
        .await
        .map_err(|e| port_error("DynamoDB Scan", e))
}

/// What an adapter's committed writes cost, shared by its clones: the write capacity units
/// DynamoDB reported (`ReturnConsumedCapacity`) and the items written inside transactions.
/// The README's cost table is built from these. DynamoDB reports nothing for a refused write or
/// a cancelled transaction (AWS bills them like the writes they would have been), and DynamoDB
/// Local reports 2 units per table for any transaction, whatever its items, where AWS bills 2
/// per item and KB: so transactions are counted by their items too.
#[derive(Debug, Clone, Default)]
pub struct WriteUnits(Arc<[AtomicU64; 2]>);

impl WriteUnits {
    /// Adds the units of one response.
    pub(crate) fn add<'c>(&self, consumed: impl IntoIterator<Item = &'c ConsumedCapacity>) {
        let units: f64 = consumed
            .into_iter()
            .filter_map(ConsumedCapacity::capacity_units)
            .sum();
        // Kept in thousandths: DynamoDB reports whole or half units.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        self.0[0].fetch_add((units * 1000.0).round() as u64, Ordering::Relaxed);
    }

    /// Counts the items of one committed transaction.
    pub(crate) fn add_transaction_items(&self, items: usize) {
        self.0[1].fetch_add(items as u64, Ordering::Relaxed);
    }

    /// Units DynamoDB reported so far.
    #[must_use]
    pub fn reported(&self) -> f64 {
        #[allow(clippy::cast_precision_loss)]
        let milli = self.0[0].load(Ordering::Relaxed) as f64;
        milli / 1000.0
    }

    /// Items written inside committed transactions so far.
    #[must_use]
    pub fn transaction_items(&self) -> u64 {
        self.0[1].load(Ordering::Relaxed)
    }
}
