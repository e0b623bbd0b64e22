//! The hand-off: the business facts this receiver decided, as events a merchant's systems can
//! route (EventBridge on AWS). Each is derived from a committed change of the state table (its
//! stream), so an event exists if and only if the fact was committed; each carries a stable
//! idempotency key, because it is delivered at least once.

use std::collections::BTreeMap;
use std::future::Future;

use serde_json::{Value, json};

use super::ingest::PortError;
use super::signature::Environment;
use super::status::InvoiceStatus;

/// The `source` of every event.
pub const SOURCE: &str = "paymos-inbox";
/// The version of every detail schema (a breaking change bumps it; `schemas/` holds one JSON
/// Schema per detail type and version, and a test fails when a schema changes without it).
pub const DETAIL_VERSION: u64 = 2;

/// The fields every detail carries: the schema `version`, the fact's `idempotency_key` (one per
/// fact: unique to it, stable across re-publishing), the stack's `environment` and the commit
/// time `occurred_at` (Unix ms).
pub const COMMON_FIELDS: [&str; 4] = ["version", "idempotency_key", "environment", "occurred_at"];

/// Every `detail-type` published, with the fields of its detail, each present in every event
/// of its type (`null` where unknown), plus [`COMMON_FIELDS`]. README documents each, and
/// `schemas/` holds their JSON Schemas; tests keep all three in step.
pub const DETAIL_TYPES: [(&str, &[&str]); 7] = [
    (
        "Order Paid",
        &[
            "order_id",
            "invoice_id",
            "amount",
            "currency",
            "status",
            "won_by",
            "event_id",
        ],
    ),
    (
        "Payment Needs Review",
        &[
            "reason",
            "invoice_id",
            "order_id",
            "amount",
            "currency",
            "why",
            "event_id",
        ],
    ),
    ("Invoice Closed", &["invoice_id", "order_id", "status"]),
    (
        "Refund Completed",
        &["withdrawal_id", "invoice_id", "amount", "currency"],
    ),
    (
        "Withdrawal Completed",
        &["withdrawal_id", "type", "invoice_id", "amount", "currency"],
    ),
    (
        "Withdrawal Failed",
        &["withdrawal_id", "type", "invoice_id", "amount", "currency"],
    ),
    (
        "Deposit Credited",
        &["deposit_id", "payer", "net", "currency"],
    ),
];

/// A value of a state table item, as a stream image or a scan gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scalar {
    /// A string.
    Text(String),
    /// A number, as its exact decimal text.
    Number(String),
    /// A boolean.
    Bool(bool),
}

/// An item of the state table (attributes of other types are left out).
pub type Snapshot = BTreeMap<String, Scalar>;

/// One business fact to publish.
#[derive(Debug, Clone, PartialEq)]
pub struct DomainEvent {
    /// EventBridge's `detail-type`, e.g. `Order Paid`.
    pub detail_type: &'static str,
    /// The fact's id: unique to the fact (`order-paid:inv_1` and `invoice-closed:inv_1` are two
    /// facts of one invoice), stable across re-publications; consumers deduplicate on it.
    pub idempotency_key: String,
    /// The detail (a JSON object).
    pub detail: Value,
}

/// A string or number attribute of an item, as text.
#[must_use]
pub fn text<'s>(item: &'s Snapshot, name: &str) -> Option<&'s str> {
    match item.get(name)? {
        Scalar::Text(s) | Scalar::Number(s) => Some(s),
        Scalar::Bool(_) => None,
    }
}

/// A whole-number attribute of an item (times in ms or s).
#[must_use]
pub fn whole(item: &Snapshot, name: &str) -> Option<u64> {
    match item.get(name)? {
        Scalar::Number(n) => n.parse().ok(),
        _ => None,
    }
}

fn flag(item: Option<&Snapshot>, name: &str) -> bool {
    item.and_then(|i| i.get(name)) == Some(&Scalar::Bool(true))
}

fn has(item: Option<&Snapshot>, name: &str) -> bool {
    item.is_some_and(|i| i.contains_key(name))
}

/// Money as JSON: the exact decimal text (a string, never a float).
fn field(item: &Snapshot, name: &str) -> Value {
    text(item, name).map_or(Value::Null, Value::from)
}

