//! The money path at its edges, end to end (ingest → fauxqs → fulfil on DynamoDB Local): each
//! test asserts which fulfilments, balances and ledger outcomes exist afterwards.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use paymos_inbox_aws::dynamodb::{DynamoLedger, DynamoResources, order_paid_key};
use paymos_inbox_aws::sqs::SqsQueue;
use paymos_inbox_core::money::change::OrderRef;
use paymos_inbox_core::money::effect::fulfilment_key;
use paymos_inbox_core::roads::fulfil::Fulfil;
use paymos_inbox_core::roads::ingest::{DeliveryLedger, Ingest, IngestSettings};
use paymos_inbox_core::roads::sweep::resend_stranded;
use paymos_inbox_core::wire::signature::{Environment, SigningKey, Verifier, WebhookSecret};
use paymos_inbox_lambda::fulfil::QueueVisibility;
use paymos_inbox_lambda::ingest::{respond, respond_with_keys};
use paymos_inbox_local::poller::poll_once;
use serde_json::json;

use paymos_inbox_testkit::*;

type Item = HashMap<String, AttributeValue>;

/// A live stack holding both the live and the sandbox secret (one URL in both dashboards).
struct Pipeline {
    aws: Aws,
    ledger_table: String,
    state_table: String,
    queue_url: String,
    dlq_url: String,
    ingest: Ingest<DynamoLedger, SqsQueue>,
    fulfil: Fulfil<DynamoResources>,
}

impl Pipeline {
    async fn new() -> Self {
        let aws = Aws::new();
        let stack = aws.stack().await;
        let ledger_table = stack.table("DeliveriesTable").to_owned();
        let state_table = stack.table("StateTable").to_owned();
        let queues = aws.queue_with(1, 3).await;
        let keys = vec![
            SigningKey::new("live", &WebhookSecret::new(LIVE_SECRET)),
            SigningKey::new("test", &WebhookSecret::new(TEST_SECRET)),
        ];
        let ingest = Ingest::new(
            Verifier::new(keys, 300),
            DynamoLedger::new(aws.dynamodb.clone(), &ledger_table, None),
            SqsQueue::new(aws.sqs.clone(), &queues.queue_url),
            IngestSettings::default(),
        );
        let fulfil = Fulfil::new(DynamoResources::new(
            aws.dynamodb.clone(),
            &state_table,
            &ledger_table,
        ))
        .for_projects(paymos_inbox_core::money::change::Projects::parse("prj_1"))
        .for_environment(Environment::Live);
        Self {
            aws,
            ledger_table,
            state_table,
            queue_url: queues.queue_url,
            dlq_url: queues.dlq_url,
            ingest,
            fulfil,
        }
    }

    /// POSTs `body` signed with `secret` and returns the status.
    async fn post(&self, body: &str, secret: &str) -> u16 {
        let event_id = paymos_inbox_core::wire::envelope::Envelope::parse(body.as_bytes())
            .map(|e| e.event_id)
            .unwrap_or_default();
        let sig = sign(body, NOW, &[secret]);
        respond(&self.ingest, &delivery(body, &event_id, &sig), NOW_MS)
            .await
            .status()
            .as_u16()
    }

    /// Polls until the queue is empty; returns how many messages were reported failed.
    async fn drain(&self) -> usize {
        let mut failed = 0;
        for _ in 0..20 {
            let polled = poll_once(
                (&self.aws.sqs, &self.queue_url, &QueueVisibility),
                &self.fulfil,
                10,
                0,
                || NOW_MS,
            )
            .await
            .expect("poll");
            failed += polled.failed;
            if polled.received == 0 {
                break;
            }
        }
        failed
    }

    async fn ledger(&self, event_id: &str) -> Item {
        self.aws
            .item(&self.ledger_table, "event_id", event_id)
            .await
            .expect("ledger item")
    }

    async fn state(&self, pk: &str) -> Option<Item> {
        self.aws.item(&self.state_table, "pk", pk).await
    }

    async fn fulfilments(&self) -> Vec<Item> {
        self.aws
            .scan(&self.state_table)
            .await
            .into_iter()
            .filter(|i| get_s(i, "kind") == "fulfilment")
            .collect()
    }
}

