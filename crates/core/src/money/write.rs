//! The write vocabulary: every write of money as a domain value, with its guard, stated once
//! here and carried out by a store that renders it (DynamoDB: one condition expression per
//! guard, mechanically) or evaluates it ([`Guard::holds`], the memory twin). A store decides
//! nothing: it commits a list of [`Write`]s all or nothing, or reports which one it refused
//! and what that item held ([`Refused`]); [`crate::money::outcome`] decides what that means.
//!
//! | write ([`What`]) | guard | a refusal means |
//! |---|---|---|
//! | `Processed` (the delivery's mark) | not processed yet | the delivery was handled before |
//! | `Transition` (an invoice's status) | [`transition`] | stale, or final already |
//! | `Payment` (a paid invoice that fulfils) | [`transition`], not [`refunded_in_full`] (by a full refund completed since it was paid), [`order_on_record`] | final already; refunded in full; the record's order or price decides |
//! | `PaidLate` | still closed as read | raced to another status |
//! | `Release` | [`release`]: still waiting as read | released, refunded or moved since |
//! | `Fulfilment`, `Effect` | absent | fulfilled already |
//! | `OrderClaim` | [`order_claim`]: absent | another invoice fulfilled the order |
//! | `AmountGuard` | [`amount_guard`]: unregistered, or the same amount and currency | held for review |
//! | `Withdrawal` | [`withdrawal_transition`] | stale, or final already |
//! | `RefundNote` | a full one: [`refund_note`], no later full refund recorded | a later full refund's time stays |
//! | `Deposit` | [`deposit_transition`] | credited already, or stale |
//! | `Balance` | none | never refused |
//! | `Review` | absent | the delivery was handled before |
//! | `OperatorAction` ([`crate::money::action`]) | absent | an entry of that key exists: recorded already |
//!
//! The writes of one plan are listed in the order their refusals win ([`What`]'s order): the
//! processed mark, the resource, the fulfilment, the order's claim, its amount guard.

use std::collections::{BTreeMap, BTreeSet};

use crate::money::change::{Applied, Credit, OrderRef, Source};
use crate::money::effect::{EffectValue, EffectWrite, PaidInvoice, fulfilment_key};
use crate::money::invoice::{InvoiceSeen, Refund, RefundMode};
use crate::money::record::FulfilmentRecord;
use crate::money::status::{Amount, DepositStatus, InvoiceStatus, WithdrawalStatus};

/// The two tables a write lands in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Table {
    /// Resources, fulfilments, claims, notes (`StateTable`).
    State,
    /// The deliveries ledger (`DeliveriesTable`): the processed mark.
    Ledger,
}

/// An item's key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    /// Its table.
    pub table: Table,
    /// Its hash key.
    pub id: String,
}

impl Key {
    /// A state table item.
    #[must_use]
    pub fn state(id: impl Into<String>) -> Self {
        Self {
            table: Table::State,
            id: id.into(),
        }
    }

    /// A delivery's ledger record, by its ledger key.
    #[must_use]
    pub fn delivery(key: impl Into<String>) -> Self {
        Self {
            table: Table::Ledger,
            id: key.into(),
        }
    }
}

/// `id` within its project's key scope ([`crate::money::change::Projects::scope`]): the home
/// project's ids as they always were, another project's after it (`prj_b#1001`). Project ids
/// (`prj_…`) hold no `#`, so two scopes never meet.
#[must_use]
pub fn scoped(scope: Option<&str>, id: &str) -> String {
    scope.map_or_else(|| id.to_owned(), |p| format!("{p}#{id}"))
}

/// The key of a registered expected order (the amount guard's item), within its project.
#[must_use]
pub fn order_key(scope: Option<&str>, external_id: &str) -> String {
    format!("order#{}", scoped(scope, external_id))
}

/// The key of an order's claim: written once, by the first invoice that fulfils it, within its
/// project (order `1001` of two projects is two orders).
#[must_use]
pub fn order_paid_key(scope: Option<&str>, external_id: &str) -> String {
    format!("order_paid#{}", scoped(scope, external_id))
}

/// The key of a payer's balance in one currency, within its project.
#[must_use]
pub fn balance_key(scope: Option<&str>, payer: &str, currency: &str) -> String {
    format!("balance#{}#{currency}", scoped(scope, payer))
}

/// The key of a delivery's review note.
#[must_use]
pub fn review_key(event_id: &str) -> String {
    format!("review#{event_id}")
}

/// A field of an item, named by the domain (the adapter alone knows its attribute name).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[allow(missing_docs, reason = "each is the field its name says")]
pub enum Field {
    Kind,
    Status,
    StatusAt,
    StatusRank,
    OrderId,
    Amount,
    AmountText,
    Currency,
    Held,
    DuplicateOf,
    PaidLateAt,
    ReleasedAt,
    ReleasedBy,
    ReleaseReason,
    AmountOverridden,
    Refunds,
    RefundedInFullBy,
    RefundedInFullAt,
    PaymentAt,
    ProjectId,
    HomeProject,
    AwaitsOrder,
    AfterRefund,
    OtherProject,
    ProjectsDisagree,
    Applied,
    LastEventId,
    UpdatedAt,
    InvoiceId,
    WonBy,
    FulfilledAt,
    PaidAt,
    Type,
    Credited,
    Payer,
    Net,
    NetText,
    CreditedBy,
    Balance,
    Reason,
    EventId,
    Why,
    CreatedAt,
    ResourceId,
    State,
    Outcome,
    OutcomeReason,
    ProcessedAt,
    PendingShard,
    /// A processed delivery that waits for a person: its outcome, only while it waits (the
    /// sparse index `exceptions`, `release` and `recheck` read).
    Waiting,
    /// Where the state table's index lists an item that stands for an event ([`listing`]):
    /// `review`, `open`, or the UTC day it last changed.
    ListedIn,
    /// Who took an operator's action ([`crate::money::record::OperatorAction`]).
    Actor,
    /// How many an operator's job moved, or a recheck re-read.
    Count,
    /// Where the last clean reconciliation ended (Unix seconds): the next one starts there at
    /// the latest.
    CleanUntil,
    /// An attribute named at run time: a merchant's effect's, or a step of a resource's story
    /// ([`crate::money::record::Step::attribute`]).
    Named(String),
}

/// A field's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// A string.
    Text(String),
    /// A whole number (times, ranks).
    Int(u64),
    /// An exact decimal (compared as a number: `10.50` is `10.5`).
    Amount(Amount),
    /// A flag.
    Bool(bool),
    /// A set of strings.
    Texts(BTreeSet<String>),
    /// A list of refunds.
    Refunds(Vec<Refund>),
}

impl Value {
    /// A string value.
    #[must_use]
    pub fn text(s: impl Into<String>) -> Self {
        Self::Text(s.into())
    }

    /// As text, if it is.
    #[must_use]
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Self::Text(s) => Some(s),
            _ => None,
        }
    }

    /// As a whole number, if it is.
    #[must_use]
    pub fn as_int(&self) -> Option<u64> {
        match self {
            Self::Int(n) => Some(*n),
            _ => None,
        }
    }

    /// Equal as DynamoDB compares: numbers by value.
    fn same(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Amount(a), Self::Amount(b)) => a.same_value(b),
            (a, b) => a == b,
        }
    }

    /// Less than, for two numbers of one kind (anything else is not ordered).
    fn below(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Int(a), Self::Int(b)) => a < b,
            _ => false,
        }
    }
}

/// An item's fields.
pub type Fields = BTreeMap<Field, Value>;

/// A condition on the item a write lands on: a domain value, rendered by DynamoDB's adapter
/// as a condition expression and evaluated by the memory twin with [`Guard::holds`]. A field
/// that is missing compares false, as in DynamoDB.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Guard {
    /// No condition.
    Always,
    /// Never holds (the store returns what the item holds).
    Never,
    /// The item does not exist.
    Absent,
    /// The field is missing.
    Lacks(Field),
    /// The field is set.
    Has(Field),
    /// The field equals the value.
    Is(Field, Value),
    /// The field equals one of the values.
    In(Field, Vec<Value>),
    /// The field is a number below the value.
    Below(Field, Value),
    /// The field is a number at most the value.
    AtMost(Field, Value),
    /// The field is a list of this many.
    Count(Field, usize),
    /// The guard does not hold.
    Not(Box<Guard>),
    /// Every guard holds.
    All(Vec<Guard>),
    /// Some guard holds.
    Any(Vec<Guard>),
}

impl Guard {
    /// Whether the guard holds on `item` (`None`: the item does not exist).
    #[must_use]
    pub fn holds(&self, item: Option<&Fields>) -> bool {
        let field = |f: &Field| item.and_then(|i| i.get(f));
        match self {
            Self::Always => true,
            Self::Never => false,
            Self::Absent => item.is_none(),
            Self::Lacks(f) => field(f).is_none(),
            Self::Has(f) => field(f).is_some(),
            Self::Is(f, v) => field(f).is_some_and(|x| x.same(v)),
            Self::In(f, vs) => field(f).is_some_and(|x| vs.iter().any(|v| x.same(v))),
            Self::Below(f, v) => field(f).is_some_and(|x| x.below(v)),
            Self::AtMost(f, v) => field(f).is_some_and(|x| x.below(v) || x.same(v)),
            Self::Count(f, n) => {
                matches!(field(f), Some(Value::Refunds(list)) if list.len() == *n)
            }
            Self::Not(g) => !g.holds(item),
            Self::All(gs) => gs.iter().all(|g| g.holds(item)),
            Self::Any(gs) => gs.iter().any(|g| g.holds(item)),
        }
    }
}

