//! The state table's items as the domain reads them: one typed record per item kind. The
//! adapter that stores them is the only code that knows their attributes (it builds these from
//! a read, a scan or a stream image alike); the hand-off, the tools and the tests receive them.

use crate::money::change::OrderRef;
use crate::money::effect::PaidInvoice;
use crate::money::invoice::InvoiceSeen;
use crate::money::status::{Amount, DepositStatus, InvoiceStatus, WithdrawalStatus};
use crate::wire::work::DeliveryState;

/// One item of the state table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateRecord {
    /// An invoice (`inv_…`).
    Invoice(InvoiceRecord),
    /// The fulfilment of a paid invoice (`fulfilment#inv_…`), written once with its payment.
    Fulfilment(FulfilmentRecord),
    /// A delivery that waits for a person (`review#evt_…`).
    Review(ReviewRecord),
    /// A withdrawal or refund (`wdr_…`).
    Withdrawal(WithdrawalRecord),
    /// A payment-channel deposit (`pcd_…`).
    Deposit(DepositRecord),
    /// A payer's balance in one currency.
    Balance(BalanceRecord),
    /// An operator's action, as the audit trail keeps it (`action#…`).
    Action(OperatorAction),
    /// Any other item (an order's claim, an expected order, an item a custom effect wrote).
    Other {
        /// Its key.
        key: String,
        /// Its kind, when it has one.
        kind: Option<String>,
    },
}

impl StateRecord {
    /// When the item last changed (Unix ms), for the kinds that keep it.
    #[must_use]
    pub fn at_ms(&self) -> Option<u64> {
        match self {
            Self::Invoice(r) => r.updated_at_ms,
            Self::Fulfilment(r) => r.fulfilled_at_ms,
            Self::Review(r) => r.created_at_ms,
            Self::Withdrawal(r) => r.updated_at_ms,
            Self::Deposit(r) => r.updated_at_ms,
            Self::Action(a) => Some(a.at_ms),
            Self::Balance(_) | Self::Other { .. } => None,
        }
    }
}

/// An invoice item: the record the rules read, and when it last changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvoiceRecord {
    /// `inv_…`.
    pub invoice_id: String,
    /// The record, as the rules read it.
    pub seen: InvoiceSeen,
    /// Its last change (Unix ms).
    pub updated_at_ms: Option<u64>,
}

/// An invoice's fulfilment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FulfilmentRecord {
    /// `inv_…`.
    pub invoice_id: String,
    /// The order it fulfilled, with the price as Paymos sent it.
    pub order: OrderRef,
    /// `paid` or `paid_over`.
    pub status: Option<InvoiceStatus>,
    /// The delivery (`evt_…`) or the person or job (`manual:…`) whose write won.
    pub won_by: String,
    /// When (Unix ms).
    pub fulfilled_at_ms: Option<u64>,
}

impl FulfilmentRecord {
    /// The fulfilment of `paid`, as the store writes it in the payment's transaction.
    #[must_use]
    pub fn of(paid: &PaidInvoice<'_>) -> Self {
        Self {
            invoice_id: paid.invoice_id.to_owned(),
            order: paid.order.clone(),
            status: Some(paid.status),
            won_by: paid.source.id(),
            fulfilled_at_ms: Some(paid.at_ms),
        }
    }
}

/// A delivery that waits for a person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReviewRecord {
    /// The delivery's `evt_…`.
    pub event_id: String,
    /// `unconfirmed` or `unusable`.
    pub reason: String,
    /// The resource it names, when it names one.
    pub resource_id: Option<String>,
    /// Why, for the operator.
    pub why: Option<String>,
    /// When (Unix ms).
    pub created_at_ms: Option<u64>,
}

/// A withdrawal: a payout, or a refund of an invoice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WithdrawalRecord {
    /// `wdr_…`.
    pub withdrawal_id: String,
    /// Its status.
    pub status: Option<WithdrawalStatus>,
    /// `payout` or `refund`, as Paymos says.
    pub kind: Option<String>,
    /// The invoice a refund pays back.
    pub invoice_id: Option<String>,
    /// How much, as Paymos sent it.
    pub amount: Option<Amount>,
    /// In which currency.
    pub currency: Option<String>,
    /// Its last change (Unix ms).
    pub updated_at_ms: Option<u64>,
}

