//! The scheduled run: its window (from where the last clean one ended), read an hour's slice at
//! a time, and where it got to ([`Progress`]), so a run cut short is continued by the next.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;

use crate::money::change::Applied;
use crate::roads::fulfil::Fulfil;
use crate::roads::ingest::PortError;

use super::{PaymosLedger, ReconcileStore, Report, read_slice, recheck_open};

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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Progress {
    /// The window (Unix seconds, inclusive).
    pub window: (u64, u64),
    /// The end of the last slice read (none yet: nothing read).
    pub done_until: Option<u64>,
    /// Whether a part of the window read so far found something for a person.
    pub for_a_person: bool,
    /// What the window read so far found, by kind (the runs that read it together).
    pub found: Found,
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
                found: Found::of(item.get(&Field::Found)),
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
/// ended is kept with what the whole window found ([`crate::money::write::reconcile_read`],
/// what `status` reads: [`LastWindow`]), and, when no part of it found
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
            found: Found::default(),
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
        progress.found.add(&found);
        progress.done_until = Some(u64::try_from(slice.1).unwrap_or(0));
        report.absorb(found);
        let (window, done) = (progress.window, progress.done_until.unwrap_or(0));
        store
            .write(&[crate::money::write::reconcile_progress(
                window,
                done,
                (progress.for_a_person, &progress.found.named()),
                now_ms,
            )])
            .await?;
    }
    if progress.finished() {
        let open = recheck_open(paymos, fulfil, &report, (apply, now_ms)).await?;
        progress.for_a_person |= !open.clean();
        progress.found.add(&open);
        report.absorb(open);
        // Refused only where a later run's end is kept already.
        let mut ends = vec![crate::money::write::reconcile_read(
            progress.window,
            (progress.for_a_person, &progress.found.named()),
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

/// A kind of finding of a reconciliation, as its report lists them and `status` counts them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Finding {
    /// Paid at Paymos, never fulfilled here, and not fulfilled by `--apply` either.
    Missing,
    /// Missing, and fulfilled by `--apply`.
    Applied,
    /// An order fulfilled more than once.
    Double,
    /// Paid at Paymos for an order another invoice fulfilled here.
    DuplicatePayment,
    /// Fulfilled here under another order or project than Paymos' invoice names.
    ShippedOtherwise,
    /// Fulfilled here, not paid at Paymos.
    Unknown,
    /// Paid after it closed at Paymos, not recorded as a late payment here.
    PaidLate,
    /// Paid at Paymos and refunded there in full: never fulfilled.
    Refunded,
    /// An answer of Paymos this version cannot read.
    Unreadable,
}

impl Finding {
    /// Every kind, in the order a report lists them.
    pub const ALL: [Self; 9] = [
        Self::Missing,
        Self::Applied,
        Self::Double,
        Self::DuplicatePayment,
        Self::ShippedOtherwise,
        Self::Unknown,
        Self::PaidLate,
        Self::Refunded,
        Self::Unreadable,
    ];

    /// Its name, as kept and as `status` says it.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Missing => "missing",
            Self::Applied => "applied",
            Self::Double => "double",
            Self::DuplicatePayment => "duplicate_payment",
            Self::ShippedOtherwise => "shipped_otherwise",
            Self::Unknown => "unknown",
            Self::PaidLate => "paid_late",
            Self::Refunded => "refunded",
            Self::Unreadable => "unreadable",
        }
    }

    /// The kind named `name`, if this version knows it.
    #[must_use]
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.as_str() == name)
    }
}

/// What a window found, counted by kind (a kind found nothing: absent).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Found(BTreeMap<Finding, u64>);

