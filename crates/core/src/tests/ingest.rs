//! Ingest: what each attempt answers and writes, with leases and take-overs.

use std::sync::Arc;

use crate::change::Applied;
use crate::fulfil::Fulfil;
use crate::ingest::{
    Delivery, DeliveryState, Inbound, Ingest, IngestError, IngestSettings, Ingested, PortErrorKind,
    Receipt, delivery_key,
};
use crate::memory::{MemoryLedger, MemoryQueue, MemoryResources};
use crate::signature::{Environment, SigningKey, Verifier, WebhookSecret, signature_header};
use crate::work::WorkItem;

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
async fn a_sandbox_delivery_reusing_a_live_id_never_blocks_the_live_one() {
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
    let fulfil = Fulfil::new(MemoryResources::new());
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
    let apply = |delivery: &Delivery| {
        let item = WorkItem {
            event_id: delivery.event_id.clone(),
            environment: delivery.environment,
            body: delivery.body.clone(),
            received_at_ms: Some(delivery.received_at_ms),
        };
        let fulfil = &fulfil;
        async move {
            fulfil
                .apply(&item, NOW_MS)
                .await
                .map(|(_, applied)| applied)
        }
    };
    let order = r#","order":{"external_id":"o-1","amount":"10.50","currency":"USD"}"#;
    // A sandbox delivery takes the id first and is processed (it changes nothing live).
    let sandbox = body("evt_x", &format!(r#","is_test":true{order}"#));
    let live = body("evt_x", &format!(r#","is_test":false{order}"#));
    let sandbox_key = delivery_key(Some(Environment::Test), "evt_x");
    assert_eq!(post(sandbox.clone(), TEST).await, Ok(Ingested::New));
    assert_eq!(apply(&queue.sent()[0]).await, Ok(Applied::OtherEnvironment));
    // The genuine live delivery of the same id: recorded under its own key, sent, applied.
    let receipt = post_receipt(&ingest, &live, LIVE).await.unwrap();
    assert_eq!(receipt.ingested, Ingested::New);
    assert!(receipt.cross_environment, "the reuse of the id is counted");
    let record = ledger
        .get("evt_x")
        .expect("the live delivery keeps the plain key");
    assert_eq!(record.delivery.environment, Some(Environment::Live));
    let record = ledger
        .get(&sandbox_key)
        .expect("the sandbox one has its own");
    assert_eq!(record.delivery.environment, Some(Environment::Test));
    assert_eq!(queue.sent().len(), 2);
    assert_eq!(apply(&queue.sent()[1]).await, Ok(Applied::Fulfilled));
    assert_eq!(fulfil.store().fulfilled(), ["inv_1"]);
    // Each one's retry is a duplicate of its own record, nothing more.
    ledger.mark_processed("evt_x");
    ledger.mark_processed(&sandbox_key);
    assert!(matches!(
        post(live, LIVE).await,
        Ok(Ingested::Duplicate { resent: false, .. })
    ));
    assert!(matches!(
        post(sandbox, TEST).await,
        Ok(Ingested::Duplicate { resent: false, .. })
    ));
    assert_eq!(queue.sent().len(), 2);
    assert!(ledger.conflicts().is_empty());
}

#[tokio::test]
async fn the_reuse_of_an_id_is_counted_in_either_order_and_looked_for_only_when_possible() {
    const TEST: &str = "whsec_test_0123456789abcdef";
    let both = Verifier::new(
        vec![
            SigningKey::new("live", &WebhookSecret::new(LIVE)),
            SigningKey::new("test", &WebhookSecret::new(TEST)),
        ],
        300,
    );
    let ledger = Arc::new(MemoryLedger::new());
    let queue = Arc::new(MemoryQueue::new());
    let ingest = Ingest::new(
        both,
        Arc::clone(&ledger),
        Arc::clone(&queue),
        IngestSettings::default(),
    );
    // Live first, then a sandbox delivery with its id: both recorded, the second counted.
    let live = body("evt_y", r#","is_test":false"#);
    let sandbox = body("evt_y", r#","is_test":true"#);
    let first = post_receipt(&ingest, &live, LIVE).await.unwrap();
    assert_eq!(
        (first.ingested, first.cross_environment),
        (Ingested::New, false)
    );
    let second = post_receipt(&ingest, &sandbox, TEST).await.unwrap();
    assert_eq!(
        (second.ingested, second.cross_environment),
        (Ingested::New, true)
    );
    assert_eq!((ledger.len(), queue.sent().len()), (2, 2));

    // A stack holding only live secrets can record no sandbox delivery: it never looks.
    let rig = rig();
    let receipt = post_receipt(&rig.ingest, &live, LIVE).await.unwrap();
    assert!(!receipt.cross_environment);
    assert_eq!(rig.ledger.calls(), 1, "the one conditional write, no read");
}

/// Posts `body` signed with `secret` at [`NOW_MS`]; the whole receipt.
async fn post_receipt<L: crate::ingest::DeliveryLedger, Q: crate::ingest::WorkQueue>(
    ingest: &Ingest<L, Q>,
    body: &[u8],
    secret: &str,
) -> Result<Receipt, IngestError> {
    let signature = signature_header(NOW_MS / 1000, body, &[&WebhookSecret::new(secret)]);
    let req = Inbound {
        method: "POST",
        signature: Some(&signature),
        webhook_id: None,
        body,
    };
    ingest.handle(&req, NOW_MS).await
}