/// The slug of a detail type, the first part of its facts' ids (`Order Paid` → `order-paid`).
#[must_use]
pub fn slug(detail_type: &str) -> String {
    detail_type.to_ascii_lowercase().replace(' ', "-")
}

/// An item's amount as the text Paymos sent (`<name>_text`), else its number.
fn amount(item: &Snapshot, name: &str) -> Value {
    match text(item, &format!("{name}_text")) {
        Some(t) => Value::from(t),
        None => field(item, name),
    }
}

/// The events a committed change of one state item means (`old` absent for a new item, `new`
/// absent for a removed one). Pure: replaying a change gives the same events and ids.
#[must_use]
pub fn events_of(
    old: Option<&Snapshot>,
    new: Option<&Snapshot>,
    environment: Environment,
) -> Vec<DomainEvent> {
    let Some(new) = new else {
        return Vec::new();
    };
    let kind = text(new, "kind").unwrap_or_default();
    let mut out = Vec::new();
    // `parts` name the fact within its type: the resource, and a qualifier where one resource
    // has several facts of one type (the reasons a payment needs review).
    let mut emit = |detail_type: &'static str, parts: &[&str], mut detail: Value, at: &str| {
        let key = std::iter::once(slug(detail_type).as_str())
            .chain(parts.iter().copied())
            .collect::<Vec<_>>()
            .join(":");
        if let Value::Object(map) = &mut detail {
            map.insert("version".into(), Value::from(DETAIL_VERSION));
            map.insert("idempotency_key".into(), Value::from(key.clone()));
            let env = if environment.is_test() {
                "sandbox"
            } else {
                "live"
            };
            map.insert("environment".into(), Value::from(env));
            // Unix milliseconds of the commit.
            let at = text(new, at).and_then(|t| t.parse::<u64>().ok());
            map.insert("occurred_at".into(), at.map_or(Value::Null, Value::from));
        }
        out.push(DomainEvent {
            detail_type,
            idempotency_key: key,
            detail,
        });
    };
    let newly = |name: &str| has(Some(new), name) && !has(old, name);
    match kind {
        "fulfilment" if old.is_none() => {
            let invoice = text(new, "invoice_id").unwrap_or_default().to_owned();
            let won_by = text(new, "won_by").unwrap_or_default();
            emit(
                "Order Paid",
                &[&invoice],
                json!({"order_id": field(new, "order_id"), "invoice_id": invoice,
                       "amount": amount(new, "amount"), "currency": field(new, "currency"),
                       "status": field(new, "status"), "won_by": won_by,
                       "event_id": if won_by.starts_with("manual:") { Value::Null } else { Value::from(won_by) }}),
                "fulfilled_at",
            );
        }
        "invoice" => {
            let invoice = text(new, "pk").unwrap_or_default().to_owned();
            let review = |reason: &str, why: String| {
                json!({"reason": reason, "invoice_id": invoice, "order_id": field(new, "order_id"),
                       "amount": amount(new, "amount"), "currency": field(new, "currency"), "why": why,
                       "event_id": Value::Null})
            };
            if flag(Some(new), "held") && !flag(old, "held") {
                emit(
                    "Payment Needs Review",
                    &[&invoice, "held"],
                    review(
                        "held",
                        "paid, but not what the order was registered for".into(),
                    ),
                    "updated_at",
                );
            }
            if newly("paid_late_at") {
                emit(
                    "Payment Needs Review",
                    &[&invoice, "paid_late"],
                    review("paid_late", "paid after the invoice closed".into()),
                    "updated_at",
                );
            }
            if newly("duplicate_of") {
                let first = text(new, "duplicate_of").unwrap_or_default();
                emit(
                    "Payment Needs Review",
                    &[&invoice, "duplicate_payment"],
                    review(
                        "duplicate_payment",
                        format!("a second payment for an order {first} fulfilled: refund it"),
                    ),
                    "updated_at",
                );
            }
            let status = text(new, "status").and_then(InvoiceStatus::parse);
            let was = old.and_then(|o| text(o, "status"));
            if let Some(st) = status
                && st.is_final()
                && !st.fulfils()
                && was != Some(st.as_str())
            {
                emit(
                    "Invoice Closed",
                    &[&invoice],
                    json!({"invoice_id": invoice, "order_id": field(new, "order_id"), "status": st.as_str()}),
                    "updated_at",
                );
            }
        }
        "review" if old.is_none() => {
            let reason = text(new, "reason").unwrap_or_default();
            let event = text(new, "event_id").unwrap_or_default();
            emit(
                "Payment Needs Review",
                &[event, reason],
                json!({"reason": reason, "invoice_id": field(new, "resource_id"), "order_id": Value::Null,
                       "amount": Value::Null, "currency": Value::Null, "why": field(new, "why"),
                       "event_id": event}),
                "created_at",
            );
        }
        "withdrawal" => {
            let status = text(new, "status").unwrap_or_default();
            let was = old.and_then(|o| text(o, "status"));
            if was == Some(status) {
                return out;
            }
            let id = text(new, "pk").unwrap_or_default().to_owned();
            let kind = text(new, "type").unwrap_or("payout");
            let detail = json!({"withdrawal_id": id, "type": kind, "invoice_id": field(new, "invoice_id"),
                                "amount": amount(new, "amount"), "currency": field(new, "currency")});
            match (status, kind) {
                ("completed", "refund") => {
                    let mut d = detail;
                    if let Value::Object(m) = &mut d {
                        m.remove("type");
                    }
                    emit("Refund Completed", &[&id], d, "updated_at");
                }
                ("completed", _) => emit("Withdrawal Completed", &[&id], detail, "updated_at"),
                ("failed", _) => emit("Withdrawal Failed", &[&id], detail, "updated_at"),
                _ => {}
            }
        }
        "deposit" if flag(Some(new), "credited") && !flag(old, "credited") => {
            let id = text(new, "pk").unwrap_or_default().to_owned();
            emit(
                "Deposit Credited",
                &[&id],
                json!({"deposit_id": id, "payer": field(new, "payer"), "net": amount(new, "net"),
                       "currency": field(new, "currency")}),
                "updated_at",
            );
        }
        _ => {}
    }
    out
}

