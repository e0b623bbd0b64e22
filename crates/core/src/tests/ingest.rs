//! Ingest: what each attempt answers and writes, with leases and take-overs.

use std::sync::Arc;

use crate::ingest::{
    DeliveryState, Inbound, Ingest, IngestError, IngestSettings, Ingested, PortErrorKind,
};
use crate::memory::{MemoryLedger, MemoryQueue};
use crate::signature::{SigningKey, Verifier, WebhookSecret, signature_header};

const NOW_MS: u64 = 1_800_000_000_000;
const LIVE: &str = "whsec_live_0123456789abcdef";

struct Rig {
    ingest: Ingest<Arc<MemoryLedger>, Arc<MemoryQueue>>,
    ledger: Arc<MemoryLedger>,
    queue: Arc<MemoryQueue>,
}

fn rig() -> Rig {
    let secret = WebhookSecret::new(LIVE);
    let verifier = Verifier::new(vec![SigningKey::new("live", &secret)], 300);
    let ledger = Arc::new(MemoryLedger::new());
    let queue = Arc::new(MemoryQueue::new());
    let ingest = Ingest::new(
        verifier,
        Arc::clone(&ledger),
        Arc::clone(&queue),
        IngestSettings::default(),
    );
    Rig {
        ingest,
        ledger,
        queue,
    }
}

fn body(event_id: &str, extra: &str) -> Vec<u8> {
    format!(
        r#"{{"event_id":"{event_id}","event_type":"invoice.paid","version":1,"occurred_at":1800000000,"data":{{"invoice_id":"inv_1"{extra}}}}}"#
    )
    .into_bytes()
}

fn signed(body: &[u8]) -> String {
    signature_header(NOW_MS / 1000, body, &[&WebhookSecret::new(LIVE)])
}

impl Rig {
    async fn post(&self, body: &[u8], at_ms: u64) -> Result<Ingested, IngestError> {
        let signature = signed(body);
        let req = Inbound {
            method: "POST",
            signature: Some(&signature),
            webhook_id: None,
            body,
        };
        self.ingest.handle(&req, at_ms).await.map(|r| r.ingested)
    }
}

const LEASE_MS: u64 = crate::ingest::DEFAULT_LEASE_SECS * 1000;

#[tokio::test]
async fn a_new_delivery_is_recorded_then_sent() {
    let rig = rig();
    assert_eq!(
        rig.post(&body("evt_1", ""), NOW_MS).await,
        Ok(Ingested::New)
    );
    let record = rig.ledger.get("evt_1").expect("recorded");
    assert_eq!(record.state, DeliveryState::Received);
    assert_eq!(record.lease_until_ms, NOW_MS + LEASE_MS);
    assert_eq!(rig.queue.sent().len(), 1);
}

