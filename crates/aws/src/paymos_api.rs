//! The reverse check against Paymos' API through the official `paymos` crate: invoices,
//! refunds, withdrawals and deposits read back, each bounded by a deadline.

use std::future::Future;
use std::time::Duration;

use paymos_inbox_core::money::invoice::{Refund, RefundMode};
use paymos_inbox_core::money::status::Amount;
use paymos_inbox_core::port::{PortError, PortErrorKind};
use paymos_inbox_core::roads::confirm::{
    AtSource, ConfirmedDeposit, ConfirmedInvoice, ConfirmedWithdrawal, PaymentConfirmation,
};
use paymos_inbox_core::roads::reconcile::PaymosLedger;
use paymos_inbox_core::wire::signature::Environment;

/// The default hard deadline of one reverse check: well inside the 30 s fulfil timeout, so ten
/// slow checks of one batch still finish (they run concurrently) and the batch's other messages
/// are applied.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(5);

/// The deadline of one read on a road no batch waits on (a person's command, the
/// reconciliation): the client's two retries of 10 s each, and their backoff.
pub const PATIENT_DEADLINE: Duration = Duration::from_secs(30);

/// A [`PaymentConfirmation`] on Paymos' API, each read bounded by a deadline.
#[derive(Clone)]
pub struct PaymosApi {
    client: paymos::PaymosClient,
    deadline: Duration,
}

/// The API's answer: found, 404, or an error of its kind (a refused key is misconfigured).
fn answer<T, U>(
    operation: &'static str,
    result: Result<T, paymos::Error>,
    map: impl FnOnce(T) -> U,
) -> Result<AtSource<U>, PortError> {
    match result {
        Ok(found) => Ok(AtSource::Found(map(found))),
        Err(paymos::Error::Api(e)) if e.status == 404 => Ok(AtSource::NotFound),
        Err(e) => Err(api_error(operation, e)),
    }
}

/// A Paymos API failure as a [`PortError`]: 401/403 is the stack's key, never the payment (a
/// refused credential); 429 asks us to slow down; a client we could not configure or a request
/// we could not build is ours to fix; an answer that does not decode is unreadable (Paymos
/// answered: no connection failed); the rest (transport, 5xx) is the service's. The crate's
/// error stays as the source.
#[must_use]
pub fn api_error(operation: &'static str, e: paymos::Error) -> PortError {
    let error = match &e {
        paymos::Error::Api(a) if crate::aws::is_credential_status(a.status) => {
            PortError::refused_credential(
                operation,
                format!(
                    "{e}: the API key or secret in PAYMOS_API_SECRETS_ID is wrong, revoked, or of another project"
                ),
            )
        }
        paymos::Error::Api(a) if a.status == 429 => {
            PortError::of_kind(operation, PortErrorKind::Throttled, &e)
        }
        paymos::Error::Configuration(_)
        | paymos::Error::InvalidArgument(_)
        | paymos::Error::Serialization(_) => {
            PortError::of_kind(operation, PortErrorKind::Misconfigured, &e)
        }
        paymos::Error::InvalidResponse(_) => {
            PortError::of_kind(operation, PortErrorKind::Unreadable, &e)
        }
        _ => PortError::of_kind(operation, PortErrorKind::Unavailable, &e),
    };
    error.with_source(e)
}

/// An answer about `resource` that does not decode, naming it (the crate's error names the
/// field); any other failure as it is.
fn naming(resource: &str, e: paymos::Error) -> paymos::Error {
    match e {
        paymos::Error::InvalidResponse(source) => paymos::Error::InvalidResponse(
            serde::de::Error::custom(format!("{resource}: {source}")),
        ),
        e => e,
    }
}

fn upper(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_ascii_uppercase())
}

impl PaymosApi {
    /// Wraps a configured client (configure it with a short timeout and at most one retry).
    #[must_use]
    pub fn new(client: paymos::PaymosClient) -> Self {
        Self {
            client,
            deadline: DEFAULT_DEADLINE,
        }
    }

    /// [`PaymosApi::new`] with [`PATIENT_DEADLINE`]: for a road no batch waits on.
    #[must_use]
    pub fn patient(client: paymos::PaymosClient) -> Self {
        Self::new(client).with_deadline(PATIENT_DEADLINE)
    }

