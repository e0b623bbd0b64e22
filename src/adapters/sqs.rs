//! SQS: the work queue between ingest and fulfil. The message body is the delivery's exact raw
//! body (the Paymos event), so fulfil needs no read to learn what to apply.

use aws_sdk_sqs::Client;
use aws_sdk_sqs::error::DisplayErrorContext;
use aws_sdk_sqs::types::MessageAttributeValue;

use crate::domain::ingest::{Delivery, PortError, WorkQueue};

/// A [`WorkQueue`] on an SQS standard queue.
#[derive(Debug, Clone)]
pub struct SqsQueue {
    client: Client,
    queue_url: String,
}

impl SqsQueue {
    /// The queue at `queue_url`, reached with `client`.
    #[must_use]
    pub fn new(client: Client, queue_url: impl Into<String>) -> Self {
        Self {
            client,
            queue_url: queue_url.into(),
        }
    }

    /// The queue URL.
    #[must_use]
    pub fn url(&self) -> &str {
        &self.queue_url
    }
}

fn attribute(value: &str) -> MessageAttributeValue {
    MessageAttributeValue::builder()
        .data_type("String")
        .string_value(value)
        .build()
        .expect("data_type is set")
}

impl WorkQueue for SqsQueue {
    async fn enqueue(&self, delivery: &Delivery) -> Result<(), PortError> {
        // The body parsed as JSON, so it is UTF-8; SQS carries it unchanged.
        let body = std::str::from_utf8(&delivery.body)
            .map_err(|e| PortError::new("SQS SendMessage", e))?;
        let mut send = self
            .client
            .send_message()
            .queue_url(&self.queue_url)
            .message_body(body)
            .message_attributes("event_id", attribute(&delivery.event_id))
            .message_attributes("event_type", attribute(&delivery.event_type));
        if let Some(resource) = &delivery.resource_id {
            send = send.message_attributes("resource_id", attribute(resource));
        }
        send.send()
            .await
            .map_err(|e| PortError::new("SQS SendMessage", DisplayErrorContext(e)))?;
        Ok(())
    }
}
