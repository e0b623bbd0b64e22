//! A payment that ships: its status, its late arrival, the fulfilment, the order's claim and amount guard, refunds on the invoice and a person's release; the review listings.

use super::*;

/// A paid invoice that fulfils: its status, under [`transition`], not [`refunded_in_full`],
/// not [`refund_of_unknown_mode`], and [`order_on_record`]; then everything that fulfils it ([`fulfilment`]).
#[must_use]
pub fn payment(
    paid: &PaidInvoice<'_>,
    (at, paid_at): (u64, Option<u64>),
    effects: Vec<EffectWrite>,
) -> Vec<Write> {
    let mut writes = vec![Write {
        what: What::Payment,
        key: Key::state(paid.invoice_id),
        guard: Guard::All(vec![
            transition(paid.status, at),
            Guard::Not(Box::new(refunded_in_full(paid_at))),
            Guard::Not(Box::new(refund_of_unknown_mode(paid_at))),
            order_on_record(paid.order),
            // Its events named two projects: only a person naming one, or Paymos, ships it.
            Guard::Lacks(Field::ProjectsDisagree),
        ]),
        set: {
            let mut set = invoice_fields(paid.status, at, paid.order, paid.source, paid.at_ms);
            set.push(invoice_listing(
                paid.invoice_id,
                paid.status,
                false,
                paid.at_ms,
            ));
            set.extend(paid_at.map(|t| Set::Put(Field::PaymentAt, Value::Int(t))));
            // Its order is known now: nothing waits for it any more.
            set.push(Set::Remove(Field::AwaitsOrder));
            set.push(Set::Remove(Field::AfterRefund));
            set
        },
    }];
    writes.extend(fulfilment(paid, effects, true));
    writes
}

/// A payment after the invoice closed `closed`, at `at` (by Paymos' clock where `paid_at`
/// says so): `paid_late_at` set once, the status kept; the change dated `now_ms` (when the
/// review it needs begins). `after_refund`: undated, with a full refund on record
/// ([`Mark::AfterRefund`]).
#[must_use]
pub fn paid_late(
    invoice_id: &str,
    closed: InvoiceStatus,
    (at, paid_at): (u64, Option<u64>),
    (after_refund, projects_disagree): (bool, bool),
    now_ms: u64,
) -> Write {
    let mut set = vec![
        Set::Once(Field::PaidLateAt, Value::Int(at)),
        Set::Put(Field::UpdatedAt, Value::Int(now_ms)),
        invoice_listing(invoice_id, closed, true, now_ms),
    ];
    set.extend(paid_at.map(|t| Set::Once(Field::PaymentAt, Value::Int(t))));
    if projects_disagree {
        set.push(Set::Put(Field::ProjectsDisagree, Value::Bool(true)));
    }
    let mut guard = Guard::Is(Field::Status, Value::text(closed.as_str()));
    if after_refund {
        set.push(Set::Put(Field::AfterRefund, Value::Bool(true)));
        // Only a first word of it: a late payment recorded before the full refund was
        // returned by it, whoever says so again.
        guard = Guard::All(vec![guard, Guard::Lacks(Field::PaidLateAt)]);
    } else if paid_at.is_some() {
        // A dated delivery of a payment first recorded by it (one that waited for its order):
        // its time judges the refund. One recorded undated before it keeps waiting.
        set.push(Set::Remove(Field::AfterRefund));
        guard = Guard::All(vec![
            guard,
            Guard::Any(vec![
                Guard::Lacks(Field::PaidLateAt),
                Guard::Lacks(Field::AfterRefund),
            ]),
        ]);
    }
    Write {
        what: What::PaidLate,
        key: Key::state(invoice_id),
        guard,
        set,
    }
}

