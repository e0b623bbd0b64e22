//! The reverse check against Paymos' API through the official `paymos` crate.

use std::time::Duration;

use crate::domain::confirm::{AtSource, ConfirmedInvoice, PaymentConfirmation};
use crate::domain::ingest::PortError;
use crate::domain::status::Amount;

/// The default hard deadline of one reverse check: well inside the 30 s fulfil timeout, so ten
/// slow checks of one batch still finish (they run concurrently) and the batch's other messages
/// are applied.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(5);

/// A [`PaymentConfirmation`] that reads `GET /v1/invoices/{id}`, bounded by a deadline.
#[derive(Clone)]
pub struct PaymosApi {
    client: paymos::PaymosClient,
    deadline: Duration,
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

    /// With another deadline per check (a timed-out check is retried on a later receive).
    #[must_use]
    pub fn with_deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }
}

impl PaymentConfirmation for PaymosApi {
    async fn invoice(&self, invoice_id: &str) -> Result<AtSource, PortError> {
        let invoices = self.client.invoices();
        let answer = tokio::time::timeout(self.deadline, invoices.get(invoice_id))
            .await
            .map_err(|_| {
                PortError::new(
                    "Paymos GET /v1/invoices/{id}",
                    format!("no answer within {:?}", self.deadline),
                )
            })?;
        let invoice = match answer {
            Ok(invoice) => invoice,
            Err(paymos::Error::Api(e)) if e.status == 404 => return Ok(AtSource::NotFound),
            Err(e) => return Err(PortError::new("Paymos GET /v1/invoices/{id}", e)),
        };
        let upper = |s: &str| Some(s.to_ascii_uppercase());
        Ok(AtSource::Found(ConfirmedInvoice {
            status: invoice.status.as_str().to_owned(),
            order_amount: Amount::parse(&invoice.order.amount),
            order_currency: upper(&invoice.order.currency),
            token_amount: invoice
                .payment
                .as_ref()
                .and_then(|p| Amount::parse(&p.expected)),
            token_currency: invoice.payment.as_ref().and_then(|p| upper(&p.currency)),
        }))
    }
}
