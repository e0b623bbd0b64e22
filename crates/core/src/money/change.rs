//! The change model: what a verified event asks of the resource it names ([`Change`], decided
//! by [`change_of`] from the event alone), who asks ([`Source`]), the merchant's order an
//! invoice carries ([`OrderRef`]) and how a delivery ended ([`Applied`]). Every use case and
//! every rule speaks it; it depends on nothing but the envelope and the statuses.

use std::fmt;

use crate::money::status::{Amount, DepositStatus, InvoiceStatus, WithdrawalStatus};
use crate::wire::envelope::{Category, Envelope, EventData, MAX_REFERENCE_LEN};
use crate::wire::signature::Environment;
use crate::wire::work::{delivery_key, event_id_of_key};

/// The merchant's order as Paymos echoes it on an invoice.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OrderRef {
    /// `data.order.external_id`: the merchant's order id.
    pub external_id: Option<String>,
    /// The invoice amount (exact decimal), if the event carries it.
    pub amount: Option<Amount>,
    /// The currency of `amount` (the same source's, never another's), upper case.
    pub currency: Option<String>,
    /// The merchant's project (`prj_…`) the order belongs to: an order id is unique only
    /// within its project. `None`: the event named none (the partial official vectors); the
    /// invoice's record, or Paymos' answer, may still say. Once a stack has applied it, the
    /// project's key scope ([`Projects::scope`]): none for the home project.
    pub project: Option<String>,
    /// The home project is named (its keys carry no project, so `project` is none): a record
    /// that holds it belongs to the home project, and no other project's order ships from it.
    pub home: bool,
    /// Applied by a stack that lists no projects ([`Projects::scoped`]): before projects such a
    /// stack claimed every order by its id alone (`order_paid#<id>`), so a claim under a
    /// project's key also finds that key absent or its own
    /// ([`crate::money::write::claimed_before_projects`]):
    /// an order shipped before the upgrade ships no second time under its project's key.
    pub unlisted: bool,
}

pub use crate::wire::envelope::named;

impl OrderRef {
    /// No order known.
    #[must_use]
    pub fn none() -> Self {
        Self {
            external_id: None,
            amount: None,
            currency: None,
            project: None,
            home: false,
            unlisted: false,
        }
    }

    /// Whether it names a project (the home project's too).
    #[must_use]
    pub fn names_project(&self) -> bool {
        self.project.is_some() || self.home
    }

    /// Whether it carries a complete price: an amount with its currency.
    #[must_use]
    pub fn has_price(&self) -> bool {
        self.amount.is_some() && self.currency.is_some()
    }

    /// Fills what this leaves out from `recorded`: the order id, and the price as one pair
    /// (an amount with its own currency, never half of one).
    pub fn adopt(&mut self, recorded: &OrderRef) {
        if self.external_id.is_none() {
            self.external_id.clone_from(&recorded.external_id);
        }
        if !self.has_price() && recorded.has_price() {
            self.amount.clone_from(&recorded.amount);
            self.currency.clone_from(&recorded.currency);
        }
        if !self.names_project() {
            self.project.clone_from(&recorded.project);
            self.home = recorded.home;
        }
    }
}

/// A change to apply, decided from the event alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Move an invoice to `status` (and fulfil it, for `paid`/`paid_over`).
    Invoice {
        /// `inv_…`.
        invoice_id: String,
        /// The status the event announces.
        status: InvoiceStatus,
        /// `occurred_at` of the event (orders open statuses).
        occurred_at: u64,
        /// When the payment it announces was made, by Paymos' clock, for the refund rule
        /// ([`crate::money::invoice::Refund::returns_payment_at`]): Paymos' own time (`paid_late_at`,
        /// else `completed_at`) where a road asked Paymos, else the event's `occurred_at`;
        /// `None` on a road that knows no time (`mark-paid`, or Paymos' answer naming none).
        paid_at: Option<u64>,
        /// The order it pays for.
        order: OrderRef,
    },
    /// Move a withdrawal (payout or refund) forward.
    Withdrawal {
        /// `wdr_…`.
        withdrawal_id: String,
        /// The status the event announces.
        status: WithdrawalStatus,
        /// `occurred_at` of the event.
        occurred_at: u64,
        /// `refund` for refunds, else `payout`.
        kind: String,
        /// For refunds, the refunded invoice.
        invoice_id: Option<String>,
        /// The amount, if given.
        amount: Option<Amount>,
        /// The currency, if given.
        currency: Option<String>,
        /// For refunds, `full` or `overpayment`, if given.
        mode: Option<String>,
    },
    /// Record a deposit's status, crediting the payer once on a final confirmation.
    Deposit {
        /// `pcd_…`.
        deposit_id: String,
        /// The status the event announces.
        status: DepositStatus,
        /// `occurred_at` of the event.
        occurred_at: u64,
        /// The payer and the net amount to credit, present only for a final confirmation.
        credit: Option<Credit>,
    },
    /// Nothing to apply (an unknown event type or status).
    Ignore {
        /// Why, for the ledger and the log.
        reason: String,
    },
    /// A paid event the reverse check refused: recorded as `unconfirmed`, nothing applied.
    Unconfirmed {
        /// Why Paymos does not confirm it.
        reason: String,
        /// The invoice.
        resource_id: Option<String>,
    },
    /// A verified delivery that misses what its change needs (a final deposit without `net`):
    /// recorded as `unusable` with the reason, for an operator; never retried into the DLQ.
    Unusable {
        /// What is missing or wrong (field names, never values).
        reason: String,
        /// The resource it names, when it names one.
        resource_id: Option<String>,
    },
    /// A payment or a deposit naming no project (nor Paymos, where asked), on a stack of
    /// several projects ([`Projects::several`]), of a resource whose record names none:
    /// recorded as `project_unknown`, nothing applied (which project's order or payer it is,
    /// nothing here can tell).
    ProjectUnknown {
        /// The invoice or deposit.
        resource_id: Option<String>,
        /// When a payment of the invoice was made, by the delivery's best clock: its record
        /// learns it, so a person's word of the payment later is judged against a full refund
        /// by that time.
        paid_at: Option<u64>,
    },
    /// A delivery verified by a secret of the other environment (a sandbox secret on a live
    /// stack): recorded as `other_environment`, nothing applied.
    OtherEnvironment {
        /// The environment of the secret that verified it, if it named one.
        environment: Option<Environment>,
    },
    /// A delivery of a project this stack does not apply (an endpoint without a project filter
    /// receives every project; withdrawals ignore filters): recorded as `other_project`,
    /// nothing applied.
    OtherProject {
        /// The project it names.
        project: String,
        /// The invoice it is of, if it names one: marked as that project's, so a later event of
        /// it naming no project applies nothing either (`inv_…` ids are unique merchant-wide).
        invoice_id: Option<String>,
    },
}

