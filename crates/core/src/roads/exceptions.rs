//! Every payment waiting for a person, and the ways out: [`list`] names each with why, since
//! when and what to do; [`release`] fulfils a held, late or unconfirmed payment on a person's
//! word; [`recheck`] runs the reverse check again for unconfirmed deliveries of every category
//! (invoices, refunds, payouts, deposits) and applies what Paymos now confirms. Their ports: the
//! state table ([`ExceptionStore`]) and the deliveries ledger's reviews ([`ReviewLedger`]).

use std::future::Future;

pub use crate::money::change::Applying;
use crate::money::change::{Applied, Change, OrderRef, Source, change_of};
use crate::money::effect::FulfilmentEffect;
use crate::money::invoice::{InvoiceSeen, Standing};
use crate::money::record::InvoiceRecord;
use crate::money::status::InvoiceStatus;
use crate::roads::confirm::{PaymentConfirmation, Verdict, check};
use crate::roads::fulfil::{
    Fulfil, ResourceStore, close_then_pay, settle_confirmed, settle_saying,
};
use crate::roads::ingest::{Delivery, PortError};
use crate::roads::release::{Named, ReleaseBy, ReleaseError, ReleaseStore, release_named};
use crate::wire::envelope::Envelope;
use crate::wire::signature::Environment;

pub use crate::money::change::DELIVERY_OUTCOMES;

/// How a person's road resolved a delivery that waited: its new outcome in the ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    /// Its payment was released by hand.
    Released,
    /// Re-checked at Paymos and applied with this outcome.
    Rechecked(Applied),
    /// Re-checked at Paymos, which contradicts it (a change that pays nothing).
    Refuted,
    /// Confirmed, but its order is known nowhere: it waits for its order now.
    WaitsForOrder,
    /// Settled by a person outside the stack (an order conflict, an unusable delivery applied
    /// by hand), who says so ([`resolve`]).
    ByHand,
}

impl Resolution {
    /// The stored name (`released`, `rechecked_<outcome>`, `rechecked_refuted`,
    /// `order_unknown`).
    #[must_use]
    pub fn name(self) -> String {
        match self {
            Self::Released => "released".into(),
            Self::Rechecked(applied) => format!("rechecked_{applied}"),
            Self::Refuted => "rechecked_refuted".into(),
            Self::WaitsForOrder => Applied::OrderUnknown.as_str().into(),
            Self::ByHand => "resolved_by_hand".into(),
        }
    }

    /// The outcome a person still acts on after this resolution, if any: a confirmed payment
    /// whose order is known nowhere waits for its order (`mark-paid --order-id`); every other
    /// resolution takes the delivery off what waits. Every ledger lists by this rule.
    #[must_use]
    pub fn still_waits(self) -> Option<Applied> {
        match self {
            Self::WaitsForOrder => Some(Applied::OrderUnknown),
            Self::Released | Self::Rechecked(_) | Self::Refuted | Self::ByHand => None,
        }
    }
}

/// A processed delivery whose outcome waits for a person (`unconfirmed`, `unusable`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutcomeRecord {
    /// The delivery as recorded (with its exact body).
    pub delivery: Delivery,
    /// Its outcome.
    pub outcome: Applied,
    /// Why, when recorded.
    pub reason: Option<String>,
    /// When it was processed (Unix ms).
    pub processed_at_ms: u64,
}

/// The state table, as the operator's use cases read it.
pub trait ExceptionStore: ResourceStore + ReleaseStore {
    /// Invoices whose payment waits for a person ([`Standing::waits_for_person`]).
    ///
    /// # Errors
    /// [`PortError`] when the store fails.
    fn invoices_under_review(
        &self,
    ) -> impl Future<Output = Result<Vec<InvoiceRecord>, PortError>> + Send;
}

impl<T: ExceptionStore> ExceptionStore for std::sync::Arc<T> {
    fn invoices_under_review(
        &self,
    ) -> impl Future<Output = Result<Vec<InvoiceRecord>, PortError>> + Send {
        (**self).invoices_under_review()
    }
}

/// The deliveries ledger's reviews: what waits, and the note that a person or a re-check
/// resolved it.
pub trait ReviewLedger: Send + Sync {
    /// Every processed delivery with one of `outcomes` (of one resource, or all), oldest first.
    ///
    /// # Errors
    /// [`PortError`] when the ledger fails.
    fn with_outcomes(
        &self,
        outcomes: &[Applied],
        resource_id: Option<&str>,
    ) -> impl Future<Output = Result<Vec<OutcomeRecord>, PortError>> + Send;

    /// Notes that the delivery under `key` ([`crate::roads::ingest::delivery_key`]) was resolved (how,
    /// by whom, when), so it leaves the list.
    ///
    /// # Errors
    /// [`PortError`] when the ledger fails.
    fn mark_resolved(
        &self,
        key: &str,
        resolution: Resolution,
        by: &str,
        at_ms: u64,
    ) -> impl Future<Output = Result<(), PortError>> + Send;
}

/// One thing waiting for a person.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Exception {
    /// `held`, `paid_late`, `duplicate_payment`, `unconfirmed`, `unusable`, `dead_letter`.
    pub kind: &'static str,
    /// The invoice (or other resource) it is about, when known.
    pub resource_id: Option<String>,
    /// The delivery it is about, when known.
    pub event_id: Option<String>,
    /// The project it is of, where it is not the stack's first: an order id means something
    /// only within its project.
    pub project: Option<String>,
    /// Since when (Unix ms).
    pub since_ms: u64,
    /// Why it waits.
    pub why: String,
    /// What to do.
    pub action: String,
}

