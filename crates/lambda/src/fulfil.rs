//! SQS batch → [`Fulfil`] → batch response. Messages are applied concurrently (bounded); only
//! the ones that failed are reported, so SQS redelivers just those and, after `maxReceiveCount`
//! receives, moves them to the DLQ.

use aws_lambda_events::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent, SqsMessage};
use futures::StreamExt;
use tracing::Instrument;

use crate::telemetry::metric;
use paymos_inbox_core::change::Applied;

use paymos_inbox_core::confirm::PaymentConfirmation;
use paymos_inbox_core::fulfil::{Fulfil, FulfilError, PoisonError, ResourceStore};
#[cfg(doc)]
use paymos_inbox_core::port::PortErrorKind;
use paymos_inbox_core::work::WorkItem;

/// The `FulfilOutcomes` of a message that was not applied: a message that is not a work item,
/// a store or API failure, and a payment Paymos does not show paid yet.
pub const FAILURE_OUTCOMES: [&str; 3] = ["poison", "retry_unavailable", "retry_not_paid_yet"];

/// How many messages of one batch are applied at the same time.
pub const CONCURRENCY: usize = 10;

/// Applies every message of the batch and reports the failed ones.
pub async fn handle_batch<S: ResourceStore, C: PaymentConfirmation>(
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

async fn apply_one<S: ResourceStore, C: PaymentConfirmation>(
    fulfil: &Fulfil<S, C>,
    message: &SqsMessage,
    now_ms: u64,
) -> Result<(), BatchItemFailure> {
    let message_id = message.message_id.clone().unwrap_or_default();
    let decoded = WorkItem::decode(message.body.as_deref().unwrap_or_default());
    let event_id = decoded
        .as_ref()
        .map_or("unknown", |item| item.event_id.as_str())
        .to_owned();
    // Every line about this message (adapters' warnings included) names the event.
    let span = tracing::info_span!("delivery", event_id = %event_id, message_id = %message_id);
    apply_decoded(fulfil, message, decoded, now_ms)
        .instrument(span)
        .await
        .map_err(|()| {
            let mut failure = BatchItemFailure::default();
            failure.item_identifier = message_id;
            failure
        })
}

async fn apply_decoded<S: ResourceStore, C: PaymentConfirmation>(
    fulfil: &Fulfil<S, C>,
    message: &SqsMessage,
    decoded: Result<WorkItem, paymos_inbox_core::work::WorkItemError>,
    now_ms: u64,
) -> Result<(), ()> {
    let receives = message
        .attributes
        .get("ApproximateReceiveCount")
        .map_or("?", String::as_str);
    let receive_count: u32 = receives.parse().unwrap_or(1);
    let message_id = message.message_id.as_deref().unwrap_or_default();
    let applied = match decoded {
        Ok(item) => apply_retrying(fulfil, &item, now_ms, receive_count, message_id)
            .await
            .map(|a| (item, a)),
        Err(e) => Err(FulfilError::Poison(PoisonError::from(e))),
    };
    record_metrics(&applied, now_ms);
    match applied {
        Ok((_, (envelope, applied))) => {
            let (event_type, resource_id) = envelope
                .as_ref()
                .map(|e| (e.event_type.as_str(), e.resource_id.as_deref()))
                .unwrap_or_default();
            tracing::info!(
                event_type,
                resource_id = resource_id.unwrap_or_default(),
                outcome = applied.as_str(),
                "delivery applied"
            );
            Ok(())
        }
        Err(error) => {
            // A port failure keeps its kind: throttled, unavailable, conflict (all pass with a
            // retry) or misconfigured (fails alike until an operator fixes the stack).
            let kind = match &error {
                FulfilError::Poison(_) => "poison",
                FulfilError::Unavailable(e) => e.kind.as_str(),
                FulfilError::NotYet { .. } => "not_paid_yet",
            };
            if matches!(error, FulfilError::NotYet { .. }) {
                tracing::warn!(receives, error = kind, reason = %error, "delivery not applied yet; SQS redelivers it after the visibility timeout");
            } else if kind == "misconfigured" {
                tracing::error!(receives, error = kind, reason = %error, "delivery not applied: the stack is misconfigured (a missing table, a refused credential); every retry fails alike until it is fixed, then the DLQ");
            } else {
                tracing::error!(receives, error = kind, reason = %error, "delivery not applied; SQS will redeliver it (then the DLQ)");
            }
            Err(())
        }
    }
}

/// Applies one work item, trying a conflict or a throttle again within this invocation, a few
/// times with growing, spread waits ([`PortErrorKind::retry_at_once_ms`]): overload slows
/// fulfil down instead of sending the message round the queue towards its dead-letter queue.
/// A retry is safe: every write is conditional, as for SQS's own redelivery.
async fn apply_retrying<S: ResourceStore, C: PaymentConfirmation>(
    fulfil: &Fulfil<S, C>,
    item: &WorkItem,
    now_ms: u64,
    receives: u32,
    message_id: &str,
) -> Result<(Option<paymos_inbox_core::envelope::Envelope>, Applied), FulfilError> {
    let mut attempt = 0;
    loop {
        let result = fulfil.apply_received(item, now_ms, receives).await;
        let Err(FulfilError::Unavailable(error)) = &result else {
            return result;
        };
        attempt += 1;
        let spread = paymos_inbox_core::outbound::spread_of(message_id, attempt);
        let Some(wait_ms) = error.kind.retry_at_once_ms(attempt, spread) else {
            return result;
        };
        tracing::info!(
            attempt,
            error = error.kind.as_str(),
            wait_ms,
            "trying the delivery again at once"
        );
        tokio::time::sleep(std::time::Duration::from_millis(wait_ms)).await;
    }
}

/// What applying one message gave.
type Applying = Result<
    (
        WorkItem,
        (Option<paymos_inbox_core::envelope::Envelope>, Applied),
    ),
    FulfilError,
>;

fn record_metrics(applied: &Applying, now_ms: u64) {
    let outcome = match applied {
        Ok((_, (_, applied))) => applied.as_str(),
        Err(FulfilError::Poison(_)) => FAILURE_OUTCOMES[0],
        Err(FulfilError::Unavailable(_)) => FAILURE_OUTCOMES[1],
        Err(FulfilError::NotYet { .. }) => FAILURE_OUTCOMES[2],
    };
    metrics::counter!(metric::FULFIL_OUTCOMES, metric::OUTCOME => outcome).increment(1);
    if let Ok((item, (_, applied))) = applied {
        if *applied == Applied::Credited {
            metrics::counter!(metric::DEPOSITS_CREDITED).increment(1);
        }
        if let Some(received) = item.received_at_ms {
            #[allow(clippy::cast_precision_loss)]
            let age = now_ms.saturating_sub(received) as f64;
            metrics::histogram!(metric::DELIVERY_AGE).record(age);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use paymos_inbox_core::memory::MemoryResources;
    use paymos_inbox_core::port::{PortError, PortErrorKind};
    use paymos_inbox_core::write::{Stored, Write};
    use paymos_inbox_testkit::{invoice_paid, live};

    use super::*;

    /// The memory twin, whose first `left` writes meet another writer (or a throttle).
    struct Crowded {
        inner: MemoryResources,
        left: AtomicU32,
        kind: PortErrorKind,
    }

    impl ResourceStore for Crowded {
        async fn write(&self, writes: &[Write]) -> Result<Stored, PortError> {
            let crowded = self
                .left
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
            if crowded {
                return Err(PortError::of_kind(
                    "DynamoDB TransactWriteItems",
                    self.kind,
                    "cancelled: [\"TransactionConflict\"]",
                ));
            }
            self.inner.write(writes).await
        }
    }

    fn batch(invoices: &[&str]) -> SqsEvent {
        let mut event = SqsEvent::default();
        event.records = invoices
            .iter()
            .map(|invoice| {
                let mut message = SqsMessage::default();
                message.message_id = Some(format!("m-{invoice}"));
                message.body =
                    Some(live(&invoice_paid(&format!("evt_{invoice}"), invoice)).encode());
                message
                    .attributes
                    .insert("ApproximateReceiveCount".into(), "1".into());
                message
            })
            .collect();
        event
    }

    // Issue 39: overload slows fulfil down instead of failing messages towards the DLQ: a
    // batch whose writes meet other writers (or throttles) dozens of times is applied whole,
    // each payment fulfilled once, and no message goes back to the queue.
    #[tokio::test]
    async fn conflicts_and_throttles_are_tried_again_at_once_and_nothing_goes_back_to_the_queue() {
        let invoices = ["inv_c1", "inv_c2", "inv_c3", "inv_c4", "inv_c5"];
        for kind in [PortErrorKind::Conflict, PortErrorKind::Throttled] {
            let fulfil = Fulfil::new(Crowded {
                inner: MemoryResources::new(),
                // More failures than messages: most messages meet several.
                left: AtomicU32::new(12),
                kind,
            });
            let response = handle_batch(&fulfil, batch(&invoices), 1_760_000_000_000).await;
            assert!(
                response.batch_item_failures.is_empty(),
                "{kind}: {response:?}"
            );
            assert_eq!(
                fulfil.store().left.load(Ordering::SeqCst),
                0,
                "{kind}: all met"
            );
            let fulfilled: Vec<String> = fulfil
                .store()
                .inner
                .fulfilments()
                .into_iter()
                .map(|(invoice, _)| invoice)
                .collect();
            assert_eq!(fulfilled, invoices, "{kind}: each once");
        }
        // What a retry at once cannot fix goes back to the queue, as before.
        let fulfil = Fulfil::new(Crowded {
            inner: MemoryResources::new(),
            left: AtomicU32::new(1),
            kind: PortErrorKind::Misconfigured,
        });
        let response = handle_batch(&fulfil, batch(&["inv_m1"]), 1_760_000_000_000).await;
        assert_eq!(response.batch_item_failures.len(), 1);
        assert!(fulfil.store().inner.fulfilments().is_empty());
    }
}
