//! SQS batch → [`Fulfil`] → batch response. Messages are applied concurrently (bounded); only
//! the ones that failed are reported, each out of sight for as long as its failure asks
//! ([`FulfilError::redelivery_in_s`]), so SQS redelivers just those, slower each time, and after
//! `maxReceiveCount` receives moves them to the DLQ.

use aws_lambda_events::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent, SqsMessage};
use futures::StreamExt;
use tracing::Instrument;

use crate::telemetry::metric;
use paymos_inbox_core::money::change::Applied;

use paymos_inbox_core::port::{PortError, PortErrorKind};
use paymos_inbox_core::roads::confirm::PaymentConfirmation;
use paymos_inbox_core::roads::fulfil::{Fulfil, FulfilError, PoisonError, ResourceStore};
use paymos_inbox_core::roads::outbound::RetryQueue;
use paymos_inbox_core::wire::work::{Check, QueueMessage, WorkItem};

/// The `FulfilOutcomes` of a message that was not applied: a message that is not a work item,
/// a store or API failure, a payment Paymos does not show paid yet, a work item whose
/// delivery is not recorded yet, and one acknowledged unapplied (not the recorded body, or
/// never recorded by its last receive: `Fulfil::apply_queued` logs why).
pub const FAILURE_OUTCOMES: [&str; 5] = [
    "poison",
    "retry_unavailable",
    "retry_not_paid_yet",
    "retry_not_recorded",
    "not_applied",
];

/// How long fulfil waits, before each read again, for the record of a work item it received
/// before ingest's put (ingest queues a new delivery's work, then puts its record): then the
/// message comes back on the spacing of a failure.
const NOT_RECORDED_WAITS_MS: [u64; 3] = [50, 200, 750];

/// How many messages of one batch are applied at the same time.
pub const CONCURRENCY: usize = 10;

/// No visibility of fulfil's own: a message that was not applied comes back after the
/// queue's visibility timeout (a stack whose fulfil has no `WORK_QUEUE_URL`).
pub struct QueueVisibility;

impl RetryQueue for QueueVisibility {
    async fn retry_in(&self, _receipt: &str, _delay_s: u32) -> Result<(), PortError> {
        Ok(())
    }

    async fn park(&self, _body: &str, _why: &str) -> Result<(), PortError> {
        Err(PortError::of_kind(
            "park",
            PortErrorKind::Misconfigured,
            "fulfil parks nothing: the work queue's redrive policy does",
        ))
    }
}

/// Applies every message of the batch and reports the failed ones, each given the visibility
/// its failure asks on `queue` (the work queue); where that fails, the queue's own visibility
/// timeout brings it back: never lost.
pub async fn handle_batch<S: ResourceStore, C: PaymentConfirmation, Q: RetryQueue>(
    fulfil: &Fulfil<S, C>,
    queue: &Q,
    event: SqsEvent,
    now_ms: u64,
) -> SqsBatchResponse {
    let failures: Vec<BatchItemFailure> = futures::stream::iter(event.records)
        .map(|message| async move {
            let delay_s = apply_one(fulfil, &message, now_ms).await.err()?;
            let message_id = message.message_id.clone().unwrap_or_default();
            if let Some(receipt) = message.receipt_handle.as_deref()
                && let Err(e) = queue.retry_in(receipt, delay_s).await
            {
                tracing::warn!(message_id = %message_id, error = %e, "could not set when the delivery comes back; the queue's visibility timeout applies");
            }
            let mut failure = BatchItemFailure::default();
            failure.item_identifier = message_id;
            Some(failure)
        })
        .buffer_unordered(CONCURRENCY)
        .filter_map(|failure| async move { failure })
        .collect()
        .await;
    let mut response = SqsBatchResponse::default();
    response.batch_item_failures = failures;
    response
}

