//! Every payment waiting for a person, and the ways out: `exceptions` lists them with why,
//! since when and what to do; `release` fulfils a held, late or unconfirmed invoice on a
//! person's word; `recheck` runs the reverse check again for unconfirmed deliveries.

use paymos_inbox_aws::dynamodb::{DynamoLedger, DynamoResources};
use paymos_inbox_core::change::{Change, OrderRef, Source, change_of, with_order};
use paymos_inbox_core::confirm::{PaymentConfirmation, Verdict, check};
use paymos_inbox_core::effect::RecordFulfilment;
use paymos_inbox_core::envelope::Envelope;
use paymos_inbox_core::fulfil::{close_then_pay, settle};
use paymos_inbox_core::ingest::PortError;
use paymos_inbox_core::invoice::Standing;
use paymos_inbox_core::release::{ReleaseBy, ReleaseError, release as release_invoice};
use paymos_inbox_core::signature::Environment;
use paymos_inbox_core::status::{Amount, InvoiceStatus};

/// The outcomes of a delivery that need a person.
pub const DELIVERY_OUTCOMES: [&str; 2] = ["unconfirmed", "unusable"];

/// One thing waiting for a person.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Exception {
    /// `held`, `paid_late`, `duplicate_payment`, `unconfirmed`, `unusable`, `dead_letter`.
    pub kind: &'static str,
    /// The invoice (or other resource) it is about, when known.
    pub resource_id: Option<String>,
    /// The delivery it is about, when known.
    pub event_id: Option<String>,
    /// Since when (Unix ms).
    pub since_ms: u64,
    /// Why it waits.
    pub why: String,
    /// What to do.
    pub action: String,
}

/// Lists every exception: invoices under review in the state table, deliveries with an
/// outcome that needs a person (unless their invoice was fulfilled since), and the DLQ.
///
/// # Errors
/// A DynamoDB or SQS failure, as text.
pub async fn list(
    state: &DynamoResources,
    ledger: &DynamoLedger,
    dlq: Option<(&aws_sdk_sqs::Client, &str)>,
) -> Result<Vec<Exception>, String> {
    let mut out = Vec::new();
    for inv in state
        .invoices_under_review()
        .await
        .map_err(|e| e.to_string())?
    {
        let seen = &inv.seen;
        let paid = format!(
            "{} {}",
            seen.order.amount.as_ref().map_or("?", |a| a.as_str()),
            seen.order.currency.as_deref().unwrap_or("")
        );
        let order = seen.order.external_id.as_deref().unwrap_or("?");
        // A partial refund leaves the payment here, and says how much went back.
        let refunded = seen.refunded_text().map_or(String::new(), |r| {
            format!("; {r} refunded so far, not all of it")
        });
        let (kind, why, action) = match seen.standing() {
            Standing::DuplicateOf(first) => (
                "duplicate_payment",
                format!(
                    "a second payment ({paid}) for order {order}, which {first} fulfilled{refunded}"
                ),
                format!(
                    "refund {} at Paymos in full; its completed refund clears this",
                    inv.invoice_id
                ),
            ),
            Standing::Held => (
                "held",
                format!(
                    "paid {paid}, which differs from what order {order} was registered for{refunded}"
                ),
                format!(
                    "check the order; ship with `paymos-inbox release {} --actor <you> --override-amount --reason …`, or refund in full",
                    inv.invoice_id
                ),
            ),
            _ => (
                "paid_late",
                format!(
                    "paid after it closed {} (order {order}){refunded}",
                    seen.status.map_or("?", InvoiceStatus::as_str)
                ),
                format!(
                    "ship anyway with `paymos-inbox release {} --actor <you> --reason …`, or refund in full",
                    inv.invoice_id
                ),
            ),
        };
        out.push(Exception {
            kind,
            resource_id: Some(inv.invoice_id.clone()),
            event_id: None,
            since_ms: inv.updated_at_ms,
            why,
            action,
        });
    }
    for record in ledger
        .with_outcomes(&DELIVERY_OUTCOMES, None)
        .await
        .map_err(|e| e.to_string())?
    {
        let resource = record.delivery.resource_id.clone();
        if let Some(invoice) = resource.as_deref().filter(|r| r.starts_with("inv_"))
            && state
                .is_fulfilled(invoice)
                .await
                .map_err(|e| e.to_string())?
        {
            continue; // fulfilled since (released, reconciled, or another event)
        }
        let reason = record.reason.clone().unwrap_or_default();
        let (kind, action) = if record.outcome == "unconfirmed" {
            (
                "unconfirmed",
                format!(
                    "`paymos-inbox recheck {}`; if it is genuine, `paymos-inbox release {} --actor <you>`",
                    resource.as_deref().unwrap_or("inv_…"),
                    resource.as_deref().unwrap_or("inv_…")
                ),
            )
        } else {
            (
                "unusable",
                format!(
                    "read the archived body of {} in the deliveries table, apply it by hand",
                    record.delivery.event_id
                ),
            )
        };
        out.push(Exception {
            kind,
            resource_id: resource,
            event_id: Some(record.delivery.event_id.clone()),
            since_ms: record.processed_at_ms,
            why: if reason.starts_with(&record.delivery.event_type) {
                reason
            } else {
                format!("{}: {reason}", record.delivery.event_type)
            },
            action,
        });
    }
    if let Some((sqs, dlq)) = dlq {
        let attributes = sqs
            .get_queue_attributes()
            .queue_url(dlq)
            .attribute_names(aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessages)
            .send()
            .await
            .map_err(|e| aws_sdk_sqs::error::DisplayErrorContext(e).to_string())?;
        let count: u64 = attributes
            .attributes()
            .and_then(|a| {
                a.get(&aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessages)
            })
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        if count > 0 {
            out.push(Exception {
                kind: "dead_letter",
                resource_id: None,
                event_id: None,
                since_ms: 0,
                why: format!(
                    "{count} message(s) in the dead-letter queue: applying failed five times"
                ),
                action: "read the fulfil logs for the cause, fix it, then `paymos-inbox redrive`"
                    .into(),
            });
        }
    }
    out.sort_by_key(|e| e.since_ms);
    Ok(out)
}