impl Change {
    /// The reason stored beside the outcome, for changes that apply nothing.
    #[must_use]
    pub fn reason(&self) -> Option<String> {
        match self {
            Self::Ignore { reason }
            | Self::Unconfirmed { reason, .. }
            | Self::Unusable { reason, .. } => Some(reason.clone()),
            Self::OtherEnvironment { environment } => Some(format!(
                "verified by a {} secret; this stack applies another environment",
                environment.map_or("unlabelled", Environment::as_str)
            )),
            Self::ProjectUnknown { .. } => Some(PROJECT_UNKNOWN.to_owned()),
            Self::OtherProject { project, .. } => Some(format!(
                "of project {project}, which this stack does not apply (PaymosProjectIds); set the endpoint's project filter"
            )),
            _ => None,
        }
    }
}

/// Why a payment or a deposit naming no project waits ([`Change::ProjectUnknown`]).
pub const PROJECT_UNKNOWN: &str = "it names no project, nor does its record (nor Paymos, where asked), and this stack applies several projects (PaymosProjectIds lists several, or none: every project): nothing applied";

/// A credit of a payer's balance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credit {
    /// `data.payment_channel_external_id`: the merchant's id for the payer.
    pub payer: String,
    /// `data.net`.
    pub net: Amount,
    /// `data.currency` (balances are kept per payer and currency).
    pub currency: String,
    /// The project's key scope ([`Projects::scope`]): a payer id is unique only within its
    /// project, and so is its balance.
    pub project: Option<String>,
}

/// What a stack applies: one environment's deliveries, of its projects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applying {
    /// The environment.
    pub environment: Environment,
    /// The projects (every one by default).
    pub projects: Projects,
}

impl From<&Applying> for Applying {
    fn from(stack: &Applying) -> Self {
        stack.clone()
    }
}

impl From<Environment> for Applying {
    fn from(environment: Environment) -> Self {
        Self {
            environment,
            projects: Projects::all(),
        }
    }
}

/// The projects a stack applies (`PaymosProjectIds`): `prj_…` ids; none listed, every project
/// (`dev` without `--project`). The first listed is the stack's **home** project: its keys carry
/// no project, as every key did before projects, so an upgrade keeps every existing record as
/// the one configured project's. Every other project's order claims, registered orders and
/// balances carry their project ([`crate::money::write::order_paid_key`]): order `1001` of two
/// projects is two orders. A stack that lists none has no home project: every project it
/// applies is keyed by its own, and a payment naming none waits for its project as on a stack
/// of several ([`Projects::several`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Projects(Vec<String>);

impl Projects {
    /// Every project (nothing is another project's; no home: every named project is scoped).
    #[must_use]
    pub fn all() -> Self {
        Self(Vec::new())
    }

    /// These projects, the first the home project.
    #[must_use]
    pub fn only(ids: Vec<String>) -> Self {
        Self(ids)
    }

    /// The list as configured (`prj_a,prj_b`; blanks and spaces around ids dropped).
    #[must_use]
    pub fn parse(list: &str) -> Self {
        Self(
            list.split(',')
                .filter_map(|p| named(p.trim()))
                .map(str::to_owned)
                .collect(),
        )
    }

    /// The projects listed (none: every project).
    #[must_use]
    pub fn ids(&self) -> &[String] {
        &self.0
    }

    /// Whether a delivery naming `project` is this stack's: every project when none is listed,
    /// and one naming none (a plain payout, a partial event) is merchant-wide.
    #[must_use]
    pub fn applies(&self, project: Option<&str>) -> bool {
        match project {
            None => true,
            Some(p) => self.0.is_empty() || self.0.iter().any(|id| id == p),
        }
    }

    /// The key scope of `project`: none for the home project (and for none), else the project
    /// (every project on a stack that lists none: order and payer ids are unique only within a
    /// project, and such a stack receives every project).
    #[must_use]
    pub fn scope(&self, project: Option<&str>) -> Option<String> {
        project
            .filter(|p| self.0.first().is_none_or(|home| home != p))
            .map(str::to_owned)
    }

    /// Whether a payment or a deposit naming no project cannot be keyed here: several projects
    /// are listed, or none (every project). With one listed, it is that project's.
    #[must_use]
    pub fn several(&self) -> bool {
        self.0.len() != 1
    }

    /// The projects as a person reads them: the list, or that every project is applied.
    #[must_use]
    pub fn listed(&self) -> String {
        if self.0.is_empty() {
            "every project: PaymosProjectIds lists none".to_owned()
        } else {
            self.0.join(", ")
        }
    }

    /// `order` with its project as its key scope (idempotent: a scope's scope is itself).
    #[must_use]
    pub fn scoped(&self, order: OrderRef) -> OrderRef {
        OrderRef {
            project: self.scope(order.project.as_deref()),
            home: order.home || self.is_home(order.project.as_deref()),
            unlisted: order.unlisted || self.0.is_empty(),
            ..order
        }
    }

    /// Why a person's word naming `given` (a project, or none) of an invoice whose record holds
    /// `recorded` is refused, if it is: a project the stack does not apply, or other than the
    /// record's, ships no order from it, and on a stack of several projects a person names the
    /// project the record does not know (order `1001` of two projects is two orders).
    #[must_use]
    pub fn refuses_person(&self, given: Option<&str>, recorded: &OrderRef) -> Option<String> {
        let of = |order: &OrderRef| match (&order.project, order.home, self.0.first()) {
            (Some(p), _, _) | (None, true, Some(p)) => Some(p.clone()),
            _ => None,
        };
        let given_ref = self.scoped(OrderRef {
            project: given.map(str::to_owned),
            ..OrderRef::none()
        });
        if let Some(g) = given.filter(|g| !self.applies(Some(g))) {
            // Taken, it would mark the invoice another project's, and the person's own word of
            // the right project would then apply nothing.
            return Some(format!(
                "{g} is not a project this stack applies ({}): pass one of them",
                self.listed()
            ));
        }
        match (given, of(recorded)) {
            (Some(g), Some(r)) if of(&given_ref).as_deref() != Some(r.as_str()) => Some(format!(
                "the invoice's record is of project {r}, not {g}: pass --project {r}, or none"
            )),
            (None, None) if self.several() => Some(format!(
                "the invoice's record names no project and this stack applies several ({}): name its project with --project",
                self.listed()
            )),
            _ => None,
        }
    }

