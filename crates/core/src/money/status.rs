//! Resource state machines: invoices, withdrawals and deposits. Pure rules, no I/O: the
//! adapters turn them into DynamoDB condition expressions, so the database enforces them.

use std::fmt;

/// A Paymos invoice status: four open ones, five final (absorbing) ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum InvoiceStatus {
    /// Open: waiting for the payer to choose how to pay.
    AwaitingClient,
    /// Open: waiting for a payment (also after a reorg removed counted payments).
    AwaitingPayment,
    /// Open: a payment is confirming on chain.
    Confirming,
    /// Open: part paid, waiting for the rest.
    UnderpaidWaiting,
    /// Final: paid in full. Fulfils the order.
    Paid,
    /// Final: paid more than asked. Fulfils the order.
    PaidOver,
    /// Final: closed part paid.
    Underpaid,
    /// Final: closed unpaid.
    Expired,
    /// Final: cancelled.
    Cancelled,
}

impl InvoiceStatus {
    /// Every status, open ones first in their order.
    pub const ALL: [Self; 9] = [
        Self::AwaitingClient,
        Self::AwaitingPayment,
        Self::Confirming,
        Self::UnderpaidWaiting,
        Self::Paid,
        Self::PaidOver,
        Self::Underpaid,
        Self::Expired,
        Self::Cancelled,
    ];
    /// The open statuses, in their order.
    pub const OPEN: [Self; 4] = [
        Self::AwaitingClient,
        Self::AwaitingPayment,
        Self::Confirming,
        Self::UnderpaidWaiting,
    ];

    /// The stored (and Paymos) name.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AwaitingClient => "awaiting_client",
            Self::AwaitingPayment => "awaiting_payment",
            Self::Confirming => "confirming",
            Self::UnderpaidWaiting => "underpaid_waiting",
            Self::Paid => "paid",
            Self::PaidOver => "paid_over",
            Self::Underpaid => "underpaid",
            Self::Expired => "expired",
            Self::Cancelled => "cancelled",
        }
    }

    /// The status a name stands for.
    #[must_use]
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|x| x.as_str() == s)
    }

    /// Nothing leaves a final status.
    #[must_use]
    pub fn is_final(self) -> bool {
        !Self::OPEN.contains(&self)
    }

    /// `paid` and `paid_over` fulfil the order.
    #[must_use]
    pub fn fulfils(self) -> bool {
        matches!(self, Self::Paid | Self::PaidOver)
    }

    /// The order among open statuses (ties of `occurred_at` are broken by it): the position in
    /// [`Self::OPEN`], stated once; 9 for a final status.
    #[must_use]
    pub fn rank(self) -> u8 {
        Self::OPEN
            .iter()
            .position(|s| *s == self)
            .and_then(|i| u8::try_from(i).ok())
            .unwrap_or(9)
    }
}

impl fmt::Display for InvoiceStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A withdrawal (payout or refund) status; forward only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WithdrawalStatus {
    /// Requested.
    Created,
    /// Being sent.
    Processing,
    /// Final: sent.
    Completed,
    /// Final: failed.
    Failed,
    /// Final: cancelled.
    Cancelled,
}

impl WithdrawalStatus {
    /// Every status.
    pub const ALL: [Self; 5] = [
        Self::Created,
        Self::Processing,
        Self::Completed,
        Self::Failed,
        Self::Cancelled,
    ];

    /// The stored (and Paymos) name.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Created => "created",
            Self::Processing => "processing",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }

    /// The status a name stands for.
    #[must_use]
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|x| x.as_str() == s)
    }

    /// Forward order: created 0, processing 1, final 2.
    #[must_use]
    pub fn rank(self) -> u8 {
        match self {
            Self::Created => 0,
            Self::Processing => 1,
            _ => 2,
        }
    }

    /// `completed`, `failed` and `cancelled`: nothing leaves them.
    #[must_use]
    pub fn is_final(self) -> bool {
        self.rank() == 2
    }

    /// The statuses a record may move from to reach this one.
    #[must_use]
    pub fn allowed_from(self) -> Vec<Self> {
        Self::ALL
            .into_iter()
            .filter(|s| s.rank() < self.rank())
            .collect()
    }
}

/// A deposit's status on a payment channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DepositStatus {
    /// Advisory: seen, confirming.
    Confirming,
    /// Advisory: removed by a chain reorganisation.
    Reorged,
    /// Confirmed (credited when `is_final`).
    Confirmed,
}

impl DepositStatus {
    /// The stored (and Paymos) name.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Confirming => "confirming",
            Self::Reorged => "reorged",
            Self::Confirmed => "confirmed",
        }
    }

    /// The status a name stands for.
    #[must_use]
    pub fn parse(s: &str) -> Option<Self> {
        [Self::Confirming, Self::Reorged, Self::Confirmed]
            .into_iter()
            .find(|x| x.as_str() == s)
    }
}

/// An exact decimal amount as Paymos sends it (`"10.50"`, `"100"`), kept as text and compared
/// and summed by DynamoDB as a Number (exact to 38 digits); never an `f64`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Amount(String);

