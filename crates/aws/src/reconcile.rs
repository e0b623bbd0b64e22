//! `paymos-inbox reconcile`: compares what Paymos says was paid with what this receiver
//! fulfilled, using the official `paymos` crate for the API (signing, retries, pages).
//!
//! - MISSING: paid at Paymos, never fulfilled here (a subscription, firewall or secret problem);
//!   `--apply` drives them through the same conditional transition as a webhook.
//! - DOUBLE: an order fulfilled more than once (by several invoices, or several items for one
//!   invoice): a key problem, which the once-per-order claim must make impossible.
//! - DUPLICATE PAYMENT: paid at Paymos for an order another invoice already fulfilled here: the
//!   payer paid twice; refund it (it is never fulfilled, `--apply` marks it `duplicate_of`).
//! - UNKNOWN: fulfilled here in the window, not paid at Paymos (re-read one by one first).
//! - PAID_LATE: paid at Paymos after the invoice closed (`paid_late_at`), and not yet recorded
//!   here as a late payment: `--apply` records the close and the late payment, which then waits
//!   in `exceptions` for a person (release or refund); it is never fulfilled by reconciliation.
//! - REFUNDED: paid at Paymos and refunded there in full: reported, never fulfilled. Refunds are
//!   read before anything is applied.
//!
//! Orders are grouped by Paymos' `external_order_id` (and by the fulfilments' own order), so
//! two invoices of one order fulfilled by different roads show as DOUBLE.

use std::collections::{BTreeMap, BTreeSet};

use paymos::{InvoiceListParams, InvoiceStatus as ApiStatus, PaymosClient};

use crate::dynamodb::DynamoResources;
use paymos_inbox_core::change::{Applied, OrderRef};
use paymos_inbox_core::fulfil::Fulfil;
use paymos_inbox_core::invoice::{InvoiceSeen, Refund, Standing};
use paymos_inbox_core::release::ReleaseStore;
use paymos_inbox_core::status::{Amount, InvoiceStatus};

/// A paid invoice as Paymos lists it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PaidAtPaymos {
    /// `inv_…`.
    pub invoice_id: String,
    /// `paid` or `paid_over`.
    pub status: String,
    /// The merchant's order id.
    pub order_id: String,
    /// The amount.
    pub amount: String,
    /// The currency.
    pub currency: String,
}

/// What reconciliation found (and did, with `--apply`).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Report {
    /// Paid invoices Paymos listed in the window.
    pub paid_at_paymos: usize,
    /// Of those, fulfilled here exactly once.
    pub matched: usize,
    /// Paid there, not fulfilled here.
    pub missing: Vec<PaidAtPaymos>,
    /// Orders (or, without an order id, invoices) fulfilled more than once: the invoices that
    /// fulfilled each.
    pub double: BTreeMap<String, Vec<String>>,
    /// Paid at Paymos for an order that another invoice fulfilled here: to refund.
    pub duplicate_payments: Vec<PaidAtPaymos>,
    /// Fulfilled here in the window, not paid there.
    pub unknown: Vec<String>,
    /// Invoices open here that were re-read at Paymos.
    pub open_rechecked: usize,
    /// Paid after they closed at Paymos, not recorded as late payments here (PAID_LATE).
    pub paid_late: Vec<PaidAtPaymos>,
    /// Paid at Paymos and refunded there in full: never fulfilled (REFUNDED).
    pub refunded: Vec<PaidAtPaymos>,
    /// With `--apply`: what applying each missing invoice did.
    pub applied: BTreeMap<String, String>,
}

impl Report {
    /// Whether anything needs a person.
    #[must_use]
    pub fn clean(&self) -> bool {
        self.missing.iter().all(|m| {
            self.applied
                .get(&m.invoice_id)
                .is_some_and(|a| a == "fulfilled")
        }) && self.paid_late.iter().all(|m| {
            self.applied
                .get(&m.invoice_id)
                .is_some_and(|a| a == "paid_late")
        }) && self.double.is_empty()
            && self.duplicate_payments.is_empty()
            && self.unknown.is_empty()
    }
}