    /// Whether `project` is this stack's home project (its first listed).
    #[must_use]
    pub fn is_home(&self, project: Option<&str>) -> bool {
        project.is_some() && self.0.first().map(String::as_str) == project
    }

    /// The project a key scope stands for: the scope's own, else the home project (if any).
    #[must_use]
    pub fn project_of(&self, scope: Option<&str>) -> Option<String> {
        scope
            .or(self.0.first().map(String::as_str))
            .map(str::to_owned)
    }

    /// `change` as this stack applies it: another project's delivery applies nothing, and an
    /// order's or a credit's project becomes its key scope.
    #[must_use]
    pub fn apply_to(&self, change: Change, project: Option<&str>) -> Change {
        let named = match &change {
            Change::Invoice { order, .. } => order.project.as_deref(),
            Change::Deposit {
                credit: Some(c), ..
            } => c.project.as_deref(),
            _ => None,
        };
        if let Some(p) = project.or(named).filter(|p| !self.applies(Some(p))) {
            return Change::OtherProject {
                project: p.to_owned(),
                invoice_id: match &change {
                    Change::Invoice { invoice_id, .. } => Some(invoice_id.clone()),
                    _ => None,
                },
            };
        }
        match change {
            Change::Invoice {
                invoice_id,
                status,
                occurred_at,
                paid_at,
                mut order,
            } => {
                order = self.scoped(order);
                Change::Invoice {
                    invoice_id,
                    status,
                    occurred_at,
                    paid_at,
                    order,
                }
            }
            Change::Deposit {
                deposit_id,
                status,
                occurred_at,
                credit,
            } => Change::Deposit {
                deposit_id,
                status,
                occurred_at,
                credit: credit.map(|c| Credit {
                    project: self.scope(c.project.as_deref()),
                    ..c
                }),
            },
            other => other,
        }
    }
}

/// How a delivery was applied (stored as the ledger's `outcome`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// The invoice became paid and the order was fulfilled by this delivery.
    Fulfilled,
    /// The resource moved to the announced status.
    Updated,
    /// The payer was credited by this delivery.
    Credited,
    /// The resource was already final (paid by another event, endpoint, or by hand): nothing
    /// changed.
    AlreadyFinal,
    /// A late event: the resource is already further along.
    Stale,
    /// The paid amount or currency differs from the registered order: held for review, not
    /// fulfilled.
    Held,
    /// A payment arrived after the invoice closed unpaid: the final status stays, `paid_late_at`
    /// is set, nothing is fulfilled.
    PaidLate,
    /// Nothing to apply.
    Ignored,
    /// The reverse check found Paymos does not confirm the payment (status, amount or
    /// currency): nothing was fulfilled; a forged or mistaken event.
    Unconfirmed,
    /// This delivery was applied before (a second message): nothing changed.
    AlreadyProcessed,
    /// A verified delivery that misses what its change needs: nothing applied, kept for an
    /// operator with the reason.
    Unusable,
    /// Verified by a secret of another environment than the one this stack applies: nothing
    /// applied (a sandbox secret never moves live state).
    OtherEnvironment,
    /// A paid invoice for an order that another invoice already fulfilled: the invoice is
    /// marked paid with `duplicate_of`, nothing is fulfilled, the payment waits for a refund.
    DuplicatePayment,
    /// A payment of an invoice refunded in full before the payment was applied (a late
    /// `invoice.paid` after its `full` refund): the invoice is marked paid, nothing is
    /// fulfilled, the order stays free.
    Refunded,
    /// A payment of an invoice whose order is known nowhere yet (the event leaves it out and
    /// nothing recorded names it): nothing is fulfilled and the invoice stays as it was; it
    /// waits for its order (a later event, the reverse check, `mark-paid --order-id`).
    OrderUnknown,
    /// A payment or a deposit naming no project, on a stack of several projects without the
    /// reverse check: nothing applied; it waits for its project (`mark-paid --project`, or
    /// `recheck` once the reverse check is configured).
    ProjectUnknown,
    /// Of a project this stack does not apply: nothing applied, never listed as waiting.
    OtherProject,
    /// A payment naming another order than the one its invoice shipped (an invoice pays one
    /// order at Paymos: a person's `mark-paid --order-id` or an earlier event named the wrong
    /// one): nothing more ships; it waits, listed although the invoice is fulfilled, until a
    /// person settles it and resolves it (`exceptions --resolve`).
    OrderConflict,
}

impl Applied {
    /// Every outcome.
    pub const ALL: [Self; 18] = [
        Self::Fulfilled,
        Self::Updated,
        Self::Credited,
        Self::AlreadyFinal,
        Self::Stale,
        Self::Held,
        Self::PaidLate,
        Self::Ignored,
        Self::Unconfirmed,
        Self::AlreadyProcessed,
        Self::Unusable,
        Self::OtherEnvironment,
        Self::DuplicatePayment,
        Self::Refunded,
        Self::OrderUnknown,
        Self::ProjectUnknown,
        Self::OtherProject,
        Self::OrderConflict,
    ];

