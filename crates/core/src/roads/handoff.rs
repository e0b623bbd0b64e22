//! The hand-off: the business facts this receiver decided, as events a merchant's systems can
//! route (EventBridge on AWS). Each is derived from a committed change of the state table (its
//! stream), so an event exists if and only if the fact was committed; each carries a stable
//! idempotency key, because it is delivered at least once.

use std::future::Future;

use serde_json::{Value, json};

use crate::money::change::Applying;
use crate::money::record::OperatorAction;
use crate::money::record::{
    DepositRecord, FulfilmentRecord, InvoiceRecord, ReviewRecord, StateRecord, WithdrawalRecord,
};
use crate::money::status::{Amount, InvoiceStatus, WithdrawalStatus};
use crate::port::PortError;

/// The `source` of every event.
pub const SOURCE: &str = "paymos-inbox";
/// The version of every detail schema (a breaking change bumps it; `schemas/` holds one JSON
/// Schema per detail type and version, and a test fails when a schema changes without it).
pub const DETAIL_VERSION: u64 = 5;

/// The fields every detail carries: the schema `version`, the fact's `idempotency_key` (one per
/// fact: unique to it, stable across re-publishing), the stack's `environment`, the commit
/// time `occurred_at` (Unix ms) and the merchant's `project_id` it is of (null where
/// merchant-wide or unknown; since version 4).
pub const COMMON_FIELDS: [&str; 5] = [
    "version",
    "idempotency_key",
    "environment",
    "occurred_at",
    "project_id",
];

/// Every `detail-type` published, with the fields of its detail, each present in every event
/// of its type (`null` where unknown), plus [`COMMON_FIELDS`]. README documents each, and
/// `schemas/` holds their JSON Schemas; tests keep all three in step.
pub const DETAIL_TYPES: [(&str, &[&str]); 9] = [
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
    (
        "Operator Action",
        &["kind", "actor", "subject", "reason", "result", "count"],
    ),
    // The one fact not derived from the state table: the deliverer publishes it when it
    // pauses a failing destination (`roads::endpoint`).
    (ENDPOINT_PAUSED, &["failing_since", "last_error"]),
];

/// The detail type of the fact that the deliverer paused itself (`roads::endpoint`, which
/// builds it, stands on this module: the detail types are said here, once).
pub const ENDPOINT_PAUSED: &str = "Endpoint Paused";

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
    /// The W3C `traceparent` of the delivery that committed it, when it carried one: the
    /// publisher sends it on beside the event (never in the detail, the merchant's contract).
    pub traceparent: Option<String>,
}

/// The slug of a detail type, the first part of its facts' ids (`Order Paid` → `order-paid`).
#[must_use]
pub fn slug(detail_type: &str) -> String {
    detail_type.to_ascii_lowercase().replace(' ', "-")
}

/// Optional text as JSON (`null` when absent).
fn opt(text: Option<&str>) -> Value {
    text.map_or(Value::Null, Value::from)
}

/// Money as JSON: the exact decimal text Paymos sent (a string, never a float).
fn money(amount: Option<&Amount>) -> Value {
    opt(amount.map(Amount::as_str))
}

/// The events a committed change of one state item means (`old` absent for a new item, `new`
/// absent for a removed one). Pure: replaying a change gives the same events and ids.
#[must_use]
pub fn events_of(
    old: Option<&StateRecord>,
    new: Option<&StateRecord>,
    stack: impl Into<Applying>,
) -> Vec<DomainEvent> {
    let stack = stack.into();
    let Some(new) = new else {
        return Vec::new();
    };
    let facts = match (old, new) {
        (None, StateRecord::Fulfilment(f)) => vec![order_paid(f)],
        (old, StateRecord::Invoice(i)) => invoice_facts(
            match old {
                Some(StateRecord::Invoice(o)) => Some(o),
                _ => None,
            },
            i,
        ),
        (None, StateRecord::Review(r)) => vec![review_needed(r)],
        // Once its action has answered (an entry is begun before it: nothing to say yet). The
        // hand-off's own switch and test stay in the audit trail: an `Operator Action` of
        // version 5 names no such kind, and the endpoint is paused by then anyway.
        (old, StateRecord::Action(a))
            if a.finished()
                && a.kind.published()
                && !matches!(old, Some(StateRecord::Action(o)) if o.finished()) =>
        {
            vec![operator_action(a)]
        }
        (old, StateRecord::Withdrawal(w)) => withdrawal_fact(
            match old {
                Some(StateRecord::Withdrawal(o)) => o.status,
                _ => None,
            },
            w,
        )
        .into_iter()
        .collect(),
        (old, StateRecord::Deposit(d))
            if d.credited && !matches!(old, Some(StateRecord::Deposit(o)) if o.credited) =>
        {
            vec![deposit_credited(d)]
        }
        _ => Vec::new(),
    };
    facts.into_iter().map(|fact| fact.event(&stack)).collect()
}

