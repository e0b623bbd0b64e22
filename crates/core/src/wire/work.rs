//! The work item ingest hands to fulfil: the verified delivery's `event_id`, the environment of
//! the secret that verified it, and its exact body, base64-encoded so that any body Paymos may
//! send (U+FFFF, lone surrogate escapes, any Unicode) travels through a queue that only carries
//! a restricted character set.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};

use crate::wire::signature::Environment;

/// The receives a work item gets before SQS moves it to the dead-letter queue: the work
/// queue's `maxReceiveCount` (the template test holds it).
pub const WORK_RECEIVES: u32 = 16;

/// The version of the work item format this code writes and reads.
pub const WORK_ITEM_VERSION: u64 = 1;

/// One verified delivery to apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkItem {
    /// The verified body's `event_id` (with the environment, the ledger key:
    /// [`delivery_key`]).
    pub event_id: String,
    /// The environment of the secret that verified it: the only source of truth for whether a
    /// delivery may move live state (`data.is_test` is the sender's claim, not a proof).
    pub environment: Option<Environment>,
    /// The exact raw body.
    pub body: Vec<u8>,
    /// When ingest received it (Unix ms), for the age metric; absent in older items.
    pub received_at_ms: Option<u64>,
}

#[derive(Serialize, Deserialize)]
struct Wire<'a> {
    v: u64,
    event_id: &'a str,
    #[serde(default)]
    environment: Option<&'a str>,
    body: &'a str,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    received_at: Option<u64>,
}

/// Why a queue message is not a work item (it was not written by ingest: never acknowledged).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WorkItemError {
    /// Not the JSON of a work item.
    #[error("the message is not a paymos-inbox work item")]
    NotAWorkItem,
    /// A format version this code does not know.
    #[error("work item version {0} is not supported (this build reads version 1)")]
    UnsupportedVersion(u64),
    /// The body is not valid base64.
    #[error("the work item's body is not base64")]
    BadBody,
}

impl WorkItem {
    /// The message text: JSON with the body in standard base64 (ASCII only).
    #[must_use]
    pub fn encode(&self) -> String {
        let body = STANDARD.encode(&self.body);
        serde_json::to_string(&Wire {
            v: WORK_ITEM_VERSION,
            event_id: &self.event_id,
            environment: self.environment.map(Environment::as_str),
            body: &body,
            received_at: self.received_at_ms,
        })
        .expect("a work item serialises")
    }

    /// Reads a message written by [`WorkItem::encode`].
    ///
    /// # Errors
    /// [`WorkItemError`] when the message is not one.
    pub fn decode(message: &str) -> Result<Self, WorkItemError> {
        let wire: Wire<'_> =
            serde_json::from_str(message).map_err(|_| WorkItemError::NotAWorkItem)?;
        if wire.v != WORK_ITEM_VERSION {
            return Err(WorkItemError::UnsupportedVersion(wire.v));
        }
        Ok(Self {
            event_id: wire.event_id.to_owned(),
            environment: wire.environment.and_then(Environment::from_label),
            body: STANDARD
                .decode(wire.body)
                .map_err(|_| WorkItemError::BadBody)?,
            received_at_ms: wire.received_at,
        })
    }
}

/// A delivery's delayed check (issue 51): queued with its work item, in the same
/// `SendMessageBatch`, on the same queue, and received by fulfil when its message timer ends.
/// It carries no body: it asks the ledger whether the delivery was processed, and lists it for
/// the sweep if not. A fulfil of before checks reads it as poison (no `body`): it never
/// applies it as an empty body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// The delivery's `event_id`.
    pub event_id: String,
    /// The environment of the secret that verified it (with the id, the ledger key).
    pub environment: Option<Environment>,
}

impl Check {
    /// The check of `item`'s delivery.
    #[must_use]
    pub fn of(event_id: &str, environment: Option<Environment>) -> Self {
        Self {
            event_id: event_id.to_owned(),
            environment,
        }
    }

    /// The ledger key of its delivery.
    #[must_use]
    pub fn key(&self) -> String {
        delivery_key(self.environment, &self.event_id)
    }

    /// The message text: `{"v":1,"check":true,"event_id",…}`, ASCII.
    #[must_use]
    pub fn encode(&self) -> String {
        serde_json::json!({
            "v": WORK_ITEM_VERSION,
            "check": true,
            "event_id": self.event_id,
            "environment": self.environment.map(Environment::as_str),
        })
        .to_string()
    }
}

/// What a message on the work queue is: a delivery to apply or a delivery's delayed check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueueMessage {
    /// A work item.
    Work(WorkItem),
    /// A delayed check.
    Check(Check),
}

#[derive(Deserialize)]
struct CheckWire<'a> {
    v: u64,
    check: bool,
    event_id: &'a str,
    #[serde(default)]
    environment: Option<&'a str>,
}

impl QueueMessage {
    /// Reads a message written by [`WorkItem::encode`] or [`Check::encode`].
    ///
    /// # Errors
    /// [`WorkItemError`] when the message is neither.
    pub fn decode(message: &str) -> Result<Self, WorkItemError> {
        if let Ok(check) = serde_json::from_str::<CheckWire<'_>>(message)
            && check.check
        {
            if check.v != WORK_ITEM_VERSION {
                return Err(WorkItemError::UnsupportedVersion(check.v));
            }
            return Ok(Self::Check(Check {
                event_id: check.event_id.to_owned(),
                environment: check.environment.and_then(Environment::from_label),
            }));
        }
        WorkItem::decode(message).map(Self::Work)
    }

    /// The `event_id` it names.
    #[must_use]
    pub fn event_id(&self) -> &str {
        match self {
            Self::Work(item) => &item.event_id,
            Self::Check(check) => &check.event_id,
        }
    }
}

