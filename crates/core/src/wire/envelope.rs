//! The Paymos event envelope: `{"event_id","event_type","version","occurred_at","data"}`.
//!
//! Decoded leniently (unknown fields ignored, `data` may be partial) but never guessed: the
//! fields the receiver keys on must be present and well-formed, else the delivery gets 400.

use std::fmt;

use serde::Deserialize;
use serde_json::value::RawValue;

/// The longest id we accept for an event or a resource (Paymos ids are about 30 characters).
pub const MAX_ID_LEN: usize = 128;

/// The longest merchant reference (an order's `external_id`, a payer) a change may key state
/// by: far below DynamoDB's 2,048-byte partition key with its prefix (`order_paid#`, `balance#`).
pub const MAX_REFERENCE_LEN: usize = 256;

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
    /// `event_id` does not start with `evt_` (every Paymos event id does), is too long or has
    /// characters outside `[A-Za-z0-9_-]`.
    #[error("event_id is not a Paymos event id (evt_ followed by [A-Za-z0-9_-])")]
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
        [Self::Invoice, Self::Withdrawal, Self::Deposit]
            .into_iter()
            .find(|c| c.type_prefix().is_some_and(|p| event_type.starts_with(p)))
            .unwrap_or(Self::Unknown)
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

    /// The prefix of its event types; the rest of the type is the status.
    #[must_use]
    pub fn type_prefix(self) -> Option<&'static str> {
        match self {
            Self::Invoice => Some("invoice."),
            Self::Withdrawal => Some("withdrawal."),
            Self::Deposit => Some("payment_channel.deposit."),
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
    // A future event type (a ping) may carry no `data` at all, or `null`.
    #[serde(default, borrow)]
    data: Option<RawData<'a>>,
}

/// `data`'s fields the receiver reads, each kept as raw JSON text and decoded on its own: a
/// field of the wrong type, a string with a lone surrogate escape or a number beyond `f64`
/// anywhere else in the body can then never make a verified delivery unreadable.
#[derive(Deserialize, Default)]
struct RawData<'a> {
    #[serde(default, borrow)]
    invoice_id: Option<&'a RawValue>,
    #[serde(default, borrow)]
    withdrawal_id: Option<&'a RawValue>,
    #[serde(default, borrow)]
    id: Option<&'a RawValue>,
    #[serde(default)]
    is_test: Option<bool>,
    #[serde(default, borrow)]
    order: Option<&'a RawValue>,
    #[serde(default, borrow)]
    amount: Option<&'a RawValue>,
    #[serde(default, borrow)]
    currency: Option<&'a RawValue>,
    #[serde(default, borrow)]
    payment: Option<&'a RawValue>,
    #[serde(default, borrow, rename = "type")]
    kind: Option<&'a RawValue>,
    #[serde(default, borrow)]
    mode: Option<&'a RawValue>,
    #[serde(default, borrow)]
    is_final: Option<&'a RawValue>,
    #[serde(default, borrow)]
    payment_channel_external_id: Option<&'a RawValue>,
    #[serde(default, borrow)]
    net: Option<&'a RawValue>,
    #[serde(default, borrow)]
    project_id: Option<&'a RawValue>,
    #[serde(default, borrow)]
    completed_at: Option<&'a RawValue>,
    #[serde(default, borrow)]
    paid_late_at: Option<&'a RawValue>,
    #[serde(default, borrow)]
    status: Option<&'a RawValue>,
}

#[derive(Deserialize, Default)]
struct RawOrder<'a> {
    #[serde(default, borrow)]
    external_id: Option<&'a RawValue>,
    #[serde(default, borrow)]
    amount: Option<&'a RawValue>,
    #[serde(default, borrow)]
    currency: Option<&'a RawValue>,
}

#[derive(Deserialize, Default)]
struct RawPayment<'a> {
    #[serde(default, borrow)]
    expected: Option<&'a RawValue>,
    #[serde(default, borrow)]
    currency: Option<&'a RawValue>,
}

