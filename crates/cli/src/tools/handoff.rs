//! `paymos-inbox events since` / `events resend`: the hand-off's events read back from the
//! state table itself (not the 24-hour stream), so a consumer that was down, or a publication
//! that ended in the on-failure queue, can be served again with the same idempotency keys.

use paymos_inbox_aws::dynamodb::DynamoResources;
use paymos_inbox_core::handoff::{self, DomainEvent, EventPublisher};
use paymos_inbox_core::ingest::PortError;
use paymos_inbox_core::signature::Environment;

/// Every event the facts committed since `since_ms` stand for, oldest first, as the stream
/// would have published them (the use case is the domain's [`handoff::since`]).
///
/// # Errors
/// When the state table cannot be read.
pub async fn since(
    resources: &DynamoResources,
    since_ms: u64,
    environment: Environment,
) -> Result<Vec<(u64, DomainEvent)>, PortError> {
    handoff::since(resources, since_ms, environment).await
}

/// Publishes `events` again; returns how many were accepted.
///
/// # Errors
/// When the publisher fails as a whole, or refuses one (named).
pub async fn resend<P: EventPublisher>(
    publisher: &P,
    events: &[DomainEvent],
) -> Result<usize, PortError> {
    let results = publisher.publish(events).await?;
    for (event, failed) in events.iter().zip(&results) {
        if let Some(reason) = failed {
            return Err(PortError::new(
                "publish",
                format!("{} {}: {reason}", event.detail_type, event.idempotency_key),
            ));
        }
    }
    Ok(results.len())
}
