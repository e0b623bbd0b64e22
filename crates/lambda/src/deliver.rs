//! SQS batch of hand-off events (an EventBridge rule's queue target) → signed Standard Webhooks
//! posts to the merchant's endpoint → batch response. A message the endpoint did not accept is
//! reported failed and made visible again after the retry schedule's next delay
//! ([`retry_delay`]: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h, spread per message); after
//! `maxReceiveCount` ([`ATTEMPTS`]) receives SQS parks it in the dead-letter queue, whose alarm
//! pages someone. A destination that has failed for `WebhookPauseAfterHours` is paused
//! ([`Watch`]): the event source is switched off, the events wait in the queue, and an
//! `Endpoint Paused` fact goes to the bus.

use aws_lambda_events::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent};
use futures::StreamExt;

use std::sync::atomic::{AtomicU64, Ordering};

use paymos_inbox_core::port::PortErrorKind;
use paymos_inbox_core::roads::endpoint::{
    DeliverySwitch, PauseAfter, endpoint_paused, pause_failing, test_event,
};
use paymos_inbox_core::roads::handoff::EventPublisher;
use paymos_inbox_core::roads::outbound::{
    ATTEMPTS, DeliverError, OutboundSecret, RetryQueue, WebhookTarget, deliver, parks_at_once,
    retry_delay, spread_of,
};
use paymos_inbox_core::wire::signature::Environment;

/// How many posts of one batch run at the same time.
pub const CONCURRENCY: usize = 10;

/// The destination's health as the deliverer watches it: after how long of failing it pauses
/// the destination, the switch it turns off, the bus its fact goes to, and the latest post this
/// deliverer saw accepted.
pub struct Watch<S, P> {
    after: PauseAfter,
    switch: S,
    bus: P,
    environment: Environment,
    last_accepted_s: AtomicU64,
}

impl<S: DeliverySwitch, P: EventPublisher> Watch<S, P> {
    /// Pauses through `switch` once the destination has failed for `after`, telling `bus`.
    pub fn new(after: PauseAfter, switch: S, bus: P, environment: Environment) -> Self {
        Self {
            after,
            switch,
            bus,
            environment,
            last_accepted_s: AtomicU64::new(0),
        }
    }

    /// What one batch showed: pauses the destination when it is due.
    async fn saw(&self, seen: &[Seen], now_s: u64) {
        if seen.iter().any(|s| matches!(s, Seen::Accepted)) {
            self.last_accepted_s.fetch_max(now_s, Ordering::SeqCst);
            return;
        }
        let Some((first_ms, error)) = seen
            .iter()
            .filter_map(|s| match s {
                Seen::Failed { first_ms, error } => Some((*first_ms, error)),
                _ => None,
            })
            .min_by_key(|(first_ms, _)| *first_ms)
        else {
            return;
        };
        let last = Some(self.last_accepted_s.load(Ordering::SeqCst)).filter(|s| *s > 0);
        if !self.after.due(first_ms / 1000, last, now_s) {
            return;
        }
        let fact = endpoint_paused(self.environment, first_ms, error, now_s * 1000);
        match pause_failing(&self.switch, &self.bus, fact).await {
            Ok(true) => {
                metrics::counter!(crate::telemetry::metric::WEBHOOK_PAUSES).increment(1);
                tracing::error!(failing_since_ms = first_ms, last_error = %error, "the endpoint has failed since failing_since_ms: deliveries paused, the events wait in their queue; `paymos-inbox events test`, then `events resume` once it answers");
            }
            Ok(false) => {}
            Err(e) => {
                tracing::error!(error = %e, "the endpoint is due a pause, which failed: deliveries go on, on the retry schedule");
            }
        }
    }
}

/// What one post showed of the destination.
enum Seen {
    /// A 2xx.
    Accepted,
    /// The destination did not accept an event first tried at `first_ms`.
    Failed { first_ms: u64, error: String },
    /// Nothing about the destination (an event that cannot be sent at all).
    Nothing,
}

/// No [`Watch`]: a deliverer without the automatic pause (nothing of this type exists).
pub enum Unwatched {}

impl DeliverySwitch for Unwatched {
    async fn is_on(&self) -> Result<bool, paymos_inbox_core::port::PortError> {
        match *self {}
    }

    async fn turn(&self, _: bool) -> Result<bool, paymos_inbox_core::port::PortError> {
        match *self {}
    }
}

impl EventPublisher for Unwatched {
    async fn publish(
        &self,
        _: &[paymos_inbox_core::roads::handoff::DomainEvent],
    ) -> Result<Vec<Option<String>>, paymos_inbox_core::port::PortError> {
        match *self {}
    }
}

