//! The reverse check: before a webhook moves money or closes a payment, re-read the resource at
//! Paymos, as the official plugins do. A valid signature proves the sender held the secret, not
//! that the payer paid. Once the API answers, its answer is the fact: a paid invoice is fulfilled
//! with the API's order (id, amounts, currencies), and an event that disagrees with it (another
//! order, another amount, a status Paymos does not have) changes nothing and is recorded
//! `unconfirmed` with the difference named.
//!
//! What is read back: invoice payments and closures, refunds, withdrawals reaching a final
//! status, and deposits that credit a payer. Open statuses and advisories move nothing and are
//! not checked.

use std::future::Future;

use crate::money::change::{Change, Credit, OrderRef, as_paymos_says};
use crate::money::invoice::RefundMode;
use crate::money::status::{Amount, DepositStatus, InvoiceStatus, WithdrawalStatus};
use crate::port::{PortError, PortErrorKind};
use crate::wire::envelope::EventData;
use crate::wire::signature::Environment;

/// How many receives of a message a "not yet" answer is retried for before the delivery is
/// recorded `unconfirmed`. Paymos documents no lag between a webhook and its API; its official
/// plugins re-read open invoices every 10 to 15 minutes, so the check waits as long: fulfil's
/// redelivery waits 15 s after the first receive, then twice as long each time
/// ([`crate::roads::fulfil::FulfilError::redelivery_in_s`]), and the 7th receive comes some 16 minutes
/// (945 s) after the first. Well below the queue's `maxReceiveCount`
/// ([`crate::wire::work::WORK_RECEIVES`]), so a slow API never sends the message to the DLQ by
/// itself; a payment Paymos shows later still is `unconfirmed`, for `recheck`.
pub const NOT_YET_RECEIVES: u32 = 7;

/// The default patience of the reverse check, in minutes: as long as the official plugins
/// wait before they re-read an open invoice (`ReverseCheckPatienceMinutes`).
pub const DEFAULT_PATIENCE_MINUTES: u32 = 15;

/// The longest patience, in minutes: the last receive before the queue's `maxReceiveCount`
/// comes some 135 minutes after the first.
pub const MAX_PATIENCE_MINUTES: u32 = 135;

/// The receive at which a "not yet" answer is final for a patience of `minutes`: the first that
/// comes at least that long after the first receive (fulfil's redelivery waits 15 s, then twice
/// as long each time up to 15 minutes), never later than the one before the queue's
/// `maxReceiveCount` ([`crate::wire::work::WORK_RECEIVES`]).
#[must_use]
pub fn receives_for(minutes: u32) -> u32 {
    let wanted_s = u64::from(minutes) * 60;
    let mut elapsed_s = 0_u64;
    let mut receives = 1;
    while elapsed_s < wanted_s && receives < crate::wire::work::WORK_RECEIVES - 1 {
        let doublings = (receives - 1).min(16);
        elapsed_s += u64::from((15_u32 << doublings).min(900));
        receives += 1;
    }
    receives.max(2)
}

/// An invoice as Paymos' API has it now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfirmedInvoice {
    /// Its status at Paymos.
    pub status: String,
    /// A sandbox invoice.
    pub is_test: bool,
    /// `order.external_id`: the merchant's order.
    pub order_id: Option<String>,
    /// `order.amount`: what the order is priced at (exact decimal).
    pub order_amount: Option<Amount>,
    /// `order.currency`, upper case (the pricing currency, e.g. USD).
    pub order_currency: Option<String>,
    /// `payment.expected`: the token amount the payer was asked for.
    pub token_amount: Option<Amount>,
    /// `payment.currency`, upper case (the token, e.g. USDT).
    pub token_currency: Option<String>,
    /// `paid_late_at` is set: the payer paid after the invoice closed.
    pub paid_late: bool,
    /// `project_id`: the merchant's project it belongs to.
    pub project_id: Option<String>,
    /// When it was paid (Unix s): its late payment's `paid_late_at`, else its `completed_at`.
    pub paid_at: Option<u64>,
}

impl ConfirmedInvoice {
    /// The order as Paymos has it: what a confirmed payment is fulfilled with.
    #[must_use]
    pub fn order(&self) -> OrderRef {
        OrderRef {
            // An empty `external_order_id` is no order.
            external_id: self
                .order_id
                .as_deref()
                .and_then(crate::money::change::named)
                .map(str::to_owned),
            amount: self.order_amount.clone(),
            currency: self.order_currency.clone(),
            project: self.project_id.clone(),
            home: false,
            unlisted: false,
        }
    }
}

