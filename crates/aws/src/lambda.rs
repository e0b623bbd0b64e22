//! Lambda's control plane, for the hand-off's destination health: the deliver function's SQS
//! event source mapping as the domain's [`DeliverySwitch`] (disabled, the events wait in their
//! queue), and the deployed deliver function asked to post `events test`'s signed event.

use aws_sdk_lambda::primitives::Blob;
use paymos_inbox_core::port::{PortError, PortErrorKind};
use paymos_inbox_core::roads::endpoint::DeliverySwitch;
use serde_json::Value;

use crate::aws::port_error;

/// The event source mapping from the hand-off's queue (`queue_arn`) to the deliver function:
/// the one mapping Lambda lists for that queue.
#[derive(Debug, Clone)]
pub struct EventSourceSwitch {
    client: aws_sdk_lambda::Client,
    queue_arn: String,
}

impl EventSourceSwitch {
    /// The switch of the mapping that reads `queue_arn`.
    pub fn new(client: aws_sdk_lambda::Client, queue_arn: impl Into<String>) -> Self {
        Self {
            client,
            queue_arn: queue_arn.into(),
        }
    }

    /// The mapping's id and whether it is on (enabled or enabling: it takes, or will take,
    /// messages).
    async fn mapping(&self) -> Result<(String, bool), PortError> {
        let listed = self
            .client
            .list_event_source_mappings()
            .event_source_arn(&self.queue_arn)
            .send()
            .await
            .map_err(|e| port_error("Lambda ListEventSourceMappings", e))?;
        let mut mappings = listed.event_source_mappings().iter();
        match (mappings.next(), mappings.next()) {
            (Some(m), None) => {
                let uuid = m.uuid().unwrap_or_default().to_owned();
                let state = m.state().unwrap_or_default();
                Ok((uuid, matches!(state, "Enabled" | "Enabling")))
            }
            (None, _) => Err(PortError::of_kind(
                "Lambda ListEventSourceMappings",
                PortErrorKind::Misconfigured,
                format!(
                    "no event source mapping reads {}: is WebhookTargetUrl set?",
                    self.queue_arn
                ),
            )),
            (Some(_), Some(_)) => Err(PortError::of_kind(
                "Lambda ListEventSourceMappings",
                PortErrorKind::Misconfigured,
                format!(
                    "more than one event source mapping reads {}: which one is the deliverer's?",
                    self.queue_arn
                ),
            )),
        }
    }
}

impl DeliverySwitch for EventSourceSwitch {
    async fn is_on(&self) -> Result<bool, PortError> {
        Ok(self.mapping().await?.1)
    }

    async fn turn(&self, on: bool) -> Result<bool, PortError> {
        let (uuid, was) = self.mapping().await?;
        if was == on {
            return Ok(false);
        }
        self.client
            .update_event_source_mapping()
            .uuid(uuid)
            .enabled(on)
            .send()
            .await
            .map_err(|e| port_error("Lambda UpdateEventSourceMapping", e))?;
        Ok(true)
    }
}

/// What the deliver function's invocation `{"endpoint_test": true}` asks of it, and answers:
/// the test event's `webhook-id` and the endpoint's answer (a status, or why none came).
pub const TEST_REQUEST: &str = r#"{"endpoint_test":true}"#;

/// Asks the deployed deliver function `function` to post a signed test event to its endpoint,
/// from the stack (its network, its secret); its answer as JSON
/// (`{"webhook_id", "status", "error", "took_ms"}`).
///
/// # Errors
/// The invocation's failure, or a function error (its message).
pub async fn test_endpoint(
    client: &aws_sdk_lambda::Client,
    function: &str,
) -> Result<Value, PortError> {
    let answer = client
        .invoke()
        .function_name(function)
        .payload(Blob::new(TEST_REQUEST))
        .send()
        .await
        .map_err(|e| port_error("Lambda Invoke", e))?;
    let payload = answer.payload().map(Blob::as_ref).unwrap_or_default();
    if let Some(error) = answer.function_error() {
        return Err(PortError::new(
            "Lambda Invoke",
            format!(
                "the deliver function failed ({error}): {}",
                String::from_utf8_lossy(payload)
            ),
        ));
    }
    serde_json::from_slice(payload).map_err(|e| {
        PortError::new(
            "Lambda Invoke",
            format!("the deliver function's answer is not JSON: {e}"),
        )
    })
}
