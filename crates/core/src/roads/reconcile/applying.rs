//! What `--apply` does with what a run found, and a person's word asked of Paymos first
//! (`mark-paid` with the API), applied the same way.

use crate::money::change::{Applied, OrderRef};
use crate::money::status::InvoiceStatus;
use crate::money::write;
use crate::roads::confirm::AtSource;
use crate::roads::fulfil::Fulfil;
use crate::roads::ingest::PortError;

use super::{PaidAtPaymos, PaymosLedger, ReconcileStore, Report, set_aside_refunded};

/// Why a person's word that an invoice was paid, asked of Paymos first, applied nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AskedFirst {
    /// Paymos does not know the invoice with this key (404): forged, or another project's.
    #[error(
        "Paymos does not know {0} with this API key (forged, or of a project the key does not read): nothing shipped"
    )]
    Unknown(String),
    /// Paymos has it in a project this stack does not apply.
    #[error("Paymos has {0} in project {1}, which this stack does not apply: nothing shipped")]
    OtherProject(String, String),
    /// Paymos' invoice names no project, on a stack of several, and the person named none.
    #[error(
        "Paymos' invoice {0} names no project and this stack applies several: name its project with --project (nothing shipped)"
    )]
    ProjectUnnamed(String),
    /// Paymos has it unpaid.
    #[error("Paymos has {0} {1}, not paid: nothing shipped")]
    NotPaid(String, String),
    /// The person's word contradicts Paymos' (another order, project or price).
    #[error("{0}: nothing shipped")]
    Contradicts(String),
    /// Paymos' API or the store failed.
    #[error(transparent)]
    Port(#[from] PortError),
}

/// A person's word that `invoice_id` was paid (`mark-paid` with the API), asked of Paymos
/// first: applied as Paymos has it (its status, order, price, project and payment time, its
/// refunds recorded before it), as `reconcile --apply` applies a payment it finds, by `by`.
/// What the person said of the order (`given`) must not contradict Paymos'.
///
/// # Errors
/// [`AskedFirst`]: Paymos does not have it paid in a project of this stack as the person said,
/// or a port failed (nothing written before the payment's own writes).
pub async fn as_paymos_has_it<P: PaymosLedger, S: ReconcileStore>(
    paymos: &P,
    fulfil: &Fulfil<S>,
    (invoice_id, given): (&str, &OrderRef),
    (by, now_ms): (&str, u64),
) -> Result<Applied, AskedFirst> {
    let at = match paymos.invoice(invoice_id).await? {
        AtSource::Found(at) => at,
        AtSource::NotFound => {
            return Err(AskedFirst::Unknown(invoice_id.to_owned()));
        }
    };
    crate::roads::confirm::same_environment(at.is_test, fulfil.environment())?;
    let projects = fulfil.projects();
    // Paymos names no project (its invoice carries one; an empty one is none): on a stack of
    // several, whose it is is the person's to say, never the home project's on a guess.
    let mut at = at;
    if at.project_id.is_none() && projects.several() {
        match &given.project {
            Some(p) => at.project_id = Some(p.clone()),
            None => return Err(AskedFirst::ProjectUnnamed(invoice_id.to_owned())),
        }
    }
    // Paymos names no order (an empty one is unknown, not absent): the person's names it;
    // Paymos' status, price, project and time still decide.
    if at.order_id.as_deref().is_none_or(|o| o.trim().is_empty()) {
        at.order_id.clone_from(&given.external_id);
    }
    if let Some(p) = at
        .project_id
        .as_deref()
        .filter(|p| !projects.applies(Some(p)))
    {
        return Err(AskedFirst::OtherProject(
            invoice_id.to_owned(),
            p.to_owned(),
        ));
    }
    let paid = PaidAtPaymos::of(invoice_id.to_owned(), &at, projects);
    if let Some(why) = contradicts(given, &paid.order()) {
        return Err(AskedFirst::Contradicts(format!("{invoice_id}: {why}")));
    }
    let paid_found = paid.clone();
    let mut report = Report::default();
    if PaidAtPaymos::paid(&at.status) {
        report.missing.push(paid);
    } else if at.paid_late {
        report.paid_late.push(paid);
    } else {
        return Err(AskedFirst::NotPaid(invoice_id.to_owned(), at.status));
    }
    set_aside_refunded(paymos, &mut report).await?;
    apply_found(fulfil, &mut report, (by, now_ms)).await;
    // Refunded in full at Paymos after it was paid: dated here, its refund settles it.
    if !report.refunded.is_empty() {
        return Ok(Applied::Refunded);
    }
    match report.applied.remove(invoice_id) {
        // Shipped here under another order than Paymos': listed for a person until they
        // settle it, as `reconcile --apply` lists it. Only where it shipped: a payment that
        // waits under another order than Paymos' (a delivery planted it) shipped nothing to
        // recover, and takes no order.
        Some(Ok(Applied::OrderConflict)) => {
            if fulfil.store().invoice_seen(invoice_id).await?.1 {
                super::note_shipped_otherwise(fulfil.store(), &paid_found, true, now_ms).await?;
            }
            Ok(Applied::OrderConflict)
        }
        Some(Ok(applied)) => Ok(applied),
        Some(Err(e)) => Err(PortError::new("mark-paid as Paymos has it", e).into()),
        None => Err(PortError::new("mark-paid as Paymos has it", "nothing was applied").into()),
    }
}

