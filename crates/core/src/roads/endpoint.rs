//! The health of the hand-off's destination (`WebhookTargetUrl`): the deliver function's
//! trigger switched off and on (`events pause`, `events resume`: the events wait in their queue,
//! none is lost), switched off by the deliverer itself once the destination has failed for a
//! set time (an `Endpoint Paused` fact on the bus), and a signed test event (`events test`).

use std::future::Future;

use serde_json::{Value, json};

use crate::port::PortError;
use crate::roads::handoff::{DETAIL_VERSION, DomainEvent, EventPublisher, slug};
use crate::wire::signature::Environment;

pub use crate::roads::handoff::ENDPOINT_PAUSED;

/// The detail type of `events test`'s message (never on the bus: posted to the endpoint alone).
pub const ENDPOINT_TEST: &str = "Endpoint Test";

/// Whether the deliver function takes the hand-off's events from their queue: on AWS its SQS
/// event source mapping, enabled or disabled. While off, the events wait in the queue (kept 14
/// days) and their retry clocks do not run: nothing is received, so nothing is counted.
pub trait DeliverySwitch: Send + Sync {
    /// Whether it is on.
    ///
    /// # Errors
    /// [`PortError`] when the switch cannot be read (no such trigger: misconfigured).
    fn is_on(&self) -> impl Future<Output = Result<bool, PortError>> + Send;

    /// Turns it `on` or off; `true` when this call changed it, `false` when it already was.
    ///
    /// # Errors
    /// [`PortError`] when it cannot be switched.
    fn turn(&self, on: bool) -> impl Future<Output = Result<bool, PortError>> + Send;
}

/// How long the destination may fail before the deliverer pauses it (`WebhookPauseAfterHours`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PauseAfter(pub u64);

impl PauseAfter {
    /// Whether a post that failed at `now_s` pauses the destination: the event it carried was
    /// first tried at least this long ago (`first_tried_s`, SQS's first receive), and no post
    /// was accepted since then (`last_accepted_s`: the latest 2xx the deliverer knows of).
    #[must_use]
    pub fn due(self, first_tried_s: u64, last_accepted_s: Option<u64>, now_s: u64) -> bool {
        now_s.saturating_sub(first_tried_s) >= self.0
            && last_accepted_s.is_none_or(|ok| ok < first_tried_s)
    }
}

/// The fact that the deliverer paused the destination at `now_ms`, failing since
/// `failing_since_ms` (the failing event's first try), its last answer `last_error`. Its id
/// names the failure it judged, so two deliverers pausing on one event publish one fact.
#[must_use]
pub fn endpoint_paused(
    environment: Environment,
    failing_since_ms: u64,
    last_error: &str,
    now_ms: u64,
) -> DomainEvent {
    let key = format!("{}:{failing_since_ms}", slug(ENDPOINT_PAUSED));
    DomainEvent {
        detail_type: ENDPOINT_PAUSED,
        detail: json!({
            "version": DETAIL_VERSION,
            "idempotency_key": key,
            "environment": if environment.is_test() { "sandbox" } else { "live" },
            "occurred_at": now_ms,
            "project_id": Value::Null,
            "failing_since": failing_since_ms,
            "last_error": last_error,
        }),
        idempotency_key: key,
        // The destination's health is no payment's: it continues no trace.
        traceparent: None,
    }
}

/// Pauses the destination, as the deliverer does once [`PauseAfter::due`]: turns the switch
/// off and, when this call turned it, publishes [`endpoint_paused`]. `true` when it paused.
///
/// # Errors
/// [`PortError`] when the switch cannot be turned, or the fact not published (the switch is
/// off then: the alarm on the deliverer's pauses and its log line say it).
pub async fn pause_failing<S: DeliverySwitch, P: EventPublisher>(
    switch: &S,
    bus: &P,
    fact: DomainEvent,
) -> Result<bool, PortError> {
    if !switch.turn(false).await? {
        return Ok(false);
    }
    let refused = bus.publish(std::slice::from_ref(&fact)).await?;
    match refused.into_iter().flatten().next() {
        Some(why) => Err(PortError::new("publish Endpoint Paused", why)),
        None => Ok(true),
    }
}

/// `events test`'s event, as an EventBridge rule hands it to the deliverer: the hand-off's
/// envelope with a detail of its own (`idempotency_key` `endpoint-test:<ms>`), so the endpoint
/// verifies it as any other message and may tell it by its type.
#[must_use]
pub fn test_event(environment: Environment, now_ms: u64) -> String {
    let key = format!("{}:{now_ms}", slug(ENDPOINT_TEST));
    let time = i64::try_from(now_ms)
        .ok()
        .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string());
    json!({
        "version": "0",
        "detail-type": ENDPOINT_TEST,
        "source": crate::roads::handoff::SOURCE,
        "time": time,
        "detail": {
            "version": DETAIL_VERSION,
            "idempotency_key": key,
            "environment": if environment.is_test() { "sandbox" } else { "live" },
            "occurred_at": now_ms,
            "project_id": Value::Null,
        },
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::memory::{MemoryPublisher, MemorySwitch};

    const HOUR: u64 = 3600;

    #[test]
    fn a_failure_pauses_only_after_the_set_time_and_only_with_no_success_since() {
        let rule = PauseAfter(12 * HOUR);
        let first = 1_000_000;
        assert!(!rule.due(first, None, first + 12 * HOUR - 1), "not yet");
        assert!(rule.due(first, None, first + 12 * HOUR), "failing 12 h");
        assert!(
            rule.due(first, Some(first - 1), first + 13 * HOUR),
            "the last success before"
        );
        assert!(
            !rule.due(first, Some(first + HOUR), first + 13 * HOUR),
            "a success since: the destination answers, this event is refused alone"
        );
        assert!(
            !rule.due(first + 5, None, first),
            "a clock behind the first try"
        );
    }

    #[tokio::test]
    async fn an_automatic_pause_switches_off_once_and_publishes_its_fact_once() {
        let (switch, bus) = (MemorySwitch::default(), MemoryPublisher::default());
        let fact = endpoint_paused(Environment::Live, 1_000, "the endpoint answered 503", 9_000);
        assert!(pause_failing(&switch, &bus, fact.clone()).await.unwrap());
        assert!(!switch.is_on().await.unwrap());
        assert!(
            !pause_failing(&switch, &bus, fact.clone()).await.unwrap(),
            "already paused: no second fact"
        );
        assert_eq!(bus.published(), vec![fact.idempotency_key.clone()]);
        assert_eq!(fact.detail["failing_since"], 1_000);
        assert_eq!(fact.detail["occurred_at"], 9_000);
        assert_eq!(fact.idempotency_key, "endpoint-paused:1000");
        assert!(switch.turn(true).await.unwrap(), "resumed");
        assert!(switch.is_on().await.unwrap());
    }

    #[test]
    fn the_test_event_is_signed_as_any_other() {
        let secret =
            crate::roads::outbound::OutboundSecret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
                .unwrap();
        let m = crate::roads::outbound::outbound_of(
            &test_event(Environment::Live, 1_700_000_000_000),
            &secret,
            1_700_000_000,
        )
        .unwrap();
        assert_eq!(m.id, "endpoint-test:1700000000000");
        let body: Value = serde_json::from_str(&m.body).unwrap();
        assert_eq!(body["type"], ENDPOINT_TEST);
        assert_eq!(body["timestamp"], "2023-11-14T22:13:20Z");
        assert_eq!(body["data"]["environment"], "live");
    }
}
