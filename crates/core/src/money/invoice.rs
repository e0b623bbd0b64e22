//! The invoice's own record: the one truth every road to a fulfilment reads. It keeps the order
//! the invoice pays for (from the first event, command or answer that named it), the price as
//! one pair, the marks that make a payment wait for a person, and the refunds paid back. The
//! rules here say what that record means; the stores only read and write it.

use crate::money::change::OrderRef;
use crate::money::status::{Amount, InvoiceStatus};

/// What a refund pays back, by Paymos' definition (`RefundMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefundMode {
    /// The entire remaining payment: the price goes back with it.
    Full,
    /// The entire remaining overpayment (what was paid above the price): none of the price.
    Overpayment,
}

impl RefundMode {
    /// `full` or `overpayment`; any other text is no known mode.
    #[must_use]
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "full" => Some(Self::Full),
            "overpayment" => Some(Self::Overpayment),
            _ => None,
        }
    }

    /// The stored name.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Full => "full",
            Self::Overpayment => "overpayment",
        }
    }
}

/// A completed refund of an invoice, as its `withdrawal.completed` announced it. A fact of its
/// own: it never gives the invoice a status. A `full` one settles the payment, and one recorded
/// before the payment keeps it from shipping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refund {
    /// `wdr_…`.
    pub withdrawal_id: String,
    /// What was paid back, when the event said.
    pub amount: Option<Amount>,
    /// In which currency, upper case.
    pub currency: Option<String>,
    /// Its mode, when known (a record written before modes were kept knows only `full`).
    pub mode: Option<RefundMode>,
    /// When it completed, by Paymos' clock (Unix seconds; unknown on records written before
    /// refunds kept their time).
    pub completed_at: Option<u64>,
}

impl Refund {
    /// Whether this refund returns a payment made at `paid_at` (Paymos' clock): a `full` one
    /// returns what was paid until it completed, and a payment made after it is a new payment.
    /// Where either time is unknown (a person's road names no payment time; a refund recorded
    /// before times were kept), a `full` refund settles the payment: nothing ships on a guess.
    #[must_use]
    pub fn returns_payment_at(&self, paid_at: Option<u64>) -> bool {
        self.mode == Some(RefundMode::Full)
            && match (self.completed_at, paid_at) {
                (Some(completed), Some(paid)) => completed >= paid,
                _ => true,
            }
    }

    /// Whether this refund may have returned a payment made at `paid_at`: its mode is unknown
    /// (a delivery that did not say it, as the official refund vectors do not), so it may have
    /// been `full`, and it completed when or after the payment was made (or either time is
    /// unknown). Such a payment never ships in silence: it waits for a person. A payment made
    /// after it is not affected.
    #[must_use]
    pub fn may_return_payment_at(&self, paid_at: Option<u64>) -> bool {
        self.mode.is_none()
            && match (self.completed_at, paid_at) {
                (Some(completed), Some(paid)) => completed >= paid,
                _ => true,
            }
    }
}

/// An invoice as the resource table holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvoiceSeen {
    /// Its status, if it has one (a refund may have been recorded before any status).
    pub status: Option<InvoiceStatus>,
    /// Paid, but not as the registered order says.
    pub held: bool,
    /// Why it is held, where the rule that held it said (another order or project than its
    /// record); none for a price the registered order does not match.
    pub held_why: Option<String>,
    /// Held because its payment named another project than its record: never released on the
    /// record's word.
    pub projects_disagree: bool,
    /// Held because its payment named another order than its record (the order it named): an
    /// invoice pays one order, and nothing says which word is right, so a release ships
    /// neither until a person names one.
    pub order_disputed: Option<String>,
    /// Shipped here under another order (or project) than Paymos' invoice names, as a road
    /// that asked Paymos found: Paymos' order, in words, until a person settles it (ships the
    /// paid order by hand, recovers the other).
    pub shipped_otherwise: Option<String>,
    /// A person settled what [`Self::shipped_otherwise`] says (`exceptions --resolve`).
    pub otherwise_settled: bool,
    /// The invoice that shipped Paymos' order of [`Self::shipped_otherwise`] before the road
    /// found it: nothing is to ship by hand, and this payment is a second payment of it.
    pub paymos_order_shipped_with: Option<String>,
    /// Paymos has the invoice of [`Self::shipped_otherwise`] in a project this stack does not
    /// apply: that project's own stack ships its order, so nothing ships by hand here.
    pub paymos_project_elsewhere: bool,
    /// Paymos has the invoice of [`Self::shipped_otherwise`] in another project of this stack
    /// and names no order of it yet: nothing is Paymos' order to ship by hand or to take.
    pub paymos_order_unnamed: bool,
    /// Paid after it closed.
    pub paid_late: bool,
    /// A second payment for an order another invoice fulfilled.
    pub duplicate_of: Option<String>,
    /// Released by a person.
    pub released: bool,
    /// Completed refunds, in the order they were recorded.
    pub refunds: Vec<Refund>,
    /// When its payment (a paid status, or a payment after it closed) was made, by Paymos'
    /// clock, where a delivery said so.
    pub payment_at: Option<u64>,
    /// A person's road (`recheck`, `reconcile --apply`, `mark-paid`) found it paid but its order
    /// known nowhere: nothing shipped, it waits for its order.
    pub awaits_order: bool,
    /// Paid at a time no road knew while a full refund was on record ([`Standing::AfterRefund`]).
    pub after_refund: bool,
    /// The order as recorded on the invoice (fields may be missing).
    pub order: OrderRef,
}