/// Applies one message; when it fails, how long it should stay out of sight (seconds).
async fn apply_one<S: ResourceStore, C: PaymentConfirmation>(
    fulfil: &Fulfil<S, C>,
    message: &SqsMessage,
    now_ms: u64,
) -> Result<(), u32> {
    let decoded = QueueMessage::decode(message.body.as_deref().unwrap_or_default());
    let event_id = decoded
        .as_ref()
        .map_or("unknown", QueueMessage::event_id)
        .to_owned();
    // Every line about this message (adapters' warnings included) names the event.
    // The message's id only on the lines of a message that comes back (the happy line's bytes
    // are billed a delivery, and the event names it).
    let span = tracing::info_span!("delivery", event_id = %event_id);
    let work = match decoded {
        Ok(QueueMessage::Check(check)) => {
            return check_one(fulfil, message, &check).instrument(span).await;
        }
        Ok(QueueMessage::Work(item)) => Ok(item),
        Err(e) => Err(e),
    };
    // The trace ingest put on the message: its writes carry it on to the publisher.
    let incoming = message
        .message_attributes
        .get(paymos_inbox_aws::trace::TRACEPARENT)
        .and_then(|a| a.string_value.as_deref());
    let traceparent = crate::trace::hop(&span, incoming);
    paymos_inbox_aws::trace::carrying(traceparent, apply_decoded(fulfil, message, work, now_ms))
        .instrument(span)
        .await
}

/// A delivery's delayed check, come due: nothing to say when its delivery was processed (what
/// nearly every check finds, so it writes no line); a warning when it listed a straggler for
/// the sweep. A ledger failure brings the check back, as a work item's would.
async fn check_one<S: ResourceStore, C: PaymentConfirmation>(
    fulfil: &Fulfil<S, C>,
    message: &SqsMessage,
    check: &Check,
) -> Result<(), u32> {
    match fulfil.check_delivery(check).await {
        Ok(checked) => {
            tracing::debug!(checked = checked.as_str(), "delivery checked");
            Ok(())
        }
        Err(error) => {
            let receives: u32 = message
                .attributes
                .get("ApproximateReceiveCount")
                .and_then(|r| r.parse().ok())
                .unwrap_or(1);
            let message_id = message.message_id.as_deref().unwrap_or_default();
            let back_in_s = error.redelivery_in_s(
                receives,
                paymos_inbox_core::roads::outbound::spread_of(message_id, receives),
            );
            tracing::error!(message_id, receives, back_in_s, reason = %error, "delivery not checked; SQS brings its check back then (then the DLQ)");
            Err(back_in_s)
        }
    }
}

async fn apply_decoded<S: ResourceStore, C: PaymentConfirmation>(
    fulfil: &Fulfil<S, C>,
    message: &SqsMessage,
    decoded: Result<WorkItem, paymos_inbox_core::wire::work::WorkItemError>,
    now_ms: u64,
) -> Result<(), u32> {
    let receives = message
        .attributes
        .get("ApproximateReceiveCount")
        .map_or("?", String::as_str);
    let receive_count: u32 = receives.parse().unwrap_or(1);
    let message_id = message.message_id.as_deref().unwrap_or_default();
    let applied = match decoded {
        Ok(item) => match apply_retrying(fulfil, &item, now_ms, receive_count, message_id).await {
            // Not the recorded delivery: acknowledged unapplied (`apply_queued` said why).
            Ok(None) => {
                crate::telemetry::count_outcome(metric::FULFIL_OUTCOMES, FAILURE_OUTCOMES[4]);
                return Ok(());
            }
            Ok(Some(applied)) => Ok((item, applied)),
            Err(e) => Err(e),
        },
        Err(e) => Err(FulfilError::Poison(PoisonError::from(e))),
    };
    record_metrics(&applied, now_ms);
    match applied {
        Ok((_, (envelope, applied))) => {
            let (event_type, resource_id) = envelope
                .as_ref()
                .map(|e| (e.event_type.as_str(), e.resource_id.as_deref()))
                .unwrap_or_default();
            let project = envelope.as_ref().and_then(|e| e.data.project_id.as_deref());
            crate::trace::attributes(
                &tracing::Span::current(),
                &[("resource_id", resource_id), ("project", project)],
            );
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
                FulfilError::NotRecorded => "not_recorded",
            };
            let back_in_s = error.redelivery_in_s(
                receive_count,
                paymos_inbox_core::roads::outbound::spread_of(message_id, receive_count),
            );
            if matches!(error, FulfilError::NotYet { .. } | FulfilError::NotRecorded) {
                tracing::warn!(message_id, receives, back_in_s, error = kind, reason = %error, "delivery not applied yet; SQS redelivers it then");
            } else if kind == "misconfigured" {
                tracing::error!(message_id, receives, back_in_s, error = kind, reason = %error, "delivery not applied: the stack is misconfigured (a missing table, a refused credential); every retry fails alike until it is fixed, then the DLQ");
            } else if kind == "poison" {
                tracing::error!(message_id, receives, back_in_s, error = kind, reason = %error, "delivery not applied: it is not a work item and never will be; to the DLQ after its receives, at once");
            } else {
                tracing::error!(message_id, receives, back_in_s, error = kind, reason = %error, "delivery not applied; SQS redelivers it then, later each time (then the DLQ)");
            }
            Err(back_in_s)
        }
    }
}

