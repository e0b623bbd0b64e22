//! What this stack sends out: the hand-off's events to the merchant's HTTPS endpoint as
//! Standard Webhooks messages (<https://www.standardwebhooks.com>), so the receiver verifies
//! them with any Standard Webhooks library in its own language: `webhook-id` (the fact's id,
//! to deduplicate on), `webhook-timestamp` and `webhook-signature`
//! (`v1,` + base64 HMAC-SHA256 over `{id}.{timestamp}.{body}` with the per-stack secret).

use std::future::Future;

use base64::Engine as _;
use hmac::{KeyInit, Mac};
use serde_json::{Value, json};
use zeroize::Zeroizing;

use super::port::PortError;

/// The signing secret of the outbound messages: bytes, given as `whsec_<base64>` (or bare
/// base64), as Standard Webhooks libraries take it. Never printed.
#[derive(Clone)]
pub struct OutboundSecret(Zeroizing<Vec<u8>>);

impl std::fmt::Debug for OutboundSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OutboundSecret([redacted])")
    }
}

/// Why a signing secret cannot be used (its text is never quoted).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidOutboundSecret {
    /// Not `whsec_` followed by base64.
    #[error("the signing secret is not whsec_ followed by base64")]
    NotBase64,
    /// Fewer than 16 bytes.
    #[error("the signing secret is shorter than 16 bytes")]
    TooShort,
}

impl OutboundSecret {
    /// Reads `whsec_<base64>` or bare base64 (at least 16 bytes).
    ///
    /// # Errors
    /// [`InvalidOutboundSecret`] when it is not base64 or too short.
    pub fn parse(text: &str) -> Result<Self, InvalidOutboundSecret> {
        let b64 = text.trim().strip_prefix("whsec_").unwrap_or(text.trim());
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .map_err(|_| InvalidOutboundSecret::NotBase64)?;
        if bytes.len() < 16 {
            return Err(InvalidOutboundSecret::TooShort);
        }
        Ok(Self(Zeroizing::new(bytes)))
    }

    /// `v1,<base64 HMAC-SHA256(secret, "{id}.{timestamp}.{body}")>`.
    #[must_use]
    pub fn sign(&self, id: &str, timestamp: u64, body: &str) -> String {
        let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(&self.0).expect("any key size");
        mac.update(format!("{id}.{timestamp}.{body}").as_bytes());
        format!(
            "v1,{}",
            base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
        )
    }
}

/// One signed message, ready to post.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outbound {
    /// `webhook-id`: the fact's id (`order-paid:inv_1`), the same on every retry and resend.
    pub id: String,
    /// `webhook-timestamp`: Unix seconds of this attempt.
    pub timestamp: u64,
    /// The JSON body: `{"type": <detail-type>, "timestamp": <the event's time>, "data": <detail>}`.
    pub body: String,
    /// `webhook-signature`.
    pub signature: String,
}

/// Why an event cannot be sent (never retried into success: the DLQ keeps it, its alarm rings).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OutboundError {
    /// Not an EventBridge event of this stack's hand-off.
    #[error("not a paymos-inbox event: {0}")]
    Malformed(&'static str),
}

/// The message for one EventBridge event (as a rule delivers it to SQS), signed at `now`.
///
/// # Errors
/// [`OutboundError::Malformed`] when the event lacks its detail type, detail or fact id.
pub fn outbound_of(
    event: &str,
    secret: &OutboundSecret,
    now: u64,
) -> Result<Outbound, OutboundError> {
    let event: Value =
        serde_json::from_str(event).map_err(|_| OutboundError::Malformed("not JSON"))?;
    let detail_type = event["detail-type"]
        .as_str()
        .ok_or(OutboundError::Malformed("no detail-type"))?;
    let detail = &event["detail"];
    let id = detail["idempotency_key"]
        .as_str()
        .ok_or(OutboundError::Malformed("no detail.idempotency_key"))?
        .to_owned();
    let body = json!({"type": detail_type, "timestamp": event["time"], "data": detail}).to_string();
    Ok(Outbound {
        signature: secret.sign(&id, now, &body),
        id,
        timestamp: now,
        body,
    })
}

/// The merchant's endpoint.
pub trait WebhookTarget: Send + Sync {
    /// Posts `message`; the HTTP status the endpoint answered.
    ///
    /// # Errors
    /// [`PortError`] when no answer came (connection, TLS, timeout: of their kind), or when the
    /// endpoint refused our credential (401/403: [`PortError::refused_credential`], since every
    /// retry fails alike until the signing secrets agree).
    fn post(&self, message: &Outbound) -> impl Future<Output = Result<u16, PortError>> + Send;
}

/// Why a delivery did not succeed (the message is retried, then parked in the DLQ).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeliverError {
    /// Cannot be sent at all.
    #[error(transparent)]
    Outbound(#[from] OutboundError),
    /// The endpoint answered other than 2xx (and other than a refused credential).
    #[error("the endpoint answered {0}")]
    Refused(u16),
    /// No answer, or our credential refused (the error's kind says which).
    #[error(transparent)]
    Unavailable(#[from] PortError),
}

/// Signs and posts one event; `Ok` when the endpoint answered 2xx.
///
/// # Errors
/// [`DeliverError`]: retry it.
pub async fn deliver<T: WebhookTarget>(
    target: &T,
    event: &str,
    secret: &OutboundSecret,
    now: u64,
) -> Result<String, DeliverError> {
    let message = outbound_of(event, secret, now)?;
    match target.post(&message).await? {
        200..=299 => Ok(message.id),
        status => Err(DeliverError::Refused(status)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signs_as_the_standard_webhooks_reference_does() {
        // The reference test vector of the Standard Webhooks libraries.
        let secret = OutboundSecret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        assert_eq!(
            secret.sign(
                "msg_p5jXN8AQM9LWM0D4loKWxJek",
                1_614_265_330,
                r#"{"test": 2432232314}"#
            ),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
        assert!(format!("{secret:?}").contains("redacted"));
        assert_eq!(
            OutboundSecret::parse("whsec_not base64!").unwrap_err(),
            InvalidOutboundSecret::NotBase64
        );
        assert!(
            OutboundSecret::parse("whsec_c2hvcnQ=").is_err(),
            "too short"
        );
    }

    #[test]
    fn the_message_carries_the_facts_id_and_its_detail() {
        let secret = OutboundSecret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let event = r#"{"version":"0","id":"e-1","detail-type":"Order Paid","source":"paymos-inbox","time":"2026-11-30T12:00:00Z","detail":{"idempotency_key":"order-paid:inv_1","amount":"10.00"}}"#;
        let m = outbound_of(event, &secret, 100).unwrap();
        assert_eq!(m.id, "order-paid:inv_1");
        let body: Value = serde_json::from_str(&m.body).unwrap();
        assert_eq!(body["type"], "Order Paid");
        assert_eq!(body["data"]["amount"], "10.00");
        assert_eq!(m.signature, secret.sign(&m.id, 100, &m.body));
        assert_eq!(
            outbound_of(r#"{"detail-type":"Order Paid","detail":{}}"#, &secret, 1),
            Err(OutboundError::Malformed("no detail.idempotency_key"))
        );
    }
}
