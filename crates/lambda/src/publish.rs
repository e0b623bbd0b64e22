//! The state table's stream → the hand-off's events → the publisher, with partial batch
//! failures: a failed record is reported by its sequence number and Lambda retries the stream
//! from it (bisecting, then sending the batch's coordinates to the on-failure queue).

use aws_lambda_events::dynamodb::Event;
use aws_lambda_events::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};

use paymos_inbox_aws::dynamodb::{state_record, stream_image};
use paymos_inbox_core::roads::handoff::{EventPublisher, ItemChange, publish_changes};

/// The changes of a stream batch, in order.
#[must_use]
pub fn changes_of(event: &Event) -> Vec<ItemChange> {
    event
        .records
        .iter()
        .map(|r| ItemChange {
            sequence: r.change.sequence_number.clone().unwrap_or_default(),
            old: stream_image(&r.change.old_image).and_then(|i| state_record(&i)),
            new: stream_image(&r.change.new_image).and_then(|i| state_record(&i)),
        })
        .collect()
}

/// Publishes the events of one stream batch; reports the first record that failed.
pub async fn handle_stream<P: EventPublisher>(
    publisher: &P,
    event: Event,
    stack: impl Into<paymos_inbox_core::money::change::Applying>,
) -> DynamoDbEventResponse {
    let changes = changes_of(&event);
    let failed = publish_changes(publisher, &changes, stack).await;
    let mut response = DynamoDbEventResponse::default();
    if let Some(sequence) = failed {
        let mut failure = DynamoDbBatchItemFailure::default();
        failure.item_identifier = Some(sequence);
        response.batch_item_failures.push(failure);
    }
    response
}
