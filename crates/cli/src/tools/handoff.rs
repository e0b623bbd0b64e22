//! The hand-off's events for a person: `events resend` (read back from the state table by the
//! domain's `handoff::since`, or one resource's items by their keys ([`keys_of`]), not the
//! 24-hour stream, and published again with the same idempotency keys, for a consumer that was
//! down or a publication that ended in the on-failure queue), and `events tail --follow`
//! ([`Follow`]: what the table commits from now on, read from its stream, never the table
//! again).

use paymos_inbox_core::money::effect::fulfilment_key;
use paymos_inbox_core::money::record::StateRecord;
use paymos_inbox_core::port::PortError;
use paymos_inbox_core::roads::handoff::{DomainEvent, EventPublisher, events_of};
use paymos_inbox_core::wire::signature::Environment;

use paymos_inbox_local::stream::StreamReader;

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
    /// When the table has no stream or a call fails, of its kind.
    pub async fn open(
        dynamodb: &aws_sdk_dynamodb::Client,
        streams: aws_sdk_dynamodbstreams::Client,
        table: &str,
        environment: Environment,
    ) -> Result<Self, PortError> {
        Ok(Self {
            reader: StreamReader::open_latest(dynamodb, streams, table).await?,
            environment,
        })
    }

    /// The events committed since the last poll, each with its commit time (what
    /// `events since` gives it).
    ///
    /// # Errors
    /// When a call fails, of its kind.
    pub async fn next(&mut self) -> Result<Vec<(u64, DomainEvent)>, PortError> {
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

/// The keys of the state items whose facts are `resource`'s, each read by its key (never a
/// scan): an invoice's own item (its reviews, its closing) and its fulfilment (`Order Paid`); a
/// withdrawal's (`wdr_…`) or a deposit's (`pcd_…`) own item. `None` for any other id.
#[must_use]
pub fn keys_of(resource: &str) -> Option<Vec<String>> {
    let named = |prefix: &str| {
        resource
            .strip_prefix(prefix)
            .is_some_and(|rest| !rest.is_empty())
    };
    if named("inv_") {
        Some(vec![resource.to_owned(), fulfilment_key(resource)])
    } else if named("wdr_") || named("pcd_") {
        Some(vec![resource.to_owned()])
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::keys_of;

    #[test]
    fn a_resources_facts_are_read_from_its_own_items_and_nothing_else_names_one() {
        assert_eq!(
            keys_of("inv_1"),
            Some(vec!["inv_1".to_owned(), "fulfilment#inv_1".to_owned()])
        );
        assert_eq!(keys_of("wdr_1"), Some(vec!["wdr_1".to_owned()]));
        assert_eq!(keys_of("pcd_1"), Some(vec!["pcd_1".to_owned()]));
        for not_one in ["evt_1", "order-1", "inv_", "", "fulfilment#inv_1", "INV_1"] {
            assert_eq!(keys_of(not_one), None, "{not_one}");
        }
    }
}