    /// With another deadline per check (a timed-out check is retried on a later receive).
    #[must_use]
    pub fn with_deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    async fn bounded<T>(
        &self,
        operation: &'static str,
        call: impl Future<Output = Result<T, paymos::Error>>,
    ) -> Result<Result<T, paymos::Error>, PortError> {
        tokio::time::timeout(self.deadline, call)
            .await
            .map_err(|_| PortError::new(operation, format!("no answer within {:?}", self.deadline)))
    }

    /// Proves the key at start: one authenticated call, and the environment of what the key
    /// reads. A refused key, or a key of the other environment's project, is an error naming
    /// the setting (the function then fails its start, and the misconfiguration alarm fires).
    ///
    /// # Errors
    /// [`PortErrorKind::Misconfigured`] for a wrong key or environment; the API's failure
    /// otherwise.
    pub async fn prove(&self, environment: Environment) -> Result<(), PortError> {
        const OPERATION: &str = "Paymos GET /v1/invoices";
        let params = paymos::InvoiceListParams {
            limit: Some(1),
            ..paymos::InvoiceListParams::default()
        };
        let page = self
            .bounded(OPERATION, self.client.invoices().list(&params))
            .await?
            .map_err(|e| api_error(OPERATION, e))?;
        if let Some(item) = page.items.first()
            && item.is_test != environment.is_test()
        {
            return Err(PortError::of_kind(
                OPERATION,
                PortErrorKind::Misconfigured,
                format!(
                    "the API key in PAYMOS_API_SECRETS_ID reads {} invoices but this stack applies {}: use the {} project's key",
                    if item.is_test { "sandbox" } else { "live" },
                    environment.as_str(),
                    environment.as_str()
                ),
            ));
        }
        Ok(())
    }
}

impl PaymentConfirmation for PaymosApi {
    async fn invoice(&self, invoice_id: &str) -> Result<AtSource<ConfirmedInvoice>, PortError> {
        const OPERATION: &str = "Paymos GET /v1/invoices/{id}";
        let result = self
            .bounded(OPERATION, self.client.invoices().get(invoice_id))
            .await?
            .map_err(|e| naming(invoice_id, e));
        // An answer about another invoice confirms nothing of this one.
        if let Ok(other) = &result
            && other.invoice_id != invoice_id
        {
            return Err(PortError::of_kind(
                OPERATION,
                PortErrorKind::Unreadable,
                format!(
                    "asked for {invoice_id}, Paymos answered with {}: nothing of it is read",
                    other.invoice_id
                ),
            ));
        }
        answer(OPERATION, result, |invoice| ConfirmedInvoice {
            status: invoice.status.as_str().to_owned(),
            is_test: invoice.is_test,
            order_id: (!invoice.order.external_id.is_empty())
                .then(|| invoice.order.external_id.clone()),
            order_amount: Amount::parse(&invoice.order.amount),
            order_currency: upper(&invoice.order.currency),
            token_amount: invoice
                .payment
                .as_ref()
                .and_then(|p| Amount::parse(&p.expected)),
            token_currency: invoice.payment.as_ref().and_then(|p| upper(&p.currency)),
            paid_late: invoice.paid_late_at.is_some(),
            paid_at: invoice
                .paid_late_at
                .or(invoice.completed_at)
                .and_then(|t| u64::try_from(t).ok()),
            project_id: Some(invoice.project_id.clone()).filter(|p| !p.is_empty()),
        })
    }