/// A withdrawal (a payout or a refund) as Paymos' API has it now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfirmedWithdrawal {
    /// Its status at Paymos.
    pub status: String,
    /// A sandbox withdrawal.
    pub is_test: bool,
    /// For a refund, the invoice it pays back.
    pub invoice_id: Option<String>,
    /// For a refund, whether its mode is `full`.
    pub full: Option<bool>,
    /// The amount.
    pub amount: Option<Amount>,
    /// The currency, upper case.
    pub currency: Option<String>,
    /// For a refund, the project of the invoice it pays back (`project_id`); a payout names
    /// none.
    pub project_id: Option<String>,
    /// When it completed, by Paymos' clock (Unix s): a refund returns what was paid until then.
    pub completed_at: Option<u64>,
}

/// A payment-channel deposit as Paymos' API has it now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfirmedDeposit {
    /// Its status at Paymos.
    pub status: String,
    /// Whether the status can no longer change.
    pub is_final: bool,
    /// A sandbox deposit.
    pub is_test: bool,
    /// `payment_channel_external_id`: the payer.
    pub payer: String,
    /// The net amount credited to the merchant.
    pub net: Option<Amount>,
    /// The currency, upper case.
    pub currency: String,
    /// `project_id`: the project whose payer it credits (a payer id is unique only within its
    /// project).
    pub project_id: Option<String>,
}

/// What the API answered about a resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AtSource<T> {
    /// The resource exists.
    Found(T),
    /// 404: unknown to Paymos with this key (forged, or another project's).
    NotFound,
}

/// Re-reads resources at the source. Implementations bound each call in time (one retry at
/// most, a hard deadline well inside the function's timeout), answer 404 as
/// [`AtSource::NotFound`], and a refused key (401/403) as a [`PortErrorKind::Misconfigured`]
/// error: the stack's problem, never the payment's.
pub trait PaymentConfirmation: Send + Sync {
    /// The invoice as Paymos has it now.
    ///
    /// # Errors
    /// [`PortError`] when the API could not answer in time or refused the key.
    fn invoice(
        &self,
        invoice_id: &str,
    ) -> impl Future<Output = Result<AtSource<ConfirmedInvoice>, PortError>> + Send;

    /// The withdrawal (`refund`: read as a refund) as Paymos has it now.
    ///
    /// # Errors
    /// As [`PaymentConfirmation::invoice`].
    fn withdrawal(
        &self,
        withdrawal_id: &str,
        refund: bool,
    ) -> impl Future<Output = Result<AtSource<ConfirmedWithdrawal>, PortError>> + Send;

    /// The deposit as Paymos has it now.
    ///
    /// # Errors
    /// As [`PaymentConfirmation::invoice`].
    fn deposit(
        &self,
        deposit_id: &str,
    ) -> impl Future<Output = Result<AtSource<ConfirmedDeposit>, PortError>> + Send;

    /// The completed refunds of `invoice_id`: read before a payment Paymos confirms is applied,
    /// so a full refund whose webhook is still on its way returns what was paid before it.
    ///
    /// # Errors
    /// [`PortError`] of its kind.
    fn refunds_of(
        &self,
        invoice_id: &str,
    ) -> impl Future<Output = Result<Vec<crate::money::invoice::Refund>, PortError>> + Send;
}

/// No reverse check (the default).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoConfirmation;

impl PaymentConfirmation for NoConfirmation {
    async fn invoice(&self, _: &str) -> Result<AtSource<ConfirmedInvoice>, PortError> {
        Err(PortError::new("reverse check", "not configured"))
    }

    async fn withdrawal(
        &self,
        _: &str,
        _: bool,
    ) -> Result<AtSource<ConfirmedWithdrawal>, PortError> {
        Err(PortError::new("reverse check", "not configured"))
    }

    async fn deposit(&self, _: &str) -> Result<AtSource<ConfirmedDeposit>, PortError> {
        Err(PortError::new("reverse check", "not configured"))
    }

    async fn refunds_of(&self, _: &str) -> Result<Vec<crate::money::invoice::Refund>, PortError> {
        Err(PortError::new("reverse check", "not configured"))
    }
}

/// What a paid event claims: the order, and the amounts in the two currencies an invoice has.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PaidClaim {
    /// `data.order.external_id`.
    pub order_id: Option<String>,
    /// `data.order.amount` (or, in older envelopes, `data.amount`).
    pub order_amount: Option<Amount>,
    /// `data.order.currency` (or `data.currency`).
    pub order_currency: Option<String>,
    /// `data.payment.expected`.
    pub token_amount: Option<Amount>,
    /// `data.payment.currency`.
    pub token_currency: Option<String>,
}

impl PaidClaim {
    /// The claim of an event's `data`.
    #[must_use]
    pub fn of(data: &EventData) -> Self {
        let upper = |v: &Option<String>| v.as_deref().map(str::to_ascii_uppercase);
        let (order_amount, order_currency) = if data.order_amount.is_some() {
            (data.order_amount.as_deref(), upper(&data.order_currency))
        } else {
            (data.amount.as_deref(), upper(&data.currency))
        };
        Self {
            order_id: data.order_external_id.clone(),
            order_amount: order_amount.and_then(Amount::parse),
            order_currency,
            token_amount: data.payment_expected.as_deref().and_then(Amount::parse),
            token_currency: upper(&data.payment_currency),
        }
    }
}