/// A string field, or `None` when it is absent, not a string, or not representable (a lone
/// surrogate): the decision then says what is missing instead of failing.
fn text(raw: Option<&RawValue>) -> Option<String> {
    raw.and_then(|v| serde_json::from_str::<String>(v.get()).ok())
}

/// A nested object's fields, or its defaults when it is absent or not an object.
fn nested<'a, T: Deserialize<'a> + Default>(raw: Option<&'a RawValue>) -> T {
    raw.and_then(|v| serde_json::from_str(v.get()).ok())
        .unwrap_or_default()
}

/// The fields of `data` the decisions read, decoded leniently: each is `None` when absent, of
/// another type, or unreadable, never an error.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventData {
    /// `data.invoice_id` (on invoices; on refunds, the refunded invoice).
    pub invoice_id: Option<String>,
    /// `data.order.external_id`: the merchant's order id.
    pub order_external_id: Option<String>,
    /// `data.order.amount`: what the order is priced at.
    pub order_amount: Option<String>,
    /// `data.order.currency`: the order's (pricing) currency.
    pub order_currency: Option<String>,
    /// `data.amount` (invoices of older versions, withdrawals).
    pub amount: Option<String>,
    /// `data.currency`.
    pub currency: Option<String>,
    /// `data.payment.expected`: the token amount the payer was asked for.
    pub payment_expected: Option<String>,
    /// `data.payment.currency`: the token.
    pub payment_currency: Option<String>,
    /// `data.type` (`refund`, `payout`, …).
    pub kind: Option<String>,
    /// `data.mode` (refunds: `full`, `overpayment`).
    pub mode: Option<String>,
    /// `data.is_final` (deposits).
    pub is_final: Option<bool>,
    /// `data.payment_channel_external_id`: the merchant's id of a deposit's payer.
    pub payer: Option<String>,
    /// `data.net` (deposits).
    pub net: Option<String>,
    /// `data.project_id` (`prj_…`): the merchant's project an invoice, a refund or a deposit
    /// belongs to; a plain payout names none.
    pub project_id: Option<String>,
    /// `data.completed_at` (withdrawals, Unix seconds): when Paymos completed it, the moment a
    /// `full` refund returns the payments received until.
    pub completed_at: Option<u64>,
    /// `data.paid_late_at` (invoices, Unix seconds): a full payment after the invoice closed
    /// (`expired`, `underpaid`), its final status kept; no source says which event announces it.
    pub paid_late_at: Option<u64>,
    /// `data.status`: the resource's status in the event's snapshot of it.
    pub status: Option<String>,
}

