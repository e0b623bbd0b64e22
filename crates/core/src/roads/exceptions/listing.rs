//! What waits for a person, each with why, since when and its way out.

use crate::money::invoice::{InvoiceSeen, Standing};
use crate::money::record::InvoiceRecord;
use crate::money::status::InvoiceStatus;
use crate::roads::ingest::PortError;
use crate::wire::signature::Environment;

use super::pending::{Pending, Waiting, refund_waiting, settled_since, waiting};
use super::{DELIVERY_OUTCOMES, Exception, ExceptionStore, OutcomeRecord, ReviewLedger};

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
    // Paid again on the same invoice after its own full refund: no other invoice, and the
    // record keeps the order's price, not what was paid again.
    if first == id {
        return (
            format!(
                "paid again after its own payment, which shipped order {order}, was refunded in full: this payment may be what pays for the order now{refunded}"
            ),
            format!(
                "if order {order} shipped and stays with the customer, this payment is what pays for it: keep it (nothing ships again; the line stays until a refund); if the customer is owed it, refund {id} in full again at Paymos: a full refund completed after this payment clears it"
            ),
        );
    }
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

/// An invoice shipped here under another order than Paymos' (`paymos`): recover the order
/// shipped here, and ship Paymos' order by hand (the run took it for this payment), or, where
/// another invoice shipped it first, refund this payment; where Paymos has the invoice in a
/// project this stack does not apply, that project's own stack ships its order.
fn conflict_line(seen: &InvoiceSeen, id: &str, order: &str, paymos: &str) -> (String, String) {
    let ours = format!(
        "order {order}{}",
        seen.order
            .project
            .as_deref()
            .map_or(String::new(), |p| format!(" of {p}"))
    );
    let shipped = format!("shipped here as {ours}, but Paymos' invoice is of {paymos}");
    let resolve = format!("`paymos-inbox exceptions --resolve {id} --actor <you> --reason \"…\"`");
    if seen.paymos_project_elsewhere {
        return (
            format!(
                "{shipped}, a project this stack does not apply: {ours} went out without a payment of its own"
            ),
            format!(
                "recover {ours}; nothing to ship or refund here ({paymos}: that project's own stack ships it); then {resolve}"
            ),
        );
    }
    if seen.paymos_order_unnamed {
        return (
            format!(
                "{shipped}: this payment is that project's, not {ours}'s, which went out without a payment of its own"
            ),
            format!(
                "recover {ours}; find at Paymos the order this payment is for and ship it by hand, or refund {id} in full; then {resolve}"
            ),
        );
    }
    match &seen.paymos_order_shipped_with {
        Some(first) => (
            format!(
                "{shipped}, which {first} paid and shipped: this payment is a second payment of it"
            ),
            format!(
                "refund {id} at Paymos in full (nothing to ship) and recover {ours}; then {resolve}"
            ),
        ),
        None => (
            format!(
                "{shipped}: that order was paid and never shipped; it is this payment's now (another payment of it waits as a duplicate)"
            ),
            format!("ship {paymos} by hand and recover {ours}; then {resolve}"),
        ),
    }
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
    } else if seen.order_disputed.is_some() {
        format!(
            "check at Paymos which order the invoice is for; ship it with `paymos-inbox release {id} --order-id <its order> --actor <you>`, or refund in full"
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
        Standing::ShippedOtherwise(paymos) => {
            let (why, action) = conflict_line(seen, id, order, &paymos);
            ("order_conflict", why, action)
        }
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
                "check at Paymos when this payment was made: after the full refund (the customer paid again), ship it with `paymos-inbox release {id} --actor <you> --reason …`; at or before it, that refund returned it and nothing ships: `paymos-inbox exceptions --resolve {id} --actor <you> --reason \"…\"`"
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
        // Its payment arrived after the closure was applied; Paymos may date the payment
        // before the close (a delivery that came late), so never "paid after it closed".
        _ => (
            "paid_late",
            format!(
                "its payment arrived after the invoice closed as {} (order {order}){refunded}",
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
        // A payment only a person applies: on a stack with the reverse check, as Paymos has it
        // (a word without the API ships nothing there: `refuses_word`).
        Pending::Payment { invoice_id, .. } if !delivery.unconfirmed() => format!(
            "with the reverse check, `paymos-inbox mark-paid {invoice_id} --actor <you>` given the API's key applies Paymos' own invoice (a word without it ships nothing there); without it, {}; then `paymos-inbox exceptions --resolve {event_id} --actor <you> --reason \"…\"`",
            by_hand(record)
        ),
        _ if !delivery.unconfirmed() => by_hand(record),
        Pending::Payment { invoice_id, .. } => refund_waiting(all, invoice_id).map_or_else(
            || {
                format!(
                    "{}: applies it once Paymos shows it paid as this delivery says; if Paymos shows it paid otherwise (another order, price or project), apply Paymos' own payment with `paymos-inbox mark-paid {invoice_id} --actor <you>`, given the API's key; if Paymos shows it was never paid (forged: rotate the webhook secret), or once applied, `paymos-inbox exceptions --resolve {event_id} --actor <you> --reason \"…\"`",
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