impl Amount {
    /// Accepts `-?digits[.digits]` with at most 38 digits in all.
    #[must_use]
    pub fn parse(s: &str) -> Option<Self> {
        let digits = s.strip_prefix('-').unwrap_or(s);
        let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
        let ok = !int.is_empty()
            && int.bytes().all(|b| b.is_ascii_digit())
            && frac.bytes().all(|b| b.is_ascii_digit())
            && digits.contains('.') != frac.is_empty()
            && int.len() + frac.len() <= 38;
        ok.then(|| Self(s.to_owned()))
    }

    /// The decimal text.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The exact number (parsing cannot fail: the text was validated).
    fn decimal(&self) -> bigdecimal::BigDecimal {
        self.0.parse().expect("an Amount is a valid decimal")
    }

    /// Whether two amounts are the same number, as DynamoDB compares Numbers (`10.50` is
    /// `10.5`, `-0` is `0`).
    #[must_use]
    pub fn same_value(&self, other: &Self) -> bool {
        self.decimal() == other.decimal()
    }

    /// Whether the amount is more than zero.
    #[must_use]
    pub fn is_positive(&self) -> bool {
        self.decimal().sign() == bigdecimal::num_bigint::Sign::Plus
    }

    /// Whether the amount is less than zero.
    #[must_use]
    pub fn is_negative(&self) -> bool {
        self.decimal().sign() == bigdecimal::num_bigint::Sign::Minus
    }

    /// The exact sum of `amounts`, as decimal text (`None` for none).
    #[must_use]
    pub fn sum<'a>(amounts: impl IntoIterator<Item = &'a Amount>) -> Option<String> {
        let mut iter = amounts.into_iter().peekable();
        iter.peek()?;
        let total: bigdecimal::BigDecimal = iter.map(Self::decimal).sum();
        Some(total.normalized().to_plain_string())
    }
}