/// Where the state table's one index (`listed`: hash `listed_in`, range `updated_at`) lists
/// an item that stands for an event: an invoice, a fulfilment, a withdrawal, a deposit, a
/// review note. Written with every change of such an item, so each read of the index returns
/// what it lists, never the books:
///
/// | `listed_in` | what | read by |
/// |---|---|---|
/// | `review#k` ([`review_list`]) | an invoice whose payment waits for a person (held, paid twice, paid late) until a release | `exceptions`, `release` |
/// | [`ACTIONS`] | the operators' audit trail ([`crate::money::action`]), newest first | `audit`, the console |
/// | `open#k` ([`open_list`]) | an invoice while its status is open | the reconciliation's re-read at Paymos |
/// | `day#2026-12-01#k` ([`day_list`]) | anything else, by the UTC day it last changed | `events since`/`resend`, the reconciliation's fulfilments |
///
/// An item is in one list at a time. `open` and each day are spread over [`LIST_SHARDS`]
/// lists by a hash of the item's own key (`k`, [`shard_of`]), so that no one partition of the
/// index takes every write of a busy day (a partition takes 1,000 writes a second, and a list
/// whose range key only grows cannot be split). What waits for a person is few on a usual day,
/// but a storm (a day of held or late payments) lists every payment there: `review` is spread
/// over [`REVIEW_SHARDS`] lists the same way (`review#k`), and the deliveries' sparse `waiting`
/// index over as many keys ([`waiting_shard`]), not one a outcome. Readers read every shard,
/// and the unsharded `open` and `day#2026-12-01` lists of releases before: `events since`
/// reads the days since, and the short lists, from the time asked ([`days_listing`],
/// [`open_lists`], [`review_lists`]). What the one `review` list and the outcome keys of
/// releases before held, `exceptions --reindex` moves to its shard.
pub mod listing {
    use crate::money::status::InvoiceStatus;

    /// Invoices whose payment waits for a person: the one list of releases before the shards,
    /// and the prefix of each shard (`review#k`, [`review_list`]).
    pub const REVIEW: &str = "review";
    /// How many lists `review` is spread over, and the deliveries' `waiting` index: a storm
    /// that makes every payment of 20,000 deliveries a second wait (4,545 a second of the
    /// mix) puts under 800 writes a second on each, and a reader of what waits makes this
    /// many queries, not one per outcome (the scheduled sweep reads both every run).
    pub const REVIEW_SHARDS: u32 = 8;
    /// The audit trail: every operator's action, newest first by its time (few: one list).
    pub const ACTIONS: &str = "actions";
    /// Invoices whose status is open (the list of releases before the shards; each shard is
    /// `open#k`).
    pub const OPEN: &str = "open";
    /// How many lists `open` and each day are spread over.
    pub const LIST_SHARDS: u32 = 32;
    /// The first UTC day whose lists are spread (2026-12-02, this release's): no release wrote
    /// a shard of an earlier day, so an earlier day is its one list (and an item dated before,
    /// a reindexed one, is listed there), and reading a year back costs one query a day.
    pub const SHARDED_FROM_MS: u64 = 1_796_169_600_000;
    const DAY_MS: u64 = 86_400_000;

