//! Moving messages from the dead-letter queue back to the work queue (after fixing the cause).

use aws_sdk_sqs::error::DisplayErrorContext;

/// Moves up to `max` messages from `dlq` to `queue`: each is sent first and deleted from the DLQ
/// only once the send succeeded, so a failure leaves it where it was (at worst sent twice, which
/// fulfil absorbs). Returns how many moved.
///
/// # Errors
/// The first SQS call that fails, as text.
pub async fn redrive(
    sqs: &aws_sdk_sqs::Client,
    dlq: &str,
    queue: &str,
    max: usize,
) -> Result<usize, String> {
    let mut moved = 0;
    while moved < max {
        let messages = sqs
            .receive_message()
            .queue_url(dlq)
            .max_number_of_messages(10)
            .message_attribute_names("All")
            .wait_time_seconds(0)
            .send()
            .await
            .map_err(|e| format!("ReceiveMessage: {}", DisplayErrorContext(e)))?
            .messages
            .unwrap_or_default();
        if messages.is_empty() {
            break;
        }
        for m in messages {
            sqs.send_message()
                .queue_url(queue)
                .message_body(m.body.unwrap_or_default())
                .set_message_attributes(m.message_attributes)
                .send()
                .await
                .map_err(|e| format!("SendMessage: {}", DisplayErrorContext(e)))?;
            sqs.delete_message()
                .queue_url(dlq)
                .receipt_handle(m.receipt_handle.unwrap_or_default())
                .send()
                .await
                .map_err(|e| format!("DeleteMessage: {}", DisplayErrorContext(e)))?;
            moved += 1;
        }
    }
    Ok(moved)
}
