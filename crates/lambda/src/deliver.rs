//! SQS batch of hand-off events (an EventBridge rule's queue target) → signed Standard Webhooks
//! posts to the merchant's endpoint → batch response. A message the endpoint did not accept is
//! reported failed and made visible again after the retry schedule's next delay
//! ([`retry_delay`]: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h, spread per message); after
//! `maxReceiveCount` ([`ATTEMPTS`]) receives SQS parks it in the dead-letter queue, whose alarm
//! pages someone.

use aws_lambda_events::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent};
use futures::StreamExt;

use paymos_inbox_core::port::PortErrorKind;
use paymos_inbox_core::roads::outbound::{
    ATTEMPTS, DeliverError, OutboundSecret, RetryQueue, WebhookTarget, deliver, parks_at_once,
    retry_delay, spread_of,
};

/// How many posts of one batch run at the same time.
pub const CONCURRENCY: usize = 10;

/// Delivers every message of the batch and reports the ones not accepted, each made visible
/// again in `queue` after its next delay.
pub async fn handle_batch<T: WebhookTarget, Q: RetryQueue>(
    target: &T,
    queue: &Q,
    secret: &OutboundSecret,
    event: SqsEvent,
    now_s: u64,
) -> SqsBatchResponse {
    let failures: Vec<BatchItemFailure> = futures::stream::iter(event.records)
        .map(|message| async move {
            let message_id = message.message_id.clone().unwrap_or_default();
            let body = message.body.as_deref().unwrap_or_default();
            let started = std::time::Instant::now();
            let result =
                crate::trace::handing_off(&message, deliver(target, body, secret, now_s)).await;
            count(&result, started.elapsed());
            let error = match result {
                Ok(id) => {
                    tracing::info!(webhook_id = %id, "event delivered to the endpoint");
                    return None;
                }
                Err(DeliverError::Refused(status)) if parks_at_once(status) => {
                    let why = format!("the endpoint answered {status} Gone: it will never take this event");
                    match queue.park(body, &why).await {
                        Ok(()) => {
                            tracing::error!(message_id = %message_id, status, "event parked in the dead-letter queue at once: {why}");
                            return None;
                        }
                        Err(e) => {
                            tracing::warn!(message_id = %message_id, error = %e, "could not park the event; retried on the schedule");
                            DeliverError::Refused(status)
                        }
                    }
                }
                Err(error) => error,
            };
            let attempt = message
                .attributes
                .get("ApproximateReceiveCount")
                .and_then(|n| n.parse().ok())
                .unwrap_or(1);
            let delay = retry_delay(attempt, spread_of(&message_id, attempt));
            match &error {
                DeliverError::Unavailable(e) if e.is_refused_credential() => {
                    tracing::error!(message_id = %message_id, attempt, retry_in_s = delay, error = %error, "event not delivered: a refused credential (the endpoint does not accept our signature); every retry fails alike until it does, then the dead-letter queue");
                }
                _ => {
                    tracing::warn!(message_id = %message_id, attempt, attempts = ATTEMPTS, retry_in_s = delay, error = %error, "event not delivered; retried on the schedule, then parked in the dead-letter queue");
                }
            }
            match (delay, message.receipt_handle.as_deref()) {
                (Some(delay), Some(receipt)) => {
                    if let Err(e) = queue.retry_in(receipt, delay).await {
                        // The queue's own visibility timeout brings it back sooner: never lost.
                        tracing::warn!(message_id = %message_id, error = %e, "could not set the retry's delay; the queue's visibility timeout applies");
                    }
                }
                // The last attempt failed: parked now, with the last answer (a status, a
                // redirect's Location) on the dead-letter record; if that fails, SQS parks it.
                (None, _) => {
                    let why = format!("{attempt} attempts; the last: {error}");
                    if queue.park(body, &why).await.is_ok() {
                        return None;
                    }
                }
                (Some(_), None) => {}
            }
            Some(failed(message_id))
        })
        .buffer_unordered(CONCURRENCY)
        .filter_map(|failure| async move { failure })
        .collect()
        .await;
    let mut response = SqsBatchResponse::default();
    response.batch_item_failures = failures;
    response
}

/// Counts one post by its answer's class, and how long it took.
fn count(result: &Result<String, DeliverError>, took: std::time::Duration) {
    use crate::telemetry::metric;
    let outcome = match result {
        Ok(_) => "2xx",
        Err(DeliverError::Refused(status)) if parks_at_once(*status) => "410",
        Err(DeliverError::Refused(300..=399)) => "3xx",
        Err(DeliverError::Refused(400..=499)) => "4xx",
        Err(DeliverError::Refused(_)) => "5xx",
        Err(DeliverError::Unavailable(e)) if e.is_refused_credential() => "refused_credential",
        // A redirect, or a URL that cannot be posted to.
        Err(DeliverError::Unavailable(e)) if e.kind == PortErrorKind::Misconfigured => {
            "misconfigured"
        }
        Err(_) => "no_answer",
    };
    metrics::counter!(metric::WEBHOOK_ATTEMPTS, metric::OUTCOME => outcome).increment(1);
    metrics::histogram!(metric::WEBHOOK_LATENCY).record(took.as_secs_f64() * 1000.0);
}

/// The batch response's entry for a message not delivered.
fn failed(message_id: String) -> BatchItemFailure {
    let mut failure = BatchItemFailure::default();
    failure.item_identifier = message_id;
    failure
}