/// What a waiting delivery would change, and so its way out.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Pending {
    /// A payment (`invoice.paid`, `invoice.paid_over`) naming `order`: recheck (never a release:
    /// a forgery names an order just the same).
    Payment { invoice_id: String, order: OrderRef },
    /// Any other invoice status (a closure, an open status): it pays nothing; recheck.
    InvoiceStatus { invoice_id: String },
    /// A refund (of `invoice_id`, when it names one): recheck; its invoice ships nothing
    /// meanwhile.
    Refund {
        withdrawal_id: String,
        invoice_id: Option<String>,
    },
    /// A payout: recheck.
    Payout { withdrawal_id: String },
    /// A deposit: recheck (it credits its payer once).
    Deposit { deposit_id: String },
    /// A body that reads as no change (applied by hand).
    Other,
}

impl Pending {
    fn of(change: &Change) -> Self {
        match change {
            Change::Invoice {
                invoice_id,
                status,
                order,
                ..
            } if status.fulfils() => Self::Payment {
                invoice_id: invoice_id.clone(),
                order: order.clone(),
            },
            Change::Invoice { invoice_id, .. } => Self::InvoiceStatus {
                invoice_id: invoice_id.clone(),
            },
            Change::Withdrawal {
                withdrawal_id,
                kind,
                invoice_id,
                ..
            } if kind == "refund" => Self::Refund {
                withdrawal_id: withdrawal_id.clone(),
                invoice_id: invoice_id.clone(),
            },
            Change::Withdrawal { withdrawal_id, .. } => Self::Payout {
                withdrawal_id: withdrawal_id.clone(),
            },
            Change::Deposit { deposit_id, .. } => Self::Deposit {
                deposit_id: deposit_id.clone(),
            },
            _ => Self::Other,
        }
    }

    /// The refund it is of `invoice_id`, if it is one.
    fn refund_of(&self, invoice_id: &str) -> Option<&str> {
        match self {
            Self::Refund {
                withdrawal_id,
                invoice_id: Some(refunded),
            } if refunded == invoice_id => Some(withdrawal_id),
            _ => None,
        }
    }

    /// The payment it is of `invoice_id`, if it is one.
    fn payment_of(&self, invoice_id: &str) -> Option<&OrderRef> {
        match self {
            Self::Payment {
                invoice_id: paid,
                order,
            } if paid == invoice_id => Some(order),
            _ => None,
        }
    }
}

/// A delivery that waits for a person, its body read once.
struct Waiting {
    record: OutcomeRecord,
    read: Option<(Envelope, Change)>,
    pending: Pending,
}

impl Waiting {
    fn read(record: OutcomeRecord) -> Self {
        let read = Envelope::parse(&record.delivery.body).ok().map(|envelope| {
            let change = change_of(&envelope);
            (envelope, change)
        });
        let pending = read
            .as_ref()
            .map_or(Pending::Other, |(_, c)| Pending::of(c));
        Self {
            record,
            read,
            pending,
        }
    }

    fn unconfirmed(&self) -> bool {
        self.record.outcome == Applied::Unconfirmed
    }

    fn order_unknown(&self) -> bool {
        self.record.outcome == Applied::OrderUnknown
    }

    fn project_unknown(&self) -> bool {
        self.record.outcome == Applied::ProjectUnknown
    }

    fn order_conflict(&self) -> bool {
        self.record.outcome == Applied::OrderConflict
    }

    /// Whether a re-check of `resource_id` reads it: its own resource, or a refund of that
    /// invoice.
    fn concerns(&self, resource_id: &str) -> bool {
        self.record.delivery.resource_id.as_deref() == Some(resource_id)
            || self.pending.refund_of(resource_id).is_some()
    }
}

/// Whether what a waiting delivery of an invoice asked for was settled since, by its invoice's
/// record: nothing of it waits any more (neither `exceptions` lists it nor `recheck` asks
/// Paymos about it again).
async fn settled_since<S: ExceptionStore>(
    store: &S,
    delivery: &Waiting,
) -> Result<bool, PortError> {
    let resource = delivery.record.delivery.resource_id.as_deref();
    let Some(invoice) = resource.filter(|r| r.starts_with("inv_")) else {
        return Ok(false);
    };
    let (seen, fulfilled) = store.invoice_seen(invoice).await?;
    // Fulfilled since (released, reconciled, or another event); an order conflict is of a
    // fulfilled invoice, and waits until a person resolves it.
    if fulfilled && !delivery.order_conflict() {
        return Ok(true);
    }
    // A payment of an order known nowhere, applied since under its order (held, a duplicate,
    // late, refunded): the invoice's own line says what waits now. A refund settles it only if
    // it returned this payment (by Paymos' clock): a payment made after a full refund is a new
    // one, and still waits for its order.
    let paid_at = delivery.read.as_ref().map(|(e, _)| e.occurred_at);
    let paid_since = seen.as_ref().is_some_and(|s| {
        s.status.is_some_and(InvoiceStatus::fulfils)
            || s.paid_late
            || s.refunded_in_full_at(s.payment_at.or(paid_at))
    });
    if (delivery.order_unknown() || delivery.project_unknown()) && paid_since {
        return Ok(true);
    }
    // A person named its project (`mark-paid --project`): the invoice's own line says what
    // waits now (its order).
    Ok(delivery.project_unknown()
        && seen.is_some_and(|s| s.awaits_order && s.order.names_project()))
}