impl Found {
    /// Counts what `report` found, on top of what is counted.
    pub fn add(&mut self, report: &Report) {
        let unless = |applied: Applied| {
            move |invoice: &&super::PaidAtPaymos| {
                report.applied.get(&invoice.invoice_id) != Some(&Ok(applied))
            }
        };
        let missing = report.missing.iter().filter(unless(Applied::Fulfilled));
        let missing = missing.count();
        let counts = [
            (Finding::Missing, missing),
            (Finding::Applied, report.missing.len() - missing),
            (Finding::Double, report.double.len()),
            (Finding::DuplicatePayment, report.duplicate_payments.len()),
            (Finding::ShippedOtherwise, report.shipped_otherwise.len()),
            (Finding::Unknown, report.unknown.len()),
            (
                Finding::PaidLate,
                report
                    .paid_late
                    .iter()
                    .filter(unless(Applied::PaidLate))
                    .count(),
            ),
            (Finding::Refunded, report.refunded.len()),
            (Finding::Unreadable, report.unreadable.len()),
        ];
        for (finding, n) in counts {
            if n > 0 {
                *self.0.entry(finding).or_default() += n as u64;
            }
        }
    }

    /// How many of `finding` were found.
    #[must_use]
    pub fn count(&self, finding: Finding) -> u64 {
        self.0.get(&finding).copied().unwrap_or(0)
    }

    /// Each kind found and how many, in [`Finding::ALL`]'s order.
    pub fn iter(&self) -> impl Iterator<Item = (Finding, u64)> + '_ {
        self.0.iter().map(|(f, n)| (*f, *n))
    }

    /// Whether nothing was found.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// As the store keeps it: counts by name.
    #[must_use]
    pub fn named(&self) -> BTreeMap<String, u64> {
        self.iter()
            .map(|(f, n)| (f.as_str().to_owned(), n))
            .collect()
    }

    /// As the store kept it (a kind this version does not know is left out).
    fn of(kept: Option<&crate::money::write::Value>) -> Self {
        match kept {
            Some(crate::money::write::Value::Counts(counts)) => Self(
                counts
                    .iter()
                    .filter_map(|(name, n)| Finding::parse(name).map(|f| (f, *n)))
                    .filter(|(_, n)| *n > 0)
                    .collect(),
            ),
            _ => Self::default(),
        }
    }
}

/// The last window a scheduled run read whole, as the store keeps it
/// ([`crate::money::write::reconcile_read`]): what a person's `status` says of the
/// reconciliation, in one read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastWindow {
    /// The window (Unix seconds, inclusive); its start is unknown for a window kept by a
    /// version before it was kept.
    pub window: (Option<u64>, u64),
    /// When the run that read its last part ended it (Unix ms).
    pub at_ms: u64,
    /// Whether anything it found is for a person (as the scheduled run fails on, and its
    /// alarm fires): a MISSING not applied, a DOUBLE, a DUPLICATE PAYMENT, a SHIPPED OTHERWISE,
    /// an UNKNOWN, a PAID_LATE not recorded, an UNREADABLE answer.
    pub for_a_person: bool,
    /// What it found, by kind.
    pub found: Found,
}

impl LastWindow {
    /// The last window read whole, if any: one read of one item.
    ///
    /// # Errors
    /// [`PortError`] when the store fails.
    pub async fn kept<S: crate::roads::fulfil::ResourceStore>(
        store: &S,
    ) -> Result<Option<Self>, PortError> {
        use crate::money::write::{Field, Key, Value};
        let Some(item) = store
            .read(&Key::state(crate::money::write::RECONCILE_READ_KEY))
            .await?
        else {
            return Ok(None);
        };
        let int = |f: Field| item.get(&f).and_then(Value::as_int);
        Ok(int(Field::ReadUntil).map(|until| Self {
            window: (int(Field::WindowFrom), until),
            at_ms: int(Field::UpdatedAt).unwrap_or(0),
            for_a_person: item.get(&Field::ForAPerson) == Some(&Value::Bool(true)),
            found: Found::of(item.get(&Field::Found)),
        }))
    }

    /// How far behind the runs are at `now_ms` (seconds): see [`behind`].
    #[must_use]
    pub fn behind(&self, now_ms: u64) -> u64 {
        (now_ms / 1000).saturating_sub(self.window.1)
    }
}

/// How far behind (seconds) the reconciliation is when it needs a person
/// (`ReconcileBehindAlarm`'s threshold): three hours, three hourly runs that did not read their
/// whole window.
pub const BEHIND_FOR_A_PERSON_S: u64 = 3 * 3600;