    /// The outcome of a stored name.
    #[must_use]
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.as_str() == name)
    }

    /// Whether a payment or delivery with this outcome waits for a person (what `exceptions`
    /// lists): held, paid late or twice, its order or project unknown, unconfirmed, unusable, or
    /// an order conflict. A road that ends so exits 1.
    #[must_use]
    pub fn waits_for_person(self) -> bool {
        matches!(
            self,
            Self::Held
                | Self::PaidLate
                | Self::DuplicatePayment
                | Self::OrderUnknown
                | Self::ProjectUnknown
                | Self::Unconfirmed
                | Self::Unusable
                | Self::OrderConflict
        )
    }

    /// The stored name.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Fulfilled => "fulfilled",
            Self::Updated => "updated",
            Self::Credited => "credited",
            Self::AlreadyFinal => "already_final",
            Self::Stale => "stale",
            Self::Held => "held",
            Self::PaidLate => "paid_late",
            Self::Ignored => "ignored",
            Self::Unconfirmed => "unconfirmed",
            Self::AlreadyProcessed => "already_processed",
            Self::Unusable => "unusable",
            Self::OtherEnvironment => "other_environment",
            Self::DuplicatePayment => "duplicate_payment",
            Self::Refunded => "refunded",
            Self::OrderUnknown => "order_unknown",
            Self::ProjectUnknown => "project_unknown",
            Self::OtherProject => "other_project",
            Self::OrderConflict => "order_conflict",
        }
    }
}

impl fmt::Display for Applied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The outcomes of a delivery that need a person (what the ledger's `waiting` index lists).
pub const DELIVERY_OUTCOMES: [Applied; 5] = [
    Applied::Unconfirmed,
    Applied::Unusable,
    Applied::OrderUnknown,
    Applied::ProjectUnknown,
    Applied::OrderConflict,
];

/// Who caused a change: a recorded delivery (whose ledger record is marked processed in the
/// same transaction) or a person or job acting by hand (no ledger record).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A delivery from the ledger ([`Source::delivery`]).
    Delivery {
        /// Its ledger key ([`delivery_key`]): the `event_id`, prefixed for a sandbox delivery,
        /// so the processed mark of one environment's delivery is never another's.
        event_id: String,
    },
    /// A manual action (`mark-paid`) or a reconciliation run.
    Manual {
        /// Who or what did it, e.g. `support:alice` or `reconcile`.
        actor: String,
    },
}

impl Source {
    /// The delivery of `event_id` verified by a secret of `environment`.
    #[must_use]
    pub fn delivery(environment: Option<Environment>, event_id: &str) -> Self {
        Self::Delivery {
            event_id: delivery_key(environment, event_id),
        }
    }

    /// The id stored as "who won" on a fulfilment (a delivery's bare `event_id`).
    #[must_use]
    pub fn id(&self) -> String {
        match self {
            Self::Delivery { event_id } => event_id_of_key(event_id).to_owned(),
            Self::Manual { actor } => format!("manual:{actor}"),
        }
    }
}

/// How far ahead of its own receipt a delivery's times may be, in seconds: the longest signature
/// tolerance a stack accepts (an hour), so no genuine delivery from a clock that far off is
/// refused, and a forged date is bounded by it.
pub const AHEAD_OF_RECEIPT_S: u64 = 3600;

/// Why a delivery cannot be what Paymos says, if it names a time later than its own receipt
/// by more than [`AHEAD_OF_RECEIPT_S`]: its `occurred_at`, a refund's `data.completed_at` or a
/// late payment's `data.paid_late_at`. Paymos reports what happened, never what will; a
/// forged event (a leaked secret) dated a year ahead would otherwise decide which payments a
/// refund returned. None where the receipt is unknown.
#[must_use]
pub fn dated_ahead(envelope: &Envelope, received_at_ms: Option<u64>) -> Option<String> {
    let latest = received_at_ms? / 1000 + AHEAD_OF_RECEIPT_S;
    [
        ("occurred_at", Some(envelope.occurred_at)),
        ("data.completed_at", envelope.data.completed_at),
        ("data.paid_late_at", envelope.data.paid_late_at),
    ]
    .into_iter()
    .find_map(|(field, at)| {
        at.filter(|at| *at > latest).map(|at| {
            format!(
                "{}: {field} {at} is later than the delivery's receipt ({}): Paymos reports what happened, never what will (a forged event?)",
                envelope.event_type,
                latest - AHEAD_OF_RECEIPT_S
            )
        })
    })
}

/// The first money field of `envelope`'s payment or refund that is no decimal of 0 or more.
fn bad_money_of(envelope: &Envelope) -> Option<&'static str> {
    let data = &envelope.data;
    match envelope.category {
        Category::Invoice => bad_money(&[
            ("data.order.amount", &data.order_amount),
            ("data.amount", &data.amount),
            ("data.payment.expected", &data.payment_expected),
        ]),
        Category::Withdrawal => bad_money(&[("data.amount", &data.amount)]),
        Category::Deposit | Category::Unknown => None,
    }
}

/// Money, where an event carries it, is a decimal string of 0 or more (the reference): the
/// first field that is not, if any.
fn bad_money<'a>(fields: &[(&'a str, &Option<String>)]) -> Option<&'a str> {
    fields
        .iter()
        .find(|(_, value)| {
            value
                .as_deref()
                .is_some_and(|v| Amount::parse(v).is_none_or(|a| a.is_negative()))
        })
        .map(|(name, _)| *name)
}