/// What a write does to one field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Set {
    /// Sets the field.
    Put(Field, Value),
    /// Sets the field only if it is missing (set once: the first write that names it wins).
    Once(Field, Value),
    /// Adds a number to the field (from zero), or strings to a set.
    Add(Field, Value),
    /// Appends a refund to the list.
    Append(Field, Refund),
    /// Removes the field.
    Remove(Field),
}

/// Which write of a plan it is; the order is the order in which refusals win.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum What {
    /// The delivery's processed mark.
    Processed,
    /// An invoice's status that fulfils nothing.
    Transition,
    /// A paid invoice's status, with its order, that fulfils it.
    Payment,
    /// A payment after the invoice closed.
    PaidLate,
    /// A release by a person.
    Release,
    /// A withdrawal's status.
    Withdrawal,
    /// A deposit's status or credit.
    Deposit,
    /// The fulfilment record.
    Fulfilment,
    /// A merchant's effect item.
    Effect,
    /// The order's claim.
    OrderClaim,
    /// The registered order's amount guard.
    AmountGuard,
    /// A completed refund noted on its invoice.
    RefundNote,
    /// A payer's balance.
    Balance,
    /// A delivery's review note.
    Review,
    /// An entry of the operator's audit trail.
    OperatorAction,
    /// Where the last clean reconciliation ended.
    Reconciled,
}

/// One write: an item, the guard it is written under and what it sets (nothing: the guard is
/// only checked).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write {
    /// Which write it is.
    pub what: What,
    /// The item.
    pub key: Key,
    /// Its guard.
    pub guard: Guard,
    /// What it sets.
    pub set: Vec<Set>,
}

/// A refused write, and what its item held (empty when absent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// Which write.
    pub write: What,
    /// What the item held.
    pub found: Fields,
}

/// What a store did with a list of writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stored {
    /// All were written.
    Committed,
    /// None was: the writes whose guard failed (at least one), in the list's order.
    Refused(Vec<Refused>),
}

// ---- The rules: each write of money, with its guard, stated once. ----

/// Whether an invoice takes `incoming` (from an event at `at`): anything reaches a final
/// status only from an open one (or no status yet); an open status moves only forward in
/// `(occurred_at, rank)`; nothing leaves a final status.
#[must_use]
pub fn transition(incoming: InvoiceStatus, at: u64) -> Guard {
    let open = Guard::In(
        Field::Status,
        InvoiceStatus::OPEN
            .iter()
            .map(|s| Value::text(s.as_str()))
            .collect(),
    );
    let forward = if incoming.is_final() {
        open
    } else {
        Guard::All(vec![
            open,
            Guard::Any(vec![
                Guard::Below(Field::StatusAt, Value::Int(at)),
                Guard::All(vec![
                    Guard::Is(Field::StatusAt, Value::Int(at)),
                    Guard::Below(Field::StatusRank, Value::Int(u64::from(incoming.rank()))),
                ]),
            ]),
        ])
    };
    // Another project's invoice takes no change of this stack's.
    Guard::All(vec![
        Guard::Lacks(Field::OtherProject),
        Guard::Any(vec![Guard::Lacks(Field::Status), forward]),
    ])
}

/// A payment made at `paid_at` (Paymos' clock; `None`: a person's road, which names no time)
/// that a `full` refund returns never ships: the invoice carries a full refund ([`refund_note`])
/// that completed when or after it was paid. A payment made after every full refund is a new
/// payment. The rule of [`crate::money::invoice::Refund::returns_payment_at`], as a condition on the
/// latest full refund's time (missing on records written before times were kept: it settles).
#[must_use]
pub fn refunded_in_full(paid_at: Option<u64>) -> Guard {
    let flagged = Guard::Has(Field::RefundedInFullBy);
    match paid_at {
        None => flagged,
        Some(at) => Guard::All(vec![
            flagged,
            Guard::Not(Box::new(Guard::Below(
                Field::RefundedInFullAt,
                Value::Int(at),
            ))),
        ]),
    }
}

/// A paid change fulfils only with the order and price the invoice's record holds: the same
/// order id (or none recorded yet), and a price where the record has one. A change naming no
/// order is never written (the store returns the record, whose order is then adopted).
#[must_use]
pub fn order_on_record(order: &OrderRef) -> Guard {
    let mut guards = vec![
        match &order.external_id {
            Some(id) => Guard::Any(vec![
                Guard::Lacks(Field::OrderId),
                Guard::Is(Field::OrderId, Value::text(id)),
            ]),
            None => Guard::Never,
        },
        // The project likewise: a change naming none takes the record's (adopted), and no
        // other project's order ships from a record of the home project.
        match &order.project {
            Some(p) => unnamed_or(Guard::Is(Field::ProjectId, Value::text(p))),
            None => Guard::Lacks(Field::ProjectId),
        },
    ];
    if !order.has_price() {
        // The record's price is a complete pair or none.
        guards.push(Guard::Any(vec![
            Guard::Lacks(Field::Amount),
            Guard::Lacks(Field::Currency),
        ]));
    }
    Guard::All(guards)
}

/// A record that names no project (neither one nor the home project), or holds `named`.
fn unnamed_or(named: Guard) -> Guard {
    Guard::Any(vec![
        Guard::All(vec![
            Guard::Lacks(Field::ProjectId),
            Guard::Lacks(Field::HomeProject),
        ]),
        named,
    ])
}

/// A record whose status pays nothing (none, open, closed unpaid): nothing shipped under it.
fn no_payment_status() -> Guard {
    Guard::Not(Box::new(Guard::In(
        Field::Status,
        [InvoiceStatus::Paid, InvoiceStatus::PaidOver]
            .iter()
            .map(|s| Value::text(s.as_str()))
            .collect(),
    )))
}

/// The fields of an invoice's status change, by `source` at `now_ms`, with the order and price
/// set once (the first change that names them records them; the record is the truth).
fn invoice_fields(
    status: InvoiceStatus,
    at: u64,
    order: &OrderRef,
    source: &Source,
    now_ms: u64,
) -> Vec<Set> {
    let mut set = vec![
        Set::Put(Field::Kind, Value::text("invoice")),
        Set::Put(Field::Status, Value::text(status.as_str())),
        Set::Put(Field::StatusAt, Value::Int(at)),
        Set::Put(Field::StatusRank, Value::Int(u64::from(status.rank()))),
        Set::Put(Field::LastEventId, Value::Text(source.id())),
        Set::Put(Field::UpdatedAt, Value::Int(now_ms)),
        step(at, status.as_str(), source),
    ];
    // Only a final status is kept among what the invoice holds (once: nothing leaves it): an
    // open one moves forward as often as events come, and names itself in `last_event_id`, so
    // the set stays a handful of ids however many events arrive.
    if status.is_final() {
        set.push(Set::Add(
            Field::Applied,
            Value::Texts(BTreeSet::from([source.id()])),
        ));
    }
    set.extend(order_once(order));
    set
}

/// The project an order names, set once: its key scope, or that it is the home project's.
fn project_once(order: &OrderRef) -> Option<Set> {
    match &order.project {
        Some(p) => Some(Set::Once(Field::ProjectId, Value::text(p))),
        None if order.home => Some(Set::Once(Field::HomeProject, Value::Bool(true))),
        None => None,
    }
}

/// One step of a resource's story: when (Paymos' clock) it first reached `status`, and who
/// moved it there (a delivery's ledger key, or `manual:` and the actor), set once per status on
/// the item that is written anyway: a copy or a later event of the same status adds nothing, so
/// an item keeps one step per status it reached, however many events come.
fn step(at: u64, status: &str, source: &Source) -> Set {
    let by = match source {
        Source::Delivery { event_id } => event_id.clone(),
        Source::Manual { .. } => source.id(),
    };
    let step = crate::money::record::Step {
        at,
        status: status.to_owned(),
        by,
    };
    Set::Once(Field::Named(step.attribute()), Value::Text(step.value()))
}

/// The order and its price, set once.
fn order_once(order: &OrderRef) -> Vec<Set> {
    let mut set = Vec::new();
    if let Some(id) = &order.external_id {
        set.push(Set::Once(Field::OrderId, Value::text(id)));
    }
    set.extend(project_once(order));
    if let (Some(amount), Some(currency)) = (&order.amount, &order.currency) {
        set.push(Set::Once(Field::Amount, Value::Amount(amount.clone())));
        set.push(Set::Once(Field::AmountText, Value::text(amount.as_str())));
        set.push(Set::Once(Field::Currency, Value::text(currency)));
    }
    set
}