/// The order a delivery's body names, for releasing an invoice the state table never saw.
fn order_of(body: &[u8]) -> OrderRef {
    match Envelope::parse(body).map(|e| change_of(&e)) {
        Ok(Change::Invoice { order, .. }) => order,
        _ => OrderRef::none(),
    }
}

/// Releases `invoice_id` (see [`paymos_inbox_core::release::release`]); unconfirmed deliveries for it are
/// marked resolved.
///
/// # Errors
/// [`ReleaseError`] when it is not releasable or a call fails.
pub async fn release(
    state: &DynamoResources,
    ledger: &DynamoLedger,
    invoice_id: &str,
    by: &ReleaseBy<'_>,
    now_ms: u64,
) -> Result<paymos_inbox_core::change::Applied, ReleaseError> {
    let waiting = ledger
        .with_outcomes(&["unconfirmed"], Some(invoice_id))
        .await?;
    let named = waiting.last().map(|r| order_of(&r.delivery.body));
    let applied = release_invoice(
        state,
        invoice_id,
        named.as_ref(),
        by,
        &RecordFulfilment,
        now_ms,
    )
    .await?;
    for record in &waiting {
        ledger
            .mark_resolved(
                &record.delivery.event_id,
                "released",
                &format!("manual:{}", by.actor),
                now_ms,
            )
            .await?;
    }
    Ok(applied)
}

/// What a re-check found for one delivery.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Rechecked {
    /// The delivery.
    pub event_id: String,
    /// Its invoice.
    pub invoice_id: String,
    /// `fulfilled`, `already_final`, … when Paymos confirms it now; else `unconfirmed`.
    pub outcome: String,
    /// Why it stays unconfirmed, if it does.
    pub reason: Option<String>,
}

/// Runs the reverse check again for unconfirmed deliveries (of one invoice, or all), applying
/// each Paymos now confirms through the webhook's own transition, with Paymos' order; a late
/// payment lands as `paid_late`.
///
/// # Errors
/// A DynamoDB failure, or the API failing (nothing is decided then).
pub async fn recheck<C: PaymentConfirmation>(
    state: &DynamoResources,
    ledger: &DynamoLedger,
    api: &C,
    environment: Environment,
    invoice_id: Option<&str>,
    now_ms: u64,
) -> Result<Vec<Rechecked>, PortError> {
    let mut out = Vec::new();
    let source = Source::Manual {
        actor: "recheck".into(),
    };
    for record in ledger.with_outcomes(&["unconfirmed"], invoice_id).await? {
        let Ok(envelope) = Envelope::parse(&record.delivery.body) else {
            continue;
        };
        let change = change_of(&envelope);
        let Change::Invoice { invoice_id, .. } = &change else {
            continue;
        };
        let invoice_id = invoice_id.clone();
        let checked = check(api, &change, &envelope.data, environment).await?;
        let applied = match checked.verdict {
            Verdict::Confirmed => {
                let paid = with_order(change, checked.order);
                Some(settle(state, &source, &paid, &RecordFulfilment, now_ms).await?)
            }
            Verdict::PaidLate { closed } => {
                let paid = close_then_pay(
                    state,
                    &RecordFulfilment,
                    change,
                    closed,
                    checked.order,
                    "recheck",
                    now_ms,
                )
                .await?;
                Some(settle(state, &source, &paid, &RecordFulfilment, now_ms).await?)
            }
            Verdict::NotYet { .. } | Verdict::Unconfirmed(_) => None,
        };
        let (outcome, reason) = match (applied, checked.verdict) {
            (Some(applied), _) => {
                ledger
                    .mark_resolved(
                        &record.delivery.event_id,
                        &format!("rechecked_{applied}"),
                        "recheck",
                        now_ms,
                    )
                    .await?;
                (applied.as_str().to_owned(), None)
            }
            (None, Verdict::NotYet { status }) => (
                "unconfirmed".to_owned(),
                Some(format!("still {status} at Paymos")),
            ),
            (None, Verdict::Unconfirmed(reason)) => ("unconfirmed".to_owned(), Some(reason)),
            (None, _) => ("unconfirmed".to_owned(), None),
        };
        out.push(Rechecked {
            event_id: record.delivery.event_id.clone(),
            invoice_id,
            outcome,
            reason,
        });
    }
    Ok(out)
}

/// Registers what an order must be paid with (the amount guard), from the command line.
///
/// # Errors
/// A message naming what is wrong, or the DynamoDB failure.
pub async fn register_order(
    state: &DynamoResources,
    order_id: &str,
    amount: &str,
    currency: &str,
) -> Result<(), String> {
    let amount = Amount::parse(amount)
        .ok_or_else(|| format!("--amount {amount:?} is not a decimal like 10.50"))?;
    if currency.is_empty() || !currency.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err(format!(
            "--currency {currency:?} is not a currency code like USD"
        ));
    }
    state
        .register_order(order_id, &amount, currency)
        .await
        .map_err(|e| e.to_string())
}
