//! The oracle of the webhook receiver's model test: given Paymos' own truth (`World`) and what
//! reached the receiver (`Arrival`s), `expected` says what MUST hold in the end. Written from the
//! provider's contract (`paymos-webhooks.md`) and the rules of money alone; it imports nothing
//! but `std` and nothing of the implementation. Money is compared as exact decimals, never floats.
//! - 1 the other environment changes and blocks nothing; 2 with the reverse check only what
//!   Paymos confirms counts (lagging waits `Unconfirmed`, forged is nothing; of a closure Paymos
//!   confirms the status, not the order it names); 3 no way back;
//! - 4 an order is learned, never invented; 5 price guard, same currency; 6 an order ships once;
//! - 7 paid late waits; 8 only a completed Full refund settles, and only the payment it completed
//!   at or after by Paymos' clock (never arrival order): a later payment is new and ships or
//!   waits; what Paymos' record confirms (reverse check, recheck, reconcile) is dated by it, not
//!   by the event; on every road that asks Paymos about a payment (the webhook under the reverse
//!   check, a recheck of a delivery that waited, reconcile) Paymos' refunds are read too, with
//!   their times: a payment Paymos confirms is judged against every completed Full refund Paymos
//!   lists of its invoice, delivered or not: paid back by one completed at or after it (it never
//!   ships and waits for no one), new if made after every one; a person's undated word Paymos
//!   confirms takes Paymos' time (one waiting `AfterRefund` keeps waiting, but for a Full refund
//!   that returned it); a road that knows no time (a person's, or Paymos naming none) never
//!   settles in silence: paid with a Full refund on record it waits `AfterRefund`, until
//!   released or a later Full refund; but a person's word of a payment a delivery announced and
//!   nothing applied (pending its order, or waiting for its project: 19) is that payment, dated
//!   as the delivery was;
//! - 9 release; 10 withdrawals; 11 a deposit credits once; 12 a recheck of nothing that waited
//!   changes nothing;
//! - 21 with the reverse check, a person's word without Paymos' (`mark-paid` with no API) ships
//!   nothing, whatever waits or was resolved and whether or not a delivery named the invoice:
//!   on a stack with the API only Paymos' word makes an invoice paid (`recheck`, `mark-paid`
//!   with the API, `reconcile --apply`): plugins "re-read an invoice … before acting on a final
//!   event (the signature alone is not sufficient)", and an unsigned word is not either.
//!
//! Projects (a merchant's shops; order and payer ids are unique only within one):
//! - 18 a receiver that names no projects receives every project ("no filter means every
//!   project") and has no home project: an order is still (project, order id) and a balance
//!   (project, payer, currency), as 13/14 say ("unique only within a project: two shops of one
//!   merchant may both have order `1001` and payer `42`"), and a payment or a final deposit
//!   confirmation naming no project, known nowhere, waits as 19 says (an order registered
//!   under no project prices no project's order: 13);
//! - 13 an order is (project, order id): it ships at most once per pair, and a registration
//!   prices only its own project's order; 14 a balance is per (project, payer, currency);
//! - 15 a delivery (or a person's word) of a project the stack does not apply changes nothing
//!   and waits for no one; a refund is its invoice's project's, a deposit its own's;
//! - 16 a plain payout names no project: merchant-wide, it moves nothing of any project;
//! - 17 an invoice event without `project_id` belongs to its invoice's project: under the
//!   reverse check Paymos' record's, else what an earlier delivery of the invoice named;
//! - 19 on a stack of two or more listed projects, or of none listed (every project: 18),
//!   without the reverse check (no Paymos API), a
//!   payment event (`paid`/`paid_over`) without `project_id` of an invoice no earlier delivery
//!   of it (nor a person) named a project for (a refund is the withdrawal's delivery, not the
//!   invoice's), or a final deposit confirmation without `project_id` of a deposit not credited
//!   yet (whatever an advisory named: only Paymos' record could say whose payer it is), applies
//!   nothing: no order ships, no balance is credited; it waits `ProjectUnknown` for a person
//!   (a payment known all the same, of its delivery's time: a Full refund completed before it
//!   neither returns it nor pays the invoice back, 8).
//!   Its ways out: a person's `mark-paid` naming the invoice's project (it is the payment
//!   that waits, dated by its delivery: a Full refund completed before that time does not
//!   return it, 8; with no order named anywhere it waits `OrderUnknown`, 4), or a later delivery
//!   naming it (a later paid event naming its project ships it, at most once: 6/13; a later
//!   confirmation naming its project credits the deposit, once: 11); another project's name
//!   changes nothing (15), the wait neither. A `recheck` reads Paymos' record, which names
//!   the project: it applies what Paymos confirms (a deposit's wait ends only so, as a
//!   delivery of money that waits: 2/11; an invoice's refunds are read, 8, even where a later
//!   delivery applied its payment), and so does `reconcile --apply`. One listed project, or
//!   the reverse check on: rule 17.
//! - 20 on rule 19's stacks, where a leaked secret can sign any project's name and nothing but
//!   Paymos or a person tells a forged delivery from a genuine one (so a forged event counts
//!   as a genuine one's word, and time): deliveries of one invoice naming two projects (the
//!   later one of this stack; one of a project it does not apply changes nothing, 15) contest
//!   it. What shipped stays shipped, once, and nothing more ships of it; else no event's word
//!   ships it from then on: a payment of it waits for a person (under whatever name: the judge
//!   asks only that it is listed), the contesting delivery teaches no order or price (an order
//!   id is its project's; but where the project named before is not one of this stack, whose
//!   word changed nothing), and a close still closes it until Paymos' record says it paid. Its
//!   ways out: a person naming the project (`mark-paid --project` of the record's, `release
//!   --project` of either), or Paymos' record (`reconcile --apply`, `mark-paid` or `release`
//!   with the API), whose project, order and time replace what deliveries said; a `recheck`
//!   reads Paymos only for what waits unconfirmed or for its project (12). A refund naming
//!   another project than the one its invoice's deliveries named applies nothing (a person
//!   decides). Of a contested invoice the oracle states what ships and that a payment waits,
//!   not whether the receiver counts it paid back. (Written from a rules writer's answers,
//!   who read only the contract; taken differently: an order a person's `--project` of the
//!   other project finds is the record's, since an invoice has one `external_order_id`.)
//! - 22 an order conflict Paymos' word finds: where a road asking Paymos (`reconcile --apply`,
//!   `mark-paid` with the API) reads Paymos' record of an invoice that pays (`paid`,
//!   `paid_over`) and shipped here under another (project, order) than the record names
//!   (the same id in another project is another order; an empty order is unknown, no
//!   conflict), what shipped stays shipped (never un-shipped, never again), and from that run
//!   on Paymos' order is taken by that invoice's payment (a person is told to ship it by
//!   hand), unless another invoice shipped it already: every other payment of it, waiting or
//!   later, by any arrival order (a run finds every conflict before it applies a payment),
//!   ships nothing and waits `Duplicate` (its ways out: a completed Full refund, 8, or a
//!   release). The conflict itself is listed for a person (`order_conflict`, which the judge
//!   does not compare) until they resolve it; the generator makes no resolve. (Written from a
//!   rules writer's answers, who read only the contract.)
//! - 24 a payment that waits unshipped, held or as a second payment, under an order a
//!   delivery named (forged or mistaken) while Paymos' record, read by `reconcile --apply` or
//!   `mark-paid` with the API, names another order of the same project: rule 3 binds what
//!   shipped or was refunded, not that wait, which rested on a delivery's word; Paymos'
//!   payment of Paymos' order is judged anew (it ships if that order has not, else waits as its
//!   second payment). Not one released, refunded or paid late. (A rules writer's answer.)
//! - 8b a second payment of an order shipped, waiting for its refund, that Paymos lists a
//!   completed Full refund of, completed at or after it by Paymos' clock: `reconcile --apply`
//!   (and `mark-paid` with the API) records Paymos' refunds, its way out, delivered or not,
//!   and it waits no more. (A rules writer's answer; it names held, late and order-less
//!   payments too, which the receiver records so only for a second payment: open.)
use std::collections::{BTreeMap, BTreeSet};

/// The environment whose secret signed a delivery: `Live` (`whsec_live_…`) or `Sandbox`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Env {
    Live,
    Sandbox,
}

/// An invoice status at Paymos: three open ones, then the final ones (`Paid`, `PaidOver` pay).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    AwaitingPayment,
    Confirming,
    UnderpaidWaiting,
    Paid,
    PaidOver,
    Underpaid,
    Expired,
    Cancelled,
}

impl Status {
    /// Whether nothing leaves this status.
    #[must_use]
    pub fn is_final(self) -> bool {
        !matches!(
            self,
            Self::AwaitingPayment | Self::Confirming | Self::UnderpaidWaiting
        )
    }
    /// Whether this status means the invoice is paid (`paid` or `paid_over`).
    #[must_use]
    pub fn pays(self) -> bool {
        matches!(self, Self::Paid | Self::PaidOver)
    }
}

/// An order's price: a decimal string ("10.50") in a currency ("USD").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Price {
    pub amount: String,
    pub currency: String,
}

/// A refund's mode: `Full` returns the whole payment received until it completed, `Overpayment`
/// only what exceeds the price.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Full,
    Overpayment,
}

/// Paymos' own record of an invoice (the truth at the END of the history; the API answers with it).
#[derive(Clone, Debug)]
pub struct Invoice {
    /// `project_id`: the project it belongs to.
    pub project: String,
    /// `external_order_id` (unique within the project); "" means Paymos' record gives no
    /// usable order.
    pub order: String,
    /// The order's price (`data.order.amount` / `currency`), often fiat.
    pub price: Price,
    /// Status at Paymos now.
    pub status: Status,
    /// Paid in full after it closed (the status stays `Expired`/`Underpaid`).
    pub paid_late: bool,
}

/// A refund withdrawal at Paymos: the `inv_` it refunds, its mode, whether it completed.
#[derive(Clone, Debug)]
pub struct Refund {
    pub invoice: String,
    pub mode: Mode,
    pub completed: bool,
}

/// A payout withdrawal at Paymos.
#[derive(Clone, Debug)]
pub struct Payout {
    pub completed: bool,
}

/// A payment-channel deposit at Paymos; `confirmed` means confirmed and `is_final`.
#[derive(Clone, Debug)]
pub struct Deposit {
    /// `project_id`: the project it belongs to (its payer is that project's).
    pub project: String,
    pub payer: String,
    pub net: String,
    pub currency: String,
    pub confirmed: bool,
}

/// Paymos' truth (by `inv_`, `wdr_`, `pcd_` id) and the receiver's setting.
#[derive(Clone, Debug)]
pub struct World {
    pub invoices: BTreeMap<String, Invoice>,
    pub refunds: BTreeMap<String, Refund>,
    pub payouts: BTreeMap<String, Payout>,
    pub deposits: BTreeMap<String, Deposit>,
    /// The merchant's registered orders: (project, order id) -> price.
    pub registered: BTreeMap<(String, String), Price>,
    /// The projects the receiver applies (None: every project).
    pub projects: Option<BTreeSet<String>>,
    /// The receiver re-reads each money-moving event at Paymos' API before acting.
    pub reverse_check: bool,
    /// The environment this receiver applies.
    pub environment: Env,
}

/// 8: Paymos' clock, beside its `World`: when Paymos counted an invoice's full payment
/// (`paid_late_at` for a late one) and completed a refund (`completed_at`), by `inv_`/`wdr_` id.
/// Where it names no time, a genuine delivery's `at` (Paymos' own `occurred_at`) stands for it;
/// a forged one dates nothing; else Paymos' record gives no time.
#[derive(Clone, Debug, Default)]
pub struct Clock {
    pub paid_at: BTreeMap<String, u64>,
    pub completed_at: BTreeMap<String, u64>,
}

impl World {
    /// 15: whether the receiver applies `project` ("": named nowhere, merchant-wide: yes).
    fn applies(&self, project: &str) -> bool {
        project.is_empty() || self.projects.as_ref().is_none_or(|ps| ps.contains(project))
    }
    /// 19: two or more listed projects, or none listed (every project: 18), and no reverse
    /// check: nothing can say the project of a delivery that names none.
    fn several(&self) -> bool {
        !self.reverse_check && self.projects.as_ref().is_none_or(|ps| ps.len() > 1)
    }
}

/// What reached the receiver, in order (arrival order); every delivery was acknowledged (2xx).
/// `env`: the secret that signed it; `genuine`: Paymos sent it (else forged with a leaked
/// secret); `lagging`: Paymos' API did not yet show it at delivery; `at`: the Paymos time
/// (Unix seconds, `occurred_at`) of the fact it announces (8: under the reverse check Paymos'
/// record dates the fact instead: a forged `at` dates nothing).
#[derive(Clone, Debug)]
pub enum Arrival {
    /// An invoice webhook; `project` is `data.project_id`, `order` `data.order.external_id`,
    /// `price` `data.order.amount` + `currency` (None: left out); for a paying status `at` is
    /// when the payment was made.
    Invoice {
        event_id: Option<String>,
        invoice: String,
        project: Option<String>,
        env: Env,
        genuine: bool,
        lagging: bool,
        at: u64,
        status: Status,
        order: Option<String>,
        price: Option<Price>,
    },
    /// `withdrawal.*` of a refund or payout: `completed` (at `at`: `data.completed_at`), or an
    /// open/failed status (false). A refund names its invoice's project; a payout none.
    Withdrawal {
        event_id: Option<String>,
        id: String,
        env: Env,
        genuine: bool,
        lagging: bool,
        at: u64,
        completed: bool,
    },
    /// `payment_channel.deposit.*`: `confirmed` with `is_final`, or advisory (false); `project`
    /// is `data.project_id` (its deposit's, or None: left out).
    Deposit {
        event_id: Option<String>,
        id: String,
        project: Option<String>,
        env: Env,
        genuine: bool,
        lagging: bool,
        confirmed: bool,
    },
    /// A person: `mark-paid INV [--order-id O] [--project P]` (trusted: the invoice is paid;
    /// with `api`, Paymos is asked first).
    MarkPaid {
        invoice: String,
        order: Option<String>,
        project: Option<String>,
        api: bool,
    },
    /// A person: `release INV [--override-amount] [--project P]` (with `api`, Paymos is asked
    /// first).
    Release {
        invoice: String,
        override_amount: bool,
        project: Option<String>,
        api: bool,
    },
    /// A person: `recheck ID` (`inv_`/`wdr_`/`pcd_`): apply what Paymos confirms now.
    Recheck { id: String },
    /// `reconcile --apply`: apply each invoice paid (or paid late) at Paymos.
    Reconcile,
}