/// Paymos' confirmed `order` (and its price, or none) on an invoice's record, replacing
/// `recorded`, which a delivery nothing confirmed set (a stack that turned the reverse check on
/// later, `dev`, a forged event before it): what Paymos confirms wins. Written only while the
/// record still holds `recorded` and nothing shipped under it (no payment status: open, closed
/// unpaid or paid late; or a payment held for a person, who then releases Paymos' order; and
/// no release).
#[must_use]
pub fn paymos_order(invoice_id: &str, order: &OrderRef, recorded: &OrderRef, now_ms: u64) -> Write {
    let mut set = vec![Set::Put(Field::UpdatedAt, Value::Int(now_ms))];
    if let Some(id) = &order.external_id {
        set.push(Set::Put(Field::OrderId, Value::text(id)));
    }
    match (&order.amount, &order.currency) {
        (Some(amount), Some(currency)) => set.extend([
            Set::Put(Field::Amount, Value::Amount(amount.clone())),
            Set::Put(Field::AmountText, Value::text(amount.as_str())),
            Set::Put(Field::Currency, Value::text(currency)),
        ]),
        _ => set.extend([
            Set::Remove(Field::Amount),
            Set::Remove(Field::AmountText),
            Set::Remove(Field::Currency),
        ]),
    }
    // Paymos' project too, where it names one: the events' disagreement is settled.
    match (&order.project, order.home) {
        (Some(p), _) => set.extend([
            Set::Put(Field::ProjectId, Value::text(p)),
            Set::Remove(Field::HomeProject),
        ]),
        (None, true) => set.extend([
            Set::Put(Field::HomeProject, Value::Bool(true)),
            Set::Remove(Field::ProjectId),
        ]),
        (None, false) => {}
    }
    if order.names_project() {
        set.push(Set::Remove(Field::ProjectsDisagree));
    }
    let as_read = match &recorded.external_id {
        Some(id) => Guard::Is(Field::OrderId, Value::text(id)),
        None => Guard::Lacks(Field::OrderId),
    };
    // Nothing shipped under it: no payment status (open, closed unpaid, paid late), or a
    // payment held for a person; and no release.
    let unpaid = no_payment_status();
    let held = Guard::Is(Field::Held, Value::Bool(true));
    Write {
        what: What::Transition,
        key: Key::state(invoice_id),
        guard: Guard::All(vec![
            Guard::Has(Field::Kind),
            as_read,
            Guard::Lacks(Field::ReleasedAt),
            Guard::Any(vec![unpaid, held]),
        ]),
        set,
    }
}

/// What `order` names and the invoice's record leaves out (its id, its price, its project),
/// set once, from a change the record's status refused: written only while the record holds
/// no other order and no other project, and nothing shipped under it (no payment status, no
/// release), so a late event, a late payment or a person's word names the order before
/// anything ships, as a first event would have.
#[must_use]
pub fn learned_order(invoice_id: &str, order: &OrderRef, now_ms: u64) -> Write {
    let mut guards = vec![
        Guard::Has(Field::Kind),
        Guard::Lacks(Field::ReleasedAt),
        no_payment_status(),
    ];
    let mut new = Vec::new();
    match &order.external_id {
        Some(id) => {
            guards.push(Guard::Any(vec![
                Guard::Lacks(Field::OrderId),
                Guard::Is(Field::OrderId, Value::text(id)),
            ]));
            new.push(Guard::Lacks(Field::OrderId));
        }
        None => guards.push(Guard::Lacks(Field::OrderId)),
    }
    if order.has_price() {
        new.push(Guard::Lacks(Field::Amount));
    }
    guards.push(Guard::Any(new));
    match (&order.project, order.home) {
        (Some(p), _) => guards.push(unnamed_or(Guard::Is(Field::ProjectId, Value::text(p)))),
        (None, true) => guards.push(unnamed_or(Guard::Has(Field::HomeProject))),
        (None, false) => {}
    }
    let mut set = vec![Set::Put(Field::UpdatedAt, Value::Int(now_ms))];
    set.extend(order_once(order));
    Write {
        what: What::Transition,
        key: Key::state(invoice_id),
        guard: Guard::All(guards),
        set,
    }
}

/// Paymos confirmed a change of the invoice for a project this stack applies: the mark that
/// called it another project's (`marked`, as read: an event's word, never Paymos') goes, and
/// the change is tried again.
#[must_use]
pub fn paymos_project(invoice_id: &str, marked: &str, now_ms: u64) -> Write {
    Write {
        what: What::Transition,
        key: Key::state(invoice_id),
        guard: Guard::Is(Field::OtherProject, Value::text(marked)),
        set: vec![
            Set::Remove(Field::OtherProject),
            Set::Put(Field::UpdatedAt, Value::Int(now_ms)),
        ],
    }
}

/// A payment a person's road found with its order known nowhere: the invoice is marked so and
/// listed for review (its status untouched, so the payment still ships once an order is
/// learned, which clears the mark). A delivery's own such payment waits as its ledger record.
#[must_use]
pub fn awaits_order(
    invoice_id: &str,
    (order, paid_at, after_refund): (&OrderRef, Option<u64>, bool),
    now_ms: u64,
) -> Write {
    let mut set = vec![
        Set::Once(Field::Kind, Value::text("invoice")),
        Set::Put(Field::AwaitsOrder, Value::Bool(true)),
        Set::Put(Field::UpdatedAt, Value::Int(now_ms)),
        Set::Put(Field::ListedIn, Value::text(REVIEW)),
    ];
    // The project the person named, once: a later delivery naming none takes it.
    set.extend(project_once(order));
    // Undated while a full refund is on record ([`Mark::AfterRefund`]): once its order is
    // known, a person says whether it was paid again.
    if after_refund {
        set.push(Set::Put(Field::AfterRefund, Value::Bool(true)));
    } else if paid_at.is_some() {
        // Dated (Paymos' word): its time judges the refund, not a person's undated word.
        set.push(Set::Remove(Field::AfterRefund));
    }
    // When it was paid, where the road knows (Paymos' word): the refund rule reads it.
    set.extend(paid_at.map(|t| Set::Once(Field::PaymentAt, Value::Int(t))));
    Write {
        what: What::Transition,
        key: Key::state(invoice_id),
        guard: Guard::Not(Box::new(Guard::In(
            Field::Status,
            [InvoiceStatus::Paid, InvoiceStatus::PaidOver]
                .iter()
                .map(|s| Value::text(s.as_str()))
                .collect(),
        ))),
        set,
    }
}

/// An invoice of a project this stack does not apply, marked as that project's: every later
/// change of it, naming a project or not, applies nothing ([`transition`]).
#[must_use]
pub fn other_project(invoice_id: &str, project: &str) -> Write {
    invoice_once(invoice_id, Field::OtherProject, project)
}

/// What a delivery's payment of an order known nowhere teaches its invoice's record, once:
/// its project (`order`'s) and when it was paid (`paid_at`, Paymos' clock), so that a person's
/// word of it later (which knows no time) is judged against a full refund by that time.
#[must_use]
pub fn payment_awaiting_order(
    invoice_id: &str,
    order: &OrderRef,
    paid_at: Option<u64>,
) -> Option<Write> {
    let mut set = vec![Set::Once(Field::Kind, Value::text("invoice"))];
    set.extend(project_once(order));
    set.extend(paid_at.map(|t| Set::Once(Field::PaymentAt, Value::Int(t))));
    (set.len() > 1).then(|| Write {
        what: What::Transition,
        key: Key::state(invoice_id),
        guard: Guard::Always,
        set,
    })
}

/// Paymos' time (`paid_at`) of a payment recorded here with none (a person's word), read by
/// a road that asked Paymos: the record takes it once and the refund rule judges the payment
/// by it, not by the order the words arrived in (one released keeps its standing, and is
/// never reopened). With
/// `reopen`, a payment that never shipped and was judged against a full refund by no time
/// (settled by it, or waiting [`Mark::AfterRefund`]), on an invoice that did not close first,
/// is judged anew as Paymos' payment: its status and marks go, and the road's change, tried
/// next, ships it, holds it or settles it as any payment (a crash between leaves it unfulfilled
/// and listed by the reconciliation, whose next run applies it).
#[must_use]
pub fn paymos_payment_time(invoice_id: &str, paid_at: u64, reopen: bool) -> Write {
    let mut set = vec![
        Set::Once(Field::PaymentAt, Value::Int(paid_at)),
        Set::Remove(Field::AfterRefund),
    ];
    let mut guard = vec![Guard::Has(Field::Kind), Guard::Lacks(Field::PaymentAt)];
    if reopen {
        guard.push(Guard::Lacks(Field::ReleasedAt));
        set.extend([
            Set::Remove(Field::Status),
            Set::Remove(Field::StatusAt),
            Set::Remove(Field::StatusRank),
            Set::Remove(Field::Held),
            Set::Remove(Field::DuplicateOf),
        ]);
        guard.extend([
            Guard::Any(vec![
                Guard::Is(Field::AfterRefund, Value::Bool(true)),
                Guard::Has(Field::RefundedInFullBy),
            ]),
            Guard::Lacks(Field::PaidLateAt),
        ]);
    }
    Write {
        what: What::Transition,
        key: Key::state(invoice_id),
        guard: Guard::All(guard),
        set,
    }
}