/// The reverse check's verdict on one event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Paymos confirms it: apply it (a paid invoice with Paymos' order).
    Confirmed,
    /// Paymos does not show it yet (a status still moving there): check again later.
    NotYet {
        /// What Paymos shows now.
        status: String,
    },
    /// Paid, but after the invoice closed `closed` at Paymos: a late payment, for a person.
    PaidLate {
        /// The final status Paymos keeps.
        closed: InvoiceStatus,
    },
    /// Paymos contradicts it: nothing applied, recorded `unconfirmed` with the difference.
    Unconfirmed(String),
    /// Paymos does not know it with this key (404): forged, or of a project the key does not
    /// read (the sources do not say whether one key reads every project). Nothing applied,
    /// recorded `unconfirmed`; never refuted on this word: a person who checked at Paymos says
    /// which.
    Unknown(String),
}

const NOT_FOUND: &str = "Paymos does not know it (404): forged, or another project's";

/// The differences between what an event claims and Paymos' invoice: the order and every
/// amount the event carries (an amount it leaves out is taken from Paymos, never compared).
fn claim_differs(claim: &PaidClaim, invoice: &ConfirmedInvoice) -> Option<String> {
    let amount = |a: &Option<Amount>, b: &Option<Amount>| match (a, b) {
        (Some(a), Some(b)) => !a.same_value(b),
        (Some(_), None) => true,
        _ => false,
    };
    let currency = |a: &Option<String>, b: &Option<String>| match (a, b) {
        (Some(a), Some(b)) => !a.eq_ignore_ascii_case(b),
        (Some(_), None) => true,
        _ => false,
    };
    let show = |v: Option<&str>| v.unwrap_or("none").to_owned();
    if claim.order_id.is_some() && claim.order_id != invoice.order_id {
        return Some(format!(
            "the event names order {}, Paymos' invoice order {}",
            show(claim.order_id.as_deref()),
            show(invoice.order_id.as_deref())
        ));
    }
    if amount(&claim.order_amount, &invoice.order_amount)
        || currency(&claim.order_currency, &invoice.order_currency)
    {
        return Some(format!(
            "the event's order amount {} {} differs from Paymos' {} {}",
            show(claim.order_amount.as_ref().map(Amount::as_str)),
            show(claim.order_currency.as_deref()),
            show(invoice.order_amount.as_ref().map(Amount::as_str)),
            show(invoice.order_currency.as_deref())
        ));
    }
    if amount(&claim.token_amount, &invoice.token_amount)
        || currency(&claim.token_currency, &invoice.token_currency)
    {
        return Some(format!(
            "the event's payment {} {} differs from Paymos' {} {}",
            show(claim.token_amount.as_ref().map(Amount::as_str)),
            show(claim.token_currency.as_deref()),
            show(invoice.token_amount.as_ref().map(Amount::as_str)),
            show(invoice.token_currency.as_deref())
        ));
    }
    None
}

/// The verdict on an invoice event announcing `status`, from Paymos' answer.
#[must_use]
pub fn invoice_verdict(
    at_source: &AtSource<ConfirmedInvoice>,
    status: InvoiceStatus,
    claim: &PaidClaim,
) -> Verdict {
    let AtSource::Found(invoice) = at_source else {
        return Verdict::Unknown(format!("invoice: {NOT_FOUND}"));
    };
    let there = InvoiceStatus::parse(&invoice.status);
    let not_yet = || Verdict::NotYet {
        status: invoice.status.clone(),
    };
    if status.fulfils() {
        if let Some(difference) = claim_differs(claim, invoice) {
            return Verdict::Unconfirmed(difference);
        }
        return match there {
            Some(s) if s.fulfils() => Verdict::Confirmed,
            Some(s) if s.is_final() && invoice.paid_late => Verdict::PaidLate { closed: s },
            Some(s) if s.is_final() => Verdict::Unconfirmed(format!(
                "Paymos says the invoice closed {s} and was not paid"
            )),
            _ => not_yet(),
        };
    }
    if !status.is_final() {
        // An open status moves no money and closes nothing.
        return Verdict::Confirmed;
    }
    match there {
        Some(s) if s == status => Verdict::Confirmed,
        Some(s) if s.is_final() => Verdict::Unconfirmed(format!(
            "the event says {status}, Paymos says the invoice is {s}"
        )),
        _ => not_yet(),
    }
}