/// Why a resource waits for a person.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Ord, PartialOrd)]
pub enum Wait {
    /// Its order shipped under another invoice: refund this payment.
    Duplicate,
    /// Price differs from the registration (or cannot be compared): release (override) or refund.
    Held,
    /// Paid after it closed: release or refund.
    PaidLate,
    /// Paid, but no order known yet.
    OrderUnknown,
    /// The reverse check could not confirm the delivery yet: recheck.
    Unconfirmed,
    /// 8: paid by a road that knows no time while a completed Full refund is on record: paid
    /// after the refund? Release (a new payment) or refund.
    AfterRefund,
    /// 19: a payment (or a deposit) naming no project, on a stack of several projects without
    /// the reverse check, of a resource no one named a project for: `mark-paid` naming it.
    ProjectUnknown,
    /// 20: a payment of an invoice whose deliveries named two projects: a person (naming the
    /// project) or Paymos' record decides. Listed under whatever name: the judge asks only
    /// that it waits.
    Contested,
}

/// What must hold in the end.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Expected {
    /// (project, order id) -> the one invoice it shipped under.
    pub shipped: BTreeMap<(String, String), String>,
    /// Resource id -> why it waits for a person.
    pub waiting: BTreeMap<String, Wait>,
    /// (project, payer, currency) -> credited total, normalized decimal ("0" never listed).
    pub balances: BTreeMap<(String, String, String), String>,
    /// Invoices paid back in full: a completed Full refund settles their (shipped or waiting,
    /// for its project too: 19) payment, or no payment of them is known.
    pub refunded: BTreeSet<String>,
    /// 20: invoices whose deliveries named two projects: of these the oracle says what ships
    /// and that a payment that waits is listed (under whatever name), not whether the receiver
    /// counts them paid back, nor that a second word of another project of what shipped is not
    /// listed too ("which shop's payment it is, a person decides").
    pub contested: BTreeSet<String>,
}

/// The final state the receiver must reach for `world` after `steps` (Paymos' clock naming no
/// time: see `Clock`).
#[must_use]
pub fn expected(world: &World, steps: &[Arrival]) -> Expected {
    expected_at(world, &Clock::default(), steps)
}

/// The final state the receiver must reach for `world`, dated by `clock`, after `steps`.
#[must_use]
pub fn expected_at(world: &World, clock: &Clock, steps: &[Arrival]) -> Expected {
    let mut m = Machine {
        world,
        clock,
        money_at: BTreeMap::new(),
        inv: BTreeMap::new(),
        shipped: BTreeMap::new(),
        taken: BTreeMap::new(),
        unconfirmed: BTreeMap::new(),
        applied: BTreeSet::new(),
        balances: BTreeMap::new(),
        delivered: BTreeSet::new(),
        unnamed_deposits: BTreeSet::new(),
    };
    for step in steps {
        m.step(step);
        m.settle();
    }
    m.finish()
}

const SCALE: u32 = 18;

/// An exact decimal scaled by 10^18; None if malformed ("unknown").
fn parse_amount(s: &str) -> Option<i128> {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    let digits = |p: &str| p.bytes().all(|b| b.is_ascii_digit());
    if int.is_empty() || !digits(int) || !digits(frac) || (s.contains('.') && frac.is_empty()) {
        return None;
    }
    let frac = frac.trim_end_matches('0');
    let pad = SCALE.checked_sub(u32::try_from(frac.len()).ok()?)?;
    let mut v: i128 = 0;
    for b in int.bytes().chain(frac.bytes()) {
        v = v.checked_mul(10)?.checked_add(i128::from(b - b'0'))?;
    }
    v.checked_mul(10i128.pow(pad))
}

fn format_amount(v: i128) -> String {
    let unit = 10i128.pow(SCALE);
    let (int, frac) = (v / unit, v % unit);
    if frac == 0 {
        return int.to_string();
    }
    format!("{int}.{}", format!("{frac:018}").trim_end_matches('0'))
}

/// What the receiver knows of one invoice.
#[allow(
    clippy::struct_excessive_bools,
    reason = "independent facts of one invoice"
)]
#[derive(Default)]
struct Inv {
    paid: bool,
    /// A payment whose order was known nowhere when it came: not applied, it waits.
    pending: bool,
    /// 8: the Paymos time of the payment (paid or pending): the event's, or under the reverse
    /// check (and by `recheck`, `reconcile`) Paymos' record's; None: unknown (`mark-paid` of a
    /// payment no delivery announced, or a
    /// record with no time).
    paid_at: Option<u64>,
    /// 8: how many of `refunds` were recorded before the payment was (the rest came after it).
    refunds_before: usize,
    /// 3: why the payment waits, judged once, right after it was applied.
    judged: Option<Option<Wait>>,
    closed: bool,
    late: bool,
    /// 17: its project, once a delivery named it (or Paymos' record, or a person, said).
    project: Option<String>,
    /// 19: a payment event named no project while none was known: not applied, it waits for
    /// its project (Some, with its Paymos time) until another road applies a payment of it (a
    /// person's `mark-paid` of it is this payment, of this time: 8).
    unnamed: Option<u64>,
    order: Option<String>,
    conflict: bool,
    price: Option<Price>,
    /// 8: the completed Full refunds recorded: when each completed (None: Paymos gives no time).
    refunds: Vec<Option<u64>>,
    shipped: bool,
    released: bool,
    /// 20: deliveries of it named two projects before it shipped: no event's word ships it.
    contested: bool,
    /// 20: deliveries of it named two projects, ever (before it shipped or after).
    questioned: bool,
}

impl Inv {
    /// 13: the key its order ships under: (project, order id); "" for a project known nowhere.
    fn key(&self, order: &str) -> (String, String) {
        (self.project.clone().unwrap_or_default(), order.to_owned())
    }

    /// Whether a payment of it is known (applied, or pending an order).
    fn payment(&self) -> bool {
        self.paid || self.pending
    }

    /// 8: a Full refund returns the payment received until it completed: it settles the payment
    /// it completed at or after, never a later one. Where either time is unknown only a refund
    /// recorded after the payment settles it (a person saw the payment, then paid it back). A
    /// payment waiting for its project (19) is known, of its delivery's time: only a refund
    /// completed at or after it (or of no time) settles it, as `project_wait` judges. With no
    /// payment known at all, any does.
    fn refunded(&self) -> bool {
        self.refunds
            .iter()
            .enumerate()
            .any(|(i, r)| match (r, self.paid_at) {
                _ if !self.payment() => self.unnamed.is_none_or(|u| r.is_none_or(|r| r >= u)),
                (Some(r), Some(p)) => *r >= p,
                _ => i >= self.refunds_before,
            })
    }

    /// 8: a payment no time can order against a Full refund recorded before it: paid after it?
    /// It neither ships nor is settled; a person decides (`AfterRefund`).
    fn after_refund(&self) -> bool {
        self.payment()
            && !self.refunded()
            && self.refunds[..self.refunds_before]
                .iter()
                .any(|r| r.is_none() || self.paid_at.is_none())
    }

    /// 8: the payment is known from now on, of Paymos time `at`.
    fn date(&mut self, at: Option<u64>) {
        self.paid_at = at;
        self.refunds_before = self.refunds.len();
    }
}

/// What an invoice event claims: its status, and the order and price it names.
#[derive(Clone, Debug)]
struct Claim {
    status: Status,
    /// 8: the Paymos time of a genuine delivery (None: forged, it dates nothing).
    at: Option<u64>,
    project: Option<String>,
    order: Option<String>,
    price: Option<Price>,
}

/// Paymos' answer to a claim.
#[derive(PartialEq, Eq)]
enum Answer {
    Confirms,
    NotYet,
    Contradicts,
}

impl Claim {
    /// 2: the reverse check: a payment names Paymos' order and price (where it names any) and
    /// Paymos has it paid (or paid late); a closure is Paymos' own final status. While Paymos'
    /// invoice is open, either may still come true.
    fn answer(&self, rec: &Invoice) -> Answer {
        let same_price = |p: &Price| {
            p.currency == rec.price.currency
                && parse_amount(&p.amount).is_some()
                && parse_amount(&p.amount) == parse_amount(&rec.price.amount)
        };
        if self.status.pays() {
            if self.order.as_ref().is_some_and(|o| *o != rec.order)
                || self.project.as_ref().is_some_and(|p| *p != rec.project)
                || self.price.as_ref().is_some_and(|p| !same_price(p))
            {
                return Answer::Contradicts;
            }
            if rec.status.pays() || rec.paid_late {
                return Answer::Confirms;
            }
        } else if rec.status == self.status {
            return Answer::Confirms;
        }
        if rec.status.is_final() {
            Answer::Contradicts
        } else {
            Answer::NotYet
        }
    }
}

struct Machine<'w> {
    world: &'w World,
    clock: &'w Clock,
    /// 8: the Paymos time a genuine unconfirmed refund delivery named (its `occurred_at`).
    money_at: BTreeMap<String, u64>,
    inv: BTreeMap<String, Inv>,
    shipped: BTreeMap<(String, String), String>,
    /// 22: orders a person is told to ship by hand: Paymos' order of an invoice that shipped
    /// another, taken by that invoice's payment when a road asking Paymos found it.
    taken: BTreeMap<(String, String), String>,
    /// 2: deliveries Paymos did not confirm when they came, per resource (an invoice event's
    /// status; `None` for a withdrawal or a deposit), until a recheck applies them.
    unconfirmed: BTreeMap<String, Vec<Option<Claim>>>,
    applied: BTreeSet<String>,
    balances: BTreeMap<(String, String, String), i128>,
    /// Deliveries seen: (environment, event id).
    delivered: BTreeSet<(Env, String)>,
    /// 19: deposits whose final confirmation named no project while none was known.
    unnamed_deposits: BTreeSet<String>,
}

