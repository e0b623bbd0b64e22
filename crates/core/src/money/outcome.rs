//! How a change becomes an outcome. The store only reports what it found ([`Written`]): it
//! committed a write, or refused it and said what it holds instead. The rules here turn that
//! report into the outcome, or into the next write to try ([`next`]). No adapter concludes an
//! outcome on its own, so the in-memory store and DynamoDB give the same answers by
//! construction, and each rule is stated once.
//!
//! A change takes at most three writes. The change itself, alone: a transaction only where items
//! must move together (a paid invoice with its fulfilment, the order's claim and guard; a
//! deposit with the payer's balance), a plain conditional update otherwise. Then the processed
//! mark, alone. When the store refused the change, the write that records why (a held or
//! duplicate payment, a payment after the invoice closed) goes with the mark in one
//! transaction, or the mark goes alone.
//!
//! The mark is not in the change's transaction: it costs a unit less per write, and a crash
//! between the change and the mark is recognised on the next receive, where the store refuses
//! the change and reports that this very delivery wrote what it holds (`mine`): the mark is
//! then written with the planned outcome.

use crate::money::change::{Applied, Change, OrderRef, Source};
use crate::money::effect::{FulfilmentEffect, PaidInvoice};
use crate::money::invoice::{InvoiceSeen, Refund, RefundMode, Standing};
use crate::money::status::{InvoiceStatus, WithdrawalStatus};
use crate::money::write::{self, Field, Refused, Stored, Value, What, WithdrawalChange};
use crate::port::PortError;

/// The most writes one change takes (see the module docs, plus one when a paid event leaves out
/// what the invoice's record knows of its order, one when Paymos' confirmed order replaces the
/// record's, one when Paymos' project clears an event's mark of another project, and two when
/// a change teaches the record the order it leaves out: the lesson, then the change again); a
/// store that keeps refusing beyond that is broken, not busy.
pub const MAX_WRITES: usize = 8;

/// What to write, atomically with the delivery's processed mark (`outcome`, `reason`)
/// when `with_mark`, else alone (the mark follows in the next write).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The writes.
    pub write: Writes,
    /// Whether the delivery's processed mark is written in the same transaction.
    pub with_mark: bool,
    /// The outcome recorded on the delivery if the store commits.
    pub outcome: Applied,
    /// Why, for outcomes an operator reads (`unusable`, `unconfirmed`, `other_environment`).
    pub reason: Option<String>,
}

/// The writes of a [`Plan`], for the change it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Writes {
    /// The change as decided: the resource's conditional transition and, for a paid invoice,
    /// the fulfilment's items, the order's once-only claim and the registered order's guard.
    Change,
    /// A paid invoice that must not fulfil: its status moves as the change says, with `mark`,
    /// and nothing else is written.
    Unfulfilled(Mark),
    /// A payment after the invoice closed `closed`: `paid_late_at` set once, the status kept.
    PaidLate {
        /// The final status the invoice holds (the write's condition).
        closed: InvoiceStatus,
        /// Undated, with a full refund on record: marked [`Mark::AfterRefund`] for a person.
        after_refund: bool,
        /// It names another project than the invoice's record: marked
        /// [`Mark::ProjectsDisagree`], released only naming the project.
        projects_disagree: bool,
    },
    /// A withdrawal's change whose full refund completed before a full refund recorded
    /// already: noted, the later refund's time kept.
    RefundBeforeLater,
    /// Paymos' confirmed order and price replace what the invoice's record holds (`recorded`,
    /// as read): a delivery nothing confirmed set it. The change is planned again after it.
    PaymosOrder {
        /// The record's order as it was read (the write's condition).
        recorded: OrderRef,
        /// The record held the payment only because its events named two projects
        /// ([`Refusal::Resource`]'s `projects_held`): Paymos' project answers the hold, so the
        /// payment is taken off the record ([`write::paymos_order`]'s reopening) and judged
        /// anew under Paymos' order when the change is planned again.
        reopen: bool,
    },
    /// Paymos confirmed the change for a project this stack applies: the record's mark of
    /// another project (`marked`, set on an event's word) goes. The change is planned again.
    /// With `disagree`, a delivery naming a project this stack applies took it off: the record
    /// is marked [`Mark::ProjectsDisagree`] instead.
    PaymosProject {
        /// The project the record is marked with (the write's condition).
        marked: String,
        /// The record's deliveries named two projects.
        disagree: bool,
    },
    /// What the invoice's record leaves out of its order (its id, its price), set once from a
    /// change its status refused (a late event, a late payment, a person's word): the order
    /// is known before anything ships under it. The change is planned again after it.
    Learn,
    /// The processed mark, and the delivery's time of the payment on an invoice whose record
    /// holds it undated (a person's word): a full refund is then judged by that time.
    Dated,
    /// A payment made after every full refund of the invoice, where one of them returned the
    /// payment the record holds: the record is reopened at this payment's time, in one
    /// transaction with the check that nothing shipped ([`write::nothing_shipped`]). `Some`:
    /// the record's payment was a person's undated word ([`write::paymos_payment_time`]),
    /// judged again with the order it named ([`Step::Judge`]); `None`: the record's payment was
    /// dated before the refund ([`write::paid_anew`]), and this change is the new payment.
    Reopen {
        /// The order the record's undated payment named.
        recorded: Option<OrderRef>,
    },
    /// A payment made after the full refund of an invoice that shipped its order: the order
    /// never ships twice, so it waits for a refund as a duplicate of the invoice itself
    /// ([`write::paid_again`]).
    PaidAgain,
    /// A late event naming another project than the invoice's record: the record marked
    /// [`Mark::ProjectsDisagree`] ([`write::projects_disagree`]), its status kept.
    Disagree,
    /// A person's word naming the project of the invoice's record (`recorded`, as read)
    /// settles its events' disagreement ([`write::projects_settled`]). The change is planned
    /// again after it.
    Settle {
        /// The record's order as it was read (the write's condition).
        recorded: OrderRef,
        /// The record holds a payment held only for the disagreement: it is taken off the
        /// record, and the person's word judged as the payment.
        reopen: bool,
    },
    /// The processed mark only.
    MarkOnly,
    /// The processed mark and a review note (`review#<event_id>`) for the resource, if named.
    Review,
}

pub use crate::money::write::Mark;

/// What a store's answer to a [`Plan`]'s writes means ([`read`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Written {
    /// Everything was written, the processed mark included.
    Committed,
    /// The delivery was marked processed before: nothing was written.
    AlreadyProcessed,
    /// A condition failed: nothing was written.
    Refused(Refusal),
}

/// The condition that failed, with what the store holds instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The resource's status does not take the change.
    Resource {
        /// What the resource holds.
        found: Found,
        /// Whether the resource already holds this very source's change (a delivery that was
        /// applied, then crashed before its mark).
        mine: bool,
        /// Where the invoice's payment stands ([`Standing::Clear`] for other resources).
        standing: Standing,
        /// The order the invoice's record holds (none for other resources).
        recorded: OrderRef,
        /// The invoice's record holds a payment no road dated (a person's word), and no full
        /// refund was on record before it (it does not wait [`Mark::AfterRefund`]).
        undated: bool,
        /// The invoice's record holds a payment `held` because its events named two projects
        /// ([`Mark::ProjectsDisagree`]), neither released nor paid late: which shop's payment
        /// it is was the hold's question, and Paymos' word answers it.
        projects_held: bool,
        /// When the late payment the invoice's record holds was made, where it holds one
        /// dated: the same payment said again is that one.
        late_at: Option<u64>,
    },
    /// The invoice was refunded in full (a `full` refund is on its record): its payment never
    /// ships.
    Refunded {
        /// The order as the invoice's record holds it.
        recorded: OrderRef,
        /// The record's payment waited for its order, undated, before any full refund: a full
        /// refund recorded since settles it.
        awaited: bool,
    },
    /// A refund of unknown mode (it may have been `full`) completed when or after the payment
    /// was made ([`write::refund_of_unknown_mode`]): the payment waits for a person.
    RefundOfUnknownMode {
        /// The refund (`wdr_…`).
        by: String,
        /// The order as the invoice's record holds it.
        recorded: OrderRef,
    },
    /// The paid change carries no order, or carries an order or price other than the invoice's
    /// record (which may know no order either): the record is the truth.
    OrderOnRecord {
        /// The order as the invoice's record holds it.
        recorded: OrderRef,
    },
    /// The order was claimed by another invoice's fulfilment.
    OrderClaimed {
        /// The invoice that fulfilled it.
        invoice_id: String,
    },
    /// The registered order's amount or currency differs.
    OrderMismatch,
    /// The fulfilment (an effect's item) exists already: shipped at `at` (Unix seconds), where
    /// its record says.
    Fulfilled {
        /// When it shipped.
        at: Option<u64>,
        /// Whether a person's road shipped it (`won_by` is `manual:…`), not a delivery.
        by_person: bool,
    },
    /// The invoice is another project's (as a delivery marked it, and no delivery of this
    /// stack's projects named one before).
    OtherProject(String),
    /// The invoice's payment waits for its order: the status goes with that mark kept.
    AwaitsOrder,
    /// A payment made after every full refund of the invoice, where one of them returned the
    /// record's ([`Writes::Reopen`]).
    ReturnedEarlier {
        /// The order the record's payment named, where that payment was a person's undated
        /// word.
        recorded: Option<OrderRef>,
    },
    /// A full refund that completed later is recorded on the invoice already.
    LaterFullRefund,
    /// The invoice's events named two projects ([`write::Mark::ProjectsDisagree`]): no payment
    /// of it ships on an event's word.
    ProjectsDisagree {
        /// The order as the invoice's record holds it.
        recorded: OrderRef,
    },
    /// The review note exists already (the delivery was handled before).
    Noted,
    /// The deposit was credited otherwise than this final confirmation says (why, with both
    /// values: [`write::credit_differs`]).
    CreditDiffers(String),
}

/// A resource as the store found it when it refused a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// No status to read (absent, or a note without a status).
    Nothing,
    /// An invoice at this status.
    Invoice(InvoiceStatus),
    /// A withdrawal at this status.
    Withdrawal(WithdrawalStatus),
    /// A deposit, credited or not.
    Deposit {
        /// Credited once already.
        credited: bool,
    },
}

/// After a write: the outcome, or the next plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// The delivery's outcome.
    Done(Applied),
    /// Write this next.
    Then(Plan),
    /// Take what the change leaves out from the invoice's record, and plan again.
    Adopt(OrderRef),
    /// Judge the payment the invoice's record held: the change with that order (all of it,
    /// the price too, or none), planned again.
    Judge(OrderRef),
}

/// The first plan for a change.
#[must_use]
pub fn plan(change: &Change) -> Plan {
    let (write, outcome) = match change {
        Change::Invoice { status, .. } if status.fulfils() => (Writes::Change, Applied::Fulfilled),
        Change::Invoice { .. } | Change::Withdrawal { .. } => (Writes::Change, Applied::Updated),
        Change::Deposit {
            credit: Some(_), ..
        } => (Writes::Change, Applied::Credited),
        Change::Deposit { credit: None, .. } => (Writes::Change, Applied::Updated),
        Change::Ignore { .. } => (Writes::MarkOnly, Applied::Ignored),
        Change::Unconfirmed { .. } => (Writes::Review, Applied::Unconfirmed),
        Change::Unusable { .. } => (Writes::Review, Applied::Unusable),
        Change::ProjectUnknown { .. } => (Writes::Review, Applied::ProjectUnknown),
        Change::OtherEnvironment { .. } => (Writes::MarkOnly, Applied::OtherEnvironment),
        Change::OtherProject { .. } => (Writes::MarkOnly, Applied::OtherProject),
    };
    let reason = match change {
        Change::Ignore { .. } => None,
        other => other.reason(),
    };
    Plan {
        with_mark: write != Writes::Change,
        write,
        outcome,
        reason,
    }
}