/// Every delivery with one of `outcomes`, read, oldest first.
async fn waiting<L: ReviewLedger>(
    ledger: &L,
    outcomes: &[Applied],
) -> Result<Vec<Waiting>, PortError> {
    Ok(ledger
        .with_outcomes(outcomes, None)
        .await?
        .into_iter()
        .map(Waiting::read)
        .collect())
}

/// The unconfirmed refund of `invoice_id` among `waiting`, if one waits.
fn refund_waiting<'a>(waiting: &'a [Waiting], invoice_id: &str) -> Option<&'a str> {
    waiting
        .iter()
        .filter(|w| w.unconfirmed())
        .find_map(|w| w.pending.refund_of(invoice_id))
}

/// What the unconfirmed deliveries among `waiting` say of `invoice_id`, for a release: a refund
/// of it first, then its latest payment, then a change of it that pays nothing.
fn named(invoice_id: &str, waiting: &[Waiting]) -> Named {
    if let Some(withdrawal_id) = refund_waiting(waiting, invoice_id) {
        return Named::Refund(withdrawal_id.to_owned());
    }
    let unconfirmed = || waiting.iter().filter(|w| w.unconfirmed());
    if let Some(order) = unconfirmed()
        .rev()
        .find_map(|w| w.pending.payment_of(invoice_id))
    {
        return Named::Payment(order.clone());
    }
    unconfirmed()
        .find(|w| matches!(&w.pending, Pending::InvoiceStatus { invoice_id: i } if i == invoice_id))
        .map_or(Named::Nothing, |w| {
            Named::NoPayment(w.record.delivery.event_type.clone())
        })
}

/// The action while a refund of the invoice (`withdrawal_id`) waits unconfirmed.
fn refund_first(withdrawal_id: &str) -> String {
    format!(
        "a refund of it ({withdrawal_id}) waits unconfirmed, so the order may have been paid back: `paymos-inbox recheck {withdrawal_id}` first, then see what is left"
    )
}

/// Lists every exception: invoices under review, deliveries with an outcome that needs a
/// person (unless their invoice was fulfilled since), and `dead_letters` messages in the DLQ;
/// oldest first. Each names its way out: an unconfirmed payment is rechecked, then released if
/// genuine; every other unconfirmed delivery (a closure, a refund, a payout, a deposit) is
/// rechecked; nothing about an invoice whose refund waits unconfirmed invites its release.
///
/// # Errors
/// [`PortError`] when the store or the ledger fails.
pub async fn list<S: ExceptionStore, L: ReviewLedger>(
    store: &S,
    ledger: &L,
    dead_letters: u64,
) -> Result<Vec<Exception>, PortError> {
    let deliveries = waiting(ledger, &DELIVERY_OUTCOMES).await?;
    let mut out = Vec::new();
    for inv in store.invoices_under_review().await? {
        let sibling = sibling(store, &inv).await?;
        let refund = refund_waiting(&deliveries, &inv.invoice_id);
        out.push(invoice_exception(&inv, refund, &sibling));
    }
    for delivery in &deliveries {
        if !settled_since(store, delivery).await? {
            out.push(delivery_exception(delivery, &deliveries));
        }
    }
    if dead_letters > 0 {
        out.push(Exception {
            kind: "dead_letter",
            resource_id: None,
            event_id: None,
            project: None,
            since_ms: 0,
            why: format!(
                "{} in the dead-letter queue: applying failed five times",
                if dead_letters == 1 {
                    "1 message".to_owned()
                } else {
                    format!("{dead_letters} messages")
                }
            ),
            action: "read the fulfil logs for the cause, fix it, then `paymos-inbox redrive`"
                .into(),
        });
    }
    out.sort_by_key(|e| e.since_ms);
    Ok(out)
}

/// What another invoice of the same order changes in an invoice's line.
enum Sibling {
    /// Nothing.
    None,
    /// The order shipped with this other invoice: a release of this one is refused.
    ShippedWith(String),
    /// The invoice that fulfilled the order (this one a second payment of it) was refunded in
    /// full: this payment may be what pays for the shipped order now.
    FirstRefunded,
}

/// What the other invoice of `inv`'s order says (one read, for a line that would offer a
/// release or a refund).
async fn sibling<S: ExceptionStore>(store: &S, inv: &InvoiceRecord) -> Result<Sibling, PortError> {
    let seen = &inv.seen;
    match seen.standing() {
        // Paid again after its own full refund: its earlier payment was refunded in full.
        Standing::DuplicateOf(first) if first == inv.invoice_id => Ok(Sibling::FirstRefunded),
        Standing::DuplicateOf(first) => {
            let (first_seen, _) = store.invoice_seen(&first).await?;
            Ok(if first_seen.is_some_and(|s| s.refunded_in_full()) {
                Sibling::FirstRefunded
            } else {
                Sibling::None
            })
        }
        Standing::PaidLate | Standing::Held | Standing::AfterRefund => {
            let Some(order) = &seen.order.external_id else {
                return Ok(Sibling::None);
            };
            let key = crate::money::write::order_paid_key(seen.order.project.as_deref(), order);
            let claim = store.read(&crate::money::write::Key::state(key)).await?;
            let winner = claim.as_ref().and_then(|f| {
                f.get(&crate::money::write::Field::InvoiceId)
                    .and_then(crate::money::write::Value::as_text)
            });
            Ok(match winner {
                Some(other) if other != inv.invoice_id => Sibling::ShippedWith(other.to_owned()),
                _ => Sibling::None,
            })
        }
        _ => Ok(Sibling::None),
    }
}

