//! SQS batch → [`Fulfil`] → batch response. Messages are applied concurrently (bounded); only
//! the ones that failed are reported, so SQS redelivers just those and, after `maxReceiveCount`
//! receives, moves them to the DLQ.

use aws_lambda_events::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent, SqsMessage};
use futures::StreamExt;

use crate::domain::fulfil::{Fulfil, FulfilError, PaymentConfirmation, StateStore};

/// How many messages of one batch are applied at the same time.
pub const CONCURRENCY: usize = 10;

/// Applies every message of the batch and reports the failed ones.
pub async fn handle_batch<S: StateStore, C: PaymentConfirmation>(
    fulfil: &Fulfil<S, C>,
    event: SqsEvent,
    now_ms: u64,
) -> SqsBatchResponse {
    let failures: Vec<BatchItemFailure> = futures::stream::iter(event.records)
        .map(|message| async move { apply_one(fulfil, &message, now_ms).await.err() })
        .buffer_unordered(CONCURRENCY)
        .filter_map(|failure| async move { failure })
        .collect()
        .await;
    let mut response = SqsBatchResponse::default();
    response.batch_item_failures = failures;
    response
}

async fn apply_one<S: StateStore, C: PaymentConfirmation>(
    fulfil: &Fulfil<S, C>,
    message: &SqsMessage,
    now_ms: u64,
) -> Result<(), BatchItemFailure> {
    let message_id = message.message_id.clone().unwrap_or_default();
    let receives = message
        .attributes
        .get("ApproximateReceiveCount")
        .map_or("?", String::as_str);
    let body = message.body.as_deref().unwrap_or_default();
    match fulfil.apply(body.as_bytes(), now_ms).await {
        Ok((envelope, applied)) => {
            tracing::info!(
                event_id = %envelope.event_id,
                event_type = %envelope.event_type,
                resource_id = envelope.resource_id.as_deref().unwrap_or_default(),
                outcome = applied.as_str(),
                "delivery applied"
            );
            Ok(())
        }
        Err(error) => {
            let kind = match &error {
                FulfilError::Poison(_) => "poison",
                FulfilError::Unavailable(_) => "unavailable",
            };
            tracing::error!(message_id, receives, error = kind, reason = %error, "delivery not applied; SQS will redeliver it (then the DLQ)");
            let mut failure = BatchItemFailure::default();
            failure.item_identifier = message_id;
            Err(failure)
        }
    }
}