/// Runs a reconciliation over invoices created in `[from, to]` (Unix seconds).
///
/// # Errors
/// An API or DynamoDB failure, as text.
pub async fn reconcile(
    api: &PaymosClient,
    fulfil: &Fulfil<DynamoResources>,
    from: i64,
    to: i64,
    apply: bool,
    now_ms: u64,
) -> Result<Report, String> {
    let mut report = Report::default();
    let params = InvoiceListParams {
        status: Some(vec![
            ApiStatus::Paid,
            ApiStatus::PaidOver,
            ApiStatus::Expired,
            ApiStatus::Underpaid,
            ApiStatus::Cancelled,
        ]),
        created_from: Some(from),
        created_to: Some(to),
        limit: Some(100),
        ..InvoiceListParams::default()
    };
    // No cap on the pages: the crate's own cursor checks stop a looping server.
    let mut pager = api
        .invoices()
        .pager(params, None)
        .map_err(|e| format!("Paymos API: {e}"))?;
    let mut paid = Vec::new();
    let mut late = Vec::new();
    while let Some(item) = pager.next().await.map_err(|e| format!("Paymos API: {e}"))? {
        let paid_late = item.paid_late_at.is_some();
        let fact = PaidAtPaymos {
            invoice_id: item.invoice_id,
            status: item.status.as_str().to_owned(),
            order_id: item.external_order_id,
            amount: item.amount,
            currency: item.currency,
        };
        if matches!(item.status, ApiStatus::Paid | ApiStatus::PaidOver) {
            paid.push(fact);
        } else if paid_late {
            late.push(fact);
        }
    }
    report.paid_at_paymos = paid.len();

    // Every fulfilment item here (one scan of the state table per run), by invoice, and the
    // invoices that fulfilled each order.
    let mut fulfilments: BTreeMap<String, (usize, u64)> = BTreeMap::new();
    let mut by_order: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for item in fulfil
        .store()
        .fulfilments()
        .await
        .map_err(|e| e.to_string())?
    {
        let invoice = item.invoice_id;
        let at = item.fulfilled_at_ms.unwrap_or(0);
        let order = item
            .order
            .external_id
            .unwrap_or_else(|| format!("(invoice {invoice})"));
        by_order.entry(order).or_default().push(invoice.clone());
        let entry = fulfilments.entry(invoice).or_insert((0, at));
        entry.0 += 1;
    }

    let paid_ids: BTreeSet<&str> = paid.iter().map(|p| p.invoice_id.as_str()).collect();
    for p in &paid {
        let fulfilled_by_another = by_order
            .get(&p.order_id)
            .is_some_and(|invoices| invoices.iter().any(|i| *i != p.invoice_id));
        match fulfilments.get(&p.invoice_id) {
            Some((1, _)) => report.matched += 1,
            Some(_) => {}
            None if !p.order_id.is_empty() && fulfilled_by_another => {
                report.duplicate_payments.push(p.clone());
            }
            None => report.missing.push(p.clone()),
        }
    }
    // Paymos' own grouping: the invoices of one external_order_id fulfilled here.
    for p in paid.iter().filter(|p| !p.order_id.is_empty()) {
        if fulfilments.contains_key(&p.invoice_id) {
            let invoices = by_order.entry(p.order_id.clone()).or_default();
            if !invoices.contains(&p.invoice_id) {
                invoices.push(p.invoice_id.clone());
            }
        }
    }
    for (order, mut invoices) in by_order {
        invoices.sort();
        invoices.dedup();
        if invoices.len() > 1 {
            report.double.insert(order, invoices);
        }
    }
    for (invoice, (_, at_ms)) in &fulfilments {
        let in_window =
            (from * 1000..=to * 1000).contains(&i64::try_from(*at_ms).unwrap_or(i64::MAX));
        if in_window && !paid_ids.contains(invoice.as_str()) {
            // Created before the window but paid in it? Ask Paymos about this one invoice; an
            // API failure is an error, never a silent UNKNOWN.
            let paid_there = match api.invoices().get(invoice).await {
                Ok(i) => matches!(i.status, ApiStatus::Paid | ApiStatus::PaidOver),
                Err(paymos::Error::Api(e)) if e.status == 404 => false,
                Err(e) => return Err(format!("Paymos API (GET {invoice}): {e}")),
            };
            if !paid_there {
                report.unknown.push(invoice.clone());
            }
        }
    }

    // Invoices still open here: re-read each at Paymos, as the official plugins' cron does (a
    // paid webhook that never arrived leaves exactly this).
    let listed: BTreeSet<String> = paid.iter().map(|p| p.invoice_id.clone()).collect();
    for (invoice, order_id) in fulfil
        .store()
        .open_invoices()
        .await
        .map_err(|e| e.to_string())?
    {
        if listed.contains(&invoice) || fulfilments.contains_key(&invoice) {
            continue;
        }
        report.open_rechecked += 1;
        match api.invoices().get(&invoice).await {
            Ok(i) => {
                let fact = PaidAtPaymos {
                    invoice_id: invoice,
                    status: i.status.as_str().to_owned(),
                    order_id: if i.order.external_id.is_empty() {
                        order_id.unwrap_or_default()
                    } else {
                        i.order.external_id
                    },
                    amount: i.order.amount,
                    currency: i.order.currency,
                };
                if matches!(i.status, ApiStatus::Paid | ApiStatus::PaidOver) {
                    report.missing.push(fact);
                } else if i.paid_late_at.is_some() {
                    late.push(fact);
                }
            }
            Err(paymos::Error::Api(e)) if e.status == 404 => {}
            Err(e) => return Err(format!("Paymos API (GET {invoice}): {e}")),
        }
    }

    // Late payments not recorded as such here (nor released, nor fulfilled).
    for fact in late {
        if fulfilments.contains_key(&fact.invoice_id) {
            continue;
        }
        let (seen, _) = fulfil
            .store()
            .invoice_seen(&fact.invoice_id)
            .await
            .map_err(|e| e.to_string())?;
        let known = seen.is_some_and(|s| {
            matches!(
                s.standing(),
                Standing::PaidLate | Standing::Released | Standing::Refunded
            )
        });
        if !known {
            report.paid_late.push(fact);
        }
    }
    // Refunds are read before anything is applied: a payment refunded in full at Paymos is
    // reported, never fulfilled.
    for list in [&mut report.missing, &mut report.paid_late] {
        let mut kept = Vec::new();
        for fact in std::mem::take(list) {
            if refunded_in_full(api, &fact).await? {
                report.refunded.push(fact);
            } else {
                kept.push(fact);
            }
        }
        *list = kept;
    }

    if apply {
        for m in &report.paid_late {
            let order = OrderRef {
                external_id: (!m.order_id.is_empty()).then(|| m.order_id.clone()),
                amount: Amount::parse(&m.amount),
                currency: Some(m.currency.to_ascii_uppercase()),
            };
            let closed = InvoiceStatus::parse(&m.status).unwrap_or(InvoiceStatus::Expired);
            // The close as Paymos has it, then the payment: it lands as `paid_late`.
            let applied = match fulfil
                .apply_by_hand(&m.invoice_id, closed, order.clone(), "reconcile", now_ms)
                .await
            {
                Ok(_) => fulfil
                    .apply_by_hand(
                        &m.invoice_id,
                        InvoiceStatus::Paid,
                        order,
                        "reconcile",
                        now_ms,
                    )
                    .await
                    .map_or_else(|e| format!("error: {e}"), |a| a.as_str().to_owned()),
                Err(e) => format!("error: {e}"),
            };
            report.applied.insert(m.invoice_id.clone(), applied);
        }
        for m in report.missing.iter().chain(&report.duplicate_payments) {
            let status = InvoiceStatus::parse(&m.status).unwrap_or(InvoiceStatus::Paid);
            let order = OrderRef {
                external_id: Some(m.order_id.clone()),
                amount: Amount::parse(&m.amount),
                currency: Some(m.currency.to_ascii_uppercase()),
            };
            let applied = fulfil
                .apply_by_hand(&m.invoice_id, status, order, "reconcile", now_ms)
                .await
                .map_or_else(
                    |e| format!("error: {e}"),
                    |a: Applied| a.as_str().to_owned(),
                );
            report.applied.insert(m.invoice_id.clone(), applied);
        }
    }
    Ok(report)
}