/// How a person's word of an order (`given`) contradicts Paymos' (`paymos`), if it does: where
/// they named an order id, a project or a price, it is Paymos'.
fn contradicts(given: &OrderRef, paymos: &OrderRef) -> Option<String> {
    if let Some(id) = given.external_id.as_deref()
        && paymos.external_id.as_deref() != Some(id)
    {
        return Some(format!(
            "you named order {id}, Paymos has order {}",
            paymos.external_id.as_deref().unwrap_or("none")
        ));
    }
    if let Some(p) = given.project.as_deref()
        && paymos.project.as_deref() != Some(p)
    {
        return Some(format!(
            "you named project {p}, Paymos has {}",
            paymos.project.as_deref().unwrap_or("none")
        ));
    }
    // Money by value (`10.00` is `10`), as the registered order's guard compares it.
    let same_amount = match (&given.amount, &paymos.amount) {
        (Some(a), Some(b)) => a.same_value(b),
        _ => false,
    };
    let same_currency = given
        .currency
        .as_deref()
        .zip(paymos.currency.as_deref())
        .is_some_and(|(a, b)| a.eq_ignore_ascii_case(b));
    if given.has_price() && !(same_amount && same_currency) {
        return Some(format!(
            "you named {} {}, Paymos has the order at {} {}",
            given.amount.as_ref().map_or("", |a| a.as_str()),
            given.currency.as_deref().unwrap_or_default(),
            paymos.amount.as_ref().map_or("none", |a| a.as_str()),
            paymos.currency.as_deref().unwrap_or_default()
        ));
    }
    None
}

/// Paymos' time of `m`'s payment ([`Fulfil::paymos_dates`]), then Paymos' full refunds of its
/// invoice completed before it, recorded before the payment is applied: a later delivery of one
/// (dated by its event, which may say later than the payment) finds it applied. Returns whether
/// they were recorded: not where the record holds the payment already.
async fn refunds_first<S: ReconcileStore>(
    fulfil: &Fulfil<S>,
    m: &PaidAtPaymos,
    (by, now_ms): (&str, u64),
) -> Result<bool, PortError> {
    // Dated first, judged against the refunds recorded here until now; a payment recorded
    // here has nothing left to apply, and its refunds are read, never recorded.
    let recorded = match m.paid_at {
        Some(t) => fulfil.paymos_dates(&m.invoice_id, t, true).await?,
        None => false,
    };
    if recorded {
        return Ok(false);
    }
    record_refunds(fulfil, m, (by, now_ms)).await?;
    Ok(true)
}

/// Paymos' refunds of `m`'s invoice kept with it, each dated by Paymos. (A full refund Paymos
/// names no time for settles any payment: never one of these.)
async fn record_refunds<S: ReconcileStore>(
    fulfil: &Fulfil<S>,
    m: &PaidAtPaymos,
    (by, now_ms): (&str, u64),
) -> Result<(), PortError> {
    for refund in &m.refunds_before {
        if let Some(at) = refund.completed_at {
            fulfil
                .apply_refund_confirmed(&m.invoice_id, (refund, at), by, now_ms)
                .await?;
        }
    }
    Ok(())
}

