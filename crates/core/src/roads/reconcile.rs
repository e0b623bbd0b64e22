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
        self.applied.extend(applied);
    }
}

impl PaidAtPaymos {
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

/// Where the last clean reconciliation ended, as the store keeps it
/// ([`crate::money::write::reconciled`]).
pub trait ReconcileCheckpoint: Send + Sync {
    /// The end (Unix seconds) of the last run that found nothing for a person, if any.
    ///
    /// # Errors
    /// [`PortError`] when the store fails.
    fn clean_until(&self) -> impl Future<Output = Result<Option<u64>, PortError>> + Send;

    /// The end (Unix seconds) of the last run that read its whole window, clean or not.
    ///
    /// # Errors
    /// [`PortError`] when the store fails.
    fn read_until(&self) -> impl Future<Output = Result<Option<u64>, PortError>> + Send;
}

impl<T: ReconcileCheckpoint> ReconcileCheckpoint for std::sync::Arc<T> {
    fn clean_until(&self) -> impl Future<Output = Result<Option<u64>, PortError>> + Send {
        (**self).clean_until()
    }

    fn read_until(&self) -> impl Future<Output = Result<Option<u64>, PortError>> + Send {
        (**self).read_until()
    }
}

/// How far behind the scheduled reconciliation is at `now_ms` (seconds): since the end of the
/// last run that read its whole window, whatever it found (none yet: nothing to say). A run
/// every hour is about an hour behind when it starts; runs cut short (the function's time, an
/// outage of Paymos' API) add up here, apart from findings that wait for a person (which keep
/// the next window's start back, [`scheduled_window`], and alarm on their own).
///
/// # Errors
/// [`PortError`] when the store fails.
pub async fn behind<S: ReconcileCheckpoint>(
    store: &S,
    now_ms: u64,
) -> Result<Option<u64>, PortError> {
    Ok(store
        .read_until()
        .await?
        .map(|until| (now_ms / 1000).saturating_sub(until)))
}

/// The farthest back a scheduled run reaches to close a gap: 31 days.
pub const LONGEST_GAP_S: u64 = 31 * 86_400;

/// The window a scheduled run reads at `now` (Unix seconds): its last `hours`, or from where
/// the last clean run ended when that is earlier (runs that failed or found something for a
/// person leave no gap: the next one reads from there), at most [`LONGEST_GAP_S`] back.
#[must_use]
pub fn scheduled_window(now: u64, hours: u64, clean_until: Option<u64>) -> (u64, u64) {
    let usual = now.saturating_sub(hours.saturating_mul(3600));
    let from = clean_until.map_or(usual, |until| until.min(usual));
    (from.max(now.saturating_sub(LONGEST_GAP_S)), now)
}

/// How long a slice of a scheduled run's window is (seconds): the run reads its window slice
/// by slice in creation order, keeps where it got to after each ([`Progress`]), and holds one
/// slice's invoices at a time, whatever the window's length.
pub const SLICE_S: i64 = 3600;

/// Disjoint slices of `len` seconds (the last one shorter) covering `[from, to]` (inclusive
/// Unix seconds, as Paymos' filters are), earliest first; an empty window is itself.
#[must_use]
pub fn slices_of(from: i64, to: i64, len: i64) -> Vec<(i64, i64)> {
    if to <= from {
        return vec![(from, to)];
    }
    let len = len.max(1);
    std::iter::successors(Some(from), |start| {
        start.checked_add(len).filter(|next| *next <= to)
    })
    .map(|start| (start, start.saturating_add(len - 1).min(to)))
    .collect()
}

/// A scheduled run's progress through its window, as the store keeps it
/// ([`crate::money::write::reconcile_progress`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// The window (Unix seconds, inclusive).
    pub window: (u64, u64),
    /// The end of the last slice read (none yet: nothing read).
    pub done_until: Option<u64>,
    /// Whether a part of the window read so far found something for a person.
    pub for_a_person: bool,
}