/// An invoice's status change as `plan` writes it: a payment that fulfils (with the effect's
/// items), else the transition with the plan's mark.
fn invoice_change(
    source: &Source,
    change: &Change,
    plan: &Plan,
    effect: &dyn FulfilmentEffect,
    now_ms: u64,
) -> Vec<write::Write> {
    let Change::Invoice {
        invoice_id,
        status,
        occurred_at,
        paid_at,
        order,
    } = change
    else {
        return Vec::new();
    };
    match &plan.write {
        Writes::Change if status.fulfils() => {
            let paid = PaidInvoice {
                invoice_id,
                status: *status,
                order,
                source,
                at_ms: now_ms,
            };
            write::payment(&paid, (*occurred_at, *paid_at), effect.writes(&paid))
        }
        write => {
            let mut transition = write::invoice_transition(
                invoice_id,
                (*status, *occurred_at, *paid_at),
                order,
                match write {
                    Writes::Unfulfilled(mark) => Some(mark),
                    _ => None,
                },
                source,
                now_ms,
            );
            // A hold keeps why, where the rule said (another order or project than the
            // record's), for the person who lists it.
            if let (
                Writes::Unfulfilled(Mark::Held | Mark::ProjectsDisagree | Mark::OrderDisputed(_)),
                Some(why),
            ) = (write, &plan.reason)
            {
                transition
                    .set
                    .push(write::Set::Put(Field::Why, Value::text(why)));
            }
            vec![transition]
        }
    }
}

/// The writes of `plan` for `change` by `source` at `now_ms`, in the order their refusals
/// win: the processed mark first (when the plan carries it), then the change's own.
#[must_use]
pub fn writes(
    source: &Source,
    change: &Change,
    plan: &Plan,
    effect: &dyn FulfilmentEffect,
    now_ms: u64,
) -> Vec<write::Write> {
    let mut out = Vec::new();
    if let (true, Source::Delivery { event_id }) = (plan.with_mark, source) {
        out.push(write::processed(
            event_id,
            plan.outcome,
            plan.reason.as_deref(),
            now_ms,
        ));
    }
    match (&plan.write, change) {
        (Writes::Review | Writes::MarkOnly, _) => out.extend(noted(source, change, plan, now_ms)),
        (Writes::Change | Writes::Unfulfilled(_), Change::Invoice { .. }) => {
            out.extend(invoice_change(source, change, plan, effect, now_ms));
        }
        (
            Writes::PaidLate {
                closed,
                after_refund,
                projects_disagree,
            },
            Change::Invoice {
                invoice_id,
                occurred_at,
                paid_at,
                ..
            },
        ) => out.push(write::paid_late(
            invoice_id,
            *closed,
            (*occurred_at, *paid_at),
            (*after_refund, *projects_disagree),
            now_ms,
        )),
        (
            Writes::Dated,
            Change::Invoice {
                invoice_id,
                paid_at: Some(at),
                ..
            },
        ) => out.push(write::payment_time(invoice_id, *at)),
        (
            Writes::Reopen { .. } | Writes::PaidAgain,
            Change::Invoice {
                invoice_id,
                paid_at: Some(at),
                ..
            },
        ) => out.extend(paid_after_refund(&plan.write, invoice_id, *at, now_ms)),
        (Writes::Change, Change::Withdrawal { .. }) => {
            out.extend(withdrawal(change, source, false, now_ms));
        }
        (Writes::RefundBeforeLater, Change::Withdrawal { .. }) => {
            out.extend(withdrawal(change, source, true, now_ms));
        }
        (
            Writes::PaymosOrder { recorded, reopen },
            Change::Invoice {
                invoice_id, order, ..
            },
        ) => {
            out.push(write::paymos_order(
                invoice_id,
                order,
                (recorded, *reopen),
                now_ms,
            ));
            if *reopen {
                out.push(write::nothing_shipped(invoice_id));
            }
        }
        (
            Writes::PaymosProject { .. } | Writes::Disagree | Writes::Settle { .. },
            Change::Invoice { invoice_id, .. },
        ) => out.extend(projects(&plan.write, invoice_id, now_ms)),
        (
            Writes::Learn,
            Change::Invoice {
                invoice_id, order, ..
            },
        ) => out.push(write::learned_order(invoice_id, order, now_ms)),
        (
            Writes::Change,
            Change::Deposit {
                deposit_id,
                status,
                occurred_at,
                credit,
            },
        ) => out.extend(write::deposit(
            deposit_id,
            (*status, *occurred_at),
            credit.as_ref(),
            source,
            now_ms,
        )),
        // The mark alone (also for a plan the rules never make for this change).
        _ => {}
    }
    out
}

/// The writes of a plan that settles which project an invoice is: another project's mark taken
/// off, the events' disagreement marked, or settled by a person.
fn projects(plan: &Writes, invoice_id: &str, now_ms: u64) -> Vec<write::Write> {
    match plan {
        Writes::PaymosProject { marked, disagree } => {
            vec![write::paymos_project(
                invoice_id,
                (marked, *disagree),
                now_ms,
            )]
        }
        Writes::Disagree => vec![write::projects_disagree(invoice_id, now_ms)],
        Writes::Settle { recorded, reopen } => {
            let mut out = vec![write::projects_settled(
                invoice_id,
                (recorded, *reopen),
                now_ms,
            )];
            if *reopen {
                out.push(write::nothing_shipped(invoice_id));
            }
            out
        }
        _ => Vec::new(),
    }
}

/// What a plan that applies nothing notes beside the mark: a waiting payment's review note and
/// its invoice's project (a person's road, with no delivery to list, marks the invoice), and
/// another project's invoice as that project's.
fn noted(source: &Source, change: &Change, plan: &Plan, now_ms: u64) -> Vec<write::Write> {
    match (&plan.write, change) {
        (Writes::Review, Change::Invoice { invoice_id, .. })
            if matches!(source, Source::Manual { .. }) =>
        {
            let after_refund = plan.reason.as_deref() == Some(ORDER_UNKNOWN_AFTER_REFUND);
            let (paid_at, order) = match change {
                Change::Invoice { paid_at, order, .. } => (*paid_at, order.clone()),
                _ => (None, OrderRef::none()),
            };
            vec![write::awaits_order(
                invoice_id,
                (&order, paid_at, after_refund),
                now_ms,
            )]
        }
        // Of a fulfilled invoice: the note alone (its record stays as it shipped).
        (Writes::Review, _) if plan.outcome == Applied::OrderConflict => {
            review(source, change, plan, now_ms).into_iter().collect()
        }
        (Writes::Review, _) => {
            let mut out: Vec<_> = review(source, change, plan, now_ms).into_iter().collect();
            if let Change::Invoice {
                invoice_id,
                order,
                paid_at,
                ..
            } = change
            {
                out.extend(write::payment_awaiting_order(invoice_id, order, *paid_at));
            }
            // A payment whose project is known nowhere: its record learns when it was made.
            if let Change::ProjectUnknown {
                resource_id: Some(invoice_id),
                paid_at,
            } = change
            {
                out.extend(write::payment_awaiting_order(
                    invoice_id,
                    &OrderRef::none(),
                    *paid_at,
                ));
            }
            out
        }
        (
            Writes::MarkOnly,
            Change::OtherProject {
                project,
                invoice_id: Some(invoice_id),
            },
        ) => vec![write::other_project(invoice_id, project)],
        _ => Vec::new(),
    }
}

/// A delivery's review note, for the resource it names.
fn review(source: &Source, change: &Change, plan: &Plan, now_ms: u64) -> Option<write::Write> {
    let Source::Delivery { event_id } = source else {
        return None;
    };
    let resource_id = match change {
        Change::Unconfirmed { resource_id, .. }
        | Change::Unusable { resource_id, .. }
        | Change::ProjectUnknown { resource_id, .. } => resource_id.as_deref(),
        // A payment whose order is known nowhere yet.
        Change::Invoice { invoice_id, .. } => Some(invoice_id.as_str()),
        // A confirmation contradicting the deposit's credit.
        Change::Deposit { deposit_id, .. } => Some(deposit_id.as_str()),
        _ => None,
    };
    let why = plan.reason.as_deref().unwrap_or_default();
    Some(write::review_note(
        event_id,
        plan.outcome,
        resource_id,
        why,
        now_ms,
    ))
}

/// A withdrawal's status and, for a completed refund, its note on the invoice (completed at
/// the event's time, Paymos' clock), in the same transaction.
fn withdrawal(
    change: &Change,
    source: &Source,
    before_later: bool,
    now_ms: u64,
) -> Vec<write::Write> {
    let Change::Withdrawal {
        withdrawal_id,
        status,
        occurred_at,
        kind,
        invoice_id,
        amount,
        currency,
        mode,
        ..
    } = change
    else {
        return Vec::new();
    };
    let w = WithdrawalChange {
        withdrawal_id,
        status: *status,
        at: *occurred_at,
        kind,
        invoice_id: invoice_id.as_ref(),
        amount: amount.as_ref(),
        currency: currency.as_ref(),
    };
    let mut out = vec![write::withdrawal(&w, source, now_ms)];
    if let (true, WithdrawalStatus::Completed, Some(invoice)) =
        (kind == "refund", status, invoice_id)
    {
        let refund = Refund {
            withdrawal_id: withdrawal_id.clone(),
            amount: amount.clone(),
            currency: currency.clone(),
            mode: mode.as_deref().and_then(RefundMode::parse),
            completed_at: Some(*occurred_at),
        };
        out.push(write::refund_note(invoice, &refund, before_later, now_ms));
    }
    out
}

/// The refusal that wins among those a store reports: the first in [`What`]'s order.
///
/// # Errors
/// [`PortError`] when the store refused without naming a write (it breaks the contract).
pub fn winner(stored: Stored) -> Result<Option<Refused>, PortError> {
    match stored {
        Stored::Committed => Ok(None),
        Stored::Refused(refused) => refused
            .into_iter()
            .min_by_key(|r| r.write)
            .map(Some)
            .ok_or_else(|| PortError::new("resource store", "refused without naming a write")),
    }
}