/// Decides the change a verified event asks for. Pure and total: the same envelope always gives
/// the same change, and a money event that misses what it needs becomes [`Change::Unusable`].
#[must_use]
pub fn change_of(envelope: &Envelope) -> Change {
    let data = &envelope.data;
    let ignore = |reason: String| Change::Ignore { reason };
    let unusable = |reason: &str| Change::Unusable {
        reason: format!("{}: {reason}", envelope.event_type),
        resource_id: envelope.resource_id.clone(),
    };
    // State is keyed by these references: a longer one could never be written.
    let too_long =
        |value: &Option<String>| value.as_ref().is_some_and(|v| v.len() > MAX_REFERENCE_LEN);
    let upper = |v: &Option<String>| v.as_deref().map(str::to_ascii_uppercase);
    let resource = envelope.resource_id.clone().unwrap_or_default();
    // The status is the whole rest of the type: `invoice.x.paid` is no `invoice.paid`.
    let status_name = envelope
        .category
        .type_prefix()
        .and_then(|prefix| envelope.event_type.strip_prefix(prefix))
        .unwrap_or_default();
    if let Some(field) = bad_money_of(envelope) {
        return unusable(&format!(
            "{field} is not a decimal string of 0 or more: nothing applied"
        ));
    }
    match envelope.category {
        Category::Invoice => match InvoiceStatus::parse(status_name) {
            Some(_) if too_long(&data.order_external_id) => unusable(&format!(
                "data.order.external_id is longer than {MAX_REFERENCE_LEN} bytes"
            )),
            // `data` is the invoice at the event: a payment whose own snapshot says the
            // invoice did not pay (and announces no late payment) is no payment to ship.
            Some(status) if status.fulfils() && unpaid_snapshot(data) => unusable(&format!(
                "data.status is {}, which does not pay: nothing shipped",
                data.status.as_deref().unwrap_or_default()
            )),
            // And the other way: a close or an open event whose snapshot says the invoice
            // paid is no close (applied, it would take the payment for a late one).
            Some(status) if !status.fulfils() && paid_snapshot(data) => unusable(&format!(
                "data.status is {}, which pays, and {} does not: nothing applied",
                data.status.as_deref().unwrap_or_default(),
                envelope.event_type
            )),
            // A close that carries `paid_late_at` announces a payment (fulfil records the
            // close first: it lands late).
            Some(status) => invoice_change(envelope, resource, status),
            None => ignore(format!("unknown invoice event {}", envelope.event_type)),
        },
        Category::Withdrawal => match WithdrawalStatus::parse(status_name) {
            // A refund says so in `type`; some senders omit it and carry the refunded invoice
            // and the refund `mode` instead.
            Some(status) => Change::Withdrawal {
                withdrawal_id: resource,
                status,
                // A completed withdrawal happened when Paymos completed it (`data.completed_at`,
                // Paymos' record of the moment, which a full refund returns payments until);
                // the event's `occurred_at` where the body names none.
                occurred_at: match (status, envelope.data.completed_at) {
                    (WithdrawalStatus::Completed, Some(at)) => at,
                    _ => envelope.occurred_at,
                },
                kind: match data.kind.as_deref() {
                    Some("refund") => "refund".into(),
                    None if data.mode.is_some() || data.invoice_id.is_some() => "refund".into(),
                    _ => "payout".into(),
                },
                invoice_id: data.invoice_id.clone(),
                amount: data.amount.as_deref().and_then(Amount::parse),
                currency: upper(&data.currency),
                mode: data.mode.clone(),
            },
            None => ignore(format!("unknown withdrawal event {}", envelope.event_type)),
        },
        Category::Deposit => match DepositStatus::parse(status_name) {
            Some(status) => {
                deposit_change(envelope, resource, status).unwrap_or_else(|why| unusable(&why))
            }
            None => ignore(format!("unknown deposit event {}", envelope.event_type)),
        },
        Category::Unknown => ignore(format!("unknown event type {}", envelope.event_type)),
    }
}

/// The change of a deposit event at `status`, or why it is unusable.
fn deposit_change(
    envelope: &Envelope,
    deposit_id: String,
    status: DepositStatus,
) -> Result<Change, String> {
    let data = &envelope.data;
    // State is keyed by these references: a longer one could never be written.
    let too_long =
        |value: &Option<String>| value.as_ref().is_some_and(|v| v.len() > MAX_REFERENCE_LEN);
    // `data` is the deposit at the event: a confirmation whose snapshot says it is still
    // confirming (or reorged) is no confirmation to credit.
    if status == DepositStatus::Confirmed
        && let Some(said) = data
            .status
            .as_deref()
            .filter(|s| DepositStatus::parse(s).is_some_and(|s| s != DepositStatus::Confirmed))
    {
        return Err(format!(
            "data.status is {said}, which {} contradicts: nothing credited",
            envelope.event_type
        ));
    }
    // A final confirmation credits the payer; one that leaves out what a credit needs (the
    // official partial vectors: no payer, net or currency) credits nothing on its own word:
    // Paymos' deposit does, under the check, or it waits for it ([`unsaid_deposit`]). What it
    // says wrongly is unusable.
    let credit = if status == DepositStatus::Confirmed && data.is_final == Some(true) {
        if too_long(&data.payer) {
            return Err(format!(
                "data.payment_channel_external_id is longer than {MAX_REFERENCE_LEN} bytes"
            ));
        }
        let net = data.net.as_deref().map(Amount::parse);
        if net == Some(None) {
            return Err("data.net is not a decimal string".into());
        }
        let net = net.flatten();
        if net.as_ref().is_some_and(|n| !n.is_positive()) {
            return Err("data.net is not more than 0: nothing to credit".into());
        }
        let currency = data.currency.as_deref().map(str::to_ascii_uppercase);
        if too_long(&currency) {
            return Err(format!(
                "data.currency is longer than {MAX_REFERENCE_LEN} bytes"
            ));
        }
        match (&data.payer, net, currency) {
            (Some(payer), Some(net), Some(currency)) => Some(Credit {
                payer: payer.clone(),
                net,
                currency,
                project: data.project_id.clone(),
            }),
            _ => None,
        }
    } else {
        None
    };
    Ok(Change::Deposit {
        deposit_id,
        status,
        occurred_at: envelope.occurred_at,
        credit,
    })
}

/// The close and the payment time of an invoice event announcing a full payment after the
/// invoice closed: a final status that pays nothing (`expired`, `underpaid`, …) whose body
/// carries `data.paid_late_at` (the reference: the status stays final, `paid_late_at` is added
/// beside it; no source says which event announces it).
#[must_use]
pub fn late_payment(envelope: &Envelope) -> Option<(InvoiceStatus, u64)> {
    let at = envelope.data.paid_late_at?;
    let closed = |s: &InvoiceStatus| s.is_final() && !s.fulfils();
    let typed = envelope
        .event_type
        .strip_prefix("invoice.")
        .and_then(InvoiceStatus::parse)?;
    // The close the type names, else the one its snapshot keeps (an `invoice.paid` whose
    // `data.status` stays `expired` beside `paid_late_at`).
    let status = Some(typed).filter(closed).or_else(|| {
        envelope
            .data
            .status
            .as_deref()
            .and_then(InvoiceStatus::parse)
            .filter(|s| typed.fulfils() && closed(s))
    })?;
    (envelope.category == Category::Invoice).then_some((status, at))
}

/// The change of an invoice event at `status` (a close announcing a late payment is a payment
/// at `paid_late_at`).
fn invoice_change(envelope: &Envelope, invoice_id: String, status: InvoiceStatus) -> Change {
    let (status, paid_at) = status_and_payment_time(envelope, status);
    Change::Invoice {
        invoice_id,
        status,
        occurred_at: envelope.occurred_at,
        paid_at: Some(paid_at),
        order: order_of(&envelope.data),
    }
}