    /// The shard of `key` among `shards`: FNV-1a over its bytes, mixed (MurmurHash3's
    /// finaliser) so that keys that differ in their last characters spread evenly over a
    /// power of two. Stable: a key always lands in the same shard. The deliveries'
    /// `pending-by-age` shards use the same.
    #[must_use]
    pub fn shard_of(key: &str, shards: u32) -> u32 {
        let mut h = key.bytes().fold(0x811c_9dc5_u32, |h, b| {
            (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
        });
        h ^= h >> 16;
        h = h.wrapping_mul(0x85eb_ca6b);
        h ^= h >> 13;
        h = h.wrapping_mul(0xc2b2_ae35);
        h ^= h >> 16;
        h % shards.max(1)
    }

    /// The unsharded list of `at_ms`'s UTC day, `day#2026-12-01`: what releases before the
    /// shards wrote, and the prefix of that day's shards.
    #[must_use]
    pub fn day_listing(at_ms: u64) -> String {
        let at = i64::try_from(at_ms)
            .ok()
            .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
            .unwrap_or(jiff::Timestamp::MAX);
        let date = jiff::tz::Offset::UTC.to_datetime(at).date();
        format!("day#{date}")
    }

    /// The list of the item under `key` that changed on `at_ms`'s UTC day:
    /// `day#2026-12-01#k`.
    #[must_use]
    pub fn day_list(key: &str, at_ms: u64) -> String {
        if at_ms < SHARDED_FROM_MS {
            return day_listing(at_ms);
        }
        format!("{}#{}", day_listing(at_ms), shard_of(key, LIST_SHARDS))
    }

    /// The list of the open invoice `invoice_id`: `open#k`.
    #[must_use]
    pub fn open_list(invoice_id: &str) -> String {
        format!("{OPEN}#{}", shard_of(invoice_id, LIST_SHARDS))
    }

    /// The review list of the invoice `invoice_id`: `review#k`.
    #[must_use]
    pub fn review_list(invoice_id: &str) -> String {
        format!("{REVIEW}#{}", shard_of(invoice_id, REVIEW_SHARDS))
    }

    /// Every review list: each shard (`exceptions --reindex` moves what the one list of
    /// releases before held).
    #[must_use]
    pub fn review_lists() -> Vec<String> {
        (0..REVIEW_SHARDS)
            .map(|k| format!("{REVIEW}#{k}"))
            .collect()
    }

    /// The key of the deliveries' sparse `waiting` index under which the delivery `key`
    /// ([`crate::wire::work::delivery_key`]) waits for a person: `w0`…`w7`, by a hash of
    /// its key, whatever its outcome (kept in its `outcome`).
    #[must_use]
    pub fn waiting_shard(key: &str) -> String {
        format!("w{}", shard_of(key, REVIEW_SHARDS))
    }

    /// Every key of the `waiting` index ([`waiting_shard`]).
    #[must_use]
    pub fn waiting_shards() -> Vec<String> {
        (0..REVIEW_SHARDS).map(|k| format!("w{k}")).collect()
    }

    /// Every list of open invoices: the unsharded one of releases before, then each shard.
    #[must_use]
    pub fn open_lists() -> Vec<String> {
        std::iter::once(OPEN.to_owned())
            .chain((0..LIST_SHARDS).map(|k| format!("{OPEN}#{k}")))
            .collect()
    }

    /// The list of the invoice `invoice_id` at `at_ms`: [`REVIEW`] while its payment waits
    /// for a person, else its [`open_list`] while its status is open, else its [`day_list`]
    /// (for its writes and for a reindex of one written before the index alike).
    #[must_use]
    pub fn invoice_list(
        invoice_id: &str,
        status: Option<InvoiceStatus>,
        waits: bool,
        at_ms: u64,
    ) -> String {
        if waits {
            review_list(invoice_id)
        } else if status.is_some_and(|st| InvoiceStatus::OPEN.contains(&st)) {
            open_list(invoice_id)
        } else {
            day_list(invoice_id, at_ms)
        }
    }

    /// Every list of the days from `from_ms`'s UTC day to `to_ms`'s, oldest day first (none
    /// when `to_ms` is earlier): each day's unsharded list (of releases before, which a stack
    /// upgraded later kept writing), then, from [`SHARDED_FROM_MS`] on, its shards.
    #[must_use]
    pub fn days_listing(from_ms: u64, to_ms: u64) -> Vec<String> {
        let first = from_ms / DAY_MS;
        (first..=to_ms / DAY_MS)
            .flat_map(|day| {
                let shards = if day * DAY_MS >= SHARDED_FROM_MS {
                    LIST_SHARDS
                } else {
                    0
                };
                let day = day_listing(day * DAY_MS);
                std::iter::once(day.clone()).chain((0..shards).map(move |k| format!("{day}#{k}")))
            })
            .collect()
    }
}

pub use listing::{
    ACTIONS, LIST_SHARDS, OPEN, REVIEW, REVIEW_SHARDS, SHARDED_FROM_MS, day_list, day_listing,
    days_listing, invoice_list, open_list, open_lists, review_list, review_lists, shard_of,
    waiting_shard, waiting_shards,
};

/// An invoice's list after a write that sets its status (or keeps a closed one) at `now_ms`:
/// its [`review_list`] when the write makes its payment wait for a person (held, paid twice, paid
/// late), else [`OPEN`] while the status is open, else its day.
pub(super) fn invoice_listing(
    invoice_id: &str,
    status: InvoiceStatus,
    waits: bool,
    now_ms: u64,
) -> Set {
    Set::Put(
        Field::ListedIn,
        Value::Text(invoice_list(invoice_id, Some(status), waits, now_ms)),
    )
}

/// `writes` for a stack that keeps no `open` list (only the reconciliation reads
/// it, and only a stack with the reconciliation writes it): an invoice whose status is open
/// is listed nowhere instead (its write removes its list, which costs no index write when it
/// had none), and is listed by its day or for review as before once it leaves that. `exceptions
/// --reindex` lists the open ones when the reconciliation is turned on later.
#[must_use]
pub fn without_open_list(writes: &[Write]) -> Vec<Write> {
    let open = |list: &str| list == OPEN || list.starts_with(&format!("{OPEN}#"));
    writes
        .iter()
        .cloned()
        .map(|mut w| {
            for set in &mut w.set {
                if matches!(set, Set::Put(Field::ListedIn, Value::Text(list)) if open(list)) {
                    *set = Set::Remove(Field::ListedIn);
                }
            }
            w
        })
        .collect()
}

/// `writes`, each item the hand-off reads its facts from (an invoice, a fulfilment, a
/// withdrawal, a deposit, a review note) also keeping `traceparent`, the trace of the delivery
/// that writes it, so the stream's publisher continues that trace. The ledger's mark, claims,
/// guards, balances and a merchant's effect items are left as they are, and so is a write
/// that only checks its guard.
#[must_use]
pub fn traced(writes: &[Write], traceparent: &str) -> Vec<Write> {
    writes
        .iter()
        .cloned()
        .map(|mut w| {
            let hands_off = matches!(
                w.what,
                What::Transition
                    | What::Payment
                    | What::PaidLate
                    | What::Release
                    | What::Withdrawal
                    | What::Deposit
                    | What::Fulfilment
                    | What::RefundNote
                    | What::Review
            );
            if hands_off && !w.set.is_empty() {
                w.set
                    .push(Set::Put(Field::Traceparent, Value::text(traceparent)));
            }
            w
        })
        .collect()
}

/// What fulfils a paid invoice, for a webhook's payment and a release alike: the fulfilment
/// record and the merchant's items (each only if absent), the order's claim ([`order_claim`])
/// and, when `amount_checked`, the registered order's [`amount_guard`].
#[must_use]
pub fn fulfilment(
    paid: &PaidInvoice<'_>,
    effects: Vec<EffectWrite>,
    amount_checked: bool,
) -> Vec<Write> {
    let record = FulfilmentRecord::of(paid);
    let mut set = vec![
        Set::Put(Field::Kind, Value::text("fulfilment")),
        Set::Put(Field::InvoiceId, Value::text(&record.invoice_id)),
        Set::Put(Field::WonBy, Value::text(&record.won_by)),
    ];
    if let Some(status) = record.status {
        set.push(Set::Put(Field::Status, Value::text(status.as_str())));
    }
    if let Some(at) = record.fulfilled_at_ms {
        set.extend([
            Set::Put(Field::FulfilledAt, Value::Int(at)),
            Set::Put(Field::UpdatedAt, Value::Int(at)),
            Set::Put(
                Field::ListedIn,
                Value::Text(day_list(&fulfilment_key(paid.invoice_id), at)),
            ),
        ]);
    }
    if let Some(id) = &record.order.external_id {
        set.push(Set::Put(Field::OrderId, Value::text(id)));
    }
    if let Some(amount) = &record.order.amount {
        set.push(Set::Put(Field::Amount, Value::Amount(amount.clone())));
        // The text Paymos sent ("10.00"): a number drops trailing zeros.
        set.push(Set::Put(Field::AmountText, Value::text(amount.as_str())));
    }
    if let Some(currency) = &record.order.currency {
        set.push(Set::Put(Field::Currency, Value::text(currency)));
    }
    if let Some(p) = &record.order.project {
        set.push(Set::Put(Field::ProjectId, Value::text(p)));
    } else if record.order.home {
        set.push(Set::Put(Field::HomeProject, Value::Bool(true)));
    }
    let mut writes = vec![Write {
        what: What::Fulfilment,
        key: Key::state(fulfilment_key(paid.invoice_id)),
        guard: Guard::Absent,
        set,
    }];
    writes.extend(effects.into_iter().map(|w| {
        Write {
            what: What::Effect,
            key: Key::state(w.key),
            guard: Guard::Absent,
            set: w
                .attributes
                .into_iter()
                .map(|(name, value)| {
                    Set::Put(
                        Field::Named(name),
                        match value {
                            EffectValue::Text(t) => Value::Text(t),
                            EffectValue::Number(a) => Value::Amount(a),
                        },
                    )
                })
                .collect(),
        }
    }));
    writes.extend(order_claim(paid));
    if amount_checked {
        writes.extend(amount_guard(paid.order));
    }
    writes.extend(claimed_before_projects(paid));
    writes
}

/// The order's once-only claim: written by the first invoice that fulfils it, so a second paid
/// invoice for the same order is a duplicate payment, never a second fulfilment. An order-less
/// payment claims nothing (and never ships: [`order_on_record`]).
#[must_use]
pub fn order_claim(paid: &PaidInvoice<'_>) -> Option<Write> {
    let id = paid.order.external_id.as_ref()?;
    Some(Write {
        what: What::OrderClaim,
        key: Key::state(order_paid_key(paid.order.project.as_deref(), id)),
        guard: Guard::Absent,
        set: vec![
            Set::Put(Field::Kind, Value::text("order_payment")),
            Set::Put(Field::OrderId, Value::text(id)),
            Set::Put(Field::InvoiceId, Value::text(paid.invoice_id)),
            Set::Put(Field::WonBy, Value::Text(paid.source.id())),
            Set::Put(Field::PaidAt, Value::Int(paid.at_ms)),
        ],
    })
}

/// The claim a stack that lists no projects also checks for a project's order
/// ([`OrderRef::unlisted`]): the key every project's order was claimed under before projects
/// (`order_paid#<id>`), absent or this invoice's. An order shipped before the upgrade ships no
/// second time under its project's key; a refusal names the invoice that shipped it.
#[must_use]
pub fn claimed_before_projects(paid: &PaidInvoice<'_>) -> Option<Write> {
    let id = paid.order.external_id.as_ref()?;
    (paid.order.unlisted && paid.order.project.is_some()).then(|| Write {
        what: What::OrderClaim,
        key: Key::state(order_paid_key(None, id)),
        guard: Guard::Any(vec![
            Guard::Absent,
            Guard::Is(Field::InvoiceId, Value::text(paid.invoice_id)),
        ]),
        set: Vec::new(),
    })
}

/// The registered order's amount guard: an order the merchant registered is paid with its
/// amount and currency (exact decimals), else the payment is held. A payment without a complete
/// price passes only for an order nobody registered.
#[must_use]
pub fn amount_guard(order: &OrderRef) -> Option<Write> {
    let id = order.external_id.as_ref()?;
    let guard = match (&order.amount, &order.currency) {
        (Some(amount), Some(currency)) => Guard::Any(vec![
            Guard::Absent,
            Guard::All(vec![
                Guard::Is(Field::Amount, Value::Amount(amount.clone())),
                Guard::Is(Field::Currency, Value::text(currency)),
            ]),
        ]),
        _ => Guard::Absent,
    };
    Some(Write {
        what: What::AmountGuard,
        key: Key::state(order_key(order.project.as_deref(), id)),
        guard,
        set: Vec::new(),
    })
}

/// The key of where the last clean reconciliation ended.
pub const RECONCILED_KEY: &str = "reconciled";

/// The key of where the last reconciliation that read its whole window ended.
pub const RECONCILE_READ_KEY: &str = "reconciled#read";

/// A reconciliation read its whole window `(from, until)` (Unix seconds), whatever it found:
/// what it found, counted by kind, and whether any of it is for a person, kept beside where it
/// ended, so a person's `status` reads the last run's verdict in the one item `behind` reads.
/// Kept only if no later run's end is, so it never moves back. A run cut short (the function's
/// time, Paymos or the store failing) writes none, so the next run sees how far behind it is.
#[must_use]
pub fn reconcile_read(
    (from, until): (u64, u64),
    (for_a_person, found): (bool, &BTreeMap<String, u64>),
    now_ms: u64,
) -> Write {
    Write {
        what: What::Reconciled,
        key: Key::state(RECONCILE_READ_KEY),
        guard: Guard::Any(vec![
            Guard::Lacks(Field::ReadUntil),
            Guard::Below(Field::ReadUntil, Value::Int(until)),
        ]),
        set: vec![
            Set::Put(Field::Kind, Value::text("reconciled")),
            Set::Put(Field::WindowFrom, Value::Int(from)),
            Set::Put(Field::ReadUntil, Value::Int(until)),
            Set::Put(Field::ForAPerson, Value::Bool(for_a_person)),
            Set::Put(Field::Found, Value::Counts(found.clone())),
            Set::Put(Field::UpdatedAt, Value::Int(now_ms)),
        ],
    }
}

/// A reconciliation that found nothing for a person ended at `until` (Unix seconds): kept only
/// if no later clean run's end is, so it never moves back.
#[must_use]
pub fn reconciled(until: u64, now_ms: u64) -> Write {
    Write {
        what: What::Reconciled,
        key: Key::state(RECONCILED_KEY),
        guard: Guard::Any(vec![
            Guard::Lacks(Field::CleanUntil),
            Guard::Below(Field::CleanUntil, Value::Int(until)),
        ]),
        set: vec![
            Set::Put(Field::Kind, Value::text("reconciled")),
            Set::Put(Field::CleanUntil, Value::Int(until)),
            Set::Put(Field::UpdatedAt, Value::Int(now_ms)),
        ],
    }
}

/// The key of a scheduled reconciliation's progress through its window.
pub const RECONCILE_PROGRESS_KEY: &str = "reconciled#progress";

/// A scheduled reconciliation read its window `(from, to)` (Unix seconds) up to `done` (the
/// end of its last slice read), whether a part of it read so far found something for a
/// person, and what, counted by kind: the next run continues that window from there. Kept only for a later window than
/// the one kept, or for the same window further on, so it never moves back.
#[must_use]
pub fn reconcile_progress(
    (from, to): (u64, u64),
    done: u64,
    (for_a_person, found): (bool, &BTreeMap<String, u64>),
    now_ms: u64,
) -> Write {
    Write {
        what: What::Reconciled,
        key: Key::state(RECONCILE_PROGRESS_KEY),
        guard: Guard::Any(vec![
            Guard::Lacks(Field::WindowTo),
            Guard::Below(Field::WindowTo, Value::Int(to)),
            Guard::All(vec![
                Guard::Is(Field::WindowTo, Value::Int(to)),
                Guard::Below(Field::DoneUntil, Value::Int(done)),
            ]),
        ]),
        set: vec![
            Set::Put(Field::Kind, Value::text("reconciled")),
            Set::Put(Field::WindowFrom, Value::Int(from)),
            Set::Put(Field::WindowTo, Value::Int(to)),
            Set::Put(Field::DoneUntil, Value::Int(done)),
            Set::Put(Field::ForAPerson, Value::Bool(for_a_person)),
            Set::Put(Field::Found, Value::Counts(found.clone())),
            Set::Put(Field::UpdatedAt, Value::Int(now_ms)),
        ],
    }
}

/// The registered order itself (the merchant's: what [`amount_guard`] reads), within its
/// project's key scope.
#[must_use]
pub fn expected_order(
    (scope, external_id): (Option<&str>, &str),
    amount: &Amount,
    currency: &str,
) -> Write {
    Write {
        what: What::AmountGuard,
        key: Key::state(order_key(scope, external_id)),
        guard: Guard::Always,
        set: vec![
            Set::Put(Field::Kind, Value::text("expected_order")),
            Set::Put(Field::Amount, Value::Amount(amount.clone())),
            Set::Put(Field::Currency, Value::Text(currency.to_ascii_uppercase())),
        ],
    }
}

/// A completed refund, noted on its invoice: appended to its refunds (the withdrawal completes
/// once, so it is appended once) and, for a `full` one, what a payment's guard reads
/// ([`refunded_in_full`]): the flag, and the latest full refund's time; for one of unknown mode
/// (it may have been `full`), likewise what [`refund_of_unknown_mode`] reads. That time only
/// moves forward: the note is refused where a later refund of its kind is recorded, and written
/// again `after_later` (the time kept). It gives the invoice no status.
#[must_use]
pub fn refund_note(invoice_id: &str, refund: &Refund, after_later: bool, now_ms: u64) -> Write {
    let mut set = vec![
        Set::Once(Field::Kind, Value::text("invoice")),
        Set::Append(Field::Refunds, refund.clone()),
        Set::Put(Field::UpdatedAt, Value::Int(now_ms)),
    ];
    let flags = match refund.mode {
        Some(RefundMode::Full) => {
            // A payment of unknown time waiting after a full refund: a full refund recorded
            // since is the person's way out (the payment paid back), as a release is.
            set.push(Set::Remove(Field::AfterRefund));
            Some((Field::RefundedInFullBy, Field::RefundedInFullAt))
        }
        None => Some((Field::RefundOfUnknownModeBy, Field::RefundOfUnknownModeAt)),
        Some(RefundMode::Overpayment) => None,
    };
    let mut guard = Guard::Always;
    if let Some((by, at_field)) = flags {
        set.push(Set::Once(by, Value::text(&refund.withdrawal_id)));
        if let (Some(at), false) = (refund.completed_at, after_later) {
            set.push(Set::Put(at_field.clone(), Value::Int(at)));
            guard = Guard::Any(vec![
                Guard::Lacks(at_field.clone()),
                Guard::Below(at_field, Value::Int(at)),
            ]);
        }
    }
    Write {
        what: What::RefundNote,
        key: Key::state(invoice_id),
        guard,
        set,
    }
}

/// What the refunds recorded on an invoice imply for its payments' guard ([`refunded_in_full`]),
/// for an invoice whose full refund was noted before [`refund_note`] set the flags (the
/// upgrade's `exceptions --reindex`): the first full refund as the flag and, when every full
/// refund has its time, the latest one. A full refund with no time settles any payment
/// ([`Refund::returns_payment_at`]), and so does a flag with no time. `None` when no full refund
/// is recorded. Written only on an invoice that exists and has no flag yet.
#[must_use]
pub fn refund_flags(invoice_id: &str, refunds: &[Refund]) -> Option<Write> {
    let full: Vec<&Refund> = refunds
        .iter()
        .filter(|r| r.mode == Some(RefundMode::Full))
        .collect();
    let mut set = vec![Set::Once(
        Field::RefundedInFullBy,
        Value::text(&full.first()?.withdrawal_id),
    )];
    let times: Option<Vec<u64>> = full.iter().map(|r| r.completed_at).collect();
    if let Some(latest) = times.and_then(|t| t.into_iter().max()) {
        set.push(Set::Put(Field::RefundedInFullAt, Value::Int(latest)));
    }
    Some(Write {
        what: What::RefundNote,
        key: Key::state(invoice_id),
        guard: Guard::All(vec![
            Guard::Has(Field::Kind),
            Guard::Lacks(Field::RefundedInFullBy),
        ]),
        set,
    })
}

/// The refunds of an invoice as Paymos lists them (`listed`), where its record holds a full
/// refund (or one of unknown mode) Paymos does not list, or lists otherwise (another time or
/// mode than a delivery said): a delivery Paymos never made (a forged refund, without the
/// reverse check) returned nothing, and one Paymos dates otherwise returned what was paid
/// until Paymos' time. The record keeps its refunds as Paymos lists them, and their flags,
/// under the refunds it was read with (`seen`); a payment it settled as refunded that never
/// shipped (`unshipped`) is taken off, to be applied anew as Paymos has it (a late one keeps
/// its close and is judged again by the refunds kept). Nothing where each refund the record
/// holds that returns a payment is Paymos' as Paymos lists it.
#[must_use]
pub fn paymos_refunds_only(
    invoice_id: &str,
    (seen, listed): (&[Refund], &[Refund]),
    unshipped: bool,
    now_ms: u64,
) -> Option<Write> {
    let returns = |r: &Refund| r.mode != Some(RefundMode::Overpayment);
    let paymos = |r: &Refund| listed.iter().find(|p| p.withdrawal_id == r.withdrawal_id);
    let as_listed = |r: &Refund| {
        paymos(r).is_some_and(|p| p.mode == r.mode && p.completed_at == r.completed_at)
    };
    if seen.iter().all(|r| !returns(r) || as_listed(r)) {
        return None;
    }
    let kept: Vec<Refund> = seen
        .iter()
        .filter_map(|r| match paymos(r) {
            Some(p) => Some(p.clone()),
            None => (!returns(r)).then(|| r.clone()),
        })
        .collect();
    let mut set = vec![
        Set::Put(Field::Refunds, Value::Refunds(kept.clone())),
        Set::Put(Field::UpdatedAt, Value::Int(now_ms)),
    ];
    for (mode, by, at) in [
        (
            Some(RefundMode::Full),
            Field::RefundedInFullBy,
            Field::RefundedInFullAt,
        ),
        (
            None,
            Field::RefundOfUnknownModeBy,
            Field::RefundOfUnknownModeAt,
        ),
    ] {
        let of: Vec<&Refund> = kept.iter().filter(|r| r.mode == mode).collect();
        match of.first() {
            Some(first) => set.push(Set::Put(by, Value::text(&first.withdrawal_id))),
            None => set.push(Set::Remove(by)),
        }
        let times: Option<Vec<u64>> = of.iter().map(|r| r.completed_at).collect();
        match times.and_then(|t| t.into_iter().max()) {
            Some(latest) => set.push(Set::Put(at, Value::Int(latest))),
            None => set.push(Set::Remove(at)),
        }
    }
    let mut guard = vec![
        Guard::Count(Field::Refunds, seen.len()),
        Guard::Lacks(Field::ReleasedAt),
    ];
    if unshipped {
        // Settled as refunded, never shipped: its paid status goes (not a late payment's close).
        guard.push(Guard::Lacks(Field::PaidLateAt));
        set.extend([
            Set::Remove(Field::Status),
            Set::Remove(Field::StatusAt),
            Set::Remove(Field::StatusRank),
            Set::Remove(Field::AfterRefund),
        ]);
    }
    Some(Write {
        what: What::RefundNote,
        key: Key::state(invoice_id),
        guard: Guard::All(guard),
        set,
    })
}

/// What a release reads and writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waiting {
    /// Paid at this status and held: released (`held` stays beside `released_at`: the review it was held for remains a fact).
    Held(InvoiceStatus),
    /// Closed at this status, paid late: fulfilled, the status kept.
    PaidLate(InvoiceStatus),
    /// Paid at this status at a time no road knew, after a full refund: fulfilled on a
    /// person's word that it was paid again.
    AfterRefund(InvoiceStatus),
}