/// What a refused write means, for `source` (whose change, if a payment, is `paying`: its
/// status, its event time, and its payment time by Paymos' clock where known).
#[must_use]
pub fn refusal(
    source: &Source,
    paying: Option<(InvoiceStatus, u64, Option<u64>)>,
    refused: &Refused,
) -> Written {
    let found = &refused.found;
    let item = (!found.is_empty()).then_some(found);
    let mine = write::holds_change_of(found, source);
    let status = found.get(&Field::Status).and_then(Value::as_text);
    let invoice = || {
        let seen = write::invoice_seen(found);
        let dated = paying.and_then(|(st, _, paid_at)| paid_at.filter(|_| st.fulfils()));
        if let Some(at) = dated
            && returned_earlier(found, &seen, at)
        {
            let undated = seen.payment_at.is_none();
            return Refusal::ReturnedEarlier {
                recorded: undated.then_some(seen.order),
            };
        }
        // A closed invoice whose payment waited for its order, undated, before the full refund
        // recorded since: that refund returned it, whoever says it was paid again undated.
        let undated = paying.is_some_and(|(st, _, paid_at)| st.fulfils() && paid_at.is_none());
        if undated
            && seen.awaits_order
            && !seen.after_refund
            && seen.status.is_some_and(InvoiceStatus::is_final)
            && seen.standing() == Standing::Refunded
        {
            return Refusal::Refunded {
                recorded: seen.order,
                awaited: true,
            };
        }
        Refusal::Resource {
            found: seen.status.map_or(Found::Nothing, Found::Invoice),
            mine,
            standing: seen.standing(),
            undated: (seen.paid_late || seen.status.is_some_and(InvoiceStatus::fulfils))
                && seen.payment_at.is_none()
                && !seen.after_refund,
            projects_held: seen.held
                && seen.projects_disagree
                && !seen.released
                && !seen.paid_late
                && seen.status.is_some_and(InvoiceStatus::fulfils),
            late_at: seen.payment_at.filter(|_| seen.paid_late),
            recorded: seen.order,
        }
    };
    if let Some(refusal) = of_projects(refused, paying) {
        return Written::Refused(refusal);
    }
    if refused.write == What::Transition
        && found.get(&Field::AwaitsOrder) == Some(&Value::Bool(true))
        && paying.is_some_and(|(st, at, _)| write::transition(st, at).holds(item))
    {
        return Written::Refused(Refusal::AwaitsOrder);
    }
    Written::Refused(match refused.write {
        // A straggler's listing is in no plan (a check writes it alone).
        What::Processed | What::Straggler => return Written::AlreadyProcessed,
        // The status took the payment: the refund or the order's condition failed.
        What::Payment
            if paying.is_some_and(|(st, at, _)| write::transition(st, at).holds(item)) =>
        {
            payment_refused(found, paying.and_then(|(_, _, paid_at)| paid_at))
        }
        What::Payment | What::Transition | What::PaidLate | What::Release => invoice(),
        What::Withdrawal => Refusal::Resource {
            found: status
                .and_then(WithdrawalStatus::parse)
                .map_or(Found::Nothing, Found::Withdrawal),
            mine,
            standing: Standing::Clear,
            recorded: OrderRef::none(),
            undated: false,
            projects_held: false,
            late_at: None,
        },
        What::Deposit => Refusal::Resource {
            found: Found::Deposit {
                credited: found.contains_key(&Field::Credited),
            },
            mine,
            standing: Standing::Clear,
            recorded: OrderRef::none(),
            undated: false,
            projects_held: false,
            late_at: None,
        },
        What::Fulfilment | What::Effect => shipped(found),
        What::OrderClaim => Refusal::OrderClaimed {
            invoice_id: found
                .get(&Field::InvoiceId)
                .and_then(Value::as_text)
                .unwrap_or("another invoice")
                .to_owned(),
        },
        What::AmountGuard => Refusal::OrderMismatch,
        What::RefundNote => Refusal::LaterFullRefund,
        What::Balance | What::Review | What::OperatorAction | What::Reconciled => Refusal::Noted,
    })
}

/// A payment made at `paid_at` whose status the record took, refused by the rest of its guard
/// ([`write::payment`]): a full refund returned it, a refund of unknown mode may have, or the
/// record's order or price decides.
fn payment_refused(found: &write::Fields, paid_at: Option<u64>) -> Refusal {
    let recorded = write::order_of(found);
    if write::refunded_in_full(paid_at).holds(Some(found)) {
        Refusal::Refunded {
            recorded,
            awaited: found.get(&Field::AwaitsOrder) == Some(&Value::Bool(true))
                && found.get(&Field::AfterRefund).is_none(),
        }
    } else if write::refund_of_unknown_mode(paid_at).holds(Some(found)) {
        Refusal::RefundOfUnknownMode {
            by: found
                .get(&Field::RefundOfUnknownModeBy)
                .and_then(Value::as_text)
                .unwrap_or_default()
                .to_owned(),
            recorded,
        }
    } else {
        Refusal::OrderOnRecord { recorded }
    }
}

/// A change refused for the invoice's project: another project's invoice
/// ([`Refusal::OtherProject`]), or a payment its status took whose invoice's events named two
/// projects ([`Refusal::ProjectsDisagree`]).
fn of_projects(
    refused: &Refused,
    paying: Option<(InvoiceStatus, u64, Option<u64>)>,
) -> Option<Refusal> {
    let found = &refused.found;
    let named = found.contains_key(&Field::ProjectId) || found.contains_key(&Field::HomeProject);
    if let (What::Payment | What::Transition | What::PaidLate | What::Release, Some(p), false) = (
        refused.write,
        found.get(&Field::OtherProject).and_then(Value::as_text),
        named,
    ) {
        return Some(Refusal::OtherProject(p.to_owned()));
    }
    // Marked, so a record: its status took the payment, or a copy of what it holds came.
    (refused.write == What::Payment
        && found.get(&Field::ProjectsDisagree) == Some(&Value::Bool(true))
        && paying.is_some_and(|(st, at, _)| write::transition(st, at).holds(Some(found))))
    .then(|| Refusal::ProjectsDisagree {
        recorded: write::order_of(found),
    })
}

/// The writes of a payment at `at` made after the full refund that returned the record's.
fn paid_after_refund(write: &Writes, invoice_id: &str, at: u64, now_ms: u64) -> Vec<write::Write> {
    match write {
        Writes::Reopen { recorded } => vec![
            match recorded {
                Some(_) => write::paymos_payment_time(invoice_id, at, true),
                None => write::paid_anew(invoice_id, at),
            },
            write::nothing_shipped(invoice_id),
        ],
        _ => vec![write::paid_again(invoice_id, at, now_ms)],
    }
}

/// Whether a full refund returned the payment the record holds (a person's undated word, by no
/// time, or one dated before it), never late, judged or released, and a payment at `at` comes
/// after every full refund: the refund returned an earlier payment, and this one is new.
fn returned_earlier(found: &write::Fields, seen: &InvoiceSeen, at: u64) -> bool {
    seen.status.is_some_and(InvoiceStatus::fulfils)
        && found.contains_key(&Field::RefundedInFullBy)
        && seen.refunded_in_full()
        && !seen.released
        && !seen.paid_late
        && !seen.after_refund
        && !seen.held
        && seen.duplicate_of.is_none()
        && !seen.refunded_in_full_at(Some(at))
}

/// A fulfilment that exists: when it shipped, and whether a person's road shipped it.
fn shipped(found: &write::Fields) -> Refusal {
    Refusal::Fulfilled {
        at: shipped_at(found),
        by_person: found
            .get(&Field::WonBy)
            .and_then(Value::as_text)
            .is_some_and(|by| by.starts_with("manual:")),
    }
}

/// When a fulfilment's record says it shipped (Unix seconds).
fn shipped_at(found: &write::Fields) -> Option<u64> {
    found
        .get(&Field::FulfilledAt)
        .and_then(Value::as_int)
        .map(|ms| ms / 1000)
}

/// What a store's answer to `change`'s writes by `source` means.
///
/// # Errors
/// As [`winner`].
pub fn read(source: &Source, change: &Change, stored: Stored) -> Result<Written, PortError> {
    let paying = match change {
        Change::Invoice {
            status,
            occurred_at,
            paid_at,
            ..
        } => Some((*status, *occurred_at, *paid_at)),
        _ => None,
    };
    let Some(refused) = winner(stored)? else {
        return Ok(Written::Committed);
    };
    if let (
        Change::Deposit {
            credit: Some(credit),
            ..
        },
        What::Deposit,
    ) = (change, refused.write)
        && let Some(why) = write::credit_differs(&refused.found, credit)
    {
        return Ok(Written::Refused(Refusal::CreditDiffers(why)));
    }
    Ok(refusal(source, paying, &refused))
}

/// Why a payment no road dates waits after a full refund ([`Mark::AfterRefund`]).
/// Why a payment after the full refund of a shipped invoice waits ([`Writes::PaidAgain`]).
pub const PAID_AGAIN: &str = "paid again after a full refund of this invoice, whose order shipped before: the order never ships twice, refund this payment";

pub const AFTER_REFUND: &str = "paid after a full refund? No road knows when this payment was made, and a full refund is on record: release it if the customer paid again; if that refund returned it, resolve it (nothing ships)";

/// Why a payment no road dates, of an order known nowhere, waits while a full refund is on
/// record: its order first, then a person says whether it was paid again.
pub const ORDER_UNKNOWN_AFTER_REFUND: &str = "the payment names no order and none is known here yet, and a full refund is on record: nothing shipped";

/// A payment no road dates, refused for a full refund on record: it waits for a person.
fn after_refund() -> Step {
    Step::Then(Plan {
        write: Writes::Unfulfilled(Mark::AfterRefund),
        with_mark: true,
        outcome: Applied::Held,
        reason: Some(AFTER_REFUND.into()),
    })
}

/// The processed mark alone, with `outcome`.
fn mark_only(outcome: Applied, reason: Option<String>) -> Step {
    Step::Then(Plan {
        write: Writes::MarkOnly,
        with_mark: true,
        outcome,
        reason,
    })
}

/// The late payment on record, said again (a person's word the road dated by it, or a copy
/// under another event id), which a full refund returned: nothing waits.
fn late_returned(change: &Change, tried: &Plan, refusal: &Refusal) -> Option<Step> {
    let (
        Writes::Change,
        Refusal::Resource {
            found: Found::Invoice(current),
            standing: Standing::Refunded,
            late_at: Some(late),
            ..
        },
        Change::Invoice {
            status,
            paid_at: Some(at),
            ..
        },
    ) = (&tried.write, refusal, change)
    else {
        return None;
    };
    (current.is_final() && !current.fulfils() && status.fulfils() && at == late)
        .then(|| mark_only(Applied::Refunded, None))
}

/// What a refused manual road reports: what exists, never its own earlier write.
fn standing_outcome(standing: &Standing) -> Applied {
    match standing {
        Standing::Held => Applied::Held,
        Standing::DuplicateOf(_) => Applied::DuplicatePayment,
        Standing::PaidLate => Applied::PaidLate,
        Standing::OrderUnknown => Applied::OrderUnknown,
        Standing::AfterRefund => Applied::Held,
        Standing::ShippedOtherwise(_) => Applied::OrderConflict,
        // Paid back in full: the person hears it (nothing ships, nothing waits), as they do
        // where their word finds the refund first.
        Standing::Refunded => Applied::Refunded,
        Standing::Clear | Standing::Released => Applied::AlreadyFinal,
    }
}

