//! The merchant's HTTPS endpoint, for the signed hand-off (`reqwest` with rustls, the client the
//! official `paymos` crate already brings).

use std::time::Duration;

use paymos_inbox_core::port::{PortError, PortErrorKind};
use paymos_inbox_core::roads::outbound::{Outbound, WebhookTarget};

/// The operation a post's failure names.
const POST: &str = "webhook POST";

/// Whether `url` may receive the signed hand-off: `https`, or plain `http` to a loopback host
/// (`127.0.0.0/8`, `[::1]`, `localhost`: tests and a local consumer), judged by the parsed host,
/// never by a prefix.
///
/// # Errors
/// Why not, in words for the setting's error.
pub fn endpoint(url: &str) -> Result<reqwest::Url, String> {
    let parsed = reqwest::Url::parse(url).map_err(|e| format!("not a URL ({e})"))?;
    let host = parsed.host_str().unwrap_or_default();
    let loopback = host == "localhost"
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    match parsed.scheme() {
        "https" if !host.is_empty() => Ok(parsed),
        "http" if loopback => Ok(parsed),
        _ => Err(
            "must be an https:// URL (plain http:// only to a loopback host: 127.0.0.1, [::1], localhost)"
                .into(),
        ),
    }
}

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
            // A redirect is never followed: 301/302/303 would turn the signed POST into a
            // body-less GET whose 2xx counted as delivered, 307/308 would re-post the body to
            // wherever the endpoint points (another host, plain http).
            .redirect(reqwest::redirect::Policy::none())
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
    PortError::of_kind(POST, kind, causes(&e)).with_source(e)
}

/// An error with its causes (reqwest's own text is "error sending request"; the cause says
/// whether the connection was refused, the name did not resolve or the certificate is not
/// trusted), each said once.
fn causes(e: &dyn std::error::Error) -> String {
    let mut said = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !said.contains(&text) {
            said = format!("{said}: {text}");
        }
        cause = c.source();
    }
    said
}

impl WebhookTarget for HttpWebhookTarget {
    async fn post(&self, message: &Outbound) -> Result<u16, PortError> {
        let mut request = self.client.post(&self.url);
        if let Some(traceparent) = crate::trace::carried() {
            request = request.header(crate::trace::TRACEPARENT, traceparent);
        }
        let response = request
            .header("content-type", "application/json")
            .header("webhook-id", &message.id)
            .header("webhook-timestamp", message.timestamp.to_string())
            .header("webhook-signature", &message.signature)
            .body(message.body.clone())
            .send()
            .await
            .map_err(transport_error)?;
        let status = response.status().as_u16();
        if response.status().is_redirection() {
            let location = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|l| l.to_str().ok())
                .unwrap_or("no Location");
            return Err(PortError::of_kind(
                POST,
                PortErrorKind::Misconfigured,
                format!(
                    "the endpoint answered {status}, redirecting to {location}: redirects are not followed; set WebhookTargetUrl to the URL that answers"
                ),
            ));
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_post_that_gets_no_answer_says_why() {
        // Port 9 on loopback: nothing listens (discard), the connection is refused.
        let target =
            HttpWebhookTarget::new("http://127.0.0.1:9/hooks", Duration::from_secs(2)).unwrap();
        let message = Outbound {
            id: "order-paid:inv_1".into(),
            timestamp: 1,
            signature: "v1,x".into(),
            body: "{}".into(),
        };
        let e = target.post(&message).await.unwrap_err();
        assert_eq!(e.kind, PortErrorKind::Unavailable);
        let said = e.to_string();
        assert!(said.contains("error sending request"), "{said}");
        assert!(said.to_lowercase().contains("connection refused"), "{said}");
        assert!(!said.contains("/hooks"), "never the URL: {said}");
    }
}