/// Applies one work item, trying a conflict or a throttle again within this invocation, a few
/// times with growing, spread waits ([`PortErrorKind::retry_at_once_ms`]): overload slows
/// fulfil down instead of sending the message round the queue towards its dead-letter queue.
/// A retry is safe: every write is conditional, as for SQS's own redelivery. A work item whose
/// record is not there yet is read again a few times ([`NOT_RECORDED_WAITS_MS`]). `None`: not
/// the recorded delivery ([`Fulfil::apply_queued`]), nothing applied.
async fn apply_retrying<S: ResourceStore, C: PaymentConfirmation>(
    fulfil: &Fulfil<S, C>,
    item: &WorkItem,
    now_ms: u64,
    receives: u32,
    message_id: &str,
) -> Result<Option<(Option<paymos_inbox_core::wire::envelope::Envelope>, Applied)>, FulfilError> {
    let mut attempt = 0;
    let mut unrecorded = NOT_RECORDED_WAITS_MS.iter();
    loop {
        let result = fulfil.apply_queued(item, now_ms, receives).await;
        if matches!(result, Err(FulfilError::NotRecorded)) {
            // Ingest puts the record right after it queues the work: fulfil may be quicker.
            let Some(&wait_ms) = unrecorded.next() else {
                return result;
            };
            tokio::time::sleep(std::time::Duration::from_millis(wait_ms)).await;
            continue;
        }
        let Err(FulfilError::Unavailable(error)) = &result else {
            return result;
        };
        attempt += 1;
        let spread = paymos_inbox_core::roads::outbound::spread_of(message_id, attempt);
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
        (Option<paymos_inbox_core::wire::envelope::Envelope>, Applied),
    ),
    FulfilError,
>;

fn record_metrics(applied: &Applying, now_ms: u64) {
    let outcome = match applied {
        Ok((_, (_, applied))) => applied.as_str(),
        Err(FulfilError::Poison(_)) => FAILURE_OUTCOMES[0],
        Err(FulfilError::Unavailable(_)) => FAILURE_OUTCOMES[1],
        Err(FulfilError::NotYet { .. }) => FAILURE_OUTCOMES[2],
        Err(FulfilError::NotRecorded) => FAILURE_OUTCOMES[3],
    };
    crate::telemetry::count_outcome(metric::FULFIL_OUTCOMES, outcome);
    if let Ok((item, (_, applied))) = applied {
        if *applied == Applied::Credited && crate::telemetry::writes(metric::DEPOSITS_CREDITED) {
            metrics::counter!(metric::DEPOSITS_CREDITED).increment(1);
        }
        if let Some(received) = item.received_at_ms
            && crate::telemetry::writes(metric::DELIVERY_AGE)
        {
            #[allow(clippy::cast_precision_loss)]
            let age = now_ms.saturating_sub(received) as f64;
            metrics::histogram!(metric::DELIVERY_AGE).record(age);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use paymos_inbox_core::money::write::{Stored, Write};
    use paymos_inbox_core::port::{PortError, PortErrorKind};
    use paymos_inbox_core::testkit::memory::{MemoryResources, MemoryRetries};
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

        async fn read(
            &self,
            key: &paymos_inbox_core::money::write::Key,
        ) -> Result<Option<paymos_inbox_core::money::write::Fields>, PortError> {
            self.inner.read(key).await
        }
    }

    fn batch(invoices: &[&str]) -> SqsEvent {
        let mut event = SqsEvent::default();
        event.records = invoices
            .iter()
            .map(|invoice| {
                let mut message = SqsMessage::default();
                message.message_id = Some(format!("m-{invoice}"));
                message.receipt_handle = Some(format!("r-{invoice}"));
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

    /// Records each work item of `event` as ingest does before fulfil receives it.
    fn recorded(store: &MemoryResources, event: &SqsEvent) {
        for message in &event.records {
            if let Ok(item) = WorkItem::decode(message.body.as_deref().unwrap_or_default()) {
                store.record(&item);
            }
        }
    }

    // Ingest queues a new delivery's work, then puts its record: a fulfil that receives the
    // work first reads again shortly and applies it once, nothing back to the queue; one whose
    // record never comes is not applied and comes back later.
    #[tokio::test]
    async fn a_work_item_received_before_its_record_is_applied_once_the_record_lands() {
        let fulfil = Fulfil::new(MemoryResources::new())
            .for_projects(paymos_inbox_core::money::change::Projects::parse("prj_1"));
        let queue = MemoryRetries::new();
        let event = batch(&["inv_r1"]);
        let (response, ()) = tokio::join!(
            handle_batch(&fulfil, &queue, event, 1_760_000_000_000),
            async {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                recorded(fulfil.store(), &batch(&["inv_r1"]));
            }
        );
        assert!(response.batch_item_failures.is_empty(), "{response:?}");
        assert_eq!(fulfil.store().fulfilled(), ["inv_r1"]);

        let response = handle_batch(&fulfil, &queue, batch(&["inv_r2"]), 1_760_000_000_000).await;
        assert_eq!(response.batch_item_failures.len(), 1, "comes back");
        assert_eq!(fulfil.store().fulfilled(), ["inv_r1"], "never applied");
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
            })
            .for_projects(paymos_inbox_core::money::change::Projects::parse("prj_1"));
            let queue = MemoryRetries::new();
            let event = batch(&invoices);
            recorded(&fulfil.store().inner, &event);
            let response = handle_batch(&fulfil, &queue, event, 1_760_000_000_000).await;
            assert!(
                response.batch_item_failures.is_empty(),
                "{kind}: {response:?}"
            );
            assert!(
                queue.asked().is_empty(),
                "{kind}: nothing back to the queue"
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
        })
        .for_projects(paymos_inbox_core::money::change::Projects::parse("prj_1"));
        let queue = MemoryRetries::new();
        let mut event = batch(&["inv_m1", "inv_m2"]);
        event.records[1].body = Some("not a work item".into());
        event.records[1]
            .attributes
            .insert("ApproximateReceiveCount".into(), "3".into());
        recorded(&fulfil.store().inner, &event);
        let response = handle_batch(&fulfil, &queue, event, 1_760_000_000_000).await;
        assert_eq!(response.batch_item_failures.len(), 2);
        assert!(fulfil.store().inner.fulfilments().is_empty());
        // Issue 39: each comes back when its failure asks, not after the queue's 181 s: the
        // first failure of a store in 15 s (a tenth either way), poison at once (to the DLQ
        // and its alarm in seconds).
        let mut asked = queue.asked();
        asked.sort();
        assert_eq!(asked[1], ("r-inv_m2".to_owned(), 0), "{asked:?}");
        assert_eq!(asked[0].0, "r-inv_m1");
        assert!((14..=17).contains(&asked[0].1), "{asked:?}");
    }
}
