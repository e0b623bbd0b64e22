//! Reconciliation: compares what Paymos says was paid with what this receiver fulfilled, through
//! two ports: [`PaymosLedger`] (Paymos' API: the official crate on AWS, a memory twin in tests)
//! and [`ReconcileStore`] (the state table).
//!
//! - MISSING: paid at Paymos, never fulfilled here (a subscription, firewall or secret problem);
//!   `--apply` drives them through the same conditional transition as a webhook.
//! - DOUBLE: an order fulfilled more than once (by several invoices, or several items for one
//!   invoice): a key problem, which the once-per-order claim must make impossible.
//! - DUPLICATE PAYMENT: paid at Paymos for an order another invoice already fulfilled here: the
//!   payer paid twice; refund it (it is never fulfilled, `--apply` marks it `duplicate_of`).
//! - SHIPPED OTHERWISE: fulfilled here once, under another order or project than Paymos'
//!   invoice names (a person's word that was wrong): Paymos' order was paid and never shipped;
//!   a person ships it by hand and recovers the other (nothing is applied).
//! - UNKNOWN: fulfilled here in the window, not paid at Paymos (re-read one by one first).
//! - PAID_LATE: paid at Paymos after the invoice closed (`paid_late_at`), and not yet recorded
//!   here as a late payment: `--apply` records the close and the late payment, which then waits
//!   in `exceptions` for a person (release or refund); it is never fulfilled by reconciliation.
//! - REFUNDED: paid at Paymos and refunded there in full: reported, never fulfilled. Refunds are
//!   read before anything is applied.
//! - UNREADABLE: Paymos answered something this version cannot read (an invoice, or a listing
//!   of a slice's invoices): named, for a person; the run goes on with the others.
//!
//! Orders are grouped by Paymos' `external_order_id` (and by the fulfilments' own order), so
//! two invoices of one order fulfilled by different roads show as DOUBLE.
//!
//! A scheduled run ([`scheduled`]) reads its window an hour's slice at a time, holding one
//! slice's invoices and fulfilments, and keeps where it got to ([`Progress`]): a run whose time
//! runs out is continued by the next from there.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;

use crate::money::change::{Applied, OrderRef};
use crate::money::invoice::{InvoiceSeen, Refund, Standing};
use crate::money::record::FulfilmentRecord;
use crate::money::status::InvoiceStatus;
use crate::roads::confirm::{AtSource, ConfirmedInvoice, PaymentConfirmation};
use crate::roads::fulfil::{Fulfil, ResourceStore};
use crate::roads::ingest::PortError;
use crate::roads::release::ReleaseStore;

mod applying;
mod scheduled;

use applying::apply_found;
pub use applying::{AskedFirst, as_paymos_has_it};
pub use scheduled::{
    BEHIND_FOR_A_PERSON_S, Finding, Found, LONGEST_GAP_S, LastWindow, Progress,
    ReconcileCheckpoint, SLICE_S, behind, scheduled, scheduled_window, slices_of,
};

/// Paymos' books, as reconciliation reads them (besides each invoice, read as the reverse check
/// reads it).
pub trait PaymosLedger: PaymentConfirmation {
    /// Every invoice created in `[from, to]` (Unix seconds) that was paid, or closed
    /// (expired, underpaid, cancelled): id and what Paymos says of it, every page.
    ///
    /// # Errors
    /// [`PortError`] of its kind (a refused key is misconfigured).
    fn invoices_created(
        &self,
        from: i64,
        to: i64,
    ) -> impl Future<Output = Result<Vec<(String, ConfirmedInvoice)>, PortError>> + Send;
}

/// What reconciliation reads of the state table, besides the invoice records.
pub trait ReconcileStore: ResourceStore + ReleaseStore {
    /// Every fulfilment record written in `[from_ms, to_ms]`, whatever its key: what was
    /// fulfilled here in one slice of a window (UNKNOWN is what Paymos did not list), not the
    /// books.
    ///
    /// # Errors
    /// [`PortError`] when the store fails.
    fn fulfilments_between(
        &self,
        from_ms: u64,
        to_ms: u64,
    ) -> impl Future<Output = Result<Vec<FulfilmentRecord>, PortError>> + Send;

    /// The fulfilment records of `invoice_ids`, whenever written, read by key
    /// ([`crate::money::effect::fulfilment_key`]), many at once (DynamoDB's `BatchGetItem`).
    ///
    /// # Errors
    /// [`PortError`] when the store fails.
    fn fulfilments_of(
        &self,
        invoice_ids: &[String],
    ) -> impl Future<Output = Result<Vec<FulfilmentRecord>, PortError>> + Send;

    /// Invoices whose status is still open, with their order id.
    ///
    /// # Errors
    /// [`PortError`] when the store fails.
    fn open_invoices(
        &self,
    ) -> impl Future<Output = Result<Vec<(String, Option<String>)>, PortError>> + Send;

    /// The invoice that fulfilled `order_id` (its once-only claim, [`crate::money::write::order_claim`]),
    /// whenever it did.
    ///
    /// # Errors
    /// [`PortError`] when the store fails.
    fn order_fulfilled_by(
        &self,
        scope: Option<&str>,
        order_id: &str,
    ) -> impl Future<Output = Result<Option<String>, PortError>> + Send;

