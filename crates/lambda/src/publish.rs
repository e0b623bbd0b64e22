//! The state table's stream → the hand-off's events → the publisher, with partial batch
//! failures: a failed record is reported by its sequence number and Lambda retries the stream
//! from it (bisecting, then sending the batch's coordinates to the on-failure queue).

use aws_lambda_events::dynamodb::Event;
use aws_lambda_events::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};

use paymos_inbox_aws::dynamodb::{item_change, stream_image};
use paymos_inbox_core::roads::handoff::{
    EventPublisher, ItemChange, events_of, publish_changes, resource_of,
};

/// The changes of a stream batch, in order.
#[must_use]
pub fn changes_of(event: &Event) -> Vec<ItemChange> {
    event
        .records
        .iter()
        .map(|r| {
            item_change(
                r.change.sequence_number.clone().unwrap_or_default(),
                stream_image(&r.change.old_image).as_ref(),
                stream_image(&r.change.new_image).as_ref(),
            )
        })
        .collect()
}

/// [`publish_changes`], each change that carries a trace and means events continuing it in a
/// span of its own (open while the batch is published), whose `traceparent` its events carry
/// on. Without span export, the changes' own go on as they are.
pub async fn publish_traced<P: EventPublisher>(
    publisher: &P,
    changes: &[ItemChange],
    stack: impl Into<paymos_inbox_core::money::change::Applying>,
) -> Option<String> {
    if !crate::trace::exporting() {
        return publish_changes(publisher, changes, stack).await;
    }
    let stack = stack.into();
    let mut changes = changes.to_vec();
    let spans: Vec<tracing::Span> = changes
        .iter_mut()
        .filter(|c| {
            c.traceparent.is_some() && !events_of(c.old.as_ref(), c.new.as_ref(), &stack).is_empty()
        })
        .map(|change| {
            let span = tracing::info_span!("publish");
            change.traceparent = crate::trace::hop(&span, change.traceparent.as_deref());
            crate::trace::attributes(&span, &[("resource_id", Some(resource_of(change)))]);
            span
        })
        .collect();
    let failed = publish_changes(publisher, &changes, &stack).await;
    // The spans end once their changes' events are published (or not).
    drop(spans);
    failed
}

/// Publishes the events of one stream batch; reports the first record that failed.
pub async fn handle_stream<P: EventPublisher>(
    publisher: &P,
    event: Event,
    stack: impl Into<paymos_inbox_core::money::change::Applying>,
) -> DynamoDbEventResponse {
    let changes = changes_of(&event);
    let failed = publish_traced(publisher, &changes, stack).await;
    let mut response = DynamoDbEventResponse::default();
    if let Some(sequence) = failed {
        let mut failure = DynamoDbBatchItemFailure::default();
        failure.item_identifier = Some(sequence);
        response.batch_item_failures.push(failure);
    }
    response
}
