//! SQS batch → [`Fulfil`] → batch response. Messages are applied concurrently (bounded); only
//! the ones that failed are reported, so SQS redelivers just those and, after `maxReceiveCount`
//! receives, moves them to the DLQ.

use aws_lambda_events::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent, SqsMessage};
use futures::StreamExt;

use crate::domain::fulfil::{Fulfil, FulfilError, PaymentConfirmation, PoisonError, StateStore};
use crate::domain::work::WorkItem;

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
    let receive_count: u32 = receives.parse().unwrap_or(1);
    let text = message.body.as_deref().unwrap_or_default();
    let applied = match WorkItem::decode(text) {
        Ok(item) => fulfil
            .apply_received(&item, now_ms, receive_count)
            .await
            .map(|a| (item, a)),
        Err(e) => Err(FulfilError::Poison(PoisonError::from(e))),
    };
    match applied {
        Ok((item, (envelope, applied))) => {
            let (event_type, resource_id) = envelope
                .as_ref()
                .map(|e| (e.event_type.as_str(), e.resource_id.as_deref()))
                .unwrap_or_default();
            tracing::info!(
                event_id = %item.event_id,
                event_type,
                resource_id = resource_id.unwrap_or_default(),
                outcome = applied.as_str(),
                "delivery applied"
            );
            Ok(())
        }
        Err(error) => {
            let kind = match &error {
                FulfilError::Poison(_) => "poison",
                FulfilError::Unavailable(_) => "unavailable",
                FulfilError::NotYet { .. } => "not_paid_yet",
            };
            if matches!(error, FulfilError::NotYet { .. }) {
                tracing::warn!(message_id, receives, error = kind, reason = %error, "delivery not applied yet; SQS redelivers it after the visibility timeout");
            } else {
                tracing::error!(message_id, receives, error = kind, reason = %error, "delivery not applied; SQS will redeliver it (then the DLQ)");
            }
            let mut failure = BatchItemFailure::default();
            failure.item_identifier = message_id;
            Err(failure)
        }
    }
}
