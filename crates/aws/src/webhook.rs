//! The merchant's HTTPS endpoint, for the signed hand-off (`reqwest` with rustls, the client the
//! official `paymos` crate already brings).

use std::time::Duration;

use paymos_inbox_core::ingest::PortError;
use paymos_inbox_core::outbound::{Outbound, WebhookTarget};

/// A [`WebhookTarget`] posting to one URL, bounded by a timeout.
#[derive(Debug, Clone)]
pub struct HttpWebhookTarget {
    client: reqwest::Client,
    url: String,
}

impl HttpWebhookTarget {
    /// Posts to `url`, each attempt bounded by `timeout`.
    ///
    /// # Errors
    /// When the HTTP client cannot be built.
    pub fn new(url: impl Into<String>, timeout: Duration) -> Result<Self, PortError> {
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .user_agent(concat!("paymos-inbox/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| PortError::new("webhook client", e))?;
        Ok(Self {
            client,
            url: url.into(),
        })
    }
}

impl WebhookTarget for HttpWebhookTarget {
    async fn post(&self, message: &Outbound) -> Result<u16, PortError> {
        let response = self
            .client
            .post(&self.url)
            .header("content-type", "application/json")
            .header("webhook-id", &message.id)
            .header("webhook-timestamp", message.timestamp.to_string())
            .header("webhook-signature", &message.signature)
            .body(message.body.clone())
            .send()
            .await
            .map_err(|e| PortError::new("webhook POST", e.without_url()))?;
        Ok(response.status().as_u16())
    }
}
