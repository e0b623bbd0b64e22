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
//! | `Payment` (a paid invoice that fulfils) | [`transition`], not [`refunded_in_full`] (by a full refund completed since it was paid), not [`refund_of_unknown_mode`] (likewise, of a refund whose mode is unknown), [`order_on_record`] | final already; refunded in full; held for a person; the record's order or price decides |
//! | `PaidLate` | still closed as read | raced to another status |
//! | `Release` | [`release`]: still waiting as read | released, refunded or moved since |
//! | `Fulfilment`, `Effect` | absent | fulfilled already |
//! | `OrderClaim` | [`order_claim`]: absent | another invoice fulfilled the order |
//! | `AmountGuard` | [`amount_guard`]: unregistered, or the same amount and currency | held for review |
//! | `Withdrawal` | [`withdrawal_transition`] | stale, or final already |
//! | `RefundNote` | a full one, or one of unknown mode: [`refund_note`], no later one of its kind recorded | a later one's time stays |
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
    RefundOfUnknownModeBy,
    RefundOfUnknownModeAt,
    PaymentAt,
    ProjectId,
    HomeProject,
    AwaitsOrder,
    AfterRefund,
    OtherProject,
    ProjectsDisagree,
    OrderDisputed,
    ShippedOtherwise,
    ShippedOtherwiseSettledBy,
    PaymosOrderShippedWith,
    PaymosProjectElsewhere,
    PaymosOrderUnnamed,
    AfterRefundReturnedBy,
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
    /// The SHA-256 of a delivery's raw body, as ingest recorded it (lower-case hex): the body
    /// the delivery is, whichever copies of its `event_id` are queued.
    BodySha256,
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
    /// Where the last reconciliation that read its whole window ended (Unix seconds), clean or
    /// not: how far behind the reconciliation is, apart from what it found.
    ReadUntil,
    /// A scheduled reconciliation's window kept in progress: its start and end (Unix seconds).
    WindowFrom,
    /// See [`Field::WindowFrom`].
    WindowTo,
    /// How far through its window a scheduled reconciliation got: the end of its last slice
    /// read (Unix seconds).
    DoneUntil,
    /// Whether a part of a reconciliation's window already read found something for a person.
    ForAPerson,
    /// What a scheduled reconciliation's window found, counted by the kind of finding.
    Found,
    /// The W3C `traceparent` of the delivery whose write changed the item last ([`traced`]).
    Traceparent,
    /// An attribute named at run time: a merchant's effect's, or a step of a resource's story
    /// ([`crate::money::record::StoryStep::attribute`]).
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
    /// Counts by name.
    Counts(BTreeMap<String, u64>),
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
    /// A delivery its delayed check found not processed, listed for the sweep.
    Straggler,
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

mod invoice;
mod ledger;
mod movement;
mod payment;
mod read;
#[cfg(test)]
mod tests;

pub use invoice::*;
pub use ledger::*;
pub use movement::*;
pub use payment::*;
pub use read::*;