    async fn withdrawal(
        &self,
        withdrawal_id: &str,
        refund: bool,
    ) -> Result<AtSource<ConfirmedWithdrawal>, PortError> {
        if refund {
            const OPERATION: &str = "Paymos GET /v1/refunds/{id}";
            let result = self
                .bounded(OPERATION, self.client.refunds().get(withdrawal_id))
                .await?;
            return answer(OPERATION, result, |r| ConfirmedWithdrawal {
                status: r.status().as_str().to_owned(),
                is_test: r.is_test(),
                invoice_id: Some(r.invoice_id().to_owned()),
                full: Some(matches!(r.mode(), paymos::RefundMode::Full)),
                amount: Amount::parse(r.amount()),
                currency: upper(r.currency()),
                project_id: r.project_id().filter(|p| !p.is_empty()).map(str::to_owned),
                completed_at: r.completed_at().and_then(|t| u64::try_from(t).ok()),
            });
        }
        const OPERATION: &str = "Paymos GET /v1/withdrawals/{id}";
        let result = self
            .bounded(OPERATION, self.client.withdrawals().get(withdrawal_id))
            .await?;
        answer(OPERATION, result, |w| ConfirmedWithdrawal {
            status: w.status.as_str().to_owned(),
            is_test: w.is_test,
            invoice_id: None,
            full: None,
            amount: Amount::parse(&w.amount),
            currency: upper(&w.currency),
            project_id: None,
            completed_at: w.completed_at.and_then(|t| u64::try_from(t).ok()),
        })
    }

    async fn deposit(&self, deposit_id: &str) -> Result<AtSource<ConfirmedDeposit>, PortError> {
        const OPERATION: &str = "Paymos GET /v1/payment-channel-deposits/{id}";
        let result = self
            .bounded(
                OPERATION,
                self.client.payment_channel_deposits().get(deposit_id),
            )
            .await?;
        answer(OPERATION, result, |d| ConfirmedDeposit {
            status: d.status.clone(),
            is_final: d.is_final,
            is_test: d.is_test,
            payer: d.payment_channel_external_id.clone(),
            net: Amount::parse(&d.net),
            currency: d.currency.to_ascii_uppercase(),
            project_id: Some(d.project_id.clone()).filter(|p| !p.is_empty()),
        })
    }

    async fn refunds_of(&self, invoice_id: &str) -> Result<Vec<Refund>, PortError> {
        const OPERATION: &str = "Paymos GET /v1/refunds";
        let mut params = paymos::RefundListParams {
            invoice_id: Some(invoice_id.to_owned()),
            limit: Some(100),
            ..paymos::RefundListParams::default()
        };
        // Every page (the crate has no pager for refunds): a refund in full listed after the
        // first page returns the payment just the same. A cursor seen before ends in an error,
        // never in a shorter list.
        let mut items = Vec::new();
        let mut seen = std::collections::HashSet::new();
        loop {
            let page = self
                .bounded(OPERATION, self.client.refunds().list(&params))
                .await?
                .map_err(|e| api_error(OPERATION, e))?;
            items.extend(page.items);
            match page.next_cursor.filter(|c| !c.is_empty()) {
                None => break,
                Some(cursor) if !seen.insert(cursor.clone()) => {
                    return Err(PortError::new(
                        OPERATION,
                        "Paymos returned a page cursor twice: the refunds were not read whole",
                    ));
                }
                Some(cursor) => params.cursor = Some(cursor),
            }
        }
        Ok(items
            .iter()
            .filter(|r| matches!(r.status(), paymos::WithdrawalStatus::Completed))
            .map(|r| Refund {
                withdrawal_id: r.withdrawal_id().to_owned(),
                amount: Amount::parse(r.amount()),
                currency: upper(r.currency()),
                mode: Some(match r.mode() {
                    paymos::RefundMode::Full => RefundMode::Full,
                    paymos::RefundMode::Overpayment => RefundMode::Overpayment,
                }),
                completed_at: r.completed_at().and_then(|t| u64::try_from(t).ok()),
            })
            .collect())
    }
}

/// The most slices of a reconciliation's window listed at once: Paymos lists by creation time
/// only, through a cursor, so one cursor reads one page after another; disjoint creation-time
/// slices read concurrently keep a busy merchant's window within a run, and Paymos
/// never sees more than four of our listings at once. A 429 is retried after its
/// `Retry-After` by the official crate (configure the client with retries).
pub const SLICES_AT_ONCE: usize = 4;

/// A window is cut into at most this many slices of equal length (a minute at least): a
/// merchant's busy hours then spread over several slices, so four stay busy.
pub const SLICES: i64 = 16;