fn paid(event_id: &str, invoice_id: &str, order_id: &str, data_extra: serde_json::Value) -> String {
    let mut data = json!({"invoice_id": invoice_id, "status": "paid",
        "order": {"external_id": order_id, "amount": "10.50", "currency": "USD"}});
    if let (Some(d), Some(extra)) = (data.as_object_mut(), data_extra.as_object()) {
        d.extend(extra.clone());
    }
    envelope(event_id, "invoice.paid", data)
}

#[tokio::test]
async fn a_sandbox_secret_never_fulfils_a_live_order() {
    let p = Pipeline::new().await;
    // No is_test at all: the claim is absent, the secret decides.
    let body = paid("evt_sbx", "inv_sbx", "order-sbx", json!({}));
    assert_eq!(
        p.post(&body, TEST_SECRET).await,
        200,
        "recorded and acknowledged"
    );
    assert_eq!(p.drain().await, 0, "nothing goes to the DLQ");

    let record = p.ledger("test#evt_sbx").await; // a sandbox delivery's key
    assert_eq!(get_s(&record, "environment"), "test");
    assert_eq!(get_s(&record, "state"), "processed");
    assert_eq!(get_s(&record, "outcome"), "other_environment");
    assert!(p.fulfilments().await.is_empty(), "no fulfilment");
    assert!(p.state("inv_sbx").await.is_none(), "no invoice state");
    assert!(p.state(&order_paid_key(None, "order-sbx")).await.is_none());

    // The same payment signed by the live secret is fulfilled as usual.
    let live_body = paid(
        "evt_live",
        "inv_sbx",
        "order-sbx",
        json!({"is_test": false}),
    );
    assert_eq!(p.post(&live_body, LIVE_SECRET).await, 200);
    p.drain().await;
    assert_eq!(get_s(&p.ledger("evt_live").await, "outcome"), "fulfilled");
    assert_eq!(p.fulfilments().await.len(), 1);
    // A present, contradicting is_test is still refused outright.
    let lying = paid("evt_lie", "inv_lie", "order-lie", json!({"is_test": false}));
    assert_eq!(p.post(&lying, TEST_SECRET).await, 403);
}

#[tokio::test]
async fn bodies_a_strict_json_decoder_refuses_are_applied_not_lost() {
    let p = Pipeline::new().await;
    // Built by hand: serde_json cannot produce these, Paymos (or a UTF-16 truncation) can.
    let surrogate = r#"{"event_id":"evt_sur","event_type":"invoice.paid","version":1,"occurred_at":1759999995,"data":{"invoice_id":"inv_sur","note":"cut \ud83d","order":{"external_id":"order-sur","amount":"10.50","currency":"USD"}}}"#;
    let huge = r#"{"event_id":"evt_huge","event_type":"invoice.paid","version":1,"occurred_at":1759999995,"data":{"invoice_id":"inv_huge","fee":1e400,"order":{"external_id":"order-huge","amount":"10.50","currency":"USD"}}}"#;
    for body in [surrogate, huge] {
        assert_eq!(p.post(body, LIVE_SECRET).await, 200);
    }
    assert_eq!(p.drain().await, 0, "no message failed");
    for (event, invoice) in [("evt_sur", "inv_sur"), ("evt_huge", "inv_huge")] {
        assert_eq!(get_s(&p.ledger(event).await, "outcome"), "fulfilled");
        assert!(
            p.state(&fulfilment_key(invoice)).await.is_some(),
            "{invoice}"
        );
    }
    assert!(p.aws.drain(&p.dlq_url).await.is_empty());
}

#[tokio::test]
async fn a_body_with_characters_sqs_refuses_is_queued_and_applied() {
    let p = Pipeline::new().await;
    for (i, ch) in ["\u{ffff}", "\u{fffe}", "\u{1}", "\u{d7ff}\u{e000}"]
        .iter()
        .enumerate()
    {
        let body = paid(
            &format!("evt_ch{i}"),
            &format!("inv_ch{i}"),
            &format!("order-ch{i}"),
            json!({"memo": format!("x{ch}y")}),
        );
        assert_eq!(p.post(&body, LIVE_SECRET).await, 200, "{ch:?}");
    }
    assert_eq!(p.drain().await, 0);
    assert_eq!(p.fulfilments().await.len(), 4);
    for i in 0..4 {
        assert_eq!(
            get_s(&p.ledger(&format!("evt_ch{i}")).await, "state"),
            "processed"
        );
    }
}

