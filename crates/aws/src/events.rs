//! The hand-off's publishers: EventBridge on AWS; locally, a queue that receives exactly the
//! envelope an EventBridge rule would deliver to an SQS target (the same JSON, the same
//! `detail`), so `dev` and the tests run the publisher's own code end to end.

use aws_sdk_eventbridge::types::PutEventsRequestEntry;

use crate::aws::port_error;
use paymos_inbox_core::port::PortError;
use paymos_inbox_core::roads::handoff::{DomainEvent, EventPublisher, SOURCE};

/// EventBridge accepts at most ten entries per `PutEvents`.
const PUT_EVENTS_MAX: usize = 10;

/// An [`EventPublisher`] on an EventBridge bus.
#[derive(Debug, Clone)]
pub struct EventBridgePublisher {
    client: aws_sdk_eventbridge::Client,
    bus: String,
}

impl EventBridgePublisher {
    /// Publishes to `bus` (a name or ARN; `default` for the account's default bus).
    #[must_use]
    pub fn new(client: aws_sdk_eventbridge::Client, bus: impl Into<String>) -> Self {
        Self {
            client,
            bus: bus.into(),
        }
    }
}

impl EventPublisher for EventBridgePublisher {
    async fn publish(&self, events: &[DomainEvent]) -> Result<Vec<Option<String>>, PortError> {
        let mut results = Vec::with_capacity(events.len());
        for chunk in events.chunks(PUT_EVENTS_MAX) {
            let entries: Vec<PutEventsRequestEntry> = chunk
                .iter()
                .map(|e| {
                    PutEventsRequestEntry::builder()
                        .event_bus_name(&self.bus)
                        .source(SOURCE)
                        .detail_type(e.detail_type)
                        .detail(e.detail.to_string())
                        .resources(format!("paymos-inbox:{}", e.idempotency_key))
                        .set_trace_header(e.traceparent.as_deref().and_then(crate::trace::to_xray))
                        .build()
                })
                .collect();
            let out = self
                .client
                .put_events()
                .set_entries(Some(entries))
                .send()
                .await
                .map_err(|e| port_error("EventBridge PutEvents", e))?;
            results.extend(out.entries().iter().map(|entry| {
                entry
                    .error_code()
                    .map(|code| format!("{code}: {}", entry.error_message().unwrap_or_default()))
            }));
        }
        Ok(results)
    }
}

/// The envelope an EventBridge rule delivers to a target.
#[must_use]
pub fn envelope(event: &DomainEvent, at_ms: u64) -> serde_json::Value {
    serde_json::json!({
        "version": "0",
        "id": format!("local-{}", event.idempotency_key),
        "detail-type": event.detail_type,
        "source": SOURCE,
        "account": "000000000000",
        "time": jiff::Timestamp::from_millisecond(i64::try_from(at_ms).unwrap_or(0))
            .map(|t| t.to_string())
            .unwrap_or_default(),
        "region": "local",
        "resources": [format!("paymos-inbox:{}", event.idempotency_key)],
        "detail": event.detail,
    })
}

/// An [`EventPublisher`] standing in for a bus with one rule → SQS target: each event is sent
/// to the queue as the envelope EventBridge would deliver.
#[derive(Debug, Clone)]
pub struct QueuePublisher {
    client: aws_sdk_sqs::Client,
    queue_url: String,
    also: Vec<String>,
    clock: fn() -> u64,
}

impl QueuePublisher {
    /// Publishes to the queue at `queue_url`, stamping each envelope with `clock` (Unix ms), as
    /// EventBridge stamps the time it accepted the event.
    #[must_use]
    pub fn new(
        client: aws_sdk_sqs::Client,
        queue_url: impl Into<String>,
        clock: fn() -> u64,
    ) -> Self {
        Self {
            client,
            queue_url: queue_url.into(),
            also: Vec::new(),
            clock,
        }
    }

    /// Also to the queue at `queue_url`, as a second rule on the bus would (`dev --forward-to`:
    /// the signed hand-off's queue).
    #[must_use]
    pub fn also_to(mut self, queue_url: impl Into<String>) -> Self {
        self.also.push(queue_url.into());
        self
    }
}

impl EventPublisher for QueuePublisher {
    async fn publish(&self, events: &[DomainEvent]) -> Result<Vec<Option<String>>, PortError> {
        let now = (self.clock)();
        let mut results = Vec::with_capacity(events.len());
        for event in events {
            let body = envelope(event, now).to_string();
            // EventBridge hands an SQS target the entry's trace header as the `AWSTraceHeader`
            // system attribute; the emulators keep no system attribute, so it is sent as a
            // message attribute of that name, which the local event sources read as Lambda's.
            let trace = event.traceparent.as_deref().and_then(crate::trace::to_xray);
            let mut refused = None;
            for queue in std::iter::once(&self.queue_url).chain(&self.also) {
                let sent = self
                    .client
                    .send_message()
                    .queue_url(queue)
                    .message_body(&body)
                    .set_message_attributes(trace.as_ref().map(|header| {
                        std::collections::HashMap::from([(
                            crate::trace::AWS_TRACE_HEADER.to_owned(),
                            crate::sqs::attribute(header),
                        )])
                    }))
                    .send()
                    .await;
                if let Err(e) = sent {
                    refused.get_or_insert(aws_sdk_sqs::error::DisplayErrorContext(e).to_string());
                }
            }
            results.push(refused);
        }
        Ok(results)
    }
}
