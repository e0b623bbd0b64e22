//! The reverse check: before a webhook fulfils an order, re-read the invoice at Paymos, as the
//! official plugins do. A valid signature proves the sender held the secret, not that the
//! payer paid. Once the API says paid, its data is the truth; the event's claim is compared with
//! it like with like (order amount and currency with the order's, token amount and currency
//! with the payment's), as exact decimals.

use std::future::Future;

use super::envelope::EventData;
use super::ingest::PortError;
use super::status::Amount;

/// How many receives of a message a "not paid yet" answer is retried for (the queue's
/// visibility timeout apart: with 180 s, about six minutes) before the delivery is recorded
/// `unconfirmed`. Below the queue's `maxReceiveCount` (5), so a slow API never sends the
/// message to the DLQ by itself.
pub const NOT_YET_RECEIVES: u32 = 3;

/// An invoice as Paymos' API has it now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfirmedInvoice {
    /// Its status at Paymos.
    pub status: String,
    /// `order.amount`: what the order is priced at (exact decimal).
    pub order_amount: Option<Amount>,
    /// `order.currency`, upper case (the pricing currency, e.g. USD).
    pub order_currency: Option<String>,
    /// `payment.expected`: the token amount the payer was asked for.
    pub token_amount: Option<Amount>,
    /// `payment.currency`, upper case (the token, e.g. USDT).
    pub token_currency: Option<String>,
}

/// What the API answered about an invoice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AtSource {
    /// The invoice exists.
    Found(ConfirmedInvoice),
    /// 404: unknown to Paymos with this key (forged, or another environment's invoice).
    NotFound,
}

/// Re-reads an invoice at the source. Implementations bound the call in time (one retry at
/// most, a hard deadline well inside the function's timeout) so one slow answer cannot sink
/// the messages it shares a batch with.
pub trait PaymentConfirmation: Send + Sync {
    /// The invoice as Paymos has it now.
    ///
    /// # Errors
    /// [`PortError`] when the API could not answer in time (the message is retried).
    fn invoice(&self, invoice_id: &str)
    -> impl Future<Output = Result<AtSource, PortError>> + Send;
}

/// No reverse check (the default).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoConfirmation;

impl PaymentConfirmation for NoConfirmation {
    async fn invoice(&self, _: &str) -> Result<AtSource, PortError> {
        Err(PortError::new("reverse check", "not configured"))
    }
}

/// What a paid event claims, in the two currencies an invoice has.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PaidClaim {
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
            order_amount: order_amount.and_then(Amount::parse),
            order_currency,
            token_amount: data.payment_expected.as_deref().and_then(Amount::parse),
            token_currency: upper(&data.payment_currency),
        }
    }
}

/// The reverse check's verdict on one paid event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Paymos confirms it: fulfil.
    Confirmed,
    /// Not paid at Paymos (yet): check again on a later receive.
    NotYet,
    /// Refused for good: recorded `unconfirmed` with the reason.
    Unconfirmed(String),
}

/// Decides from the API's answer, the event's claim and how many times the message has been
/// received.
#[must_use]
pub fn verdict(at_source: &AtSource, claim: &PaidClaim, receives: u32) -> Verdict {
    let invoice = match at_source {
        AtSource::NotFound => {
            return Verdict::Unconfirmed(
                "Paymos does not know this invoice (404): forged, or another environment's".into(),
            );
        }
        AtSource::Found(invoice) => invoice,
    };
    if !matches!(invoice.status.as_str(), "paid" | "paid_over") {
        return if receives < NOT_YET_RECEIVES {
            Verdict::NotYet
        } else {
            Verdict::Unconfirmed(format!(
                "still {} at Paymos after {receives} checks",
                invoice.status
            ))
        };
    }
    let amounts_differ = |a: &Option<Amount>, b: &Option<Amount>| match (a, b) {
        (Some(a), Some(b)) => !same_decimal(a.as_str(), b.as_str()),
        _ => false,
    };
    let currencies_differ = |a: &Option<String>, b: &Option<String>| match (a, b) {
        (Some(a), Some(b)) => !a.eq_ignore_ascii_case(b),
        _ => false,
    };
    if amounts_differ(&claim.order_amount, &invoice.order_amount) {
        return Verdict::Unconfirmed("the order amount differs from Paymos' invoice".into());
    }
    if currencies_differ(&claim.order_currency, &invoice.order_currency) {
        return Verdict::Unconfirmed("the order currency differs from Paymos' invoice".into());
    }
    if amounts_differ(&claim.token_amount, &invoice.token_amount) {
        return Verdict::Unconfirmed("the token amount differs from Paymos' payment".into());
    }
    if currencies_differ(&claim.token_currency, &invoice.token_currency) {
        return Verdict::Unconfirmed("the token differs from Paymos' payment".into());
    }
    Verdict::Confirmed
}

