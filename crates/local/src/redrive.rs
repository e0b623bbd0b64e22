//! Moving messages from the dead-letter queue back to the work queue (after fixing the cause):
//! by SQS's own message move task where the service has it (AWS), else by receiving, sending
//! and deleting each message (the emulators).

use std::sync::atomic::{AtomicUsize, Ordering};

use aws_sdk_sqs::error::ProvideErrorMetadata;
use aws_sdk_sqs::types::QueueAttributeName;
use paymos_inbox_aws::aws::port_error;
use paymos_inbox_core::port::{PortError, PortErrorKind};

/// How the messages were moved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Redriven {
    /// SQS's message move task moved them (`StartMessageMoveTask`), this many.
    ByTask(u64),
    /// Received, sent and deleted one by one, this many.
    OneByOne(usize),
}

impl Redriven {
    /// How many messages moved.
    #[must_use]
    pub fn moved(&self) -> usize {
        match self {
            Self::ByTask(n) => usize::try_from(*n).unwrap_or(usize::MAX),
            Self::OneByOne(n) => *n,
        }
    }
}

/// Whether an error code says the service has no message move tasks (an emulator).
#[must_use]
pub fn unsupported(code: Option<&str>) -> bool {
    matches!(
        code,
        Some(
            "UnsupportedOperation"
                | "AWS.SimpleQueueService.UnsupportedOperation"
                | "InvalidAction"
                | "UnknownOperationException"
                | "NotImplemented"
        )
    )
}

async fn arn(sqs: &aws_sdk_sqs::Client, url: &str) -> Result<String, PortError> {
    sqs.get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .map_err(|e| port_error("SQS GetQueueAttributes", e))?
        .attributes
        .and_then(|mut a| a.remove(&QueueAttributeName::QueueArn))
        .ok_or_else(|| {
            PortError::of_kind(
                "SQS GetQueueAttributes",
                PortErrorKind::Misconfigured,
                format!("{url} has no QueueArn"),
            )
        })
}

/// Moves the messages of `dlq` back to `queue` (up to `max` when moved one by one), waiting for
/// SQS's move task to finish when the service runs one.
///
/// # Errors
/// The first SQS call that fails, of its kind.
pub async fn redrive(
    sqs: &aws_sdk_sqs::Client,
    dlq: &str,
    queue: &str,
    max: usize,
) -> Result<Redriven, PortError> {
    redrive_paced(sqs, dlq, queue, max, None).await
}

/// [`redrive`] at most `per_second` messages a second, when given (SQS's move task's own
/// `MaxNumberOfMessagesPerSecond`, 1 to 500; one by one, a pause between sends), so an endpoint
/// that just came back is not flooded.
///
/// # Errors
/// The first SQS call that fails, of its kind.
pub async fn redrive_paced(
    sqs: &aws_sdk_sqs::Client,
    dlq: &str,
    queue: &str,
    max: usize,
    per_second: Option<u16>,
) -> Result<Redriven, PortError> {
    redrive_counted(sqs, dlq, queue, (max, per_second), &AtomicUsize::new(0)).await
}

/// [`redrive_paced`], keeping in `moved` how many have moved so far while it runs: after each
/// message one by one, and what SQS's move task reports (`ApproximateNumberOfMessagesMoved`,
/// read every 2 s as the task is waited for) on AWS.
///
/// # Errors
/// The first SQS call that fails, of its kind.
pub async fn redrive_counted(
    sqs: &aws_sdk_sqs::Client,
    dlq: &str,
    queue: &str,
    (max, per_second): (usize, Option<u16>),
    moved: &AtomicUsize,
) -> Result<Redriven, PortError> {
    let (source, destination) = (arn(sqs, dlq).await?, arn(sqs, queue).await?);
    match sqs
        .start_message_move_task()
        .source_arn(&source)
        .destination_arn(&destination)
        .set_max_number_of_messages_per_second(per_second.map(i32::from))
        .send()
        .await
    {
        Ok(_) => wait_for_task(sqs, &source, moved)
            .await
            .map(Redriven::ByTask),
        Err(e)
            if unsupported(e.code()) || e.as_service_error().is_none_or(|s| s.code().is_none()) =>
        {
            one_by_one(sqs, (dlq, queue), max, per_second, moved)
                .await
                .map(Redriven::OneByOne)
        }
        Err(e) => Err(port_error("SQS StartMessageMoveTask", e)),
    }
}