impl fmt::Display for Amount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::InvoiceStatus::*;
    use super::*;
    use crate::money::write::{self, Field, Fields, Value};

    // An amount is
    // shown as the text Paymos sent, trailing zeros and all (the console and the command line
    // show it so), never as a float.
    #[test]
    fn an_amount_reads_as_the_text_paymos_sent() {
        for text in ["10.50", "0.000001", "25", "1000000.00"] {
            assert_eq!(Amount::parse(text).unwrap().to_string(), text);
        }
    }

    /// The transition rules as the stores evaluate them: the domain's guards
    /// ([`write::transition`], [`write::withdrawal_transition`], [`write::deposit_transition`])
    /// on a record at `current`.
    pub(super) fn invoice_accepts(
        current: Option<(InvoiceStatus, u64)>,
        incoming: InvoiceStatus,
        at: u64,
    ) -> bool {
        let item = current.map(|(s, at)| {
            Fields::from([
                (Field::Status, Value::text(s.as_str())),
                (Field::StatusAt, Value::Int(at)),
                (Field::StatusRank, Value::Int(u64::from(s.rank()))),
            ])
        });
        write::transition(incoming, at).holds(item.as_ref())
    }

    fn withdrawal_accepts(current: Option<WithdrawalStatus>, incoming: WithdrawalStatus) -> bool {
        let item = current.map(|s| Fields::from([(Field::Status, Value::text(s.as_str()))]));
        write::withdrawal_transition(incoming).holds(item.as_ref())
    }

    struct DepositSeen {
        credited: bool,
        status_at: u64,
    }

    fn deposit_accepts(current: Option<DepositSeen>, credits: bool, at: u64) -> bool {
        let item = current.map(|d| {
            let mut f = Fields::from([(Field::StatusAt, Value::Int(d.status_at))]);
            if d.credited {
                f.insert(Field::Credited, Value::Bool(true));
            }
            f
        });
        write::deposit_transition(credits, at).holds(item.as_ref())
    }

    #[test]
    fn final_statuses_absorb() {
        for s in InvoiceStatus::ALL.into_iter().filter(|s| s.is_final()) {
            for incoming in InvoiceStatus::ALL {
                assert!(
                    !invoice_accepts(Some((s, 0)), incoming, u64::MAX),
                    "{s} -> {incoming}"
                );
            }
        }
    }

    #[test]
    fn open_statuses_move_forward_only() {
        assert!(invoice_accepts(Some((AwaitingPayment, 10)), Confirming, 10));
        assert!(
            !invoice_accepts(Some((Confirming, 10)), AwaitingPayment, 10),
            "late event, same second"
        );
        assert!(
            !invoice_accepts(Some((Confirming, 10)), AwaitingPayment, 9),
            "late event"
        );
        assert!(
            invoice_accepts(Some((Confirming, 10)), AwaitingPayment, 11),
            "a reorg, later"
        );
        assert!(
            invoice_accepts(Some((UnderpaidWaiting, 99)), Paid, 1),
            "final wins over open"
        );
        assert!(invoice_accepts(None, Confirming, 0));
    }

    #[test]
    fn amounts_are_exact_decimal_text() {
        for ok in ["0", "10.50", "100", "-1.5", "0.000000000000000001"] {
            assert!(Amount::parse(ok).is_some(), "{ok}");
        }
        for bad in [
            "",
            "1.",
            ".5",
            "1e3",
            "NaN",
            "1,5",
            "١",
            "--1",
            &"9".repeat(39),
        ] {
            assert!(Amount::parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn amounts_compare_as_numbers() {
        let a = |s: &str| Amount::parse(s).unwrap();
        assert!(a("10.50").same_value(&a("10.5")));
        assert!(a("007").same_value(&a("7.000")));
        assert!(a("-0").same_value(&a("0.0")));
        assert!(!a("10.5").same_value(&a("10.05")));
        assert!(!a("-1").same_value(&a("1")));
        assert!(!a("100").same_value(&a("10")));
        assert!(
            a(&format!("1{}", "0".repeat(36))).same_value(&a(&format!("1{}.0", "0".repeat(36))))
        );
    }

    #[test]
    fn amounts_add_up_exactly() {
        let a = |s: &str| Amount::parse(s).unwrap();
        let refunds = [a("0.1"), a("0.2")];
        assert_eq!(Amount::sum(&refunds).as_deref(), Some("0.3"));
        assert_eq!(
            Amount::sum(&[a("10.50"), a("-0.50")]).as_deref(),
            Some("10")
        );
        assert_eq!(Amount::sum(&[]), None);
        assert!(a("0.001").is_positive());
        assert!(!a("0").is_positive() && !a("-0").is_positive() && !a("-1").is_positive());
    }

    #[test]
    fn deposits_credit_once_and_advisories_never_undo_a_credit() {
        let seen = |credited, status_at| {
            Some(DepositSeen {
                credited,
                status_at,
            })
        };
        assert!(deposit_accepts(None, true, 0));
        assert!(
            deposit_accepts(seen(false, 50), true, 10),
            "a credit after a later advisory"
        );
        assert!(
            !deposit_accepts(seen(true, 10), true, 99),
            "a second credit"
        );
        assert!(
            !deposit_accepts(seen(true, 10), false, 99),
            "a reorg after the credit"
        );
        assert!(deposit_accepts(seen(false, 10), false, 10));
        assert!(
            !deposit_accepts(seen(false, 10), false, 9),
            "an older advisory"
        );
    }

    #[test]
    fn withdrawals_move_forward() {
        use WithdrawalStatus as W;
        for current in W::ALL {
            for incoming in W::ALL {
                assert_eq!(
                    withdrawal_accepts(Some(current), incoming),
                    incoming.allowed_from().contains(&current),
                    "{current:?} -> {incoming:?}"
                );
            }
            assert!(
                !withdrawal_accepts(Some(current), current),
                "a repeat is refused"
            );
        }
        assert!(W::ALL.iter().filter(|s| s.is_final()).count() == 3);
        assert_eq!(
            WithdrawalStatus::Processing.allowed_from(),
            [WithdrawalStatus::Created]
        );
        assert_eq!(WithdrawalStatus::Created.allowed_from(), []);
        assert_eq!(WithdrawalStatus::Completed.allowed_from().len(), 2);
    }

    mod properties {
        use proptest::prelude::*;

        use super::super::*;
        use super::invoice_accepts;

        /// Applies events with the rule, as the store does, and returns the final status.
        fn run(events: &[(InvoiceStatus, u64)]) -> Option<InvoiceStatus> {
            let mut current: Option<(InvoiceStatus, u64)> = None;
            for &(status, at) in events {
                if invoice_accepts(current, status, at) {
                    current = Some((status, at));
                }
            }
            current.map(|(s, _)| s)
        }

        proptest! {
            #[test]
            fn a_consistent_history_ends_the_same_in_any_order_and_multiplicity(
                opens in proptest::collection::vec(0usize..4, 0..5),
                final_status in proptest::option::of(4usize..9),
                copies in proptest::collection::vec(any::<prop::sample::Index>(), 0..10),
                seed in proptest::collection::vec(any::<prop::sample::Index>(), 1..20),
            ) {
                let mut history: Vec<(InvoiceStatus, u64)> = opens
                    .iter()
                    .enumerate()
                    .map(|(i, o)| (InvoiceStatus::ALL[*o], 10 + i as u64))
                    .collect();
                if let Some(f) = final_status {
                    history.push((InvoiceStatus::ALL[f], 100));
                }
                prop_assume!(!history.is_empty());
                let mut deliveries = history.clone();
                deliveries.extend(copies.iter().map(|c| history[c.index(history.len())]));
                let len = deliveries.len();
                for (i, s) in seed.iter().enumerate() {
                    deliveries.swap(i % len, s.index(len));
                }
                let expected = match final_status {
                    Some(f) => InvoiceStatus::ALL[f],
                    None => history.iter().max_by_key(|(s, at)| (*at, s.rank())).unwrap().0,
                };
                prop_assert_eq!(run(&deliveries), Some(expected));
            }
        }
    }
}
