//! The hand-off's outbound road: what is posted to the merchant's endpoint, what counts as
//! delivered, when a message is parked, and the secret that signs it.

use std::sync::Mutex;

use base64::Engine as _;

use crate::port::{PortError, PortErrorKind};
use crate::roads::outbound::{
    DeliverError, InvalidOutboundSecret, Outbound, OutboundError, OutboundSecret, RETRY_DELAYS_S,
    WebhookTarget, deliver, outbound_of, parks_at_once, retry_delay, spread_of,
};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const NOW: u64 = 1_800_000_000;
const EVENT: &str = r#"{"version":"0","id":"e-1","detail-type":"Order Paid","source":"paymos-inbox","time":"2026-11-30T12:00:00Z","detail":{"idempotency_key":"order-paid:inv_1","amount":"10.00"}}"#;

/// An endpoint that answers each post with `answer` and keeps what it was sent.
struct Endpoint {
    answer: Result<u16, PortError>,
    posted: Mutex<Vec<Outbound>>,
}

impl Endpoint {
    fn answering(answer: Result<u16, PortError>) -> Self {
        Self {
            answer,
            posted: Mutex::new(Vec::new()),
        }
    }

    fn posted(&self) -> Vec<Outbound> {
        self.posted.lock().expect("lock").clone()
    }
}

impl WebhookTarget for Endpoint {
    async fn post(&self, message: &Outbound) -> Result<u16, PortError> {
        self.posted.lock().expect("lock").push(message.clone());
        self.answer.clone()
    }
}

fn secret() -> OutboundSecret {
    OutboundSecret::parse(SECRET).unwrap()
}

#[tokio::test]
async fn a_delivery_posts_the_signed_message_once_and_reports_the_facts_id() {
    let endpoint = Endpoint::answering(Ok(204));
    let delivered = deliver(&endpoint, EVENT, &secret(), NOW).await;
    assert_eq!(delivered, Ok("order-paid:inv_1".to_owned()));
    assert_eq!(
        endpoint.posted(),
        [outbound_of(EVENT, &secret(), NOW).unwrap()],
        "the message as signed now, posted once"
    );
}

#[tokio::test]
async fn only_a_2xx_answer_counts_as_delivered() {
    for status in [200, 202, 299, 300, 301, 400, 404, 410, 429, 500, 503] {
        let endpoint = Endpoint::answering(Ok(status));
        let delivered = deliver(&endpoint, EVENT, &secret(), NOW).await;
        if (200..300).contains(&status) {
            assert_eq!(delivered, Ok("order-paid:inv_1".to_owned()), "{status}");
        } else {
            assert_eq!(delivered, Err(DeliverError::Refused(status)), "{status}");
        }
        assert_eq!(endpoint.posted().len(), 1, "{status}");
    }
}

#[tokio::test]
async fn no_answer_is_no_delivery_and_keeps_its_kind() {
    let refused = PortError::refused_credential("POST", "401 from the endpoint");
    for error in [
        PortError::of_kind("POST", PortErrorKind::Unavailable, "connection reset"),
        refused,
    ] {
        let endpoint = Endpoint::answering(Err(error.clone()));
        let delivered = deliver(&endpoint, EVENT, &secret(), NOW).await;
        assert_eq!(delivered, Err(DeliverError::Unavailable(error)));
        assert_eq!(endpoint.posted().len(), 1);
    }
}

#[tokio::test]
async fn an_event_that_cannot_be_signed_is_never_posted() {
    let endpoint = Endpoint::answering(Ok(200));
    for (event, why) in [
        ("not json", "not JSON"),
        (r#"{"detail":{"idempotency_key":"k"}}"#, "no detail-type"),
        (
            r#"{"detail-type":"Order Paid","detail":{}}"#,
            "no detail.idempotency_key",
        ),
    ] {
        let delivered = deliver(&endpoint, event, &secret(), NOW).await;
        assert_eq!(
            delivered,
            Err(DeliverError::Outbound(OutboundError::Malformed(why))),
            "{event}"
        );
    }
    assert!(endpoint.posted().is_empty());
}

#[test]
fn only_410_gone_parks_a_message_at_once() {
    assert!(parks_at_once(410));
    for status in [200, 400, 401, 403, 404, 409, 429, 500, 502, 503] {
        assert!(!parks_at_once(status), "{status}: retried on the schedule");
    }
}

#[test]
fn a_signing_secret_has_at_least_sixteen_bytes_with_or_without_its_prefix() {
    let base64 = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
    let sixteen = base64(&[7; 16]);
    let prefixed = OutboundSecret::parse(&format!("whsec_{sixteen}")).expect("16 bytes are enough");
    let bare = OutboundSecret::parse(&sixteen).expect("bare base64 too");
    assert_eq!(
        prefixed.sign("msg_1", NOW, "{}"),
        bare.sign("msg_1", NOW, "{}"),
        "the same key either way"
    );
    assert_ne!(
        prefixed.sign("msg_1", NOW, "{}"),
        secret().sign("msg_1", NOW, "{}")
    );
    for short in [
        base64(&[7; 15]),
        base64(&[]),
        format!("whsec_{}", base64(&[7; 15])),
    ] {
        assert_eq!(
            OutboundSecret::parse(&short).unwrap_err(),
            InvalidOutboundSecret::TooShort,
            "{short}"
        );
    }
}

#[test]
fn messages_that_failed_together_come_back_spread_over_both_sides_of_the_delay() {
    let spreads: Vec<f64> = (0..200)
        .map(|i| spread_of(&format!("order-paid:inv_{i}"), 2))
        .collect();
    assert!(
        spreads.iter().all(|s| (-1.0..=1.0).contains(s)),
        "{spreads:?}"
    );
    let (earliest, latest) = spreads
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), s| (lo.min(*s), hi.max(*s)));
    assert!(earliest < -0.8 && latest > 0.8, "{earliest} … {latest}");
    let early = spreads.iter().filter(|s| **s < 0.0).count();
    assert!(
        (70..=130).contains(&early),
        "{early} of 200 come back early"
    );
    // In seconds: the second retry's five minutes become 270 … 330.
    let base = RETRY_DELAYS_S[1];
    let delays: Vec<u32> = spreads
        .iter()
        .map(|s| retry_delay(2, *s).unwrap())
        .collect();
    assert!(delays.iter().any(|d| *d < base - 20) && delays.iter().any(|d| *d > base + 20));
}