/// The verdict on a withdrawal event reaching a final `status` (a refund: `refund`).
#[must_use]
pub fn withdrawal_verdict(
    at_source: &AtSource<ConfirmedWithdrawal>,
    status: WithdrawalStatus,
    refund: Option<(&Option<String>, bool)>,
    amount: &Option<Amount>,
) -> Verdict {
    let AtSource::Found(there) = at_source else {
        let what = if refund.is_some() {
            "refund"
        } else {
            "withdrawal"
        };
        return Verdict::Unknown(format!("{what}: {NOT_FOUND}"));
    };
    let parsed = WithdrawalStatus::parse(&there.status);
    match parsed {
        Some(s) if s == status => {}
        Some(s) if s.is_final() => {
            return Verdict::Unconfirmed(format!(
                "the event says {}, Paymos says {}",
                status.as_str(),
                s.as_str()
            ));
        }
        _ => {
            return Verdict::NotYet {
                status: there.status.clone(),
            };
        }
    }
    if let Some((invoice_id, full)) = refund {
        if invoice_id.is_some() && *invoice_id != there.invoice_id {
            return Verdict::Unconfirmed(format!(
                "the event refunds {}, Paymos' refund is of {}",
                invoice_id.as_deref().unwrap_or("none"),
                there.invoice_id.as_deref().unwrap_or("none")
            ));
        }
        if full && there.full == Some(false) {
            return Verdict::Unconfirmed(
                "the event says a full refund, Paymos' refund is not full".into(),
            );
        }
    }
    if let (Some(a), Some(b)) = (amount, &there.amount)
        && !a.same_value(b)
    {
        return Verdict::Unconfirmed(format!(
            "the event's amount {} differs from Paymos' {}",
            a.as_str(),
            b.as_str()
        ));
    }
    Verdict::Confirmed
}

/// The verdict on a deposit confirmation by Paymos' deposit alone: confirmed and final, with a
/// payer and a net, it credits as Paymos has it (its payer, net, currency and project), what
/// the event left out too ([`contradicts`] judges what it said). Not final yet: later; final but
/// not confirmed (reorged): nothing.
#[must_use]
pub fn deposit_verdict(at_source: &AtSource<ConfirmedDeposit>) -> Verdict {
    let AtSource::Found(there) = at_source else {
        return Verdict::Unknown(format!("deposit: {NOT_FOUND}"));
    };
    if there.status != "confirmed" || !there.is_final {
        return if there.is_final {
            Verdict::Unconfirmed(format!("Paymos says the deposit is {}", there.status))
        } else {
            Verdict::NotYet {
                status: there.status.clone(),
            }
        };
    }
    if there.payer.is_empty() || !there.net.as_ref().is_some_and(Amount::is_positive) {
        return Verdict::Unconfirmed(
            "Paymos' deposit names no payer or no net above 0: nothing to credit".to_owned(),
        );
    }
    Verdict::Confirmed
}

/// What a deposit event says that Paymos' deposit `there` contradicts (its project, payer, net
/// or currency), if anything: a forged event, waiting for a person (`recheck` then credits
/// Paymos' own). What it leaves out contradicts nothing.
fn contradicts(
    there: &ConfirmedDeposit,
    credit: Option<&Credit>,
    data: &EventData,
) -> Option<String> {
    if let (Some(named), Some(project)) = (&data.project_id, &there.project_id)
        && named != project
    {
        return Some(format!(
            "the event names project {named}, Paymos' deposit is of project {project}"
        ));
    }
    let credit = credit?;
    if there.payer != credit.payer {
        return Some(format!(
            "the event credits payer {}, Paymos' deposit is of {}",
            credit.payer, there.payer
        ));
    }
    let same_net = there
        .net
        .as_ref()
        .is_some_and(|n| n.same_value(&credit.net));
    (!same_net || !there.currency.eq_ignore_ascii_case(&credit.currency)).then(|| {
        format!(
            "the event credits {} {}, Paymos' deposit nets {} {}",
            credit.net.as_str(),
            credit.currency,
            there.net.as_ref().map_or("none", Amount::as_str),
            there.currency
        )
    })
}

/// The stack's environment against the resource's: a key of the other environment is the
/// stack's problem, never a payment's.
pub(crate) fn same_environment(is_test: bool, environment: Environment) -> Result<(), PortError> {
    if is_test == environment.is_test() {
        return Ok(());
    }
    Err(PortError::of_kind(
        "Paymos API",
        PortErrorKind::Misconfigured,
        format!(
            "the API key reads {} resources but this stack applies {}: set PAYMOS_API_SECRETS_ID to the {} project's key",
            if is_test { "sandbox" } else { "live" },
            environment.as_str(),
            environment.as_str()
        ),
    ))
}