/// A second payment's line (`id` paying `order`, which `first` fulfilled): refund it, unless
/// the first's payment was refunded in full, when it may be what pays for the order now.
fn duplicate_line(
    (id, order, first): (&str, &str, &str),
    paid: &str,
    refunded: &str,
    sibling: &Sibling,
) -> (String, String) {
    if matches!(sibling, Sibling::FirstRefunded) {
        return (
            format!(
                "a second payment ({paid}) for order {order}, which {first} fulfilled; {first}'s payment was refunded in full, so this one may be what pays for the order now{refunded}"
            ),
            format!(
                "refund {id} in full if the customer is owed it (its completed refund clears this); if order {order} shipped and stays with the customer, this payment is what pays for it: keep it (nothing ships again; the line stays until a refund)"
            ),
        );
    }
    (
        format!("a second payment ({paid}) for order {order}, which {first} fulfilled{refunded}"),
        format!("refund {id} at Paymos in full; its completed refund clears this"),
    )
}

/// The way out of a payment whose order is known nowhere: a person names it (and its project,
/// where the record names none: a stack of several projects needs it).
fn name_the_order(id: &str, recorded: &crate::money::change::OrderRef) -> String {
    let project = if recorded.names_project() {
        ""
    } else {
        " --project <prj_…, where the stack applies several>"
    };
    format!(
        "find the order this payment is for, then `paymos-inbox mark-paid {id} --order-id <order>{project} --actor <you>`"
    )
}

/// An invoice under review: why it waits (a partial refund says how much went back) and the
/// way out for its standing (a refund of it waiting unconfirmed, `refund`, is rechecked first;
/// another invoice of its order, `sibling`, may leave only a refund, or the choice to keep it).
/// The way out of a held payment: by why it is held.
fn held_action(seen: &InvoiceSeen, id: &str) -> String {
    if seen.projects_disagree {
        format!(
            "check at Paymos which project's invoice it is; ship with `paymos-inbox release {id} --project <its project> --actor <you> --reason …`, or refund in full"
        )
    } else if let Some(refund) = seen.refund_of_unknown_mode() {
        format!(
            "check at Paymos whether {} returned the whole payment: if not, ship with `paymos-inbox release {id} --actor <you> --reason …`; if it did, nothing ships (its `full` refund recorded settles it)",
            refund.withdrawal_id
        )
    } else {
        format!(
            "check the order; ship with `paymos-inbox release {id} --actor <you> --override-amount --reason …`, or refund in full"
        )
    }
}

fn invoice_exception(inv: &InvoiceRecord, refund: Option<&str>, sibling: &Sibling) -> Exception {
    let seen = &inv.seen;
    let id = &inv.invoice_id;
    // A person's word may name no amount: said in words, never a question mark.
    let paid = seen.order.amount.as_ref().map_or_else(
        || "an amount no road gave".to_owned(),
        |a| {
            format!(
                "{} {}",
                a.as_str(),
                seen.order.currency.as_deref().unwrap_or("")
            )
            .trim_end()
            .to_owned()
        },
    );
    let order = seen.order.external_id.as_deref().unwrap_or("?");
    // Only a `full` refund settles a payment, whatever the others add up to.
    let any_full = seen
        .refunds
        .iter()
        .any(|r| r.mode == Some(crate::money::invoice::RefundMode::Full));
    let refunded = seen.refunded_text().map_or(String::new(), |r| {
        if any_full {
            format!("; {r} refunded so far")
        } else {
            format!("; {r} refunded so far, by no `full` refund")
        }
    });
    let (kind, why, action) = match seen.standing() {
        Standing::DuplicateOf(first) => {
            let (why, action) = duplicate_line((id, order, &first), &paid, &refunded, sibling);
            ("duplicate_payment", why, action)
        }
        Standing::OrderUnknown => (
            "order_unknown",
            format!("paid, but its order is known nowhere: nothing shipped{refunded}"),
            name_the_order(id, &seen.order),
        ),
        Standing::AfterRefund => (
            "after_refund",
            format!(
                "paid after a full refund? Paid {paid} for order {order} at a time no road knows, while a full refund is on record{refunded}"
            ),
            format!(
                "if the customer paid again, ship it with `paymos-inbox release {id} --actor <you> --reason …`; if not, nothing ships: refund what was paid again"
            ),
        ),
        Standing::Held => (
            "held",
            seen.held_why.as_ref().map_or_else(
                || {
                    format!(
                        "paid {paid}, which differs from what order {order} was registered for{refunded}"
                    )
                },
                |why| format!("paid {paid}, held: {why}{refunded}"),
            ),
            held_action(seen, id),
        ),
        _ => (
            "paid_late",
            format!(
                "paid after it closed {} (order {order}){refunded}",
                seen.status.map_or("?", InvoiceStatus::as_str)
            ),
            format!(
                "ship anyway with `paymos-inbox release {id} --actor <you> --reason …`, or refund in full"
            ),
        ),
    };
    // Its order shipped with another invoice: a release would be refused, a refund is what
    // is left.
    let (why, action) = match sibling {
        Sibling::ShippedWith(other) => (
            format!("{why}; its order {order} shipped already with {other}"),
            format!(
                "refund {id} in full at Paymos (order {order} never ships twice); its completed refund clears this"
            ),
        ),
        _ => (why, action),
    };
    Exception {
        kind,
        resource_id: Some(id.clone()),
        event_id: None,
        project: seen.order.project.clone(),
        since_ms: inv.updated_at_ms.unwrap_or_default(),
        why,
        action: refund.map_or(action, refund_first),
    }
}