    /// [`Self::order_fulfilled_by`] for many orders (`(scope, order id)`): the invoice that
    /// fulfilled each order that has one, by the order's claim key
    /// ([`crate::money::write::scoped`]). A store that reads many keys at once (DynamoDB's
    /// `BatchGetItem`, 100 a call) overrides it; this one reads them one by one.
    ///
    /// # Errors
    /// [`PortError`] when the store fails.
    fn orders_fulfilled_by(
        &self,
        orders: &[(Option<String>, String)],
    ) -> impl Future<Output = Result<BTreeMap<String, String>, PortError>> + Send {
        async move {
            let mut found = BTreeMap::new();
            for (scope, order) in orders {
                if let Some(winner) = self.order_fulfilled_by(scope.as_deref(), order).await? {
                    found.insert(crate::money::write::scoped(scope.as_deref(), order), winner);
                }
            }
            Ok(found)
        }
    }
}

impl<T: ReconcileStore> ReconcileStore for std::sync::Arc<T> {
    fn fulfilments_between(
        &self,
        from_ms: u64,
        to_ms: u64,
    ) -> impl Future<Output = Result<Vec<FulfilmentRecord>, PortError>> + Send {
        (**self).fulfilments_between(from_ms, to_ms)
    }

    fn fulfilments_of(
        &self,
        invoice_ids: &[String],
    ) -> impl Future<Output = Result<Vec<FulfilmentRecord>, PortError>> + Send {
        (**self).fulfilments_of(invoice_ids)
    }

    fn open_invoices(
        &self,
    ) -> impl Future<Output = Result<Vec<(String, Option<String>)>, PortError>> + Send {
        (**self).open_invoices()
    }

    fn order_fulfilled_by(
        &self,
        scope: Option<&str>,
        order_id: &str,
    ) -> impl Future<Output = Result<Option<String>, PortError>> + Send {
        (**self).order_fulfilled_by(scope, order_id)
    }

    fn orders_fulfilled_by(
        &self,
        orders: &[(Option<String>, String)],
    ) -> impl Future<Output = Result<BTreeMap<String, String>, PortError>> + Send {
        (**self).orders_fulfilled_by(orders)
    }
}

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
    /// The project it belongs to (`project_id`), as Paymos lists it.
    pub project: Option<String>,
    /// Its project's key scope here ([`crate::money::change::Projects::scope`]).
    #[serde(skip)]
    pub scope: Option<String>,
    /// When Paymos says it was paid (Unix s).
    #[serde(skip)]
    pub paid_at: Option<u64>,
    /// Paymos' full refunds of it completed before that payment (read first): `--apply`
    /// records them before it applies the payment.
    #[serde(skip)]
    pub refunds_before: Vec<Refund>,
}

/// An invoice fulfilled here under another order than the one Paymos' invoice names.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ShippedOtherwise {
    /// The invoice as Paymos lists it (its order, its project).
    #[serde(flatten)]
    pub paid: PaidAtPaymos,
    /// The order shipped here.
    pub shipped_order_id: Option<String>,
    /// The project of the order shipped here, where it is not the stack's first.
    pub shipped_project: Option<String>,
    /// Paymos has the invoice in a project this stack does not apply: its own stack ships it.
    pub not_applied: bool,
}

/// An answer of Paymos this version cannot read.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Unreadable {
    /// What it was about: an invoice, or the slice of a window whose listing it was.
    pub about: String,
    /// What the decoder said (the field, when it names one).
    pub why: String,
}

impl Unreadable {
    /// Whether Paymos' invoice `at` names no project on a stack of several (its invoices carry
    /// one; an empty one is none): whose payment it is is a person's to say, never the home
    /// project's on a guess. Kept in `report` as such.
    fn names_no_project(
        invoice_id: &str,
        at: &ConfirmedInvoice,
        projects: &crate::money::change::Projects,
        report: &mut Report,
    ) -> bool {
        let unnamed = at.project_id.is_none() && projects.several();
        if unnamed {
            report.unreadable.push(Self {
                about: invoice_id.to_owned(),
                why: format!(
                    "Paymos' invoice names no project and this stack applies several ({}): check it in Paymos' dashboard, then `mark-paid {invoice_id} --project <its project>`",
                    projects.listed()
                ),
            });
        }
        unnamed
    }

    /// Why an answer the decoder refused is a person's, with what to do.
    fn undecoded(decoder_said: &str) -> String {
        format!(
            "Paymos answered something this tool cannot read ({decoder_said}): read it in Paymos' dashboard, and update paymos-inbox or send it to Paymos' support"
        )
    }

