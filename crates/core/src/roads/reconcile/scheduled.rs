//! The scheduled run: its window (from where the last clean one ended), read an hour's slice at
//! a time, and where it got to ([`Progress`]), so a run cut short is continued by the next.

use std::collections::BTreeSet;
use std::future::Future;

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