/// What to do with a delivery only a person can apply: print the body it kept (the command
/// names the delivery's environment: a sandbox delivery is kept under its own key), then apply
/// it by hand.
fn by_hand(record: &OutcomeRecord) -> String {
    let environment = match record.delivery.environment {
        Some(Environment::Test) => " --environment sandbox",
        Some(Environment::Live) => " --environment live",
        None => "",
    };
    format!(
        "print its body with `paymos-inbox exceptions --body {}{environment}`, apply it by hand",
        record.delivery.event_id
    )
}

/// The way out of an unconfirmed delivery a recheck may never settle (Paymos answers 404 to a
/// forgery and to a project the API key does not read alike; a deposit credited otherwise than
/// Paymos has it): a person checks at Paymos, settles it and resolves it.
fn or_resolve(event_id: &str) -> String {
    format!(
        "; else check it at Paymos (a 404 is a forgery, or of a project the API key does not read) and settle it (forged: rotate the webhook secret; a credit that differs from Paymos': correct the balance by hand), then `paymos-inbox exceptions --resolve {event_id} --actor <you> --reason \"…\"`"
    )
}

/// A delivery that waits: unconfirmed (re-checked; a payment then released if genuine) or
/// unusable (by hand).
fn delivery_exception(delivery: &Waiting, all: &[Waiting]) -> Exception {
    let record = &delivery.record;
    let event_id = &record.delivery.event_id;
    let event_type = &record.delivery.event_type;
    let recheck = |id: &str| format!("`paymos-inbox recheck {id}`");
    let action = match &delivery.pending {
        Pending::Payment { invoice_id, .. } if delivery.order_unknown() => format!(
            "find the order this payment is for, then `paymos-inbox mark-paid {invoice_id} --order-id <order> --actor <you>` (with `--project <prj_…>` where the stack applies several projects) (`reconcile --apply` does it once Paymos' invoice names its order)"
        ),
        Pending::Payment { invoice_id, .. } if delivery.project_unknown() => format!(
            "find the project this payment is of (Paymos' dashboard), then `paymos-inbox mark-paid {invoice_id} --project <prj_…> --order-id <order> --actor <you>`; or, with the reverse check configured, apply Paymos' word with {}",
            recheck(invoice_id)
        ),
        Pending::Payment { invoice_id, .. } if delivery.order_conflict() => format!(
            "find which order {invoice_id} paid (Paymos' dashboard shows the invoice's order): if it is not the one shipped, ship the paid one by hand and recover the other; then `paymos-inbox exceptions --resolve {event_id} --actor <you> --reason \"…\"`"
        ),
        Pending::Deposit { deposit_id } if delivery.project_unknown() => format!(
            "configure the reverse check (PaymosApiSecretName), then {}: credits the payer of the project Paymos names, once",
            recheck(deposit_id)
        ),
        _ if !delivery.unconfirmed() => by_hand(record),
        Pending::Payment { invoice_id, .. } => refund_waiting(all, invoice_id).map_or_else(
            || {
                format!(
                    "{}: applies it once Paymos shows it paid; if you know it was paid, `paymos-inbox mark-paid {invoice_id} --order-id <order> --actor <you>`; if Paymos shows it was never paid (forged: rotate the webhook secret), `paymos-inbox exceptions --resolve {event_id} --actor <you> --reason \"…\"`",
                    recheck(invoice_id)
                )
            },
            refund_first,
        ),
        Pending::InvoiceStatus { invoice_id } => format!(
            "{}: applies what Paymos says now ({event_type} is not a payment: nothing to ship){}",
            recheck(invoice_id),
            or_resolve(event_id)
        ),
        Pending::Refund {
            withdrawal_id,
            invoice_id,
        } => format!(
            "{}: records the refund on {} if Paymos confirms it{}",
            recheck(withdrawal_id),
            invoice_id.as_deref().unwrap_or("its invoice"),
            or_resolve(event_id)
        ),
        Pending::Payout { withdrawal_id } => format!(
            "{}: applies the payout's status if Paymos confirms it{}",
            recheck(withdrawal_id),
            or_resolve(event_id)
        ),
        Pending::Deposit { deposit_id } => format!(
            "{}: credits the payer once, never twice, if Paymos confirms it{}",
            recheck(deposit_id),
            or_resolve(event_id)
        ),
        Pending::Other => by_hand(record),
    };
    let reason = record.reason.clone().unwrap_or_default();
    Exception {
        kind: if delivery.unconfirmed() {
            "unconfirmed"
        } else if delivery.order_unknown() {
            "order_unknown"
        } else if delivery.project_unknown() {
            "project_unknown"
        } else if delivery.order_conflict() {
            "order_conflict"
        } else {
            "unusable"
        },
        resource_id: record.delivery.resource_id.clone(),
        event_id: Some(event_id.clone()),
        project: delivery
            .read
            .as_ref()
            .and_then(|(e, _)| e.data.project_id.clone()),
        since_ms: record.processed_at_ms,
        why: if reason.starts_with(event_type.as_str()) {
            reason
        } else {
            format!("{event_type}: {reason}")
        },
        action,
    }
}

