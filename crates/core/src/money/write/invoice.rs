//! An invoice's record: the guards of its status, what it learns (its order, project and payment time) and the marks a person reads.

use super::*;

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
    // Another project's invoice takes no change of this stack's (a record that names a
    // project of this stack besides is not another project's: that delivery changed nothing).
    Guard::All(vec![
        Guard::Any(vec![
            Guard::Lacks(Field::OtherProject),
            Guard::Has(Field::ProjectId),
            Guard::Has(Field::HomeProject),
        ]),
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
    returned_by(Field::RefundedInFullBy, Field::RefundedInFullAt, paid_at)
}

/// A payment made at `paid_at` (`None`: no road dates it) that a refund of unknown mode, one
/// that may have been `full`, may have returned: the invoice carries such a refund
/// ([`refund_note`]) that completed when or after it was paid. Such a payment never ships in
/// silence (it waits for a person); one made after every such refund is not affected. The rule
/// of [`crate::money::invoice::Refund::may_return_payment_at`], as a condition on the latest
/// such refund's time.
#[must_use]
pub fn refund_of_unknown_mode(paid_at: Option<u64>) -> Guard {
    returned_by(
        Field::RefundOfUnknownModeBy,
        Field::RefundOfUnknownModeAt,
        paid_at,
    )
}

/// The record flags a refund (`by`) whose latest completion (`at`, missing: any time) is not
/// before `paid_at` (`None`: any payment).
fn returned_by(by: Field, at: Field, paid_at: Option<u64>) -> Guard {
    let flagged = Guard::Has(by);
    match paid_at {
        None => flagged,
        Some(paid) => Guard::All(vec![
            flagged,
            Guard::Not(Box::new(Guard::Below(at, Value::Int(paid)))),
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
pub(super) fn unnamed_or(named: Guard) -> Guard {
    Guard::Any(vec![
        Guard::All(vec![
            Guard::Lacks(Field::ProjectId),
            Guard::Lacks(Field::HomeProject),
        ]),
        named,
    ])
}

/// Where `order` names a project: the record names none, or that one (a record names one).
fn same_project(order: &OrderRef) -> Option<Guard> {
    match (&order.project, order.home) {
        (Some(p), _) => Some(unnamed_or(Guard::Is(Field::ProjectId, Value::text(p)))),
        (None, true) => Some(unnamed_or(Guard::Has(Field::HomeProject))),
        (None, false) => None,
    }
}

/// A record whose status pays nothing (none, open, closed unpaid): nothing shipped under it.
pub(super) fn no_payment_status() -> Guard {
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
pub(super) fn invoice_fields(
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
pub(super) fn project_once(order: &OrderRef) -> Option<Set> {
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
pub(super) fn step(at: u64, status: &str, source: &Source) -> Set {
    let by = match source {
        Source::Delivery { event_id } => event_id.clone(),
        Source::Manual { .. } => source.id(),
    };
    let step = crate::money::record::StoryStep {
        at,
        status: status.to_owned(),
        by,
    };
    Set::Once(Field::Named(step.attribute()), Value::Text(step.value()))
}

/// The order and its price, set once.
pub(super) fn order_once(order: &OrderRef) -> Vec<Set> {
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
///
/// With `reopen`, for a payment held only because its events named two projects
/// ([`Mark::ProjectsDisagree`]): Paymos' project answers the hold, so the payment is taken off
/// the record (its status and hold removed, as [`paid_anew`] does, in one transaction with
/// [`nothing_shipped`]) and judged anew under Paymos' order, which ships it or holds it again
/// for what else it says. Written only while the record is still so held, not paid late.
#[must_use]
pub fn paymos_order(
    invoice_id: &str,
    order: &OrderRef,
    (recorded, reopen): (&OrderRef, bool),
    now_ms: u64,
) -> Write {
    let mut set = vec![Set::Put(Field::UpdatedAt, Value::Int(now_ms))];
    if let Some(id) = &order.external_id {
        set.push(Set::Put(Field::OrderId, Value::text(id)));
    }
    let other_project = order.names_project()
        && recorded.names_project()
        && (order.project != recorded.project || order.home != recorded.home);
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
    // A payment recorded under another project than this order's was another shop's word,
    // not this payment: its time goes with it (the payment applied next brings its own).
    if other_project {
        set.push(Set::Remove(Field::PaymentAt));
        // and its order id, which was that shop's, where this word names none
        if order.external_id.is_none() {
            set.push(Set::Remove(Field::OrderId));
        }
    }
    let mut guard = vec![
        Guard::Has(Field::Kind),
        order_as_read(recorded),
        Guard::Lacks(Field::ReleasedAt),
    ];
    if reopen {
        // Held because its events named two projects, or under another project than this
        // order's (the record still names it).
        let in_question = match (other_project, same_project(recorded)) {
            (true, Some(recorded_project)) => Guard::Any(vec![
                Guard::Is(Field::ProjectsDisagree, Value::Bool(true)),
                recorded_project,
            ]),
            _ => Guard::Is(Field::ProjectsDisagree, Value::Bool(true)),
        };
        guard.extend([
            Guard::Is(Field::Held, Value::Bool(true)),
            in_question,
            Guard::Lacks(Field::PaidLateAt),
        ]);
        set.extend(held_payment_off());
    } else {
        guard.push(unshipped());
    }
    Write {
        what: What::Transition,
        key: Key::state(invoice_id),
        guard: Guard::All(guard),
        set,
    }
}

/// The invoice's record as `before` had it, where a person's release settled its order or
/// project ([`paymos_order`]) and was then refused: a refused release writes nothing. Written
/// only while nothing was released and its status is still `before`'s.
#[must_use]
pub fn as_before(invoice_id: &str, before: &Fields, now_ms: u64) -> Write {
    let mut set = vec![Set::Put(Field::UpdatedAt, Value::Int(now_ms))];
    for field in [
        Field::OrderId,
        Field::Amount,
        Field::AmountText,
        Field::Currency,
        Field::ProjectId,
        Field::HomeProject,
        Field::ProjectsDisagree,
        Field::OrderDisputed,
        Field::PaymentAt,
    ] {
        set.push(match before.get(&field) {
            Some(value) => Set::Put(field, value.clone()),
            None => Set::Remove(field),
        });
    }
    let status = match before.get(&Field::Status) {
        Some(value) => Guard::Is(Field::Status, value.clone()),
        None => Guard::Lacks(Field::Status),
    };
    Write {
        what: What::Transition,
        key: Key::state(invoice_id),
        guard: Guard::All(vec![
            Guard::Has(Field::Kind),
            Guard::Lacks(Field::ReleasedAt),
            status,
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
    guards.extend(same_project(order));
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
/// the change is tried again. With `disagree`, a delivery naming a project this stack applies
/// took it off: the record is marked [`Mark::ProjectsDisagree`] instead (no payment of it
/// ships on an event's word).
#[must_use]
pub fn paymos_project(invoice_id: &str, (marked, disagree): (&str, bool), now_ms: u64) -> Write {
    let mut set = vec![
        Set::Remove(Field::OtherProject),
        Set::Put(Field::UpdatedAt, Value::Int(now_ms)),
    ];
    if disagree {
        set.push(Set::Put(Field::ProjectsDisagree, Value::Bool(true)));
    }
    Write {
        what: What::Transition,
        key: Key::state(invoice_id),
        guard: Guard::Is(Field::OtherProject, Value::text(marked)),
        set,
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
        Set::Put(Field::ListedIn, Value::Text(review_list(invoice_id))),
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

/// Paymos has the invoice paid (its own status, not a late payment), and its record a close an
/// event recorded: Paymos' final status never changes, so that close was not Paymos' (a
/// forged or mistaken delivery) and goes, with a payment recorded late on it (Paymos' payment,
/// in time), while nothing was released. Paymos' payment is then applied as to an open
/// invoice.
#[must_use]
pub fn paymos_pays_over_close(invoice_id: &str, now_ms: u64) -> Write {
    let closes = [
        InvoiceStatus::Underpaid,
        InvoiceStatus::Expired,
        InvoiceStatus::Cancelled,
    ];
    Write {
        what: What::Transition,
        key: Key::state(invoice_id),
        guard: Guard::All(vec![
            Guard::In(
                Field::Status,
                closes.iter().map(|s| Value::text(s.as_str())).collect(),
            ),
            Guard::Lacks(Field::ReleasedAt),
        ]),
        set: vec![
            Set::Remove(Field::Status),
            Set::Remove(Field::StatusAt),
            Set::Remove(Field::StatusRank),
            Set::Remove(Field::PaidLateAt),
            Set::Remove(Field::PaymentAt),
            Set::Put(Field::UpdatedAt, Value::Int(now_ms)),
        ],
    }
}

/// Paymos has the invoice closed (a payment on it came late), under `order`'s project, and its
/// record a payment an event recorded under another project, which a hold keeps from shipping:
/// Paymos' final status never changes, so that payment was not Paymos' (a forged or mistaken
/// delivery) and goes, with its time, while nothing was released. Paymos' close, then its late
/// payment, are then applied as to an open invoice. (A held payment of Paymos' project is its
/// late payment, delivered before the close: it stays.) None where Paymos names no project.
#[must_use]
pub fn paymos_closes_over_held(invoice_id: &str, order: &OrderRef, now_ms: u64) -> Option<Write> {
    let mut set = held_payment_off().to_vec();
    set.push(Set::Remove(Field::PaymentAt));
    set.push(Set::Put(Field::UpdatedAt, Value::Int(now_ms)));
    Some(Write {
        what: What::Transition,
        key: Key::state(invoice_id),
        guard: Guard::All(vec![
            Guard::Is(Field::Held, Value::Bool(true)),
            Guard::Lacks(Field::PaidLateAt),
            Guard::Lacks(Field::ReleasedAt),
            Guard::Not(Box::new(same_project(order)?)),
        ]),
        set,
    })
}

/// Paymos has the invoice closed and paid late, under `order`'s project, and its record a late
/// payment an event recorded under another project, or while its events named two projects
/// ([`Mark::ProjectsDisagree`]): that late payment is one delivery's word, not Paymos' payment
/// as Paymos has it, and goes with its time while nothing was released, so that Paymos' late
/// payment lands at Paymos' time (a full refund on record judges it by that time).
#[must_use]
pub fn paymos_late_over_foreign(invoice_id: &str, order: &OrderRef, now_ms: u64) -> Write {
    let mut foreign = vec![Guard::Is(Field::ProjectsDisagree, Value::Bool(true))];
    foreign.extend(same_project(order).map(|same| Guard::Not(Box::new(same))));
    Write {
        what: What::PaidLate,
        key: Key::state(invoice_id),
        guard: Guard::All(vec![
            Guard::Has(Field::PaidLateAt),
            Guard::Lacks(Field::ReleasedAt),
            Guard::Any(foreign),
        ]),
        set: vec![
            Set::Remove(Field::PaidLateAt),
            Set::Remove(Field::PaymentAt),
            Set::Remove(Field::AfterRefund),
            Set::Put(Field::UpdatedAt, Value::Int(now_ms)),
        ],
    }
}

/// Paymos' project (`order`'s) on the record of an invoice of which no payment is known (none
/// recorded, none waiting for its order, none released): what a road that asked Paymos read is the invoice's project from now
/// on, whatever a delivery said, so that a later delivery naming another is seen as the
/// disagreement it is. None where Paymos names no project.
#[must_use]
pub fn paymos_project_known(invoice_id: &str, order: &OrderRef, now_ms: u64) -> Option<Write> {
    let project = match (&order.project, order.home) {
        (Some(p), _) => [
            Set::Put(Field::ProjectId, Value::text(p)),
            Set::Remove(Field::HomeProject),
        ],
        (None, true) => [
            Set::Put(Field::HomeProject, Value::Bool(true)),
            Set::Remove(Field::ProjectId),
        ],
        (None, false) => return None,
    };
    let mut set = vec![Set::Put(Field::UpdatedAt, Value::Int(now_ms))];
    set.extend(project);
    Some(Write {
        what: What::Transition,
        key: Key::state(invoice_id),
        guard: Guard::All(vec![
            Guard::Has(Field::Kind),
            no_payment_status(),
            Guard::Lacks(Field::PaidLateAt),
            Guard::Lacks(Field::PaymentAt),
            Guard::Lacks(Field::ReleasedAt),
        ]),
        set,
    })
}

/// A person's word naming the project of the invoice's record (`recorded`, as read) settles
/// its events' disagreement ([`Mark::ProjectsDisagree`]): the mark goes, while the record still
/// holds that order, and nothing shipped under it (no payment status but one held, and no
/// release). The person's change is then planned again. With `reopen`, a payment held only for
/// that disagreement is taken off the record (as [`paymos_order`] reopens it, in one
/// transaction with [`nothing_shipped`]): the person's word is then judged as the payment.
#[must_use]
pub fn projects_settled(
    invoice_id: &str,
    (recorded, reopen): (&OrderRef, bool),
    now_ms: u64,
) -> Write {
    let mut set = vec![
        Set::Remove(Field::ProjectsDisagree),
        Set::Put(Field::UpdatedAt, Value::Int(now_ms)),
    ];
    let unshipped = if reopen {
        set.extend(held_payment_off());
        Guard::All(vec![
            Guard::Is(Field::Held, Value::Bool(true)),
            Guard::Lacks(Field::PaidLateAt),
        ])
    } else {
        unshipped()
    };
    Write {
        what: What::Transition,
        key: Key::state(invoice_id),
        guard: Guard::All(vec![
            Guard::Is(Field::ProjectsDisagree, Value::Bool(true)),
            order_as_read(recorded),
            Guard::Lacks(Field::ReleasedAt),
            unshipped,
        ]),
        set,
    }
}

/// The condition that the record holds `recorded`'s order id as it was read (or none).
fn order_as_read(recorded: &OrderRef) -> Guard {
    match &recorded.external_id {
        Some(id) => Guard::Is(Field::OrderId, Value::text(id)),
        None => Guard::Lacks(Field::OrderId),
    }
}

/// Nothing shipped under the record: no payment status (open, closed unpaid, paid late), or a
/// payment held for a person.
fn unshipped() -> Guard {
    Guard::Any(vec![
        no_payment_status(),
        Guard::Is(Field::Held, Value::Bool(true)),
    ])
}

/// A payment held for a person taken off the record (its status and hold), to be judged anew.
fn held_payment_off() -> [Set; 5] {
    [
        Set::Remove(Field::Status),
        Set::Remove(Field::StatusAt),
        Set::Remove(Field::StatusRank),
        Set::Remove(Field::Held),
        Set::Remove(Field::Why),
    ]
}

/// A late event naming another project than the invoice's record: the events' disagreement
/// ([`Mark::ProjectsDisagree`]) alone, the status kept, while nothing shipped under it (no
/// payment status but one held, and no release): no payment of it ships on an event's word.
#[must_use]
pub fn projects_disagree(invoice_id: &str, now_ms: u64) -> Write {
    Write {
        what: What::Transition,
        key: Key::state(invoice_id),
        guard: Guard::All(vec![
            Guard::Has(Field::Kind),
            Guard::Lacks(Field::ReleasedAt),
            unshipped(),
        ]),
        set: vec![
            Set::Put(Field::ProjectsDisagree, Value::Bool(true)),
            Set::Put(Field::UpdatedAt, Value::Int(now_ms)),
        ],
    }
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

/// A payment at `paid_at` comes after every full refund recorded, one of which returned the
/// record's payment (dated before it, or a person's word of no time).
fn after_its_refund(paid_at: u64) -> Guard {
    Guard::All(vec![
        Guard::Has(Field::RefundedInFullBy),
        Guard::Below(Field::RefundedInFullAt, Value::Int(paid_at)),
        Guard::Any(vec![
            Guard::Lacks(Field::PaymentAt),
            Guard::Below(Field::PaymentAt, Value::Int(paid_at)),
        ]),
    ])
}

/// Paymos' order (`order`, of the record's project) of an invoice whose record holds a payment
/// that never shipped, waiting (held, or as a second payment) under another order than Paymos'
/// (a delivery, forged or mistaken, named that order): the wait rested on a delivery's word,
/// which Paymos' record contradicts. The payment, its wait and the delivery's order go (not
/// where it was released, refunded or waits as the invoice's own second payment), so that the
/// road's change, tried next, judges Paymos' payment of Paymos' order anew: it ships it, or
/// waits as a second payment of it. None where Paymos names no order.
#[must_use]
pub fn paymos_order_over_planted(invoice_id: &str, order: &OrderRef, now_ms: u64) -> Option<Write> {
    let id = order.external_id.as_ref()?;
    let mut guard = vec![
        Guard::Any(vec![
            Guard::All(vec![
                Guard::Has(Field::DuplicateOf),
                Guard::Not(Box::new(Guard::Is(
                    Field::DuplicateOf,
                    Value::text(invoice_id),
                ))),
            ]),
            Guard::Is(Field::Held, Value::Bool(true)),
        ]),
        Guard::Lacks(Field::ProjectsDisagree),
        Guard::Has(Field::OrderId),
        Guard::Not(Box::new(Guard::Is(Field::OrderId, Value::text(id)))),
        Guard::Lacks(Field::ReleasedAt),
        Guard::Lacks(Field::RefundedInFullBy),
        Guard::Lacks(Field::PaidLateAt),
    ];
    guard.extend(same_project(order));
    Some(Write {
        what: What::Transition,
        key: Key::state(invoice_id),
        guard: Guard::All(guard),
        set: held_payment_off()
            .into_iter()
            .chain([
                Set::Remove(Field::DuplicateOf),
                Set::Remove(Field::PaymentAt),
                Set::Remove(Field::OrderId),
                Set::Remove(Field::Amount),
                Set::Remove(Field::AmountText),
                Set::Remove(Field::Currency),
                Set::Put(Field::UpdatedAt, Value::Int(now_ms)),
            ])
            .collect(),
    })
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
            after_its_refund(paid_at),
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
            after_its_refund(paid_at),
            Guard::Lacks(Field::DuplicateOf),
        ]),
        set: vec![
            Set::Put(Field::PaymentAt, Value::Int(paid_at)),
            Set::Put(Field::DuplicateOf, Value::text(invoice_id)),
            Set::Put(Field::UpdatedAt, Value::Int(now_ms)),
            Set::Put(Field::ListedIn, Value::Text(review_list(invoice_id))),
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
pub(super) fn invoice_once(invoice_id: &str, field: Field, text: &str) -> Write {
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
    /// The payment names another order (this one) than the invoice's record: `held` and
    /// `order_disputed`, never released on either word (an invoice pays one order: a person
    /// names it, `release --order-id`).
    OrderDisputed(String),
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
    // Events that named two projects: the record keeps the project it had and takes nothing of
    // this change's, so it never names two: no order either (an order id is its project's,
    // and this one may be another shop's), nor its price.
    let unscoped;
    let order = match mark {
        Some(Mark::ProjectsDisagree) => {
            unscoped = OrderRef::none();
            &unscoped
        }
        _ => order,
    };
    let mut set = invoice_fields(status, at, order, source, now_ms);
    if status.fulfils() {
        // A payment that does not ship keeps its time too: the refund rule reads it.
        set.extend(paid_at.map(|t| Set::Put(Field::PaymentAt, Value::Int(t))));
    }
    match mark {
        Some(Mark::Held) => set.push(Set::Put(Field::Held, Value::Bool(true))),
        Some(Mark::OrderDisputed(named)) => set.extend([
            Set::Put(Field::Held, Value::Bool(true)),
            Set::Put(Field::OrderDisputed, Value::text(named)),
        ]),
        Some(Mark::ProjectsDisagree) => {
            // A payment is held; a status that pays nothing only marks the record, so that no
            // payment of it ships on an event's word.
            if status.fulfils() {
                set.push(Set::Put(Field::Held, Value::Bool(true)));
            }
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
                    | Mark::OrderDisputed(_)
                    | Mark::DuplicateOf(_)
                    | Mark::AwaitsOrder
                    | Mark::AfterRefund
            )
        ) || (mark == Some(&Mark::ProjectsDisagree) && status.fulfils()),
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
    // A record names one project: a change naming another is refused, and planned again as
    // the events' disagreement ([`Mark::ProjectsDisagree`]).
    let guard = match same_project(order) {
        Some(project) => Guard::All(vec![guard, project]),
        None => guard,
    };
    Write {
        what: What::Transition,
        key: Key::state(invoice_id),
        guard,
        set,
    }
}

/// A road that asked Paymos (`reconcile --apply`, `mark-paid` with the API) found `invoice_id`
/// shipped here under another order, or another project's, than Paymos' invoice names
/// (`paymos`, in words): a person recovers the order shipped here and, as `otherwise` says,
/// ships Paymos' order by hand, refunds this payment (another invoice shipped Paymos' order
/// first), or does neither (Paymos has the invoice in a project this stack does not apply,
/// whose own stack ships it, or in another of its own and names no order yet). Listed for
/// them (`order_conflict`) until they settle it; noted once, so a later run neither lists it
/// again nor, once settled, brings it back.
#[must_use]
pub fn shipped_otherwise(
    invoice_id: &str,
    (paymos, otherwise): (&str, Otherwise<'_>),
    now_ms: u64,
) -> Write {
    let mut set = vec![
        Set::Put(Field::ShippedOtherwise, Value::text(paymos)),
        Set::Put(Field::ListedIn, Value::Text(review_list(invoice_id))),
        Set::Put(Field::UpdatedAt, Value::Int(now_ms)),
    ];
    match otherwise {
        Otherwise::ShipByHand => {}
        Otherwise::ShippedWith(first) => {
            set.push(Set::Put(Field::PaymosOrderShippedWith, Value::text(first)));
        }
        Otherwise::Elsewhere => {
            set.push(Set::Put(Field::PaymosProjectElsewhere, Value::Bool(true)));
        }
        Otherwise::OrderUnnamed => {
            set.push(Set::Put(Field::PaymosOrderUnnamed, Value::Bool(true)));
        }
    }
    Write {
        what: What::Transition,
        key: Key::state(invoice_id),
        guard: Guard::All(vec![
            Guard::Has(Field::Kind),
            Guard::Lacks(Field::ShippedOtherwise),
        ]),
        set,
    }
}

/// What becomes of Paymos' order of an invoice found [`shipped_otherwise`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Otherwise<'a> {
    /// Taken for this payment ([`paymos_order_taken`]): a person ships it by hand.
    ShipByHand,
    /// That invoice shipped it first: this payment is a second one, to refund.
    ShippedWith(&'a str),
    /// Of a project this stack does not apply: its own stack ships it.
    Elsewhere,
    /// Of another project of this stack, whose order Paymos names no id of yet (an empty one
    /// is unknown): nothing to ship by hand or take until it does.
    OrderUnnamed,
}

/// Paymos' order (`order_id` within its project's `scope`) of an invoice found
/// [`shipped_otherwise`], taken for that invoice's payment, which Paymos says paid it: a
/// person ships it by hand, so from then on another payment of it is a second payment (to
/// refund), never a second shipment. Refused where an invoice holds it already.
#[must_use]
pub fn paymos_order_taken(
    invoice_id: &str,
    (scope, order_id): (Option<&str>, &str),
    paid_at_ms: u64,
) -> Write {
    Write {
        what: What::OrderClaim,
        key: Key::state(order_paid_key(scope, order_id)),
        guard: Guard::Absent,
        set: vec![
            Set::Put(Field::Kind, Value::text("order_payment")),
            Set::Put(Field::OrderId, Value::text(order_id)),
            Set::Put(Field::InvoiceId, Value::text(invoice_id)),
            Set::Put(Field::WonBy, Value::text("paymos")),
            Set::Put(Field::PaidAt, Value::Int(paid_at_ms)),
        ],
    }
}

/// A person found at Paymos that the full refund on record returned a payment that waits
/// [`Mark::AfterRefund`] (paid before it: `by`): settled as refunded, off the list, kept by its
/// day, with who said so. Paymos' time of it, once a road reads one, still judges it (a payment
/// after the refund is reopened and ships). Refused where it does not wait so.
#[must_use]
pub fn after_refund_returned(invoice_id: &str, by: &str, now_ms: u64) -> Write {
    Write {
        what: What::Transition,
        key: Key::state(invoice_id),
        guard: Guard::All(vec![
            Guard::Is(Field::AfterRefund, Value::Bool(true)),
            Guard::Lacks(Field::ReleasedAt),
        ]),
        set: vec![
            Set::Remove(Field::AfterRefund),
            Set::Put(Field::AfterRefundReturnedBy, Value::text(by)),
            Set::Put(Field::ListedIn, Value::Text(day_list(invoice_id, now_ms))),
            Set::Put(Field::UpdatedAt, Value::Int(now_ms)),
        ],
    }
}

/// A person settled what [`shipped_otherwise`] noted (`by`): off the list, kept by its day,
/// with who settled it.
#[must_use]
pub fn shipped_otherwise_settled(invoice_id: &str, by: &str, now_ms: u64) -> Write {
    Write {
        what: What::Transition,
        key: Key::state(invoice_id),
        guard: Guard::All(vec![
            Guard::Has(Field::ShippedOtherwise),
            Guard::Lacks(Field::ShippedOtherwiseSettledBy),
        ]),
        set: vec![
            Set::Put(Field::ShippedOtherwiseSettledBy, Value::text(by)),
            Set::Put(Field::ListedIn, Value::Text(day_list(invoice_id, now_ms))),
            Set::Put(Field::UpdatedAt, Value::Int(now_ms)),
        ],
    }
}
