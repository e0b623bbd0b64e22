//! SQS: the work queue between ingest and fulfil. The message body is a [`WorkItem`]: the
//! delivery's exact raw body (base64, so any body fits SQS's character set), its `event_id` and
//! the environment of the secret that verified it; fulfil needs no read to learn what to apply.

use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::MessageAttributeValue;

use crate::aws::port_error;
use paymos_inbox_core::port::PortError;
use paymos_inbox_core::roads::ingest::{Delivery, WorkQueue};
use paymos_inbox_core::roads::outbound::RetryQueue;
use paymos_inbox_core::wire::work::WorkItem;

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

impl WorkQueue for SqsQueue {
    async fn enqueue(&self, delivery: &Delivery) -> Result<(), PortError> {
        let item = WorkItem {
            event_id: delivery.event_id.clone(),
            environment: delivery.environment,
            body: delivery.body.clone(),
            received_at_ms: Some(delivery.received_at_ms),
        };
        let mut send = self
            .client
            .send_message()
            .queue_url(&self.queue_url)
            .message_body(item.encode())
            .message_attributes("event_id", attribute(&delivery.event_id))
            .message_attributes("event_type", attribute(&delivery.event_type));
        if let Some(resource) = &delivery.resource_id {
            send = send.message_attributes("resource_id", attribute(resource));
        }
        if let Some(traceparent) = crate::trace::carried() {
            send = send.message_attributes(crate::trace::TRACEPARENT, attribute(&traceparent));
        }
        send.send()
            .await
            .map_err(|e| port_error("SQS SendMessage", e))?;
        Ok(())
    }
}

/// How many messages a queue holds (SQS's approximate count): the dead-letter queue's, for the
/// operator's exceptions.
///
/// # Errors
/// [`PortError`] of its kind when SQS fails.
pub async fn approximate_messages(client: &Client, queue_url: &str) -> Result<u64, PortError> {
    use aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessages;
    let attributes = client
        .get_queue_attributes()
        .queue_url(queue_url)
        .attribute_names(ApproximateNumberOfMessages)
        .send()
        .await
        .map_err(|e| port_error("SQS GetQueueAttributes", e))?;
    Ok(attributes
        .attributes()
        .and_then(|a| a.get(&ApproximateNumberOfMessages))
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