impl Machine<'_> {
    fn inv_mut(&mut self, id: &str) -> &mut Inv {
        self.inv.entry(id.to_owned()).or_default()
    }

    /// 15: whether the receiver applies `project` ("": named nowhere, merchant-wide: yes).
    fn applies(&self, project: &str) -> bool {
        self.world.applies(project)
    }

    /// 6/22: whether an order shipped, or was taken for a person to ship by hand.
    fn claimed(&self, key: &(String, String)) -> bool {
        self.shipped.contains_key(key) || self.taken.contains_key(key)
    }

    /// 22: Paymos' record of invoice `id`, read by a road asking Paymos, names another order
    /// (or project) than the one it shipped here: what shipped stays shipped, and Paymos'
    /// order is this payment's (a person ships it by hand), unless another invoice shipped it
    /// already; an order Paymos names no id for is unknown, no conflict.
    fn take_paymos_order(&mut self, id: &str, rec: &Invoice) {
        let Some(inv) = self.inv.get(id).filter(|i| i.shipped) else {
            return;
        };
        let Some(order) = inv.order.as_ref() else {
            return;
        };
        let paymos = (rec.project.clone(), rec.order.clone());
        let ours = self.key(inv, order);
        let same_project = ours.0.is_empty() || ours.0 == paymos.0;
        if rec.order.is_empty() || (same_project && ours.1 == paymos.1) {
            return;
        }
        if !self.shipped.contains_key(&paymos) {
            self.taken.entry(paymos).or_insert_with(|| id.to_owned());
        }
    }

    /// 13/18: the key an invoice's order ships under, in the receiver's setting.
    fn key(&self, inv: &Inv, order: &str) -> (String, String) {
        inv.key(order)
    }

    /// 17: the project of invoice `id`, learned once: under the reverse check Paymos' record's
    /// (where Paymos has the invoice), else the first one a delivery (or a person) `named`.
    fn invoice_project(&mut self, id: &str, named: Option<&str>) -> String {
        let w = self.world;
        let at_paymos = w.invoices.get(id).filter(|_| w.reverse_check);
        let learned = at_paymos
            .map(|r| r.project.clone())
            .or_else(|| named.filter(|p| !p.is_empty()).map(str::to_owned));
        let inv = self.inv_mut(id);
        if inv.project.is_none() {
            inv.project = learned;
        }
        inv.project.clone().unwrap_or_default()
    }

    /// 20: a refund (which names its invoice's project) of an invoice whose deliveries named
    /// another project, one the stack applies, on a stack without the reverse check.
    fn refund_of_another_project(&self, id: &str) -> bool {
        let w = self.world;
        let Some(r) = w.refunds.get(id).filter(|_| !w.reverse_check) else {
            return false;
        };
        let named = w.invoices.get(&r.invoice).map(|i| i.project.as_str());
        let known = self.inv.get(&r.invoice).and_then(|i| i.project.as_deref());
        matches!((known, named), (Some(k), Some(n)) if !k.is_empty() && self.applies(k) && k != n)
    }

    /// 15: the project of a resource a withdrawal or a deposit delivers (its body names it): a
    /// refund's is its invoice's, a deposit's its own; a payout (or anything else) names none.
    /// 19: a refund is a withdrawal's delivery, not its invoice's: it teaches the invoice nothing.
    fn money_project(&mut self, id: &str) -> String {
        let w = self.world;
        if let Some(r) = w.refunds.get(id) {
            let known = self.inv.get(&r.invoice).and_then(|i| i.project.clone());
            let named = w.invoices.get(&r.invoice).map(|i| i.project.clone());
            named.or(known).unwrap_or_default()
        } else {
            w.deposits
                .get(id)
                .map(|d| d.project.clone())
                .unwrap_or_default()
        }
    }

    fn step(&mut self, step: &Arrival) {
        let live = self.world.environment;
        // The contract: deliveries are deduplicated by (the environment and) `event_id`; a
        // second delivery of one event changes nothing, whatever the first did.
        if let Arrival::Invoice {
            event_id: Some(e),
            env,
            ..
        }
        | Arrival::Withdrawal {
            event_id: Some(e),
            env,
            ..
        }
        | Arrival::Deposit {
            event_id: Some(e),
            env,
            ..
        } = step
            && !self.delivered.insert((*env, e.clone()))
        {
            return;
        }
        match step {
            // 1: a step signed by the other environment changes nothing and blocks nothing
            Arrival::Invoice { env, .. }
            | Arrival::Withdrawal { env, .. }
            | Arrival::Deposit { env, .. }
                if *env != live => {}
            Arrival::Invoice { .. } => self.invoice_delivery(step),
            // 19: a final deposit confirmation naming no project is credited by no webhook
            // (only Paymos' record could say whose payer it is), whatever an advisory named:
            // it waits for a person; of a deposit credited already (once, 11) it is nothing
            Arrival::Deposit {
                id,
                project: None,
                confirmed: true,
                ..
            } if self.world.several() => {
                if !self.applied.contains(id) {
                    self.unnamed_deposits.insert(id.clone());
                }
            }
            // 20: without the reverse check, a refund naming another project than the one its
            // invoice's deliveries named (one the stack applies) applies nothing: which is
            // true, a person decides (it is listed, as a delivery that cannot be used)
            Arrival::Withdrawal { id, .. } if self.refund_of_another_project(id) => {}
            // 15: another project's refund (withdrawals ignore the filter) or deposit: nothing
            Arrival::Withdrawal { id, .. } | Arrival::Deposit { id, .. }
                if {
                    let of = self.money_project(id);
                    !self.applies(&of)
                } => {}
            Arrival::Withdrawal {
                id,
                genuine,
                lagging,
                at,
                completed: true,
                ..
            } => self.money_event(id, *lagging, *at, *genuine),
            Arrival::Deposit {
                id,
                lagging,
                confirmed: true,
                ..
            } => self.money_event(id, *lagging, 0, false), // a deposit's time matters to nothing
            // 2/10/11: open/failed withdrawals and advisory deposits move nothing
            Arrival::Withdrawal { .. } | Arrival::Deposit { .. } => {}
            Arrival::MarkPaid {
                invoice,
                order,
                project,
                api: true,
            } => self.mark_paid_asking(invoice, order.as_deref(), project.as_deref()),
            Arrival::MarkPaid {
                invoice,
                order,
                project,
                api: false,
            } => self.persons_word(invoice, order.as_deref(), project.as_deref()),
            Arrival::Release {
                invoice,
                override_amount,
                project,
                api,
            } => {
                if *api {
                    self.release_asking(invoice, *override_amount);
                } else if let Some(p) = project.as_deref() {
                    // 20: naming the project, a person settles a contest (either project named);
                    // else a project other than the record's is refused
                    let contested = self.inv.get(invoice).is_some_and(|i| i.contested);
                    if contested || !self.refuses_person(invoice, Some(p)) {
                        self.settle_contest(invoice, Some(p), None);
                        self.settle();
                        self.release(invoice, *override_amount);
                    }
                } else {
                    self.release(invoice, *override_amount);
                }
            }
            Arrival::Recheck { id } => self.recheck(id),
            Arrival::Reconcile => self.reconcile(),
        }
    }

    /// A person's `mark-paid` without the API, naming `project`.
    fn persons_word(&mut self, invoice: &str, order: Option<&str>, project: Option<&str>) {
        // a person's project other than the record's is refused (exit 2), nothing written;
        // naming the record's, it settles a contest (20)
        if self.refuses_person(invoice, project) {
            return;
        }
        // 15: what another shop's delivery said, the person's word replaces
        if let Some(inv) = self.inv.get_mut(invoice)
            && inv
                .project
                .as_deref()
                .is_some_and(|k| !self.world.applies(k))
        {
            inv.project = project.map(str::to_owned);
        }
        self.settle_contest(invoice, project, None);
        // 15: a person's word for another project's invoice changes nothing
        let of = self.invoice_project(invoice, project);
        // 21: with the reverse check only Paymos' word ships
        if self.applies(&of) && !self.world.reverse_check {
            self.mark_paid(invoice, order);
        }
    }

    /// A live invoice delivery, deduplicated.
    fn invoice_delivery(&mut self, step: &Arrival) {
        let Arrival::Invoice {
            invoice,
            project,
            genuine,
            lagging,
            at,
            status,
            order,
            price,
            ..
        } = step
        else {
            return;
        };
        // 15/17: another project's invoice changes nothing and waits for no one
        let of = self.invoice_project(invoice, project.as_deref());
        // 2: without the reverse check a signature is all there is: a forged event's word and
        // time count as a genuine one's
        let dated = (*genuine || !self.world.reverse_check).then_some(*at);
        // 15: without the reverse check, a delivery naming a project the stack does not apply
        // changes nothing, whatever an earlier one of its invoice named
        if !self.world.reverse_check && project.as_deref().is_some_and(|p| !self.applies(p)) {
            // 20: its invoice's deliveries named two projects all the same
            if project
                .as_deref()
                .is_some_and(|p| !of.is_empty() && p != of)
            {
                self.inv_mut(invoice).questioned = true;
            }
            return;
        }
        if self.contest(invoice, &of, project.as_deref(), *status, dated) {
            return;
        }
        let of = self.invoice_project(invoice, project.as_deref());
        // 19: a payment naming no project, known nowhere: applied nowhere, it waits
        if of.is_empty() && status.pays() && self.world.several() {
            let inv = self.inv_mut(invoice);
            inv.unnamed = inv.unnamed.or(Some(*at));
            return;
        }
        if !self.applies(&of) {
            return;
        }
        let claim = Claim {
            status: *status,
            at: dated,
            project: project.clone(),
            order: order.clone(),
            price: price.clone(),
        };
        self.invoice_event(invoice, *lagging, *at, claim);
    }

    /// 20: on rule 19's stacks (several projects, no reverse check), a delivery naming another
    /// project than the one an earlier delivery (or a person) named for its invoice, one this
    /// stack applies: the invoice's deliveries disagree and nothing tells which is true. (A
    /// delivery naming a project not applied here changes nothing: 15.) What shipped stays
    /// shipped (once: 6), and the delivery changes nothing more; else the invoice is contested
    /// from now on: no event's word ships it. The contesting delivery teaches no order or price
    /// (an order id is its project's) but where the project named before is not one this stack
    /// applies (that word changed nothing: this one names the invoice's project); a payment it
    /// announces is known all the same (of its time: 8), waiting for a person. Of a contested
    /// invoice, a later delivery naming its project (or none) teaches as any, but its payment
    /// ships nothing either. Whether the delivery is handled here (else it goes on as any).
    fn contest(
        &mut self,
        id: &str,
        of: &str,
        named: Option<&str>,
        status: Status,
        at: Option<u64>,
    ) -> bool {
        if !self.world.several() {
            return false;
        }
        let other = named.filter(|p| !p.is_empty() && !of.is_empty() && p != &of);
        let Some(other) = other.filter(|p| self.applies(p)) else {
            let contested = self.inv.get(id).is_some_and(|i| i.contested);
            if contested && status.pays() {
                self.contested_payment(id, status, at);
            }
            return contested && status.pays();
        };
        let replaces = !self.applies(of);
        let inv = self.inv_mut(id);
        inv.questioned = true;
        if inv.shipped {
            return true;
        }
        inv.contested = true;
        if replaces {
            inv.project = Some(other.to_owned());
            if !status.pays() {
                return false;
            }
        }
        self.contested_payment(id, status, at);
        true
    }

    /// 20: a delivery of a contested invoice: a payment it announces is known (of its time), a
    /// closure closes it (until Paymos' record says it paid); its order and price teach
    /// nothing (which shop's word it is, no one knows).
    fn contested_payment(&mut self, id: &str, status: Status, at: Option<u64>) {
        if status.is_final() {
            self.apply_status(id, status, false, at);
        }
    }

    fn invoice_event(&mut self, id: &str, lagging: bool, at: u64, claim: Claim) {
        let (status, order, price) = (claim.status, claim.order.as_deref(), claim.price.as_ref());
        // 2/3: an open event moves nothing and needs no check; it may teach an order or price,
        // but not under the reverse check, where only what Paymos confirms names an order
        if !status.is_final() || !self.world.reverse_check {
            if !self.world.reverse_check {
                self.learn_event(id, order, price);
            }
            // 2: without the reverse check a final event is taken at its word
            if status.is_final() {
                self.apply_status(id, status, false, Some(at));
            }
            return;
        }
        // 2: lagging, or contradicted (forged): nothing applied, it waits Unconfirmed for a
        // person (a forgery means a leaked secret); a recheck applies what Paymos confirms
        let rec = self.world.invoices.get(id).filter(|_| !lagging);
        if let Some(rec) = rec.filter(|r| claim.answer(r) == Answer::Confirms) {
            // 2/4: a closing event is confirmed by its status alone: the order and price it names
            // are nobody's word but its own (a payment's were checked against the record)
            if status.pays() {
                self.learn_event(id, order, price);
            }
            self.learn_record(id, rec);
            // 8: Paymos' record dates the payment, not the event (a forged `at` dates nothing)
            let at = self.paid_time(id, claim.at);
            self.apply_status(id, status, status.pays() && rec.paid_late, at);
            if status.pays() {
                self.paymos_confirms(id, at);
            }
        } else {
            self.unconfirmed
                .entry(id.to_owned())
                .or_default()
                .push(Some(claim));
        }
    }

    /// 4/5: what a trusted event teaches: an unknown order, a price until the invoice is paid.
    fn learn_event(&mut self, id: &str, order: Option<&str>, price: Option<&Price>) {
        let rc = self.world.reverse_check;
        let inv = self.inv_mut(id);
        // 3: a payment is judged when it is applied: what comes after re-judges nothing
        if inv.paid {
            return;
        }
        if let Some(o) = order.filter(|o| !o.is_empty()) {
            match &inv.order {
                None => inv.order = Some(o.to_owned()),
                // 4: without the reverse check the first order stands and the invoice is held
                Some(known) if known != o && !rc => inv.conflict = true,
                Some(_) => {}
            }
        }
        // 5: the price of the event that pays it (or an earlier one); a late event only fills a gap
        if let Some(p) = price.filter(|_| !inv.paid || inv.price.is_none()) {
            inv.price = Some(p.clone());
        }
    }

    /// 4/5: Paymos' record, when read, wins: its order (if any) and its price.
    fn learn_record(&mut self, id: &str, rec: &Invoice) {
        let inv = self.inv_mut(id);
        // 17: Paymos' record names the project, whatever a delivery said, while nothing shipped
        if inv.project.is_none() || !inv.shipped {
            inv.project = Some(rec.project.clone());
        }
        if inv.paid {
            return; // 3: judged when applied
        }
        if rec.status.pays() {
            inv.closed = false; // 2: a closure Paymos' record does not have was not Paymos'
        }
        if !inv.shipped && !rec.order.is_empty() {
            inv.order = Some(rec.order.clone());
            inv.conflict = false;
        }
        inv.price = Some(rec.price.clone());
    }

    /// 3/7: a final status never moves back; paid after a known close (or late at Paymos) is late.
    /// 8: `at` is the payment's Paymos time (None: unknown).
    fn apply_status(&mut self, id: &str, status: Status, late_at_paymos: bool, at: Option<u64>) {
        let inv = self.inv_mut(id);
        if inv.paid {
            // 8: a payment a person recorded undated (late or not, shipped or not) takes the
            // first time a delivery of it gives (Paymos' where it was asked, else the event's):
            // the refund rule then knows which came first; not one that waits `AfterRefund`:
            // final already, it keeps waiting for a person (but where Paymos says a Full refund
            // returned it: `paymos_confirms`)
            if status.pays() && inv.paid_at.is_none() && inv.refunds_before == 0 {
                inv.paid_at = at;
            }
            return;
        }
        if status.pays() && inv.order.is_none() && !(inv.closed || late_at_paymos) {
            // 4: known nowhere: not applied; the next paying step judges it (a payment after
            // the close is recorded late whatever is known of its order: rule 7)
            inv.pending = true;
            inv.date(at);
        } else if status.pays() {
            inv.paid = true;
            inv.pending = false;
            inv.date(at);
            inv.late = inv.closed || late_at_paymos;
        } else if status.is_final() {
            inv.closed = true;
        }
    }

    /// Apply Paymos' whole record of an invoice (reconcile), dated by Paymos (8).
    fn apply_record(&mut self, id: &str, rec: &Invoice) {
        self.learn_record(id, rec);
        let status = if rec.paid_late {
            Status::Paid
        } else {
            rec.status
        };
        let at = self.paid_time(id, None);
        self.apply_status(id, status, rec.paid_late, at);
    }

    /// `at`: when a refund completed, as its event says.
    fn money_event(&mut self, id: &str, lagging: bool, at: u64, genuine: bool) {
        if !self.world.reverse_check {
            self.apply_money(id, Some(at)); // 2: taken at its word
        } else if !lagging && self.confirmed_at_paymos(id) {
            // 2: confirmed; 8: dated by Paymos' clock, not by the event
            self.apply_money(id, self.completed_at(id, genuine.then_some(at)));
        } else {
            // 2/10/11: lagging or forged: waits for a recheck, which applies what Paymos
            // confirms (8: with Paymos' completion time)
            if genuine {
                self.money_at.insert(id.to_owned(), at);
            }
            self.unconfirmed
                .entry(id.to_owned())
                .or_default()
                .push(None);
        }
    }

    /// 8: when Paymos counted invoice `id`'s payment: its clock's time, else a genuine
    /// delivery's (`genuine`); None: no time known.
    fn paid_time(&self, id: &str, genuine: Option<u64>) -> Option<u64> {
        self.clock.paid_at.get(id).copied().or(genuine)
    }

    /// 8: when Paymos completed refund `id`: its clock's time, else a genuine delivery's.
    fn completed_at(&self, id: &str, genuine: Option<u64>) -> Option<u64> {
        let delivered = || self.money_at.get(id).copied();
        self.clock
            .completed_at
            .get(id)
            .copied()
            .or(genuine)
            .or_else(delivered)
    }

    fn confirmed_at_paymos(&self, id: &str) -> bool {
        let w = self.world;
        w.refunds.get(id).is_some_and(|r| r.completed)
            || w.payouts.get(id).is_some_and(|p| p.completed)
            || w.deposits.get(id).is_some_and(|d| d.confirmed)
    }

    /// 8: a road that asks Paymos about a payment of invoice `id` (reverse check, recheck)
    /// reads its refunds too: every completed Full refund Paymos lists of it is recorded, dated
    /// by Paymos' completion time, whether or not its own delivery came (once: a later delivery
    /// of it changes nothing). The payment is judged against them by Paymos' clock: paid back by
    /// one completed at or after it (`refunded`), new if made after every one. Read, not
    /// delivered, such a refund is on record before a known payment (never "after a person's
    /// word"): where no time tells, the payment waits `AfterRefund`.
    fn read_refunds(&mut self, id: &str) {
        let w = self.world;
        let full: Vec<&String> = w
            .refunds
            .iter()
            .filter(|(wdr, r)| {
                r.invoice == id
                    && r.completed
                    && r.mode == Mode::Full
                    && !self.applied.contains(*wdr)
            })
            .map(|(wdr, _)| wdr)
            .collect();
        for wdr in full {
            self.apply_money(wdr, self.completed_at(wdr, None));
            let inv = self.inv_mut(id);
            if inv.payment()
                && let Some(r) = inv.refunds.pop()
            {
                inv.refunds.insert(inv.refunds_before, r);
                inv.refunds_before += 1;
            }
        }
    }

    /// 8: a payment Paymos confirms (reverse check, recheck): Paymos' refunds of it are read
    /// (`read_refunds`); one known here with no time (a person's word) takes Paymos' (`at`)
    /// where no Full refund was on record before it; one waiting `AfterRefund` keeps waiting
    /// (3), but for a Full refund Paymos completed at or after `at`: it is paid back.
    fn paymos_confirms(&mut self, id: &str, at: Option<u64>) {
        let fresh = self.inv.get(id).is_none_or(|i| i.refunds_before == 0);
        self.read_refunds(id);
        let inv = self.inv_mut(id);
        if !inv.payment() || inv.paid_at.is_some() {
            return;
        }
        let returned = |p: u64| inv.refunds.iter().any(|r| r.is_some_and(|r| r >= p));
        if fresh || at.is_some_and(returned) {
            inv.paid_at = at;
        }
    }

    /// 8: `at` is a refund's completion time (None: unknown).
    fn apply_money(&mut self, id: &str, at: Option<u64>) {
        if self.applied.contains(id) {
            return; // 11: once per deposit (and a withdrawal is recorded once)
        }
        let w = self.world;
        if let Some(r) = w.refunds.get(id) {
            self.applied.insert(id.to_owned());
            // 8: only a Full refund settles a payment; an Overpayment refund changes nothing
            if r.mode == Mode::Full {
                self.inv_mut(&r.invoice).refunds.push(at);
            }
        } else if w.payouts.contains_key(id) {
            // 10/16: a payout names no project: it ships nothing, moves no balance
            self.applied.insert(id.to_owned());
        } else if let Some(d) = w.deposits.get(id) {
            self.applied.insert(id.to_owned());
            // 11/14: credit net once, to the payer of its project; a malformed net credits nothing
            let key = (d.project.clone(), d.payer.clone(), d.currency.clone());
            let bal = self.balances.entry(key).or_default();
            if let Some(sum) = parse_amount(&d.net).and_then(|n| bal.checked_add(n)) {
                *bal = sum;
            }
        }
    }

    /// 3/4/7: a person's word: the invoice is paid (and, if unknown yet, its order). 8: it
    /// carries no Paymos time: with a Full refund on record it waits `AfterRefund`; but a
    /// payment a delivery announced (pending its order, or waiting for its project: 19) is the
    /// one the person saw, dated as it was.
    fn mark_paid(&mut self, id: &str, order: Option<&str>) {
        let inv = self.inv_mut(id);
        if let Some(o) = order.filter(|o| !o.is_empty() && inv.order.is_none()) {
            inv.order = Some(o.to_owned());
        }
        // 4: a person's word with no order, where none is known, applies nothing but is named
        // for a person until the order is learned (whatever is acknowledged is applied or sits
        // in a named outcome): it waits as a payment with no order known
        if inv.order.is_none() && !inv.closed {
            if !inv.payment() {
                let at = inv.unnamed; // 19: the payment that waited for its project
                inv.date(at);
            }
            inv.pending = true;
            return;
        }
        let inv = self.inv_mut(id);
        if !inv.paid {
            // 8: a person's word carries no Paymos time; a payment already known (pending its
            // order, or waiting for its project: 19) is the one the person saw, dated as it was
            if !inv.payment() {
                let at = inv.unnamed;
                inv.date(at);
            }
            inv.pending = false;
            inv.paid = true;
            inv.late = inv.closed;
        }
    }

    /// A person's word naming `project` of invoice `id` whose deliveries (or Paymos' record,
    /// or a person) named another is refused: which is true, the person checks first.
    /// A known project the stack does not apply is an event's word of another shop: a person
    /// naming one it applies is not refused (15: that delivery changed nothing), and a person's
    /// project not of this stack is (exit 2).
    fn refuses_person(&self, id: &str, project: Option<&str>) -> bool {
        if project.is_some_and(|p| !self.applies(p)) {
            return true;
        }
        let known = self.inv.get(id).and_then(|i| i.project.as_deref());
        matches!((known, project), (Some(k), Some(p)) if !k.is_empty() && k != p && self.applies(k))
    }

    /// 20: a person's (`project`) or Paymos' (`rec`) word of whose invoice `id` is ends its
    /// contest: the project is theirs, and the order Paymos' record names, else the one its
    /// deliveries taught (an invoice has one `external_order_id`; the person checked it).
    fn settle_contest(&mut self, id: &str, project: Option<&str>, rec: Option<&Invoice>) {
        let Some(inv) = self.inv.get_mut(id).filter(|i| i.contested) else {
            return;
        };
        let Some(p) = rec.map(|r| r.project.as_str()).or(project) else {
            return;
        };
        inv.contested = false;
        inv.judged = None; // 3: judged when it is applied, which it is only now
        inv.project = Some(p.to_owned());
        if let Some(rec) = rec {
            inv.order = Some(rec.order.clone()).filter(|o| !o.is_empty());
            inv.price = Some(rec.price.clone());
        }
    }

    /// 9: release only a `Held` (with override), `PaidLate` or `AfterRefund` invoice.
    fn release(&mut self, id: &str, override_amount: bool) {
        // 9: never while a refund of it waits unconfirmed (it may have been paid back)
        let refund_waits = self
            .world
            .refunds
            .iter()
            .any(|(w, r)| r.invoice == id && self.unconfirmed.contains_key(w));
        if refund_waits {
            return;
        }
        let ok = match self.wait_of(id) {
            Some(Wait::Held) => override_amount,
            // 9: a late payment is released as it is, but its price is still checked
            Some(Wait::PaidLate) => self.inv[id]
                .order
                .as_ref()
                .is_some_and(|o| override_amount || !self.held(&self.inv[id], o)),
            // 8: a person says it is a new payment: it ships as it is, its price still checked,
            // and only where its order has not shipped (6/13); else it keeps waiting. 9: only a
            // payment recorded here (one waiting for its order is not recorded paid yet)
            Some(Wait::AfterRefund) => {
                let inv = &self.inv[id];
                inv.paid
                    && inv.order.as_ref().is_some_and(|o| {
                        !self.claimed(&self.key(inv, o)) && (override_amount || !self.held(inv, o))
                    })
            }
            _ => false,
        };
        if ok {
            self.inv_mut(id).released = true;
        }
    }

    fn recheck(&mut self, id: &str) {
        // 2: a recheck of an invoice also rechecks its refunds' deliveries
        let refunds: Vec<String> = self
            .world
            .refunds
            .iter()
            .filter(|(_, r)| r.invoice == id)
            .map(|(w, _)| w.clone())
            .collect();
        for w in refunds {
            self.recheck_one(&w);
        }
        self.recheck_one(id);
    }

    fn recheck_one(&mut self, id: &str) {
        // 19: a recheck reads Paymos' record, which names the project, for a delivery that
        // waited for it (a deposit's; an invoice's payment, which it applies where no road has
        // applied it since, and whose refunds it reads all the same: 8)
        let unnamed = self.inv.get(id).is_some_and(|i| i.unnamed.is_some());
        if unnamed || self.unnamed_deposits.contains(id) {
            self.recheck_project(id);
        }
        // 12: nothing waits Unconfirmed for this id: nothing changes
        let Some(waiting) = self.unconfirmed.remove(id) else {
            return;
        };
        let w = self.world;
        let mut still = Vec::new();
        for claim in waiting {
            match (claim, w.invoices.get(id)) {
                // 2: what Paymos contradicts is a forgery, closed by the recheck; what Paymos'
                // open invoice may still confirm waits
                (Some(claim), Some(rec)) => match claim.answer(rec) {
                    Answer::Confirms => {
                        self.learn_record(id, rec);
                        let late = claim.status.pays() && rec.paid_late;
                        // 8: a recheck reads Paymos' record, dated by Paymos, and its refunds
                        let at = self.paid_time(id, claim.at);
                        self.apply_status(id, claim.status, late, at);
                        if claim.status.pays() {
                            self.paymos_confirms(id, at);
                        }
                    }
                    Answer::NotYet => still.push(Some(claim)),
                    // a payment Paymos contradicts stays for a person (a leaked secret, or a
                    // late payment Paymos has not marked yet); a contradicted closure is closed
                    Answer::Contradicts if claim.status.pays() => still.push(Some(claim)),
                    Answer::Contradicts => {}
                },
                // 2: unknown at Paymos (404): a forgery
                (Some(_), None) => {}
                // 8: the refund's completion time is Paymos', not its delivery's
                (None, _) if self.confirmed_at_paymos(id) => {
                    self.apply_money(id, self.completed_at(id, None));
                }
                (None, _) => still.push(None),
            }
        }
        if !still.is_empty() {
            self.unconfirmed.insert(id.to_owned(), still);
        }
    }

    /// 19: what waits for its project, rechecked: Paymos' record says whose it is (15: another
    /// project's waits for no one) and what it confirms is applied, dated by Paymos (8): the
    /// deposit credited once (11), the invoice's payment applied as reconcile applies it.
    fn recheck_project(&mut self, id: &str) {
        let w = self.world;
        if let Some(d) = w.deposits.get(id) {
            self.unnamed_deposits.remove(id);
            if w.applies(&d.project) && d.confirmed {
                self.apply_money(id, None);
            }
        } else if let Some(rec) = w.invoices.get(id) {
            if w.applies(&rec.project) && (rec.status.pays() || rec.paid_late) {
                self.settle_contest(id, None, Some(rec));
            }
            self.learn_record(id, rec);
            if w.applies(&rec.project) && (rec.status.pays() || rec.paid_late) {
                let status = if rec.status.pays() {
                    rec.status
                } else {
                    Status::Paid
                };
                let unnamed = self.inv.get(id).and_then(|i| i.unnamed);
                let at = self.paid_time(id, unnamed);
                self.apply_status(id, status, rec.paid_late, at);
                self.paymos_confirms(id, at);
            }
            self.inv_mut(id).unnamed = None;
        }
    }

    /// 3: apply each invoice paid at Paymos (or paid late) with Paymos' order, price and time.
    fn reconcile(&mut self) {
        let w = self.world;
        let applied = || {
            w.invoices
                .iter()
                .filter(|(_, r)| r.status.pays() || r.paid_late)
                // 15: another project's invoice is not this receiver's to apply
                .filter(|(_, r)| w.applies(&r.project))
        };
        // 22: the run finds every order conflict before it applies any payment it lacks
        for (id, rec) in applied().filter(|(_, r)| r.status.pays()) {
            self.take_paymos_order(id, rec);
        }
        for (id, rec) in applied() {
            self.reconcile_one(id, rec);
        }
    }

    /// 8/15: a person's word asked of Paymos first: nothing where Paymos has the invoice
    /// unpaid, in a project the receiver does not apply, or for another order or project than
    /// the person named; else applied as `reconcile --apply` applies it.
    fn mark_paid_asking(&mut self, id: &str, order: Option<&str>, project: Option<&str>) {
        let w = self.world;
        let Some(rec) = w.invoices.get(id) else {
            return;
        };
        let paid = (rec.status.pays() || rec.paid_late) && w.applies(&rec.project);
        let said_otherwise =
            order.is_some_and(|o| o != rec.order) || project.is_some_and(|p| p != rec.project);
        if !paid || said_otherwise {
            return;
        }
        self.take_paymos_order(id, rec);
        // 8: asked by name, a person's undated word that shipped takes Paymos' time too (a
        // later Full refund is judged by it); not a release, which a person dated by deciding
        let paid_at = self.paid_time(id, None);
        if let Some(inv) = self
            .inv
            .get_mut(id)
            .filter(|i| i.shipped && i.paid_at.is_none() && !i.released)
        {
            inv.paid_at = paid_at;
            return;
        }
        self.reconcile_one(id, rec);
    }

    /// 9/8/15: a release asked of Paymos first: nothing where Paymos has the invoice unpaid,
    /// in a project the receiver does not apply, or for another order than the one recorded;
    /// else Paymos' Full refunds of it, with their times, are recorded first, then released.
    fn release_asking(&mut self, id: &str, override_amount: bool) {
        let w = self.world;
        let Some(rec) = w.invoices.get(id) else {
            return;
        };
        let recorded = self.inv.get(id).and_then(|i| i.order.clone());
        let other_order = recorded.is_some_and(|o| !rec.order.is_empty() && o != rec.order);
        // 20: a payment recorded under another project than Paymos' (not contested: one word
        // named it) is not released (Paymos' refunds of it are recorded first), as a person's
        // `--project` of it would be refused; `reconcile --apply` applies Paymos' record
        let other_project = self.inv.get(id).is_some_and(|i| {
            !i.contested
                && i.project
                    .as_ref()
                    .is_some_and(|p| !p.is_empty() && *p != rec.project)
        });
        if !(rec.status.pays() || rec.paid_late) || !w.applies(&rec.project) || other_order {
            return;
        }
        self.settle_contest(id, None, Some(rec));
        let full: Vec<(String, u64)> = w
            .refunds
            .iter()
            .filter(|(_, r)| r.invoice == id && r.completed && r.mode == Mode::Full)
            .filter_map(|(wdr, _)| self.completed_at(wdr, None).map(|at| (wdr.clone(), at)))
            .collect();
        for (wdr, at) in full {
            self.apply_money(&wdr, Some(at));
        }
        self.settle();
        if other_project {
            return;
        }
        self.release(id, override_amount);
    }

    /// `reconcile --apply` of one invoice Paymos has paid (or paid late) in a project the
    /// receiver applies.
    fn reconcile_one(&mut self, id: &str, rec: &Invoice) {
        let w = self.world;
        // 20: a payment recorded here under another project than Paymos' (a delivery's word of
        // another shop), or contested, that shipped nothing is not Paymos' payment as Paymos
        // has it: Paymos' record replaces it
        let foreign = self.inv.get(id).is_some_and(|i| {
            !i.shipped
                && i.payment()
                && (i.contested || i.project.as_ref().is_some_and(|p| *p != rec.project))
        });
        // 24: a payment that waits, unshipped, held or as a second payment, under an order a
        // delivery named, which Paymos' record contradicts, rested on a delivery's word: Paymos'
        // payment of Paymos' order is judged anew (not one released, refunded or late)
        let planted = self.inv.get(id).is_some_and(|i| {
            !i.shipped
                && i.paid
                && !i.released
                && !i.late
                && i.refunds.is_empty()
                && matches!(i.judged, Some(Some(Wait::Duplicate | Wait::Held)))
                && i.project.as_ref().is_none_or(|p| *p == rec.project)
                && i.order
                    .as_ref()
                    .is_some_and(|o| !rec.order.is_empty() && *o != rec.order)
        });
        let foreign = foreign || planted;
        self.settle_contest(id, None, Some(rec));
        if let Some(inv) = self.inv.get_mut(id).filter(|_| foreign) {
            inv.paid = false;
            inv.pending = false;
            inv.judged = None;
            inv.paid_at = None;
            inv.late = false;
        }
        // 6: an invoice that shipped, or whose payment is recorded here already, has
        // nothing left to apply (its refunds are read, never recorded, by the run); 8: but
        // a payment recorded with no time (a person's word) takes Paymos' time of it
        // (one that never shipped, judged against a Full refund by no time, settled or
        // waiting `AfterRefund`, on an invoice that did not close first, is Paymos' payment
        // from now on, judged anew by its record)
        // 8: Paymos' refunds are read first, with their times: a payment a Full refund
        // completed at or after is paid back, recorded so with its refunds (a person's later
        // word finds it returned), never shipped; one made after every Full refund is new
        // (applied with the refunds before it); where no time tells, it waits
        let full: Vec<(&String, Option<u64>)> = w
            .refunds
            .iter()
            .filter(|(_, r)| r.invoice == *id && r.completed && r.mode == Mode::Full)
            .map(|(wdr, _)| (wdr, self.completed_at(wdr, None)))
            .collect();
        let paid_at = self.paid_time(id, None);
        let settled = full
            .iter()
            .any(|(_, r)| r.zip(paid_at).is_some_and(|(r, p)| r >= p));
        // 6/8: a second payment of an order shipped waits for its refund: where Paymos
        // completed a Full refund at or after it (its webhook lost), the run records Paymos'
        // refunds, its way out, and it waits no more
        if settled && self.wait_of(id) == Some(Wait::Duplicate) {
            for (wdr, at) in full {
                self.apply_money(wdr, at);
            }
            self.settle();
            return;
        }
        if let Some(inv) = self.inv.get_mut(id).filter(|i| i.shipped || i.paid) {
            if inv.shipped || inv.paid_at.is_some() {
                return;
            }
            let reopen = (inv.after_refund() || inv.refunded()) && !inv.late;
            if settled && !reopen {
                // dated only where a Full refund recorded here returns it by that time
                let returned = inv
                    .refunds
                    .iter()
                    .any(|r| r.zip(paid_at).is_some_and(|(r, p)| r >= p));
                if returned {
                    inv.paid_at = paid_at;
                }
                return;
            }
            inv.paid_at = paid_at;
            if !reopen {
                return;
            }
            inv.paid = false;
            inv.judged = None;
        }
        for (wdr, at) in full {
            self.apply_money(wdr, at);
        }
        self.apply_record(id, rec);
        self.settle();
    }

    /// 5/13: held when its project's registration of the order cannot be matched exactly in
    /// the same currency.
    fn held(&self, inv: &Inv, order: &str) -> bool {
        let same = |reg: &Price| {
            inv.price.as_ref().is_some_and(|p| {
                let amount = parse_amount(&p.amount);
                p.currency == reg.currency
                    && amount.is_some()
                    && amount == parse_amount(&reg.amount)
            })
        };
        inv.conflict
            || self
                .world
                .registered
                .get(&self.key(inv, order))
                .is_some_and(|reg| !same(reg))
    }

    /// 6/13: the first invoice that becomes shippable ships its (project's) order; nothing
    /// un-ships.
    fn settle(&mut self) {
        // 3: a payment is judged once, when it is applied; later facts re-judge nothing
        let fresh: Vec<String> = self
            .inv
            .iter()
            .filter(|(_, i)| i.paid && i.judged.is_none())
            .map(|(id, _)| id.clone())
            .collect();
        for id in fresh {
            let judged = self.judge(&id);
            self.inv_mut(&id).judged = Some(judged);
        }
        let ready: Vec<String> = self
            .inv
            .keys()
            .filter(|id| self.payment_wait(id).is_none())
            .cloned()
            .collect();
        for id in ready {
            let inv = &self.inv[&id];
            let Some(order) = inv.order.clone() else {
                continue;
            };
            // 8: a Full refund of this payment (whenever it arrived) means it never ships
            let key = self.key(inv, &order);
            if inv.paid && !inv.shipped && !inv.refunded() && !self.claimed(&key) {
                self.shipped.insert(key, id.clone());
                self.inv_mut(&id).shipped = true;
            }
        }
    }

    fn wait_of(&self, id: &str) -> Option<Wait> {
        let inv = self.inv.get(id);
        // 8: a Full refund settles any payment's wait (not an unconfirmed delivery's)
        self.payment_wait(id)
            .or_else(|| self.project_wait(id))
            .or_else(|| {
                // 2: an unconfirmed delivery waits (of an invoice that shipped, no more)
                (self.unconfirmed.contains_key(id) && !inv.is_some_and(|i| i.shipped))
                    .then_some(Wait::Unconfirmed)
            })
    }

    /// 19: a payment that named no project, known nowhere, waits for a person until a road
    /// applies a payment of it (15: another project's delivery or word changes nothing, this
    /// wait neither), or a Full refund Paymos completed at or after it returned it (8); a
    /// deposit's, until a person rechecks it.
    fn project_wait(&self, id: &str) -> Option<Wait> {
        if self.unnamed_deposits.contains(id) {
            // 2/11: as a delivery of money that waits, until a person rechecks it (though a
            // later delivery naming its project credited it)
            return Some(Wait::ProjectUnknown);
        }
        let inv = self.inv.get(id)?;
        let at = inv.unnamed?;
        let returned = inv.refunds.iter().any(|r| r.is_none_or(|r| r >= at));
        let waits = !inv.payment() && !inv.shipped && !returned;
        waits.then_some(Wait::ProjectUnknown)
    }

    /// Why a payment waits (what keeps it from shipping).
    fn payment_wait(&self, id: &str) -> Option<Wait> {
        let inv = self.inv.get(id);
        if inv.is_some_and(Inv::refunded) {
            return None; // 8: paid back; a payment after the refund is new and waits as it must
        }
        let inv = inv.filter(|i| i.payment() && !i.shipped)?;
        if inv.contested {
            return Some(Wait::Contested); // 20: a person or Paymos decides
        }
        if inv.after_refund() && !inv.released {
            return Some(Wait::AfterRefund); // 8: paid after a full refund? a person decides
        }
        if inv.paid && inv.late && inv.order.is_none() {
            return Some(Wait::PaidLate); // 7 (and nothing ships with no order: rule 4)
        }
        let (true, Some(order)) = (inv.paid, &inv.order) else {
            return Some(Wait::OrderUnknown); // 4: never ship "no order"
        };
        if inv.released && !self.claimed(&self.key(inv, order)) {
            return None; // 9
        }
        match inv.judged {
            Some(judged) => judged,
            None => self.judge(id),
        }
    }

    /// Why a paid invoice with a known order waits, as things stand now.
    fn judge(&self, id: &str) -> Option<Wait> {
        let inv = &self.inv[id];
        let order = inv.order.as_ref()?;
        if inv.late && !inv.released {
            // 7: a payment after the close is recorded as late first; a person decides (a
            // release still meets the order's claim and its price)
            Some(Wait::PaidLate)
        } else if self.claimed(&self.key(inv, order)) {
            Some(Wait::Duplicate) // 6/13: wins over Held
        } else if inv.released {
            None // 9
        } else if self.held(inv, order) {
            Some(Wait::Held) // 5
        } else {
            None
        }
    }

    fn finish(&self) -> Expected {
        let ids: BTreeSet<&String> = self
            .inv
            .keys()
            .chain(self.unconfirmed.keys())
            .chain(&self.unnamed_deposits)
            .collect();
        Expected {
            shipped: self.shipped.clone(),
            waiting: ids
                .into_iter()
                .filter_map(|id| Some((id.clone(), self.wait_of(id)?)))
                .collect(),
            balances: self
                .balances
                .iter()
                .filter(|(_, v)| **v != 0)
                .map(|(k, v)| (k.clone(), format_amount(*v)))
                .collect(),
            refunded: self
                .inv
                .iter()
                .filter(|(_, i)| i.refunded())
                .map(|(id, _)| id.clone())
                .collect(),
            contested: self
                .inv
                .iter()
                .filter(|(_, i)| i.questioned)
                .map(|(id, _)| id.clone())
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Status::{AwaitingPayment, Confirming, Expired, Paid, Underpaid, UnderpaidWaiting};

    fn p(amount: &str, currency: &str) -> Price {
        Price {
            amount: amount.into(),
            currency: currency.into(),
        }
    }
    /// The project of the tests' records and deliveries but where they say otherwise.
    const A: &str = "prj_a";
    fn world(reverse_check: bool) -> World {
        World {
            invoices: BTreeMap::new(),
            refunds: BTreeMap::new(),
            payouts: BTreeMap::new(),
            deposits: BTreeMap::new(),
            registered: BTreeMap::new(),
            projects: Some(BTreeSet::from([A.to_owned()])),
            reverse_check,
            environment: Env::Live,
        }
    }
    fn register(w: &mut World, order: &str, price: Price) {
        w.registered.insert((A.into(), order.into()), price);
    }
    fn rec(order: &str, amount: &str, status: Status, paid_late: bool) -> Invoice {
        Invoice {
            project: A.into(),
            order: order.into(),
            price: p(amount, "USD"),
            status,
            paid_late,
        }
    }
    fn refund(invoice: &str, mode: Mode) -> Refund {
        Refund {
            invoice: invoice.into(),
            mode,
            completed: true,
        }
    }
    fn deposit(payer: &str, net: &str, confirmed: bool) -> Deposit {
        Deposit {
            project: A.into(),
            payer: payer.into(),
            net: net.into(),
            currency: "USDT".into(),
            confirmed,
        }
    }
    fn ev(id: &str, status: Status, order: Option<&str>, price: Option<Price>) -> Arrival {
        let order = order.map(Into::into);
        let (env, genuine, lagging) = (Env::Live, true, false);
        Arrival::Invoice {
            event_id: None,
            invoice: id.into(),
            project: Some(A.into()),
            env,
            genuine,
            lagging,
            at: 0,
            status,
            order,
            price,
        }
    }
    fn paid(id: &str, order: &str, amount: &str) -> Arrival {
        ev(id, Paid, Some(order), Some(p(amount, "USD")))
    }
    fn wdr(id: &str, completed: bool) -> Arrival {
        let (env, genuine, lagging) = (Env::Live, true, false);
        Arrival::Withdrawal {
            event_id: None,
            id: id.into(),
            env,
            genuine,
            lagging,
            at: 0,
            completed,
        }
    }
    /// The same step announcing a fact of Paymos time `t`.
    fn at(mut s: Arrival, t: u64) -> Arrival {
        if let Arrival::Invoice { at, .. } | Arrival::Withdrawal { at, .. } = &mut s {
            *at = t;
        }
        s
    }
    fn dep(id: &str, confirmed: bool) -> Arrival {
        let (env, genuine, lagging) = (Env::Live, true, false);
        Arrival::Deposit {
            event_id: None,
            id: id.into(),
            project: Some(A.into()),
            env,
            genuine,
            lagging,
            confirmed,
        }
    }
    /// The same step signed by `e`, genuine or forged, lagging or not.
    fn tweak(mut s: Arrival, e: Env, g: bool, l: bool) -> Arrival {
        if let Arrival::Invoice {
            env,
            genuine,
            lagging,
            ..
        }
        | Arrival::Withdrawal {
            env,
            genuine,
            lagging,
            ..
        }
        | Arrival::Deposit {
            env,
            genuine,
            lagging,
            ..
        } = &mut s
        {
            (*env, *genuine, *lagging) = (e, g, l);
        }
        s
    }
    fn forged(s: Arrival) -> Arrival {
        tweak(s, Env::Live, false, false)
    }
    fn lagging(s: Arrival) -> Arrival {
        tweak(s, Env::Live, true, true)
    }
    fn mark(invoice: &str, order: &str) -> Arrival {
        Arrival::MarkPaid {
            invoice: invoice.into(),
            order: Some(order.into()),
            project: Some(A.into()),
            api: false,
        }
    }
    fn recheck(id: &str) -> Arrival {
        Arrival::Recheck { id: id.into() }
    }
    fn release(id: &str, override_amount: bool) -> Arrival {
        Arrival::Release {
            invoice: id.into(),
            override_amount,
            project: None,
            api: false,
        }
    }
    fn exp(shipped: &[(&str, &str)], waiting: &[(&str, Wait)], refunded: &[&str]) -> Expected {
        Expected {
            shipped: shipped
                .iter()
                .map(|(o, i)| ((A.into(), (*o).into()), (*i).into()))
                .collect(),
            waiting: waiting.iter().map(|(id, w)| ((*id).into(), *w)).collect(),
            balances: BTreeMap::new(),
            refunded: refunded.iter().map(|i| (*i).into()).collect(),
            contested: BTreeSet::new(),
        }
    }

    #[test] // 1
    fn a_sandbox_step_blocks_nothing() {
        let mut w = world(true);
        w.invoices
            .insert("inv_1".into(), rec("o1", "10", Paid, false));
        // live, the refund has not completed: only its sandbox copy says it has
        let open = Refund {
            completed: false,
            ..refund("inv_1", Mode::Full)
        };
        w.refunds.insert("wdr_1".into(), open);
        w.deposits
            .insert("pcd_1".into(), deposit("alice", "5", true));
        let sandbox = |s| tweak(s, Env::Sandbox, true, true);
        let steps = [
            sandbox(paid("inv_1", "o1", "10")),
            sandbox(wdr("wdr_1", true)),
            sandbox(dep("pcd_1", true)),
            paid("inv_1", "o1", "10"),
        ];
        assert_eq!(expected(&w, &steps), exp(&[("o1", "inv_1")], &[], &[]));
    }

    #[test] // 2
    fn a_forged_final_event_changes_nothing_and_waits_for_a_person() {
        let mut w = world(true);
        w.invoices
            .insert("inv_1".into(), rec("o1", "10", AwaitingPayment, false));
        w.invoices
            .insert("inv_2".into(), rec("o2", "10", Expired, false));
        w.refunds.insert(
            "wdr_1".into(),
            Refund {
                completed: false,
                ..refund("inv_3", Mode::Full)
            },
        );
        w.deposits
            .insert("pcd_1".into(), deposit("alice", "5", false));
        let steps = [
            forged(paid("inv_1", "o1", "10")),
            forged(paid("inv_2", "o2", "10")),
            forged(ev("inv_1", Expired, None, None)),
            forged(wdr("wdr_1", true)),
            forged(dep("pcd_1", true)),
        ];
        // Nothing moves; each forgery waits for a person (a leaked secret to rotate).
        let forgeries = [
            ("inv_1", Wait::Unconfirmed),
            ("inv_2", Wait::Unconfirmed),
            ("pcd_1", Wait::Unconfirmed),
            ("wdr_1", Wait::Unconfirmed),
        ];
        assert_eq!(expected(&w, &steps), exp(&[], &forgeries, &[]));
    }

    #[test] // 2, 12
    fn a_lagging_payment_waits_until_rechecked() {
        let mut w = world(true);
        w.invoices
            .insert("inv_1".into(), rec("o1", "10", Paid, false));
        w.invoices
            .insert("inv_2".into(), rec("o2", "10", Paid, false));
        let steps = [
            lagging(paid("inv_1", "o1", "10")),
            lagging(paid("inv_2", "o2", "10")),
            recheck("inv_1"),
        ];
        let want = exp(&[("o1", "inv_1")], &[("inv_2", Wait::Unconfirmed)], &[]);
        assert_eq!(expected(&w, &steps), want);
    }

    #[test] // 2, 4
    fn paymos_order_wins_over_a_forged_open_event() {
        let mut w = world(true);
        w.invoices
            .insert("inv_1".into(), rec("o1", "10", Paid, false));
        register(&mut w, "o1", p("10.00", "USD"));
        register(&mut w, "o_evil", p("1", "USD"));
        let open = ev(
            "inv_1",
            AwaitingPayment,
            Some("o_evil"),
            Some(p("1", "USD")),
        );
        let steps = [forged(open), ev("inv_1", Paid, None, None)];
        assert_eq!(expected(&w, &steps), exp(&[("o1", "inv_1")], &[], &[]));
    }

    #[test] // 3
    fn a_late_open_or_closing_event_never_moves_a_paid_invoice_back() {
        let steps = [
            paid("inv_1", "o1", "10"),
            ev("inv_1", Confirming, Some("o1"), None),
            ev("inv_1", Expired, None, None),
            ev("inv_1", AwaitingPayment, None, None),
            paid("inv_1", "o1", "10"),
        ];
        assert_eq!(
            expected(&world(false), &steps),
            exp(&[("o1", "inv_1")], &[], &[])
        );
    }

    #[test] // 4
    fn an_order_known_nowhere_waits_and_ships_once_learned() {
        let w = world(false);
        let mut steps = vec![
            ev("inv_1", Paid, None, None),
            ev("inv_2", Paid, Some(""), None),
        ];
        let unknown = [("inv_1", Wait::OrderUnknown), ("inv_2", Wait::OrderUnknown)];
        assert_eq!(expected(&w, &steps), exp(&[], &unknown, &[]));
        // A late open event teaches the order; the payment is judged by the next paying step.
        steps.push(ev("inv_1", Confirming, Some("o1"), None));
        assert_eq!(expected(&w, &steps), exp(&[], &unknown, &[]));
        steps.push(ev("inv_1", Paid, None, None));
        steps.push(mark("inv_2", "o2"));
        assert_eq!(
            expected(&w, &steps),
            exp(&[("o1", "inv_1"), ("o2", "inv_2")], &[], &[])
        );
    }

    #[test] // 4, 9
    fn two_trusted_events_naming_different_orders_hold_the_first() {
        let w = world(false);
        let mut steps = vec![
            ev("inv_1", AwaitingPayment, Some("o1"), None),
            paid("inv_1", "o2", "1"),
        ];
        assert_eq!(
            expected(&w, &steps),
            exp(&[], &[("inv_1", Wait::Held)], &[])
        );
        steps.push(release("inv_1", true));
        assert_eq!(expected(&w, &steps), exp(&[("o1", "inv_1")], &[], &[]));
    }

    #[test] // 5
    fn a_price_is_compared_exactly_and_only_in_its_own_currency() {
        let mut w = world(false);
        for (order, amount) in [("o1", "10.50"), ("o2", "10.5"), ("o3", "7"), ("o5", "1.0")] {
            register(&mut w, order, p(amount, "USD"));
        }
        let steps = [
            paid("inv_1", "o1", "10.5"),
            ev("inv_2", Paid, Some("o2"), Some(p("10.5", "USDT"))),
            ev("inv_3", Paid, Some("o3"), None),
            paid("inv_4", "o4", "not a number"),
            paid("inv_5", "o5", "1.01"),
        ];
        let held = [
            ("inv_2", Wait::Held),
            ("inv_3", Wait::Held),
            ("inv_5", Wait::Held),
        ];
        assert_eq!(
            expected(&w, &steps),
            exp(&[("o1", "inv_1"), ("o4", "inv_4")], &held, &[])
        );
    }

    #[test] // 6
    fn an_order_ships_at_most_once() {
        let mut w = world(false);
        register(&mut w, "o1", p("10", "USD"));
        let steps = [
            paid("inv_1", "o1", "10"),
            paid("inv_2", "o1", "10"),
            paid("inv_3", "o1", "9"),
            ev("inv_4", Expired, Some("o1"), None),
            paid("inv_4", "o1", "10"),
            paid("inv_1", "o1", "10"),
        ];
        let dup = [
            ("inv_2", Wait::Duplicate),
            ("inv_3", Wait::Duplicate),
            // 7: recorded as late first (a release would meet the claim)
            ("inv_4", Wait::PaidLate),
        ];
        assert_eq!(expected(&w, &steps), exp(&[("o1", "inv_1")], &dup, &[]));
    }

    #[test] // 7, 9
    fn a_payment_after_closing_waits_paid_late() {
        let mut w = world(true);
        w.invoices
            .insert("inv_1".into(), rec("o1", "10", Expired, true));
        w.invoices
            .insert("inv_2".into(), rec("o2", "10", Underpaid, true));
        w.invoices
            .insert("inv_3".into(), rec("o3", "10", Paid, false));
        register(&mut w, "o2", p("5", "USD"));
        let mut steps = vec![ev("inv_1", Expired, None, None), Arrival::Reconcile];
        let late = [("inv_1", Wait::PaidLate), ("inv_2", Wait::PaidLate)];
        assert_eq!(expected(&w, &steps), exp(&[("o3", "inv_3")], &late, &[]));
        steps.extend([release("inv_1", false), release("inv_2", false)]);
        let want = exp(
            &[("o1", "inv_1"), ("o3", "inv_3")],
            // 9: its price differs: released only with the override
            &[("inv_2", Wait::PaidLate)],
            &[],
        );
        assert_eq!(expected(&w, &steps), want);
    }

    #[test] // 8
    fn a_full_refund_first_means_the_invoice_never_ships() {
        let mut w = world(false);
        w.refunds
            .insert("wdr_1".into(), refund("inv_1", Mode::Full));
        let steps = [
            wdr("wdr_1", true),
            paid("inv_1", "o1", "10"),
            paid("inv_2", "o1", "10"),
        ];
        assert_eq!(
            expected(&w, &steps),
            exp(&[("o1", "inv_2")], &[], &["inv_1"])
        );
    }

    #[test] // 8
    fn a_full_refund_keeps_what_shipped_and_settles_any_wait() {
        let mut w = world(false);
        w.refunds
            .insert("wdr_1".into(), refund("inv_1", Mode::Full));
        w.refunds
            .insert("wdr_2".into(), refund("inv_2", Mode::Full));
        let steps = [
            paid("inv_1", "o1", "10"),
            paid("inv_2", "o1", "10"),
            wdr("wdr_1", true),
            wdr("wdr_2", true),
        ];
        assert_eq!(
            expected(&w, &steps),
            exp(&[("o1", "inv_1")], &[], &["inv_1", "inv_2"])
        );
    }

    #[test] // 8
    fn an_overpayment_refund_settles_nothing() {
        let mut w = world(false);
        register(&mut w, "o1", p("10", "USD"));
        w.refunds
            .insert("wdr_1".into(), refund("inv_1", Mode::Overpayment));
        w.refunds
            .insert("wdr_2".into(), refund("inv_2", Mode::Overpayment));
        let steps = [
            paid("inv_1", "o1", "12"),
            wdr("wdr_1", true),
            wdr("wdr_2", true),
            paid("inv_2", "o2", "3"),
        ];
        assert_eq!(
            expected(&w, &steps),
            exp(&[("o2", "inv_2")], &[("inv_1", Wait::Held)], &[])
        );
    }

    #[test] // 7, 8, 9
    fn a_payment_after_a_full_refund_is_new_and_ships_or_waits() {
        let mut w = world(false);
        w.refunds
            .insert("wdr_1".into(), refund("inv_1", Mode::Full));
        w.refunds
            .insert("wdr_2".into(), refund("inv_2", Mode::Full));
        let part = |id, order| ev(id, UnderpaidWaiting, Some(order), Some(p("10", "USD")));
        let mut steps = vec![
            // open: partly paid, returned in full at 20, then paid in full at 30
            at(part("inv_1", "o1"), 10),
            at(wdr("wdr_1", true), 20),
            at(paid("inv_1", "o1", "10"), 30),
            // closed underpaid, its partial payment returned at 20, paid late at 30
            at(ev("inv_2", Underpaid, Some("o2"), None), 15),
            at(paid("inv_2", "o2", "10"), 30),
            at(wdr("wdr_2", true), 20),
        ];
        let want = exp(&[("o1", "inv_1")], &[("inv_2", Wait::PaidLate)], &[]);
        assert_eq!(expected(&w, &steps), want);
        steps.push(release("inv_2", false));
        let want = exp(&[("o1", "inv_1"), ("o2", "inv_2")], &[], &[]);
        assert_eq!(expected(&w, &steps), want);
    }

    #[test] // 8
    fn a_full_refund_returns_the_payment_before_it_whenever_it_arrives() {
        let mut w = world(false);
        for (r, i) in [("wdr_1", "inv_1"), ("wdr_2", "inv_2"), ("wdr_3", "inv_2")] {
            w.refunds.insert(r.into(), refund(i, Mode::Full));
        }
        let steps = [
            // completed at 40, after the payment at 30, but delivered first
            at(wdr("wdr_1", true), 40),
            at(paid("inv_1", "o1", "10"), 30),
            // one refund before the payment, one after it
            at(wdr("wdr_2", true), 20),
            at(paid("inv_2", "o2", "10"), 30),
            at(wdr("wdr_3", true), 40),
        ];
        let want = exp(&[("o2", "inv_2")], &[], &["inv_1", "inv_2"]);
        assert_eq!(expected(&w, &steps), want);
    }

    /// Paymos' clock: invoices paid and refunds completed at the given times.
    fn clock(paid: &[(&str, u64)], completed: &[(&str, u64)]) -> Clock {
        let map = |xs: &[(&str, u64)]| xs.iter().map(|(id, t)| ((*id).into(), *t)).collect();
        Clock {
            paid_at: map(paid),
            completed_at: map(completed),
        }
    }
    /// A reverse-checked world where each (invoice, order) is paid at Paymos and refunded in
    /// full by `wdr_N` (`N` its digit).
    fn refunded_world(invoices: &[(&str, &str)]) -> World {
        let mut w = world(true);
        for (i, order) in invoices {
            w.invoices
                .insert((*i).into(), rec(order, "10", Paid, false));
            let wdr = format!("wdr_{}", i.trim_start_matches("inv_"));
            w.refunds.insert(wdr, refund(i, Mode::Full));
        }
        w
    }

    #[test] // 2, 8
    fn a_recheck_or_reconcile_of_a_payment_paymos_dates_after_a_full_refund_ships() {
        let w = refunded_world(&[("inv_1", "o1"), ("inv_3", "o3")]);
        let c = clock(
            &[("inv_1", 30), ("inv_3", 30)],
            &[("wdr_1", 20), ("wdr_3", 20)],
        );
        let steps = [
            // the refund's event names 40, Paymos 20; the payment's event 10, Paymos 30
            at(wdr("wdr_1", true), 40),
            lagging(at(paid("inv_1", "o1", "10"), 10)),
            recheck("inv_1"),
            // known only at Paymos: reconcile reads the refund (20) and the payment (30)
            Arrival::Reconcile,
        ];
        let want = exp(&[("o1", "inv_1"), ("o3", "inv_3")], &[], &[]);
        assert_eq!(expected_at(&w, &c, &steps), want);
    }

    #[test] // 2, 8
    fn a_payment_paymos_dates_before_a_full_refund_is_refunded_whatever_its_event_says() {
        let w = refunded_world(&[("inv_1", "o1"), ("inv_3", "o3"), ("inv_5", "o5")]);
        let paid_at = [("inv_1", 10), ("inv_3", 10), ("inv_5", 10)];
        let c = clock(&paid_at, &[("wdr_1", 20), ("wdr_3", 20), ("wdr_5", 20)]);
        let steps = [
            at(wdr("wdr_1", true), 5),
            lagging(at(paid("inv_1", "o1", "10"), 30)),
            recheck("inv_1"),
            at(wdr("wdr_3", true), 20),
            Arrival::Reconcile,
            // a forged payment Paymos confirms, dated in the future: Paymos' 10 dates it
            at(wdr("wdr_5", true), 20),
            forged(at(paid("inv_5", "o5", "10"), 99)),
        ];
        let want = exp(&[], &[], &["inv_1", "inv_3", "inv_5"]);
        assert_eq!(expected_at(&w, &c, &steps), want);
    }

    #[test] // 2, 8
    fn a_payment_paymos_confirms_is_judged_against_every_full_refund_it_lists() {
        // inv_1 paid at 105, refunded in full at 140; inv_2 paid at 130 after a Full refund at
        // 120 (its partial payment returned); inv_3 as inv_1, its payment lagging at first. No
        // refund's delivery ever comes.
        let w = refunded_world(&[("inv_1", "o1"), ("inv_2", "o2"), ("inv_3", "o3")]);
        let paid_at = [("inv_1", 105), ("inv_2", 130), ("inv_3", 105)];
        let c = clock(&paid_at, &[("wdr_1", 140), ("wdr_2", 120), ("wdr_3", 140)]);
        let mut steps = vec![
            at(paid("inv_1", "o1", "10"), 105),
            at(paid("inv_2", "o2", "10"), 130),
            lagging(at(paid("inv_3", "o3", "10"), 105)),
        ];
        let want = exp(
            &[("o2", "inv_2")],
            &[("inv_3", Wait::Unconfirmed)],
            &["inv_1"],
        );
        assert_eq!(expected_at(&w, &c, &steps), want);
        // the recheck reads them too; a late delivery of a refund read already changes nothing
        steps.extend([recheck("inv_3"), at(wdr("wdr_1", true), 140)]);
        let want = exp(&[("o2", "inv_2")], &[], &["inv_1", "inv_3"]);
        assert_eq!(expected_at(&w, &c, &steps), want);
        // without the reverse check no road asks Paymos: what no delivery said is not known
        let unchecked = World {
            reverse_check: false,
            ..w.clone()
        };
        let steps = &steps[..2];
        let want = exp(&[("o1", "inv_1"), ("o2", "inv_2")], &[], &[]);
        assert_eq!(expected_at(&unchecked, &c, steps), want);
        // Paymos gives inv_1's refund no time: nothing orders it against the payment, which
        // waits for a person (inv_2 has no refund here)
        let mut w = w;
        w.refunds.remove("wdr_2");
        let waits = exp(&[("o2", "inv_2")], &[("inv_1", Wait::AfterRefund)], &[]);
        assert_eq!(expected_at(&w, &clock(&paid_at, &[]), steps), waits);
    }

    #[test] // 3, 8, 21
    fn a_persons_word_on_a_checked_stack_leaves_paymos_time_to_judge_the_refund() {
        // inv_1 paid at 130 after a Full refund at 120; inv_2 paid at 105, refunded at 140;
        // inv_3 paid at 130 after a Full refund at 120. With the reverse check a person's
        // word without the API ships nothing (21): each payment is judged by Paymos' time
        let w = refunded_world(&[("inv_1", "o1"), ("inv_2", "o2"), ("inv_3", "o3")]);
        let paid_at = [("inv_1", 130), ("inv_2", 105), ("inv_3", 130)];
        let c = clock(&paid_at, &[("wdr_1", 120), ("wdr_2", 140), ("wdr_3", 120)]);
        let steps = [
            // the word ships nothing; Paymos dates the payment after its refund: a new payment
            mark("inv_1", "o1"),
            at(paid("inv_1", "o1", "10"), 130),
            // Paymos dates it before the refund: paid back, it waits for no one
            at(wdr("wdr_2", true), 140),
            mark("inv_2", "o2"),
            at(paid("inv_2", "o2", "10"), 105),
            // after the refund: a new payment, it ships
            at(wdr("wdr_3", true), 120),
            mark("inv_3", "o3"),
            at(paid("inv_3", "o3", "10"), 130),
        ];
        let want = exp(&[("o1", "inv_1"), ("o3", "inv_3")], &[], &["inv_2"]);
        assert_eq!(expected_at(&w, &c, &steps), want);
    }

    #[test] // 8, 19
    fn a_recheck_of_a_payment_that_waited_for_its_project_reads_its_refunds() {
        // two projects, no reverse check: inv_1 paid at 105 and refunded in full at 140,
        // inv_2 paid at 130 after a Full refund at 120; each paid event first names no project,
        // then a later one names it and it ships; the refunds' deliveries never come
        let mut w = refunded_world(&[("inv_1", "o1"), ("inv_2", "o2")]);
        w.reverse_check = false;
        only(&mut w, &[A, "prj_b"]);
        let c = clock(
            &[("inv_1", 105), ("inv_2", 130)],
            &[("wdr_1", 140), ("wdr_2", 120)],
        );
        let mut steps = vec![
            of(at(paid("inv_1", "o1", "10"), 105), None),
            at(paid("inv_1", "o1", "10"), 105),
            of(at(paid("inv_2", "o2", "10"), 130), None),
            at(paid("inv_2", "o2", "10"), 130),
        ];
        let shipped = [("o1", "inv_1"), ("o2", "inv_2")];
        assert_eq!(expected_at(&w, &c, &steps), exp(&shipped, &[], &[]));
        // the recheck reads Paymos' record and refunds: what shipped stays shipped
        steps.extend([recheck("inv_1"), recheck("inv_2")]);
        assert_eq!(expected_at(&w, &c, &steps), exp(&shipped, &[], &["inv_1"]));
    }

    #[test] // 2, 4
    fn a_confirmed_closure_teaches_no_order_of_its_own() {
        // Paymos' record names no usable order; a forged `expired` names one, and Paymos
        // confirms only its status: the late payment waits with no order, even released
        let mut w = world(true);
        w.invoices
            .insert("inv_1".into(), rec("", "10", Expired, true));
        let steps = [
            forged(ev("inv_1", Expired, Some("o_evil"), None)),
            Arrival::Reconcile,
            release("inv_1", false),
            release("inv_1", true),
        ];
        assert_eq!(
            expected(&w, &steps),
            exp(&[], &[("inv_1", Wait::PaidLate)], &[])
        );
    }

    /// `inv_1` (open) and `inv_2` (closed) partly paid, refunded in full at 20, then marked paid;
    /// `inv_3` paid and refunded at Paymos, which names no time for either, then reconciled.
    fn marked_after_a_full_refund() -> (World, Vec<Arrival>) {
        let mut w = world(false);
        for (r, i) in [("wdr_1", "inv_1"), ("wdr_2", "inv_2"), ("wdr_3", "inv_3")] {
            w.refunds.insert(r.into(), refund(i, Mode::Full));
        }
        w.invoices
            .insert("inv_3".into(), rec("o3", "10", Paid, false));
        let part = |id, order| ev(id, UnderpaidWaiting, Some(order), Some(p("10", "USD")));
        let steps = vec![
            at(part("inv_1", "o1"), 10),
            at(wdr("wdr_1", true), 20),
            mark("inv_1", "o1"),
            at(ev("inv_2", Underpaid, Some("o2"), None), 15),
            at(wdr("wdr_2", true), 20),
            mark("inv_2", "o2"),
            Arrival::Reconcile,
            // final already: a later dated payment event changes nothing
            at(paid("inv_1", "o1", "10"), 30),
        ];
        (w, steps)
    }

    #[test] // 7, 8
    fn a_payment_no_time_orders_after_a_full_refund_waits_after_refund() {
        let (w, steps) = marked_after_a_full_refund();
        let waits = [
            ("inv_1", Wait::AfterRefund),
            ("inv_2", Wait::AfterRefund),
            ("inv_3", Wait::AfterRefund),
        ];
        assert_eq!(expected(&w, &steps), exp(&[], &waits, &[]));
    }

    #[test] // 6, 8, 9
    fn a_release_ships_a_payment_after_a_refund_once_per_order() {
        let (mut w, mut steps) = marked_after_a_full_refund();
        register(&mut w, "o2", p("5", "USD"));
        w.refunds
            .insert("wdr_4".into(), refund("inv_4", Mode::Full));
        steps.extend([
            at(wdr("wdr_4", true), 20),
            mark("inv_4", "o1"),
            release("inv_1", false),
            release("inv_1", false),
            // o1 shipped under inv_1: inv_4 keeps waiting
            release("inv_4", true),
            // 5: its price differs: released only with the override
            release("inv_2", false),
        ]);
        let waits = [
            ("inv_2", Wait::AfterRefund),
            ("inv_3", Wait::AfterRefund),
            ("inv_4", Wait::AfterRefund),
        ];
        assert_eq!(expected(&w, &steps), exp(&[("o1", "inv_1")], &waits, &[]));
        steps.extend([release("inv_2", true), release("inv_3", false)]);
        let shipped = [("o1", "inv_1"), ("o2", "inv_2"), ("o3", "inv_3")];
        let want = exp(&shipped, &[("inv_4", Wait::AfterRefund)], &[]);
        assert_eq!(expected(&w, &steps), want);
    }

    #[test] // 8
    fn a_full_refund_after_the_wait_began_settles_it() {
        let (mut w, mut steps) = marked_after_a_full_refund();
        for (r, i) in [("wdr_5", "inv_1"), ("wdr_6", "inv_2")] {
            w.refunds.insert(r.into(), refund(i, Mode::Full));
        }
        w.refunds
            .insert("wdr_7".into(), refund("inv_2", Mode::Overpayment));
        steps.extend([
            // dated before everything, it still came after the person's word
            at(wdr("wdr_5", true), 1),
            // an Overpayment refund settles nothing
            at(wdr("wdr_7", true), 40),
        ]);
        let waits = [("inv_2", Wait::AfterRefund), ("inv_3", Wait::AfterRefund)];
        assert_eq!(expected(&w, &steps), exp(&[], &waits, &["inv_1"]));
        steps.push(at(wdr("wdr_6", true), 40));
        let want = exp(&[], &[("inv_3", Wait::AfterRefund)], &["inv_1", "inv_2"]);
        assert_eq!(expected(&w, &steps), want);
    }

    #[test] // 9
    fn a_release_acts_only_on_a_held_or_late_payment() {
        let mut w = world(false);
        register(&mut w, "o1", p("10", "USD"));
        let steps = [
            paid("inv_1", "o1", "9"),
            release("inv_1", false),
            ev("inv_2", Paid, None, None),
            release("inv_2", true),
            ev("inv_3", AwaitingPayment, Some("o3"), None),
            release("inv_3", true),
            paid("inv_4", "o1", "10"),
            release("inv_1", true),
        ];
        // 3: inv_1 was judged held when paid; its late release meets inv_4's claim: refused
        let waits = [("inv_1", Wait::Held), ("inv_2", Wait::OrderUnknown)];
        assert_eq!(expected(&w, &steps), exp(&[("o1", "inv_4")], &waits, &[]));
    }

    #[test] // 10
    fn a_withdrawal_counts_once_paymos_confirms_it() {
        let mut w = world(true);
        w.invoices
            .insert("inv_1".into(), rec("o1", "10", Paid, false));
        w.refunds
            .insert("wdr_1".into(), refund("inv_1", Mode::Full));
        w.payouts.insert("wdr_2".into(), Payout { completed: true });
        let steps = [
            // a person's word asks Paymos nothing: with the reverse check it ships nothing (21)
            mark("inv_1", "o1"),
            lagging(wdr("wdr_1", true)),
            lagging(wdr("wdr_2", true)),
            wdr("wdr_2", false),
            wdr("wdr_2", true),
        ];
        // wdr_2's lagging delivery waits until it is rechecked, though a later one applied it.
        let waits = [("wdr_1", Wait::Unconfirmed), ("wdr_2", Wait::Unconfirmed)];
        let want = exp(&[], &waits, &[]);
        assert_eq!(expected(&w, &steps), want);
        let steps = [&steps[..], &[recheck("wdr_1"), recheck("wdr_2")]].concat();
        assert_eq!(expected(&w, &steps), exp(&[], &[], &["inv_1"]));
    }

    #[test] // 11
    fn a_deposit_credits_once_and_advisories_never_undo_it() {
        let mut w = world(true);
        w.deposits
            .insert("pcd_1".into(), deposit("alice", "0.10", true));
        w.deposits
            .insert("pcd_2".into(), deposit("alice", "0.9", true));
        w.deposits
            .insert("pcd_3".into(), deposit("bob", "1,5", true));
        w.deposits
            .insert("pcd_4".into(), deposit("carol", "5", true));
        w.deposits
            .insert("pcd_5".into(), deposit("dave", "0.000", true));
        let steps = [
            dep("pcd_1", false),
            dep("pcd_1", true),
            dep("pcd_1", true),
            dep("pcd_1", false),
            dep("pcd_2", true),
            dep("pcd_3", true),
            lagging(dep("pcd_4", true)),
            dep("pcd_5", true),
        ];
        let mut want = exp(&[], &[("pcd_4", Wait::Unconfirmed)], &[]);
        want.balances
            .insert((A.into(), "alice".into(), "USDT".into()), "1".into());
        assert_eq!(expected(&w, &steps), want);
    }

    #[test] // 12
    fn a_recheck_of_nothing_waiting_changes_nothing() {
        let mut w = world(true);
        w.invoices
            .insert("inv_1".into(), rec("o1", "10", Paid, false));
        w.deposits
            .insert("pcd_1".into(), deposit("alice", "5", true));
        let steps = [recheck("inv_1"), recheck("pcd_1"), recheck("wdr_9")];
        assert_eq!(expected(&w, &steps), Expected::default());
    }

    /// The same invoice step naming `project` (None: left out).
    fn of(mut s: Arrival, project: Option<&str>) -> Arrival {
        if let Arrival::Invoice { project: p, .. }
        | Arrival::MarkPaid { project: p, .. }
        | Arrival::Deposit { project: p, .. } = &mut s
        {
            *p = project.map(Into::into);
        }
        s
    }
    fn only(w: &mut World, projects: &[&str]) {
        w.projects = Some(projects.iter().map(|p| (*p).into()).collect());
    }
    fn key(project: &str, order: &str) -> (String, String) {
        (project.into(), order.into())
    }

    #[test] // 13
    fn an_order_is_one_per_project_and_ships_once_in_each() {
        for reverse_check in [false, true] {
            let mut w = world(reverse_check);
            for (i, project) in [("inv_1", A), ("inv_2", "prj_b"), ("inv_3", "prj_b")] {
                let rec = Invoice {
                    project: project.into(),
                    ..rec("o1", "12", Paid, false)
                };
                w.invoices.insert(i.into(), rec);
            }
            only(&mut w, &[A, "prj_b"]);
            // prj_a's o1 is registered at 10: its payment at 12 is held; prj_b's o1 is not
            register(&mut w, "o1", p("10", "USD"));
            let steps = [
                paid("inv_1", "o1", "12"),
                of(paid("inv_2", "o1", "12"), Some("prj_b")),
                of(paid("inv_3", "o1", "12"), Some("prj_b")),
            ];
            let mut want = exp(
                &[],
                &[("inv_1", Wait::Held), ("inv_3", Wait::Duplicate)],
                &[],
            );
            want.shipped.insert(key("prj_b", "o1"), "inv_2".into());
            assert_eq!(expected(&w, &steps), want, "reverse check {reverse_check}");
        }
    }

    #[test] // 14, 15
    fn a_payer_has_a_balance_per_project_and_another_projects_credits_nothing() {
        let mut w = world(false);
        only(&mut w, &[A, "prj_b"]);
        for (d, project) in [("pcd_1", A), ("pcd_2", "prj_b"), ("pcd_3", "prj_c")] {
            let d_ = Deposit {
                project: project.into(),
                ..deposit("42", "5", true)
            };
            w.deposits.insert(d.into(), d_);
        }
        let steps = [
            dep("pcd_1", true),
            of(dep("pcd_2", true), Some("prj_b")),
            of(dep("pcd_3", true), Some("prj_c")),
        ];
        let mut want = Expected::default();
        for project in [A, "prj_b"] {
            let k = (project.into(), "42".into(), "USDT".into());
            want.balances.insert(k, "5".into());
        }
        assert_eq!(expected(&w, &steps), want);
    }

    #[test] // 15, 16
    fn another_projects_deliveries_change_nothing_and_a_payout_moves_nothing() {
        for reverse_check in [false, true] {
            let mut w = world(reverse_check);
            only(&mut w, &[A]);
            let foreign = Invoice {
                project: "prj_b".into(),
                ..rec("o1", "10", Paid, false)
            };
            w.invoices.insert("inv_b".into(), foreign);
            w.refunds
                .insert("wdr_1".into(), refund("inv_b", Mode::Full));
            w.payouts.insert("wdr_2".into(), Payout { completed: true });
            let steps = [
                of(paid("inv_b", "o1", "10"), Some("prj_b")),
                lagging(of(paid("inv_b", "o1", "10"), Some("prj_b"))),
                wdr("wdr_1", true),
                lagging(wdr("wdr_1", true)),
                of(mark("inv_b", "o1"), Some("prj_b")),
                wdr("wdr_2", true),
                Arrival::Reconcile,
                recheck("inv_b"),
            ];
            let want = Expected::default();
            assert_eq!(expected(&w, &steps), want, "reverse check {reverse_check}");
        }
    }

    #[test] // 17
    fn an_invoice_event_without_a_project_belongs_to_its_invoices_project() {
        for reverse_check in [false, true] {
            let mut w = world(reverse_check);
            only(&mut w, &[A, "prj_b"]);
            for (i, project) in [("inv_1", A), ("inv_2", "prj_b"), ("inv_3", "prj_c")] {
                let rec = Invoice {
                    project: project.into(),
                    ..rec("o1", "10", Paid, false)
                };
                w.invoices.insert(i.into(), rec);
            }
            let open = |i, project| of(ev(i, Confirming, Some("o1"), None), Some(project));
            let silent = |i| of(paid(i, "o1", "10"), None);
            let steps = [
                open("inv_2", "prj_b"),
                silent("inv_2"),
                open("inv_3", "prj_c"),
                silent("inv_3"),
                silent("inv_1"),
            ];
            let mut want = Expected::default();
            want.shipped.insert(key("prj_b", "o1"), "inv_2".into());
            if reverse_check {
                // Paymos' record names inv_1's project
                want.shipped.insert(key(A, "o1"), "inv_1".into());
            } else {
                // 19: known nowhere, on a stack of two projects: it waits for its project
                want.waiting.insert("inv_1".into(), Wait::ProjectUnknown);
            }
            assert_eq!(expected(&w, &steps), want, "reverse check {reverse_check}");
        }
        // One listed project: known nowhere, it is "" (rule 17); every project: it waits for
        // its project (rules 18, 19)
        for projects in [Some(BTreeSet::from([A.to_owned()])), None] {
            let mut w = world(false);
            w.projects = projects;
            let steps = [of(paid("inv_1", "o1", "10"), None)];
            let mut want = Expected::default();
            if w.projects.is_some() {
                want.shipped.insert(key("", "o1"), "inv_1".into());
            } else {
                want.waiting.insert("inv_1".into(), Wait::ProjectUnknown);
            }
            assert_eq!(expected(&w, &steps), want, "projects {:?}", w.projects);
        }
    }

    #[test] // 19
    fn a_payment_naming_no_project_on_several_projects_without_the_check_waits_for_its_project() {
        let mut w = world(false);
        only(&mut w, &[A, "prj_b"]);
        for (i, project) in [
            ("inv_1", "prj_b"),
            ("inv_2", "prj_b"),
            ("inv_3", A),
            ("inv_4", "prj_c"),
            ("inv_5", A),
        ] {
            let rec = Invoice {
                project: project.into(),
                ..rec("o1", "10", Paid, false)
            };
            w.invoices.insert(i.into(), rec);
        }
        for (d, project) in [("pcd_1", "prj_b"), ("pcd_2", "prj_b"), ("pcd_3", A)] {
            let d_ = Deposit {
                project: project.into(),
                ..deposit("42", "5", true)
            };
            w.deposits.insert(d.into(), d_);
        }
        register(&mut w, "o1", p("10", "USD"));
        let silent = |i| of(paid(i, "o1", "10"), None);
        let mut steps = vec![
            silent("inv_1"),
            silent("inv_2"),
            silent("inv_3"),
            silent("inv_4"),
            of(dep("pcd_1", true), None),
            of(dep("pcd_2", true), None),
            of(dep("pcd_3", false), Some(A)),
            of(dep("pcd_3", true), None),
            // a deposit confirmation naming no project waits whatever an advisory named;
            // inv_5's project is known: its silent payment is A's (rule 17)
            of(ev("inv_5", Confirming, Some("o1"), None), Some(A)),
            silent("inv_5"),
        ];
        let unknown = |ids: &[&str]| -> BTreeMap<String, Wait> {
            ids.iter()
                .map(|i| ((*i).to_owned(), Wait::ProjectUnknown))
                .collect()
        };
        let mut want = Expected {
            waiting: unknown(&[
                "inv_1", "inv_2", "inv_3", "inv_4", "pcd_1", "pcd_2", "pcd_3",
            ]),
            ..Expected::default()
        };
        want.shipped.insert(key(A, "o1"), "inv_5".into());
        assert_eq!(expected(&w, &steps), want);
        // Ways out: a person naming the project, a later delivery naming it; another project's
        // name changes nothing, the wait neither (15); a deposit's later delivery naming its
        // project credits it, but its wait ends only by a recheck, which reads Paymos' record.
        steps.extend([
            of(mark("inv_1", "o1"), Some("prj_b")),
            of(paid("inv_2", "o1", "10"), Some("prj_b")),
            of(ev("inv_4", Confirming, Some("o1"), None), Some("prj_c")),
            of(dep("pcd_1", true), Some("prj_b")),
        ]);
        let mut want = Expected {
            waiting: unknown(&["inv_3", "inv_4", "pcd_1", "pcd_2", "pcd_3"]),
            ..want
        };
        want.waiting.insert("inv_2".into(), Wait::Duplicate);
        want.shipped.insert(key("prj_b", "o1"), "inv_1".into());
        want.balances
            .insert(("prj_b".into(), "42".into(), "USDT".into()), "5".into());
        assert_eq!(expected(&w, &steps), want);
        steps.extend([recheck("pcd_1"), recheck("pcd_3"), recheck("inv_3")]);
        let mut want = Expected {
            waiting: unknown(&["inv_4", "pcd_2"]),
            ..want
        };
        want.waiting.insert("inv_2".into(), Wait::Duplicate);
        // inv_3 is A's o1 by Paymos' record: inv_5 shipped it
        want.waiting.insert("inv_3".into(), Wait::Duplicate);
        want.balances
            .insert((A.into(), "42".into(), "USDT".into()), "5".into());
        assert_eq!(expected(&w, &steps), want);
    }

    #[test] // 4, 8, 19
    fn a_persons_word_of_a_payment_waiting_for_its_project_is_dated_by_its_delivery() {
        let mut w = world(false);
        only(&mut w, &[A, "prj_b"]);
        w.invoices
            .insert("inv_2".into(), rec("o0", "10", Paid, false));
        for r in ["wdr_1", "wdr_3"] {
            w.refunds.insert(r.into(), refund("inv_2", Mode::Full));
        }
        let waits = |wait| exp(&[], &[("inv_2", wait)], &[]);
        for named in [None, Some("o0")] {
            // paid at 130, naming no project (19: applied nowhere, it waits for its project)
            let silent = of(at(ev("inv_2", Paid, named, None), 130), None);
            // a person names its project, no order: it is that payment, dated 130
            let word = Arrival::MarkPaid {
                invoice: "inv_2".into(),
                order: None,
                project: Some(A.into()),
                api: false,
            };
            assert_eq!(
                expected(&w, std::slice::from_ref(&silent)),
                waits(Wait::ProjectUnknown)
            );
            // the refund's delivery, before or after the person's word
            for refund_first in [false, true] {
                for (completed, refunded) in [(120, false), (130, true), (140, true)] {
                    let wdr_1 = at(wdr("wdr_1", true), completed);
                    let steps = if refund_first {
                        vec![silent.clone(), wdr_1, word.clone()]
                    } else {
                        vec![silent.clone(), word.clone(), wdr_1]
                    };
                    let case =
                        format!("order {named:?}, refund first {refund_first}, at {completed}");
                    if refunded {
                        // a Full refund completed at or after 130 returns it
                        assert_eq!(expected(&w, &steps), exp(&[], &[], &["inv_2"]), "{case}");
                        continue;
                    }
                    // completed at 120, before it: a new payment, named for a person (4)
                    assert_eq!(expected(&w, &steps), waits(Wait::OrderUnknown), "{case}");
                    // the order, by a person: it ships, once
                    let more = [&steps[..], &[mark("inv_2", "o0"), mark("inv_2", "o0")]].concat();
                    assert_eq!(
                        expected(&w, &more),
                        exp(&[("o0", "inv_2")], &[], &[]),
                        "{case}"
                    );
                    // a later Full refund completed at 130 returns it
                    let more = [&steps[..], &[at(wdr("wdr_3", true), 130)]].concat();
                    assert_eq!(expected(&w, &more), exp(&[], &[], &["inv_2"]), "{case}");
                }
            }
        }
    }

    #[test] // 8, 19
    fn a_full_refund_before_a_payment_waiting_for_its_project_does_not_pay_it_back() {
        let mut w = world(false);
        only(&mut w, &[A, "prj_b"]);
        w.invoices
            .insert("inv_1".into(), rec("o1", "10", Paid, false));
        w.refunds
            .insert("wdr_1".into(), refund("inv_1", Mode::Full));
        // paid at 130, naming no project (19: applied nowhere, it waits for its project)
        let silent = of(at(paid("inv_1", "o1", "10"), 130), None);
        for refund_first in [false, true] {
            for (completed, refunded) in [(120, false), (130, true), (140, true)] {
                let wdr_1 = at(wdr("wdr_1", true), completed);
                let steps = if refund_first {
                    [wdr_1, silent.clone()]
                } else {
                    [silent.clone(), wdr_1]
                };
                let want = if refunded {
                    // completed at or after 130: it returns that payment
                    exp(&[], &[], &["inv_1"])
                } else {
                    // completed at 120: the payment at 130 is new; it still waits
                    exp(&[], &[("inv_1", Wait::ProjectUnknown)], &[])
                };
                let case = format!("refund first {refund_first}, at {completed}");
                assert_eq!(expected(&w, &steps), want, "{case}");
            }
        }
        // no payment known at all: any Full refund pays it back
        let only_refund = [at(wdr("wdr_1", true), 120)];
        assert_eq!(expected(&w, &only_refund), exp(&[], &[], &["inv_1"]));
    }

    #[test]
    fn amounts_are_exact_decimals() {
        assert_eq!(parse_amount("10.5"), parse_amount("10.50"));
        assert_eq!(parse_amount("100"), parse_amount("100.000"));
        assert_ne!(parse_amount("0.1"), parse_amount("0.10000000000000001"));
        for bad in [
            "",
            ".5",
            "5.",
            "1e3",
            "-1",
            "+1",
            "1.5.0",
            " 1",
            "0.0000000000000000001",
        ] {
            assert_eq!(parse_amount(bad), None, "{bad:?}");
        }
        assert_eq!(parse_amount("1.0000000000000000000"), parse_amount("1"));
        assert_eq!(format_amount(parse_amount("0.10").unwrap_or(0)), "0.1");
        assert_eq!(format_amount(parse_amount("1200").unwrap_or(0)), "1200");
    }
}
