//! The Paymos event envelope: `{"event_id","event_type","version","occurred_at","data"}`.
//!
//! Decoded leniently (unknown fields ignored, `data` may be partial) but never guessed: the
//! fields the receiver keys on must be present and well-formed, else the delivery gets 400.

use std::fmt;

use serde::Deserialize;

/// The longest id we accept for an event or a resource (Paymos ids are about 30 characters).
pub const MAX_ID_LEN: usize = 128;

/// Why a verified body is not an envelope we can record. All of them mean HTTP 400.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EnvelopeError {
    /// Not a JSON object with the envelope's fields (also: invalid UTF-8, duplicate keys).
    #[error("the body is not a Paymos envelope: {0}")]
    InvalidJson(String),
    /// `version` is 0 (versions start at 1).
    #[error("the envelope version must be 1 or more, got {0}")]
    UnsupportedVersion(u64),
    /// `event_id` is empty, too long or has characters outside `[A-Za-z0-9_-]`.
    #[error("event_id is not a valid event id")]
    InvalidEventId,
    /// A known event type without the resource id its category requires.
    #[error("{event_type} needs data.{field}, which is missing or not a string")]
    MissingResourceId {
        /// The event type.
        event_type: String,
        /// The field that should have held the id.
        field: &'static str,
    },
    /// The resource id does not have its category's prefix (`inv_`, `wdr_`, `pcd_`).
    #[error("data.{field} must start with {prefix}")]
    InvalidResourceId {
        /// The field that held the id.
        field: &'static str,
        /// The prefix it must start with.
        prefix: &'static str,
    },
}

/// The three resource families Paymos sends events about, plus the open rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Category {
    /// `invoice.*`, keyed by `data.invoice_id` (`inv_…`).
    Invoice,
    /// `withdrawal.*` (refunds included), keyed by `data.withdrawal_id` (`wdr_…`).
    Withdrawal,
    /// `payment_channel.deposit.*`, keyed by `data.id` (`pcd_…`).
    Deposit,
    /// Any type we do not know yet: recorded and acknowledged, never an error.
    Unknown,
}

impl Category {
    /// The category of an event type.
    #[must_use]
    pub fn of(event_type: &str) -> Self {
        if event_type.starts_with("invoice.") {
            Self::Invoice
        } else if event_type.starts_with("withdrawal.") {
            Self::Withdrawal
        } else if event_type.starts_with("payment_channel.deposit.") {
            Self::Deposit
        } else {
            Self::Unknown
        }
    }

    /// Where the resource id lives in `data`, and the prefix it carries.
    #[must_use]
    pub fn resource_field(self) -> Option<(&'static str, &'static str)> {
        match self {
            Self::Invoice => Some(("invoice_id", "inv_")),
            Self::Withdrawal => Some(("withdrawal_id", "wdr_")),
            Self::Deposit => Some(("id", "pcd_")),
            Self::Unknown => None,
        }
    }

    /// The name stored in the ledger.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Invoice => "invoice",
            Self::Withdrawal => "withdrawal",
            Self::Deposit => "deposit",
            Self::Unknown => "unknown",
        }
    }

    /// The inverse of [`Category::as_str`].
    #[must_use]
    pub fn parse(s: &str) -> Self {
        match s {
            "invoice" => Self::Invoice,
            "withdrawal" => Self::Withdrawal,
            "deposit" => Self::Deposit,
            _ => Self::Unknown,
        }
    }
}

impl fmt::Display for Category {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Deserialize)]
struct RawEnvelope<'a> {
    #[serde(borrow)]
    event_id: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    event_type: std::borrow::Cow<'a, str>,
    version: u64,
    occurred_at: u64,
    data: RawData,
}

#[derive(Deserialize, Default)]
struct RawData {
    #[serde(default)]
    invoice_id: Option<serde_json::Value>,
    #[serde(default)]
    withdrawal_id: Option<serde_json::Value>,
    #[serde(default)]
    id: Option<serde_json::Value>,
    #[serde(default)]
    is_test: Option<bool>,
}

/// The envelope fields the receiver routes and records by. `data` itself stays in the raw body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    /// `evt_…`: the delivery's idempotency key (the same across retries and replays).
    pub event_id: String,
    /// For example `invoice.paid`; an open set.
    pub event_type: String,
    /// The envelope version (1 or 2 seen so far).
    pub version: u64,
    /// Unix seconds at which the event happened.
    pub occurred_at: u64,
    /// Derived from `event_type`.
    pub category: Category,
    /// `inv_…`, `wdr_…` or `pcd_…`; `None` only for unknown event types without one.
    pub resource_id: Option<String>,
    /// `data.is_test`, when present.
    pub is_test: Option<bool>,
}