/// A paid change the invoice's record refused for its order or price: the record is the truth
/// (adopted), an order other than the record's is held, and an order known nowhere waits.
fn on_record(change: &Change, recorded: OrderRef) -> Step {
    match change {
        Change::Invoice { order, .. } if other_project(order, &recorded) => {
            // The payment names another project than the invoice's record: its events
            // disagree, or a person named another project. Neither project's order ships on
            // that word.
            Step::Then(Plan {
                write: Writes::Unfulfilled(Mark::ProjectsDisagree),
                with_mark: true,
                outcome: Applied::Held,
                reason: Some(format!(
                    "the payment names {}, the invoice's record {}: nothing shipped",
                    project_name(order),
                    project_name(&recorded)
                )),
            })
        }
        Change::Invoice { order, .. }
            if order.external_id.is_some()
                && recorded.external_id.is_some()
                && order.external_id != recorded.external_id =>
        {
            // The event names another order than the invoice's record: never fulfilled
            // on either word (a person names the order it paid).
            Step::Then(Plan {
                write: Writes::Unfulfilled(Mark::OrderDisputed(
                    order.external_id.clone().unwrap_or_default(),
                )),
                with_mark: true,
                outcome: Applied::Held,
                reason: Some(format!(
                    "the payment names order {}, the invoice's record order {}",
                    order.external_id.as_deref().unwrap_or_default(),
                    recorded.external_id.as_deref().unwrap_or_default()
                )),
            })
        }
        // Known nowhere: learned before anything ships, never fulfilled as "no order".
        Change::Invoice {
            invoice_id, order, ..
        } if order.external_id.is_none() && recorded.external_id.is_none() => Step::Then(Plan {
            write: Writes::Review,
            with_mark: true,
            outcome: Applied::OrderUnknown,
            reason: Some(format!(
                "the payment of {invoice_id} names no order and none is known here yet: nothing shipped"
            )),
        }),
        _ => Step::Adopt(recorded),
    }
}

/// What `written` means for `change`, written by `source`, after trying `tried`: the rules of
/// every outcome that is not the plan's own.
#[must_use]
pub fn next(source: &Source, change: &Change, tried: &Plan, written: Written) -> Step {
    next_as(source, change, tried, written, false)
}

/// Whether the record says something else than Paymos confirmed: another order id, another
/// price, or another project (what the record leaves out is not said, and is set once as ever).
/// Where nothing shipped under it, Paymos' order then replaces the record's.
#[must_use]
/// Whether `order` and `recorded` each name a project (the home project's too), and not the
/// same one: one invoice's words of two projects.
fn other_project(order: &OrderRef, recorded: &OrderRef) -> bool {
    order.names_project()
        && recorded.names_project()
        && (order.project != recorded.project || order.home != recorded.home)
}

/// Why a payment of an invoice that shipped `recorded` cannot be that payment, if it names
/// another order or another project than what shipped (each only where both name one).
fn conflicts(order: &OrderRef, recorded: &OrderRef) -> Option<String> {
    let project = |o: &OrderRef| {
        if o.home {
            "the home project".to_owned()
        } else {
            format!("project {}", o.project.as_deref().unwrap_or_default())
        }
    };
    if let (Some(paid), Some(shipped)) = (&order.external_id, &recorded.external_id)
        && paid != shipped
    {
        return Some(format!(
            "it pays order {paid}, but this invoice shipped order {shipped} (an invoice pays one order): nothing more shipped"
        ));
    }
    other_project(order, recorded).then(|| {
        format!(
            "it names {}, but this invoice shipped under {} (an invoice is one project's): nothing more shipped",
            project(order),
            project(recorded)
        )
    })
}

pub fn differs(confirmed: &OrderRef, recorded: &OrderRef) -> bool {
    let other_project = other_project(confirmed, recorded);
    let same_price = matches!(
        (&confirmed.amount, &recorded.amount),
        (Some(a), Some(b)) if a.same_value(b)
    ) && confirmed.currency == recorded.currency;
    let other_order = matches!(
        (&confirmed.external_id, &recorded.external_id),
        (Some(a), Some(b)) if a != b
    );
    other_project || other_order || (confirmed.has_price() && recorded.has_price() && !same_price)
}

/// The writes a refusal asks for again, the change otherwise unchanged: a refund note that keeps
/// a later full refund's time; a status that keeps its invoice listed while its payment waits
/// for its order; and the mark alone for another project's invoice.
fn again(tried: &Plan, refusal: &Refusal) -> Option<Step> {
    let plan = |write, with_mark, outcome, reason| {
        Some(Step::Then(Plan {
            write,
            with_mark,
            outcome,
            reason,
        }))
    };
    match (&tried.write, refusal) {
        (Writes::Change, Refusal::LaterFullRefund) => {
            plan(Writes::RefundBeforeLater, false, tried.outcome, None)
        }
        (Writes::Change, Refusal::AwaitsOrder) => plan(
            Writes::Unfulfilled(Mark::AwaitsOrder),
            true,
            tried.outcome,
            tried.reason.clone(),
        ),
        // Only a payment, a status, a late payment or a release is refused for another
        // project's invoice (`written`), so the mark alone planned here is never refused so.
        (_, Refusal::OtherProject(marked)) => Some(other_project_mark(Some(marked.as_str()))),
        _ => None,
    }
}

/// The mark alone, as another project's delivery (`project`, when known).
fn other_project_mark(project: Option<&str>) -> Step {
    mark_only(
        Applied::OtherProject,
        Change::OtherProject {
            project: project.unwrap_or("another project").to_owned(),
            invoice_id: None,
        }
        .reason(),
    )
}

/// An invoice whose events named two projects ([`Mark::ProjectsDisagree`]). A status that pays
/// nothing, naming another project than the record's, moves the status alone (it teaches no
/// order: an order id is its project's) and marks the record; a payment of a marked record
/// ships nothing on an event's word: it is held for a person naming the project (`release
/// --project`), unless Paymos confirmed it, whose order (and project) then settle the record.
fn disagreeing(
    change: &Change,
    tried: &Plan,
    refusal: &Refusal,
    (confirmed, person): (bool, bool),
) -> Option<Step> {
    let Change::Invoice { status, order, .. } = change else {
        return None;
    };
    let plan = |write, outcome, reason: String| {
        Some(Step::Then(Plan {
            write,
            with_mark: true,
            outcome,
            reason: Some(reason),
        }))
    };
    match (&tried.write, refusal) {
        (Writes::Change, Refusal::Resource { recorded, .. })
            if !status.fulfils() && other_project(order, recorded) =>
        {
            plan(
                Writes::Unfulfilled(Mark::ProjectsDisagree),
                tried.outcome,
                format!(
                    "it names {}, the invoice's record {}: its status alone, and no payment of it ships on an event's word",
                    project_name(order),
                    project_name(recorded)
                ),
            )
        }
        // A late event: the status stays, the disagreement is noted all the same.
        (Writes::Unfulfilled(Mark::ProjectsDisagree), Refusal::Resource { recorded, .. })
            if !status.fulfils() && other_project(order, recorded) =>
        {
            plan(
                Writes::Disagree,
                Applied::Stale,
                format!(
                    "a late event naming {}, the invoice's record {}: no payment of it ships on an event's word",
                    project_name(order),
                    project_name(recorded)
                ),
            )
        }
        // A payment naming another project, returned by a full refund on record: nothing of it
        // is recorded, the disagreement is noted all the same.
        (Writes::Unfulfilled(Mark::Refunded), Refusal::Resource { recorded, .. })
            if !confirmed && other_project(order, recorded) =>
        {
            plan(
                Writes::Disagree,
                Applied::Refunded,
                format!(
                    "a payment naming {}, the invoice's record {}, refunded in full before it: no payment of it ships on an event's word",
                    project_name(order),
                    project_name(recorded)
                ),
            )
        }
        (Writes::Change, Refusal::ProjectsDisagree { recorded }) if confirmed => {
            Some(Step::Then(Plan {
                write: Writes::PaymosOrder {
                    recorded: recorded.clone(),
                    reopen: false,
                },
                with_mark: false,
                outcome: tried.outcome,
                reason: None,
            }))
        }
        // A person naming the record's project (another is refused before: exit 2), of a
        // record marked so, or holding a payment held only for it.
        (
            Writes::Change,
            Refusal::ProjectsDisagree { recorded }
            | Refusal::Resource {
                standing: Standing::Held,
                projects_held: true,
                recorded,
                ..
            },
        ) if person && order.names_project() && !other_project(order, recorded) => {
            Some(Step::Then(Plan {
                write: Writes::Settle {
                    recorded: recorded.clone(),
                    reopen: matches!(refusal, Refusal::Resource { .. }),
                },
                with_mark: false,
                outcome: tried.outcome,
                reason: None,
            }))
        }
        (Writes::Change, Refusal::ProjectsDisagree { .. }) => plan(
            Writes::Unfulfilled(Mark::ProjectsDisagree),
            Applied::Held,
            "the invoice's events named two projects: which shop's payment it is, only Paymos or a person can say; nothing shipped".to_owned(),
        ),
        _ => None,
    }
}

/// How a reason names `order`'s project.
fn project_name(order: &OrderRef) -> String {
    order
        .project
        .as_ref()
        .map_or("the home project".to_owned(), |p| format!("project {p}"))
}

/// A change of an invoice an event marked another project's (`marked`), where Paymos or a
/// person says otherwise. Paymos' confirmed project, or a person's `--project` (checked at
/// Paymos), beats a mark an event set (a forged open event, a stack that turned the check on
/// later): the mark goes, and the change is tried again. A delivery's payment naming a project
/// this stack applies, with neither, means the invoice's events disagree: it waits for a
/// person as `project_unknown` (acknowledged money is never left unnamed). A delivery's status
/// that pays nothing, naming a project this stack applies, takes the mark off and marks the
/// disagreement ([`Mark::ProjectsDisagree`]): its status applies, and no payment of it ships
/// on an event's word. Any other change is the marked project's.
fn against_a_mark(
    source: &Source,
    change: &Change,
    marked: &str,
    confirmed: bool,
    outcome: Applied,
) -> Option<Step> {
    let Change::Invoice { status, order, .. } = change else {
        return None;
    };
    let person = matches!(source, Source::Manual { .. });
    let named = status.fulfils() && order.names_project();
    if confirmed || (named && person) {
        return Some(Step::Then(Plan {
            write: Writes::PaymosProject {
                marked: marked.to_owned(),
                disagree: false,
            },
            with_mark: false,
            outcome,
            reason: None,
        }));
    }
    if !person && !status.fulfils() && order.names_project() {
        return Some(Step::Then(Plan {
            write: Writes::PaymosProject {
                marked: marked.to_owned(),
                disagree: true,
            },
            with_mark: false,
            outcome,
            reason: None,
        }));
    }
    named.then(|| {
        let ours = order
            .project
            .as_ref()
            .map_or("this stack's home project".to_owned(), |p| format!("project {p}"));
        mark_only(
            Applied::ProjectUnknown,
            Some(format!(
                "an earlier event marked its invoice project {marked}'s, and this payment names {ours}: the invoice's events disagree, and only Paymos or a person can say whose it is; nothing applied"
            )),
        )
    })
}

/// After Paymos' order replaced the record's: the change again, planned anew.
fn corrected(change: &Change, recorded: &OrderRef, written: &Written) -> Step {
    match written {
        Written::Committed => Step::Adopt(OrderRef::none()),
        Written::AlreadyProcessed => Step::Done(Applied::AlreadyProcessed),
        // The record moved since it was read: as if never corrected.
        Written::Refused(_) => on_record(change, recorded.clone()),
    }
}