/// Releases `invoice_id` with the stack's `effect` (see [`crate::roads::release::release_named`]):
/// only where a payment waits (held, paid late, or an unconfirmed payment), never while a
/// refund of it waits unconfirmed; the unconfirmed payments of it are marked resolved.
///
/// # Errors
/// [`ReleaseError`] when it is not releasable or a call fails.
pub async fn release<S: ExceptionStore, L: ReviewLedger>(
    state: &S,
    ledger: &L,
    invoice_id: &str,
    by: &ReleaseBy<'_>,
    effect: &dyn FulfilmentEffect,
    now_ms: u64,
) -> Result<Applied, ReleaseError> {
    let waiting = waiting(ledger, &[Applied::Unconfirmed]).await?;
    let named = named(invoice_id, &waiting);
    let applied = release_named(state, invoice_id, &named, by, effect, now_ms).await?;
    for paid in waiting
        .iter()
        .filter(|w| w.pending.payment_of(invoice_id).is_some())
    {
        ledger
            .mark_resolved(
                &paid.record.delivery.key(),
                Resolution::Released,
                &format!("manual:{}", by.actor),
                now_ms,
            )
            .await?;
    }
    Ok(applied)
}

/// Why [`resolve`] resolved nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    /// Nothing of that id waits for a person's own act (named in words an operator acts on).
    #[error("{0}")]
    NotResolvable(String),
    /// The ledger failed.
    #[error(transparent)]
    Port(#[from] PortError),
}

/// The outcomes only a person's own act settles, which [`resolve`] takes off the list: an order
/// conflict, an unusable delivery applied by hand, and an unconfirmed one a person found forged
/// (Paymos says the invoice was never paid: the secret that signed it is rotated).
pub const RESOLVED_BY_HAND: [Applied; 3] = [
    Applied::OrderConflict,
    Applied::Unusable,
    Applied::Unconfirmed,
];

/// Takes the delivery `event_id` (of `environment`, or of either when it names none) off what
/// waits, once a person settled it outside the stack ([`RESOLVED_BY_HAND`]), noting who: its
/// outcome until then.
///
/// # Errors
/// [`ResolveError::NotResolvable`] when no such delivery waits so, or a live and a sandbox one
/// both do and no environment is named; [`ResolveError::Port`] when the ledger fails.
pub async fn resolve<L: ReviewLedger>(
    ledger: &L,
    event_id: &str,
    environment: Option<Environment>,
    actor: &str,
    now_ms: u64,
) -> Result<Applied, ResolveError> {
    let mut found: Vec<OutcomeRecord> = ledger
        .with_outcomes(&RESOLVED_BY_HAND, None)
        .await?
        .into_iter()
        .filter(|r| {
            r.delivery.event_id == event_id
                && environment.is_none_or(|e| r.delivery.environment == Some(e))
        })
        .collect();
    let record = match found.len() {
        1 => found.remove(0),
        0 => {
            return Err(ResolveError::NotResolvable(format!(
                "{event_id}: no delivery of that id waits as order_conflict, unusable or unconfirmed (see `paymos-inbox exceptions`)"
            )));
        }
        _ => {
            return Err(ResolveError::NotResolvable(format!(
                "{event_id}: a live and a sandbox delivery of that id both wait: name --environment"
            )));
        }
    };
    ledger
        .mark_resolved(
            &record.delivery.key(),
            Resolution::ByHand,
            &format!("manual:{actor}"),
            now_ms,
        )
        .await?;
    Ok(record.outcome)
}

/// What a re-check did with one delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recheck {
    /// Paymos confirms it now: applied through the webhook's own transition, with this outcome
    /// (`fulfilled`, `credited`, `updated`, `paid_late`, …); the delivery is resolved.
    Applied(Applied),
    /// It still waits (why): Paymos does not show it yet, or contradicts a payment a person may
    /// still release on their word.
    Waits(String),
    /// Paymos contradicts a change that pays nothing (a closure, a refund, a payout, a deposit:
    /// forged, failed or another's; why): nothing applied, the delivery resolved.
    Refuted(String),
}

impl Recheck {
    /// The outcome's name: the applied outcome's, `unconfirmed` or `refuted`.
    #[must_use]
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Applied(applied) => applied.as_str(),
            Self::Waits(_) => "unconfirmed",
            Self::Refuted(_) => "refuted",
        }
    }

    /// Why it waits or was refuted.
    #[must_use]
    pub fn reason(&self) -> Option<&str> {
        match self {
            Self::Applied(_) => None,
            Self::Waits(why) | Self::Refuted(why) => Some(why),
        }
    }

    /// Whether the delivery still waits for a person.
    #[must_use]
    pub fn waits(&self) -> bool {
        matches!(self, Self::Waits(_))
    }
}

/// What a re-check found for one delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rechecked {
    /// The delivery.
    pub event_id: String,
    /// The resource it is about (`inv_…`, `wdr_…`, `pcd_…`).
    pub resource_id: String,
    /// What the re-check did.
    pub outcome: Recheck,
}