/// A payment made at `paid_at`, after every full refund of the invoice, where one of them
/// returned the payment the record holds, dated before it: the record is judged anew as this
/// payment (its status and marks go, in one transaction with [`nothing_shipped`]), and the
/// road's change, tried next, ships it, holds it or waits as any payment.
#[must_use]
pub fn paid_anew(invoice_id: &str, paid_at: u64) -> Write {
    Write {
        what: What::Transition,
        key: Key::state(invoice_id),
        guard: Guard::All(vec![
            Guard::Has(Field::RefundedInFullBy),
            Guard::Below(Field::RefundedInFullAt, Value::Int(paid_at)),
            Guard::Below(Field::PaymentAt, Value::Int(paid_at)),
            Guard::Lacks(Field::ReleasedAt),
            Guard::Lacks(Field::PaidLateAt),
        ]),
        set: vec![
            Set::Put(Field::PaymentAt, Value::Int(paid_at)),
            Set::Remove(Field::Status),
            Set::Remove(Field::StatusAt),
            Set::Remove(Field::StatusRank),
            Set::Remove(Field::Held),
            Set::Remove(Field::DuplicateOf),
        ],
    }
}

/// A payment made at `paid_at`, after every full refund of an invoice that shipped its order
/// from an earlier payment one of them returned: the order never ships twice, so the record
/// holds this payment, a duplicate of the invoice itself, listed until a refund of it.
#[must_use]
pub fn paid_again(invoice_id: &str, paid_at: u64, now_ms: u64) -> Write {
    Write {
        what: What::Transition,
        key: Key::state(invoice_id),
        guard: Guard::All(vec![
            Guard::Has(Field::RefundedInFullBy),
            Guard::Below(Field::RefundedInFullAt, Value::Int(paid_at)),
            Guard::Below(Field::PaymentAt, Value::Int(paid_at)),
            Guard::Lacks(Field::DuplicateOf),
        ]),
        set: vec![
            Set::Put(Field::PaymentAt, Value::Int(paid_at)),
            Set::Put(Field::DuplicateOf, Value::text(invoice_id)),
            Set::Put(Field::UpdatedAt, Value::Int(now_ms)),
            Set::Put(Field::ListedIn, Value::text(REVIEW)),
        ],
    }
}

/// The condition that nothing shipped from the invoice (no fulfilment of it), checked with a
/// reopening ([`paymos_payment_time`]) in one transaction; nothing is written.
#[must_use]
pub fn nothing_shipped(invoice_id: &str) -> Write {
    Write {
        what: What::Fulfilment,
        key: Key::state(fulfilment_key(invoice_id)),
        guard: Guard::Absent,
        set: Vec::new(),
    }
}

/// The time (`paid_at`, the best a delivery knows) of a payment the invoice's record holds
/// undated, a person's word, on which no full refund was judged without time
/// ([`Mark::AfterRefund`]): set once, and a full refund is judged by it from then on.
#[must_use]
pub fn payment_time(invoice_id: &str, paid_at: u64) -> Write {
    Write {
        what: What::Transition,
        key: Key::state(invoice_id),
        guard: Guard::All(vec![
            Guard::Has(Field::Kind),
            Guard::Lacks(Field::PaymentAt),
            Guard::Lacks(Field::AfterRefund),
        ]),
        set: vec![Set::Once(Field::PaymentAt, Value::Int(paid_at))],
    }
}

/// The key of the stack's own record: which project is its home (whose keys carry none).
pub const STACK_KEY: &str = "stack#projects";

/// The stack's home project (`home`, the first of `PaymosProjectIds`), written once: its
/// records' keys carry no project, so another project listed first would read them as its own.
#[must_use]
pub fn home_project(home: &str) -> Write {
    Write {
        what: What::Transition,
        key: Key::state(STACK_KEY),
        guard: Guard::Any(vec![
            Guard::Absent,
            Guard::Is(Field::ProjectId, Value::text(home)),
        ]),
        set: vec![
            Set::Once(Field::Kind, Value::text("stack")),
            Set::Once(Field::ProjectId, Value::text(home)),
        ],
    }
}

/// What an invoice's record learns once, and keeps, whatever else it holds.
fn invoice_once(invoice_id: &str, field: Field, text: &str) -> Write {
    Write {
        what: What::Transition,
        key: Key::state(invoice_id),
        guard: Guard::Always,
        set: vec![
            Set::Once(Field::Kind, Value::text("invoice")),
            Set::Once(field, Value::text(text)),
        ],
    }
}

/// Why a paid invoice is not fulfilled, kept on its record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mark {
    /// The amount or currency differs from the registered order: `held` for review.
    Held,
    /// Its order was fulfilled by another invoice: `duplicate_of` that invoice, for a refund.
    DuplicateOf(String),
    /// It was refunded in full before the payment was applied: its refund already says so.
    Refunded,
    /// Its payment waits for its order ([`awaits_order`]): a status that pays nothing keeps it
    /// listed for review.
    AwaitsOrder,
    /// Paid at a time no road knew while a full refund is on record: `after_refund`, for a
    /// person ([`crate::money::invoice::Standing::AfterRefund`]).
    AfterRefund,
    /// The payment names another project than the invoice's record: `held` and
    /// `projects_disagree`, never released on the record's word (which project's order it
    /// pays, a person names, or Paymos confirms).
    ProjectsDisagree,
}

/// An invoice's status change that fulfils nothing, with `mark` (why a payment does not ship)
/// when there is one.
#[must_use]
pub fn invoice_transition(
    invoice_id: &str,
    (status, at, paid_at): (InvoiceStatus, u64, Option<u64>),
    order: &OrderRef,
    mark: Option<&Mark>,
    source: &Source,
    now_ms: u64,
) -> Write {
    // Events that named two projects: the record keeps the project it had and takes none of
    // this payment's, so it never names two.
    let unscoped;
    let order = if mark == Some(&Mark::ProjectsDisagree) {
        unscoped = OrderRef {
            project: None,
            home: false,
            ..order.clone()
        };
        &unscoped
    } else {
        order
    };
    let mut set = invoice_fields(status, at, order, source, now_ms);
    if status.fulfils() {
        // A payment that does not ship keeps its time too: the refund rule reads it.
        set.extend(paid_at.map(|t| Set::Put(Field::PaymentAt, Value::Int(t))));
    }
    match mark {
        Some(Mark::Held) => set.push(Set::Put(Field::Held, Value::Bool(true))),
        Some(Mark::ProjectsDisagree) => {
            set.push(Set::Put(Field::Held, Value::Bool(true)));
            set.push(Set::Put(Field::ProjectsDisagree, Value::Bool(true)));
        }
        Some(Mark::DuplicateOf(winner)) => {
            set.push(Set::Put(Field::DuplicateOf, Value::text(winner)));
        }
        Some(Mark::AfterRefund) => set.push(Set::Put(Field::AfterRefund, Value::Bool(true))),
        Some(Mark::Refunded | Mark::AwaitsOrder) | None => {}
    }
    // A dated payment (Paymos' word, or its order learned at last): its time judges the
    // refund, whatever a person's undated word marked before.
    if status.fulfils() && paid_at.is_some() && mark != Some(&Mark::AfterRefund) {
        set.push(Set::Remove(Field::AfterRefund));
    }
    set.push(invoice_listing(
        invoice_id,
        status,
        matches!(
            mark,
            Some(
                Mark::Held
                    | Mark::ProjectsDisagree
                    | Mark::DuplicateOf(_)
                    | Mark::AwaitsOrder
                    | Mark::AfterRefund
            )
        ),
        now_ms,
    ));
    // A plain status change never takes an invoice whose payment waits for its order off the
    // review list: refused, it is written again marked so.
    let guard = match mark {
        None => Guard::All(vec![
            transition(status, at),
            Guard::Lacks(Field::AwaitsOrder),
        ]),
        Some(_) => transition(status, at),
    };
    Write {
        what: What::Transition,
        key: Key::state(invoice_id),
        guard,
        set,
    }
}

/// A paid invoice that fulfils: its status, under [`transition`], not [`refunded_in_full`],
/// and [`order_on_record`]; then everything that fulfils it ([`fulfilment`]).
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
            order_on_record(paid.order),
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
/// | [`REVIEW`] | an invoice whose payment waits for a person (held, paid twice, paid late) until a release | `exceptions`, `release` |
/// | [`ACTIONS`] | the operators' audit trail ([`crate::money::action`]), newest first | `audit`, the console |
/// | `open#k` ([`open_list`]) | an invoice while its status is open | the reconciliation's re-read at Paymos |
/// | `day#2026-12-01#k` ([`day_list`]) | anything else, by the UTC day it last changed | `events since`/`resend`, the reconciliation's fulfilments |
///
/// An item is in one list at a time. `open` and each day are spread over [`LIST_SHARDS`]
/// lists by a hash of the item's own key (`k`, [`shard_of`]), so that no one partition of the
/// index takes every write of a busy day (a partition takes 1,000 writes a second, and a list
/// whose range key only grows cannot be split); `review` stays one list (what waits for a
/// person is few). Readers read every shard, and the unsharded lists of releases before
/// (`open`, `day#2026-12-01`): `events since` reads the days since, and the two short lists,
/// from the time asked ([`days_listing`], [`open_lists`]).
pub mod listing {
    use crate::money::status::InvoiceStatus;