/// Delivers every message of the batch and reports the ones not accepted, each made visible
/// again in `queue` after its next delay.
pub async fn handle_batch<T: WebhookTarget, Q: RetryQueue>(
    target: &T,
    queue: &Q,
    secret: &OutboundSecret,
    event: SqsEvent,
    now_s: u64,
) -> SqsBatchResponse {
    handle_watched(
        target,
        queue,
        secret,
        None::<&Watch<Unwatched, Unwatched>>,
        event,
        now_s,
    )
    .await
}

/// [`handle_batch`], and with a [`Watch`], a destination failing for its time paused.
pub async fn handle_watched<
    T: WebhookTarget,
    Q: RetryQueue,
    S: DeliverySwitch,
    P: EventPublisher,
>(
    target: &T,
    queue: &Q,
    secret: &OutboundSecret,
    watch: Option<&Watch<S, P>>,
    event: SqsEvent,
    now_s: u64,
) -> SqsBatchResponse {
    let (failures, seen): (Vec<Option<BatchItemFailure>>, Vec<Seen>) =
        futures::stream::iter(event.records)
            .map(|message| async move {
                let first_ms = message
                    .attributes
                    .get("ApproximateFirstReceiveTimestamp")
                    .and_then(|ms| ms.parse().ok())
                    .unwrap_or(now_s * 1000);
                let result = post_one(target, queue, secret, message, now_s).await;
                let seen = match &result {
                    Ok(()) => Seen::Accepted,
                    Err((_, Some(error))) => Seen::Failed {
                        first_ms,
                        error: error.clone(),
                    },
                    Err((_, None)) => Seen::Nothing,
                };
                (result.err().and_then(|(failure, _)| failure), seen)
            })
            .buffer_unordered(CONCURRENCY)
            .unzip()
            .await;
    if let Some(watch) = watch {
        watch.saw(&seen, now_s).await;
    }
    let mut response = SqsBatchResponse::default();
    response.batch_item_failures = failures.into_iter().flatten().collect();
    response
}