/// After a payment a person's word left undated took a road's time: reopened, that payment is
/// judged again (where it shipped, or the record moved since it was read, the road dates it as
/// any); dated on a person's road, where it stands now is what they hear.
fn dated(source: &Source, change: &Change, tried: &Plan, written: &Written) -> Option<Step> {
    let paid_at = match change {
        Change::Invoice { paid_at, .. } => *paid_at,
        _ => None,
    };
    match (&tried.write, written, source) {
        (Writes::Reopen { recorded }, Written::Committed, _) => Some(match recorded {
            Some(recorded) => Step::Judge(recorded.clone()),
            None => Step::Adopt(OrderRef::none()),
        }),
        (Writes::Reopen { .. } | Writes::PaidAgain, Written::AlreadyProcessed, _) => {
            Some(Step::Done(Applied::AlreadyProcessed))
        }
        // Shipped from a payment the refund returned (a dated one, a delivery's Paymos gave no
        // time, or a person's word made before this payment was): the order never ships
        // twice; the new payment waits for a refund. (A person's undated word that shipped
        // after it was made is this payment, dated by it.)
        (
            Writes::Reopen { recorded },
            Written::Refused(Refusal::Fulfilled { at, by_person }),
            _,
        ) if recorded.is_none()
            || !by_person
            || paid_at.zip(*at).is_some_and(|(p, shipped)| p > shipped) =>
        {
            Some(Step::Then(Plan {
                write: Writes::PaidAgain,
                with_mark: true,
                outcome: Applied::DuplicatePayment,
                reason: Some(PAID_AGAIN.into()),
            }))
        }
        // The record moved since it was read: dated, as any delivery dates (or noted only).
        (Writes::Reopen { recorded }, Written::Refused(_), _) => Some(Step::Then(Plan {
            write: if recorded.is_some() {
                Writes::Dated
            } else {
                Writes::MarkOnly
            },
            with_mark: true,
            outcome: Applied::AlreadyFinal,
            reason: None,
        })),
        (Writes::Dated, Written::Committed, Source::Manual { .. }) => {
            Some(Step::Adopt(OrderRef::none()))
        }
        _ => None,
    }
}

/// For a change whose order Paymos `confirmed`: Paymos' order replaces a record's that says
/// something else, where the record refused the change for it (an open invoice), holds the
/// payment for a person on its word (a held or late one, which they then release as Paymos
/// has it), or closed unpaid on an event's word: wherever nothing shipped under it.
fn correct(change: &Change, tried: &Plan, refusal: &Refusal, confirmed: bool) -> Option<Step> {
    // Held because its events named two projects, or held under another project than the one
    // Paymos confirms (another shop's claim): Paymos' project answers, and the payment is
    // judged anew as Paymos has it.
    if let (
        true,
        Writes::Change,
        Refusal::Resource {
            standing: Standing::Held,
            projects_held,
            recorded,
            ..
        },
        Change::Invoice { order, .. },
    ) = (confirmed, &tried.write, refusal, change)
        && order.names_project()
        && (*projects_held || other_project(order, recorded))
    {
        return Some(Step::Then(Plan {
            write: Writes::PaymosOrder {
                recorded: recorded.clone(),
                reopen: true,
            },
            with_mark: false,
            outcome: tried.outcome,
            reason: None,
        }));
    }
    let recorded = match (&tried.write, refusal) {
        (Writes::Change, Refusal::OrderOnRecord { recorded })
        | (
            Writes::Change,
            Refusal::Resource {
                standing: Standing::Held | Standing::PaidLate,
                recorded,
                ..
            },
        ) => recorded,
        // Closed unpaid by an event (a forged close before the check): nothing shipped.
        (
            Writes::Change,
            Refusal::Resource {
                found: Found::Invoice(closed),
                standing: Standing::Clear,
                recorded,
                ..
            },
        ) if !closed.fulfils() => recorded,
        _ => return None,
    };
    let Change::Invoice { order, .. } = change else {
        return None;
    };
    (confirmed && differs(order, recorded)).then(|| {
        Step::Then(Plan {
            write: Writes::PaymosOrder {
                recorded: recorded.clone(),
                reopen: false,
            },
            with_mark: false,
            outcome: tried.outcome,
            reason: None,
        })
    })
}

/// A change refused by what its resource holds ([`Refusal::Resource`]), seen from `delivery`
/// (a webhook) or a person's road, on a record whose payment no road dated (`record_undated`).
fn on_resource(
    change: &Change,
    (found, recorded): (Found, &OrderRef),
    standing: &Standing,
    (delivery, record_undated): (bool, bool),
) -> Step {
    let mark_only = |outcome| mark_only(outcome, None);
    if let (Change::Invoice { order, .. }, Found::Invoice(current)) = (change, found) {
        // Whatever the status says of the change, what it names of its order and the record
        // leaves out is learned, while nothing shipped under the record.
        if !current.fulfils() && *standing != Standing::Released && teaches(order, recorded) {
            return Step::Then(Plan {
                write: Writes::Learn,
                with_mark: false,
                outcome: Applied::Updated,
                reason: None,
            });
        }
    }
    // Whether the road knows when the payment was made (by Paymos' clock).
    let undated = matches!(change, Change::Invoice { paid_at: None, .. });
    // A delivery of the payment a person recorded undated dates it (the webhook road's best
    // time: Paymos' where it was asked, else the event's), as a road that read Paymos' time
    // does (`recheck`): a full refund is judged by it.
    let done = |outcome| match change {
        Change::Invoice {
            status,
            paid_at: Some(_),
            ..
        } if record_undated && status.fulfils() => Step::Then(Plan {
            write: Writes::Dated,
            with_mark: true,
            outcome,
            reason: None,
        }),
        _ => mark_only(outcome),
    };
    match (change, found) {
        // Released by a person: nothing waits.
        (Change::Invoice { status, .. }, Found::Invoice(current))
            if current.is_final()
                && status.fulfils()
                && !current.fulfils()
                && *standing == Standing::Released =>
        {
            done(Applied::AlreadyFinal)
        }
        // Paid after it closed unpaid: the final status stays, the payment is noted (and,
        // undated after a full refund, marked for a person to say whether it was paid again).
        (Change::Invoice { status, order, .. }, Found::Invoice(current))
            if current.is_final() && status.fulfils() && !current.fulfils() =>
        {
            let after_refund = undated && *standing == Standing::Refunded;
            // Naming another project than the record: whose order a release ships is a
            // person's to say (`--project`), never the record's word.
            let projects_disagree = other_project(order, recorded);
            Step::Then(Plan {
                write: Writes::PaidLate {
                    closed: current,
                    after_refund,
                    projects_disagree,
                },
                with_mark: true,
                outcome: Applied::PaidLate,
                reason: after_refund.then(|| AFTER_REFUND.into()),
            })
        }
        // A payment naming another order than the one this invoice shipped, or another project
        // (a delivery's, or a person's word): one of the two words is wrong (an invoice pays one
        // order of one project), and only a person can say which. A delivery's waits, listed; a
        // person hears it (nothing written).
        (Change::Invoice { status, order, .. }, Found::Invoice(current))
            if status.fulfils() && current.fulfils() && conflicts(order, recorded).is_some() =>
        {
            if !delivery {
                return Step::Done(Applied::OrderConflict);
            }
            Step::Then(Plan {
                write: Writes::Review,
                with_mark: true,
                outcome: Applied::OrderConflict,
                reason: conflicts(order, recorded),
            })
        }
        // A person's road reports where the payment stands (a hold, a duplicate, a late
        // payment, or done), once Paymos' time it read dates a payment a person's word left
        // undated.
        (Change::Invoice { .. }, Found::Invoice(current)) if current.is_final() && !delivery => {
            done(standing_outcome(standing))
        }
        (Change::Invoice { .. }, Found::Invoice(current)) if current.is_final() => {
            done(Applied::AlreadyFinal)
        }
        // Nothing leaves a final status: a delivery saying another final status than the one
        // recorded contradicts it (a forgery, or a refund that did complete), and only a person
        // who checked at Paymos can say which is true. It applies nothing and waits.
        (Change::Withdrawal { status, .. }, Found::Withdrawal(current))
            if status.is_final() && *status != current =>
        {
            Step::Then(Plan {
                write: Writes::Review,
                with_mark: true,
                outcome: Applied::Unusable,
                reason: Some(format!(
                    "recorded {}, and this delivery says {}: nothing leaves a final status, so one of the two is wrong. Check the withdrawal at Paymos, then settle it by hand",
                    current.as_str(),
                    status.as_str()
                )),
            })
        }
        (Change::Withdrawal { .. }, Found::Withdrawal(current)) if current.is_final() => {
            mark_only(Applied::AlreadyFinal)
        }
        (Change::Deposit { .. }, Found::Deposit { credited: true }) => {
            mark_only(Applied::AlreadyFinal)
        }
        // Open and further along (or a note without a status): a late event.
        _ => mark_only(Applied::Stale),
    }
}

/// Whether `order` names what the invoice's record (`recorded`) leaves out, its order id or its
/// price, without contradicting it (another order id, another project): the condition of
/// [`write::learned_order`], as read.
fn teaches(order: &OrderRef, recorded: &OrderRef) -> bool {
    let same_order = match &order.external_id {
        Some(_) => recorded.external_id.is_none() || recorded.external_id == order.external_id,
        None => recorded.external_id.is_none(),
    };
    let same_project = !(order.names_project()
        && recorded.names_project()
        && (order.project != recorded.project || order.home != recorded.home));
    let new = (order.external_id.is_some() && recorded.external_id.is_none())
        || (order.has_price() && !recorded.has_price());
    same_order && same_project && new
}

/// A payment refused because a full refund is on its record ([`Refusal::Refunded`]).
fn refunded(change: &Change, recorded: OrderRef, awaited: bool) -> Step {
    let mark_only = |outcome| mark_only(outcome, None);
    // Whether the road knows when the payment was made (by Paymos' clock): a person's road
    // that asked nobody does not, and then a full refund on record settles nothing in silence.
    let undated = matches!(change, Change::Invoice { paid_at: None, .. });
    let no_order = recorded.external_id.is_none()
        && matches!(change, Change::Invoice { order, .. } if order.external_id.is_none());
    match (awaited, undated && no_order) {
        // A person's word again, of a payment that waited for its order before the full refund
        // recorded since: that refund returned it.
        (true, true) => mark_only(Applied::Refunded),
        // Undated and of an order known nowhere: the order is learned first (a dated delivery
        // of it then judges the refund); else a person says whether it was paid again.
        (false, true) => match on_record(change, recorded) {
            Step::Then(plan) => Step::Then(Plan {
                reason: Some(ORDER_UNKNOWN_AFTER_REFUND.into()),
                ..plan
            }),
            other => other,
        },
        // No road knows when it was paid: was it paid again after the refund? It waits for a
        // person (a release ships it, a refund of it settles it), never settled in silence.
        // (Of an order known now, a payment that waited before the refund is refunded as any
        // other.)
        (false, false) if undated => after_refund(),
        _ => Step::Then(Plan {
            write: Writes::Unfulfilled(Mark::Refunded),
            with_mark: true,
            outcome: Applied::Refunded,
            reason: Some("refunded in full before its payment was applied: nothing shipped".into()),
        }),
    }
}

