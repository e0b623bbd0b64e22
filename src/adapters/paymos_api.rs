//! The reverse check against Paymos' API through the official `paymos` crate.

use crate::domain::fulfil::{ConfirmedInvoice, PaymentConfirmation};
use crate::domain::ingest::PortError;
use crate::domain::state::Amount;

/// A [`PaymentConfirmation`] that reads `GET /v1/invoices/{id}`.
#[derive(Clone)]
pub struct PaymosApi {
    client: paymos::PaymosClient,
}

impl PaymosApi {
    /// Wraps a configured client.
    #[must_use]
    pub fn new(client: paymos::PaymosClient) -> Self {
        Self { client }
    }
}

impl PaymentConfirmation for PaymosApi {
    async fn invoice(&self, invoice_id: &str) -> Result<ConfirmedInvoice, PortError> {
        let invoice = self
            .client
            .invoices()
            .get(invoice_id)
            .await
            .map_err(|e| PortError::new("Paymos GET /v1/invoices/{id}", e))?;
        Ok(ConfirmedInvoice {
            status: invoice.status.as_str().to_owned(),
            amount: Amount::parse(&invoice.order.amount),
            currency: Some(invoice.order.currency.to_ascii_uppercase()),
        })
    }
}
