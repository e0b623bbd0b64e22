//! The state table's stream → the hand-off's events → the publisher, with partial batch
//! failures: a failed record is reported by its sequence number and Lambda retries the stream
//! from it (bisecting, then sending the batch's coordinates to the on-failure queue).

use aws_lambda_events::dynamodb::Event;
use aws_lambda_events::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};

use paymos_inbox_core::handoff::{EventPublisher, ItemChange, Scalar, Snapshot, publish_changes};
use paymos_inbox_core::signature::Environment;

fn snapshot(item: &serde_dynamo::Item) -> Option<Snapshot> {
    let map = item.inner();
    if map.is_empty() {
        return None;
    }
    Some(
        map.iter()
            .filter_map(|(k, v)| {
                let value = match v {
                    serde_dynamo::AttributeValue::S(s) => Scalar::Text(s.clone()),
                    serde_dynamo::AttributeValue::N(n) => Scalar::Number(n.clone()),
                    serde_dynamo::AttributeValue::Bool(b) => Scalar::Bool(*b),
                    _ => return None,
                };
                Some((k.clone(), value))
            })
            .collect(),
    )
}

/// The changes of a stream batch, in order.
#[must_use]
pub fn changes_of(event: &Event) -> Vec<ItemChange> {
    event
        .records
        .iter()
        .map(|r| ItemChange {
            sequence: r.change.sequence_number.clone().unwrap_or_default(),
            old: snapshot(&r.change.old_image),
            new: snapshot(&r.change.new_image),
        })
        .collect()
}

/// Publishes the events of one stream batch; reports the first record that failed.
pub async fn handle_stream<P: EventPublisher>(
    publisher: &P,
    event: Event,
    environment: Environment,
) -> DynamoDbEventResponse {
    let changes = changes_of(&event);
    let failed = match publish_changes(publisher, &changes, environment).await {
        Ok(failed) => failed,
        Err(e) => {
            tracing::error!(error = %e, "events not published; the stream retries the batch");
            changes.first().map(|c| c.sequence.clone())
        }
    };
    let mut response = DynamoDbEventResponse::default();
    if let Some(sequence) = failed {
        let mut failure = DynamoDbBatchItemFailure::default();
        failure.item_identifier = Some(sequence);
        response.batch_item_failures.push(failure);
    }
    response
}