/// Whether an invoice event's snapshot (`data.status`) names a status that does not pay, with
/// no late payment announced (`paid_late_at`); an unknown status says nothing.
fn unpaid_snapshot(data: &EventData) -> bool {
    data.paid_late_at.is_none()
        && data
            .status
            .as_deref()
            .and_then(InvoiceStatus::parse)
            .is_some_and(|s| !s.fulfils())
}

/// Whether an invoice event's snapshot (`data.status`) names a status that pays (a close
/// announcing a late payment keeps its own status beside `paid_late_at`).
fn paid_snapshot(data: &EventData) -> bool {
    data.status
        .as_deref()
        .and_then(InvoiceStatus::parse)
        .is_some_and(InvoiceStatus::fulfils)
}

/// An invoice event's status and payment time: a close announcing a late payment
/// ([`late_payment`]) is a payment at `paid_late_at`; any other, its status at its event time.
fn status_and_payment_time(envelope: &Envelope, status: InvoiceStatus) -> (InvoiceStatus, u64) {
    late_payment(envelope).map_or((status, envelope.occurred_at), |(_, at)| {
        (InvoiceStatus::Paid, at)
    })
}

/// The order an invoice event names, its price taken as one pair from one source: the order's
/// own amount and currency, else the invoice's. The payment (`data.payment`, in the paid token)
/// is not the price: a token amount compares with a price only through its rate, so an event
/// carrying only the payment carries no price. An amount is never paired with another source's
/// currency ("10 TON" is not 10 USD), and an empty order id is no order.
fn order_of(data: &EventData) -> OrderRef {
    let (amount, currency) = [
        (&data.order_amount, &data.order_currency),
        (&data.amount, &data.currency),
    ]
    .into_iter()
    .find_map(|(amount, currency)| {
        amount
            .as_deref()
            .and_then(Amount::parse)
            .map(|a| (Some(a), currency.as_deref().map(str::to_ascii_uppercase)))
    })
    .unwrap_or((None, None));
    OrderRef {
        external_id: data
            .order_external_id
            .as_deref()
            .and_then(named)
            .map(str::to_owned),
        amount,
        currency,
        project: data.project_id.clone(),
        home: false,
        unlisted: false,
    }
}

/// An invoice change carrying Paymos' order (as Paymos confirmed it) instead of the event's:
/// Paymos' order id and price whole (what Paymos leaves out is unknown, never the event's: a
/// forged close would plant them); the event's project only where Paymos names none.
#[must_use]
pub fn with_order(change: Change, order: Option<OrderRef>) -> Change {
    match (change, order) {
        (
            Change::Invoice {
                invoice_id,
                status,
                occurred_at,
                paid_at,
                order: claimed,
            },
            Some(confirmed),
        ) => {
            let mut order = confirmed;
            if !order.names_project() {
                order.project = claimed.project;
                order.home = claimed.home;
            }
            Change::Invoice {
                invoice_id,
                status,
                occurred_at,
                paid_at,
                order,
            }
        }
        (change, _) => change,
    }
}

/// Why a deposit confirmation credits nothing on its own word though it may be a final one
/// (its `is_final` left out, or what a credit needs: the official partial vectors), if so: only
/// Paymos' deposit can say (the reverse check, or `recheck` once it is configured).
#[must_use]
pub fn unsaid_deposit(change: &Change, data: &EventData) -> Option<String> {
    match change {
        Change::Deposit {
            status: DepositStatus::Confirmed,
            credit: None,
            ..
        } if data.is_final != Some(false) => Some(
            if data.is_final.is_none() {
                "the confirmation does not say it is final (data.is_final), and only a final one credits"
            } else {
                "the confirmation leaves out what a credit needs (data.payment_channel_external_id, data.net, data.currency)"
            }
            .to_owned()
                + ": nothing credited; with the reverse check configured, `recheck` credits what Paymos confirms",
        ),
        _ => None,
    }
}