/// A payment refused because a refund of unknown mode (`by`), which may have been `full`,
/// completed when or after it was made ([`Refusal::RefundOfUnknownMode`]): what the record
/// says of its order first (adopted, or another order or project held, or an order known
/// nowhere waiting for it), then it waits `held` for a person, never shipped in silence (the
/// record keeps its own order, which a release ships: nothing to adopt first). A release ships
/// it; a `full` refund recorded later settles it as refunded.
fn of_unknown_mode(change: &Change, by: &str, recorded: OrderRef) -> Step {
    match on_record(change, recorded) {
        Step::Adopt(_) => Step::Then(Plan {
            write: Writes::Unfulfilled(Mark::Held),
            with_mark: true,
            outcome: Applied::Held,
            reason: Some(format!(
                "a refund of unknown mode, {by}, completed after this payment was made: check at Paymos whether it returned the whole payment"
            )),
        }),
        other => other,
    }
}

/// After a write that corrected the record before the change (Paymos' order or project, a
/// learned order, a payment's date): the change planned again, or where it stands.
fn after_a_correction(
    source: &Source,
    change: &Change,
    tried: &Plan,
    written: &Written,
) -> Option<Step> {
    if let Writes::PaymosOrder { recorded, .. } = &tried.write {
        return Some(corrected(change, recorded, written));
    }
    if let Writes::Settle { .. } = &tried.write {
        return Some(match written {
            Written::Committed => Step::Adopt(OrderRef::none()),
            Written::AlreadyProcessed => Step::Done(Applied::AlreadyProcessed),
            // Shipped or released meanwhile: nothing more is written on the person's word.
            Written::Refused(_) => Step::Done(Applied::Held),
        });
    }
    if let Some(step) = dated(source, change, tried, written) {
        return Some(step);
    }
    match &tried.write {
        // Learned, or the record moved since it was read: the change is planned again.
        Writes::Learn => Some(match written {
            Written::AlreadyProcessed => Step::Done(Applied::AlreadyProcessed),
            Written::Committed | Written::Refused(_) => Step::Adopt(OrderRef::none()),
        }),
        Writes::PaymosProject { .. } => Some(match written {
            Written::Committed => Step::Adopt(OrderRef::none()),
            Written::AlreadyProcessed => Step::Done(Applied::AlreadyProcessed),
            Written::Refused(_) => other_project_mark(None),
        }),
        _ => None,
    }
}

/// [`next`], for a change whose order Paymos `confirmed` (the reverse check, `recheck`,
/// `reconcile`): Paymos' order and price replace a record's that differs, before the change is
/// tried again; what Paymos confirms wins over what an unconfirmed delivery said.
#[must_use]
pub fn next_as(
    source: &Source,
    change: &Change,
    tried: &Plan,
    written: Written,
    confirmed: bool,
) -> Step {
    if let Some(step) = after_a_correction(source, change, tried, &written) {
        return step;
    }
    let refusal = match written {
        Written::Committed if tried.with_mark => return Step::Done(tried.outcome),
        Written::Committed => return mark_only(tried.outcome, tried.reason.clone()),
        Written::AlreadyProcessed => return Step::Done(Applied::AlreadyProcessed),
        Written::Refused(refusal) => refusal,
    };
    if let (Writes::Change, Refusal::OtherProject(marked), Change::Invoice { .. }) =
        (&tried.write, &refusal, change)
        && let Some(step) = against_a_mark(source, change, marked, confirmed, tried.outcome)
    {
        return step;
    }
    let person = matches!(source, Source::Manual { .. });
    if let Some(step) = disagreeing(change, tried, &refusal, (confirmed, person)) {
        return step;
    }
    if let Some(step) = correct(change, tried, &refusal, confirmed)
        .or_else(|| again(tried, &refusal))
        .or_else(|| late_returned(change, tried, &refusal))
    {
        return step;
    }
    let mark_only = |outcome| mark_only(outcome, None);
    let delivery = matches!(source, Source::Delivery { .. });
    match (&tried.write, refusal) {
        // The resource holds this delivery's own change: a crash came between the change and
        // its mark. The outcome is the plan's. (A person's second run is not a crash: it is
        // told what exists.)
        (Writes::Change | Writes::RefundBeforeLater, Refusal::Resource { mine: true, .. })
            if delivery =>
        {
            mark_only(tried.outcome)
        }
        // The note exists: this delivery was handled before. The mark alone is never refused
        // but by the processed mark.
        (Writes::Review | Writes::MarkOnly, _) => Step::Done(Applied::AlreadyProcessed),
        // Shipped or released meanwhile: the late event is the mark alone.
        (Writes::Disagree, _) => mark_only(Applied::Stale),
        // Answered before (`after_a_correction`).
        (Writes::Settle { .. }, _) => Step::Done(Applied::Held),
        // Dated meanwhile by another road: the mark alone.
        (Writes::Dated, _) => mark_only(tried.outcome),
        (Writes::Change, Refusal::OrderOnRecord { recorded }) => on_record(change, recorded),
        // A snapshot of a credited deposit that contradicts its credit: nothing more credited,
        // and it waits for a person (a person's road is told, nothing written).
        (Writes::Change, Refusal::CreditDiffers(why)) => Step::Then(Plan {
            write: Writes::Review,
            with_mark: true,
            outcome: Applied::Unconfirmed,
            reason: Some(why),
        }),
        (Writes::Change, Refusal::Refunded { recorded, awaited }) => {
            refunded(change, recorded, awaited)
        }
        (Writes::Change, Refusal::RefundOfUnknownMode { by, recorded }) => {
            of_unknown_mode(change, &by, recorded)
        }
        (Writes::Change, Refusal::ReturnedEarlier { recorded }) => Step::Then(Plan {
            write: Writes::Reopen { recorded },
            with_mark: false,
            outcome: tried.outcome,
            reason: None,
        }),
        (
            Writes::Change,
            Refusal::Resource {
                found,
                standing,
                undated,
                recorded,
                ..
            },
        ) => on_resource(change, (found, &recorded), &standing, (delivery, undated)),
        (Writes::Change, Refusal::OrderClaimed { invoice_id }) => Step::Then(Plan {
            write: Writes::Unfulfilled(Mark::DuplicateOf(invoice_id)),
            with_mark: true,
            outcome: Applied::DuplicatePayment,
            reason: None,
        }),
        (Writes::Change, Refusal::OrderMismatch) => Step::Then(Plan {
            write: Writes::Unfulfilled(Mark::Held),
            with_mark: true,
            outcome: Applied::Held,
            reason: None,
        }),
        // A fulfilment exists although the invoice was open (only a custom effect can do that),
        // or a racing change made the invoice final before the held, duplicate or late write.
        (
            Writes::Change
            | Writes::Unfulfilled(_)
            | Writes::PaidLate { .. }
            | Writes::RefundBeforeLater
            | Writes::PaymosOrder { .. }
            | Writes::PaymosProject { .. }
            | Writes::Reopen { .. }
            | Writes::PaidAgain
            | Writes::Learn,
            _,
        ) => mark_only(Applied::AlreadyFinal),
    }
}

#[cfg(test)]
#[allow(
    clippy::too_many_lines,
    reason = "one table of every outcome, row by row"
)]
mod tests {
    use super::*;
    use crate::money::change::{Credit, OrderRef};
    use crate::money::status::{Amount, DepositStatus};

    // Missed mutants of this turn (`other_project`, `conflicts`): two words of one invoice name
    // two projects only where both name one, and either the project or the home differs; a
    // payment conflicts with what shipped on another order first, else on another project.
    #[test]
    fn two_projects_only_where_both_name_one_and_they_differ() {
        let of = |project: Option<&str>, home: bool| OrderRef {
            external_id: Some("o-1".into()),
            project: project.map(str::to_owned),
            home,
            ..OrderRef::none()
        };
        let cases = [
            (of(Some("prj_b"), false), of(Some("prj_c"), false), true),
            (of(Some("prj_b"), false), of(Some("prj_b"), false), false),
            (of(None, true), of(None, true), false),
            (of(None, true), of(Some("prj_b"), false), true),
            (of(Some("prj_b"), false), of(Some("prj_b"), true), true),
            (of(Some("prj_b"), false), of(None, false), false),
            (of(None, false), of(Some("prj_b"), false), false),
        ];
        for (order, recorded, two) in cases {
            assert_eq!(
                other_project(&order, &recorded),
                two,
                "{order:?} {recorded:?}"
            );
            assert_eq!(
                conflicts(&order, &recorded).is_some(),
                two,
                "{order:?} {recorded:?}"
            );
        }
        let mut other = of(Some("prj_c"), false);
        other.external_id = Some("o-2".into());
        let why = conflicts(&other, &of(Some("prj_b"), false)).unwrap();
        assert!(why.starts_with("it pays order o-2"), "{why}");
        let why = conflicts(&of(None, true), &of(Some("prj_b"), false)).unwrap();
        assert!(
            why.contains("names the home project") && why.contains("under project prj_b"),
            "{why}"
        );
    }

    fn me() -> Source {
        Source::Delivery {
            event_id: "evt_me".into(),
        }
    }

    /// The order inv_1's events name, as its record holds it.
    fn o1() -> OrderRef {
        OrderRef {
            external_id: Some("o-1".into()),
            ..OrderRef::none()
        }
    }

    fn invoice(status: InvoiceStatus) -> Change {
        Change::Invoice {
            invoice_id: "inv_1".into(),
            status,
            occurred_at: 10,
            paid_at: Some(10),
            order: o1(),
        }
    }

    fn withdrawal(status: WithdrawalStatus) -> Change {
        Change::Withdrawal {
            withdrawal_id: "wdr_1".into(),
            status,
            occurred_at: 10,
            kind: "payout".into(),
            invoice_id: None,
            amount: None,
            currency: None,
            mode: None,
        }
    }

    fn deposit(credit: bool) -> Change {
        Change::Deposit {
            deposit_id: "pcd_1".into(),
            status: DepositStatus::Confirmed,
            occurred_at: 10,
            credit: credit.then(|| Credit {
                payer: "c-1".into(),
                net: Amount::parse("1").unwrap(),
                currency: "TRX".into(),
                project: None,
            }),
        }
    }

    /// Runs `change` against a store that answers `answers` in turn; the outcome and the writes
    /// tried.
    fn run(change: &Change, answers: &[Written]) -> (Applied, Vec<Writes>) {
        let mut plan = plan(change);
        let mut tried = Vec::new();
        for answer in answers {
            tried.push(plan.write.clone());
            match next(&me(), change, &plan, answer.clone()) {
                Step::Done(applied) => return (applied, tried),
                Step::Then(p) => plan = p,
                Step::Adopt(_) | Step::Judge(_) => panic!("{change:?}: nothing to adopt"),
            }
        }
        panic!("{change:?} needs more answers than {answers:?}; tried {tried:?}")
    }

    use InvoiceStatus as I;
    use Written::{AlreadyProcessed, Committed, Refused};