/// A payment-channel deposit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DepositRecord {
    /// `pcd_…`.
    pub deposit_id: String,
    /// Its status.
    pub status: Option<DepositStatus>,
    /// Whether the payer's balance was credited (once).
    pub credited: bool,
    /// The payer's channel id.
    pub payer: Option<String>,
    /// What was credited, as Paymos sent it.
    pub net: Option<Amount>,
    /// In which currency.
    pub currency: Option<String>,
    /// Its last change (Unix ms).
    pub updated_at_ms: Option<u64>,
    /// The project's key scope (none: the home project).
    pub project: Option<String>,
}

/// A payer's balance in one currency.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BalanceRecord {
    /// The payer's channel id.
    pub payer: String,
    /// The currency.
    pub currency: String,
    /// The exact balance.
    pub balance: Amount,
    /// The project's key scope (none: the home project).
    pub project: Option<String>,
}

/// A delivery in the deliveries ledger, as the tools read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryRecord {
    /// `evt_…`.
    pub event_id: String,
    /// Received, or processed.
    pub state: DeliveryState,
    /// How it ended (the [`crate::money::change::Applied`] name), once processed.
    pub outcome: Option<String>,
}

/// One step of a resource's story, as its item keeps it: when (Unix seconds, Paymos' clock) it
/// first reached a status, and who moved it there (a delivery's ledger key, or `manual:` and the
/// actor). Stored as an attribute per status (`step_paid`: `1700000100|test#evt_…`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct StoryStep {
    /// When.
    pub at: u64,
    /// The status it reached.
    pub status: String,
    /// Who moved it there.
    pub by: String,
}

impl StoryStep {
    /// What a step's attribute name starts with.
    pub const PREFIX: &str = "step_";

    /// The attribute it is stored as.
    #[must_use]
    pub fn attribute(&self) -> String {
        format!("{}{}", Self::PREFIX, self.status)
    }

    /// The value it is stored as.
    #[must_use]
    pub fn value(&self) -> String {
        format!("{}|{}", self.at, self.by)
    }

    /// The story of an item's `attributes` (name, text value): its steps, oldest first (then by
    /// status); an attribute that is not a step is left out.
    #[must_use]
    pub fn story<'a>(attributes: impl IntoIterator<Item = (&'a str, &'a str)>) -> Vec<Self> {
        let mut story: Vec<Self> = attributes
            .into_iter()
            .filter_map(|(name, value)| {
                let status = name.strip_prefix(Self::PREFIX)?;
                let (at, by) = value.split_once('|')?;
                Some(Self {
                    at: at.parse().ok()?,
                    status: status.to_owned(),
                    by: by.to_owned(),
                })
            })
            .collect();
        story.sort();
        story
    }
}

/// Which action a person took.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ActionKind {
    /// `release`: a held or late-paid payment fulfilled on a person's word.
    Release,
    /// `mark-paid`: an invoice marked paid by hand.
    MarkPaid,
    /// `recheck`: unconfirmed deliveries re-read at Paymos.
    Recheck,
    /// `redrive` / `events redrive`: dead letters moved back to their queue.
    Redrive,
    /// `pending --resend`: stranded deliveries sent to the work queue again.
    Resend,
    /// `events resend`: the hand-off's facts of one resource, or of what was committed since a
    /// time, published again with their idempotency keys (nothing in the tables changes).
    EventsResend,
    /// `exceptions --resolve`: a delivery a person settled outside the stack (an order
    /// conflict, an unusable delivery applied by hand) taken off what waits.
    Resolve,
    /// `events pause`: the hand-off's deliveries to `WebhookTargetUrl` switched off (the
    /// events wait in their queue).
    EventsPause,
    /// `events resume`: switched on again.
    EventsResume,
    /// `events test`: a signed test event posted to `WebhookTargetUrl` by the deployed stack.
    EventsTest,
}

impl ActionKind {
    /// Every kind, in the order the command line lists them.
    pub const ALL: [Self; 10] = [
        Self::Release,
        Self::MarkPaid,
        Self::Recheck,
        Self::Redrive,
        Self::Resend,
        Self::EventsResend,
        Self::Resolve,
        Self::EventsPause,
        Self::EventsResume,
        Self::EventsTest,
    ];

    /// Whether its entry is published as an `Operator Action` on the bus: the kinds detail
    /// version 5 names. The hand-off's own switch and test are in the audit trail alone (a
    /// consumer validating version 5 would refuse their kind).
    #[must_use]
    pub fn published(self) -> bool {
        !matches!(
            self,
            Self::EventsPause | Self::EventsResume | Self::EventsTest
        )
    }

