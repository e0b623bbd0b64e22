//! The merchant's HTTPS endpoint, for the signed hand-off (`reqwest` with rustls, the client the
//! official `paymos` crate already brings).

use std::time::Duration;

use paymos_inbox_core::outbound::{Outbound, WebhookTarget};
use paymos_inbox_core::port::{PortError, PortErrorKind};

/// The operation a post's failure names.
const POST: &str = "webhook POST";

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
    /// [`PortErrorKind::Misconfigured`] when the HTTP client cannot be built.
    pub fn new(url: impl Into<String>, timeout: Duration) -> Result<Self, PortError> {
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .user_agent(concat!("paymos-inbox/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| {
                PortError::of_kind("webhook client", PortErrorKind::Misconfigured, &e)
                    .with_source(e)
            })?;
        Ok(Self {
            client,
            url: url.into(),
        })
    }
}

/// A post that got no answer, of its kind: a request that could not be built (the URL) is
/// ours to fix, anything else (connection, TLS, timeout) the endpoint's. Never the URL, which
/// may carry a token.
fn transport_error(e: reqwest::Error) -> PortError {
    let e = e.without_url();
    let kind = if e.is_builder() {
        PortErrorKind::Misconfigured
    } else {
        PortErrorKind::Unavailable
    };
    PortError::of_kind(POST, kind, &e).with_source(e)
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
            .map_err(transport_error)?;
        let status = response.status().as_u16();
        if crate::aws::is_credential_status(status) {
            // The endpoint refused our signature: its secret and ours differ (or it wants
            // another credential). Every retry fails alike until an operator fixes one of them.
            return Err(PortError::refused_credential(
                POST,
                format!(
                    "the endpoint answered {status}: it refused the signature; check that it verifies with the secret in WEBHOOK_SIGNING_SECRET_ID"
                ),
            ));
        }
        Ok(status)
    }
}