    /// A payment a person's word recorded undated, settled by the full refund completed at 120
    /// by no time: one paid at 130 comes after it, and each mark of another story says no.
    #[test]
    fn a_payment_dated_after_the_refund_that_settled_it_undated_is_new_and_nothing_else() {
        let refund = Refund {
            withdrawal_id: "wdr_1".into(),
            amount: None,
            currency: None,
            mode: Some(RefundMode::Full),
            completed_at: Some(120),
        };
        let settled = write::Fields::from([
            (Field::Kind, Value::text("invoice")),
            (Field::Status, Value::text("paid")),
            (Field::Refunds, Value::Refunds(vec![refund])),
            (Field::RefundedInFullBy, Value::text("wdr_1")),
            (Field::RefundedInFullAt, Value::Int(120)),
        ]);
        let new =
            |found: &write::Fields, at| returned_earlier(found, &write::invoice_seen(found), at);
        assert!(new(&settled, 130));
        assert!(!new(&settled, 120), "returned by the refund completed then");
        let with = |field: Field, value: Value| {
            let mut found = settled.clone();
            found.insert(field, value);
            assert!(!new(&found, 130), "{found:?}");
        };
        with(Field::Status, Value::text("awaiting_payment"));
        with(Field::PaymentAt, Value::Int(130));
        with(Field::ReleasedAt, Value::Int(1));
        with(Field::PaidLateAt, Value::Int(1));
        with(Field::AfterRefund, Value::Bool(true));
        with(Field::Held, Value::Bool(true));
        with(Field::DuplicateOf, Value::text("inv_2"));
        let mut unsettled = settled.clone();
        unsettled.remove(&Field::RefundedInFullBy);
        assert!(!new(&unsettled, 130));
    }

    #[test]
    fn a_late_event_notes_the_projects_disagreement_only_when_it_names_another_project() {
        let named = |p: &str| OrderRef {
            project: Some(p.into()),
            ..o1()
        };
        let source = Source::Delivery {
            event_id: "evt_1".into(),
        };
        let tried = Plan {
            write: Writes::Unfulfilled(Mark::ProjectsDisagree),
            with_mark: true,
            outcome: Applied::Updated,
            reason: None,
        };
        let refused = |recorded| {
            Refused(Refusal::Resource {
                found: Found::Invoice(I::Confirming),
                mine: false,
                standing: Standing::Clear,
                recorded,
                undated: false,
                projects_held: false,
                late_at: None,
            })
        };
        let change = |status, p: &str| Change::Invoice {
            invoice_id: "inv_1".into(),
            status,
            occurred_at: 10,
            paid_at: None,
            order: named(p),
        };
        let disagree = |step: &Step| {
            matches!(
                step,
                Step::Then(Plan {
                    write: Writes::Disagree,
                    ..
                })
            )
        };
        // A late open status naming another project than the record's: the mark alone.
        let late = change(I::AwaitingPayment, "prj_b");
        let step = next(&source, &late, &tried, refused(named("prj_a")));
        assert!(disagree(&step), "{step:?}");
        // Naming the record's own project, or a payment: nothing of the kind.
        for (status, project) in [(I::AwaitingPayment, "prj_a"), (I::Paid, "prj_b")] {
            let step = next(
                &source,
                &change(status, project),
                &tried,
                refused(named("prj_a")),
            );
            assert!(!disagree(&step), "{status:?} {project}: {step:?}");
        }
    }

    #[test]
    fn a_refunded_payment_notes_the_projects_disagreement_only_on_an_events_word_of_another() {
        let named = |p: &str| OrderRef {
            project: Some(p.into()),
            ..o1()
        };
        let source = Source::Delivery {
            event_id: "evt_1".into(),
        };
        let tried = Plan {
            write: Writes::Unfulfilled(Mark::Refunded),
            with_mark: true,
            outcome: Applied::Refunded,
            reason: None,
        };
        let refused = || {
            Refused(Refusal::Resource {
                found: Found::Invoice(I::UnderpaidWaiting),
                mine: false,
                standing: Standing::Refunded,
                recorded: named("prj_a"),
                undated: false,
                projects_held: false,
                late_at: None,
            })
        };
        let paid = |p: &str| Change::Invoice {
            invoice_id: "inv_1".into(),
            status: I::Paid,
            occurred_at: 10,
            paid_at: Some(10),
            order: named(p),
        };
        let disagree = |step: &Step| {
            matches!(
                step,
                Step::Then(Plan {
                    write: Writes::Disagree,
                    outcome: Applied::Refunded,
                    ..
                })
            )
        };
        // A payment naming another project than the record's, returned by a full refund: the
        // disagreement is noted.
        let step = next(&source, &paid("prj_b"), &tried, refused());
        assert!(disagree(&step), "{step:?}");
        // The record's own project, or Paymos' word (which settles the project): nothing of it.
        let step = next(&source, &paid("prj_a"), &tried, refused());
        assert!(!disagree(&step), "{step:?}");
        let step = next_as(&source, &paid("prj_b"), &tried, refused(), true);
        assert!(!disagree(&step), "{step:?}");
    }

    #[test]
    fn every_outcome_from_what_the_store_reports() {
        let refused = |found| {
            Refused(Refusal::Resource {
                found,
                mine: false,
                standing: Standing::Clear,
                recorded: o1(),
                undated: false,
                projects_held: false,
                late_at: None,
            })
        };
        let mine = |found| {
            Refused(Refusal::Resource {
                found,
                mine: true,
                standing: Standing::Clear,
                recorded: o1(),
                undated: false,
                projects_held: false,
                late_at: None,
            })
        };
        // (name, change, the store's answers in turn, outcome, writes tried). A change is
        // written alone, then its mark; a refused change is followed by the write that says why.
        let cases: Vec<(&str, Change, Vec<Written>, Applied, usize)> = vec![
            (
                "paid, committed, marked",
                invoice(I::Paid),
                vec![Committed, Committed],
                Applied::Fulfilled,
                2,
            ),
            (
                "open, committed, marked",
                invoice(I::Confirming),
                vec![Committed, Committed],
                Applied::Updated,
                2,
            ),
            (
                "committed, then a second message marked it",
                invoice(I::Paid),
                vec![Committed, AlreadyProcessed],
                Applied::AlreadyProcessed,
                2,
            ),
            (
                "a crash before the mark: its own write is found",
                invoice(I::Paid),
                vec![mine(Found::Invoice(I::Paid)), Committed],
                Applied::Fulfilled,
                2,
            ),
            (
                "a second message after the mark",
                invoice(I::Paid),
                vec![mine(Found::Invoice(I::Paid)), AlreadyProcessed],
                Applied::AlreadyProcessed,
                2,
            ),
            (
                "its own open status",
                invoice(I::Confirming),
                vec![mine(Found::Invoice(I::Confirming)), Committed],
                Applied::Updated,
                2,
            ),
            (
                "its own credit",
                deposit(true),
                vec![mine(Found::Deposit { credited: true }), Committed],
                Applied::Credited,
                2,
            ),
            (
                "paid twice",
                invoice(I::Paid),
                vec![refused(Found::Invoice(I::Paid)), Committed],
                Applied::AlreadyFinal,
                2,
            ),
            (
                "paid after paid_over",
                invoice(I::Paid),
                vec![refused(Found::Invoice(I::PaidOver)), Committed],
                Applied::AlreadyFinal,
                2,
            ),
            (
                "paid after expiry",
                invoice(I::Paid),
                vec![refused(Found::Invoice(I::Expired)), Committed],
                Applied::PaidLate,
                2,
            ),
            (
                "paid after cancel, then a racing mark",
                invoice(I::PaidOver),
                vec![refused(Found::Invoice(I::Cancelled)), AlreadyProcessed],
                Applied::AlreadyProcessed,
                2,
            ),
            (
                "paid after expiry, raced",
                invoice(I::Paid),
                vec![
                    refused(Found::Invoice(I::Expired)),
                    refused(Found::Invoice(I::Paid)),
                    Committed,
                ],
                Applied::AlreadyFinal,
                3,
            ),
            (
                "expired after paid",
                invoice(I::Expired),
                vec![refused(Found::Invoice(I::Paid)), Committed],
                Applied::AlreadyFinal,
                2,
            ),
            (
                "a late open status",
                invoice(I::AwaitingPayment),
                vec![refused(Found::Invoice(I::Confirming)), Committed],
                Applied::Stale,
                2,
            ),
            (
                "a note without status",
                invoice(I::Confirming),
                vec![
                    Refused(Refusal::Resource {
                        found: Found::Nothing,
                        mine: false,
                        standing: Standing::Clear,
                        recorded: OrderRef::none(),
                        undated: false,
                        projects_held: false,
                        late_at: None,
                    }),
                    Committed,
                ],
                Applied::Stale,
                2,
            ),
            (
                "order paid by another invoice",
                invoice(I::Paid),
                vec![
                    Refused(Refusal::OrderClaimed {
                        invoice_id: "inv_0".into(),
                    }),
                    Committed,
                ],
                Applied::DuplicatePayment,
                2,
            ),
            (
                "duplicate, raced final",
                invoice(I::Paid),
                vec![
                    Refused(Refusal::OrderClaimed {
                        invoice_id: "inv_0".into(),
                    }),
                    refused(Found::Invoice(I::Paid)),
                    Committed,
                ],
                Applied::AlreadyFinal,
                3,
            ),
            (
                "amount differs",
                invoice(I::Paid),
                vec![Refused(Refusal::OrderMismatch), Committed],
                Applied::Held,
                2,
            ),
            (
                "held, raced final",
                invoice(I::Paid),
                vec![
                    Refused(Refusal::OrderMismatch),
                    refused(Found::Invoice(I::Paid)),
                    Committed,
                ],
                Applied::AlreadyFinal,
                3,
            ),
            (
                "a fulfilment exists",
                invoice(I::Paid),
                vec![
                    Refused(Refusal::Fulfilled {
                        at: None,
                        by_person: false,
                    }),
                    Committed,
                ],
                Applied::AlreadyFinal,
                2,
            ),
            (
                "withdrawal forward",
                withdrawal(WithdrawalStatus::Processing),
                vec![Committed, Committed],
                Applied::Updated,
                2,
            ),
            (
                "withdrawal after final",
                withdrawal(WithdrawalStatus::Processing),
                vec![
                    refused(Found::Withdrawal(WithdrawalStatus::Failed)),
                    Committed,
                ],
                Applied::AlreadyFinal,
                2,
            ),
            (
                "withdrawal late",
                withdrawal(WithdrawalStatus::Created),
                vec![
                    refused(Found::Withdrawal(WithdrawalStatus::Processing)),
                    Committed,
                ],
                Applied::Stale,
                2,
            ),
            (
                "credit",
                deposit(true),
                vec![Committed, Committed],
                Applied::Credited,
                2,
            ),
            (
                "credit twice",
                deposit(true),
                vec![refused(Found::Deposit { credited: true }), Committed],
                Applied::AlreadyFinal,
                2,
            ),
            (
                "advisory after credit",
                deposit(false),
                vec![refused(Found::Deposit { credited: true }), Committed],
                Applied::AlreadyFinal,
                2,
            ),
            (
                "older advisory",
                deposit(false),
                vec![refused(Found::Deposit { credited: false }), Committed],
                Applied::Stale,
                2,
            ),
            (
                "ignored",
                Change::Ignore { reason: "x".into() },
                vec![Committed],
                Applied::Ignored,
                1,
            ),
            (
                "unusable",
                Change::Unusable {
                    reason: "x".into(),
                    resource_id: None,
                },
                vec![Committed],
                Applied::Unusable,
                1,
            ),
            (
                "unusable again",
                Change::Unusable {
                    reason: "x".into(),
                    resource_id: None,
                },
                vec![Refused(Refusal::Noted)],
                Applied::AlreadyProcessed,
                1,
            ),
            (
                "unconfirmed",
                Change::Unconfirmed {
                    reason: "x".into(),
                    resource_id: None,
                },
                vec![Committed],
                Applied::Unconfirmed,
                1,
            ),
            (
                "other environment",
                Change::OtherEnvironment { environment: None },
                vec![Committed],
                Applied::OtherEnvironment,
                1,
            ),
        ];
        for (name, change, answers, expected, writes) in cases {
            let (applied, tried) = run(&change, &answers);
            assert_eq!(applied, expected, "{name}");
            assert_eq!(tried.len(), writes, "{name}: {tried:?}");
            assert!(tried.len() <= MAX_WRITES, "{name}");
        }
    }