#[tokio::test]
async fn a_final_deposit_missing_what_it_credits_waits_for_paymos_word_and_never_reaches_the_dlq() {
    let p = Pipeline::new().await;
    let body = envelope(
        "evt_nonet",
        "payment_channel.deposit.confirmed",
        json!({"id": "pcd_nonet", "is_final": true, "payment_channel_external_id": "payer-1", "currency": "USDT", "net": 12.5}),
    );
    assert_eq!(p.post(&body, LIVE_SECRET).await, 200);
    assert_eq!(p.drain().await, 0, "not retried");
    // Its net is no decimal string: it credits nothing on its own word, and waits, listed,
    // for Paymos' (issue 49: `recheck` credits Paymos' deposit once configured).
    let record = p.ledger("evt_nonet").await;
    assert_eq!(get_s(&record, "outcome"), "unconfirmed");
    let why = get_s(&record, "outcome_reason");
    assert!(
        why.contains("data.net") && why.contains("recheck"),
        "{record:?}"
    );
    assert!(p.state("pcd_nonet").await.is_none(), "nothing credited");
    assert!(p.aws.drain(&p.dlq_url).await.is_empty());
}

#[tokio::test]
async fn data_less_events_are_recorded_and_acknowledged() {
    let p = Pipeline::new().await;
    let body = json!({"event_id": "evt_ping", "event_type": "webhook.ping", "version": 1, "occurred_at": NOW - 5}).to_string();
    assert_eq!(p.post(&body, LIVE_SECRET).await, 200);
    p.drain().await;
    assert_eq!(get_s(&p.ledger("evt_ping").await, "outcome"), "ignored");
}

#[tokio::test]
async fn a_refund_without_type_is_stored_as_a_refund() {
    let p = Pipeline::new().await;
    let body = envelope(
        "evt_rf",
        "withdrawal.completed",
        json!({"withdrawal_id": "wdr_rf", "invoice_id": "inv_rf", "mode": "full", "amount": "10.50", "currency": "USDT"}),
    );
    assert_eq!(p.post(&body, LIVE_SECRET).await, 200);
    p.drain().await;
    let withdrawal = p.state("wdr_rf").await.expect("withdrawal");
    assert_eq!(get_s(&withdrawal, "type"), "refund");
    assert_eq!(get_s(&withdrawal, "invoice_id"), "inv_rf");
}

#[tokio::test]
async fn two_paid_invoices_for_one_order_fulfil_it_once() {
    let p = Pipeline::new().await;
    let first = paid("evt_o1", "inv_o1", "order-twice", json!({}));
    let second = paid("evt_o2", "inv_o2", "order-twice", json!({}));
    assert_eq!(p.post(&first, LIVE_SECRET).await, 200);
    p.drain().await;
    assert_eq!(p.post(&second, LIVE_SECRET).await, 200);
    p.drain().await;

    let fulfilments = p.fulfilments().await;
    assert_eq!(fulfilments.len(), 1, "{fulfilments:?}");
    assert_eq!(get_s(&fulfilments[0], "invoice_id"), "inv_o1");
    assert_eq!(
        get_s(&p.ledger("evt_o2").await, "outcome"),
        "duplicate_payment"
    );
    let second_invoice = p.state("inv_o2").await.expect("invoice kept for a refund");
    assert_eq!(get_s(&second_invoice, "status"), "paid");
    assert_eq!(get_s(&second_invoice, "duplicate_of"), "inv_o1");
    let claim = p.state(&order_paid_key(None, "order-twice")).await.unwrap();
    assert_eq!(get_s(&claim, "invoice_id"), "inv_o1");

    // Support marking a third invoice of the order paid does not ship it again either.
    let order = OrderRef {
        external_id: Some("order-twice".into()),
        amount: None,
        currency: None,
        project: None,
        home: false,
        unlisted: false,
    };
    let by_hand = p
        .fulfil
        .mark_paid("inv_o3", order, "support:alice", NOW_MS)
        .await
        .unwrap();
    assert_eq!(by_hand.as_str(), "duplicate_payment");
    assert_eq!(p.fulfilments().await.len(), 1);
}