impl Waiting {
    /// The status the fulfilment records.
    #[must_use]
    pub fn paid_status(self) -> InvoiceStatus {
        match self {
            // A hold is only ever on a paid invoice.
            Self::Held(status) | Self::AfterRefund(status) => status,
            Self::PaidLate(_) => InvoiceStatus::Paid,
        }
    }
}

/// A release's guard: the invoice still waits as it was read (at its status, held or paid
/// late), nobody released it, and no refund was recorded since (`refunds_seen`).
#[must_use]
pub fn release_guard(waiting: Waiting, refunds_seen: usize) -> Guard {
    let (status, why) = match waiting {
        Waiting::Held(st) => (st, Guard::Is(Field::Held, Value::Bool(true))),
        Waiting::AfterRefund(st) => (st, Guard::Is(Field::AfterRefund, Value::Bool(true))),
        Waiting::PaidLate(st) => (st, Guard::Has(Field::PaidLateAt)),
    };
    Guard::All(vec![
        Guard::Is(Field::Status, Value::text(status.as_str())),
        why,
        Guard::Lacks(Field::ReleasedAt),
        if refunds_seen == 0 {
            Guard::Lacks(Field::Refunds)
        } else {
            Guard::Count(Field::Refunds, refunds_seen)
        },
    ])
}