/// A fact before the fields every detail carries: its type, what names it within its type
/// (the resource, and a qualifier where one resource has several facts of one type), its own
/// fields and when it was committed.
struct Fact {
    detail_type: &'static str,
    parts: Vec<String>,
    detail: Value,
    at_ms: Option<u64>,
    /// The key scope of the project it is of (`None`: merchant-wide, or not known).
    scope: Option<Option<String>>,
}

impl Fact {
    fn event(self, stack: &Applying) -> DomainEvent {
        let environment = stack.environment;
        let key = std::iter::once(slug(self.detail_type))
            .chain(self.parts)
            .collect::<Vec<_>>()
            .join(":");
        let mut detail = self.detail;
        if let Value::Object(map) = &mut detail {
            map.insert("version".into(), Value::from(DETAIL_VERSION));
            map.insert("idempotency_key".into(), Value::from(key.clone()));
            let env = if environment.is_test() {
                "sandbox"
            } else {
                "live"
            };
            map.insert("environment".into(), Value::from(env));
            map.insert(
                "occurred_at".into(),
                self.at_ms.map_or(Value::Null, Value::from),
            );
            let project = self
                .scope
                .and_then(|scope| stack.projects.project_of(scope.as_deref()));
            map.insert("project_id".into(), opt(project.as_deref()));
        }
        DomainEvent {
            detail_type: self.detail_type,
            idempotency_key: key,
            detail,
            traceparent: None,
        }
    }
}

fn order_paid(f: &FulfilmentRecord) -> Fact {
    let manual = f.won_by.starts_with("manual:");
    Fact {
        detail_type: "Order Paid",
        parts: vec![f.invoice_id.clone()],
        detail: json!({"order_id": opt(f.order.external_id.as_deref()), "invoice_id": f.invoice_id,
                       "amount": money(f.order.amount.as_ref()), "currency": opt(f.order.currency.as_deref()),
                       "status": opt(f.status.map(InvoiceStatus::as_str)), "won_by": f.won_by,
                       "event_id": if manual { Value::Null } else { Value::from(f.won_by.as_str()) }}),
        at_ms: f.fulfilled_at_ms,
        scope: Some(f.order.project.clone()),
    }
}

/// What a change of an invoice's record means: each reason it newly waits for a person, and its
/// closing unpaid.
fn invoice_facts(old: Option<&InvoiceRecord>, new: &InvoiceRecord) -> Vec<Fact> {
    let (seen, was) = (&new.seen, old.map(|o| &o.seen));
    let invoice = &new.invoice_id;
    let order = opt(seen.order.external_id.as_deref());
    let review = |reason: &str, why: String| Fact {
        detail_type: "Payment Needs Review",
        parts: vec![invoice.clone(), reason.to_owned()],
        detail: json!({"reason": reason, "invoice_id": invoice, "order_id": order,
                       "amount": money(seen.order.amount.as_ref()),
                       "currency": opt(seen.order.currency.as_deref()), "why": why,
                       "event_id": Value::Null}),
        at_ms: new.updated_at_ms,
        scope: Some(seen.order.project.clone()),
    };
    let mut out = Vec::new();
    if seen.held && !was.is_some_and(|w| w.held) {
        // Why, where the rule that held it said (another order or project than its record).
        let why = seen.held_why.as_ref().map_or_else(
            || "paid, but not what the order was registered for".to_owned(),
            |why| format!("paid, held: {why}"),
        );
        out.push(review("held", why));
    }
    if seen.paid_late && !was.is_some_and(|w| w.paid_late) {
        out.push(review(
            "paid_late",
            "its payment arrived after the invoice closed".into(),
        ));
    }
    if let Some(first) = &seen.duplicate_of
        && was.is_none_or(|w| w.duplicate_of.is_none())
    {
        let why = if first == invoice {
            crate::money::outcome::PAID_AGAIN.to_owned()
        } else {
            format!("a second payment for an order {first} fulfilled: refund it")
        };
        out.push(review("duplicate_payment", why));
    }
    if let (Some(paymos), false) = (&seen.shipped_otherwise, seen.otherwise_settled)
        && was.is_none_or(|w| w.shipped_otherwise.is_none())
    {
        out.push(review(
            "order_conflict",
            format!("shipped here under another order than Paymos' invoice, which is of {paymos}: ship that one by hand and recover the other"),
        ));
    }
    if let Some(st) = seen.status
        && st.is_final()
        && !st.fulfils()
        && was.and_then(|w| w.status) != Some(st)
    {
        out.push(Fact {
            detail_type: "Invoice Closed",
            parts: vec![invoice.clone()],
            detail: json!({"invoice_id": invoice, "order_id": order, "status": st.as_str()}),
            at_ms: new.updated_at_ms,
            scope: Some(seen.order.project.clone()),
        });
    }
    out
}

/// A person's action, as the audit trail recorded it (merchant-wide: no project).
fn operator_action(a: &OperatorAction) -> Fact {
    Fact {
        detail_type: "Operator Action",
        parts: vec![
            a.at_ms.to_string(),
            a.kind.as_str().to_owned(),
            a.subject.clone(),
            a.actor.clone(),
        ],
        detail: json!({"kind": a.kind.as_str(), "actor": a.actor, "subject": a.subject,
                       "reason": opt(a.reason.as_deref()), "result": a.result, "count": a.count}),
        at_ms: Some(a.at_ms),
        scope: None,
    }
}