/// Whether Paymos refunded `fact` in full: its completed refunds, by the domain's rule
/// ([`InvoiceSeen::refunded_in_full`]).
async fn refunded_in_full(api: &PaymosClient, fact: &PaidAtPaymos) -> Result<bool, String> {
    let params = paymos::RefundListParams {
        invoice_id: Some(fact.invoice_id.clone()),
        limit: Some(100),
        ..paymos::RefundListParams::default()
    };
    let page = api
        .refunds()
        .list(&params)
        .await
        .map_err(|e| format!("Paymos API (refunds of {}): {e}", fact.invoice_id))?;
    let refunds = page
        .items
        .iter()
        .filter(|r| matches!(r.status(), paymos::WithdrawalStatus::Completed))
        .map(|r| Refund {
            withdrawal_id: r.withdrawal_id().to_owned(),
            amount: Amount::parse(r.amount()),
            currency: Some(r.currency().to_ascii_uppercase()),
            full: matches!(r.mode(), paymos::RefundMode::Full),
        })
        .collect();
    let seen = InvoiceSeen {
        refunds,
        order: OrderRef {
            external_id: None,
            amount: Amount::parse(&fact.amount),
            currency: Some(fact.currency.to_ascii_uppercase()),
        },
        ..InvoiceSeen::with_status(InvoiceStatus::parse(&fact.status))
    };
    Ok(seen.refunded_in_full())
}