/// What the check found for a change, and with what to apply it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    /// The verdict.
    pub verdict: Verdict,
    /// For a confirmed or late payment: the order as Paymos has it.
    pub order: Option<OrderRef>,
    /// The project Paymos' resource belongs to (an invoice, a refund, a deposit), whatever the
    /// verdict (a stack applies its own projects only).
    pub project: Option<String>,
    /// When Paymos says it happened: an invoice's payment (`paid_late_at`, else
    /// `completed_at`), a refund's completion. The rules read this time, never the event's.
    pub paid_at: Option<u64>,
    /// For a confirmed deposit: the credit as Paymos has it (its payer, net, currency and
    /// project), whatever the delivery said or left out.
    pub credit: Option<Credit>,
    /// For a refund: its mode as Paymos has it (`full` or `overpayment`), where Paymos says.
    pub refund_mode: Option<RefundMode>,
}

impl Checked {
    /// `change` as Paymos confirmed it, for a change this check confirmed: a payment or a
    /// closure with Paymos' order and payment time ([`as_paymos_says`]), a refund dated by
    /// Paymos' completion, a deposit credited to the payer of Paymos' project. An event's own
    /// time and project count only where Paymos was not asked.
    #[must_use]
    pub fn applied_to(&self, change: Change) -> Change {
        match change {
            change @ Change::Invoice { .. } if self.order.is_some() => {
                as_paymos_says(change, self.order.clone(), self.paid_at)
            }
            Change::Withdrawal {
                withdrawal_id,
                status,
                occurred_at,
                kind,
                invoice_id,
                amount,
                currency,
                mode,
            } => Change::Withdrawal {
                withdrawal_id,
                status,
                occurred_at: self.paid_at.unwrap_or(occurred_at),
                kind,
                invoice_id,
                amount,
                currency,
                // Paymos' mode where it says one: a delivery that left it out is no refund of
                // unknown mode once Paymos was asked.
                mode: self.refund_mode.map(|m| m.as_str().to_owned()).or(mode),
            },
            // Paymos' credit, whatever the delivery said or left out (a partial event, a forged
            // amount): the delivery only asked. (A confirmed deposit always carries Paymos'
            // credit; a status that credits nothing carries none.)
            Change::Deposit {
                deposit_id,
                status,
                occurred_at,
                credit,
            } => Change::Deposit {
                deposit_id,
                status,
                occurred_at,
                credit: self.credit.clone().or(credit),
            },
            other => other,
        }
    }

    fn plain(verdict: Verdict) -> Self {
        Self {
            verdict,
            order: None,
            project: None,
            paid_at: None,
            credit: None,
            refund_mode: None,
        }
    }
}