impl serde::Serialize for Rechecked {
    fn serialize<Se: serde::Serializer>(&self, serializer: Se) -> Result<Se::Ok, Se::Error> {
        use serde::ser::SerializeStruct as _;
        let mut out = serializer.serialize_struct("Rechecked", 4)?;
        out.serialize_field("event_id", &self.event_id)?;
        out.serialize_field("resource_id", &self.resource_id)?;
        out.serialize_field("outcome", self.outcome.as_str())?;
        out.serialize_field("reason", &self.outcome.reason())?;
        out.end()
    }
}

/// Runs the reverse check again for unconfirmed deliveries of every category (those about
/// `resource_id` and the refunds of it, or all) and applies what Paymos now confirms through
/// the webhook's own use case ([`settle`]) with Paymos' answer and the stack's `effect`: a
/// payment is fulfilled with Paymos' order (a late one lands as `paid_late`), a closure closes,
/// a refund is recorded on its invoice, a payout moves, a deposit credits its payer once. What
/// Paymos confirms, or refutes for a change that pays nothing, is marked resolved.
///
/// # Errors
/// A store or ledger failure, or the API failing (nothing is decided then).
pub async fn recheck<S: ExceptionStore, L: ReviewLedger, C: PaymentConfirmation>(
    state: &S,
    ledger: &L,
    api: &C,
    effect: &dyn FulfilmentEffect,
    applying: impl Into<Applying>,
    resource_id: Option<&str>,
    now_ms: u64,
) -> Result<Vec<Rechecked>, PortError> {
    let applying = applying.into();
    let mut out = Vec::new();
    let mut deliveries = waiting(ledger, &[Applied::Unconfirmed, Applied::ProjectUnknown]).await?;
    // Refunds first: a payment Paymos paid back in full never ships, whichever came first.
    deliveries.sort_by_key(|d| !matches!(d.pending, Pending::Refund { .. }));
    for delivery in deliveries {
        // A delivery is rechecked by the environment that verified it, never by the other's
        // key (a live payment is no sandbox invoice's to confirm).
        if resource_id.is_some_and(|id| !delivery.concerns(id))
            || delivery.record.delivery.environment != Some(applying.environment)
        {
            continue;
        }
        let settled = settled_since(state, &delivery).await?;
        let Some((envelope, change)) = delivery.read else {
            continue;
        };
        let key = delivery.record.delivery.key();
        let event_id = delivery.record.delivery.event_id;
        let outcome = recheck_one(state, api, effect, &applying, change, &envelope, now_ms).await?;
        let resolved = match &outcome {
            // Confirmed, but its order is known nowhere: it now waits for its order.
            Recheck::Applied(Applied::OrderUnknown) => Some(Resolution::WaitsForOrder),
            Recheck::Applied(applied) => Some(Resolution::Rechecked(*applied)),
            Recheck::Refuted(_) => Some(Resolution::Refuted),
            Recheck::Waits(_) => None,
        };
        if let Some(resolved) = resolved {
            ledger
                .mark_resolved(&key, resolved, "recheck", now_ms)
                .await?;
        }
        // Still not what Paymos shows, of an invoice settled since (shipped by the genuine
        // delivery or another road): `exceptions` lists it no more, so neither does the
        // recheck, whose exit code would otherwise say forever that something waits.
        if settled && matches!(outcome, Recheck::Waits(_)) {
            continue;
        }
        out.push(Rechecked {
            event_id,
            resource_id: delivery.record.delivery.resource_id.unwrap_or_default(),
            outcome,
        });
    }
    Ok(out)
}

/// The reverse check of one change, and what applying Paymos' answer did.
async fn recheck_one<S: ExceptionStore, C: PaymentConfirmation>(
    state: &S,
    api: &C,
    effect: &dyn FulfilmentEffect,
    applying: &Applying,
    change: Change,
    envelope: &Envelope,
    now_ms: u64,
) -> Result<Recheck, PortError> {
    let pays = matches!(&change, Change::Invoice { status, .. } if status.fulfils());
    // A person asks Paymos about a deposit: Paymos' deposit is what credits, whatever the event
    // said of it (what Paymos confirms wins; a forged amount was only the reason to ask).
    let (change, data) = match change {
        Change::Deposit {
            deposit_id,
            status,
            occurred_at,
            credit: Some(_),
        } => (
            Change::Deposit {
                deposit_id,
                status,
                occurred_at,
                credit: None,
            },
            crate::wire::envelope::EventData::default(),
        ),
        change => (change, envelope.data.clone()),
    };
    let checked = check(api, &change, &data, applying.environment).await?;
    if let Some(project) = checked
        .project
        .as_deref()
        .filter(|p| !applying.projects.applies(Some(p)))
    {
        // Another project's invoice, by Paymos' word: it leaves this stack's list.
        let other = Change::OtherProject {
            project: project.to_owned(),
            invoice_id: envelope.resource_id.clone(),
        };
        let source = Source::Manual {
            actor: "recheck".into(),
        };
        return Ok(Recheck::Applied(
            settle_confirmed(state, &source, &other, effect, now_ms).await?,
        ));
    }
    if matches!(
        checked.verdict,
        Verdict::Confirmed | Verdict::PaidLate { .. }
    ) {
        let store = (state, effect);
        let paid = (&change, checked.paid_at);
        crate::roads::fulfil::paymos_refunds_first(store, api, paid, "recheck", now_ms).await?;
    }
    let confirmed = match checked.verdict {
        Verdict::Confirmed => checked.applied_to(change),
        Verdict::PaidLate { closed } => {
            close_then_pay(
                state,
                effect,
                change,
                (closed, checked.paid_at),
                checked.order.map(|o| applying.projects.scoped(o)),
                "recheck",
                now_ms,
            )
            .await?
        }
        Verdict::NotYet { status } => {
            return Ok(Recheck::Waits(format!("still {status} at Paymos")));
        }
        // A payment Paymos contradicts stays listed (Paymos may yet record it paid late, and a
        // forged one is a leaked secret a person must see); anything else it contradicts is
        // Paymos' word against it, read and closed. A 404 is no word against anything (the key
        // may not read its project): whatever it is, it waits for a person who checked.
        Verdict::Unconfirmed(reason) if pays => return Ok(Recheck::Waits(reason)),
        Verdict::Unknown(reason) => return Ok(Recheck::Waits(reason)),
        Verdict::Unconfirmed(reason) => return Ok(Recheck::Refuted(reason)),
    };
    let source = Source::Manual {
        actor: "recheck".into(),
    };
    // Paymos was asked: its answer names the project (the event's own word counts for nothing).
    let confirmed = applying.projects.apply_to(confirmed, None);
    Ok(
        match settle_saying(state, &source, &confirmed, effect, now_ms, true).await? {
            // Paymos' deposit is not what was credited: a person settles it, never a second
            // credit.
            (Applied::Unconfirmed, why) => Recheck::Waits(why.unwrap_or_default()),
            (applied, _) => Recheck::Applied(applied),
        },
    )
}