fn review_needed(r: &ReviewRecord) -> Fact {
    Fact {
        detail_type: "Payment Needs Review",
        parts: vec![r.event_id.clone(), r.reason.clone()],
        detail: json!({"reason": r.reason, "invoice_id": opt(r.resource_id.as_deref()),
                       "order_id": Value::Null, "amount": Value::Null, "currency": Value::Null,
                       "why": opt(r.why.as_deref()), "event_id": r.event_id}),
        at_ms: r.created_at_ms,
        scope: None,
    }
}

/// A withdrawal that newly completed or failed (`was`: its status before).
fn withdrawal_fact(was: Option<WithdrawalStatus>, w: &WithdrawalRecord) -> Option<Fact> {
    if was == w.status {
        return None;
    }
    let kind = w.kind.as_deref().unwrap_or("payout");
    let mut detail = json!({"withdrawal_id": w.withdrawal_id, "type": kind,
                            "invoice_id": opt(w.invoice_id.as_deref()),
                            "amount": money(w.amount.as_ref()), "currency": opt(w.currency.as_deref())});
    let detail_type = match (w.status?, kind) {
        (WithdrawalStatus::Completed, "refund") => {
            if let Value::Object(m) = &mut detail {
                m.remove("type");
            }
            "Refund Completed"
        }
        (WithdrawalStatus::Completed, _) => "Withdrawal Completed",
        (WithdrawalStatus::Failed, _) => "Withdrawal Failed",
        _ => return None,
    };
    Some(Fact {
        detail_type,
        parts: vec![w.withdrawal_id.clone()],
        detail,
        at_ms: w.updated_at_ms,
        scope: None,
    })
}

fn deposit_credited(d: &DepositRecord) -> Fact {
    Fact {
        detail_type: "Deposit Credited",
        parts: vec![d.deposit_id.clone()],
        detail: json!({"deposit_id": d.deposit_id, "payer": opt(d.payer.as_deref()),
                       "net": money(d.net.as_ref()), "currency": opt(d.currency.as_deref())}),
        at_ms: d.updated_at_ms,
        scope: Some(d.project.clone()),
    }
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

/// The state table read whole, as typed records (the hand-off's `events since`, the tools).
pub trait StateRecords: Send + Sync {
    /// Every item, as its record (a consistent read).
    ///
    /// # Errors
    /// [`PortError`] when the store fails.
    fn records(&self) -> impl Future<Output = Result<Vec<StateRecord>, PortError>> + Send;

    /// The records that changed at or after `since_ms` ([`StateRecord::at_ms`]), possibly with
    /// some older ones. By default every record, filtered; a store with an index of what
    /// changed when (DynamoDB's `listed`) reads only those.
    ///
    /// # Errors
    /// [`PortError`] when the store fails.
    fn changed_since(
        &self,
        since_ms: u64,
    ) -> impl Future<Output = Result<Vec<StateRecord>, PortError>> + Send {
        async move {
            let mut records = self.records().await?;
            records.retain(|r| r.at_ms().unwrap_or(0) >= since_ms);
            Ok(records)
        }
    }
}

/// Every event the facts committed since `since_ms` stand for, oldest first, as the stream
/// would have published them (same detail types, same keys): for a consumer that was down, or
/// a publication that ended in the on-failure queue.
///
/// # Errors
/// [`PortError`] when the store cannot be read.
pub async fn since<R: StateRecords>(
    store: &R,
    since_ms: u64,
    stack: impl Into<Applying>,
) -> Result<Vec<(u64, DomainEvent)>, PortError> {
    let mut records = store.changed_since(since_ms).await?;
    records.retain(|r| r.at_ms().unwrap_or(0) >= since_ms);
    Ok(committed(&records, stack))
}

/// Every event `records` stand for, each with its commit time ([`StateRecord::at_ms`]), oldest
/// first: each record read as the change that created it ([`events_of`] with no old image), so
/// the same detail types and keys the stream published. What [`since`] gives for the records it
/// reads, and `events resend --resource` for the few it reads by key.
#[must_use]
pub fn committed(records: &[StateRecord], stack: impl Into<Applying>) -> Vec<(u64, DomainEvent)> {
    let stack = stack.into();
    let mut out: Vec<(u64, DomainEvent)> = records
        .iter()
        .flat_map(|record| {
            let at = record.at_ms().unwrap_or(0);
            events_of(None, Some(record), &stack)
                .into_iter()
                .map(move |e| (at, e))
        })
        .collect();
    out.sort_by(|a, b| (a.0, &a.1.idempotency_key).cmp(&(b.0, &b.1.idempotency_key)));
    out
}

/// One committed change of the state table: its position in the stream and its images.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemChange {
    /// The stream's sequence number (what a retry starts from).
    pub sequence: String,
    /// The item before.
    pub old: Option<StateRecord>,
    /// The item after.
    pub new: Option<StateRecord>,
    /// The trace of the delivery whose write made this change, when it carried one: its
    /// events continue it.
    pub traceparent: Option<String>,
}

