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

use crate::port::PortError;

/// The signing secret of the outbound messages: bytes, given as `whsec_<base64>` (or bare
/// base64), as Standard Webhooks libraries take it. Never printed.
#[derive(Clone)]
pub struct OutboundSecret(Zeroizing<Vec<u8>>, Option<Box<OutboundSecret>>);

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
        Ok(Self(Zeroizing::new(bytes), None))
    }

    /// During a rotation: `previous` signs too, so a consumer still holding it verifies (Standard
    /// Webhooks' space-separated signatures; a library accepts a message when one matches).
    #[must_use]
    pub fn with_previous(mut self, previous: Self) -> Self {
        self.1 = Some(Box::new(Self(previous.0, None)));
        self
    }

    /// The `webhook-signature` header: this key's signature and, during a rotation, the previous
    /// key's, separated by a space.
    #[must_use]
    pub fn signatures(&self, id: &str, timestamp: u64, body: &str) -> String {
        let current = self.sign(id, timestamp, body);
        match &self.1 {
            Some(previous) => format!("{current} {}", previous.sign(id, timestamp, body)),
            None => current,
        }
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
        signature: secret.signatures(&id, now, &body),
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

/// The delays before each retry of a message the endpoint did not accept, as Standard Webhooks
/// senders retry: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h (the first attempt is immediate).
/// Seven retries over about 27½ hours: an endpoint down for a deploy, a night or a day gets
/// every message afterwards.
pub const RETRY_DELAYS_S: [u32; 7] = [5, 300, 1_800, 7_200, 18_000, 36_000, 36_000];

/// Attempts in all (the first and one per delay): the delivery queue's `maxReceiveCount`, after
/// which the message is parked in its dead-letter queue.
pub const ATTEMPTS: u32 = 1 + RETRY_DELAYS_S.len() as u32;

/// How long to wait after the `attempt`-th attempt (1-based) failed, spread by `spread`
/// (-1 … 1) over a tenth of the delay either way, so messages that failed together do not all
/// come back at once; `None` after the last attempt (the message is parked).
#[must_use]
pub fn retry_delay(attempt: u32, spread: f64) -> Option<u32> {
    let base = *RETRY_DELAYS_S.get(usize::try_from(attempt.checked_sub(1)?).ok()?)?;
    let jitter = f64::from(base) * 0.1 * spread.clamp(-1.0, 1.0);
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "at most 39,600 s, never negative"
    )]
    Some((f64::from(base) + jitter).round().max(1.0) as u32)
}

/// A message's spread for its `attempt` (-1 … 1), stable for one message and attempt and
/// different across messages: from a hash of its id, so no random source is needed.
#[must_use]
pub fn spread_of(message_id: &str, attempt: u32) -> f64 {
    use sha2::Digest as _;
    let digest = sha2::Sha256::new()
        .chain_update(message_id.as_bytes())
        .chain_update(attempt.to_be_bytes())
        .finalize();
    let n = u16::from_be_bytes([digest[0], digest[1]]);
    f64::from(n) / f64::from(u16::MAX) * 2.0 - 1.0
}

/// Whether an endpoint's answer parks the message at once rather than retrying it: `410 Gone`
/// says the endpoint will never take it.
#[must_use]
pub fn parks_at_once(status: u16) -> bool {
    status == 410
}

/// The delivery queue, as a retry needs it.
pub trait RetryQueue: Send + Sync {
    /// Makes the received message under `receipt` visible again in `delay_s` seconds.
    fn retry_in(
        &self,
        receipt: &str,
        delay_s: u32,
    ) -> impl Future<Output = Result<(), PortError>> + Send;

    /// Moves the message with `body` to the dead-letter queue now, saying `why`.
    fn park(&self, body: &str, why: &str) -> impl Future<Output = Result<(), PortError>> + Send;
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

    #[test]
    fn the_schedule_covers_more_than_a_day_and_an_endpoint_down_half_an_hour_gets_everything() {
        assert_eq!(ATTEMPTS, 8);
        let total: u32 = RETRY_DELAYS_S.iter().sum();
        assert!(total >= 24 * 3600, "{total} s");
        assert_eq!(retry_delay(0, 0.0), None);
        assert_eq!(retry_delay(1, 0.0), Some(5));
        assert_eq!(retry_delay(7, 0.0), Some(36_000));
        assert_eq!(
            retry_delay(ATTEMPTS, 0.0),
            None,
            "the last attempt parks it"
        );
        // A fake clock: the endpoint answers 503 for 31 minutes, then 2xx.
        let down_until = 31 * 60;
        for id in ["msg_a", "msg_b", "msg_c"] {
            let (mut now, mut attempt, mut delivered) = (0_u32, 1, None);
            while delivered.is_none() {
                if now >= down_until {
                    delivered = Some(attempt);
                } else {
                    now += retry_delay(attempt, spread_of(id, attempt)).expect("not parked");
                    attempt += 1;
                }
            }
            assert!(delivered.is_some_and(|a| a <= ATTEMPTS), "{id}");
            assert!(
                now < down_until + 2 * 3600,
                "{id}: delivered within the next delay"
            );
        }
    }

    #[test]
    fn the_spread_is_a_tenth_either_way_and_differs_between_messages() {
        for attempt in 1..ATTEMPTS {
            let base = RETRY_DELAYS_S[attempt as usize - 1];
            for id in ["a", "b", "c", "d"] {
                let d = retry_delay(attempt, spread_of(id, attempt)).unwrap();
                assert!(
                    f64::from(d) >= f64::from(base) * 0.9 - 1.0
                        && f64::from(d) <= f64::from(base) * 1.1 + 1.0,
                    "{attempt} {id}: {d}"
                );
            }
        }
        assert_eq!(retry_delay(2, 1.0), Some(330));
        assert_eq!(retry_delay(2, -1.0), Some(270));
        assert_eq!(retry_delay(2, 9.0), Some(330), "clamped");
        assert_eq!(spread_of("a", 1), spread_of("a", 1));
        let spreads: std::collections::BTreeSet<String> = (0..20)
            .map(|i| format!("{:.3}", spread_of(&format!("msg_{i}"), 1)))
            .collect();
        assert!(spreads.len() > 15, "{spreads:?}");
        assert!((-1.0..=1.0).contains(&spread_of("x", 3)));
    }

    #[test]
    fn during_a_rotation_both_keys_sign() {
        let new = OutboundSecret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let old = OutboundSecret::parse("whsec_c2VjcmV0LW9mLXRoZS1vbGQta2V5").unwrap();
        let both = new.clone().with_previous(old.clone());
        let header = both.signatures("msg_1", 9, "{}");
        assert_eq!(
            header,
            format!(
                "{} {}",
                new.sign("msg_1", 9, "{}"),
                old.sign("msg_1", 9, "{}")
            )
        );
        assert_eq!(new.signatures("msg_1", 9, "{}"), new.sign("msg_1", 9, "{}"));
        let event = r#"{"detail-type":"Order Paid","time":"t","detail":{"idempotency_key":"k"}}"#;
        assert_eq!(
            outbound_of(event, &both, 9)
                .unwrap()
                .signature
                .split(' ')
                .count(),
            2
        );
    }
}