#[tokio::test]
async fn duplicates_by_state_and_lease() {
    // (what happened to the first attempt, when the second arrives, answer, sends in all)
    type Case = (&'static str, bool, u64, Result<bool, u16>, usize);
    let cases: [Case; 4] = [
        ("processed", true, 1, Ok(false), 1),
        ("still in its lease", false, LEASE_MS - 1, Err(503), 1),
        (
            "its lease ran out: taken over and sent again",
            false,
            LEASE_MS + 1,
            Ok(true),
            2,
        ),
        ("processed long after", true, LEASE_MS * 10, Ok(false), 1),
    ];
    for (name, processed, later_ms, expected, sends) in cases {
        let rig = rig();
        rig.post(&body("evt_1", ""), NOW_MS).await.unwrap();
        if processed {
            rig.ledger.mark_processed("evt_1");
        }
        let answer = rig.post(&body("evt_1", ""), NOW_MS + later_ms).await;
        let answer = answer.map_err(|e| e.status()).map(|i| match i {
            Ingested::Duplicate {
                resent,
                body_conflict,
            } => {
                assert!(!body_conflict, "{name}");
                resent
            }
            Ingested::New => panic!("{name}: a second record"),
        });
        assert_eq!(answer, expected, "{name}");
        assert_eq!(rig.queue.sent().len(), sends, "{name}");
        assert_eq!(rig.ledger.len(), 1, "{name}");
    }
}

#[tokio::test]
async fn the_first_body_wins_and_the_conflict_is_noted() {
    let rig = rig();
    rig.post(&body("evt_1", ""), NOW_MS).await.unwrap();
    rig.ledger.mark_processed("evt_1");
    let other = body("evt_1", r#","note":"changed""#);
    let answer = rig.post(&other, NOW_MS + 1).await.unwrap();
    assert_eq!(
        answer,
        Ingested::Duplicate {
            resent: false,
            body_conflict: true
        }
    );
    assert_eq!(rig.ledger.conflicts(), ["evt_1"]);
    assert_eq!(
        rig.ledger.get("evt_1").unwrap().delivery.body,
        body("evt_1", "")
    );
}

#[tokio::test]
async fn a_failed_send_answers_503_and_frees_the_lease_for_the_next_attempt() {
    let rig = rig();
    rig.queue.fail_next(1);
    let error = rig.post(&body("evt_1", ""), NOW_MS).await.unwrap_err();
    assert_eq!(error.status(), 503);
    assert!(matches!(&error, IngestError::Unavailable(e) if e.kind == PortErrorKind::Unavailable));
    assert_eq!(
        rig.ledger.get("evt_1").unwrap().lease_until_ms,
        0,
        "released"
    );
    let retry = rig.post(&body("evt_1", ""), NOW_MS + 1_000).await;
    assert_eq!(
        retry,
        Ok(Ingested::Duplicate {
            resent: true,
            body_conflict: false
        })
    );
    assert_eq!(rig.queue.sent().len(), 1);
}

#[tokio::test]
async fn refused_requests_write_nothing() {
    let good = body("evt_1", "");
    let signature = signed(&good);
    let forged = signed(&body("evt_2", ""));
    let big = vec![b' '; crate::ingest::DEFAULT_MAX_BODY_BYTES + 1];
    let sandbox = body("evt_1", r#","is_test":true"#);
    let sandbox_signature = signed(&sandbox);
    let cases: [(&str, Inbound<'_>, u16); 6] = [
        (
            "GET",
            Inbound {
                method: "GET",
                signature: Some(&signature),
                webhook_id: None,
                body: &good,
            },
            405,
        ),
        (
            "no signature",
            Inbound {
                method: "POST",
                signature: None,
                webhook_id: None,
                body: &good,
            },
            401,
        ),
        (
            "another body's signature",
            Inbound {
                method: "POST",
                signature: Some(&forged),
                webhook_id: None,
                body: &good,
            },
            401,
        ),
        (
            "too large",
            Inbound {
                method: "POST",
                signature: Some(&signature),
                webhook_id: None,
                body: &big,
            },
            413,
        ),
        (
            "X-Webhook-Id differs",
            Inbound {
                method: "POST",
                signature: Some(&signature),
                webhook_id: Some("evt_9"),
                body: &good,
            },
            400,
        ),
        (
            "a sandbox body under a live secret",
            Inbound {
                method: "POST",
                signature: Some(&sandbox_signature),
                webhook_id: None,
                body: &sandbox,
            },
            403,
        ),
    ];
    for (name, req, status) in cases {
        let rig = rig();
        let error = rig.ingest.handle(&req, NOW_MS).await.unwrap_err();
        assert_eq!(error.status(), status, "{name}: {error}");
        assert_eq!(rig.ledger.calls(), 0, "{name}: no write");
        assert!(rig.queue.sent().is_empty(), "{name}");
    }
}

#[test]
fn port_failures_answer_5xx_by_kind() {
    use crate::ingest::PortError;
    for (kind, status) in [
        (PortErrorKind::Unavailable, 503),
        (PortErrorKind::Throttled, 503),
        (PortErrorKind::Conflict, 503),
        (PortErrorKind::Misconfigured, 500),
    ] {
        let error = IngestError::Unavailable(PortError::of_kind("DynamoDB PutItem", kind, "x"));
        assert_eq!(error.status(), status, "{kind}");
        assert_eq!(error.code(), kind.as_str());
    }
}

#[tokio::test]
async fn one_event_id_from_two_environments_is_refused_never_acknowledged_unapplied() {
    const TEST: &str = "whsec_test_0123456789abcdef";
    let verifier = Verifier::new(
        vec![
            SigningKey::new("live", &WebhookSecret::new(LIVE)),
            SigningKey::new("test", &WebhookSecret::new(TEST)),
        ],
        300,
    );
    let ledger = Arc::new(MemoryLedger::new());
    let queue = Arc::new(MemoryQueue::new());
    let ingest = Ingest::new(
        verifier,
        Arc::clone(&ledger),
        Arc::clone(&queue),
        IngestSettings::default(),
    );
    let post = |body: Vec<u8>, secret: &'static str| {
        let ingest = &ingest;
        async move {
            let signature = signature_header(NOW_MS / 1000, &body, &[&WebhookSecret::new(secret)]);
            let req = Inbound {
                method: "POST",
                signature: Some(&signature),
                webhook_id: None,
                body: &body,
            };
            ingest.handle(&req, NOW_MS).await.map(|r| r.ingested)
        }
    };
    // A sandbox delivery takes the id first; the genuine live one with the same id arrives.
    let sandbox = body("evt_x", r#","is_test":true"#);
    let live = body("evt_x", r#","is_test":false"#);
    assert_eq!(post(sandbox.clone(), TEST).await, Ok(Ingested::New));
    ledger.mark_processed("evt_x");
    let refused = post(live, LIVE).await.unwrap_err();
    assert_eq!(
        (refused.status(), refused.code()),
        (409, "environment_conflict")
    );
    // Nothing was written for it, nothing sent: the sender keeps retrying, and it shows.
    assert_eq!(queue.sent().len(), 1);
    assert!(ledger.conflicts().is_empty());
    // The sandbox delivery's own retry is still a plain duplicate.
    assert!(matches!(
        post(sandbox, TEST).await,
        Ok(Ingested::Duplicate { .. })
    ));
}