/// The most entries one `PutEvents` call takes.
pub const PUT_EVENTS_ENTRIES: usize = 10;
/// The most bytes one `PutEvents` call's entries may hold together (256 KiB): each entry
/// counts its source, detail type, detail and resources.
pub const PUT_EVENTS_BYTES: usize = 256 * 1024;
/// How many `PutEvents` calls of one stream batch are in flight at once: the batch's changes
/// are spread over this many lanes by the resource they are of, each lane in order.
pub const PUBLISH_LANES: usize = 4;

/// The resource a change's facts are of: an invoice and its fulfilment are one, so their
/// facts stay in order; an item deleted is of what it was.
#[must_use]
pub fn resource_of(change: &ItemChange) -> &str {
    match change.new.as_ref().or(change.old.as_ref()) {
        Some(StateRecord::Invoice(r)) => &r.invoice_id,
        Some(StateRecord::Fulfilment(r)) => &r.invoice_id,
        Some(StateRecord::Review(r)) => &r.event_id,
        Some(StateRecord::Withdrawal(r)) => &r.withdrawal_id,
        Some(StateRecord::Deposit(r)) => &r.deposit_id,
        Some(StateRecord::Balance(r)) => &r.payer,
        Some(StateRecord::Action(a)) => &a.subject,
        Some(StateRecord::Other { key, .. }) => key,
        None => "",
    }
}

/// The lane of a resource: the same one every time (FNV-1a of its id).
fn lane_of(resource: &str) -> usize {
    let hash = resource.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    usize::try_from(hash % PUBLISH_LANES as u64).expect("fewer lanes than usize holds")
}

/// An event's size as `PutEvents` counts it (its source, detail type, detail and resource).
fn entry_bytes(event: &DomainEvent) -> usize {
    SOURCE.len()
        + event.detail_type.len()
        + event.detail.to_string().len()
        + "paymos-inbox:".len()
        + event.idempotency_key.len()
}

/// `events` (each with its change's index) cut into `PutEvents` calls, in order: at most
/// [`PUT_EVENTS_ENTRIES`] entries and [`PUT_EVENTS_BYTES`] each.
fn calls(events: Vec<(usize, DomainEvent)>) -> Vec<Vec<(usize, DomainEvent)>> {
    let mut out: Vec<Vec<(usize, DomainEvent)>> = Vec::new();
    let mut bytes = 0;
    for (index, event) in events {
        let size = entry_bytes(&event);
        match out.last_mut() {
            Some(call) if call.len() < PUT_EVENTS_ENTRIES && bytes + size <= PUT_EVENTS_BYTES => {
                bytes += size;
                call.push((index, event));
            }
            _ => {
                bytes = size;
                out.push(vec![(index, event)]);
            }
        }
    }
    out
}

/// Publishes one lane's events, call after call; the index of the first change whose events
/// were not all accepted, if any (the lane stops there).
async fn publish_lane<P: EventPublisher>(
    publisher: &P,
    lane: Vec<(usize, DomainEvent)>,
    changes: &[ItemChange],
) -> Option<usize> {
    for call in calls(lane) {
        let events: Vec<DomainEvent> = call.iter().map(|(_, e)| e.clone()).collect();
        let results = match publisher.publish(&events).await {
            Ok(r) => r,
            Err(e) => {
                let first = call[0].0;
                tracing::error!(sequence = %changes[first].sequence, error = e.kind.as_str(), reason = %e, "events not published; the stream retries from here");
                return Some(first);
            }
        };
        let mut refused = None;
        for ((index, event), failed) in call.iter().zip(&results) {
            match failed {
                None => {
                    // The key names the kind (`order-paid:inv_…`): the line says it once.
                    tracing::info!(idempotency_key = %event.idempotency_key, "event published");
                }
                Some(reason) => {
                    tracing::error!(sequence = %changes[*index].sequence, detail_type = event.detail_type, idempotency_key = %event.idempotency_key, reason = %reason, "event refused; the stream retries from here");
                    refused = refused.or(Some(*index));
                }
            }
        }
        if results.len() < call.len() {
            refused = refused.or(Some(call[results.len()].0));
        }
        if refused.is_some() {
            return refused;
        }
    }
    None
}

