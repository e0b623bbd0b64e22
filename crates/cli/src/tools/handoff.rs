//! The hand-off's events for a person: `events resend` (read back from the state table by the
//! domain's `handoff::since`, not the 24-hour stream, and published again with the same
//! idempotency keys, for a consumer that was down or a publication that ended in the
//! on-failure queue), and `events tail --follow` ([`Follow`]: what the table commits from now
//! on, read from its stream, never the table again).

use paymos_inbox_core::handoff::{DomainEvent, EventPublisher, events_of};
use paymos_inbox_core::port::PortError;
use paymos_inbox_core::record::StateRecord;
use paymos_inbox_core::signature::Environment;

use crate::local::stream::StreamReader;

/// The events of what the state table commits from the moment it is opened, read from the
/// table's stream: each poll reads what is new, whatever the history.
pub struct Follow {
    reader: StreamReader,
    environment: Environment,
}

impl Follow {
    /// Follows `table`'s stream from now on.
    ///
    /// # Errors
    /// When the table has no stream or a call fails.
    pub async fn open(
        dynamodb: &aws_sdk_dynamodb::Client,
        streams: aws_sdk_dynamodbstreams::Client,
        table: &str,
        environment: Environment,
    ) -> Result<Self, String> {
        Ok(Self {
            reader: StreamReader::open_latest(dynamodb, streams, table).await?,
            environment,
        })
    }

    /// The events committed since the last poll, each with its commit time (what
    /// `events since` gives it).
    ///
    /// # Errors
    /// When a call fails.
    pub async fn next(&mut self) -> Result<Vec<(u64, DomainEvent)>, String> {
        let changes = self.reader.next_batch().await?;
        Ok(changes
            .iter()
            .flat_map(|c| {
                let at = c.new.as_ref().and_then(StateRecord::at_ms).unwrap_or(0);
                events_of(c.old.as_ref(), c.new.as_ref(), self.environment)
                    .into_iter()
                    .map(move |e| (at, e))
            })
            .collect())
    }
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