impl Progress {
    /// Whether every slice of the window was read.
    #[must_use]
    pub fn finished(&self) -> bool {
        self.done_until.is_some_and(|d| d >= self.window.1)
    }

    /// The progress kept, if any.
    ///
    /// # Errors
    /// [`PortError`] when the store fails.
    pub async fn kept<S: crate::roads::fulfil::ResourceStore>(
        store: &S,
    ) -> Result<Option<Self>, PortError> {
        use crate::money::write::{Field, Key, Value};
        let Some(item) = store
            .read(&Key::state(crate::money::write::RECONCILE_PROGRESS_KEY))
            .await?
        else {
            return Ok(None);
        };
        let int = |f: Field| match item.get(&f) {
            Some(Value::Int(t)) => Some(*t),
            _ => None,
        };
        Ok(match (int(Field::WindowFrom), int(Field::WindowTo)) {
            (Some(from), Some(to)) => Some(Self {
                window: (from, to),
                done_until: int(Field::DoneUntil),
                for_a_person: item.get(&Field::ForAPerson) == Some(&Value::Bool(true)),
            }),
            _ => None,
        })
    }
}

/// A scheduled run: the window a run cut short left unfinished ([`Progress`]), from where it
/// stopped; else a new one, [`scheduled_window`]. Its [`SLICE_S`] slices are read one after
/// the other, in creation order, and after each the progress is kept; before each but the
/// first (a run always reads one, however short its time) `another_slice` says whether time is
/// left for it (the function's remaining time, less a margin): a run cut short leaves the rest
/// to the next, and the window never grows because a run stopped. The invoices open here are
/// re-read once per window, by the run that reads its last slice (they are what is open now,
/// not the window's: re-read per slice, each would be read again and again; by a run that stops,
/// the time a window's slices need would go to them). When the whole window is read, where it
/// ended is kept ([`crate::money::write::reconcile_read`]), and, when no part of it found
/// anything for a person, as the clean end the next window starts at the latest. Returns what
/// this run found, in the slices it read, and the progress.
///
/// # Errors
/// As [`reconcile`]; the slices read before are kept.
pub async fn scheduled<P, S, B>(
    paymos: &P,
    fulfil: &Fulfil<S>,
    (hours, apply): (u64, bool),
    now_ms: u64,
    mut another_slice: B,
) -> Result<(Report, Progress), PortError>
where
    P: PaymosLedger,
    S: ReconcileStore + ReconcileCheckpoint,
    B: FnMut() -> bool + Send,
{
    let store = fulfil.store();
    let mut progress = match Progress::kept(store).await? {
        Some(kept) if !kept.finished() => kept,
        _ => Progress {
            window: scheduled_window(now_ms / 1000, hours, store.clean_until().await?),
            done_until: None,
            for_a_person: false,
        },
    };
    let signed = |t: u64| i64::try_from(t).unwrap_or(i64::MAX);
    let (from, to) = (signed(progress.window.0), signed(progress.window.1));
    let mut report = Report::default();
    let mut crossed = BTreeSet::new();
    let done = progress.done_until;
    let left = slices_of(from, to, SLICE_S)
        .into_iter()
        .filter(|(_, end)| done.is_none_or(|d| signed(d) < *end));
    for (k, slice) in left.enumerate() {
        if k > 0 && !another_slice() {
            break;
        }
        let found = read_slice(paymos, fulfil, slice, (apply, now_ms), &mut crossed).await?;
        progress.for_a_person |= !found.clean();
        progress.done_until = Some(u64::try_from(slice.1).unwrap_or(0));
        report.absorb(found);
        let (window, done) = (progress.window, progress.done_until.unwrap_or(0));
        store
            .write(&[crate::money::write::reconcile_progress(
                window,
                done,
                progress.for_a_person,
                now_ms,
            )])
            .await?;
    }
    if progress.finished() {
        let open = recheck_open(paymos, fulfil, &report, (apply, now_ms)).await?;
        progress.for_a_person |= !open.clean();
        report.absorb(open);
        // Refused only where a later run's end is kept already.
        let mut ends = vec![crate::money::write::reconcile_read(
            progress.window.1,
            now_ms,
        )];
        if !progress.for_a_person {
            ends.push(crate::money::write::reconciled(progress.window.1, now_ms));
        }
        for end in ends {
            store.write(&[end]).await?;
        }
    }
    Ok((report, progress))
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
    let listed = paymos.invoices_created(from, to).await?;
    // A key of the other environment is the stack's problem: nothing of it ships here.
    for (_, at) in &listed {
        crate::roads::confirm::same_environment(at.is_test, fulfil.environment())?;
    }
    let (paid, late): (Vec<_>, Vec<_>) = listed
        .into_iter()
        // Another project's invoices are that project's stack's to reconcile.
        .filter(|(_, at)| projects.applies(at.project_id.as_deref()))
        .filter(|(_, at)| PaidAtPaymos::paid(&at.status) || at.paid_late)
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
    unknown(paymos, (&paid, &*crossed), &here, (from, to), &mut report).await?;
    crossed.extend(
        paid.iter()
            .filter(|p| {
                here.invoices
                    .get(&p.invoice_id)
                    .is_some_and(|f| f.1 > to_ms)
            })
            .map(|p| p.invoice_id.clone()),
    );
    late_unrecorded(store, late, &here, &mut report).await?;
    set_aside_refunded(paymos, &mut report).await?;
    if apply {
        apply_found(fulfil, &mut report, ("reconcile", now_ms)).await;
        // Fulfilled now, in the window's last slice: known there.
        crossed.extend(report.applied.keys().cloned());
    }
    Ok(report)
}

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
    if given.has_price() && (given.amount != paymos.amount || given.currency != paymos.currency) {
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
        let shipped = here
            .shipped
            .get(&p.invoice_id)
            .filter(|(claim, ..)| !p.order_id.trim().is_empty() && *claim != p.claim());
        match (here.invoices.get(&p.invoice_id), shipped) {
            (Some((1, _)), Some((_, order_id, project))) => {
                report.shipped_otherwise.push(ShippedOtherwise {
                    paid: p.clone(),
                    shipped_order_id: order_id.clone(),
                    shipped_project: project.clone(),
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
    paymos: &P,
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
        paymos.invoice(&invoice).await.map(|at| (invoice, at))
    })
    .await?;
    for (invoice, at) in read {
        let paid_there = match at {
            // A late payment is a payment (released here by a person).
            AtSource::Found(i) => PaidAtPaymos::paid(&i.status) || i.paid_late,
            AtSource::NotFound => false,
        };
        if !paid_there {
            report.unknown.push(invoice);
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
    late_unrecorded(fulfil.store(), late, &here, &mut report).await?;
    set_aside_refunded(paymos, &mut report).await?;
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
        paymos.invoice(&invoice).await.map(|at| (invoice, at))
    })
    .await?;
    for (invoice, at) in read {
        let AtSource::Found(at) = at else {
            continue;
        };
        crate::roads::confirm::same_environment(at.is_test, environment)?;
        if !fulfil_projects.applies(at.project_id.as_deref()) {
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
    store: &S,
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
            Standing::PaidLate => !crate::money::outcome::differs(&fact.order(), &s.order),
            Standing::Released => true,
            // A person's undated word waits; Paymos' time decides it instead.
            Standing::AfterRefund => fact.paid_at.is_none(),
            Standing::Refunded => s.refunded_in_full_at(fact.paid_at.or(s.payment_at)),
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
    for (list, settles) in [
        (&mut report.missing, true),
        (&mut report.paid_late, true),
        (&mut report.late_recorded, false),
        (&mut report.duplicate_payments, true),
    ] {
        let facts = std::mem::take(list);
        let ids = facts.iter().map(|f| f.invoice_id.clone()).collect();
        let refunds = read_each(ids, |invoice| async move {
            paymos.refunds_of(&invoice).await.map(|r| (invoice, r))
        })
        .await?;
        let mut kept = Vec::new();
        for (fact, (_, refunds)) in facts.iter().zip(refunds) {
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
            if settles && seen.refunded_in_full() && (fact.paid_at.is_some() || !dated) {
                report.refunded.push(fact.clone());
            } else {
                let mut fact = fact.clone();
                // Recorded first: a full one, and one whose mode Paymos does not say, after
                // which the payment waits for a person (never REFUNDED on a guess, nor shipped).
                fact.refunds_before = seen
                    .refunds
                    .into_iter()
                    .filter(|r| r.mode != Some(crate::money::invoice::RefundMode::Overpayment))
                    .collect();
                kept.push(fact);
            }
        }
        *list = kept;
    }
    Ok(())
}

/// Paymos' time of `m`'s payment ([`Fulfil::paymos_dates`]), then Paymos' full refunds of its
/// invoice completed before it, recorded before the payment is applied: a later delivery of one
/// (dated by its event, which may say later than the payment) finds it applied.
async fn refunds_first<S: ReconcileStore>(
    fulfil: &Fulfil<S>,
    m: &PaidAtPaymos,
    (by, now_ms): (&str, u64),
) -> Result<(), PortError> {
    // Dated first, judged against the refunds recorded here until now; a payment recorded
    // here has nothing left to apply, and its refunds are read, never recorded.
    let recorded = match m.paid_at {
        Some(t) => fulfil.paymos_dates(&m.invoice_id, t, true).await?,
        None => false,
    };
    if recorded {
        return Ok(());
    }
    // (A full refund Paymos names no time for settles any payment: never one of these.)
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
async fn apply_found<S: ReconcileStore>(
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
    // dated by Paymos, the refund settles it here too.
    for m in &report.refunded {
        if let Some(t) = m.paid_at
            && let Err(e) = fulfil.paymos_dates(&m.invoice_id, t, false).await
        {
            report
                .applied
                .insert(m.invoice_id.clone(), Err(e.to_string()));
        }
    }
    for m in &report.paid_late {
        let closed = InvoiceStatus::parse(&m.status).unwrap_or(InvoiceStatus::Expired);
        // Dated and Paymos' full refunds before it recorded first ([`refunds_first`]): a
        // payment a person named undated after a full refund is reopened before the close
        // Paymos has lands on it.
        let dated = refunds_first(fulfil, m, (by, now_ms)).await;
        let closing = match dated {
            Ok(()) => {
                fulfil
                    .apply_confirmed(&m.invoice_id, (closed, None), m.order(), by, now_ms)
                    .await
            }
            Err(e) => Err(e),
        };
        let applied = match closing {
            Ok(_) => said(
                fulfil
                    .apply_confirmed(
                        &m.invoice_id,
                        (InvoiceStatus::Paid, m.paid_at),
                        m.order(),
                        by,
                        now_ms,
                    )
                    .await,
            ),
            Err(e) => Err(e.to_string()),
        };
        report.applied.insert(m.invoice_id.clone(), applied);
    }
    for m in report.missing.iter().chain(&report.duplicate_payments) {
        let status = InvoiceStatus::parse(&m.status).unwrap_or(InvoiceStatus::Paid);
        // An empty `external_order_id` is no order: the payment waits for it (order_unknown),
        // it never shares a claim with every other invoice that has none.
        let applied = match refunds_first(fulfil, m, (by, now_ms)).await {
            Ok(()) => said(
                fulfil
                    .apply_confirmed(&m.invoice_id, (status, m.paid_at), m.order(), by, now_ms)
                    .await,
            ),
            Err(e) => Err(e.to_string()),
        };
        report.applied.insert(m.invoice_id.clone(), applied);
    }
}
