//! What Lambda's SQS event source does, for local runs and tests: receive a batch, hand it to
//! the fulfil handler as an `SqsEvent`, delete the messages it did not report failed. Failed
//! ones reappear when `retry` says (dev's: fulfil's own backoff, set on the message as on AWS;
//! [`QueueVisibility`]: the queue's visibility timeout) and reach the DLQ through the queue's
//! redrive.

use std::collections::HashMap;

use aws_lambda_events::sqs::{SqsEvent, SqsMessage, SqsMessageAttribute};
use aws_sdk_sqs::types::{DeleteMessageBatchRequestEntry, MessageSystemAttributeName};

use paymos_inbox_core::roads::confirm::PaymentConfirmation;
use paymos_inbox_core::roads::fulfil::{Fulfil, ResourceStore};
use paymos_inbox_core::roads::outbound::RetryQueue;
#[cfg(doc)]
use paymos_inbox_lambda::fulfil::QueueVisibility;
use paymos_inbox_lambda::fulfil::handle_batch;

/// What one poll did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Polled {
    /// Messages received.
    pub received: usize,
    /// Messages reported failed (left for redelivery).
    pub failed: usize,
}

/// Receives up to `batch_size` messages (waiting up to `wait_secs`) and applies them; a failed
/// one comes back when `retry` sets it to.
///
/// # Errors
/// The SQS error, as text.
pub async fn poll_once<S: ResourceStore, C: PaymentConfirmation, Q: RetryQueue>(
    (sqs, queue_url, retry): (&aws_sdk_sqs::Client, &str, &Q),
    fulfil: &Fulfil<S, C>,
    batch_size: i32,
    wait_secs: i32,
    now_ms: impl Fn() -> u64,
) -> Result<Polled, String> {
    let received = sqs
        .receive_message()
        .queue_url(queue_url)
        .max_number_of_messages(batch_size)
        .wait_time_seconds(wait_secs)
        .message_system_attribute_names(MessageSystemAttributeName::All)
        .message_attribute_names("All")
        .send()
        .await
        .map_err(|e| {
            format!(
                "ReceiveMessage: {}",
                aws_sdk_sqs::error::DisplayErrorContext(e)
            )
        })?
        .messages
        .unwrap_or_default();
    if received.is_empty() {
        return Ok(Polled::default());
    }
    let mut handles = HashMap::new();
    let records: Vec<SqsMessage> = received
        .into_iter()
        .map(|m| {
            let id = m.message_id.clone().unwrap_or_default();
            handles.insert(id.clone(), m.receipt_handle.clone().unwrap_or_default());
            let mut record = SqsMessage::default();
            record.message_id = Some(id);
            record.receipt_handle = m.receipt_handle;
            record.body = m.body;
            record.md5_of_body = m.md5_of_body;
            record.attributes = m
                .attributes
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k.as_str().to_owned(), v))
                .collect();
            record.message_attributes = m
                .message_attributes
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| {
                    let mut attribute = SqsMessageAttribute::default();
                    attribute.data_type = Some(v.data_type);
                    attribute.string_value = v.string_value;
                    (k, attribute)
                })
                .collect();
            record.event_source = Some("aws:sqs".into());
            record
        })
        .collect();
    let total = records.len();
    let mut event = SqsEvent::default();
    event.records = records;
    let response = handle_batch(fulfil, retry, event, now_ms()).await;
    for failure in &response.batch_item_failures {
        handles.remove(&failure.item_identifier);
    }
    if !handles.is_empty() {
        let entries: Vec<_> = handles
            .iter()
            .enumerate()
            .map(|(i, (_, handle))| {
                DeleteMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .receipt_handle(handle)
                    .build()
                    .expect("id and handle are set")
            })
            .collect();
        sqs.delete_message_batch()
            .queue_url(queue_url)
            .set_entries(Some(entries))
            .send()
            .await
            .map_err(|e| {
                format!(
                    "DeleteMessageBatch: {}",
                    aws_sdk_sqs::error::DisplayErrorContext(e)
                )
            })?;
    }
    Ok(Polled {
        received: total,
        failed: response.batch_item_failures.len(),
    })
}