    /// `result` of a read about `about`; an unreadable answer is kept in `report` as such
    /// (`None`), any other failure fails the run.
    fn kept<T>(
        about: &str,
        result: Result<T, PortError>,
        report: &mut Report,
    ) -> Result<Option<T>, PortError> {
        match result {
            Ok(read) => Ok(Some(read)),
            Err(e) if e.kind == crate::port::PortErrorKind::Unreadable => {
                report.unreadable.push(Self {
                    about: about.to_owned(),
                    why: Self::undecoded(&e.message),
                });
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }
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
    /// Fulfilled here once, but under another order (or another project's) than Paymos'
    /// invoice names (a person's `mark-paid --order-id` or `--project` that was wrong): the
    /// order Paymos names was paid and never shipped.
    pub shipped_otherwise: Vec<ShippedOtherwise>,
    /// Fulfilled here in the window, not paid there.
    pub unknown: Vec<String>,
    /// Invoices open here that were re-read at Paymos.
    pub open_rechecked: usize,
    /// Paid after they closed at Paymos, not recorded as late payments here (PAID_LATE).
    pub paid_late: Vec<PaidAtPaymos>,
    /// Late payments recorded here already, as Paymos lists them: `--apply` gives one a person
    /// recorded with no time Paymos' time of it ([`Fulfil::paymos_dates`]).
    #[serde(skip)]
    pub late_recorded: Vec<PaidAtPaymos>,
    /// Paid at Paymos and refunded there in full: never fulfilled (REFUNDED).
    pub refunded: Vec<PaidAtPaymos>,
    /// What Paymos answered that this version cannot read (UNREADABLE): for a person, who
    /// reads it in Paymos' dashboard; nothing of it is applied.
    pub unreadable: Vec<Unreadable>,
    /// With `--apply`: what applying each missing invoice did, or why it could not (a JSON
    /// consumer reads the outcome's name, or `error: …`).
    #[serde(serialize_with = "applied_names")]
    pub applied: BTreeMap<String, Result<Applied, String>>,
}

/// What applying an invoice did, as a person reads it: the outcome's name, or `error: …`.
fn said(applied: &Result<Applied, String>) -> String {
    applied
        .as_ref()
        .map_or_else(|e| format!("error: {e}"), |a| a.as_str().to_owned())
}

/// Each applied invoice's outcome by name, or `error: …`.
fn applied_names<S: serde::Serializer>(
    applied: &BTreeMap<String, Result<Applied, String>>,
    out: S,
) -> Result<S::Ok, S::Error> {
    out.collect_map(applied.iter().map(|(id, a)| (id, said(a))))
}

impl Report {
    /// What `--apply` did with `invoice_id`, as a person reads it, if it applied it.
    #[must_use]
    pub fn applied_to(&self, invoice_id: &str) -> Option<String> {
        self.applied.get(invoice_id).map(said)
    }

    /// Whether anything still waits for a person after this run: a finding not cleared
    /// ([`Report::clean`]), or one `--apply` handed to `exceptions` (a late payment, a hold).
    #[must_use]
    pub fn waits_for_a_person(&self) -> bool {
        !self.clean()
            || self.applied.values().any(|a| {
                matches!(
                    a,
                    Ok(Applied::PaidLate
                        | Applied::Held
                        | Applied::DuplicatePayment
                        | Applied::OrderUnknown
                        | Applied::ProjectUnknown
                        | Applied::OrderConflict)
                )
            })
    }

    /// Whether nothing needs a person from the reconciliation itself (what it applied may
    /// still wait in `exceptions`: [`Report::waits_for_a_person`]).
    #[must_use]
    pub fn clean(&self) -> bool {
        self.missing.iter().all(|m| {
            self.applied
                .get(&m.invoice_id)
                .is_some_and(|a| *a == Ok(Applied::Fulfilled))
        }) && self.paid_late.iter().all(|m| {
            self.applied
                .get(&m.invoice_id)
                .is_some_and(|a| *a == Ok(Applied::PaidLate))
        }) && self.double.is_empty()
            && self.duplicate_payments.is_empty()
            && self.shipped_otherwise.is_empty()
            && self.unknown.is_empty()
            && self.unreadable.is_empty()
    }

    /// Adds what another slice of the window, or the re-read of the open invoices, found.
    fn absorb(&mut self, other: Self) {
        let Self {
            paid_at_paymos,
            matched,
            missing,
            double,
            duplicate_payments,
            shipped_otherwise,
            unknown,
            open_rechecked,
            paid_late,
            late_recorded,
            refunded,
            unreadable,
            applied,
        } = other;
        self.paid_at_paymos += paid_at_paymos;
        self.matched += matched;
        self.missing.extend(missing);
        for (order, invoices) in double {
            let kept = self.double.entry(order).or_default();
            kept.extend(invoices);
            kept.sort();
            kept.dedup();
        }
        self.duplicate_payments.extend(duplicate_payments);
        self.shipped_otherwise.extend(shipped_otherwise);
        self.unknown.extend(unknown);
        self.open_rechecked += open_rechecked;
        self.paid_late.extend(paid_late);
        self.late_recorded.extend(late_recorded);
        self.refunded.extend(refunded);
        self.unreadable.extend(unreadable);
        self.applied.extend(applied);
    }
}

impl PaidAtPaymos {
    /// Paymos' order, in the words a person reads: `order 12002 of prj_a` (the project where
    /// Paymos names one), or `prj_a, with no order named yet`.
    #[must_use]
    pub fn in_words(&self) -> String {
        match (self.order_id.trim().is_empty(), &self.project) {
            (true, Some(p)) => format!("{p}, with no order named yet"),
            (true, None) => "no order named yet".to_owned(),
            (false, Some(p)) => format!("order {} of {p}", self.order_id),
            (false, None) => format!("order {}", self.order_id),
        }
    }

    /// The refund Paymos lists that may have returned this payment, where one does: a full
    /// refund while Paymos names no payment time, or one of unknown mode completed when or
    /// after it was paid. `--apply` then holds the payment for a person (never ships it, never
    /// settles it as refunded on a guess): the report says so before it runs.
    #[must_use]
    pub fn held_by_refund(&self) -> Option<&str> {
        self.refunds_before
            .iter()
            .find(|r| r.returns_payment_at(self.paid_at) || r.may_return_payment_at(self.paid_at))
            .map(|r| r.withdrawal_id.as_str())
    }

    /// Its order as this stack keys it, within its project (or, without an order id, the
    /// invoice's own group).
    fn claim(&self) -> String {
        if self.order_id.trim().is_empty() {
            format!("(invoice {})", self.invoice_id)
        } else {
            crate::money::write::scoped(self.scope.as_deref(), &self.order_id)
        }
    }

    fn of(
        invoice_id: String,
        at: &ConfirmedInvoice,
        projects: &crate::money::change::Projects,
    ) -> Self {
        Self {
            invoice_id,
            status: at.status.clone(),
            order_id: at.order_id.clone().unwrap_or_default(),
            amount: at
                .order_amount
                .as_ref()
                .map(|a| a.as_str().to_owned())
                .unwrap_or_default(),
            currency: at.order_currency.clone().unwrap_or_default(),
            project: at.project_id.clone(),
            scope: projects.scope(at.project_id.as_deref()),
            paid_at: at.paid_at,
            refunds_before: Vec::new(),
        }
    }

    fn order(&self) -> OrderRef {
        OrderRef {
            external_id: (!self.order_id.trim().is_empty()).then(|| self.order_id.clone()),
            amount: crate::money::status::Amount::parse(&self.amount),
            currency: (!self.currency.is_empty()).then(|| self.currency.to_ascii_uppercase()),
            project: self.project.clone(),
            home: false,
            unlisted: false,
        }
    }

    fn paid(status: &str) -> bool {
        // The domain's rule of what pays, not a second list of statuses.
        InvoiceStatus::parse(status).is_some_and(InvoiceStatus::fulfils)
    }
}

/// The fulfilments here: how many records per invoice and when the first was written, and the
/// invoices that fulfilled each order (or, without an order, themselves).
struct Fulfilled {
    invoices: BTreeMap<String, (usize, u64)>,
    by_order: BTreeMap<String, Vec<String>>,
    /// Each invoice's order as shipped: its claim, its id and its project's scope.
    shipped: BTreeMap<String, (String, Option<String>, Option<String>)>,
}

impl Fulfilled {
    fn of(records: Vec<FulfilmentRecord>) -> Self {
        let mut here = Self {
            invoices: BTreeMap::new(),
            by_order: BTreeMap::new(),
            shipped: BTreeMap::new(),
        };
        for f in records {
            let at = f.fulfilled_at_ms.unwrap_or(0);
            // Grouped by the order's claim: its project's scope and its id.
            let order = f.order.external_id.as_deref().map_or_else(
                || format!("(invoice {})", f.invoice_id),
                |id| crate::money::write::scoped(f.order.project.as_deref(), id),
            );
            here.by_order
                .entry(order.clone())
                .or_default()
                .push(f.invoice_id.clone());
            here.shipped.insert(
                f.invoice_id.clone(),
                (order, f.order.external_id.clone(), f.order.project.clone()),
            );
            here.invoices.entry(f.invoice_id).or_insert((0, at)).0 += 1;
        }
        here
    }

    fn has(&self, invoice_id: &str) -> bool {
        self.invoices.contains_key(invoice_id)
    }
}

/// How many single reads (an invoice, its refunds) reconciliation has in flight at once: a
/// backlog of open invoices after an outage is re-read eight at a time, not one after the
/// other, and Paymos never sees more than eight of ours at once.
pub const READS_AT_ONCE: usize = 8;

/// `read` of each of `ids`, [`READS_AT_ONCE`] at a time, in the order of `ids`. The ids are
/// owned: a stream that borrowed them across its awaits would not be `Send` for every lifetime
/// a spawned task needs.
async fn read_each<T, F, Fut>(ids: Vec<String>, read: F) -> Result<Vec<(String, T)>, PortError>
where
    F: Fn(String) -> Fut,
    Fut: Future<Output = Result<(String, T), PortError>>,
{
    use futures::{StreamExt as _, TryStreamExt as _};
    futures::stream::iter(ids)
        .map(read)
        .buffered(READS_AT_ONCE)
        .try_collect()
        .await
}

/// Runs a reconciliation over invoices created in `[from, to]` (Unix seconds); with `apply`,
/// drives what is missing through the same conditional transition as a webhook. The window is
/// read as one slice (a person's command: [`scheduled`] reads its window slice by slice), then
/// the invoices still open here are re-read.
///
/// # Errors
/// [`PortError`] when Paymos' API or the store fails (never a silent UNKNOWN).
pub async fn reconcile<P: PaymosLedger, S: ReconcileStore>(
    paymos: &P,
    fulfil: &Fulfil<S>,
    (from, to): (i64, i64),
    apply: bool,
    now_ms: u64,
) -> Result<Report, PortError> {
    let mut crossed = BTreeSet::new();
    let mut report = read_slice(paymos, fulfil, (from, to), (apply, now_ms), &mut crossed).await?;
    let open = recheck_open(paymos, fulfil, &report, (apply, now_ms)).await?;
    report.absorb(open);
    Ok(report)
}

/// One slice `[from, to]` (Unix seconds) of a window: the invoices Paymos lists created in it
/// against what was fulfilled here, found, set aside and (with `apply`) applied. What it reads
/// of the store is bounded by the slice, never the window: the fulfilments of the invoices it
/// lists, by key, many at once, whenever written (a payment fulfilled after its slice, or
/// before by a clock ahead of Paymos', is found all the same); their orders' claims, by key;
/// and the fulfilments written in the slice's own time (UNKNOWN: fulfilled here, not listed).
/// `crossed` carries the invoices listed by the slices before whose fulfilment came after their
/// slice, and those they applied: a fulfilment of this slice's time they name is known, not
/// asked about (an invoice is fulfilled after it was created: one listed by a slice before the
/// run's first is asked about, one by one, as one created before the window).
async fn read_slice<P: PaymosLedger, S: ReconcileStore>(
    paymos: &P,
    fulfil: &Fulfil<S>,
    (from, to): (i64, i64),
    (apply, now_ms): (bool, u64),
    crossed: &mut BTreeSet<String>,
) -> Result<Report, PortError> {
    let mut report = Report::default();
    let (store, projects) = (fulfil.store(), fulfil.projects());
    let listing = paymos.invoices_created(from, to).await;
    let about = format!("the invoices created from {from} to {to}");
    // Nothing of the slice is compared: what was fulfilled here would all be UNKNOWN.
    let Some(listed) = Unreadable::kept(&about, listing, &mut report)? else {
        return Ok(report);
    };
    let listed = once_each(listed);
    // A key of the other environment is the stack's problem: nothing of it ships here.
    for (_, at) in &listed {
        crate::roads::confirm::same_environment(at.is_test, fulfil.environment())?;
    }
    let (paid, late): (Vec<_>, Vec<_>) = listed
        .into_iter()
        // Another project's invoices are that project's stack's to reconcile.
        .filter(|(_, at)| projects.applies(at.project_id.as_deref()))
        .filter(|(_, at)| PaidAtPaymos::paid(&at.status) || at.paid_late)
        .filter(|(id, at)| !Unreadable::names_no_project(id, at, projects, &mut report))
        .map(|(id, at)| PaidAtPaymos::of(id, &at, projects))
        .partition(|p| PaidAtPaymos::paid(&p.status));
    report.paid_at_paymos = paid.len();
    let ids: Vec<String> = paid
        .iter()
        .chain(&late)
        .map(|p| p.invoice_id.clone())
        .collect();
    let mut records = store.fulfilments_of(&ids).await?;
    let (from_ms, to_ms) = (
        u64::try_from(from).unwrap_or(0).saturating_mul(1000),
        u64::try_from(to).unwrap_or(0).saturating_mul(1000) + 999,
    );
    let by_key: BTreeSet<(String, String)> = records
        .iter()
        .map(|f| (f.invoice_id.clone(), f.won_by.clone()))
        .collect();
    for f in store.fulfilments_between(from_ms, to_ms).await? {
        if !by_key.contains(&(f.invoice_id.clone(), f.won_by.clone())) {
            records.push(f);
        }
    }
    let mut here = Fulfilled::of(records);
    claims_before_the_window(store, &paid, &mut here).await?;
    compare(&paid, &mut here, &mut report);
    unknown(
        (paymos, projects),
        (&paid, &*crossed),
        &here,
        (from, to),
        &mut report,
    )
    .await?;
    crossed.extend(
        paid.iter()
            .filter(|p| {
                here.invoices
                    .get(&p.invoice_id)
                    .is_some_and(|f| f.1 > to_ms)
            })
            .map(|p| p.invoice_id.clone()),
    );
    late_unrecorded((store, projects), late, &here, &mut report).await?;
    set_aside_refunded(paymos, &mut report).await?;
    returned_otherwise(store, &mut report).await?;
    shipped_otherwise(fulfil, &mut report, (apply, now_ms)).await?;
    if apply {
        apply_found(fulfil, &mut report, ("reconcile", now_ms)).await;
        // Fulfilled now, in the window's last slice: known there.
        crossed.extend(report.applied.keys().cloned());
    }
    Ok(report)
}

/// Each invoice of a listing once, as its latest read has it: Paymos' cursor pages overlap
/// where an invoice moved between two page reads, and one invoice is compared, counted and
/// applied once.
fn once_each<T>(listed: Vec<(String, T)>) -> Vec<(String, T)> {
    let mut seen = BTreeSet::new();
    let mut latest: Vec<(String, T)> = listed
        .into_iter()
        .rev()
        .filter(|(id, _)| seen.insert(id.clone()))
        .collect();
    latest.reverse();
    latest
}

/// The invoice that fulfilled each order Paymos lists paid in the slice, or a fulfilment of it
/// names, whenever it did (the order's claim, read by key), joins that order's invoices: an
/// order fulfilled before the window, or in another slice, by another invoice makes a second
/// payment a duplicate, not a missing one, and a second fulfilment a double, though no
/// fulfilment the slice read names it. The orders are read by key, many at once
/// ([`ReconcileStore::orders_fulfilled_by`]), never the books.
async fn claims_before_the_window<S: ReconcileStore>(
    store: &S,
    paid: &[PaidAtPaymos],
    here: &mut Fulfilled,
) -> Result<(), PortError> {
    let shipped = here
        .shipped
        .values()
        .filter_map(|(_, order, project)| Some((project.clone(), order.clone()?)));
    let orders: BTreeSet<(Option<String>, String)> = paid
        .iter()
        .map(|p| (p.scope.clone(), p.order_id.clone()))
        .chain(shipped)
        .collect();
    let orders: Vec<(Option<String>, String)> = orders.into_iter().collect();
    for (claim, winner) in store.orders_fulfilled_by(&orders).await? {
        let invoices = here.by_order.entry(claim).or_default();
        if !invoices.contains(&winner) {
            invoices.push(winner);
        }
    }
    Ok(())
}

/// MATCHED, MISSING, DUPLICATE PAYMENT and DOUBLE, from the list and the fulfilments.
fn compare(paid: &[PaidAtPaymos], here: &mut Fulfilled, report: &mut Report) {
    for p in paid {
        let fulfilled_by_another = here
            .by_order
            .get(&p.claim())
            .is_some_and(|invoices| invoices.iter().any(|i| *i != p.invoice_id));
        // Another order than Paymos', or, where Paymos names none yet (unknown, never a
        // match), another project: an order id is unique only within its project.
        let shipped = here.shipped.get(&p.invoice_id).filter(|(claim, _, scope)| {
            if p.order_id.trim().is_empty() {
                *scope != p.scope
            } else {
                *claim != p.claim()
            }
        });
        match (here.invoices.get(&p.invoice_id), shipped) {
            (Some((1, _)), Some((_, order_id, project))) => {
                report.shipped_otherwise.push(ShippedOtherwise {
                    paid: p.clone(),
                    shipped_order_id: order_id.clone(),
                    shipped_project: project.clone(),
                    not_applied: false,
                });
            }
            (Some((1, _)), None) => report.matched += 1,
            (Some(_), _) => {}
            (None, _) if !p.order_id.trim().is_empty() && fulfilled_by_another => {
                report.duplicate_payments.push(p.clone());
            }
            (None, _) => report.missing.push(p.clone()),
        }
    }
    // Paymos' own grouping: the invoices of one external_order_id fulfilled here.
    for p in paid.iter().filter(|p| !p.order_id.trim().is_empty()) {
        if here.has(&p.invoice_id) {
            let invoices = here.by_order.entry(p.claim()).or_default();
            if !invoices.contains(&p.invoice_id) {
                invoices.push(p.invoice_id.clone());
            }
        }
    }
    for (order, invoices) in &here.by_order {
        let mut invoices = invoices.clone();
        invoices.sort();
        invoices.dedup();
        if invoices.len() > 1 {
            report.double.insert(order.clone(), invoices);
        }
    }
}

/// UNKNOWN: fulfilled here in the slice, not listed paid there (by it, nor by a slice before
/// as `crossed`). Created before the window but paid in it? Each is asked about one by one
/// first.
async fn unknown<P: PaymosLedger>(
    (paymos, projects): (&P, &crate::money::change::Projects),
    (paid, crossed): (&[PaidAtPaymos], &BTreeSet<String>),
    here: &Fulfilled,
    (from, to): (i64, i64),
    report: &mut Report,
) -> Result<(), PortError> {
    let listed: BTreeSet<&str> = paid.iter().map(|p| p.invoice_id.as_str()).collect();
    let asked: Vec<String> = here
        .invoices
        .iter()
        .filter(|(invoice, (_, at_ms))| {
            let at = i64::try_from(*at_ms).unwrap_or(i64::MAX);
            (from * 1000..=to * 1000 + 999).contains(&at)
                && !listed.contains(invoice.as_str())
                && !crossed.contains(invoice.as_str())
        })
        .map(|(invoice, _)| invoice.clone())
        .collect();
    let read = read_each(asked, |invoice| async move {
        Ok((invoice.clone(), paymos.invoice(&invoice).await))
    })
    .await?;
    for (invoice, at) in read {
        let Some(at) = Unreadable::kept(&invoice, at, report)? else {
            continue;
        };
        let paid_there = match &at {
            // A late payment is a payment (released here by a person).
            AtSource::Found(i) => PaidAtPaymos::paid(&i.status) || i.paid_late,
            AtSource::NotFound => false,
        };
        match at {
            // Paid in a project this stack does not apply (a payment event that named none,
            // taken as the home project's): shipped otherwise than Paymos' invoice says.
            AtSource::Found(i) if paid_there && !projects.applies(i.project_id.as_deref()) => {
                let (_, order_id, project) =
                    here.shipped.get(&invoice).cloned().unwrap_or_default();
                report.shipped_otherwise.push(ShippedOtherwise {
                    paid: PaidAtPaymos::of(invoice, &i, projects),
                    shipped_order_id: order_id,
                    shipped_project: project,
                    not_applied: true,
                });
            }
            _ if !paid_there => report.unknown.push(invoice),
            _ => {}
        }
    }
    Ok(())
}

/// Invoices still open here, re-read at Paymos as the official plugins' cron does (a paid
/// webhook that never arrived leaves exactly this), but those the window's slices found
/// already (`read`): paid ones are MISSING, late ones PAID_LATE where not recorded here; set
/// aside and (with `apply`) applied as a slice's.
async fn recheck_open<P: PaymosLedger, S: ReconcileStore>(
    paymos: &P,
    fulfil: &Fulfil<S>,
    read: &Report,
    (apply, now_ms): (bool, u64),
) -> Result<Report, PortError> {
    let mut report = Report::default();
    let mut late = Vec::new();
    reread_open(paymos, fulfil, read, &mut report, &mut late).await?;
    let ids: Vec<String> = late.iter().map(|p| p.invoice_id.clone()).collect();
    let here = Fulfilled::of(if ids.is_empty() {
        Vec::new()
    } else {
        fulfil.store().fulfilments_of(&ids).await?
    });
    late_unrecorded(
        (fulfil.store(), fulfil.projects()),
        late,
        &here,
        &mut report,
    )
    .await?;
    set_aside_refunded(paymos, &mut report).await?;
    returned_otherwise(fulfil.store(), &mut report).await?;
    if apply {
        apply_found(fulfil, &mut report, ("reconcile", now_ms)).await;
    }
    Ok(report)
}

/// The re-read of [`recheck_open`]: paid ones are MISSING, late ones join `late`.
async fn reread_open<P: PaymosLedger, S: ReconcileStore>(
    paymos: &P,
    fulfil: &Fulfil<S>,
    read: &Report,
    report: &mut Report,
    late: &mut Vec<PaidAtPaymos>,
) -> Result<(), PortError> {
    let (fulfil_projects, environment) = (fulfil.projects(), fulfil.environment());
    let found: BTreeSet<&str> = [
        &read.missing,
        &read.duplicate_payments,
        &read.paid_late,
        &read.late_recorded,
        &read.refunded,
    ]
    .into_iter()
    .flatten()
    .map(|p| p.invoice_id.as_str())
    .collect();
    let open: Vec<(String, Option<String>)> = fulfil
        .store()
        .open_invoices()
        .await?
        .into_iter()
        .filter(|(invoice, _)| !found.contains(invoice.as_str()))
        .collect();
    report.open_rechecked += open.len();
    let mut orders: std::collections::BTreeMap<String, Option<String>> = open.into_iter().collect();
    let read = read_each(orders.keys().cloned().collect(), |invoice| async move {
        Ok((invoice.clone(), paymos.invoice(&invoice).await))
    })
    .await?;
    for (invoice, at) in read {
        let Some(AtSource::Found(at)) = Unreadable::kept(&invoice, at, report)? else {
            continue;
        };
        crate::roads::confirm::same_environment(at.is_test, environment)?;
        if !fulfil_projects.applies(at.project_id.as_deref()) {
            continue;
        }
        let paid = PaidAtPaymos::paid(&at.status) || at.paid_late;
        if paid && Unreadable::names_no_project(&invoice, &at, fulfil_projects, report) {
            continue;
        }
        let order_id = orders.remove(&invoice).flatten();
        let mut fact = PaidAtPaymos::of(invoice, &at, fulfil_projects);
        if fact.order_id.is_empty() {
            fact.order_id = order_id.unwrap_or_default();
        }
        if PaidAtPaymos::paid(&at.status) {
            report.missing.push(fact);
        } else if at.paid_late {
            late.push(fact);
        }
    }
    Ok(())
}

/// PAID_LATE: late payments not recorded as such here (or recorded with another order than
/// Paymos'), nor released, refunded or fulfilled.
async fn late_unrecorded<S: ReconcileStore>(
    (store, projects): (&S, &crate::money::change::Projects),
    late: Vec<PaidAtPaymos>,
    here: &Fulfilled,
    report: &mut Report,
) -> Result<(), PortError> {
    for fact in late {
        if here.has(&fact.invoice_id) {
            continue;
        }
        let (seen, _) = store.invoice_seen(&fact.invoice_id).await?;
        // Refunded is known only where the refund returned this payment by Paymos' clock: a
        // late payment after a full refund of the earlier partial one is a new payment.
        let known = seen.is_some_and(|s| match s.standing() {
            // Recorded with another order than Paymos' (an event nothing confirmed named it):
            // not known until `--apply` puts Paymos' order on it, before a release ships it.
            // Paymos' order as this stack keys it (the home project's record names none).
            Standing::PaidLate => {
                !crate::money::outcome::differs(&projects.scoped(fact.order()), &s.order)
            }
            Standing::Released => true,
            // A person's undated word waits; Paymos' time decides it instead.
            Standing::AfterRefund => fact.paid_at.is_none(),
            // A record of the refund alone holds no payment: REFUNDED, and `--apply` records
            // the payment it returned.
            Standing::Refunded => {
                (s.paid_late || s.status.is_some_and(InvoiceStatus::fulfils))
                    && s.refunded_in_full_at(fact.paid_at.or(s.payment_at))
            }
            _ => false,
        });
        if known {
            report.late_recorded.push(fact);
        } else {
            report.paid_late.push(fact);
        }
    }
    Ok(())
}

/// REFUNDED: refunds are read before anything is applied, and a payment refunded in full at
/// Paymos (by the domain's rule, [`InvoiceSeen::refunded_in_full`]) is reported, never fulfilled.
async fn set_aside_refunded<P: PaymosLedger>(
    paymos: &P,
    report: &mut Report,
) -> Result<(), PortError> {
    // A second payment refunded in full needs no refund either. A late payment recorded here
    // is never set aside: Paymos' full refunds are kept with it, so `--apply` dates it anew
    // only where none of them returned it.
    let mut unreadable = Vec::new();
    for (list, settles) in [
        (&mut report.missing, true),
        (&mut report.paid_late, true),
        (&mut report.late_recorded, false),
        (&mut report.duplicate_payments, true),
    ] {
        let facts = std::mem::take(list);
        let ids = facts.iter().map(|f| f.invoice_id.clone()).collect();
        let refunds = read_each(ids, |invoice| async move {
            Ok((invoice.clone(), paymos.refunds_of(&invoice).await))
        })
        .await?;
        let mut kept = Vec::new();
        for (fact, (_, refunds)) in facts.iter().zip(refunds) {
            // Refunds it cannot read: never applied on a guess, named for a person.
            let refunds = match refunds {
                Ok(refunds) => refunds,
                Err(e) if e.kind == crate::port::PortErrorKind::Unreadable => {
                    unreadable.push(Unreadable {
                        about: format!("the refunds of {}", fact.invoice_id),
                        why: Unreadable::undecoded(&e.message),
                    });
                    continue;
                }
                Err(e) => return Err(e),
            };
            // The rule reads the refunds alone (a refund in full, whatever its amount).
            // Only a full refund completed when or after the payment returned it.
            let seen = InvoiceSeen {
                refunds,
                payment_at: fact.paid_at,
                ..InvoiceSeen::with_status(InvoiceStatus::parse(&fact.status))
            };
            // Where Paymos names no payment time but dates a full refund, nothing says the
            // refund returned it: it is applied undated after the refunds and waits for a
            // person, never settled here. (Neither dated: nothing ships on a guess.)
            let dated = seen.refunds.iter().any(|r| {
                r.mode == Some(crate::money::invoice::RefundMode::Full) && r.completed_at.is_some()
            });
            let refunded = settles && seen.refunded_in_full() && (fact.paid_at.is_some() || !dated);
            let mut fact = fact.clone();
            // Recorded first (`--apply`): a full one, and one whose mode Paymos does not say,
            // after which the payment waits for a person (never REFUNDED on a guess, nor
            // shipped); of a REFUNDED one, the refunds that returned it.
            fact.refunds_before = seen
                .refunds
                .into_iter()
                .filter(|r| r.mode != Some(crate::money::invoice::RefundMode::Overpayment))
                .collect();
            if refunded {
                report.refunded.push(fact);
            } else {
                kept.push(fact);
            }
        }
        *list = kept;
    }
    report.unreadable.extend(unreadable);
    Ok(())
}

/// SHIPPED OTHERWISE, as a person left it: one they settled (`exceptions --resolve`) is no
/// finding any more; with `apply`, each other is noted on its invoice, listed for a person
/// (`order_conflict`) until they settle it ([`crate::money::write::shipped_otherwise`]), so it
/// is not forgotten once it leaves the window.
async fn shipped_otherwise<S: ReconcileStore>(
    fulfil: &Fulfil<S>,
    report: &mut Report,
    (apply, now_ms): (bool, u64),
) -> Result<(), PortError> {
    let mut kept = Vec::new();
    for found in std::mem::take(&mut report.shipped_otherwise) {
        let id = &found.paid.invoice_id;
        let (seen, _) = fulfil.store().invoice_seen(id).await?;
        if seen.is_some_and(|s| s.otherwise_settled) {
            continue;
        }
        if apply {
            note_shipped_otherwise(fulfil.store(), &found.paid, !found.not_applied, now_ms).await?;
        }
        kept.push(found);
    }
    report.shipped_otherwise = kept;
    Ok(())
}

/// Notes `paid`'s invoice shipped here otherwise than Paymos has it (`paid`), once, and
/// first takes Paymos' order for its payment (where this stack applies its project, `take`),
/// so that no other payment of it ships while a person ships it by hand; where another
/// invoice shipped it already, the note names that invoice (nothing to ship: refund); where
/// Paymos names no order yet, nothing is taken and the note says so.
async fn note_shipped_otherwise<S: ReconcileStore>(
    store: &S,
    paid: &PaidAtPaymos,
    take: bool,
    now_ms: u64,
) -> Result<(), PortError> {
    let mut shipped_with = None;
    if let (true, Some(order)) = (take, paid.order().external_id) {
        let at_ms = paid.paid_at.map_or(now_ms, |s| s.saturating_mul(1000));
        let taken = crate::money::write::paymos_order_taken(
            &paid.invoice_id,
            (paid.scope.as_deref(), &order),
            at_ms,
        );
        if let crate::money::write::Stored::Refused(_) = store.write(&[taken]).await? {
            shipped_with = store
                .order_fulfilled_by(paid.scope.as_deref(), &order)
                .await?
                .filter(|first| *first != paid.invoice_id);
        }
    }
    let otherwise = match (&shipped_with, take) {
        (_, false) => crate::money::write::Otherwise::Elsewhere,
        (Some(first), true) => crate::money::write::Otherwise::ShippedWith(first),
        (None, true) if paid.order().external_id.is_none() => {
            crate::money::write::Otherwise::OrderUnnamed
        }
        (None, true) => crate::money::write::Otherwise::ShipByHand,
    };
    let noted = crate::money::write::shipped_otherwise(
        &paid.invoice_id,
        (&paid.in_words(), otherwise),
        now_ms,
    );
    // Refused: noted by a run before (or the record is gone, which nothing does).
    let _ = store.write(&[noted]).await?;
    Ok(())
}

/// A late payment recorded here that a full refund recorded here returned, where no refund
/// Paymos lists returns it by Paymos' clock (a refund Paymos never made, or one Paymos dates
/// before the payment): not known, but PAID_LATE, which `--apply` judges by Paymos' refunds.
async fn returned_otherwise<S: ReconcileStore>(
    store: &S,
    report: &mut Report,
) -> Result<(), PortError> {
    let mut known = Vec::new();
    for fact in std::mem::take(&mut report.late_recorded) {
        let (seen, _) = store.invoice_seen(&fact.invoice_id).await?;
        let refunded_here = seen.is_some_and(|s| s.standing() == Standing::Refunded);
        let by_paymos = fact.refunds_before.iter().any(|r| {
            r.mode == Some(crate::money::invoice::RefundMode::Full)
                && r.returns_payment_at(fact.paid_at)
        });
        if refunded_here && !by_paymos {
            report.paid_late.push(fact);
        } else {
            known.push(fact);
        }
    }
    report.late_recorded = known;
    Ok(())
}