/// `change` as Paymos answered it: Paymos' order ([`with_order`]) and Paymos' payment time,
/// which replaces the event's (`None` where Paymos names none: the refund rule then asks a
/// person, [`crate::money::invoice::Standing::AfterRefund`]). A forged event dated in the future or
/// the past dates nothing.
#[must_use]
pub fn as_paymos_says(
    change: Change,
    order: Option<OrderRef>,
    paymos_paid_at: Option<u64>,
) -> Change {
    match with_order(change, order) {
        Change::Invoice {
            invoice_id,
            status,
            occurred_at,
            order,
            ..
        } => Change::Invoice {
            invoice_id,
            status,
            occurred_at,
            paid_at: paymos_paid_at,
            order,
        },
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(event_type: &str, data: &str) -> Vec<u8> {
        format!(r#"{{"event_id":"evt_1","event_type":"{event_type}","version":1,"occurred_at":7,"data":{data}}}"#).into_bytes()
    }

    fn change(event_type: &str, data: &str) -> Change {
        change_of(&Envelope::parse(&body(event_type, data)).unwrap())
    }

    // Missed mutants of this turn (`dated_ahead`): a time up to an hour after the receipt is
    // a clock apart, one second more is no report of Paymos'; each of the three times.
    #[test]
    fn a_time_more_than_an_hour_after_the_receipt_is_no_report_of_paymos() {
        let at = |occurred: u64, data: &str| {
            Envelope::parse(
                format!(
                    r#"{{"event_id":"evt_1","event_type":"withdrawal.completed","version":1,"occurred_at":{occurred},"data":{{"withdrawal_id":"wdr_1"{data}}}}}"#
                )
                .as_bytes(),
            )
            .unwrap()
        };
        let received = Some(1_000_000);
        let edge = 1_000 + AHEAD_OF_RECEIPT_S;
        assert_eq!(dated_ahead(&at(edge, ""), received), None);
        assert_eq!(
            dated_ahead(&at(edge + 1, ""), None),
            None,
            "receipt unknown"
        );
        for (occurred, data, field) in [
            (edge + 1, String::new(), "occurred_at"),
            (
                5,
                format!(r#","completed_at":{}"#, edge + 1),
                "data.completed_at",
            ),
            (
                5,
                format!(r#","paid_late_at":{}"#, edge + 1),
                "data.paid_late_at",
            ),
        ] {
            let why = dated_ahead(&at(occurred, &data), received).expect(field);
            assert!(why.contains(field) && why.contains("(1000)"), "{why}");
        }
    }

    // A person's project is refused only where it is not the
    // record's, and a project is required only where several are applied and none is known.
    #[test]
    fn a_persons_project_is_refused_only_where_the_record_names_another() {
        let two = Projects::parse("prj_a,prj_b");
        let on_record = |project: Option<&str>, home: bool| OrderRef {
            project: project.map(str::to_owned),
            home,
            ..OrderRef::none()
        };
        let home = on_record(None, true);
        let b = on_record(Some("prj_b"), false);
        let unknown = on_record(None, false);
        assert_eq!(two.refuses_person(Some("prj_a"), &home), None);
        assert_eq!(two.refuses_person(Some("prj_b"), &b), None);
        assert_eq!(
            two.refuses_person(None, &home),
            None,
            "the record's project"
        );
        assert!(two.refuses_person(Some("prj_b"), &home).is_some());
        assert!(two.refuses_person(Some("prj_a"), &b).is_some());
        assert!(
            two.refuses_person(None, &unknown).is_some(),
            "name one of two"
        );
        assert_eq!(two.refuses_person(Some("prj_b"), &unknown), None);
        let one = Projects::parse("prj_a");
        assert_eq!(
            one.refuses_person(None, &unknown),
            None,
            "one project: its own"
        );
        // Found by the model's new shapes: a project the stack does not apply, of a record
        // naming none (an open event under the check), marked the invoice another project's.
        for stack in [&one, &two] {
            let why = stack.refuses_person(Some("prj_z"), &unknown);
            assert!(why.is_some_and(|w| w.contains("not a project this stack applies")));
        }
        assert_eq!(
            Projects::all().refuses_person(Some("prj_z"), &unknown),
            None
        );
    }

    // Missed mutant (`delete !` in `with_order`): Paymos' order is taken whole, its project
    // too; the event's project fills in only where Paymos names none.
    #[test]
    fn paymos_order_keeps_its_project_and_takes_the_events_only_where_it_names_none() {
        let claimed = change(
            "invoice.paid",
            r#"{"invoice_id":"inv_1","status":"paid","project_id":"prj_a","order":{"external_id":"o-X"}}"#,
        );
        let paymos = |project: Option<&str>| OrderRef {
            external_id: Some("o-1".into()),
            project: project.map(str::to_owned),
            ..OrderRef::none()
        };
        let order_of = |c: Change| match c {
            Change::Invoice { order, .. } => order,
            other => panic!("not an invoice: {other:?}"),
        };
        let named = order_of(with_order(claimed.clone(), Some(paymos(Some("prj_b")))));
        assert_eq!(
            (named.external_id.as_deref(), named.project.as_deref()),
            (Some("o-1"), Some("prj_b")),
            "Paymos' project wins over the event's"
        );
        let unnamed = order_of(with_order(claimed, Some(paymos(None))));
        assert_eq!(
            (unnamed.external_id.as_deref(), unnamed.project.as_deref()),
            (Some("o-1"), Some("prj_a")),
            "the event's project where Paymos names none; never its order"
        );
    }

    #[test]
    fn a_change_adopts_only_what_it_leaves_out() {
        let mut change = OrderRef {
            amount: Amount::parse("10"),
            currency: Some("USD".into()),
            ..OrderRef::none()
        };
        let recorded = OrderRef {
            external_id: Some("o-1".into()),
            amount: Amount::parse("12"),
            currency: Some("EUR".into()),
            project: Some("prj_b".into()),
            home: false,
            unlisted: false,
        };
        change.adopt(&recorded);
        assert_eq!(change.external_id.as_deref(), Some("o-1"));
        assert_eq!(
            (change.amount, change.currency.as_deref()),
            (Amount::parse("10"), Some("USD"))
        );
        assert_eq!(change.project.as_deref(), Some("prj_b"));
    }

    #[test]
    fn only_a_close_carrying_paid_late_at_announces_a_late_payment() {
        let late = |event_type: &str| {
            late_payment(
                &Envelope::parse(&body(
                    event_type,
                    r#"{"invoice_id":"inv_1","paid_late_at":9}"#,
                ))
                .unwrap(),
            )
        };
        assert_eq!(
            late("invoice.underpaid"),
            Some((InvoiceStatus::Underpaid, 9))
        );
        assert_eq!(late("invoice.expired"), Some((InvoiceStatus::Expired, 9)));
        assert_eq!(late("invoice.paid"), None, "a payment, not a close");
        assert_eq!(late("invoice.awaiting_payment"), None, "open");
    }

    #[test]
    fn invoice_events_carry_their_order() {
        let change = change(
            "invoice.paid",
            r#"{"invoice_id":"inv_1","order":{"external_id":"o-1","amount":"10.50","currency":"usdt"}}"#,
        );
        let Change::Invoice { status, order, .. } = change else {
            panic!()
        };
        assert_eq!(status, InvoiceStatus::Paid);
        assert_eq!(order.external_id.as_deref(), Some("o-1"));
        assert_eq!(order.amount.unwrap().as_str(), "10.50");
        assert_eq!(order.currency.as_deref(), Some("USDT"));
    }

    #[test]
    fn deposits_credit_only_final_confirmations() {
        let confirmed = r#"{"id":"pcd_1","is_final":true,"payment_channel_external_id":"c-42","net":"99.00","currency":"TRX"}"#;
        let c = change("payment_channel.deposit.confirmed", confirmed);
        assert!(
            matches!(c, Change::Deposit { credit: Some(Credit { ref net, .. }), .. } if net.as_str() == "99.00")
        );
        let c = change(
            "payment_channel.deposit.confirmed",
            r#"{"id":"pcd_1","is_final":false,"net":"1"}"#,
        );
        assert!(matches!(c, Change::Deposit { credit: None, .. }));
        let c = change(
            "payment_channel.deposit.reorged",
            r#"{"id":"pcd_1","is_final":true,"net":"1"}"#,
        );
        assert!(matches!(
            c,
            Change::Deposit {
                credit: None,
                status: DepositStatus::Reorged,
                ..
            }
        ));
    }

    // A confirmation that leaves out what a credit
    // needs, or whether it is final (the official partial vectors), was unusable, or `updated`
    // and never credited nor listed. It credits nothing on its own word and says why: Paymos'
    // deposit decides (the reverse check, or `recheck`). One that says `is_final: false` is
    // not final, and waits for nothing.
    #[test]
    fn a_confirmation_without_what_it_credits_waits_for_paymos_word() {
        for (data, why) in [
            (
                r#"{"id":"pcd_1","is_final":true,"payment_channel_external_id":"c","net":1.5,"currency":"TRX"}"#,
                "data.net",
            ),
            (
                r#"{"id":"pcd_1","is_final":true,"net":"1.5","currency":"TRX"}"#,
                "data.payment_channel_external_id",
            ),
            (
                r#"{"id":"pcd_1","is_final":true,"payment_channel_external_id":"c","net":"1.5"}"#,
                "data.currency",
            ),
            (
                r#"{"id":"pcd_1","payment_channel_external_id":"c","net":"1.5","currency":"TRX"}"#,
                "data.is_final",
            ),
        ] {
            let envelope =
                Envelope::parse(&body("payment_channel.deposit.confirmed", data)).unwrap();
            let c = change_of(&envelope);
            assert!(matches!(&c, Change::Deposit { credit: None, .. }), "{c:?}");
            let unsaid = unsaid_deposit(&c, &envelope.data).unwrap_or_default();
            assert!(
                unsaid.contains(why) && unsaid.contains("recheck"),
                "{unsaid}"
            );
        }
        let not_final = r#"{"id":"pcd_1","is_final":false,"payment_channel_external_id":"c","net":"1.5","currency":"TRX"}"#;
        let envelope =
            Envelope::parse(&body("payment_channel.deposit.confirmed", not_final)).unwrap();
        assert_eq!(unsaid_deposit(&change_of(&envelope), &envelope.data), None);
        let wrong = r#"{"id":"pcd_1","is_final":true,"payment_channel_external_id":"c","net":"abc","currency":"TRX"}"#;
        assert!(matches!(
            change("payment_channel.deposit.confirmed", wrong),
            Change::Unusable { reason, .. } if reason.contains("data.net")
        ));
    }

    #[test]
    fn refunds_are_recognised_by_type_or_by_the_contracts_fields() {
        let kind = |data: &str| match change("withdrawal.completed", data) {
            Change::Withdrawal { kind, .. } => kind,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            kind(r#"{"withdrawal_id":"wdr_1","type":"refund"}"#),
            "refund"
        );
        assert_eq!(
            kind(r#"{"withdrawal_id":"wdr_1","invoice_id":"inv_1","mode":"full"}"#),
            "refund"
        );
        assert_eq!(
            kind(r#"{"withdrawal_id":"wdr_1","mode":"overpayment"}"#),
            "refund"
        );
        assert_eq!(kind(r#"{"withdrawal_id":"wdr_1"}"#), "payout");
        assert_eq!(
            kind(r#"{"withdrawal_id":"wdr_1","type":"payout"}"#),
            "payout"
        );
    }

    #[test]
    fn an_amount_is_paired_with_its_own_currency_only() {
        let price = |data: &str| match change("invoice.paid", data) {
            Change::Invoice { order, .. } => {
                (order.amount.map(|a| a.as_str().to_owned()), order.currency)
            }
            other => panic!("{other:?}"),
        };
        // 10 TON is not 10 USD, and a payment is not a price: an event carrying only the
        // payment carries no price.
        assert_eq!(
            price(
                r#"{"invoice_id":"inv_1","order":{"currency":"usd"},"payment":{"expected":"10","currency":"ton"}}"#
            ),
            (None, None)
        );
        assert_eq!(
            price(
                r#"{"invoice_id":"inv_1","order":{"amount":"9.99","currency":"usd"},"payment":{"expected":"10","currency":"ton"}}"#
            ),
            (Some("9.99".into()), Some("USD".into()))
        );
        // An amount whose source names no currency stays without one (the guard refuses it).
        assert_eq!(
            price(r#"{"invoice_id":"inv_1","amount":"10","payment":{"currency":"usdt"}}"#),
            (Some("10".into()), None)
        );
        assert_eq!(price(r#"{"invoice_id":"inv_1"}"#), (None, None));
    }

    #[test]
    fn bounds_are_checked_when_the_change_is_decided() {
        let long = "o".repeat(MAX_REFERENCE_LEN + 1);
        let c = change(
            "invoice.paid",
            &format!(r#"{{"invoice_id":"inv_1","order":{{"external_id":"{long}"}}}}"#),
        );
        assert!(
            matches!(&c, Change::Unusable { reason, .. } if reason.contains("data.order.external_id")),
            "{c:?}"
        );
        let c = change(
            "payment_channel.deposit.confirmed",
            &format!(
                r#"{{"id":"pcd_1","is_final":true,"payment_channel_external_id":"{long}","net":"1","currency":"TRX"}}"#
            ),
        );
        assert!(
            matches!(&c, Change::Unusable { reason, .. } if reason.contains("payment_channel_external_id")),
            "{c:?}"
        );
        for net in ["0", "-5", "0.00"] {
            let c = change(
                "payment_channel.deposit.confirmed",
                &format!(
                    r#"{{"id":"pcd_1","is_final":true,"payment_channel_external_id":"c","net":"{net}","currency":"TRX"}}"#
                ),
            );
            assert!(
                matches!(&c, Change::Unusable { reason, .. } if reason.contains("data.net")),
                "{net}: {c:?}"
            );
        }
    }

    #[test]
    fn an_event_type_is_matched_whole() {
        for t in ["invoice.x.paid", "invoice.paid.x", "withdrawal.x.completed"] {
            let c = change(
                t,
                r#"{"invoice_id":"inv_1","withdrawal_id":"wdr_1","order":{"external_id":"o"}}"#,
            );
            assert!(matches!(c, Change::Ignore { .. }), "{t}: {c:?}");
        }
        let c = change("payment_channel.deposit.x.confirmed", r#"{"id":"pcd_1"}"#);
        assert!(matches!(c, Change::Ignore { .. }), "{c:?}");
    }

    #[test]
    fn unknown_types_and_statuses_are_ignored() {
        assert!(matches!(
            change("payout.batch", "{}"),
            Change::Ignore { .. }
        ));
        assert!(matches!(
            change("invoice.refunded", r#"{"invoice_id":"inv_1"}"#),
            Change::Ignore { .. }
        ));
    }
}