/// `--apply`: a late payment lands as the close Paymos has, then the payment (`paid_late`, to
/// wait for a person); a missing one or a duplicate payment as its paid status, by hand.
pub(super) async fn apply_found<S: ReconcileStore>(
    fulfil: &Fulfil<S>,
    report: &mut Report,
    (by, now_ms): (&str, u64),
) {
    let said = |r: Result<Applied, PortError>| r.map_err(|e| e.to_string());
    // A late payment recorded here with no time (a person's word) takes Paymos' time: a full
    // refund delivered later is judged by it.
    // Not one a full refund at Paymos returned (its refunds are read, never recorded, here):
    // dated only where a refund recorded here returns it, as a refunded one.
    for m in &report.late_recorded {
        let returned = |t| {
            m.refunds_before
                .iter()
                .any(|r| r.returns_payment_at(Some(t)) && r.completed_at.is_some())
        };
        if let Some(t) = m.paid_at
            && let Err(e) = fulfil.paymos_dates(&m.invoice_id, t, !returned(t)).await
        {
            report
                .applied
                .insert(m.invoice_id.clone(), Err(e.to_string()));
        }
    }
    // A payment Paymos has refunded in full, recorded here with no time (a person's word):
    // dated by Paymos where a refund recorded here returns it by then (the refund settles it
    // here too), and always where it shipped: its refunds delivered later are judged by
    // Paymos' time, not by none (one that completed before it returned an earlier payment).
    for m in &report.refunded {
        let Some(t) = m.paid_at else { continue };
        let dated = match fulfil.store().invoice_seen(&m.invoice_id).await {
            Ok((_, shipped)) => fulfil.paymos_dates(&m.invoice_id, t, shipped).await,
            Err(e) => Err(e),
        };
        if let Err(e) = dated {
            report
                .applied
                .insert(m.invoice_id.clone(), Err(e.to_string()));
        }
    }
    // Refunded in full at Paymos after it was paid, and recorded nowhere here (or a person's
    // undated word judged by no time, reopened as Paymos' payment): its refunds, then the
    // payment, each dated by Paymos (the rule then says `refunded`), so a person's later word
    // finds the payment returned. Nothing is recorded on a guess: not where Paymos names no
    // payment time, nor where the record holds the payment (dated by Paymos if it was not).
    for m in report.refunded.iter().filter(|m| m.paid_at.is_some()) {
        // A close here Paymos' own paid status contradicts goes first: what it held (a late
        // payment on it) was not Paymos' payment, which its refunds settle below.
        if let Err(e) = over_close(fulfil, m, now_ms).await {
            report
                .applied
                .insert(m.invoice_id.clone(), Err(e.to_string()));
            continue;
        }
        match holds_payment(fulfil, &m.invoice_id).await {
            Ok(false) => {}
            // A duplicate payment, whose way out is its refund: Paymos' full refund, whose
            // webhook was lost, is recorded and settles it.
            Ok(true) => {
                if let Err(e) = refunds_of_waiting(fulfil, m, (by, now_ms)).await {
                    report
                        .applied
                        .insert(m.invoice_id.clone(), Err(e.to_string()));
                }
                continue;
            }
            Err(e) => {
                report
                    .applied
                    .insert(m.invoice_id.clone(), Err(e.to_string()));
                continue;
            }
        }
        let applied = match refunds_first(fulfil, m, (by, now_ms)).await {
            Ok(true) => said(apply_paid(fulfil, m, (by, now_ms)).await),
            Ok(false) => continue,
            Err(e) => Err(e.to_string()),
        };
        report.applied.insert(m.invoice_id.clone(), applied);
    }
    // Dated and Paymos' full refunds before it recorded first ([`refunds_first`]): a payment a
    // person named undated after a full refund is reopened before the close Paymos has lands
    // on it. An empty `external_order_id` is no order: the payment waits for it
    // (order_unknown), it never shares a claim with every other invoice that has none.
    for m in report
        .paid_late
        .iter()
        .chain(&report.missing)
        .chain(&report.duplicate_payments)
    {
        let applied = match only_paymos_refunds(fulfil, m, now_ms).await {
            Ok(()) => match refunds_first(fulfil, m, (by, now_ms)).await {
                Ok(_) => said(apply_paid(fulfil, m, (by, now_ms)).await),
                Err(e) => Err(e.to_string()),
            },
            Err(e) => Err(e.to_string()),
        };
        report.applied.insert(m.invoice_id.clone(), applied);
    }
}

/// Whether the record of `invoice_id` holds a payment Paymos' time does not reopen: one not
/// settled by a full refund judged by no time, nor waiting `after_refund`, or a late one.
async fn holds_payment<S: ReconcileStore>(
    fulfil: &Fulfil<S>,
    invoice_id: &str,
) -> Result<bool, PortError> {
    let (seen, _) = fulfil.store().invoice_seen(invoice_id).await?;
    Ok(seen.is_some_and(|s| {
        let paid = s.paid_late || s.status.is_some_and(InvoiceStatus::fulfils);
        let reopened = !s.paid_late
            && matches!(
                s.standing(),
                crate::money::invoice::Standing::AfterRefund
                    | crate::money::invoice::Standing::Refunded
            );
        paid && !reopened
    }))
}