    /// Its name, as the command line spells it (`mark-paid`).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Release => "release",
            Self::MarkPaid => "mark-paid",
            Self::Recheck => "recheck",
            Self::Redrive => "redrive",
            Self::Resend => "resend",
            Self::EventsResend => "events-resend",
            Self::Resolve => "resolve",
            Self::EventsPause => "events-pause",
            Self::EventsResume => "events-resume",
            Self::EventsTest => "events-test",
        }
    }

    /// The kind named `name` ([`ActionKind::as_str`]).
    #[must_use]
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

impl std::fmt::Display for ActionKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One entry of the audit trail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperatorAction {
    /// What was done.
    pub kind: ActionKind,
    /// Who: the caller's AWS identity (an ARN), or the `--actor` named on `dev`. Never a secret.
    pub actor: String,
    /// When it began (Unix ms).
    pub at_ms: u64,
    /// Why, as the person said (a release's reason; none where the action asks for none).
    pub reason: Option<String>,
    /// What it was done to: an invoice or resource id, `all-unconfirmed`, a queue's name, or
    /// (`events resend --since`) `since <time>`.
    pub subject: String,
    /// What it changed, in a few words (`fulfilled`, `already_final`, `2 rechecked: …`), why
    /// it failed, or [`BEGUN`] until its action has answered.
    pub result: String,
    /// For a job, how many it moved; for a recheck, how many deliveries it re-read; for an
    /// `events resend`, how many facts it published.
    pub count: Option<u64>,
}

impl OperatorAction {
    /// The entry's key: when, what, to which resource and by whom, so that two entries of one
    /// action never share a key, and the key alone says what happened.
    #[must_use]
    pub fn key(&self) -> String {
        action_key(self.at_ms, self.kind, &self.subject, &self.actor)
    }
}

/// What an entry says from before its action until the action answers; for good, if the
/// action was cut short.
pub const BEGUN: &str = "begun: no result recorded";

impl OperatorAction {
    /// The entry of an action about to be taken, written before it (record before work): an
    /// action whose entry cannot be written is not taken, and one cut short still says who
    /// began it, when, to what and why.
    #[must_use]
    pub fn begun(
        kind: ActionKind,
        (actor, at_ms): (&str, u64),
        subject: &str,
        reason: Option<&str>,
    ) -> Self {
        Self {
            kind,
            actor: actor.to_owned(),
            at_ms,
            reason: reason.map(str::to_owned),
            subject: subject.to_owned(),
            result: BEGUN.to_owned(),
            count: None,
        }
    }

    /// Whether its action has answered.
    #[must_use]
    pub fn finished(&self) -> bool {
        self.result != BEGUN
    }
}

/// The key of an audit entry ([`OperatorAction::key`]).
#[must_use]
pub fn action_key(at_ms: u64, kind: ActionKind, subject: &str, actor: &str) -> String {
    format!("action#{at_ms:013}#{kind}#{subject}#{actor}")
}

#[cfg(test)]
mod tests {
    use super::{ActionKind, StoryStep, action_key};

    #[test]
    fn a_story_reads_back_in_paymos_time_whatever_the_stored_order() {
        let step = |at, status: &str, by: &str| StoryStep {
            at,
            status: status.to_owned(),
            by: by.to_owned(),
        };
        let paid = step(1_700_000_100, "paid", "test#evt_2");
        let confirming = step(999, "confirming", "manual:support|alice");
        assert_eq!(
            (paid.attribute().as_str(), paid.value().as_str()),
            ("step_paid", "1700000100|test#evt_2")
        );
        let stored = [
            (paid.attribute(), paid.value()),
            ("status".to_owned(), "paid".to_owned()),
            ("step_expired".to_owned(), "not a time|evt_3".to_owned()),
            (confirming.attribute(), confirming.value()),
        ];
        assert_eq!(
            StoryStep::story(stored.iter().map(|(n, v)| (n.as_str(), v.as_str()))),
            [confirming, paid],
            "in time, an actor's `|` kept, what is not a step left out"
        );
    }

    #[test]
    fn two_actions_differing_in_time_kind_subject_or_actor_have_two_keys() {
        let base = action_key(7, ActionKind::Release, "inv_1", "alice");
        assert_eq!(base, "action#0000000000007#release#inv_1#alice");
        for other in [
            action_key(8, ActionKind::Release, "inv_1", "alice"),
            action_key(7, ActionKind::MarkPaid, "inv_1", "alice"),
            action_key(7, ActionKind::Release, "inv_2", "alice"),
            action_key(7, ActionKind::Release, "inv_1", "bob"),
        ] {
            assert_ne!(base, other);
        }
    }
}