async fn wait_for_task(
    sqs: &aws_sdk_sqs::Client,
    source: &str,
    moved: &AtomicUsize,
) -> Result<u64, PortError> {
    loop {
        let tasks = sqs
            .list_message_move_tasks()
            .source_arn(source)
            .max_results(1)
            .send()
            .await
            .map_err(|e| port_error("SQS ListMessageMoveTasks", e))?;
        let Some(task) = tasks.results().first() else {
            return Ok(0);
        };
        let so_far = u64::try_from(task.approximate_number_of_messages_moved()).unwrap_or(0);
        moved.store(
            usize::try_from(so_far).unwrap_or(usize::MAX),
            Ordering::Relaxed,
        );
        match task.status() {
            Some("COMPLETED") => return Ok(so_far),
            Some("FAILED" | "CANCELLED") => {
                return Err(PortError::new(
                    "SQS message move task",
                    format!(
                        "the message move task ended {}: {}",
                        task.status().unwrap_or_default(),
                        task.failure_reason().unwrap_or_default()
                    ),
                ));
            }
            _ => tokio::time::sleep(std::time::Duration::from_secs(2)).await,
        }
    }
}

/// Each message is sent first and deleted from the DLQ only once the send succeeded, so a
/// failure leaves it where it was (at worst sent twice, which fulfil absorbs). Receives wait a
/// second and stop after three empty ones, so a sampled empty answer does not end it early.
async fn one_by_one(
    sqs: &aws_sdk_sqs::Client,
    (dlq, queue): (&str, &str),
    max: usize,
    per_second: Option<u16>,
    counted: &AtomicUsize,
) -> Result<usize, PortError> {
    let pause = per_second.map(|n| std::time::Duration::from_secs_f64(1.0 / f64::from(n.max(1))));
    let mut moved = 0;
    let mut empty = 0;
    while moved < max && empty < 3 {
        let messages = sqs
            .receive_message()
            .queue_url(dlq)
            .max_number_of_messages(10)
            .message_attribute_names("All")
            .wait_time_seconds(1)
            .send()
            .await
            .map_err(|e| port_error("SQS ReceiveMessage", e))?
            .messages
            .unwrap_or_default();
        if messages.is_empty() {
            empty += 1;
            continue;
        }
        empty = 0;
        for m in messages {
            sqs.send_message()
                .queue_url(queue)
                .message_body(m.body.unwrap_or_default())
                .set_message_attributes(m.message_attributes)
                .send()
                .await
                .map_err(|e| port_error("SQS SendMessage", e))?;
            sqs.delete_message()
                .queue_url(dlq)
                .receipt_handle(m.receipt_handle.unwrap_or_default())
                .send()
                .await
                .map_err(|e| port_error("SQS DeleteMessage", e))?;
            moved += 1;
            counted.store(moved, Ordering::Relaxed);
            if let Some(pause) = pause {
                tokio::time::sleep(pause).await;
            }
        }
    }
    Ok(moved)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_emulator_without_move_tasks_falls_back_and_aws_errors_do_not() {
        assert!(unsupported(Some("UnsupportedOperation")));
        assert!(unsupported(Some("InvalidAction")));
        assert!(!unsupported(Some("AccessDenied")));
        assert!(!unsupported(Some("ResourceNotFoundException")));
        assert!(!unsupported(None));
    }
}