/// `m`'s payment as Paymos has it: its paid status at its time, or, paid after it closed, the
/// close Paymos has and then the payment.
async fn apply_paid<S: ReconcileStore>(
    fulfil: &Fulfil<S>,
    m: &PaidAtPaymos,
    (by, now_ms): (&str, u64),
) -> Result<Applied, PortError> {
    let (id, order) = (&m.invoice_id, m.order());
    over_close(fulfil, m, now_ms).await?;
    let scoped = fulfil.projects().scoped(order.clone());
    if let Some(planted) = write::paymos_order_over_planted(id, &scoped, now_ms) {
        // Refused: no such wait (the usual case); the change below judges what is there.
        let _ = fulfil.store().write(&[planted]).await?;
    }
    if let Some(known) = crate::money::write::paymos_project_known(id, &scoped, now_ms) {
        // Refused, a payment is recorded: the change below corrects its project, if at all.
        let _ = fulfil.store().write(&[known]).await?;
    }
    if PaidAtPaymos::paid(&m.status) {
        let status = InvoiceStatus::parse(&m.status).unwrap_or(InvoiceStatus::Paid);
        return fulfil
            .apply_confirmed(id, (status, m.paid_at), order, by, now_ms)
            .await;
    }
    let closed = InvoiceStatus::parse(&m.status).unwrap_or(InvoiceStatus::Expired);
    fulfil
        .apply_confirmed(id, (closed, None), order.clone(), by, now_ms)
        .await?;
    fulfil
        .apply_confirmed(id, (InvoiceStatus::Paid, m.paid_at), order, by, now_ms)
        .await
}

/// Paymos' own status of `m` over what an event recorded against it, which goes (refused,
/// there was none to undo): where Paymos has it paid, a close the record holds, and a late
/// payment on it ([`write::paymos_pays_over_close`]); where Paymos has it closed and paid late,
/// a late payment recorded under another project or contested
/// ([`write::paymos_late_over_foreign`]), and a payment held unshipped under another project
/// ([`write::paymos_closes_over_held`]).
async fn over_close<S: ReconcileStore>(
    fulfil: &Fulfil<S>,
    m: &PaidAtPaymos,
    now_ms: u64,
) -> Result<(), PortError> {
    let over = if PaidAtPaymos::paid(&m.status) {
        vec![write::paymos_pays_over_close(&m.invoice_id, now_ms)]
    } else {
        let scoped = fulfil.projects().scoped(m.order());
        let mut over = vec![write::paymos_late_over_foreign(
            &m.invoice_id,
            &scoped,
            now_ms,
        )];
        over.extend(write::paymos_closes_over_held(
            &m.invoice_id,
            &scoped,
            now_ms,
        ));
        over
    };
    // Each alone: a guard refused means there was none to undo.
    for w in over {
        let _ = fulfil.store().write(&[w]).await?;
    }
    Ok(())
}

/// A full refund (or one of unknown mode) recorded here that Paymos does not list among `m`'s
/// invoice's refunds (a delivery Paymos never made) returned nothing, and one Paymos lists at
/// another time returned what was paid until Paymos' time: the record keeps its refunds as
/// Paymos lists them, and a payment they no longer settle that never shipped is applied anew
/// as Paymos has it ([`write::paymos_refunds_only`]; refused, the record moved: the change
/// decides).
async fn only_paymos_refunds<S: ReconcileStore>(
    fulfil: &Fulfil<S>,
    m: &PaidAtPaymos,
    now_ms: u64,
) -> Result<(), PortError> {
    let (seen, shipped) = fulfil.store().invoice_seen(&m.invoice_id).await?;
    let Some(seen) = seen else { return Ok(()) };
    let unshipped = !shipped && !seen.paid_late && seen.status.is_some_and(InvoiceStatus::fulfils);
    if let Some(w) = write::paymos_refunds_only(
        &m.invoice_id,
        (&seen.refunds, &m.refunds_before),
        unshipped,
        now_ms,
    ) {
        let _ = fulfil.store().write(&[w]).await?;
    }
    Ok(())
}

/// Paymos' refunds of `m`'s invoice recorded where its record holds a duplicate payment (a
/// second payment of an order shipped, which never ships): Paymos refunded it in full, and the
/// refund's webhook was lost; its completed refund is the way out `exceptions` names for it.
/// Any other payment the record holds has its refunds read, never recorded, here (rule 8).
async fn refunds_of_waiting<S: ReconcileStore>(
    fulfil: &Fulfil<S>,
    m: &PaidAtPaymos,
    (by, now_ms): (&str, u64),
) -> Result<(), PortError> {
    let (seen, shipped) = fulfil.store().invoice_seen(&m.invoice_id).await?;
    if !shipped
        && seen.is_some_and(|s| {
            matches!(
                s.standing(),
                crate::money::invoice::Standing::DuplicateOf(_)
            )
        })
    {
        record_refunds(fulfil, m, (by, now_ms)).await?;
    }
    Ok(())
}