/// `"10.5" == "10.50"`: compares decimal text exactly, without floats.
#[must_use]
pub fn same_decimal(a: &str, b: &str) -> bool {
    fn norm(s: &str) -> (bool, String, String) {
        let (neg, s) = s.strip_prefix('-').map_or((false, s), |r| (true, r));
        let (int, frac) = s.split_once('.').unwrap_or((s, ""));
        let int = int.trim_start_matches('0').to_owned();
        let frac = frac.trim_end_matches('0').to_owned();
        let zero = int.is_empty() && frac.is_empty();
        (neg && !zero, int, frac)
    }
    norm(a) == norm(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(status: &str) -> AtSource {
        AtSource::Found(ConfirmedInvoice {
            status: status.into(),
            order_amount: Amount::parse("10"),
            order_currency: Some("USD".into()),
            token_amount: Amount::parse("10.50"),
            token_currency: Some("USDT".into()),
        })
    }

    fn claim(order: Option<(&str, &str)>, token: Option<(&str, &str)>) -> PaidClaim {
        PaidClaim {
            order_amount: order.and_then(|o| Amount::parse(o.0)),
            order_currency: order.map(|o| o.1.to_owned()),
            token_amount: token.and_then(|t| Amount::parse(t.0)),
            token_currency: token.map(|t| t.1.to_owned()),
        }
    }

    #[test]
    fn like_is_compared_with_like() {
        // A USD-priced invoice paid in USDT, as the official v1/v2 vectors send it (no order).
        assert_eq!(
            verdict(&at("paid"), &claim(None, Some(("10.5", "usdt"))), 1),
            Verdict::Confirmed
        );
        assert_eq!(
            verdict(
                &at("paid"),
                &claim(Some(("10.00", "USD")), Some(("10.50", "USDT"))),
                1
            ),
            Verdict::Confirmed
        );
        assert!(matches!(
            verdict(&at("paid"), &claim(None, Some(("1.05", "USDT"))), 1),
            Verdict::Unconfirmed(r) if r.contains("token amount")
        ));
        assert!(matches!(
            verdict(&at("paid_over"), &claim(Some(("10", "EUR")), None), 1),
            Verdict::Unconfirmed(r) if r.contains("order currency")
        ));
    }

    #[test]
    fn not_paid_yet_is_retried_a_bounded_number_of_times_and_404_is_final() {
        let c = claim(None, None);
        assert_eq!(verdict(&at("confirming"), &c, 1), Verdict::NotYet);
        assert_eq!(
            verdict(&at("confirming"), &c, NOT_YET_RECEIVES - 1),
            Verdict::NotYet
        );
        assert!(matches!(
            verdict(&at("confirming"), &c, NOT_YET_RECEIVES),
            Verdict::Unconfirmed(_)
        ));
        assert!(
            matches!(verdict(&AtSource::NotFound, &c, 1), Verdict::Unconfirmed(r) if r.contains("404"))
        );
    }

    #[test]
    fn decimals_compare_exactly() {
        assert!(same_decimal("10.5", "10.50"));
        assert!(same_decimal("010.500", "10.5"));
        assert!(same_decimal("0", "-0.00"));
        assert!(!same_decimal("10.5", "10.05"));
        assert!(!same_decimal("10.500000000000000001", "10.5"));
    }
}
