//! `paymos-inbox events since` / `events resend`: the hand-off's events read back from the
//! state table itself (not the 24-hour stream), so a consumer that was down, or a publication
//! that ended in the on-failure queue, can be served again with the same idempotency keys.

use paymos_inbox_aws::dynamodb::DynamoResources;
use paymos_inbox_core::handoff::{DomainEvent, EventPublisher, Scalar, Snapshot, events_of};
use paymos_inbox_core::ingest::PortError;
use paymos_inbox_core::signature::Environment;

/// The attribute that dates each kind of item (Unix ms).
fn dated(item: &Snapshot) -> u64 {
    ["fulfilled_at", "updated_at", "created_at"]
        .iter()
        .find_map(|k| match item.get(*k) {
            Some(Scalar::Number(n)) => n.parse().ok(),
            _ => None,
        })
        .unwrap_or(0)
}

/// Every event the facts committed since `since_ms` stand for, oldest first, as the stream
/// would have published them (same detail types, same keys).
///
/// # Errors
/// When the state table cannot be read.
pub async fn since(
    resources: &DynamoResources,
    since_ms: u64,
    environment: Environment,
) -> Result<Vec<(u64, DomainEvent)>, PortError> {
    let mut out = Vec::new();
    for item in resources.snapshots().await? {
        let at = dated(&item);
        if at >= since_ms {
            out.extend(
                events_of(None, Some(&item), environment)
                    .into_iter()
                    .map(|e| (at, e)),
            );
        }
    }
    out.sort_by(|a, b| (a.0, &a.1.idempotency_key).cmp(&(b.0, &b.1.idempotency_key)));
    Ok(out)
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