    /// Invoices whose payment waits for a person.
    pub const REVIEW: &str = "review";
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
            REVIEW.to_owned()
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
    ACTIONS, LIST_SHARDS, OPEN, REVIEW, SHARDED_FROM_MS, day_list, day_listing, days_listing,
    invoice_list, open_list, open_lists, shard_of,
};

/// An invoice's list after a write that sets its status (or keeps a closed one) at `now_ms`:
/// [`REVIEW`] when the write makes its payment wait for a person (held, paid twice, paid
/// late), else [`OPEN`] while the status is open, else its day.
fn invoice_listing(invoice_id: &str, status: InvoiceStatus, waits: bool, now_ms: u64) -> Set {
    Set::Put(
        Field::ListedIn,
        Value::Text(invoice_list(invoice_id, Some(status), waits, now_ms)),
    )
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
/// ([`refunded_in_full`]): the flag, and the latest full refund's time. That time only moves
/// forward: the note is refused where a later full refund is recorded, and written again
/// `after_later` (the time kept). It gives the invoice no status.
#[must_use]
pub fn refund_note(invoice_id: &str, refund: &Refund, after_later: bool, now_ms: u64) -> Write {
    let mut set = vec![
        Set::Once(Field::Kind, Value::text("invoice")),
        Set::Append(Field::Refunds, refund.clone()),
        Set::Put(Field::UpdatedAt, Value::Int(now_ms)),
    ];
    let mut guard = Guard::Always;
    if refund.mode == Some(RefundMode::Full) {
        set.push(Set::Once(
            Field::RefundedInFullBy,
            Value::text(&refund.withdrawal_id),
        ));
        // A payment of unknown time waiting after a full refund: a full refund recorded since
        // is the person's way out (the payment paid back), as a release is.
        set.push(Set::Remove(Field::AfterRefund));
        if let (Some(at), false) = (refund.completed_at, after_later) {
            set.push(Set::Put(Field::RefundedInFullAt, Value::Int(at)));
            guard = Guard::Any(vec![
                Guard::Lacks(Field::RefundedInFullAt),
                Guard::Below(Field::RefundedInFullAt, Value::Int(at)),
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

/// A withdrawal's status by `source` at `now_ms` (forward only: [`withdrawal_transition`]),
/// with what the event says of it.
#[must_use]
pub fn withdrawal(w: &WithdrawalChange<'_>, source: &Source, now_ms: u64) -> Write {
    let mut set = vec![
        Set::Put(Field::Kind, Value::text("withdrawal")),
        Set::Put(Field::Status, Value::text(w.status.as_str())),
        Set::Put(Field::StatusRank, Value::Int(u64::from(w.status.rank()))),
        Set::Put(Field::Type, Value::text(w.kind)),
        Set::Put(Field::LastEventId, Value::Text(source.id())),
        Set::Put(Field::UpdatedAt, Value::Int(now_ms)),
        step(w.at, w.status.as_str(), source),
        Set::Put(
            Field::ListedIn,
            Value::Text(day_list(w.withdrawal_id, now_ms)),
        ),
    ];
    if let Some(v) = w.invoice_id {
        set.push(Set::Put(Field::InvoiceId, Value::text(v)));
    }
    if let Some(v) = w.amount {
        set.push(Set::Put(Field::Amount, Value::Amount(v.clone())));
        set.push(Set::Put(Field::AmountText, Value::text(v.as_str())));
    }
    if let Some(v) = w.currency {
        set.push(Set::Put(Field::Currency, Value::text(v)));
    }
    Write {
        what: What::Withdrawal,
        key: Key::state(w.withdrawal_id),
        guard: withdrawal_transition(w.status),
        set,
    }
}

/// What a withdrawal's write needs of its change.
#[derive(Debug, Clone, Copy)]
pub struct WithdrawalChange<'a> {
    /// `wdr_…`.
    pub withdrawal_id: &'a str,
    /// The status it moves to.
    pub status: WithdrawalStatus,
    /// When Paymos says it moved (Unix seconds).
    pub at: u64,
    /// `refund` or `payout`.
    pub kind: &'a str,
    /// A refund's invoice.
    pub invoice_id: Option<&'a String>,
    /// Its amount, when given.
    pub amount: Option<&'a Amount>,
    /// Its currency, when given.
    pub currency: Option<&'a String>,
}

/// A deposit's status by `source` at `now_ms` ([`deposit_transition`]) and, for a final
/// confirmation, its credit with the payer's balance, in one transaction.
#[must_use]
pub fn deposit(
    deposit_id: &str,
    (status, at): (DepositStatus, u64),
    credit: Option<&Credit>,
    source: &Source,
    now_ms: u64,
) -> Vec<Write> {
    let mut set = vec![
        Set::Put(Field::Kind, Value::text("deposit")),
        Set::Put(Field::Status, Value::text(status.as_str())),
        Set::Put(Field::StatusAt, Value::Int(at)),
        Set::Put(Field::UpdatedAt, Value::Int(now_ms)),
        Set::Put(Field::ListedIn, Value::Text(day_list(deposit_id, now_ms))),
        step(at, status.as_str(), source),
    ];
    let Some(credit) = credit else {
        return vec![Write {
            what: What::Deposit,
            key: Key::state(deposit_id),
            guard: deposit_transition(false, at),
            set,
        }];
    };
    set.extend([
        Set::Put(Field::Credited, Value::Bool(true)),
        Set::Put(Field::Payer, Value::text(&credit.payer)),
        Set::Put(Field::Net, Value::Amount(credit.net.clone())),
        Set::Put(Field::NetText, Value::text(credit.net.as_str())),
        Set::Put(Field::Currency, Value::text(&credit.currency)),
        Set::Put(Field::CreditedBy, Value::Text(source.id())),
    ]);
    let project = credit
        .project
        .as_ref()
        .map(|p| Set::Put(Field::ProjectId, Value::text(p)));
    set.extend(project.clone());
    vec![
        Write {
            what: What::Deposit,
            key: Key::state(deposit_id),
            guard: deposit_transition(true, at),
            set,
        },
        Write {
            what: What::Balance,
            key: Key::state(balance_key(
                credit.project.as_deref(),
                &credit.payer,
                &credit.currency,
            )),
            guard: Guard::Always,
            set: vec![
                Set::Put(Field::Kind, Value::text("balance")),
                Set::Put(Field::Payer, Value::text(&credit.payer)),
                Set::Put(Field::Currency, Value::text(&credit.currency)),
                Set::Add(Field::Balance, Value::Amount(credit.net.clone())),
            ]
            .into_iter()
            .chain(project)
            .collect(),
        },
    ]
}

/// Whether a withdrawal takes `incoming`: forward only, nothing leaves a final status.
#[must_use]
pub fn withdrawal_transition(incoming: WithdrawalStatus) -> Guard {
    let from = incoming.allowed_from();
    if from.is_empty() {
        return Guard::Absent;
    }
    Guard::Any(vec![
        Guard::Absent,
        Guard::In(
            Field::Status,
            from.iter().map(|s| Value::text(s.as_str())).collect(),
        ),
    ])
}

/// Whether a deposit takes a change (at `at`): a credit only once, an advisory status only
/// before the credit and not older than the last one recorded.
#[must_use]
pub fn deposit_transition(credits: bool, at: u64) -> Guard {
    let not_credited = Guard::Lacks(Field::Credited);
    Guard::Any(vec![
        Guard::Absent,
        if credits {
            not_credited
        } else {
            Guard::All(vec![
                not_credited,
                Guard::AtMost(Field::StatusAt, Value::Int(at)),
            ])
        },
    ])
}

/// The delivery's processed mark, with its outcome: once only.
#[must_use]
pub fn processed(key: &str, outcome: Applied, reason: Option<&str>, now_ms: u64) -> Write {
    let mut set = vec![
        Set::Put(Field::State, Value::text("processed")),
        Set::Put(Field::Outcome, Value::text(outcome.as_str())),
        Set::Put(Field::ProcessedAt, Value::Int(now_ms)),
        Set::Remove(Field::PendingShard),
    ];
    // A delivery whose outcome waits for a person is marked so, and only such a delivery: the
    // index of what waits holds what `exceptions` lists, whatever the history.
    if crate::money::change::DELIVERY_OUTCOMES.contains(&outcome) {
        set.push(Set::Put(Field::Waiting, Value::text(outcome.as_str())));
    }
    if let Some(reason) = reason {
        set.push(Set::Put(Field::OutcomeReason, Value::text(reason)));
    }
    Write {
        what: What::Processed,
        key: Key::delivery(key),
        guard: Guard::Any(vec![
            Guard::Lacks(Field::State),
            Guard::Not(Box::new(Guard::Is(Field::State, Value::text("processed")))),
        ]),
        set,
    }
}

/// A delivery that waits for a person: its review note, once (what the state table's stream,
/// and so the hand-off, sees of a delivery that changes no resource).
#[must_use]
pub fn review_note(
    event_id: &str,
    outcome: Applied,
    resource_id: Option<&str>,
    why: &str,
    now_ms: u64,
) -> Write {
    let mut set = vec![
        Set::Put(Field::Kind, Value::text("review")),
        Set::Put(Field::Reason, Value::text(outcome.as_str())),
        Set::Put(Field::EventId, Value::text(event_id)),
        Set::Put(Field::Why, Value::text(why)),
        Set::Put(Field::CreatedAt, Value::Int(now_ms)),
        Set::Put(Field::UpdatedAt, Value::Int(now_ms)),
        Set::Put(
            Field::ListedIn,
            Value::Text(day_list(&review_key(event_id), now_ms)),
        ),
    ];
    if let Some(r) = resource_id {
        set.push(Set::Put(Field::ResourceId, Value::text(r)));
    }
    Write {
        what: What::Review,
        key: Key::state(review_key(event_id)),
        guard: Guard::Absent,
        set,
    }
}

// ---- Reading an item back. ----

fn text(fields: &Fields, f: &Field) -> Option<String> {
    fields.get(f).and_then(Value::as_text).map(str::to_owned)
}

/// An amount as Paymos sent it (`text`, trailing zeros kept), else the stored number.
#[must_use]
pub fn money(fields: &Fields, number: &Field, text_field: &Field) -> Option<Amount> {
    text(fields, text_field)
        .and_then(|a| Amount::parse(&a))
        .or_else(|| match fields.get(number) {
            Some(Value::Amount(a)) => Some(a.clone()),
            _ => None,
        })
}

/// The order an item names (an invoice's record, a fulfilment).
#[must_use]
pub fn order_of(fields: &Fields) -> OrderRef {
    OrderRef {
        external_id: text(fields, &Field::OrderId),
        amount: money(fields, &Field::Amount, &Field::AmountText),
        currency: text(fields, &Field::Currency),
        project: text(fields, &Field::ProjectId),
        home: fields.get(&Field::HomeProject) == Some(&Value::Bool(true)),
    }
}

/// An invoice item as the rules read it.
#[must_use]
pub fn invoice_seen(fields: &Fields) -> InvoiceSeen {
    InvoiceSeen {
        status: text(fields, &Field::Status)
            .as_deref()
            .and_then(InvoiceStatus::parse),
        held: fields.get(&Field::Held) == Some(&Value::Bool(true)),
        held_why: text(fields, &Field::Why),
        projects_disagree: fields.get(&Field::ProjectsDisagree) == Some(&Value::Bool(true)),
        paid_late: fields.contains_key(&Field::PaidLateAt),
        duplicate_of: text(fields, &Field::DuplicateOf),
        released: fields.contains_key(&Field::ReleasedAt),
        refunds: match fields.get(&Field::Refunds) {
            Some(Value::Refunds(list)) => list.clone(),
            _ => Vec::new(),
        },
        payment_at: fields.get(&Field::PaymentAt).and_then(Value::as_int),
        awaits_order: fields.get(&Field::AwaitsOrder) == Some(&Value::Bool(true)),
        after_refund: fields.get(&Field::AfterRefund) == Some(&Value::Bool(true)),
        order: order_of(fields),
    }
}

/// The story an item's fields keep, oldest first ([`step`]).
#[must_use]
pub fn story(fields: &Fields) -> Vec<crate::money::record::Step> {
    crate::money::record::Step::story(fields.iter().filter_map(|(f, v)| match f {
        Field::Named(name) => Some((name.as_str(), v.as_text()?)),
        _ => None,
    }))
}

/// Whether `source`'s own change is among what the item holds (a delivery applied, then
/// crashed before its mark).
#[must_use]
pub fn holds_change_of(fields: &Fields, source: &Source) -> bool {
    let id = source.id();
    let is = |f: Field| fields.get(&f).and_then(Value::as_text) == Some(id.as_str());
    is(Field::LastEventId)
        || is(Field::CreditedBy)
        || matches!(fields.get(&Field::Applied), Some(Value::Texts(set)) if set.contains(&id))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Missed mutant (`>` in `payment_awaiting_order`): a payment that teaches nothing (no
    // project, no time) writes nothing, not a bare record of an invoice.
    #[test]
    fn a_payment_awaiting_its_order_writes_only_what_it_teaches() {
        assert_eq!(
            payment_awaiting_order("inv_1", &OrderRef::none(), None),
            None
        );
        let timed = payment_awaiting_order("inv_1", &OrderRef::none(), Some(3)).unwrap();
        assert!(
            timed
                .set
                .contains(&Set::Once(Field::PaymentAt, Value::Int(3)))
        );
        let named = OrderRef {
            project: Some("prj_b".into()),
            ..OrderRef::none()
        };
        assert!(payment_awaiting_order("inv_1", &named, None).is_some());
    }

    // Issue 32: an invoice is listed `open` while its status is open (the reconciliation
    // re-reads it), `review` from what makes its payment wait until a release (exceptions
    // lists it), and otherwise under the day it changed (events since): one list at a time.
    // Only a dated payment takes an undated word's `after_refund` off (its time judges the
    // refund); a close carrying a time is no payment, and the mark's own write keeps it. A
    // payment naming another project than its record is held and marked so, for review.
    #[test]
    fn a_dated_payment_alone_lifts_after_refund_and_two_projects_hold_for_review() {
        let source = Source::Manual { actor: "a".into() };
        let order = OrderRef::default();
        let set = |status, paid_at, mark: Option<&Mark>| {
            invoice_transition("inv_1", (status, 1, paid_at), &order, mark, &source, 5).set
        };
        let lifted = |sets: &[Set]| sets.contains(&Set::Remove(Field::AfterRefund));
        assert!(lifted(&set(InvoiceStatus::Paid, Some(3), None)));
        assert!(!lifted(&set(InvoiceStatus::Paid, None, None)));
        assert!(!lifted(&set(InvoiceStatus::Expired, Some(3), None)));
        assert!(!lifted(&set(
            InvoiceStatus::Paid,
            Some(3),
            Some(&Mark::AfterRefund)
        )));
        let two = set(InvoiceStatus::Paid, None, Some(&Mark::ProjectsDisagree));
        assert!(two.contains(&Set::Put(Field::Held, Value::Bool(true))));
        assert!(two.contains(&Set::Put(Field::ProjectsDisagree, Value::Bool(true))));
        assert!(two.contains(&Set::Put(Field::ListedIn, Value::text(REVIEW))));
        let held = set(InvoiceStatus::Paid, None, Some(&Mark::Held));
        assert!(!held.contains(&Set::Put(Field::ProjectsDisagree, Value::Bool(true))));
    }

    #[test]
    fn an_invoice_is_listed_open_while_open_review_while_it_waits_and_else_by_its_day() {
        const DEC_1: u64 = 1_796_169_600_000; // 2026-12-02T00:00:00Z, the first sharded day
        let put = |v: &str| Set::Put(Field::ListedIn, Value::text(v));
        let source = Source::Manual { actor: "a".into() };
        let order = OrderRef::default();
        let set = |status, mark: Option<&Mark>| {
            invoice_transition("inv_1", (status, 1, None), &order, mark, &source, DEC_1 + 5).set
        };
        let (open, day) = (open_list("inv_1"), day_list("inv_1", DEC_1));
        assert!(open.starts_with("open#") && day.starts_with("day#2026-12-02#"));
        for status in InvoiceStatus::OPEN {
            assert!(set(status, None).contains(&put(&open)), "{status:?}");
        }
        for status in [
            InvoiceStatus::Paid,
            InvoiceStatus::Expired,
            InvoiceStatus::Cancelled,
        ] {
            assert!(set(status, None).contains(&put(&day)), "{status:?}");
        }
        assert!(set(InvoiceStatus::Paid, Some(&Mark::Held)).contains(&put(REVIEW)));
        let twice = Mark::DuplicateOf("inv_0".into());
        assert!(set(InvoiceStatus::Paid, Some(&twice)).contains(&put(REVIEW)));
        assert!(set(InvoiceStatus::Paid, Some(&Mark::Refunded)).contains(&put(&day)));
        assert!(set(InvoiceStatus::Paid, Some(&Mark::AfterRefund)).contains(&put(REVIEW)));
        let late = paid_late(
            "inv_1",
            InvoiceStatus::Expired,
            (3, None),
            (false, false),
            DEC_1 - 1,
        )
        .set;
        assert!(late.contains(&put(REVIEW)));
        assert!(late.contains(&Set::Put(Field::UpdatedAt, Value::Int(DEC_1 - 1))));
        let held = set(InvoiceStatus::Paid, Some(&Mark::Held));
        let listed: Vec<&Set> = held
            .iter()
            .filter(|s| {
                matches!(
                    s,
                    Set::Put(Field::ListedIn, _) | Set::Remove(Field::ListedIn)
                )
            })
            .collect();
        assert_eq!(listed.len(), 1, "one clause per attribute: {listed:?}");
    }

    #[test]
    fn a_day_list_is_the_utc_day_and_the_days_run_from_the_first_to_the_last() {
        const DEC_1: u64 = 1_796_083_200_000;
        assert_eq!(day_listing(DEC_1), "day#2026-12-01");
        assert_eq!(day_listing(DEC_1 - 1), "day#2026-11-30");
        assert_eq!(day_listing(0), "day#1970-01-01");
        // Each day: its unsharded list (of releases before), then, from the first sharded day
        // on, its shards.
        assert_eq!(SHARDED_FROM_MS, DEC_1 + 86_400_000, "2026-12-02");
        let days = days_listing(DEC_1 - 1, DEC_1 + 86_400_000);
        let shards = LIST_SHARDS as usize + 1;
        assert_eq!(days.len(), 2 + shards);
        assert_eq!(
            [&days[0], &days[1], &days[2]],
            ["day#2026-11-30", "day#2026-12-01", "day#2026-12-02"]
        );
        assert_eq!(days[3], "day#2026-12-02#0");
        assert_eq!(
            day_list("inv_1", DEC_1 + 5),
            "day#2026-12-01",
            "dated before: one list"
        );
        assert!(days.contains(&day_list("inv_1", SHARDED_FROM_MS + 5)));
        assert!(day_list("inv_1", SHARDED_FROM_MS).starts_with("day#2026-12-02#"));
        assert_eq!(days_listing(DEC_1 + 1, DEC_1 + 2).len(), 1);
        assert_eq!(
            days_listing(SHARDED_FROM_MS + 1, SHARDED_FROM_MS + 2).len(),
            shards
        );
        assert!(days_listing(DEC_1 + 86_400_000, DEC_1).is_empty());
        assert_eq!(open_lists()[0], OPEN);
        assert!(open_lists().contains(&open_list("inv_1")));
    }

    // Issue 39: the lists spread each busy day's and the open invoices' writes over
    // LIST_SHARDS partitions, every shard used, each key always in the same one.
    #[test]
    fn lists_spread_keys_over_every_shard_and_keep_each_key_in_one() {
        let mut counts = vec![0u32; LIST_SHARDS as usize];
        for i in 0..32_000 {
            let key = format!("inv_{i:08x}");
            let k = shard_of(&key, LIST_SHARDS);
            assert_eq!(k, shard_of(&key, LIST_SHARDS));
            counts[k as usize] += 1;
        }
        // About 1,000 each: none more than a quarter above the mean.
        assert!(counts.iter().all(|c| (750..1250).contains(c)), "{counts:?}");
    }

    // The shard is part of what is stored: an item listed (and a delivery's `pending-by-age`
    // entry) under `#k` must be found there by every later release. These keys keep their
    // shards; a change of the hash would move every list under the readers' feet.
    #[test]
    fn a_keys_shard_is_a_stored_format_and_never_changes() {
        let shards: Vec<u32> = ["inv_1", "inv_2", "pcd_1", "wdr_1", "evt_1", "test#evt_1"]
            .iter()
            .flat_map(|k| [shard_of(k, LIST_SHARDS), shard_of(k, 64)])
            .collect();
        assert_eq!(shards, [13, 13, 7, 39, 13, 13, 8, 8, 27, 59, 27, 59]);
    }

    // Issue 32: every item that stands for an event is listed under the day it changed, with
    // the time the index ranges by, so `events since` and the reconciliation's window find it.
    #[test]
    fn every_item_that_stands_for_an_event_is_listed_by_the_time_it_changed() {
        const AT: u64 = SHARDED_FROM_MS + 42;
        let listed_by_day = |w: &Write| {
            let key = w.key.id.as_str();
            w.set
                .contains(&Set::Put(Field::ListedIn, Value::text(day_list(key, AT))))
                && day_list(key, AT).starts_with("day#2026-12-02#")
        };
        let when = Set::Put(Field::UpdatedAt, Value::Int(AT));
        let source = Source::Manual { actor: "a".into() };
        let order = OrderRef::default();
        let paid = PaidInvoice {
            invoice_id: "inv_1",
            status: InvoiceStatus::Paid,
            order: &order,
            source: &source,
            at_ms: AT,
        };
        let writes = payment(&paid, (1, Some(1)), Vec::new());
        for w in writes
            .iter()
            .filter(|w| matches!(w.what, What::Payment | What::Fulfilment))
        {
            assert!(listed_by_day(w) && w.set.contains(&when), "{:?}", w.what);
        }
        let withdrawal = withdrawal(
            &WithdrawalChange {
                withdrawal_id: "wdr_1",
                status: WithdrawalStatus::Completed,
                at: 1,
                kind: "refund",
                invoice_id: None,
                amount: None,
                currency: None,
            },
            &source,
            AT,
        );
        let review = review_note("evt_1", Applied::Unusable, None, "why", AT);
        let deposits = deposit("pcd_1", (DepositStatus::Confirmed, 1), None, &source, AT);
        for w in [&withdrawal, &review, &deposits[0]] {
            assert!(listed_by_day(w) && w.set.contains(&when), "{:?}", w.what);
        }
    }

    // Issue 32: what waits for a person is marked at its processed mark, and nothing else is,
    // so the index `exceptions` reads holds exactly what it lists.
    #[test]
    fn a_delivery_is_marked_waiting_exactly_when_its_outcome_waits_for_a_person() {
        let every = [
            Applied::Fulfilled,
            Applied::Updated,
            Applied::Credited,
            Applied::AlreadyFinal,
            Applied::Stale,
            Applied::Held,
            Applied::PaidLate,
            Applied::Ignored,
            Applied::Unconfirmed,
            Applied::AlreadyProcessed,
            Applied::Unusable,
            Applied::OtherEnvironment,
            Applied::DuplicatePayment,
            Applied::Refunded,
            Applied::OrderUnknown,
        ];
        for outcome in every {
            let mark = processed("evt_1", outcome, None, 7);
            let waiting: Vec<&Set> = mark
                .set
                .iter()
                .filter(|s| matches!(s, Set::Put(Field::Waiting, _)))
                .collect();
            let waits = matches!(
                outcome,
                Applied::Unconfirmed | Applied::Unusable | Applied::OrderUnknown
            );
            if waits {
                assert_eq!(
                    waiting,
                    [&Set::Put(Field::Waiting, Value::text(outcome.as_str()))],
                    "{outcome:?}"
                );
            } else {
                assert!(waiting.is_empty(), "{outcome:?} does not wait");
            }
        }
    }

    fn invoice(status: InvoiceStatus, at: u64) -> Fields {
        Fields::from([
            (Field::Status, Value::text(status.as_str())),
            (Field::StatusAt, Value::Int(at)),
            (Field::StatusRank, Value::Int(u64::from(status.rank()))),
        ])
    }

    #[test]
    fn an_invoice_moves_forward_only_and_never_leaves_a_final_status() {
        use InvoiceStatus as I;
        let takes = |current: Option<Fields>, incoming: I, at| {
            transition(incoming, at).holds(current.as_ref())
        };
        assert!(takes(None, I::Paid, 1));
        assert!(takes(Some(Fields::new()), I::Confirming, 1), "refunds only");
        assert!(takes(Some(invoice(I::Confirming, 9)), I::Paid, 1));
        assert!(!takes(Some(invoice(I::Paid, 1)), I::Expired, 9));
        assert!(!takes(Some(invoice(I::Paid, 1)), I::Confirming, 9));
        assert!(takes(
            Some(invoice(I::AwaitingPayment, 1)),
            I::Confirming,
            2
        ));
        assert!(!takes(
            Some(invoice(I::Confirming, 2)),
            I::AwaitingPayment,
            1
        ));
        assert!(takes(
            Some(invoice(I::AwaitingPayment, 2)),
            I::Confirming,
            2
        ));
        assert!(!takes(
            Some(invoice(I::Confirming, 2)),
            I::AwaitingPayment,
            2
        ));
        assert!(!takes(Some(invoice(I::Confirming, 2)), I::Confirming, 2));
        // A later reorg's `awaiting_payment` applies.
        assert!(takes(
            Some(invoice(I::Confirming, 2)),
            I::AwaitingPayment,
            3
        ));
    }

    #[test]
    fn a_missing_field_compares_false_and_numbers_compare_by_value() {
        let empty = Fields::new();
        for guard in [
            Guard::Is(Field::Held, Value::Bool(true)),
            Guard::Below(Field::StatusAt, Value::Int(9)),
            Guard::AtMost(Field::StatusAt, Value::Int(9)),
            Guard::In(Field::Status, vec![Value::text("paid")]),
            Guard::Count(Field::Refunds, 0),
        ] {
            assert!(!guard.holds(Some(&empty)), "{guard:?}");
            assert!(Guard::Not(Box::new(guard)).holds(Some(&empty)));
        }
        let order = Fields::from([
            (Field::Amount, Value::Amount(Amount::parse("10.5").unwrap())),
            (Field::Currency, Value::text("USDT")),
        ]);
        let guard = amount_guard(&OrderRef {
            external_id: Some("o".into()),
            amount: Amount::parse("10.50"),
            currency: Some("USDT".into()),
            project: None,
            home: false,
        })
        .unwrap()
        .guard;
        assert!(guard.holds(Some(&order)));
        assert!(guard.holds(None), "an order nobody registered");
        let other = amount_guard(&OrderRef {
            external_id: Some("o".into()),
            amount: Amount::parse("10.51"),
            currency: Some("USDT".into()),
            project: None,
            home: false,
        })
        .unwrap()
        .guard;
        assert!(!other.holds(Some(&order)));
        assert!(!Guard::Never.holds(None));
        assert!(
            Guard::AtMost(Field::StatusAt, Value::Int(3))
                .holds(Some(&invoice(InvoiceStatus::Paid, 3)))
        );
        assert!(
            !Guard::Below(Field::StatusAt, Value::Int(3))
                .holds(Some(&invoice(InvoiceStatus::Paid, 3)))
        );
    }

    #[test]
    fn a_deposit_is_credited_once_and_an_advisory_never_goes_back() {
        let credited = Fields::from([
            (Field::Credited, Value::Bool(true)),
            (Field::StatusAt, Value::Int(1)),
        ]);
        let advisory = Fields::from([(Field::StatusAt, Value::Int(5))]);
        assert!(deposit_transition(true, 1).holds(None));
        assert!(!deposit_transition(true, 9).holds(Some(&credited)));
        assert!(deposit_transition(true, 1).holds(Some(&advisory)));
        assert!(!deposit_transition(false, 9).holds(Some(&credited)));
        assert!(deposit_transition(false, 5).holds(Some(&advisory)));
        assert!(!deposit_transition(false, 4).holds(Some(&advisory)));
    }

    #[test]
    fn a_withdrawal_moves_forward_only() {
        let at = |s: WithdrawalStatus| Fields::from([(Field::Status, Value::text(s.as_str()))]);
        use WithdrawalStatus as W;
        assert!(withdrawal_transition(W::Created).holds(None));
        assert!(!withdrawal_transition(W::Created).holds(Some(&at(W::Created))));
        assert!(withdrawal_transition(W::Completed).holds(Some(&at(W::Processing))));
        assert!(!withdrawal_transition(W::Processing).holds(Some(&at(W::Completed))));
        assert!(!withdrawal_transition(W::Failed).holds(Some(&at(W::Completed))));
    }

    #[test]
    fn a_release_holds_only_on_the_invoice_as_it_was_read() {
        let mut held = invoice(InvoiceStatus::Paid, 1);
        held.insert(Field::Held, Value::Bool(true));
        let guard = release_guard(Waiting::Held(InvoiceStatus::Paid), 0);
        assert!(guard.holds(Some(&held)));
        let mut released = held.clone();
        released.insert(Field::ReleasedAt, Value::Int(1));
        assert!(!guard.holds(Some(&released)));
        let refund = Refund {
            withdrawal_id: "wdr_1".into(),
            amount: None,
            currency: None,
            mode: Some(RefundMode::Overpayment),
            completed_at: None,
        };
        let mut refunded = held.clone();
        refunded.insert(Field::Refunds, Value::Refunds(vec![refund]));
        assert!(!guard.holds(Some(&refunded)));
        assert!(release_guard(Waiting::Held(InvoiceStatus::Paid), 1).holds(Some(&refunded)));
        assert!(!release_guard(Waiting::PaidLate(InvoiceStatus::Paid), 0).holds(Some(&held)));
    }

    #[test]
    fn an_amount_reads_as_sent_else_as_the_stored_number() {
        let number = Fields::from([(Field::Amount, Value::Amount(Amount::parse("10.5").unwrap()))]);
        assert_eq!(
            money(&number, &Field::Amount, &Field::AmountText).map(|a| a.as_str().to_owned()),
            Some("10.5".into())
        );
        let mut both = number.clone();
        both.insert(Field::AmountText, Value::text("10.50"));
        assert_eq!(
            order_of(&both).amount.map(|a| a.as_str().to_owned()),
            Some("10.50".into()),
            "the text Paymos sent wins"
        );
        assert_eq!(money(&Fields::new(), &Field::Net, &Field::NetText), None);
    }

    #[test]
    fn each_item_has_its_key() {
        assert_eq!(order_key(None, "o-1"), "order#o-1");
        assert_eq!(order_paid_key(None, "o-1"), "order_paid#o-1");
        assert_eq!(balance_key(None, "c-1", "TRX"), "balance#c-1#TRX");
        // Another project's: its own keys, never the home project's.
        assert_eq!(order_key(Some("prj_b"), "o-1"), "order#prj_b#o-1");
        assert_eq!(order_paid_key(Some("prj_b"), "o-1"), "order_paid#prj_b#o-1");
        assert_eq!(
            balance_key(Some("prj_b"), "c-1", "TRX"),
            "balance#prj_b#c-1#TRX"
        );
        assert_eq!(review_key("evt_1"), "review#evt_1");
        let credit = Credit {
            payer: "c-1".into(),
            net: Amount::parse("2").unwrap(),
            currency: "TRX".into(),
            project: None,
        };
        let source = Source::Manual { actor: "a".into() };
        let writes = deposit(
            "pcd_1",
            (DepositStatus::Confirmed, 1),
            Some(&credit),
            &source,
            1,
        );
        assert_eq!(writes[1].key, Key::state("balance#c-1#TRX"));
        assert_eq!(Key::delivery("evt_1").table, Table::Ledger);
    }

    #[test]
    fn only_a_full_refund_flags_the_invoice() {
        let refund = |mode| Refund {
            withdrawal_id: "wdr_1".into(),
            amount: None,
            currency: None,
            mode,
            completed_at: None,
        };
        let flags = |r: &Refund| {
            refund_note("inv_1", r, false, 1)
                .set
                .iter()
                .any(|s| matches!(s, Set::Once(Field::RefundedInFullBy, _)))
        };
        assert!(flags(&refund(Some(RefundMode::Full))));
        assert!(!flags(&refund(Some(RefundMode::Overpayment))));
        assert!(!flags(&refund(None)));
    }

    // Issue 42, item 1: an invoice refunded in full before the flags existed gets them from its
    // recorded refunds, and then settles exactly the payments those refunds return.
    #[test]
    fn the_flags_of_recorded_refunds_settle_what_the_refunds_return() {
        let refund = |id: &str, mode, completed_at| Refund {
            withdrawal_id: id.into(),
            amount: None,
            currency: None,
            mode,
            completed_at,
        };
        let (full, over) = (Some(RefundMode::Full), Some(RefundMode::Overpayment));
        let histories = [
            vec![],
            vec![refund("wdr_o", over, Some(50))],
            vec![refund("wdr_n", None, None)],
            vec![refund("wdr_a", full, None)],
            vec![refund("wdr_a", full, Some(40))],
            vec![
                refund("wdr_a", full, Some(20)),
                refund("wdr_b", full, Some(40)),
            ],
            vec![
                refund("wdr_a", full, Some(40)),
                refund("wdr_b", full, Some(20)),
            ],
            vec![refund("wdr_a", full, Some(20)), refund("wdr_b", full, None)],
            vec![
                refund("wdr_o", over, Some(60)),
                refund("wdr_b", full, Some(30)),
            ],
        ];
        for refunds in histories {
            let mut item = Fields::from([(Field::Kind, Value::text("invoice"))]);
            if let Some(w) = refund_flags("inv_1", &refunds) {
                assert!(w.guard.holds(Some(&item)), "{refunds:?}");
                assert!(!w.guard.holds(None), "never creates an invoice");
                for set in &w.set {
                    if let Set::Put(f, v) | Set::Once(f, v) = set {
                        item.insert(f.clone(), v.clone());
                    }
                }
                assert!(!w.guard.holds(Some(&item)), "once");
            }
            for paid_at in [None, Some(10), Some(20), Some(30), Some(40), Some(41)] {
                assert_eq!(
                    refunded_in_full(paid_at).holds(Some(&item)),
                    refunds.iter().any(|r| r.returns_payment_at(paid_at)),
                    "{refunds:?} paid at {paid_at:?}"
                );
            }
        }
    }

    // Issue 38, case 1: a full refund settles only the payments made until it completed.
    #[test]
    fn the_latest_full_refund_decides_which_payments_it_returns() {
        let full = |at| Refund {
            withdrawal_id: format!("wdr_{at}"),
            amount: None,
            currency: None,
            mode: Some(RefundMode::Full),
            completed_at: Some(at),
        };
        let note = |r: &Refund, after_later| refund_note("inv_1", r, after_later, 1);
        let mut item = Fields::new();
        let commit = |item: &mut Fields, w: &Write| {
            assert!(
                w.guard.holds(Some(item)),
                "{:?} refused on {item:?}",
                w.guard
            );
            for set in &w.set {
                match set {
                    Set::Put(f, v) => drop(item.insert(f.clone(), v.clone())),
                    Set::Once(f, v) => drop(item.entry(f.clone()).or_insert_with(|| v.clone())),
                    _ => {}
                }
            }
        };
        commit(&mut item, &note(&full(40), false));
        // An earlier refund arriving later never takes the later one's time back.
        assert!(!note(&full(20), false).guard.holds(Some(&item)));
        commit(&mut item, &note(&full(20), true));
        assert_eq!(item[&Field::RefundedInFullAt], Value::Int(40));
        let settled = |paid_at| refunded_in_full(paid_at).holds(Some(&item));
        assert!(settled(Some(30)), "paid before the refund at 40");
        assert!(settled(Some(40)), "paid as it completed");
        assert!(!settled(Some(41)), "paid after it: a new payment");
        assert!(settled(None), "a person's road names no time");
        assert!(
            !refunded_in_full(Some(1)).holds(Some(&Fields::new())),
            "no refund"
        );
        // A record written before times were kept: its full refund settles any payment.
        let old = Fields::from([(Field::RefundedInFullBy, Value::text("wdr_0"))]);
        assert!(refunded_in_full(Some(u64::MAX)).holds(Some(&old)));
    }
}
