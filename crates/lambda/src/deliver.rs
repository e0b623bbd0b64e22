//! SQS batch of hand-off events (an EventBridge rule's queue target) → signed Standard Webhooks
//! posts to the merchant's endpoint → batch response. A message the endpoint did not accept is
//! reported failed: SQS redelivers it after the visibility timeout and, after `maxReceiveCount`
//! receives, parks it in the dead-letter queue, whose alarm pages someone.

use aws_lambda_events::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent};
use futures::StreamExt;

use paymos_inbox_core::outbound::{DeliverError, OutboundSecret, WebhookTarget, deliver};

/// How many posts of one batch run at the same time.
pub const CONCURRENCY: usize = 10;

/// Delivers every message of the batch and reports the ones not accepted.
pub async fn handle_batch<T: WebhookTarget>(
    target: &T,
    secret: &OutboundSecret,
    event: SqsEvent,
    now_s: u64,
) -> SqsBatchResponse {
    let failures: Vec<BatchItemFailure> = futures::stream::iter(event.records)
        .map(|message| async move {
            let message_id = message.message_id.clone().unwrap_or_default();
            let body = message.body.as_deref().unwrap_or_default();
            match deliver(target, body, secret, now_s).await {
                Ok(id) => {
                    tracing::info!(webhook_id = %id, "event delivered to the endpoint");
                    None
                }
                Err(DeliverError::Unavailable(error)) if error.is_refused_credential() => {
                    tracing::error!(message_id = %message_id, error = %error, "event not delivered: a refused credential (the endpoint does not accept our signature); every retry fails alike until it does, then the dead-letter queue");
                    Some(failed(message_id))
                }
                Err(error) => {
                    tracing::warn!(message_id = %message_id, error = %error, "event not delivered; retried later, then parked in the dead-letter queue");
                    Some(failed(message_id))
                }
            }
        })
        .buffer_unordered(CONCURRENCY)
        .filter_map(|failure| async move { failure })
        .collect()
        .await;
    let mut response = SqsBatchResponse::default();
    response.batch_item_failures = failures;
    response
}

/// The batch response's entry for a message not delivered.
fn failed(message_id: String) -> BatchItemFailure {
    let mut failure = BatchItemFailure::default();
    failure.item_identifier = message_id;
    failure
}
