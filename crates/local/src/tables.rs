//! A queue pair with explicit settings, for tests that need a short visibility timeout (the
//! stack's own queues come from `template.yaml`, see [`super::template`]).

use aws_sdk_sqs::types::QueueAttributeName;

use crate::error::LocalError;

/// The URLs of a work queue and its dead-letter queue.
#[derive(Debug, Clone)]
pub struct QueuePair {
    /// The work queue.
    pub queue_url: String,
    /// Its dead-letter queue.
    pub dlq_url: String,
}

/// Creates `name` and `name-dlq`, with a redrive to the DLQ after `max_receive_count` receives.
///
/// # Errors
/// The SQS call that failed ([`LocalError::Service`], of its kind).
pub async fn create_queue_pair(
    client: &aws_sdk_sqs::Client,
    name: &str,
    visibility_timeout_secs: u32,
    max_receive_count: u32,
) -> Result<QueuePair, LocalError> {
    let dlq_url = client
        .create_queue()
        .queue_name(format!("{name}-dlq"))
        .attributes(QueueAttributeName::MessageRetentionPeriod, "1209600")
        .send()
        .await
        .map_err(|e| LocalError::sqs("SQS CreateQueue", e))?
        .queue_url
        .unwrap_or_default();
    let dlq_arn = client
        .get_queue_attributes()
        .queue_url(&dlq_url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .map_err(|e| LocalError::sqs("SQS GetQueueAttributes", e))?
        .attributes
        .and_then(|mut a| a.remove(&QueueAttributeName::QueueArn))
        .unwrap_or_default();
    let redrive = serde_json::json!({
        "deadLetterTargetArn": dlq_arn,
        "maxReceiveCount": max_receive_count.to_string(),
    });
    let queue_url = client
        .create_queue()
        .queue_name(name)
        .attributes(
            QueueAttributeName::VisibilityTimeout,
            visibility_timeout_secs.to_string(),
        )
        .attributes(QueueAttributeName::MessageRetentionPeriod, "1209600")
        .attributes(QueueAttributeName::RedrivePolicy, redrive.to_string())
        .send()
        .await
        .map_err(|e| LocalError::sqs("SQS CreateQueue", e))?
        .queue_url
        .unwrap_or_default();
    Ok(QueuePair { queue_url, dlq_url })
}
