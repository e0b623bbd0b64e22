//! SQS: the work queue between ingest and fulfil. The message body is a [`WorkItem`]: the
//! delivery's exact raw body (base64, so any body fits SQS's character set), its `event_id` and
//! the environment of the secret that verified it; fulfil needs no read to learn what to apply.

use std::collections::HashMap;

use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::{MessageAttributeValue, QueueAttributeName, SendMessageBatchRequestEntry};

use crate::aws::port_error;
use paymos_inbox_core::port::PortError;
use paymos_inbox_core::roads::ingest::{Delivery, MAX_CHECK_AFTER_SECS, Queued, WorkQueue};
use paymos_inbox_core::roads::outbound::RetryQueue;
use paymos_inbox_core::wire::work::{Check, WorkItem};

/// A [`WorkQueue`] on an SQS standard queue.
#[derive(Debug, Clone)]
pub struct SqsQueue {
    client: Client,
    queue_url: String,
    dead_letters: Option<String>,
}

impl SqsQueue {
    /// The queue at `queue_url`, reached with `client`.
    #[must_use]
    pub fn new(client: Client, queue_url: impl Into<String>) -> Self {
        Self {
            client,
            queue_url: queue_url.into(),
            dead_letters: None,
        }
    }

    /// With its dead-letter queue at `url`, where [`RetryQueue::park`] moves a message.
    #[must_use]
    pub fn with_dead_letters(mut self, url: impl Into<String>) -> Self {
        self.dead_letters = Some(url.into());
        self
    }

    /// The queue URL.
    #[must_use]
    pub fn url(&self) -> &str {
        &self.queue_url
    }
}

/// A string message attribute.
pub(crate) fn attribute(value: &str) -> MessageAttributeValue {
    MessageAttributeValue::builder()
        .data_type("String")
        .string_value(value)
        .build()
        .expect("data_type is set")
}

/// The work item of `delivery`, as the queue carries it.
fn work_item(delivery: &Delivery) -> WorkItem {
    WorkItem {
        event_id: delivery.event_id.clone(),
        environment: delivery.environment,
        body: delivery.body.clone(),
        received_at_ms: Some(delivery.received_at_ms),
    }
}

/// The attributes a work item is sent with (what a person reads in the DLQ).
fn attributes(delivery: &Delivery) -> HashMap<String, MessageAttributeValue> {
    let mut attributes = HashMap::from([
        ("event_id".to_owned(), attribute(&delivery.event_id)),
        ("event_type".to_owned(), attribute(&delivery.event_type)),
    ]);
    if let Some(resource) = &delivery.resource_id {
        attributes.insert("resource_id".to_owned(), attribute(resource));
    }
    if let Some(traceparent) = crate::trace::carried() {
        attributes.insert(
            crate::trace::TRACEPARENT.to_owned(),
            attribute(&traceparent),
        );
    }
    attributes
}

impl WorkQueue for SqsQueue {
    async fn enqueue(&self, delivery: &Delivery) -> Result<(), PortError> {
        self.client
            .send_message()
            .queue_url(&self.queue_url)
            .message_body(work_item(delivery).encode())
            .set_message_attributes(Some(attributes(delivery)))
            .send()
            .await
            .map_err(|e| port_error("SQS SendMessage", e))?;
        Ok(())
    }

    /// One `SendMessageBatch` of two entries: the work item, and its check with a message
    /// timer (`DelaySeconds`, at most 900) on the same queue. SQS answers each entry apart.
    async fn enqueue_checked(
        &self,
        delivery: &Delivery,
        check_after_secs: u32,
    ) -> Result<Queued, PortError> {
        let work = SendMessageBatchRequestEntry::builder()
            .id("work")
            .message_body(work_item(delivery).encode())
            .set_message_attributes(Some(attributes(delivery)))
            .build()
            .map_err(|e| PortError::new("SQS SendMessageBatch", e.to_string()))?;
        let delay = check_after_secs.min(MAX_CHECK_AFTER_SECS);
        let check = SendMessageBatchRequestEntry::builder()
            .id("check")
            .message_body(Check::of(&delivery.event_id, delivery.environment).encode())
            .delay_seconds(i32::try_from(delay).unwrap_or(900))
            .message_attributes("event_id", attribute(&delivery.event_id))
            .build()
            .map_err(|e| PortError::new("SQS SendMessageBatch", e.to_string()))?;
        let sent = self
            .client
            .send_message_batch()
            .queue_url(&self.queue_url)
            .entries(work)
            .entries(check)
            .send()
            .await
            .map_err(|e| port_error("SQS SendMessageBatch", e))?;
        let ok = |id: &str| sent.successful().iter().any(|s| s.id() == id);
        let queued = Queued {
            work: ok("work"),
            check: ok("check"),
        };
        for failed in sent.failed() {
            tracing::warn!(event_id = %delivery.event_id, entry = failed.id(), code = failed.code(), "SQS refused an entry of a delivery's batch");
        }
        if queued == Queued::NOTHING {
            return Err(PortError::new(
                "SQS SendMessageBatch",
                "both entries were refused",
            ));
        }
        Ok(queued)
    }
}

/// How many messages a queue holds (SQS's approximate count): the dead-letter queue's, for the
/// operator's exceptions.
///
/// # Errors
/// [`PortError`] of its kind when SQS fails.
pub async fn approximate_messages(client: &Client, queue_url: &str) -> Result<u64, PortError> {
    count(
        client,
        queue_url,
        QueueAttributeName::ApproximateNumberOfMessages,
    )
    .await
}

/// One count attribute of the queue at `queue_url` (0 where SQS leaves it out): its messages
/// (`ApproximateNumberOfMessages`), or those in flight, received and being applied or failed
/// and out of sight until their retry (`ApproximateNumberOfMessagesNotVisible`).
///
/// # Errors
/// [`PortError`] of its kind when SQS fails.
pub async fn count(
    client: &Client,
    queue_url: &str,
    attribute: QueueAttributeName,
) -> Result<u64, PortError> {
    let attributes = client
        .get_queue_attributes()
        .queue_url(queue_url)
        .attribute_names(attribute.clone())
        .send()
        .await
        .map_err(|e| port_error("SQS GetQueueAttributes", e))?;
    Ok(attributes
        .attributes()
        .and_then(|a| a.get(&attribute))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0))
}

/// The signed hand-off's queue: a message not delivered comes back after its delay.
impl RetryQueue for SqsQueue {
    async fn retry_in(&self, receipt: &str, delay_s: u32) -> Result<(), PortError> {
        self.client
            .change_message_visibility()
            .queue_url(&self.queue_url)
            .receipt_handle(receipt)
            .visibility_timeout(i32::try_from(delay_s).unwrap_or(i32::MAX).min(43_200))
            .send()
            .await
            .map_err(|e| port_error("SQS ChangeMessageVisibility", e))?;
        Ok(())
    }

    async fn park(&self, body: &str, why: &str) -> Result<(), PortError> {
        let Some(dead_letters) = &self.dead_letters else {
            return Err(PortError::of_kind(
                "SQS SendMessage",
                paymos_inbox_core::port::PortErrorKind::Misconfigured,
                "no dead-letter queue to park the message in",
            ));
        };
        self.client
            .send_message()
            .queue_url(dead_letters)
            .message_body(body)
            .message_attributes("parked_because", attribute(why))
            .send()
            .await
            .map_err(|e| port_error("SQS SendMessage", e))?;
        Ok(())
    }
}