/// A person's release of a waiting invoice, under [`release_guard`], with everything that
/// fulfils it ([`fulfilment`]; the amount guard unless they override it, with their reason
/// kept).
#[must_use]
pub fn release(
    paid: &PaidInvoice<'_>,
    (waiting, refunds_seen): (Waiting, usize),
    reason: &str,
    amount_checked: bool,
    effects: Vec<EffectWrite>,
) -> Vec<Write> {
    let by = paid.source.id();
    let mut set = vec![
        Set::Put(Field::Kind, Value::text("invoice")),
        Set::Put(Field::ReleasedAt, Value::Int(paid.at_ms)),
        Set::Put(Field::ReleasedBy, Value::text(&by)),
        Set::Put(Field::ReleaseReason, Value::text(reason)),
        Set::Put(Field::AmountOverridden, Value::Bool(!amount_checked)),
        Set::Put(Field::LastEventId, Value::text(&by)),
        Set::Put(Field::UpdatedAt, Value::Int(paid.at_ms)),
        // `held` stays: the review it was held for is a fact the stream published, and what
        // `events since` rebuilds from the record (a release settles it: `released_at`).
        Set::Put(
            Field::ListedIn,
            Value::Text(day_list(paid.invoice_id, paid.at_ms)),
        ),
        Set::Add(Field::Applied, Value::Texts(BTreeSet::from([by]))),
    ];
    set.extend(order_once(paid.order));
    let mut writes = vec![Write {
        what: What::Release,
        key: Key::state(paid.invoice_id),
        guard: release_guard(waiting, refunds_seen),
        set,
    }];
    writes.extend(fulfilment(paid, effects, amount_checked));
    writes
}