/// Publishes the events of `changes`. Returns the sequence number of the first change whose
/// events were not all accepted, whether the publisher refused one of them or failed as a
/// whole (the stream is retried from there: events before it are not published twice by this
/// call, those after it may be, which their keys make harmless); `None` when all were.
///
/// The events go out in `PutEvents` calls of up to ten entries ([`calls`]), in
/// [`PUBLISH_LANES`] lanes at once: the changes of one resource share a lane, in the stream's
/// order, so one resource's facts are put in the order they were committed.
///
/// Never an error: a failed publication is exactly a change to retry from, and the failure is
/// logged here, with its kind, where that change is known.
pub async fn publish_changes<P: EventPublisher>(
    publisher: &P,
    changes: &[ItemChange],
    stack: impl Into<Applying>,
) -> Option<String> {
    let stack = stack.into();
    let mut lanes: Vec<Vec<(usize, DomainEvent)>> = vec![Vec::new(); PUBLISH_LANES];
    for (index, change) in changes.iter().enumerate() {
        let events = events_of(change.old.as_ref(), change.new.as_ref(), &stack);
        lanes[lane_of(resource_of(change))].extend(events.into_iter().map(|mut e| {
            e.traceparent.clone_from(&change.traceparent);
            (index, e)
        }));
    }
    let failed = futures::future::join_all(
        lanes
            .into_iter()
            .filter(|lane| !lane.is_empty())
            .map(|lane| publish_lane(publisher, lane, changes)),
    )
    .await;
    failed
        .into_iter()
        .flatten()
        .min()
        .map(|index| changes[index].sequence.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::money::change::OrderRef;
    use crate::money::invoice::InvoiceSeen;
    use crate::wire::signature::Environment;

    fn amount(a: &str) -> Option<Amount> {
        Amount::parse(a)
    }

    fn fulfilment(won_by: &str) -> StateRecord {
        StateRecord::Fulfilment(FulfilmentRecord {
            invoice_id: "inv_1".into(),
            order: OrderRef {
                external_id: Some("o-1".into()),
                amount: amount("10.50"),
                currency: Some("USDT".into()),
                project: None,
                home: false,
                unlisted: false,
            },
            status: Some(InvoiceStatus::Paid),
            won_by: won_by.into(),
            fulfilled_at_ms: Some(1_700_000_000_000),
        })
    }

    fn invoice(id: &str, status: InvoiceStatus) -> InvoiceRecord {
        InvoiceRecord {
            invoice_id: id.into(),
            seen: InvoiceSeen::with_status(Some(status)),
            updated_at_ms: Some(5),
        }
    }

    // A payment made after its own invoice's full refund (the order shipped before) is a
    // duplicate of that invoice: the review says it was paid again, not "a second payment for
    // an order inv_1 fulfilled"; another invoice's duplicate keeps saying which one shipped.
    #[test]
    fn a_duplicate_of_its_own_invoice_is_handed_off_as_paid_again() {
        let old = invoice("inv_1", InvoiceStatus::Paid);
        let mut again = invoice("inv_1", InvoiceStatus::Paid);
        again.seen.duplicate_of = Some("inv_1".into());
        let why = |new: &InvoiceRecord| {
            let state = |r: &InvoiceRecord| StateRecord::Invoice(r.clone());
            let facts = events_of(Some(&state(&old)), Some(&state(new)), Environment::Live);
            assert_eq!(facts.len(), 1, "{facts:?}");
            facts[0].detail["why"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        };
        assert_eq!(why(&again), crate::money::outcome::PAID_AGAIN);
        again.seen.duplicate_of = Some("inv_0".into());
        assert!(why(&again).contains("an order inv_0 fulfilled"));
    }

    fn action() -> OperatorAction {
        OperatorAction {
            kind: crate::money::record::ActionKind::Release,
            actor: "arn:aws:sts::123456789012:assumed-role/ops/alice".into(),
            at_ms: 1_796_169_600_000,
            reason: Some("price confirmed by email".into()),
            subject: "inv_1".into(),
            result: "fulfilled (amount overridden)".into(),
            count: None,
        }
    }

    // An operator's action is published once, when its entry appears with its
    // answer (written whole, as before entries were begun), under an id of its own; the entry
    // written again unchanged, or going (a TTL), publishes nothing.
    #[test]
    fn an_operator_action_publishes_once_when_its_entry_appears() {
        let entry = StateRecord::Action(action());
        let published = events_of(None, Some(&entry), Environment::Live);
        assert_eq!(published.len(), 1);
        let e = &published[0];
        assert_eq!(e.detail_type, "Operator Action");
        assert_eq!(
            e.idempotency_key,
            "operator-action:1796169600000:release:inv_1:arn:aws:sts::123456789012:assumed-role/ops/alice"
        );
        assert_eq!(
            e.detail["actor"],
            "arn:aws:sts::123456789012:assumed-role/ops/alice"
        );
        assert_eq!(e.detail["reason"], "price confirmed by email");
        assert_eq!(e.detail["count"], serde_json::Value::Null);
        assert_eq!(e.detail["project_id"], serde_json::Value::Null);
        assert!(events_of(Some(&entry), Some(&entry), Environment::Live).is_empty());
        assert!(events_of(Some(&entry), None, Environment::Live).is_empty());
    }

    // Record before work: an entry begun before its action publishes nothing; the action's
    // answer publishes it, once, with that answer and the same key.
    #[test]
    fn a_begun_entry_is_published_when_its_action_answers() {
        let done = action();
        let begun = StateRecord::Action(OperatorAction::begun(
            done.kind,
            (&done.actor, done.at_ms),
            &done.subject,
            done.reason.as_deref(),
        ));
        assert!(events_of(None, Some(&begun), Environment::Live).is_empty());
        let finished = StateRecord::Action(done);
        let published = events_of(Some(&begun), Some(&finished), Environment::Live);
        assert_eq!(published.len(), 1);
        assert_eq!(
            published[0].detail["result"], "fulfilled (amount overridden)",
            "{published:?}"
        );
        assert_eq!(
            published[0].idempotency_key,
            events_of(None, Some(&finished), Environment::Live)[0].idempotency_key
        );
    }

    fn withdrawal(id: &str, status: WithdrawalStatus, kind: Option<&str>) -> StateRecord {
        StateRecord::Withdrawal(WithdrawalRecord {
            withdrawal_id: id.into(),
            status: Some(status),
            kind: kind.map(str::to_owned),
            invoice_id: None,
            amount: None,
            currency: None,
            updated_at_ms: None,
        })
    }

    #[test]
    fn a_new_fulfilment_is_one_order_paid_keyed_by_the_invoice() {
        let f = fulfilment("evt_1");
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
        assert_eq!(e.detail["occurred_at"], 1_700_000_000_000_u64);
        // The same item modified later (never happens, but a replay of it) publishes nothing.
        assert!(events_of(Some(&f), Some(&f), Environment::Live).is_empty());
        let by_hand = events_of(None, Some(&fulfilment("manual:bob")), Environment::Test);
        assert_eq!(by_hand[0].detail["event_id"], Value::Null);
        assert_eq!(by_hand[0].detail["environment"], "sandbox");
    }

    #[test]
    fn an_invoice_shipped_otherwise_needs_review_once_until_settled() {
        let paid = invoice("inv_1", InvoiceStatus::Paid);
        let mut otherwise = paid.clone();
        otherwise.seen.shipped_otherwise = Some("order o-2 of prj_a".into());
        let mut settled = otherwise.clone();
        settled.seen.otherwise_settled = true;
        let [paid, otherwise, settled] = [paid, otherwise, settled].map(StateRecord::Invoice);
        let review = events_of(Some(&paid), Some(&otherwise), Environment::Live);
        assert_eq!(review.len(), 1);
        assert_eq!(
            review[0].idempotency_key,
            "payment-needs-review:inv_1:order_conflict"
        );
        assert!(
            review[0].detail["why"]
                .as_str()
                .is_some_and(|w| w.contains("order o-2 of prj_a"))
        );
        assert!(events_of(Some(&otherwise), Some(&otherwise), Environment::Live).is_empty());
        assert!(events_of(Some(&otherwise), Some(&settled), Environment::Live).is_empty());
    }

    #[test]
    fn only_transitions_publish() {
        let open = invoice("inv_1", InvoiceStatus::Confirming);
        let expired = invoice("inv_1", InvoiceStatus::Expired);
        let mut late = expired.clone();
        late.seen.paid_late = true;
        let [open, expired, late] = [open, expired, late].map(StateRecord::Invoice);
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
        assert!(events_of(Some(&open), None, Environment::Test).is_empty());
        let sent = withdrawal("wdr_1", WithdrawalStatus::Completed, None);
        assert_eq!(
            events_of(None, Some(&sent), Environment::Live)[0].detail["type"],
            "payout",
            "a withdrawal without its type is a payout"
        );
        assert!(events_of(Some(&sent), Some(&sent), Environment::Live).is_empty());
        let pending = withdrawal("wdr_1", WithdrawalStatus::Processing, None);
        assert!(events_of(None, Some(&pending), Environment::Live).is_empty());
    }

    #[test]
    fn every_published_detail_has_its_documented_fields() {
        let mut held = invoice("inv_2", InvoiceStatus::Paid);
        held.seen.held = true;
        held.seen.duplicate_of = Some("inv_1".into());
        held.seen.paid_late = true;
        let samples = [
            fulfilment("manual:bob"),
            StateRecord::Invoice(held),
            StateRecord::Invoice(invoice("inv_3", InvoiceStatus::Cancelled)),
            StateRecord::Review(ReviewRecord {
                event_id: "evt_9".into(),
                reason: "unconfirmed".into(),
                resource_id: None,
                why: None,
                created_at_ms: None,
            }),
            withdrawal("wdr_1", WithdrawalStatus::Completed, Some("refund")),
            withdrawal("wdr_2", WithdrawalStatus::Completed, Some("payout")),
            withdrawal("wdr_3", WithdrawalStatus::Failed, None),
            StateRecord::Deposit(DepositRecord {
                deposit_id: "pcd_1".into(),
                status: Some(crate::money::status::DepositStatus::Confirmed),
                credited: true,
                payer: None,
                net: None,
                currency: None,
                updated_at_ms: None,
                project: None,
            }),
            StateRecord::Action(action()),
        ];
        let mut seen = std::collections::BTreeSet::new();
        let paused = crate::roads::endpoint::endpoint_paused(Environment::Live, 1, "503", 2);
        for s in &samples {
            let events = events_of(None, Some(s), Environment::Live);
            for e in events
                .into_iter()
                .chain(matches!(s, StateRecord::Action(_)).then(|| paused.clone()))
            {
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
    #[test]
    fn a_payment_waiting_for_its_project_is_handed_off_for_review() {
        // Version 4 named no `project_unknown` reason, so such a payment was listed and alarmed
        // but never handed off: the merchant's systems heard nothing of a payment that waits.
        let review = StateRecord::Review(ReviewRecord {
            event_id: "evt_11".into(),
            reason: "project_unknown".into(),
            resource_id: Some("inv_11".into()),
            why: Some(crate::money::change::PROJECT_UNKNOWN.into()),
            created_at_ms: Some(7),
        });
        let facts = events_of(None, Some(&review), Environment::Live);
        assert_eq!(facts.len(), 1);
        assert_eq!(facts[0].detail_type, "Payment Needs Review");
        assert_eq!(
            facts[0].idempotency_key,
            "payment-needs-review:evt_11:project_unknown"
        );
        assert_eq!(facts[0].detail["reason"], "project_unknown");
        assert_eq!(facts[0].detail["invoice_id"], "inv_11");
    }

    #[test]
    fn a_review_note_a_held_payment_and_a_credit_each_publish_once_when_they_appear() {
        let review = StateRecord::Review(ReviewRecord {
            event_id: "evt_9".into(),
            reason: "unconfirmed".into(),
            resource_id: Some("inv_9".into()),
            why: Some("not at Paymos".into()),
            created_at_ms: Some(7),
        });
        let noted = events_of(None, Some(&review), Environment::Live);
        assert_eq!(noted.len(), 1);
        assert_eq!(
            noted[0].idempotency_key,
            "payment-needs-review:evt_9:unconfirmed"
        );
        assert_eq!(noted[0].detail["invoice_id"], "inv_9");
        assert_eq!(noted[0].detail["event_id"], "evt_9");
        assert!(events_of(Some(&review), Some(&review), Environment::Live).is_empty());

        let paid = invoice("inv_h", InvoiceStatus::Paid);
        let mut held = paid.clone();
        held.seen.held = true;
        let [paid, held] = [paid, held].map(StateRecord::Invoice);
        let newly = events_of(Some(&paid), Some(&held), Environment::Live);
        assert_eq!(newly.len(), 1);
        assert_eq!(newly[0].idempotency_key, "payment-needs-review:inv_h:held");
        assert_eq!(
            newly[0].detail["why"],
            "paid, but not what the order was registered for"
        );
        assert!(events_of(Some(&held), Some(&held), Environment::Live).is_empty());
        // Held for another order or project than its record (attack H7): it says why, never
        // the price the order was registered for.
        let StateRecord::Invoice(mut disputed) = held.clone() else {
            unreachable!()
        };
        disputed.seen.held_why =
            Some("the payment names order o-2, the invoice's record order o-1".into());
        let StateRecord::Invoice(before) = paid.clone() else {
            unreachable!()
        };
        let said = invoice_facts(Some(&before), &disputed);
        assert_eq!(
            said[0].detail["why"],
            "paid, held: the payment names order o-2, the invoice's record order o-1"
        );

        let deposit = |credited| {
            StateRecord::Deposit(DepositRecord {
                deposit_id: "pcd_1".into(),
                status: None,
                credited,
                payer: Some("c-1".into()),
                net: amount("99.00"),
                currency: Some("TRX".into()),
                updated_at_ms: None,
                project: None,
            })
        };
        let (seen, credited) = (deposit(false), deposit(true));
        assert!(events_of(None, Some(&seen), Environment::Live).is_empty());
        let credit = events_of(Some(&seen), Some(&credited), Environment::Live);
        assert_eq!(credit.len(), 1);
        assert_eq!(credit[0].detail["net"], "99.00");
        assert!(events_of(Some(&credited), Some(&credited), Environment::Live).is_empty());
    }

    #[tokio::test]
    async fn a_refused_event_stops_the_batch_at_its_change_and_a_failed_bus_at_the_first() {
        use crate::testkit::memory::MemoryPublisher;
        let change = |sequence: &str, invoice: &str| ItemChange {
            sequence: sequence.into(),
            traceparent: None,
            old: None,
            new: Some(StateRecord::Fulfilment(FulfilmentRecord {
                invoice_id: invoice.into(),
                ..match fulfilment("evt_1") {
                    StateRecord::Fulfilment(f) => f,
                    _ => unreachable!(),
                }
            })),
        };
        let quiet = ItemChange {
            sequence: "0".into(),
            traceparent: None,
            old: None,
            new: Some(StateRecord::Invoice(invoice(
                "inv_0",
                InvoiceStatus::Confirming,
            ))),
        };
        let batch = [
            quiet,
            change("1", "inv_a"),
            change("2", "inv_b"),
            change("3", "inv_c"),
        ];
        let bus = MemoryPublisher::new();
        bus.refuse("order-paid:inv_b");
        let failed = publish_changes(&bus, &batch, Environment::Live).await;
        assert_eq!(
            failed.as_deref(),
            Some("2"),
            "retried from the refused change"
        );
        let published = bus.published();
        assert!(
            published.contains(&"order-paid:inv_a".to_owned()),
            "{published:?}"
        );
        assert!(
            !published.contains(&"order-paid:inv_b".to_owned()),
            "{published:?}"
        );
        let bus = MemoryPublisher::new();
        bus.set_down(true);
        let failed = publish_changes(&bus, &batch, Environment::Live).await;
        assert_eq!(failed.as_deref(), Some("1"), "the first change with events");
        bus.set_down(false);
        assert_eq!(publish_changes(&bus, &batch, Environment::Live).await, None);
        assert_eq!(bus.published().len(), 3);
    }

    /// A stream batch of `n` fulfilments, each of its own invoice, then a second change of
    /// each (a late payment to review), so each resource has two facts in order.
    fn fulfilments_then_closes(n: usize) -> Vec<ItemChange> {
        let paid = |i: usize| ItemChange {
            sequence: format!("{i:04}"),
            traceparent: None,
            old: None,
            new: Some(StateRecord::Fulfilment(FulfilmentRecord {
                invoice_id: format!("inv_{i}"),
                ..match fulfilment("evt_1") {
                    StateRecord::Fulfilment(f) => f,
                    _ => unreachable!(),
                }
            })),
        };
        let closed = |i: usize| {
            let old = invoice(&format!("inv_{i}"), InvoiceStatus::Expired);
            let mut new = old.clone();
            new.seen.paid_late = true;
            ItemChange {
                sequence: format!("{:04}", n + i),
                traceparent: None,
                old: Some(StateRecord::Invoice(old)),
                new: Some(StateRecord::Invoice(new)),
            }
        };
        (0..n).map(paid).chain((0..n).map(closed)).collect()
    }

    // One `PutEvents` a change, one after the other, fell behind at about 50 changes
    // a second a shard. The batch's events go out ten to a call, four calls in flight, and
    // one resource's facts in the order they were committed.
    #[tokio::test]
    async fn a_stream_batch_is_put_ten_events_a_call_in_lanes_and_each_resource_in_order() {
        use crate::testkit::memory::MemoryPublisher;
        let batch = fulfilments_then_closes(50);
        let events: usize = batch
            .iter()
            .map(|c| events_of(c.old.as_ref(), c.new.as_ref(), Environment::Live).len())
            .sum();
        assert!(events >= 100, "the mix makes {events} events");
        let bus = MemoryPublisher::new();
        assert_eq!(publish_changes(&bus, &batch, Environment::Live).await, None);
        let published = bus.published();
        assert_eq!(published.len(), events, "every event once");
        let calls = bus.calls();
        assert!(
            calls.iter().all(|&n| (1..=PUT_EVENTS_ENTRIES).contains(&n)),
            "{calls:?}"
        );
        assert!(
            calls.len() <= events / PUT_EVENTS_ENTRIES + PUBLISH_LANES,
            "{} calls for {events} events: {calls:?}",
            calls.len()
        );
        assert_eq!(bus.most_in_flight(), PUBLISH_LANES, "the lanes put at once");
        for i in 0..50 {
            let at = |key: &str| published.iter().position(|p| p == key);
            let paid = at(&format!("order-paid:inv_{i}")).expect("its order paid");
            let after: Vec<usize> = published
                .iter()
                .enumerate()
                .filter(|(_, k)| k.as_str() == format!("payment-needs-review:inv_{i}:paid_late"))
                .map(|(at, _)| at)
                .collect();
            assert!(
                !after.is_empty() && after.iter().all(|&a| a > paid),
                "inv_{i}: {published:?}"
            );
        }
    }

    #[test]
    fn a_call_holds_at_most_ten_entries_and_256_kib() {
        let event = |bytes: usize| DomainEvent {
            detail_type: "Order Paid",
            traceparent: None,
            idempotency_key: "order-paid:inv_1".into(),
            detail: json!({"pad": "x".repeat(bytes)}),
        };
        let small: Vec<_> = (0..25).map(|i| (i, event(10))).collect();
        let sizes: Vec<usize> = calls(small).iter().map(Vec::len).collect();
        assert_eq!(sizes, [10, 10, 5]);
        let large: Vec<_> = (0..5).map(|i| (i, event(100 * 1024))).collect();
        let cut = calls(large);
        assert_eq!(cut.iter().map(Vec::len).collect::<Vec<_>>(), [2, 2, 1]);
        for call in &cut {
            let bytes: usize = call.iter().map(|(_, e)| entry_bytes(e)).sum();
            assert!(bytes <= PUT_EVENTS_BYTES, "{bytes}");
        }
        let order: Vec<usize> = cut.iter().flatten().map(|(i, _)| *i).collect();
        assert_eq!(order, [0, 1, 2, 3, 4], "in order");
    }
}
