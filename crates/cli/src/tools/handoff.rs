//! `paymos-inbox events resend`: the hand-off's events (read back from the state table by the
//! domain's `handoff::since`, not the 24-hour stream) published again with the same
//! idempotency keys, for a consumer that was down or a publication that ended in the
//! on-failure queue.

use paymos_inbox_core::handoff::{DomainEvent, EventPublisher};
use paymos_inbox_core::port::PortError;

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