/// What keys a sandbox delivery's record apart from a live one's (`#` is never in an event id).
const SANDBOX_KEY_PREFIX: &str = "test#";

/// The ledger key of a delivery. Its identity is its environment AND its `event_id`: the same
/// id from the sandbox and from live makes two records, so a sandbox delivery never takes a
/// live one's place. A live or unlabelled delivery is keyed by its bare `event_id` (as every
/// record written before the environment was part of the key), a sandbox one by
/// `test#<event_id>`.
#[must_use]
pub fn delivery_key(environment: Option<Environment>, event_id: &str) -> String {
    match environment {
        Some(Environment::Test) => format!("{SANDBOX_KEY_PREFIX}{event_id}"),
        Some(Environment::Live) | None => event_id.to_owned(),
    }
}

/// The `event_id` a ledger key names: the inverse of [`delivery_key`].
#[must_use]
pub fn event_id_of_key(key: &str) -> &str {
    key.strip_prefix(SANDBOX_KEY_PREFIX).unwrap_or(key)
}

/// The processing state of a recorded delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliveryState {
    /// Recorded; its work item may or may not have been sent yet.
    Received,
    /// The fulfil side applied it (whatever the outcome).
    Processed,
}

impl DeliveryState {
    /// The stored name.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Received => "received",
            Self::Processed => "processed",
        }
    }

    /// The inverse of [`DeliveryState::as_str`]; unknown names read as `Received` (safe side).
    #[must_use]
    pub fn parse(s: &str) -> Self {
        if s == "processed" {
            Self::Processed
        } else {
            Self::Received
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A body at the largest `MaxBodyBytes` a stack accepts still fits one SQS
    // message after base64, with the longest ids and the message attributes beside it.
    #[test]
    fn the_largest_accepted_body_fits_one_sqs_message() {
        use crate::roads::ingest::{LIMIT_MAX_BODY_BYTES, SQS_MAX_MESSAGE_BYTES};
        use crate::wire::envelope::MAX_ID_LEN;
        let longest = "e".repeat(MAX_ID_LEN);
        let item = WorkItem {
            event_id: longest.clone(),
            environment: Some(Environment::Test),
            body: vec![b'x'; LIMIT_MAX_BODY_BYTES],
            received_at_ms: Some(u64::MAX),
        };
        // SQS counts each attribute's name, data type and value.
        let attributes: usize = ["event_id", "event_type", "resource_id"]
            .iter()
            .map(|name| name.len() + "String".len() + MAX_ID_LEN)
            .sum();
        let size = item.encode().len() + attributes;
        assert!(size <= SQS_MAX_MESSAGE_BYTES, "{size} bytes");
        // And the bound is tight to a few KiB: 192 KiB would not fit.
        let over = WorkItem {
            body: vec![b'x'; 192 * 1024],
            ..item
        };
        assert!(over.encode().len() + attributes > SQS_MAX_MESSAGE_BYTES);
    }

    #[test]
    fn any_body_round_trips_through_ascii() {
        let body = "{\"a\":\"\u{ffff}\u{fffe}\u{1}\\ud83d\"}"
            .as_bytes()
            .to_vec();
        let item = WorkItem {
            event_id: "evt_1".into(),
            environment: Some(Environment::Live),
            body,
            received_at_ms: Some(7),
        };
        let text = item.encode();
        assert!(text.is_ascii(), "{text}");
        assert_eq!(WorkItem::decode(&text).unwrap(), item);
    }

    #[test]
    fn a_stored_state_reads_back_as_written_and_an_unknown_one_as_received() {
        // The names the ledger's records already carry: renaming one strands them.
        assert_eq!(DeliveryState::Received.as_str(), "received");
        assert_eq!(DeliveryState::Processed.as_str(), "processed");
        for state in [DeliveryState::Received, DeliveryState::Processed] {
            assert_eq!(DeliveryState::parse(state.as_str()), state);
        }
        // The safe side: a record read as received may be sent again, never skipped.
        for unknown in ["", "Processed", "PROCESSED", "done"] {
            assert_eq!(
                DeliveryState::parse(unknown),
                DeliveryState::Received,
                "{unknown}"
            );
        }
    }

    // Issue 51: a check and a work item share the queue; each reads back as what it is, and a
    // check is never a work item (a fulfil of before refuses it, never applies an empty body).
    #[test]
    fn a_check_and_a_work_item_each_read_back_as_what_they_are() {
        let check = Check::of("evt_1", Some(Environment::Test));
        assert_eq!(check.key(), "test#evt_1");
        let text = check.encode();
        assert!(text.is_ascii(), "{text}");
        assert_eq!(QueueMessage::decode(&text), Ok(QueueMessage::Check(check)));
        assert_eq!(
            WorkItem::decode(&text),
            Err(WorkItemError::NotAWorkItem),
            "a fulfil of before reads a check as poison"
        );
        let item = WorkItem {
            event_id: "evt_2".into(),
            environment: None,
            body: b"{}".to_vec(),
            received_at_ms: None,
        };
        assert_eq!(
            QueueMessage::decode(&item.encode()),
            Ok(QueueMessage::Work(item))
        );
    }

    #[test]
    fn foreign_messages_are_refused() {
        assert_eq!(
            WorkItem::decode(r#"{"event_id":"evt_1"}"#),
            Err(WorkItemError::NotAWorkItem)
        );
        assert_eq!(
            WorkItem::decode(r#"{"v":2,"event_id":"e","body":""}"#),
            Err(WorkItemError::UnsupportedVersion(2))
        );
        assert_eq!(
            WorkItem::decode(r#"{"v":1,"event_id":"e","body":"%%"}"#),
            Err(WorkItemError::BadBody)
        );
    }
}
