//! The ledger is the merchant's archive: bodies come back byte-exact, and a typical 1.5 KiB
//! invoice event is stored in one 1 KB write unit.

use paymos_inbox_aws::dynamodb::{DynamoLedger, LedgerSchema, item_size};
use paymos_inbox_core::roads::ingest::{Inbound, Ingest, IngestSettings};
use paymos_inbox_core::testkit::memory::MemoryQueue;
use paymos_inbox_core::wire::signature::{SigningKey, Verifier, WebhookSecret};
use paymos_inbox_lambda::ingest::respond;

use paymos_inbox_testkit::*;

fn typical_invoice_paid() -> String {
    // What a real invoice.paid carries: order, payment, transfers, addresses, timestamps.
    let transfers: Vec<_> = (0..5).map(|i| serde_json::json!({"tx_hash": format!("{:064x}", 0xabcdef_u64 * (i + 1)), "amount": "8.333333", "status": "confirmed", "created_at": NOW - 60 + i})).collect();
    envelope(
        "evt_typical_invoice_paid_0001",
        "invoice.paid",
        serde_json::json!({
            "invoice_id": "inv_01JD6Z3Q9V8X7W6T5S4R3P2N1M", "project_id": "prj_01JD6Z3Q9V8X7W6T5S4R3P2N1M", "status": "paid",
            "is_final": true, "is_test": false, "payment_url": "https://pay.paymos.io/i/inv_01JD6Z3Q9V8X7W6T5S4R3P2N1M",
            "order": {"external_id": "order-2025-11-30-000123", "client_id": "customer-000042", "amount": "25.00", "currency": "USDT", "network": "TRC20"},
            "payment": {"network": "TRC20", "currency": "USDT", "address": "TXk2nbbuuNdtrXZbH3HbA9bNPpbBz4vDmD", "contract_address": "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t", "expected": "25.00", "received": "25.00", "transfers": transfers},
            "created_at": NOW - 900, "updated_at": NOW, "expires_at": NOW + 2700, "completed_at": NOW
        }),
    )
}

#[test]
fn a_typical_invoice_event_fits_one_write_unit_and_sizes_are_reported_per_event_type() {
    let ledger = DynamoLedger::new(Aws::new().dynamodb.clone(), "t", None);
    let ingest = Ingest::new(
        Verifier::new(
            vec![
                SigningKey::new("test", &WebhookSecret::new(TEST_SECRET)),
                SigningKey::new("live", &WebhookSecret::new(LIVE_SECRET)),
            ],
            300,
        ),
        paymos_inbox_core::testkit::memory::MemoryLedger::new(),
        MemoryQueue::new(),
        IngestSettings::default(),
    );
    let mut rows = Vec::new();
    let typical = typical_invoice_paid();
    assert!(
        (1400..1700).contains(&typical.len()),
        "the typical event is about 1.5 KiB: {}",
        typical.len()
    );
    let mut bodies: Vec<(String, String)> = vec![("typical invoice.paid".into(), typical.clone())];
    for entry in std::fs::read_dir(format!(
        "{}/events",
        concat!(env!("CARGO_MANIFEST_DIR"), "/../..")
    ))
    .unwrap()
    {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if !name.starts_with("ingest-")
            || name.contains("bad")
            || name.contains("stale")
            || name.contains("mismatch")
        {
            continue;
        }
        let event: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(format!(
                "{}/events/{name}",
                concat!(env!("CARGO_MANIFEST_DIR"), "/../..")
            ))
            .unwrap(),
        )
        .unwrap();
        let raw = event["body"].as_str().unwrap();
        let body = if event["isBase64Encoded"] == true {
            String::from_utf8(
                base64::Engine::decode(&base64::engine::general_purpose::STANDARD, raw).unwrap(),
            )
            .unwrap()
        } else {
            raw.to_owned()
        };
        bodies.push((name, body));
    }
    for (name, body) in &bodies {
        let key = if body.contains("\"is_test\":true") {
            TEST_SECRET
        } else {
            LIVE_SECRET
        };
        let sig = sign(body, NOW, &[key]);
        let delivery = ingest
            .admit(
                &Inbound {
                    method: "POST",
                    signature: Some(&sig),
                    webhook_id: None,
                    body: body.as_bytes(),
                },
                NOW_MS,
            )
            .unwrap();
        let record = item_size(&ledger.new_item(&delivery, NOW_MS));
        let kept = item_size(&ledger.new_body_item(&delivery));
        rows.push(format!(
            "{name:<40} body {:>5} B  record {:>5} B  body item {:>5} B  {} WRU",
            body.len(),
            record,
            kept,
            record.div_ceil(1024) + kept.div_ceil(1024)
        ));
        if name.starts_with("typical") {
            assert!(
                record <= 1024 && kept <= 1024,
                "the typical invoice event costs one write unit per item: {record} and {kept} bytes"
            );
        }
    }
    println!("ledger item sizes:\n{}", rows.join("\n"));
}

#[tokio::test]
async fn a_compressed_body_comes_back_byte_exact_through_dynamodb() {
    let aws = Aws::new();
    let table = aws.deliveries_table().await;
    let ingest = Ingest::new(
        Verifier::new(
            vec![SigningKey::new("live", &WebhookSecret::new(LIVE_SECRET))],
            300,
        ),
        DynamoLedger::new(aws.dynamodb.clone(), &table, None),
        MemoryQueue::new(),
        IngestSettings::default(),
    );
    let body = typical_invoice_paid();
    let r = respond(
        &ingest,
        &delivery(
            &body,
            "evt_typical_invoice_paid_0001",
            &sign(&body, NOW, &[LIVE_SECRET]),
        ),
        NOW_MS,
    )
    .await;
    assert_eq!(r.status(), 200);
    let item = aws
        .item(&table, "event_id", "evt_typical_invoice_paid_0001")
        .await
        .unwrap();
    let sha256 = paymos_inbox_core::roads::ingest::sha256_hex(body.as_bytes());
    assert_eq!(get_s(&item, "body_sha256"), sha256);
    // The body is kept apart, as an item of its own (see the ledger's table doc).
    let kept = aws
        .item(
            &table,
            "event_id",
            &LedgerSchema::body_key("evt_typical_invoice_paid_0001", &sha256),
        )
        .await
        .unwrap();
    assert_eq!(get_s(&kept, "body_encoding"), "deflate");
    assert!(kept["body"].as_b().unwrap().as_ref().len() < body.len() / 2);
    assert_eq!(stored_body(&kept), body.as_bytes(), "restored byte-exact");
    assert_eq!(aws.body_of(&table, &item).await, body.as_bytes());
}