impl Envelope {
    /// Parses the verified raw body.
    ///
    /// # Errors
    /// An [`EnvelopeError`] naming the first field that is missing or wrong.
    pub fn parse(body: &[u8]) -> Result<Self, EnvelopeError> {
        let raw: RawEnvelope<'_> =
            serde_json::from_slice(body).map_err(|e| EnvelopeError::InvalidJson(describe(&e)))?;
        if raw.version == 0 {
            return Err(EnvelopeError::UnsupportedVersion(0));
        }
        if !is_valid_id(&raw.event_id) {
            return Err(EnvelopeError::InvalidEventId);
        }
        let category = Category::of(&raw.event_type);
        let resource_id = match category.resource_field() {
            Some((field, prefix)) => {
                let value = match field {
                    "invoice_id" => raw.data.invoice_id.as_ref(),
                    "withdrawal_id" => raw.data.withdrawal_id.as_ref(),
                    _ => raw.data.id.as_ref(),
                };
                let Some(id) = value.and_then(serde_json::Value::as_str) else {
                    return Err(EnvelopeError::MissingResourceId {
                        event_type: raw.event_type.into_owned(),
                        field,
                    });
                };
                if !id.starts_with(prefix) || !is_valid_id(id) {
                    return Err(EnvelopeError::InvalidResourceId { field, prefix });
                }
                Some(id.to_owned())
            }
            // An unknown type may still name a resource we know; keep it for operators.
            None => [&raw.data.invoice_id, &raw.data.withdrawal_id, &raw.data.id]
                .into_iter()
                .flatten()
                .filter_map(serde_json::Value::as_str)
                .find(|id| is_valid_id(id))
                .map(str::to_owned),
        };
        Ok(Self {
            event_id: raw.event_id.into_owned(),
            event_type: raw.event_type.into_owned(),
            version: raw.version,
            occurred_at: raw.occurred_at,
            category,
            resource_id,
            is_test: raw.data.is_test,
        })
    }
}

/// Says what is wrong with the JSON without quoting the body: serde's own text can include a
/// value from it ("invalid type: string \"…\""), which must not reach a log line.
fn describe(e: &serde_json::Error) -> String {
    let text = e.to_string();
    if text.starts_with("missing field") || text.starts_with("duplicate field") {
        // These name a field of our schema, never a value.
        return text;
    }
    let what = match e.classify() {
        serde_json::error::Category::Syntax => "invalid JSON",
        serde_json::error::Category::Eof => "truncated JSON",
        serde_json::error::Category::Data => "a field has the wrong type or value",
        serde_json::error::Category::Io => "unreadable body",
    };
    format!("{what} at line {} column {}", e.line(), e.column())
}

/// Ids are short ASCII tokens; anything else is refused before it reaches a table key.
fn is_valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invoice_envelope_names_its_invoice() {
        let e = Envelope::parse(br#"{"event_id":"evt_1","event_type":"invoice.paid","version":2,"occurred_at":5,"data":{"invoice_id":"inv_9","is_test":true,"extra":[1]},"more":0}"#).unwrap();
        assert_eq!(e.category, Category::Invoice);
        assert_eq!(e.resource_id.as_deref(), Some("inv_9"));
        assert_eq!((e.version, e.is_test), (2, Some(true)));
    }

    #[test]
    fn deposit_and_withdrawal_ids_come_from_their_fields() {
        let d = Envelope::parse(br#"{"event_id":"evt_1","event_type":"payment_channel.deposit.confirmed","version":1,"occurred_at":5,"data":{"id":"pcd_1"}}"#).unwrap();
        assert_eq!(
            (d.category, d.resource_id.as_deref()),
            (Category::Deposit, Some("pcd_1"))
        );
        let w = Envelope::parse(br#"{"event_id":"evt_1","event_type":"withdrawal.completed","version":1,"occurred_at":5,"data":{"withdrawal_id":"wdr_1","invoice_id":"inv_1"}}"#).unwrap();
        assert_eq!(
            (w.category, w.resource_id.as_deref()),
            (Category::Withdrawal, Some("wdr_1"))
        );
    }

    #[test]
    fn unknown_event_types_are_accepted() {
        let e = Envelope::parse(br#"{"event_id":"evt_1","event_type":"payout.new_thing","version":1,"occurred_at":5,"data":{}}"#).unwrap();
        assert_eq!((e.category, e.resource_id), (Category::Unknown, None));
    }

    #[test]
    fn bad_envelopes_say_what_is_wrong() {
        let parse = |s: &str| Envelope::parse(s.as_bytes()).unwrap_err();
        assert!(
            matches!(parse(r#"{"event_id":"evt_1","event_type":"invoice.paid","data":{}}"#), EnvelopeError::InvalidJson(m) if m.contains("version"))
        );
        assert_eq!(
            parse(
                r#"{"event_id":"evt_1","event_type":"invoice.paid","version":0,"occurred_at":1,"data":{"invoice_id":"inv_1"}}"#
            ),
            EnvelopeError::UnsupportedVersion(0)
        );
        assert!(matches!(
            parse(
                r#"{"event_id":"evt_1","event_type":"invoice.paid","version":1,"occurred_at":1,"data":{}}"#
            ),
            EnvelopeError::MissingResourceId {
                field: "invoice_id",
                ..
            }
        ));
        assert!(matches!(
            parse(
                r#"{"event_id":"evt_1","event_type":"invoice.paid","version":1,"occurred_at":1,"data":{"invoice_id":"wdr_1"}}"#
            ),
            EnvelopeError::InvalidResourceId { prefix: "inv_", .. }
        ));
        assert_eq!(
            parse(
                r#"{"event_id":"evt 1","event_type":"invoice.paid","version":1,"occurred_at":1,"data":{"invoice_id":"inv_1"}}"#
            ),
            EnvelopeError::InvalidEventId
        );
        assert!(
            matches!(parse(r#"{"event_id":"evt_1","event_id":"evt_2","event_type":"x","version":1,"occurred_at":1,"data":{}}"#), EnvelopeError::InvalidJson(m) if m.contains("duplicate"))
        );
        assert!(matches!(
            Envelope::parse(b"\xff\xfe"),
            Err(EnvelopeError::InvalidJson(_))
        ));
    }

    #[test]
    fn errors_never_quote_the_body() {
        let body = br#"{"event_id":"evt_1","event_type":"invoice.paid","version":"card-4242","occurred_at":1,"data":{}}"#;
        let err = Envelope::parse(body).unwrap_err().to_string();
        assert!(!err.contains("4242"), "{err}");
        assert!(err.contains("wrong type"), "{err}");
    }
}