    #[test]
    fn the_mark_follows_the_change_and_goes_with_every_other_write() {
        for change in [
            invoice(I::Paid),
            withdrawal(WithdrawalStatus::Created),
            deposit(true),
        ] {
            assert!(
                !plan(&change).with_mark,
                "{change:?}: the change goes alone"
            );
            let Step::Then(mark) = next(&me(), &change, &plan(&change), Committed) else {
                panic!("no mark after {change:?}")
            };
            assert_eq!((mark.write, mark.with_mark), (Writes::MarkOnly, true));
        }
        let unusable = Change::Unusable {
            reason: "x".into(),
            resource_id: None,
        };
        assert!(
            plan(&unusable).with_mark,
            "the note and the mark move together"
        );
        let Step::Then(held) = next(
            &me(),
            &invoice(I::Paid),
            &plan(&invoice(I::Paid)),
            Refused(Refusal::OrderMismatch),
        ) else {
            panic!()
        };
        assert!(held.with_mark, "a held payment and its mark move together");
    }

    #[test]
    fn a_manual_road_reports_what_exists_never_its_own_earlier_write() {
        let person = Source::Manual {
            actor: "alice".into(),
        };
        let paid = invoice(I::Paid);
        for (standing, found, expected) in [
            (Standing::Held, I::Paid, Applied::Held),
            (
                Standing::DuplicateOf("inv_0".into()),
                I::Paid,
                Applied::DuplicatePayment,
            ),
            (Standing::PaidLate, I::Expired, Applied::PaidLate),
            (Standing::Clear, I::Paid, Applied::AlreadyFinal),
            (Standing::Released, I::Expired, Applied::AlreadyFinal),
        ] {
            let refused = Refused(Refusal::Resource {
                found: Found::Invoice(found),
                mine: true,
                standing: standing.clone(),
                recorded: o1(),
                undated: false,
                projects_held: false,
                late_at: None,
            });
            let step = next(&person, &paid, &plan(&paid), refused.clone());
            let Step::Then(then) = step else {
                panic!("{standing:?}: {step:?}")
            };
            assert_eq!(then.outcome, expected, "{standing:?}");
            // A delivery that finds its own write is a crash before its mark: the plan's.
            let Step::Then(own) = next(&me(), &paid, &plan(&paid), refused) else {
                panic!()
            };
            assert_eq!(own.outcome, Applied::Fulfilled);
        }
    }

    #[test]
    fn the_invoices_record_fills_in_and_overrules_the_events_order() {
        let recorded = OrderRef {
            external_id: Some("o-record".into()),
            amount: None,
            currency: None,
            project: None,
            home: false,
            unlisted: false,
        };
        let silent = Change::Invoice {
            invoice_id: "inv_1".into(),
            status: I::Paid,
            occurred_at: 10,
            paid_at: Some(10),
            order: OrderRef::none(),
        };
        let answer = || {
            Refused(Refusal::OrderOnRecord {
                recorded: recorded.clone(),
            })
        };
        assert_eq!(
            next(&me(), &silent, &plan(&silent), answer()),
            Step::Adopt(recorded.clone())
        );
        let Step::Then(held) = next(&me(), &invoice(I::Paid), &plan(&invoice(I::Paid)), answer())
        else {
            panic!()
        };
        assert_eq!(
            (held.write, held.outcome),
            (
                Writes::Unfulfilled(Mark::OrderDisputed("o-1".into())),
                Applied::Held
            )
        );
        assert!(held.reason.unwrap().contains("o-record"));
    }

    #[test]
    fn a_delivery_finding_a_hold_is_already_final_and_a_late_open_status_is_stale_by_any_road() {
        let held = || {
            Refused(Refusal::Resource {
                found: Found::Invoice(I::Paid),
                mine: false,
                standing: Standing::Held,
                recorded: o1(),
                undated: false,
                projects_held: false,
                late_at: None,
            })
        };
        // A second endpoint's paid event for a held payment: the hold is listed already.
        let Step::Then(then) = next(&me(), &invoice(I::Paid), &plan(&invoice(I::Paid)), held())
        else {
            panic!()
        };
        assert_eq!(then.outcome, Applied::AlreadyFinal);
        // An open status behind a later one is stale, for a person as for a delivery.
        let person = Source::Manual {
            actor: "alice".into(),
        };
        let later = Refused(Refusal::Resource {
            found: Found::Invoice(I::UnderpaidWaiting),
            mine: false,
            standing: Standing::Clear,
            recorded: o1(),
            undated: false,
            projects_held: false,
            late_at: None,
        });
        for source in [me(), person] {
            let change = invoice(I::Confirming);
            let Step::Then(then) = next(&source, &change, &plan(&change), later.clone()) else {
                panic!()
            };
            assert_eq!(then.outcome, Applied::Stale, "{source:?}");
        }
    }

    #[test]
    fn a_refused_change_teaches_only_what_the_record_leaves_out_while_nothing_shipped() {
        let refused = |found, standing, recorded: OrderRef| {
            Refused(Refusal::Resource {
                found: Found::Invoice(found),
                mine: false,
                standing,
                recorded,
                undated: false,
                projects_held: false,
                late_at: None,
            })
        };
        let priced = OrderRef {
            amount: Amount::parse("10"),
            currency: Some("USD".into()),
            ..o1()
        };
        let other = OrderRef {
            external_id: Some("o-2".into()),
            ..OrderRef::none()
        };
        let home = OrderRef {
            home: true,
            ..OrderRef::none()
        };
        let of_b = |order: OrderRef| OrderRef {
            project: Some("prj_b".into()),
            ..order
        };
        let person = Source::Manual {
            actor: "alice".into(),
        };
        // (change's order, status found, standing, recorded, learns)
        for (order, found, standing, recorded, learns) in [
            (o1(), I::Confirming, Standing::Clear, OrderRef::none(), true),
            (o1(), I::Expired, Standing::PaidLate, OrderRef::none(), true),
            (o1(), I::Expired, Standing::Clear, OrderRef::none(), true),
            (o1(), I::Expired, Standing::Refunded, OrderRef::none(), true),
            (priced.clone(), I::Confirming, Standing::Clear, o1(), true),
            (
                of_b(o1()),
                I::Confirming,
                Standing::Clear,
                OrderRef::none(),
                true,
            ),
            (
                of_b(o1()),
                I::Confirming,
                Standing::Clear,
                of_b(OrderRef::none()),
                true,
            ),
            (
                OrderRef {
                    external_id: None,
                    ..priced.clone()
                },
                I::Expired,
                Standing::PaidLate,
                OrderRef::none(),
                true,
            ),
            // Nothing new, or a contradiction: never learned.
            (o1(), I::Confirming, Standing::Clear, o1(), false),
            (o1(), I::Expired, Standing::PaidLate, priced.clone(), false),
            (o1(), I::Confirming, Standing::Clear, other.clone(), false),
            (priced.clone(), I::Confirming, Standing::Clear, other, false),
            (of_b(o1()), I::Confirming, Standing::Clear, home, false),
            (
                of_b(o1()),
                I::Confirming,
                Standing::Clear,
                OrderRef {
                    project: Some("prj_c".into()),
                    ..OrderRef::none()
                },
                false,
            ),
            (
                OrderRef::none(),
                I::Confirming,
                Standing::Clear,
                OrderRef::none(),
                false,
            ),
            // Something shipped under the record: it stays as it shipped.
            (o1(), I::Paid, Standing::Clear, OrderRef::none(), false),
            (
                o1(),
                I::Expired,
                Standing::Released,
                OrderRef::none(),
                false,
            ),
        ] {
            let change = Change::Invoice {
                invoice_id: "inv_1".into(),
                status: I::Paid,
                occurred_at: 10,
                paid_at: Some(10),
                order: order.clone(),
            };
            for source in [me(), person.clone()] {
                let step = next(
                    &source,
                    &change,
                    &plan(&change),
                    refused(found, standing.clone(), recorded.clone()),
                );
                let learned =
                    matches!(&step, Step::Then(p) if p.write == Writes::Learn && !p.with_mark);
                assert_eq!(
                    learned, learns,
                    "{order:?} on {recorded:?} ({found:?}, {standing:?}): {step:?}"
                );
            }
        }
        // Learned, or refused for a record that moved: the change is planned again.
        let learning = Plan {
            write: Writes::Learn,
            with_mark: false,
            outcome: Applied::Updated,
            reason: None,
        };
        let change = invoice(I::Paid);
        for written in [Committed, Refused(Refusal::Noted)] {
            assert_eq!(
                next(&me(), &change, &learning, written),
                Step::Adopt(OrderRef::none())
            );
        }
        assert_eq!(
            next(&me(), &change, &learning, AlreadyProcessed),
            Step::Done(Applied::AlreadyProcessed)
        );
    }

    #[test]
    fn a_released_late_payment_paid_again_waits_for_no_one() {
        let refused = Refused(Refusal::Resource {
            found: Found::Invoice(I::Expired),
            mine: false,
            standing: Standing::Released,
            recorded: o1(),
            undated: false,
            projects_held: false,
            late_at: None,
        });
        let Step::Then(then) = next(&me(), &invoice(I::Paid), &plan(&invoice(I::Paid)), refused)
        else {
            panic!()
        };
        assert_eq!(then.outcome, Applied::AlreadyFinal);
    }

    #[test]
    fn only_outcomes_that_need_a_person_carry_a_reason() {
        assert_eq!(plan(&Change::Ignore { reason: "x".into() }).reason, None);
        assert!(
            plan(&Change::OtherEnvironment { environment: None })
                .reason
                .is_some()
        );
        assert_eq!(
            plan(&Change::Unusable {
                reason: "data.net".into(),
                resource_id: None
            })
            .reason
            .as_deref(),
            Some("data.net")
        );
        assert_eq!(plan(&invoice(I::Paid)).reason, None);
    }

    #[test]
    fn the_mark_after_a_refusal_never_asks_for_more() {
        for outcome in Applied::ALL {
            let tried = Plan {
                write: Writes::MarkOnly,
                with_mark: true,
                outcome,
                reason: None,
            };
            for answer in [Committed, AlreadyProcessed, Refused(Refusal::Noted)] {
                assert!(matches!(
                    next(&me(), &invoice(I::Paid), &tried, answer),
                    Step::Done(_)
                ));
            }
        }
    }
}