/// Posts one message: `Ok` when the endpoint accepted it; else the batch's failure entry (none
/// when it was parked) and, when the destination answered or failed to, what it said.
async fn post_one<T: WebhookTarget, Q: RetryQueue>(
    target: &T,
    queue: &Q,
    secret: &OutboundSecret,
    message: aws_lambda_events::sqs::SqsMessage,
    now_s: u64,
) -> Result<(), (Option<BatchItemFailure>, Option<String>)> {
    let message_id = message.message_id.clone().unwrap_or_default();
    let body = message.body.as_deref().unwrap_or_default();
    let started = std::time::Instant::now();
    let result = crate::trace::handing_off(&message, deliver(target, body, secret, now_s)).await;
    count(&result, started.elapsed());
    let error = match result {
        Ok(id) => {
            tracing::info!(webhook_id = %id, "event delivered to the endpoint");
            return Ok(());
        }
        Err(DeliverError::Refused(status)) if parks_at_once(status) => {
            let why = format!("the endpoint answered {status} Gone: it will never take this event");
            match queue.park(body, &why).await {
                Ok(()) => {
                    tracing::error!(message_id = %message_id, status, "event parked in the dead-letter queue at once: {why}");
                    return Err((None, Some(why)));
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
                return Err((None, said(&error)));
            }
        }
        (Some(_), None) => {}
    }
    Err((Some(failed(message_id)), said(&error)))
}

/// What a failed post says of the destination: nothing when the event itself cannot be sent.
fn said(error: &DeliverError) -> Option<String> {
    match error {
        DeliverError::Outbound(_) => None,
        _ => Some(error.to_string()),
    }
}

/// `events test`, asked of the deployed deliver function: a signed test event posted once to
/// the endpoint (no retry, no queue), and what it answered: `webhook_id`, `status` (null when
/// no answer came), `error` and `took_ms`.
pub async fn test_post<T: WebhookTarget>(
    target: &T,
    secret: &OutboundSecret,
    environment: Environment,
    now_ms: u64,
) -> serde_json::Value {
    let event = test_event(environment, now_ms);
    let started = std::time::Instant::now();
    let message = match paymos_inbox_core::roads::outbound::outbound_of(
        &event,
        secret,
        now_ms / 1000,
    ) {
        Ok(m) => m,
        Err(e) => {
            return serde_json::json!({"webhook_id": null, "status": null, "error": e.to_string(), "took_ms": 0});
        }
    };
    let answer = target.post(&message).await;
    let took_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let (status, error) = match answer {
        Ok(status) => (Some(status), None),
        Err(e) => (None, Some(e.to_string())),
    };
    tracing::info!(webhook_id = %message.id, status, error, took_ms, "test event posted to the endpoint");
    serde_json::json!({"webhook_id": message.id, "status": status, "error": error, "took_ms": took_ms})
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
    crate::telemetry::count_outcome(metric::WEBHOOK_ATTEMPTS, outcome);
    if crate::telemetry::writes(metric::WEBHOOK_LATENCY) {
        metrics::histogram!(metric::WEBHOOK_LATENCY).record(took.as_secs_f64() * 1000.0);
    }
}

/// The batch response's entry for a message not delivered.
fn failed(message_id: String) -> BatchItemFailure {
    let mut failure = BatchItemFailure::default();
    failure.item_identifier = message_id;
    failure
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_lambda_events::sqs::SqsMessage;
    use paymos_inbox_core::port::PortError;
    use paymos_inbox_core::roads::outbound::Outbound;
    use paymos_inbox_core::testkit::memory::{MemoryPublisher, MemoryRetries, MemorySwitch};

    /// An endpoint that answers every post with one status.
    struct Answers(u16);

    impl WebhookTarget for Answers {
        async fn post(&self, _: &Outbound) -> Result<u16, PortError> {
            Ok(self.0)
        }
    }

    const HOUR_MS: u64 = 3_600_000;
    const NOW_S: u64 = 1_800_000_000;

    /// A batch of one event, first tried `ago_ms` before now.
    fn batch(ago_ms: u64) -> SqsEvent {
        let mut m = SqsMessage::default();
        m.message_id = Some("m-1".into());
        m.receipt_handle = Some("r-1".into());
        m.body = Some(r#"{"detail-type":"Order Paid","time":"t","detail":{"idempotency_key":"order-paid:inv_1"}}"#.into());
        m.attributes.insert(
            "ApproximateFirstReceiveTimestamp".into(),
            (NOW_S * 1000 - ago_ms).to_string(),
        );
        m.attributes
            .insert("ApproximateReceiveCount".into(), "5".into());
        let mut e = SqsEvent::default();
        e.records = vec![m];
        e
    }

    fn secret() -> OutboundSecret {
        OutboundSecret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap()
    }

    #[tokio::test]
    async fn a_destination_failing_past_its_time_is_paused_once_with_its_fact_and_the_event_kept() {
        let watch = Watch::new(
            PauseAfter(12 * 3600),
            MemorySwitch::default(),
            MemoryPublisher::default(),
            Environment::Live,
        );
        let retries = MemoryRetries::new();
        let response = handle_watched(
            &Answers(503),
            &retries,
            &secret(),
            Some(&watch),
            batch(HOUR_MS),
            NOW_S,
        )
        .await;
        assert_eq!(response.batch_item_failures.len(), 1, "retried");
        assert!(watch.switch.is_on().await.unwrap(), "an hour: not yet");
        assert!(watch.bus.published().is_empty());

        let response = handle_watched(
            &Answers(503),
            &retries,
            &secret(),
            Some(&watch),
            batch(13 * HOUR_MS),
            NOW_S,
        )
        .await;
        assert_eq!(
            response.batch_item_failures.len(),
            1,
            "the event stays in its queue, reported failed as before"
        );
        assert!(retries.parked().is_empty(), "nothing parked");
        assert!(!watch.switch.is_on().await.unwrap(), "paused");
        let first_ms = NOW_S * 1000 - 13 * HOUR_MS;
        assert_eq!(
            watch.bus.published(),
            vec![format!("endpoint-paused:{first_ms}")]
        );

        handle_watched(
            &Answers(503),
            &retries,
            &secret(),
            Some(&watch),
            batch(13 * HOUR_MS),
            NOW_S + 1,
        )
        .await;
        assert_eq!(watch.bus.published().len(), 1, "paused once: one fact");
    }

    #[tokio::test]
    async fn a_post_accepted_since_the_event_first_failed_keeps_the_destination_delivering() {
        let watch = Watch::new(
            PauseAfter(12 * 3600),
            MemorySwitch::default(),
            MemoryPublisher::default(),
            Environment::Live,
        );
        let retries = MemoryRetries::new();
        handle_watched(
            &Answers(204),
            &retries,
            &secret(),
            Some(&watch),
            batch(0),
            NOW_S - 60,
        )
        .await;
        handle_watched(
            &Answers(400),
            &retries,
            &secret(),
            Some(&watch),
            batch(13 * HOUR_MS),
            NOW_S,
        )
        .await;
        assert!(
            watch.switch.is_on().await.unwrap(),
            "the endpoint took a post a minute ago: one event refused is not a destination down"
        );
        assert!(watch.bus.published().is_empty());
    }
}