/// The manual roads of a stack: the same store, effect and environment as its webhooks.
impl<S: ExceptionStore, C: PaymentConfirmation> Fulfil<S, C> {
    /// [`release`] with this stack's store and effect.
    ///
    /// # Errors
    /// As [`release`].
    pub async fn release<L: ReviewLedger>(
        &self,
        ledger: &L,
        invoice_id: &str,
        by: &ReleaseBy<'_>,
        now_ms: u64,
    ) -> Result<Applied, ReleaseError> {
        if let Some(project) = by.project {
            self.name_project(invoice_id, project, now_ms).await?;
        }
        release(self.store(), ledger, invoice_id, by, self.effect(), now_ms).await
    }

    /// The project a person's release names: refused where the stack does not apply it or the
    /// record names another; where the invoice's events named two projects, it settles them
    /// (the record takes it, as it takes Paymos', while nothing shipped).
    async fn name_project(
        &self,
        invoice_id: &str,
        project: &str,
        now_ms: u64,
    ) -> Result<(), ReleaseError> {
        let Some(fields) = self
            .store()
            .read(&crate::money::write::Key::state(invoice_id))
            .await?
        else {
            return Ok(()); // nothing recorded: the release refuses it as unknown
        };
        let seen = crate::money::write::invoice_seen(&fields);
        if !seen.projects_disagree {
            return match self.projects().refuses_person(Some(project), &seen.order) {
                Some(why) => Err(ReleaseError::NotReleasable(why)),
                None => Ok(()),
            };
        }
        if !self.projects().applies(Some(project)) {
            return Err(ReleaseError::NotReleasable(format!(
                "{project} is not a project this stack applies ({}): pass one of them",
                self.projects().ids().join(", ")
            )));
        }
        let named = self.projects().scoped(OrderRef {
            project: Some(project.to_owned()),
            ..OrderRef::none()
        });
        let order = OrderRef {
            project: named.project,
            home: named.home,
            ..seen.order.clone()
        };
        let settle =
            crate::money::write::paymos_order(invoice_id, &order, (&seen.order, false), now_ms);
        // Refused, the record moved since it was read: the release reads it again and decides.
        let _ = self.store().write(&[settle]).await?;
        Ok(())
    }

    /// [`Fulfil::release`], once Paymos' completed full refunds of the invoice are recorded
    /// (each dated by Paymos, as the reconciliation records them): a refund whose webhook was
    /// lost returns the payment before a person ships it, by the refund-in-time rule.
    ///
    /// # Errors
    /// As [`release`]; [`ReleaseError::Port`] when Paymos cannot be read (nothing released).
    pub async fn release_asking<L: ReviewLedger, P: crate::roads::reconcile::PaymosLedger>(
        &self,
        ledger: &L,
        paymos: &P,
        invoice_id: &str,
        by: &ReleaseBy<'_>,
        now_ms: u64,
    ) -> Result<Applied, ReleaseError> {
        for refund in paymos.refunds_of(invoice_id).await? {
            if let (Some(crate::money::invoice::RefundMode::Full), Some(at)) =
                (refund.mode, refund.completed_at)
            {
                self.apply_refund_confirmed(invoice_id, (&refund, at), by.actor, now_ms)
                    .await?;
            }
        }
        self.release(ledger, invoice_id, by, now_ms).await
    }

    /// [`recheck`] with this stack's store, effect and environment, asking `api`.
    ///
    /// # Errors
    /// As [`recheck`].
    pub async fn recheck<L: ReviewLedger, A: PaymentConfirmation>(
        &self,
        ledger: &L,
        api: &A,
        resource_id: Option<&str>,
        now_ms: u64,
    ) -> Result<Vec<Rechecked>, PortError> {
        recheck(
            self.store(),
            ledger,
            api,
            self.effect(),
            Applying {
                environment: self.environment(),
                projects: self.projects().clone(),
            },
            resource_id,
            now_ms,
        )
        .await
    }
}