/// Where events go: EventBridge on AWS, a queue standing in for it locally.
pub trait EventPublisher: Send + Sync {
    /// Publishes `events` in order; returns, per event, `None` when accepted or the reason it
    /// was not.
    ///
    /// # Errors
    /// [`PortError`] when nothing could be published.
    fn publish(
        &self,
        events: &[DomainEvent],
    ) -> impl Future<Output = Result<Vec<Option<String>>, PortError>> + Send;
}

/// One committed change of the state table: its position in the stream and its images.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemChange {
    /// The stream's sequence number (what a retry starts from).
    pub sequence: String,
    /// The item before.
    pub old: Option<Snapshot>,
    /// The item after.
    pub new: Option<Snapshot>,
}

/// Publishes the events of `changes`, in order. Returns the sequence number of the first change
/// whose events were not all accepted (the stream is retried from there: events before it are
/// not published twice by this call, those after it may be, which their keys make harmless).
///
/// # Errors
/// [`PortError`] when the publisher fails as a whole (the first change's sequence is retried).
pub async fn publish_changes<P: EventPublisher>(
    publisher: &P,
    changes: &[ItemChange],
    environment: Environment,
) -> Result<Option<String>, PortError> {
    for change in changes {
        let events = events_of(change.old.as_ref(), change.new.as_ref(), environment);
        if events.is_empty() {
            continue;
        }
        let results = match publisher.publish(&events).await {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(sequence = %change.sequence, error = %e, "events not published; the stream retries from here");
                return Ok(Some(change.sequence.clone()));
            }
        };
        for (event, failed) in events.iter().zip(&results) {
            match failed {
                None => {
                    tracing::info!(detail_type = event.detail_type, idempotency_key = %event.idempotency_key, "event published")
                }
                Some(reason) => {
                    tracing::error!(detail_type = event.detail_type, idempotency_key = %event.idempotency_key, reason = %reason, "event refused; the stream retries from here");
                    return Ok(Some(change.sequence.clone()));
                }
            }
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(pairs: &[(&str, Scalar)]) -> Snapshot {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect()
    }
    fn t(s: &str) -> Scalar {
        Scalar::Text(s.into())
    }
    fn n(s: &str) -> Scalar {
        Scalar::Number(s.into())
    }

    #[test]
    fn a_new_fulfilment_is_one_order_paid_keyed_by_the_invoice() {
        let f = item(&[
            ("pk", t("fulfilment#inv_1")),
            ("kind", t("fulfilment")),
            ("invoice_id", t("inv_1")),
            ("order_id", t("o-1")),
            ("amount", n("10.50")),
            ("currency", t("USDT")),
            ("status", t("paid")),
            ("won_by", t("evt_1")),
            ("fulfilled_at", n("1700000000000")),
        ]);
        let events = events_of(None, Some(&f), Environment::Live);
        assert_eq!(events.len(), 1);
        let e = &events[0];
        assert_eq!(
            (e.detail_type, e.idempotency_key.as_str()),
            ("Order Paid", "order-paid:inv_1")
        );
        assert_eq!(e.detail["amount"], "10.50", "money stays exact text");
        assert_eq!(e.detail["event_id"], "evt_1");
        assert_eq!(e.detail["environment"], "live");
        assert_eq!(e.detail["version"], DETAIL_VERSION);
        // The same item modified later (never happens, but a replay of it) publishes nothing.
        assert!(events_of(Some(&f), Some(&f), Environment::Live).is_empty());
    }

    #[test]
    fn only_transitions_publish() {
        let open = item(&[
            ("pk", t("inv_1")),
            ("kind", t("invoice")),
            ("status", t("confirming")),
        ]);
        let expired = item(&[
            ("pk", t("inv_1")),
            ("kind", t("invoice")),
            ("status", t("expired")),
        ]);
        let mut late = expired.clone();
        late.insert("paid_late_at".into(), n("5"));
        let closed = events_of(Some(&open), Some(&expired), Environment::Test);
        assert_eq!(closed.len(), 1);
        assert_eq!(closed[0].detail_type, "Invoice Closed");
        let review = events_of(Some(&expired), Some(&late), Environment::Test);
        assert_eq!(review.len(), 1);
        assert_eq!(
            review[0].idempotency_key,
            "payment-needs-review:inv_1:paid_late"
        );
        assert!(events_of(Some(&late), Some(&late), Environment::Test).is_empty());
        assert!(events_of(None, Some(&open), Environment::Test).is_empty());
    }

    #[test]
    fn every_published_detail_has_its_documented_fields() {
        let samples = [
            item(&[
                ("pk", t("fulfilment#inv_1")),
                ("kind", t("fulfilment")),
                ("invoice_id", t("inv_1")),
                ("won_by", t("manual:bob")),
            ]),
            item(&[
                ("pk", t("inv_2")),
                ("kind", t("invoice")),
                ("status", t("paid")),
                ("held", Scalar::Bool(true)),
                ("duplicate_of", t("inv_1")),
                ("paid_late_at", n("1")),
            ]),
            item(&[
                ("pk", t("inv_3")),
                ("kind", t("invoice")),
                ("status", t("cancelled")),
            ]),
            item(&[
                ("pk", t("review#evt_9")),
                ("kind", t("review")),
                ("reason", t("unconfirmed")),
                ("event_id", t("evt_9")),
            ]),
            item(&[
                ("pk", t("wdr_1")),
                ("kind", t("withdrawal")),
                ("status", t("completed")),
                ("type", t("refund")),
            ]),
            item(&[
                ("pk", t("wdr_2")),
                ("kind", t("withdrawal")),
                ("status", t("completed")),
                ("type", t("payout")),
            ]),
            item(&[
                ("pk", t("wdr_3")),
                ("kind", t("withdrawal")),
                ("status", t("failed")),
            ]),
            item(&[
                ("pk", t("pcd_1")),
                ("kind", t("deposit")),
                ("credited", Scalar::Bool(true)),
            ]),
        ];
        let mut seen = std::collections::BTreeSet::new();
        for s in &samples {
            for e in events_of(None, Some(s), Environment::Live) {
                let (_, fields) = DETAIL_TYPES
                    .iter()
                    .find(|(ty, _)| *ty == e.detail_type)
                    .unwrap_or_else(|| panic!("{} is documented", e.detail_type));
                let object = e.detail.as_object().unwrap();
                for f in fields.iter().chain(&COMMON_FIELDS) {
                    assert!(object.contains_key(*f), "{}: {f}", e.detail_type);
                }
                assert_eq!(
                    object.len(),
                    fields.len() + COMMON_FIELDS.len(),
                    "{}: exactly its documented fields",
                    e.detail_type
                );
                seen.insert(e.detail_type);
            }
        }
        assert_eq!(
            seen.len(),
            DETAIL_TYPES.len(),
            "every type was produced: {seen:?}"
        );
    }
}