/// Where a paid invoice stands with the people who run the shop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Standing {
    /// Nothing waits: fulfilled, open, or closed unpaid.
    Clear,
    /// Paid, but not as the registered order says: waits for a release or a refund.
    Held,
    /// A second payment for an order that invoice fulfilled: waits for a refund.
    DuplicateOf(String),
    /// Paid after it closed: waits for a release or a refund.
    PaidLate,
    /// A person released it: fulfilled on their word.
    Released,
    /// Paid back in full: nothing waits.
    Refunded,
    /// Paid, by a person's road, with its order known nowhere: waits for its order
    /// (`mark-paid --order-id`).
    OrderUnknown,
    /// Paid at a time no road knew (a person's word) while a full refund is on record: was it
    /// paid again after the refund? A person decides: a release ships it, a refund of it
    /// settles it.
    AfterRefund,
    /// Shipped under another order (or project) than Paymos' invoice names (Paymos' order, in
    /// words): a person ships the paid order by hand, recovers the other, and resolves it.
    ShippedOtherwise(String),
}

impl Standing {
    /// Whether a person must act (what `exceptions` lists).
    #[must_use]
    pub fn waits_for_person(&self) -> bool {
        matches!(
            self,
            Self::Held
                | Self::DuplicateOf(_)
                | Self::PaidLate
                | Self::OrderUnknown
                | Self::AfterRefund
                | Self::ShippedOtherwise(_)
        )
    }
}

impl InvoiceSeen {
    /// An invoice with nothing recorded but `status`.
    #[must_use]
    pub fn with_status(status: Option<InvoiceStatus>) -> Self {
        Self {
            status,
            held: false,
            held_why: None,
            projects_disagree: false,
            order_disputed: None,
            shipped_otherwise: None,
            otherwise_settled: false,
            paymos_order_shipped_with: None,
            paymos_project_elsewhere: false,
            paymos_order_unnamed: false,
            paid_late: false,
            duplicate_of: None,
            released: false,
            refunds: Vec::new(),
            payment_at: None,
            awaits_order: false,
            after_refund: false,
            order: OrderRef::none(),
        }
    }

    /// Whether the payment was paid back in full: a refund of mode `full` that completed when
    /// or after it was paid ([`Refund::returns_payment_at`]). Only that mode returns the price:
    /// an `overpayment` refund returns what was paid above it, whatever its amount, so amounts
    /// are never added up against the price (a price and a payment are in different currencies
    /// anyway).
    #[must_use]
    pub fn refunded_in_full(&self) -> bool {
        self.refunded_in_full_at(self.payment_at)
    }

    /// Whether a full refund returns a payment made at `paid_at` (a delivery's own time, where
    /// the record holds none).
    #[must_use]
    pub fn refunded_in_full_at(&self, paid_at: Option<u64>) -> bool {
        self.refunds.iter().any(|r| r.returns_payment_at(paid_at))
    }

    /// A refund of unknown mode that may have returned the payment
    /// ([`Refund::may_return_payment_at`]), the first recorded.
    #[must_use]
    pub fn refund_of_unknown_mode(&self) -> Option<&Refund> {
        self.refunds
            .iter()
            .find(|r| r.may_return_payment_at(self.payment_at))
    }

    /// A payment no road dated (a person's word, marked `after_refund`) while a full refund is
    /// on record: nothing says whether the refund returned it.
    fn undated_after_refund(&self) -> bool {
        self.after_refund && self.refunded_in_full_at(None)
    }

