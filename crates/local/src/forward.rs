//! `dev --forward-to URL`: the signed hand-off posted to the merchant's local endpoint by the
//! deliver function's own code (`paymos_inbox_lambda::deliver::handle_batch`), from the
//! template's `WebhookDeliveryQueue`, with its refusals, its parking and its retry schedule
//! compressed sixty times (5 s → 1 s, 5 min → 5 s, 30 min → 30 s, …), so a consumer in the
//! making sees locally what the stack will send it.

use aws_lambda_events::sqs::{SqsEvent, SqsMessage};
use aws_sdk_sqs::types::MessageSystemAttributeName;
use paymos_inbox_aws::sqs::SqsQueue;
use paymos_inbox_aws::trace::AWS_TRACE_HEADER;
use paymos_inbox_aws::webhook::HttpWebhookTarget;
use paymos_inbox_core::port::PortError;
use paymos_inbox_core::roads::outbound::{OutboundSecret, RetryQueue};

use super::template::Created;

/// How much faster than on AWS a retry comes back locally.
pub const COMPRESSION: u32 = 60;

/// The deliver function's retry queue, its delays divided by [`COMPRESSION`] (1 s at least).
struct Compressed(SqsQueue);

impl RetryQueue for Compressed {
    async fn retry_in(&self, receipt: &str, delay_s: u32) -> Result<(), PortError> {
        self.0
            .retry_in(receipt, (delay_s / COMPRESSION).max(1))
            .await
    }

    async fn park(&self, body: &str, why: &str) -> Result<(), PortError> {
        self.0.park(body, why).await
    }
}

/// Starts forwarding every hand-off event of `created`'s stack to `url`, signed with `secret`,
/// while `on` (the event source mapping's stand-in, [`super::switch`]): paused, the events wait
/// in their queue.
///
/// # Errors
/// When the secret or the endpoint cannot be used.
pub fn run(
    sqs: aws_sdk_sqs::Client,
    created: &Created,
    (url, secret): (&str, &str),
    on: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> Result<tokio::task::JoinHandle<()>, String> {
    let secret = OutboundSecret::parse(secret).map_err(|e| e.to_string())?;
    let target = HttpWebhookTarget::new(url, std::time::Duration::from_secs(10))
        .map_err(|e| e.to_string())?;
    let queue_url = created.queue("WebhookDeliveryQueue").to_owned();
    let queue = Compressed(
        SqsQueue::new(sqs.clone(), &queue_url)
            .with_dead_letters(created.queue("WebhookTargetDeadLetterQueue")),
    );
    Ok(tokio::spawn(async move {
        loop {
            if !on.load(std::sync::atomic::Ordering::SeqCst) {
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                continue;
            }
            if let Err(e) = once(&sqs, &queue_url, (&target, &queue, &secret), &on).await {
                tracing::warn!(error = %e, "the local hand-off could not read its queue; trying again");
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            }
        }
    }))
}

/// The trace header the stand-in bus put on `message` (a message attribute: the emulators keep
/// no system attribute), as Lambda's event lists the system attribute.
fn trace_header(message: &aws_sdk_sqs::types::Message) -> Option<(String, String)> {
    let header = message.message_attributes.as_ref()?.get(AWS_TRACE_HEADER)?;
    Some((AWS_TRACE_HEADER.to_owned(), header.string_value.clone()?))
}

/// One receive: the batch as Lambda's event source hands it over, delivered, and what was
/// delivered (or parked) deleted, as the event source does with a batch response. A batch
/// received while the switch went off goes back to the queue untouched: paused means nothing
/// posted from the moment `events pause` answered.
async fn once(
    sqs: &aws_sdk_sqs::Client,
    queue_url: &str,
    (target, queue, secret): (&HttpWebhookTarget, &Compressed, &OutboundSecret),
    on: &std::sync::atomic::AtomicBool,
) -> Result<(), String> {
    let messages = sqs
        .receive_message()
        .queue_url(queue_url)
        .max_number_of_messages(10)
        .wait_time_seconds(1)
        .message_system_attribute_names(MessageSystemAttributeName::ApproximateReceiveCount)
        .message_attribute_names(AWS_TRACE_HEADER)
        .send()
        .await
        .map_err(|e| aws_sdk_sqs::error::DisplayErrorContext(e).to_string())?
        .messages
        .unwrap_or_default();
    if messages.is_empty() {
        return Ok(());
    }
    if !on.load(std::sync::atomic::Ordering::SeqCst) {
        for m in &messages {
            sqs.change_message_visibility()
                .queue_url(queue_url)
                .receipt_handle(m.receipt_handle.as_deref().unwrap_or_default())
                .visibility_timeout(0)
                .send()
                .await
                .map_err(|e| aws_sdk_sqs::error::DisplayErrorContext(e).to_string())?;
        }
        return Ok(());
    }
    let mut event = SqsEvent::default();
    event.records = messages
        .iter()
        .map(|m| {
            let mut record = SqsMessage::default();
            record.message_id = m.message_id.clone();
            record.receipt_handle = m.receipt_handle.clone();
            record.body = m.body.clone();
            record.attributes = m
                .attributes
                .iter()
                .flatten()
                .map(|(k, v)| (k.as_str().to_owned(), v.clone()))
                .chain(trace_header(m))
                .collect();
            record
        })
        .collect();
    let now_s = paymos_inbox_lambda::now_ms() / 1000;
    let response =
        paymos_inbox_lambda::deliver::handle_batch(target, queue, secret, event, now_s).await;
    let failed: Vec<&str> = response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.as_str())
        .collect();
    for m in &messages {
        if failed.contains(&m.message_id.as_deref().unwrap_or_default()) {
            continue;
        }
        sqs.delete_message()
            .queue_url(queue_url)
            .receipt_handle(m.receipt_handle.as_deref().unwrap_or_default())
            .send()
            .await
            .map_err(|e| aws_sdk_sqs::error::DisplayErrorContext(e).to_string())?;
    }
    Ok(())
}