/// Reads back what `change` claims (for an event with `data`) at Paymos, when it moves money or
/// closes a payment; every other change is [`Verdict::Confirmed`] without a call.
///
/// # Errors
/// The API failing, or answering for another environment than `environment` (misconfigured).
pub async fn check<C: PaymentConfirmation>(
    confirmation: &C,
    change: &Change,
    data: &EventData,
    environment: Environment,
) -> Result<Checked, PortError> {
    match change {
        Change::Invoice {
            invoice_id, status, ..
        } if status.is_final() => {
            let at = confirmation.invoice(invoice_id).await?;
            if let AtSource::Found(i) = &at {
                same_environment(i.is_test, environment)?;
            }
            let mut verdict = invoice_verdict(&at, *status, &PaidClaim::of(data));
            // The project as the order and the price: a payment naming another project than
            // Paymos' invoice is not what Paymos confirms. Of a closure Paymos confirms the
            // status, which is applied with Paymos' project whatever the event named.
            if let (AtSource::Found(i), Some(named)) = (&at, &data.project_id)
                && status.fulfils()
                && i.project_id.as_ref().is_some_and(|there| there != named)
                && matches!(verdict, Verdict::Confirmed | Verdict::PaidLate { .. })
            {
                verdict = Verdict::Unconfirmed(format!(
                    "the event names project {named}, Paymos' invoice is of project {}",
                    i.project_id.as_deref().unwrap_or_default()
                ));
            }
            // What Paymos confirms carries its order: a payment is fulfilled with it, a closure
            // records it.
            let order = match (&at, &verdict) {
                (AtSource::Found(i), Verdict::Confirmed | Verdict::PaidLate { .. }) => {
                    Some(i.order())
                }
                _ => None,
            };
            let (project, paid_at) = match &at {
                AtSource::Found(i) => (i.project_id.clone(), i.paid_at),
                AtSource::NotFound => (None, None),
            };
            Ok(Checked {
                verdict,
                order,
                project,
                paid_at,
                credit: None,
                refund_mode: None,
            })
        }
        Change::Withdrawal {
            withdrawal_id,
            status,
            kind,
            invoice_id,
            amount,
            mode,
            ..
        } if status.is_final() => {
            let refund = kind == "refund";
            let at = confirmation.withdrawal(withdrawal_id, refund).await?;
            if let AtSource::Found(w) = &at {
                same_environment(w.is_test, environment)?;
            }
            let refund = refund.then(|| (invoice_id, mode.as_deref() == Some("full")));
            let mut checked = Checked::plain(withdrawal_verdict(&at, *status, refund, amount));
            if let AtSource::Found(w) = &at {
                // A refund is of its invoice's project, and completed when Paymos says.
                checked.project.clone_from(&w.project_id);
                checked.paid_at = w.completed_at;
                // Its mode: `full`, or the only other, `overpayment`.
                checked.refund_mode = w.full.map(|full| {
                    if full {
                        RefundMode::Full
                    } else {
                        RefundMode::Overpayment
                    }
                });
            }
            Ok(checked)
        }
        // A confirmation that credits, or that says it is one and leaves out what a credit
        // needs (`is_final`, the payer, the net: a partial event): Paymos' deposit decides.
        Change::Deposit {
            deposit_id,
            status: DepositStatus::Confirmed,
            credit,
            ..
        } if data.is_final != Some(false) => {
            let at = confirmation.deposit(deposit_id).await?;
            if let AtSource::Found(d) = &at {
                same_environment(d.is_test, environment)?;
            }
            let mut checked = Checked::plain(deposit_verdict(&at));
            if let (AtSource::Found(d), Verdict::Confirmed) = (&at, &checked.verdict)
                && let Some(differs) = contradicts(d, credit.as_ref(), data)
            {
                checked.verdict = Verdict::Unconfirmed(differs);
            }
            if let AtSource::Found(d) = &at {
                // Whose payer it credits: a payer id is unique only within its project.
                checked.project.clone_from(&d.project_id);
                if checked.verdict == Verdict::Confirmed {
                    checked.credit = d.net.clone().map(|net| Credit {
                        payer: d.payer.clone(),
                        net,
                        currency: d.currency.to_ascii_uppercase(),
                        project: d.project_id.clone(),
                    });
                }
            }
            Ok(checked)
        }
        _ => Ok(Checked::plain(Verdict::Confirmed)),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_patience_is_the_first_receive_that_long_after_the_first_and_before_the_dead_letters() {
        // Fulfil's redelivery: 15 s, 30 s, 60 s, … up to 15 minutes between receives.
        assert_eq!(
            super::receives_for(super::DEFAULT_PATIENCE_MINUTES),
            super::NOT_YET_RECEIVES
        );
        assert_eq!(super::receives_for(0), 2, "one retry at least");
        assert_eq!(
            super::receives_for(1),
            4,
            "the 4th receive, 105 s after the first"
        );
        assert_eq!(
            super::receives_for(super::MAX_PATIENCE_MINUTES),
            15,
            "8145 s"
        );
        assert_eq!(
            super::receives_for(10_000),
            crate::wire::work::WORK_RECEIVES - 1,
            "never the receive that sends it to the dead-letter queue"
        );
    }

    use super::*;

    fn at(status: &str) -> AtSource<ConfirmedInvoice> {
        AtSource::Found(ConfirmedInvoice {
            status: status.into(),
            is_test: false,
            order_id: Some("cheap".into()),
            order_amount: Amount::parse("10"),
            order_currency: Some("USD".into()),
            token_amount: Amount::parse("10.50"),
            token_currency: Some("USDT".into()),
            paid_late: false,
            project_id: None,
            paid_at: None,
        })
    }

    fn claim(order: Option<(&str, &str)>, token: Option<(&str, &str)>) -> PaidClaim {
        PaidClaim {
            order_id: None,
            order_amount: order.and_then(|o| Amount::parse(o.0)),
            order_currency: order.map(|o| o.1.to_owned()),
            token_amount: token.and_then(|t| Amount::parse(t.0)),
            token_currency: token.map(|t| t.1.to_owned()),
        }
    }

    use InvoiceStatus as I;

    #[test]
    fn like_is_compared_with_like() {
        // A USD-priced invoice paid in USDT, as the official v1/v2 vectors send it (no order).
        assert_eq!(
            invoice_verdict(&at("paid"), I::Paid, &claim(None, Some(("10.5", "usdt")))),
            Verdict::Confirmed
        );
        assert_eq!(
            invoice_verdict(
                &at("paid"),
                I::Paid,
                &claim(Some(("10.00", "USD")), Some(("10.50", "USDT")))
            ),
            Verdict::Confirmed
        );
        assert!(matches!(
            invoice_verdict(&at("paid"), I::Paid, &claim(None, Some(("1.05", "USDT")))),
            Verdict::Unconfirmed(r) if r.contains("payment 1.05 USDT") && r.contains("10.50 USDT")
        ));
        assert!(matches!(
            invoice_verdict(&at("paid_over"), I::PaidOver, &claim(Some(("10", "EUR")), None)),
            Verdict::Unconfirmed(r) if r.contains("order amount")
        ));
    }

    #[test]
    fn an_amount_or_a_currency_paymos_does_not_have_is_refused() {
        // Paymos' invoice has no payment yet: an event claiming a token amount, or a token,
        // claims what Paymos does not say.
        let no_payment = AtSource::Found(ConfirmedInvoice {
            token_amount: None,
            token_currency: None,
            ..match at("paid") {
                AtSource::Found(i) => i,
                AtSource::NotFound => unreachable!(),
            }
        });
        for c in [
            claim(None, Some(("10.50", "USDT"))),
            PaidClaim {
                token_amount: Amount::parse("10.50"),
                ..PaidClaim::default()
            },
            PaidClaim {
                token_currency: Some("USDT".into()),
                ..PaidClaim::default()
            },
        ] {
            assert!(
                matches!(invoice_verdict(&no_payment, I::Paid, &c), Verdict::Unconfirmed(r) if r.contains("payment")),
                "{c:?}"
            );
        }
        assert_eq!(
            invoice_verdict(&no_payment, I::Paid, &PaidClaim::default()),
            Verdict::Confirmed
        );
    }

    #[test]
    fn the_order_is_paymos_and_a_relabelled_one_is_refused() {
        let relabelled = PaidClaim {
            order_id: Some("dear".into()),
            ..claim(Some(("10", "USD")), None)
        };
        assert!(matches!(
            invoice_verdict(&at("paid"), I::Paid, &relabelled),
            Verdict::Unconfirmed(r) if r.contains("dear") && r.contains("cheap")
        ));
        let same = PaidClaim {
            order_id: Some("cheap".into()),
            ..PaidClaim::default()
        };
        assert_eq!(
            invoice_verdict(&at("paid"), I::Paid, &same),
            Verdict::Confirmed
        );
    }

    #[test]
    fn closures_and_late_payments_are_read_back() {
        let c = PaidClaim::default();
        assert_eq!(
            invoice_verdict(&at("expired"), I::Expired, &c),
            Verdict::Confirmed
        );
        assert!(matches!(
            invoice_verdict(&at("paid"), I::Expired, &c),
            Verdict::Unconfirmed(r) if r.contains("expired") && r.contains("paid")
        ));
        assert_eq!(
            invoice_verdict(&at("awaiting_payment"), I::Cancelled, &c),
            Verdict::NotYet {
                status: "awaiting_payment".into()
            }
        );
        let mut late = at("expired");
        if let AtSource::Found(i) = &mut late {
            i.paid_late = true;
        }
        assert_eq!(
            invoice_verdict(&late, I::Paid, &c),
            Verdict::PaidLate { closed: I::Expired }
        );
        assert!(matches!(
            invoice_verdict(&at("expired"), I::Paid, &c),
            Verdict::Unconfirmed(r) if r.contains("not paid")
        ));
        assert_eq!(
            invoice_verdict(&at("paid"), I::Confirming, &c),
            Verdict::Confirmed,
            "open statuses are not checked"
        );
        assert!(matches!(
            invoice_verdict(&AtSource::NotFound, I::Paid, &c),
            Verdict::Unknown(r) if r.contains("404")
        ));
    }

    #[test]
    fn refunds_withdrawals_and_deposits_are_read_back() {
        let refund = |status: &str, invoice: &str, full: bool, amount: &str| {
            AtSource::Found(ConfirmedWithdrawal {
                status: status.into(),
                is_test: false,
                invoice_id: Some(invoice.into()),
                full: Some(full),
                amount: Amount::parse(amount),
                currency: Some("USDT".into()),
                project_id: None,
                completed_at: None,
            })
        };
        let inv = Some("inv_1".to_owned());
        let five = Amount::parse("5");
        let w = WithdrawalStatus::Completed;
        assert_eq!(
            withdrawal_verdict(
                &refund("completed", "inv_1", false, "5.0"),
                w,
                Some((&inv, false)),
                &five
            ),
            Verdict::Confirmed
        );
        for (answer, words) in [
            (refund("completed", "inv_2", false, "5"), "inv_2"),
            (refund("completed", "inv_1", false, "4"), "amount"),
            (refund("failed", "inv_1", false, "5"), "failed"),
        ] {
            assert!(
                matches!(withdrawal_verdict(&answer, w, Some((&inv, false)), &five), Verdict::Unconfirmed(r) if r.contains(words)),
                "{words}"
            );
        }
        // Unknown to the key, refund or payout: no word against it.
        for refund in [Some((&inv, false)), None] {
            assert!(matches!(
                withdrawal_verdict(&AtSource::NotFound, w, refund, &five),
                Verdict::Unknown(r) if r.contains("404") && r.starts_with(if refund.is_some() { "refund" } else { "withdrawal" })
            ));
        }
        assert!(matches!(
            withdrawal_verdict(&refund("completed", "inv_1", false, "5"), w, Some((&inv, true)), &five),
            Verdict::Unconfirmed(r) if r.contains("full")
        ));
        assert_eq!(
            withdrawal_verdict(
                &refund("signed", "inv_1", false, "5"),
                w,
                Some((&inv, false)),
                &five
            ),
            Verdict::NotYet {
                status: "signed".into()
            }
        );
        assert_eq!(
            withdrawal_verdict(
                &refund("processing", "inv_1", false, "5"),
                w,
                Some((&inv, false)),
                &five
            ),
            Verdict::NotYet {
                status: "processing".into()
            },
            "a status still moving at Paymos is retried, not refused"
        );
    }

    // A deposit confirmation is Paymos' deposit, as
    // Paymos has it. The event's payer, net or project, or their absence (a partial event),
    // no longer decide: Paymos' confirmed and final deposit credits its own payer and net.
    #[test]
    fn a_deposit_is_confirmed_by_paymos_whatever_the_event_said_of_it() {
        let deposit = |payer: &str, net: &str, status: &str, is_final: bool| {
            AtSource::Found(ConfirmedDeposit {
                status: status.into(),
                is_final,
                is_test: false,
                payer: payer.into(),
                net: Amount::parse(net),
                currency: "trx".into(),
                project_id: None,
            })
        };
        assert_eq!(
            deposit_verdict(&deposit("c-1", "99.00", "confirmed", true)),
            Verdict::Confirmed
        );
        for (answer, words) in [
            (deposit("", "99", "confirmed", true), "no payer"),
            (deposit("c-1", "0", "confirmed", true), "above 0"),
            (deposit("c-1", "99", "reorged", true), "reorged"),
        ] {
            assert!(
                matches!(deposit_verdict(&answer), Verdict::Unconfirmed(r) if r.contains(words)),
                "{words}"
            );
        }
        assert!(matches!(
            deposit_verdict(&deposit("c-1", "99", "confirming", false)),
            Verdict::NotYet { .. }
        ));
        assert!(matches!(
            deposit_verdict(&AtSource::NotFound),
            Verdict::Unknown(r) if r.contains("404")
        ));
    }

    // What a deposit event says that Paymos contradicts: its project, payer, net or currency,
    // each alone; what it leaves out contradicts nothing.
    #[test]
    fn a_deposit_event_is_contradicted_by_each_thing_it_says_otherwise() {
        let there = ConfirmedDeposit {
            status: "confirmed".into(),
            is_final: true,
            is_test: false,
            payer: "c-1".into(),
            net: Amount::parse("9"),
            currency: "USDT".into(),
            project_id: Some("prj_a".into()),
        };
        let credit = |payer: &str, net: &str, currency: &str| Credit {
            payer: payer.into(),
            net: Amount::parse(net).unwrap(),
            currency: currency.into(),
            project: None,
        };
        let none = EventData::default();
        assert_eq!(
            contradicts(&there, Some(&credit("c-1", "9.00", "usdt")), &none),
            None
        );
        assert_eq!(contradicts(&there, None, &none), None, "left out");
        for (said, words) in [
            (credit("c-2", "9", "USDT"), "payer c-2"),
            (credit("c-1", "99", "USDT"), "99 USDT"),
            (credit("c-1", "9", "TRX"), "9 TRX"),
        ] {
            let differs = contradicts(&there, Some(&said), &none).unwrap_or_default();
            assert!(differs.contains(words), "{words}: {differs}");
        }
        let naming = EventData {
            project_id: Some("prj_b".into()),
            ..EventData::default()
        };
        assert!(contradicts(&there, None, &naming).is_some_and(|d| d.contains("prj_b")));
    }

    // An open event is confirmed by nothing Paymos says of a payment: it moves as it came, with
    // its own time (a closure or a payment takes Paymos' order and time).
    #[test]
    fn an_open_event_is_applied_as_it_came() {
        let body = br#"{"event_id":"evt_1","event_type":"invoice.confirming","version":1,"occurred_at":7,"data":{"invoice_id":"inv_1","order":{"external_id":"o-1","amount":"10","currency":"USD"}}}"#;
        let change =
            crate::money::change::change_of(&crate::wire::envelope::Envelope::parse(body).unwrap());
        assert!(matches!(
            &change,
            Change::Invoice {
                paid_at: Some(7),
                ..
            }
        ));
        assert_eq!(
            Checked::plain(Verdict::Confirmed).applied_to(change.clone()),
            change
        );
    }

    #[test]
    fn a_key_of_the_other_environment_is_the_stacks_problem() {
        let e = same_environment(true, Environment::Live).unwrap_err();
        assert_eq!(e.kind, PortErrorKind::Misconfigured);
        assert!(e.message.contains("PAYMOS_API_SECRETS_ID"));
        assert!(same_environment(false, Environment::Live).is_ok());
    }
}