    /// What was refunded, per currency, for an operator (`5 USDT`, `0.1 USDT + 2 TON`).
    #[must_use]
    pub fn refunded_text(&self) -> Option<String> {
        let mut currencies: Vec<&str> = self
            .refunds
            .iter()
            .map(|r| r.currency.as_deref().unwrap_or("?"))
            .collect();
        currencies.sort_unstable();
        currencies.dedup();
        let parts: Vec<String> = currencies
            .into_iter()
            .filter_map(|c| {
                let amounts = self
                    .refunds
                    .iter()
                    .filter(|r| r.currency.as_deref().unwrap_or("?") == c)
                    .filter_map(|r| r.amount.as_ref());
                Amount::sum(amounts).map(|total| format!("{total} {c}"))
            })
            .collect();
        (!parts.is_empty()).then(|| parts.join(" + "))
    }

    /// Where the payment stands. A release or a full refund settles it; otherwise a duplicate
    /// payment, a hold or a late payment waits for a person.
    #[must_use]
    pub fn standing(&self) -> Standing {
        if let (Some(paymos), false) = (&self.shipped_otherwise, self.otherwise_settled) {
            Standing::ShippedOtherwise(paymos.clone())
        } else if self.released {
            Standing::Released
        } else if self.undated_after_refund() {
            Standing::AfterRefund
        } else if self.refunded_in_full() {
            Standing::Refunded
        } else if let Some(first) = &self.duplicate_of {
            Standing::DuplicateOf(first.clone())
        } else if self.held {
            Standing::Held
        } else if self.paid_late {
            Standing::PaidLate
        } else if self.awaits_order && !self.status.is_some_and(InvoiceStatus::fulfils) {
            Standing::OrderUnknown
        } else {
            Standing::Clear
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refund(amount: &str, currency: &str, full: bool) -> Refund {
        Refund {
            withdrawal_id: "wdr_1".into(),
            amount: Amount::parse(amount),
            currency: Some(currency.into()),
            mode: Some(if full {
                RefundMode::Full
            } else {
                RefundMode::Overpayment
            }),
            completed_at: None,
        }
    }

    fn held(amount: &str, currency: &str, refunds: Vec<Refund>) -> InvoiceSeen {
        InvoiceSeen {
            held: true,
            refunds,
            order: OrderRef {
                external_id: Some("o-1".into()),
                amount: Amount::parse(amount),
                currency: Some(currency.into()),
                project: None,
                home: false,
                unlisted: false,
            },
            ..InvoiceSeen::with_status(Some(InvoiceStatus::Paid))
        }
    }

    #[test]
    fn only_a_full_refund_settles_a_payment() {
        let cases = [
            ("no refund", held("90", "USDT", vec![]), Standing::Held),
            (
                "an overpayment refund of 5",
                held("90", "USDT", vec![refund("5", "USDT", false)]),
                Standing::Held,
            ),
            (
                "0.10 of a 90 payment",
                held("90", "USDT", vec![refund("0.10", "USDT", false)]),
                Standing::Held,
            ),
            (
                // 20 USDT paid for a 10 USDT order: its overpayment refund returns none of it.
                "an overpayment refund as large as the price",
                held("10", "USDT", vec![refund("10", "USDT", false)]),
                Standing::Held,
            ),
            (
                "two overpayment refunds adding up to the price",
                held(
                    "90",
                    "USDT",
                    vec![refund("45", "USDT", false), refund("45.00", "USDT", false)],
                ),
                Standing::Held,
            ),
            (
                "a refund of no known mode (written before modes were kept)",
                held(
                    "90",
                    "USDT",
                    vec![Refund {
                        mode: None,
                        ..refund("90", "USDT", false)
                    }],
                ),
                Standing::Held,
            ),
            (
                "the amount in another currency",
                held("90", "USD", vec![refund("90", "USDT", false)]),
                Standing::Held,
            ),
            (
                "mode full",
                held("90", "USD", vec![refund("1", "USDT", true)]),
                Standing::Refunded,
            ),
        ];
        for (name, invoice, standing) in cases {
            assert_eq!(invoice.standing(), standing, "{name}");
        }
    }

    #[test]
    fn a_full_refund_returns_only_what_was_paid_until_it_completed() {
        let at = |completed: Option<u64>, full: bool| Refund {
            completed_at: completed,
            ..refund("4", "USDT", full)
        };
        let paid_at = |payment_at: Option<u64>, refunds: Vec<Refund>| InvoiceSeen {
            payment_at,
            ..held("10", "USD", refunds)
        };
        let cases = [
            (
                "refunded before the payment",
                paid_at(Some(30), vec![at(Some(20), true)]),
                Standing::Held,
            ),
            (
                "refunded when it was paid",
                paid_at(Some(30), vec![at(Some(30), true)]),
                Standing::Refunded,
            ),
            (
                "refunded after the payment",
                paid_at(Some(30), vec![at(Some(31), true)]),
                Standing::Refunded,
            ),
            (
                "one refund before and one after",
                paid_at(Some(30), vec![at(Some(20), true), at(Some(40), true)]),
                Standing::Refunded,
            ),
            (
                "an overpayment refund after",
                paid_at(Some(30), vec![at(Some(40), false)]),
                Standing::Held,
            ),
            (
                "no payment time (a person's road)",
                paid_at(None, vec![at(Some(20), true)]),
                Standing::Refunded,
            ),
            (
                "no refund time (an old record)",
                paid_at(Some(30), vec![at(None, true)]),
                Standing::Refunded,
            ),
        ];
        for (name, invoice, standing) in cases {
            assert_eq!(invoice.standing(), standing, "{name}");
        }
    }

    #[test]
    fn a_refund_mode_reads_back_what_it_stores() {
        for mode in [RefundMode::Full, RefundMode::Overpayment] {
            assert_eq!(RefundMode::parse(mode.as_str()), Some(mode));
        }
        assert_eq!(RefundMode::Full.as_str(), "full");
        assert_eq!(RefundMode::Overpayment.as_str(), "overpayment");
        assert_eq!(RefundMode::parse("partial"), None);
    }

    #[test]
    fn a_release_settles_and_each_mark_waits() {
        let base = InvoiceSeen::with_status(Some(InvoiceStatus::Paid));
        assert_eq!(base.standing(), Standing::Clear);
        let late = InvoiceSeen {
            paid_late: true,
            ..InvoiceSeen::with_status(Some(InvoiceStatus::Expired))
        };
        assert_eq!(late.standing(), Standing::PaidLate);
        let released = InvoiceSeen {
            released: true,
            ..late.clone()
        };
        assert_eq!(released.standing(), Standing::Released);
        let duplicate = InvoiceSeen {
            duplicate_of: Some("inv_0".into()),
            held: true,
            ..base
        };
        assert_eq!(duplicate.standing(), Standing::DuplicateOf("inv_0".into()));
        assert!(late.standing().waits_for_person());
        assert!(duplicate.standing().waits_for_person());
        assert!(!released.standing().waits_for_person());
        assert!(!Standing::Refunded.waits_for_person());
    }

    #[test]
    fn refunds_are_summed_per_currency_for_the_operator() {
        let invoice = held(
            "90",
            "USDT",
            vec![
                refund("0.10", "USDT", false),
                refund("2", "TON", false),
                refund("0.2", "USDT", false),
            ],
        );
        assert_eq!(invoice.refunded_text().as_deref(), Some("2 TON + 0.3 USDT"));
        assert_eq!(held("1", "USD", vec![]).refunded_text(), None);
    }

    // A refund of unknown mode may have returned a payment made when or before it completed
    // (or either time unknown); never one made after it; a refund whose mode is known never
    // "may" (a full one returns, an overpayment does not).
    #[test]
    fn only_a_refund_of_unknown_mode_completed_at_or_after_the_payment_may_have_returned_it() {
        let of = |mode, completed_at| Refund {
            mode,
            completed_at,
            ..refund("1", "USDT", true)
        };
        let cases = [
            (None, Some(20), Some(10), true),
            (None, Some(20), Some(20), true),
            (None, Some(20), Some(21), false),
            (None, None, Some(21), true),
            (None, Some(20), None, true),
            (Some(RefundMode::Full), Some(20), Some(10), false),
            (Some(RefundMode::Overpayment), Some(20), Some(10), false),
        ];
        for (mode, completed, paid, may) in cases {
            let r = of(mode, completed);
            assert_eq!(r.may_return_payment_at(paid), may, "{r:?} {paid:?}");
            let seen = InvoiceSeen {
                payment_at: paid,
                ..held("1", "USDT", vec![refund("1", "USDT", false), r.clone()])
            };
            assert_eq!(
                seen.refund_of_unknown_mode(),
                may.then_some(&r),
                "{r:?} {paid:?}"
            );
        }
    }
}