#[tokio::test]
async fn a_delivery_whose_sender_gave_up_is_applied_by_the_sweep() {
    let p = Pipeline::new().await;
    // The attempt recorded it and died before sending; Paymos never retries.
    let body = paid("evt_gone", "inv_gone", "order-gone", json!({}));
    let request = delivery(&body, "evt_gone", &sign(&body, NOW, &[LIVE_SECRET]));
    let inbound_body = body.as_bytes();
    let admitted = p
        .ingest
        .admit(
            &paymos_inbox_core::roads::ingest::Inbound {
                method: "POST",
                signature: request
                    .headers()
                    .get("x-webhook-signature")
                    .and_then(|v| v.to_str().ok()),
                webhook_id: Some("evt_gone"),
                body: inbound_body,
            },
            NOW_MS,
        )
        .expect("admitted");
    p.ingest
        .ledger()
        .record(&admitted, NOW_MS + 30_000)
        .await
        .unwrap();
    assert_eq!(p.drain().await, 0);
    assert!(p.fulfilments().await.is_empty(), "nothing was sent");

    let queue = SqsQueue::new(p.aws.sqs.clone(), &p.queue_url);
    // Too young: its lease ran out but a retry may still come; the sweep leaves it.
    let early = resend_stranded(
        p.ingest.ledger(),
        &queue,
        30,
        NOW_MS - 1,
        NOW_MS + 60_000,
        100,
    )
    .await
    .unwrap();
    assert_eq!(early.resent, 0);
    // Eleven minutes later the sweep sends it again, once.
    let later = NOW_MS + 11 * 60_000;
    let swept = resend_stranded(p.ingest.ledger(), &queue, 30, later - 600_000, later, 100)
        .await
        .unwrap();
    assert_eq!((swept.found, swept.resent), (1, 1));
    assert_eq!(p.drain().await, 0);
    assert_eq!(p.fulfilments().await.len(), 1);
    assert_eq!(get_s(&p.ledger("evt_gone").await, "outcome"), "fulfilled");
    let again = resend_stranded(p.ingest.ledger(), &queue, 30, later, later + 60_000, 100)
        .await
        .unwrap();
    assert_eq!(again.found, 0, "processed records are never swept");
}

#[tokio::test]
async fn a_rotation_reaches_a_warm_instance_and_forgeries_cost_one_read_a_minute() {
    let p = Pipeline::new().await;
    const ROTATED: &str = "whsec_live_paymos_inbox_rotated";
    let source = paymos_inbox_core::testkit::memory::MemoryKeys::new(vec![SigningKey::new(
        "live",
        &WebhookSecret::new(LIVE_SECRET),
    )]);
    let post = |body: String, secret: &'static str, now_ms: u64| {
        let sig = sign(&body, now_ms / 1000, &[secret]);
        let event_id = paymos_inbox_core::wire::envelope::Envelope::parse(body.as_bytes())
            .unwrap()
            .event_id;
        let request = delivery(&body, &event_id, &sig);
        let (ingest, source) = (&p.ingest, &source);
        async move {
            respond_with_keys(ingest, &request, now_ms, source)
                .await
                .status()
                .as_u16()
        }
    };
    // The warm instance started before the rotation; Paymos now signs with the new secret only.
    source.rotate(vec![SigningKey::new("live", &WebhookSecret::new(ROTATED))]);
    let body = paid("evt_rot", "inv_rot", "order-rot", json!({}));
    assert_eq!(
        post(body, ROTATED, NOW_MS).await,
        200,
        "re-read once, then verified"
    );
    assert_eq!(source.reads(), 1);
    p.drain().await;
    assert_eq!(get_s(&p.ledger("evt_rot").await, "outcome"), "fulfilled");

    // Forgeries: 401 each, and at most one read of the secrets per minute.
    for i in 0..5 {
        let forged = paid(&format!("evt_forged{i}"), "inv_f", "order-f", json!({}));
        assert_eq!(
            post(forged, "whsec_live_attacker", NOW_MS + 1_000).await,
            401
        );
    }
    assert_eq!(source.reads(), 1, "throttled");
    let forged = paid("evt_forged_later", "inv_f", "order-f", json!({}));
    assert_eq!(
        post(forged, "whsec_live_attacker", NOW_MS + 61_000).await,
        401
    );
    assert_eq!(source.reads(), 2);
    assert!(p.state("inv_f").await.is_none());
}