/// The verified envelope: what the receiver routes and records by, and the fields of `data`
/// fulfil decides with. Ingest and fulfil read a body through this one parse, so whatever ingest
/// accepts, fulfil can decide.
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
    /// The rest of `data` that decisions read.
    pub data: EventData,
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
        if !(raw.event_id.starts_with("evt_") && is_valid_id(&raw.event_id)) {
            return Err(EnvelopeError::InvalidEventId);
        }
        // An event type travels beside the body as an SQS attribute: bounded, as an id is.
        if raw.event_type.len() > MAX_ID_LEN {
            return Err(EnvelopeError::InvalidJson(format!(
                "event_type is longer than {MAX_ID_LEN} bytes"
            )));
        }
        let data = raw.data.unwrap_or_default();
        let category = Category::of(&raw.event_type);
        let resource_id = match category.resource_field() {
            Some((field, prefix)) => {
                let value = match field {
                    "invoice_id" => data.invoice_id,
                    "withdrawal_id" => data.withdrawal_id,
                    _ => data.id,
                };
                let Some(id) = text(value) else {
                    return Err(EnvelopeError::MissingResourceId {
                        event_type: raw.event_type.into_owned(),
                        field,
                    });
                };
                if !id.starts_with(prefix) || !is_valid_id(&id) {
                    return Err(EnvelopeError::InvalidResourceId { field, prefix });
                }
                Some(id)
            }
            // An unknown type may still name a resource we know; keep it for operators.
            None => [data.invoice_id, data.withdrawal_id, data.id]
                .into_iter()
                .filter_map(text)
                .find(|id| is_valid_id(id)),
        };
        // A refund names the invoice it pays back: an id like every resource id, never a key of
        // another kind (`fulfilment#…`, `order_paid#…`).
        if category == Category::Withdrawal
            && data.invoice_id.is_some_and(|v| v.get() != "null")
            && !text(data.invoice_id).is_some_and(|id| id.starts_with("inv_") && is_valid_id(&id))
        {
            return Err(EnvelopeError::InvalidResourceId {
                field: "invoice_id",
                prefix: "inv_",
            });
        }
        let order: RawOrder<'_> = nested(data.order);
        let payment: RawPayment<'_> = nested(data.payment);
        Ok(Self {
            event_id: raw.event_id.into_owned(),
            event_type: raw.event_type.into_owned(),
            version: raw.version,
            occurred_at: raw.occurred_at,
            category,
            resource_id,
            is_test: data.is_test,
            data: EventData {
                invoice_id: text(data.invoice_id),
                order_external_id: text(order.external_id),
                order_amount: text(order.amount),
                order_currency: text(order.currency),
                amount: text(data.amount),
                currency: text(data.currency),
                payment_expected: text(payment.expected),
                payment_currency: text(payment.currency),
                kind: text(data.kind),
                mode: text(data.mode),
                is_final: data
                    .is_final
                    .and_then(|v| serde_json::from_str(v.get()).ok()),
                payer: text(data.payment_channel_external_id),
                net: text(data.net),
                project_id: text(data.project_id).filter(|p| named(p).is_some()),
                completed_at: data
                    .completed_at
                    .and_then(|v| serde_json::from_str(v.get()).ok()),
                paid_late_at: data
                    .paid_late_at
                    .and_then(|v| serde_json::from_str(v.get()).ok()),
                status: text(data.status),
            },
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

/// Whether `id` is a resource id of the kind `prefix` names (`inv_`, `wdr_`, `pcd_`): the
/// prefix, then a short ASCII token ([`is_valid_id`]); a person's id is read by this rule too.
#[must_use]
pub fn is_resource_id(prefix: &str, id: &str) -> bool {
    id.len() > prefix.len() && id.starts_with(prefix) && is_valid_id(id)
}

/// Ids are short ASCII tokens; anything else is refused before it reaches a table key.
fn is_valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// An id as an event, an answer or a person gives it (an order, an invoice, a payer, an
/// actor): the text, or `None` when it is empty or only whitespace, which names nothing (an
/// unset shell variable, a blank `external_order_id`). Every road reads ids through this one
/// rule, so a blank id never becomes a key such as `order_paid#`.
#[must_use]
pub fn named(text: &str) -> Option<&str> {
    (!text.trim().is_empty()).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    // A person's invoice id is read by this rule (`mark-paid inv_` and `mark-paid "inv_zz 18"`
    // shipped before it): the prefix, then a token.
    #[test]
    fn a_resource_id_is_its_prefix_then_a_token() {
        assert!(is_resource_id("inv_", "inv_9") && is_resource_id("inv_", "inv_a-b_C"));
        for not in ["inv_", "inv_zz 18", "wdr_9", "inv9", "", "inv_é"] {
            assert!(!is_resource_id("inv_", not), "{not:?}");
        }
    }

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
    fn a_refund_names_its_invoice_by_an_invoice_id_or_not_at_all() {
        let refund = |invoice: &str| {
            Envelope::parse(format!(r#"{{"event_id":"evt_1","event_type":"withdrawal.completed","version":1,"occurred_at":5,"data":{{"withdrawal_id":"wdr_1","invoice_id":{invoice},"mode":"full"}}}}"#).as_bytes())
        };
        for bad in [
            r#""fulfilment#inv_1""#,
            r#""order_paid#o-1""#,
            r#""wdr_2""#,
            r#""inv_""#.replace("inv_", "inv_ 1").as_str(),
            "12",
        ] {
            assert_eq!(
                refund(bad),
                Err(EnvelopeError::InvalidResourceId {
                    field: "invoice_id",
                    prefix: "inv_"
                }),
                "{bad}"
            );
        }
        assert_eq!(
            refund(r#""inv_1""#).unwrap().data.invoice_id.as_deref(),
            Some("inv_1")
        );
        assert_eq!(refund("null").unwrap().data.invoice_id, None);
    }

    #[test]
    fn an_event_type_is_bounded_as_an_id_is() {
        let long = "x".repeat(MAX_ID_LEN + 1);
        let body = format!(
            r#"{{"event_id":"evt_1","event_type":"{long}","version":1,"occurred_at":5,"data":{{}}}}"#
        );
        assert!(
            matches!(Envelope::parse(body.as_bytes()), Err(EnvelopeError::InvalidJson(m)) if m.contains("event_type is longer than 128"))
        );
        let fits = body.replace(&long, &"x".repeat(MAX_ID_LEN));
        assert!(Envelope::parse(fits.as_bytes()).is_ok());
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
        // An attack's F4: an id without Paymos' `evt_` prefix is no Paymos event's.
        for id in ["1234", "inv_1", "EVT_1", "evt"] {
            assert_eq!(
                parse(&format!(
                    r#"{{"event_id":"{id}","event_type":"invoice.paid","version":1,"occurred_at":1,"data":{{"invoice_id":"inv_1"}}}}"#
                )),
                EnvelopeError::InvalidEventId,
                "{id}"
            );
        }
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

    #[test]
    fn unreadable_values_elsewhere_never_make_a_verified_body_unreadable() {
        // A string cut by UTF-16 length, a number beyond f64, U+FFFF: valid JSON a strict
        // decoder into `Value` refuses.
        let body = br#"{"event_id":"evt_1","event_type":"invoice.paid","version":1,"occurred_at":5,"data":{"invoice_id":"inv_1","note":"x\ud83d","fee":1e400,"memo":"\uffff","order":{"external_id":"o-1","amount":"10.50","currency":"USD","tag":"\udc00"}}}"#;
        let e = Envelope::parse(body).unwrap();
        assert_eq!(e.data.order_external_id.as_deref(), Some("o-1"));
        assert_eq!(e.data.order_amount.as_deref(), Some("10.50"));
        assert!(serde_json::from_slice::<serde_json::Value>(body).is_err());
    }

    #[test]
    fn fields_of_the_wrong_type_read_as_absent() {
        let e = Envelope::parse(br#"{"event_id":"evt_1","event_type":"payment_channel.deposit.confirmed","version":1,"occurred_at":5,"data":{"id":"pcd_1","net":1.5,"is_final":"yes","order":[1],"payment_channel_external_id":"c\ud800"}}"#).unwrap();
        assert_eq!(e.data.net, None);
        assert_eq!(e.data.is_final, None);
        assert_eq!(e.data.payer, None);
        assert_eq!(e.data.order_external_id, None);
    }

    #[test]
    fn events_without_data_are_envelopes() {
        for body in [
            br#"{"event_id":"evt_1","event_type":"ping","version":1,"occurred_at":5}"#.as_slice(),
            br#"{"event_id":"evt_1","event_type":"ping","version":1,"occurred_at":5,"data":null}"#,
        ] {
            let e = Envelope::parse(body).unwrap();
            assert_eq!((e.category, e.resource_id), (Category::Unknown, None));
        }
        assert!(matches!(
            Envelope::parse(
                br#"{"event_id":"evt_1","event_type":"invoice.paid","version":1,"occurred_at":5}"#
            ),
            Err(EnvelopeError::MissingResourceId { .. })
        ));
    }
}