/// Disjoint slices covering `[from, to]` (inclusive Unix seconds, as Paymos' filters are),
/// earliest first, at most [`SLICES`]; an empty window is itself. (A scheduled run hands this
/// one slice of its window at a time: [`paymos_inbox_core::roads::reconcile::SLICE_S`].)
#[must_use]
pub fn slices(from: i64, to: i64) -> Vec<(i64, i64)> {
    let span = to.saturating_sub(from).saturating_add(1);
    let len = ((span + SLICES - 1) / SLICES).max(60);
    paymos_inbox_core::roads::reconcile::slices_of(from, to, len)
}

impl PaymosApi {
    /// Every paid or closed invoice created in `[from, to]`, every page of one cursor.
    async fn invoices_in_slice(
        &self,
        (from, to): (i64, i64),
    ) -> Result<Vec<(String, ConfirmedInvoice)>, PortError> {
        const OPERATION: &str = "Paymos GET /v1/invoices";
        use paymos::InvoiceStatus as Api;
        let params = paymos::InvoiceListParams {
            status: Some(vec![
                Api::Paid,
                Api::PaidOver,
                Api::Expired,
                Api::Underpaid,
                Api::Cancelled,
            ]),
            created_from: Some(from),
            created_to: Some(to),
            limit: Some(100),
            ..paymos::InvoiceListParams::default()
        };
        // Every page, each call bounded by the client's timeout rather than one deadline for the
        // whole listing. No page bound: the crate's default (100 pages, 10,000 invoices) ends
        // the listing quietly, as if the window held no more, and a busy merchant's paid
        // invoice beyond it was never found. The crate's refusal of a repeated cursor stops a
        // looping server; the function's timeout bounds the run.
        let mut pager = self
            .client
            .invoices()
            .pager(params, Some(usize::MAX))
            .map_err(|e| api_error(OPERATION, e))?;
        let mut out = Vec::new();
        let window = format!("the invoices created from {from} to {to} (Unix s)");
        while let Some(item) = pager
            .next()
            .await
            .map_err(|e| api_error(OPERATION, naming(&window, e)))?
        {
            let at = ConfirmedInvoice {
                status: item.status.as_str().to_owned(),
                is_test: item.is_test,
                order_id: (!item.external_order_id.is_empty())
                    .then(|| item.external_order_id.clone()),
                order_amount: Amount::parse(&item.amount),
                order_currency: upper(&item.currency),
                token_amount: None,
                token_currency: None,
                paid_late: item.paid_late_at.is_some(),
                paid_at: item
                    .paid_late_at
                    .or(item.completed_at)
                    .and_then(|t| u64::try_from(t).ok()),
                project_id: Some(item.project_id.clone()).filter(|p| !p.is_empty()),
            };
            out.push((item.invoice_id, at));
        }
        Ok(out)
    }
}

impl PaymosLedger for PaymosApi {
    /// [`SLICES_AT_ONCE`] of the window's [`slices`] listed at once, in creation order.
    async fn invoices_created(
        &self,
        from: i64,
        to: i64,
    ) -> Result<Vec<(String, ConfirmedInvoice)>, PortError> {
        use futures::{StreamExt as _, TryStreamExt as _};
        let lists: Vec<Vec<_>> = futures::stream::iter(slices(from, to))
            .map(|slice| self.invoices_in_slice(slice))
            .buffered(SLICES_AT_ONCE)
            .try_collect()
            .await?;
        Ok(lists.into_iter().flatten().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Issue 49 (A7): an answer that did not decode was a service "unavailable", said as "could
    // not reach the service". It is unreadable, naming what it was about and the field.
    #[test]
    fn an_answer_that_does_not_decode_is_unreadable_and_names_the_invoice() {
        let decoding = serde_json::from_str::<paymos::InvoiceListItem>(r#"{"invoice_id":"inv_1"}"#)
            .unwrap_err();
        let e = api_error(
            "Paymos GET /v1/invoices/{id}",
            naming("inv_1", paymos::Error::InvalidResponse(decoding)),
        );
        assert_eq!(e.kind, PortErrorKind::Unreadable);
        assert!(
            e.message.contains("inv_1: missing field `project_id`"),
            "{}",
            e.message
        );
        let refused = naming("inv_1", paymos::Error::Pagination("x".into()));
        assert_eq!(
            api_error("Paymos GET /v1/invoices", refused).kind,
            PortErrorKind::Unavailable
        );
    }
}
