//! The merchant's tools against the emulators: `dev` + `send` + `check` (and `check` against
//! receivers that are broken on purpose), `pending`, `mark-paid`, `redrive`.

use std::convert::Infallible;
use std::process::Command;
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use paymos_inbox::domain::signature::{SigningKey, WebhookSecret};
use paymos_inbox::local::dev::{DevOptions, start};
use paymos_inbox::tools::check::{self, CheckOptions, Tables};

use crate::harness::*;

fn check_options(url: &str, timeout: Duration) -> CheckOptions {
    CheckOptions {
        url: url.to_owned(),
        secret: WebhookSecret::new(TEST_SECRET),
        wrong_secret: WebhookSecret::new("whsec_test_wrong"),
        live: false,
        collisions: 4,
        patience: Duration::from_secs(20),
        timeout,
    }
}

async fn dev(slow: Option<Duration>) -> paymos_inbox::local::dev::Dev {
    let (dynamodb, sqs) = endpoint_urls();
    start(DevOptions {
        dynamodb_endpoint: Some(dynamodb),
        sqs_endpoint: Some(sqs),
        port: 0,
        keys: vec![SigningKey::new("test", &WebhookSecret::new(TEST_SECRET))],
        tolerance_secs: 300,
        slow,
        prefix: unique("dev"),
        environment: paymos_inbox::domain::signature::Environment::Test,
    })
    .await
    .expect("dev starts")
}

fn tables_of(d: &paymos_inbox::local::dev::Dev) -> Tables {
    Tables {
        dynamodb: d.dynamodb.clone(),
        deliveries: d.info.tables["DeliveriesTable"].clone(),
        state: d.info.tables["StateTable"].clone(),
    }
}

#[tokio::test]
async fn check_against_dev_passes_all_five_steps_even_when_replies_are_late() {
    // The first attempt of each event is answered after 1.5 s; the sender gives up after 1 s
    // (Paymos' 10 s, scaled), so its retries collide with recorded, in-flight deliveries.
    let dev = dev(Some(Duration::from_millis(1500))).await;
    let steps = check::run(
        check_options(&dev.info.ingest_url, Duration::from_secs(1)),
        Some(tables_of(&dev)),
    )
    .await;
    for s in &steps {
        assert_eq!(
            s.verdict, "pass",
            "step {} {}: {:#?}",
            s.number, s.name, s.evidence
        );
    }
    assert!(
        steps[0].evidence.iter().any(|e| e.contains("no answer")),
        "the first attempt really timed out: {:#?}",
        steps[0].evidence
    );
}

/// A receiver on loopback that answers every request with `answer`, after `act` ran.
async fn fake_receiver<F, Fut>(act: F) -> String
where
    F: Fn(Bytes) -> Fut + Send + Sync + Clone + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let act = act.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(
                    move |req: hyper::Request<hyper::body::Incoming>| {
                        let act = act.clone();
                        async move {
                            let body = req
                                .into_body()
                                .collect()
                                .await
                                .map(|c| c.to_bytes())
                                .unwrap_or_default();
                            act(body).await;
                            Ok::<_, Infallible>(hyper::Response::new(Full::new(
                                Bytes::from_static(b"{\"ok\":true}"),
                            )))
                        }
                    },
                );
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    url
}

#[tokio::test]
async fn check_fails_step_one_for_a_receiver_that_answers_before_recording() {
    let aws = Aws::new();
    let stack = aws.stack().await;
    let url = fake_receiver(|_| async {}).await;
    let tables = Tables {
        dynamodb: aws.dynamodb.clone(),
        deliveries: stack.table("DeliveriesTable").into(),
        state: stack.table("StateTable").into(),
    };
    let mut options = check_options(&url, Duration::from_secs(1));
    options.patience = Duration::from_secs(2);
    let steps = check::run(options, Some(tables)).await;
    assert_eq!(steps[0].verdict, "fail");
    assert!(
        steps[0].evidence.iter().any(|e| e.contains("MISSING")),
        "{:#?}",
        steps[0].evidence
    );
    assert_eq!(
        steps[4].verdict, "fail",
        "reconciliation finds the acknowledged deliveries missing"
    );
}

#[tokio::test]
async fn check_fails_step_two_for_a_receiver_that_fulfils_every_delivery() {
    let aws = Aws::new();
    let stack = aws.stack().await;
    let (deliveries, state) = (
        stack.table("DeliveriesTable").to_owned(),
        stack.table("StateTable").to_owned(),
    );
    let client = aws.dynamodb.clone();
    // Records each event and writes a fulfilment per delivery: deduplicated by nothing.
    let url = fake_receiver(move |body| {
        let (client, deliveries, state) = (client.clone(), deliveries.clone(), state.clone());
        async move {
            let event: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
            let (Some(id), Some(invoice)) = (
                event["event_id"].as_str(),
                event["data"]["invoice_id"].as_str(),
            ) else {
                return;
            };
            let s = |v: &str| AttributeValue::S(v.to_owned());
            client
                .put_item()
                .table_name(&deliveries)
                .item("event_id", s(id))
                .item("state", s("processed"))
                .item("outcome", s("fulfilled"))
                .send()
                .await
                .unwrap();
            let key = format!(
                "fulfilment#{invoice}#{}",
                paymos_inbox::tools::send::new_event_id()
            );
            client
                .put_item()
                .table_name(&state)
                .item("pk", s(&key))
                .item("kind", s("fulfilment"))
                .item("invoice_id", s(invoice))
                .send()
                .await
                .unwrap();
        }
    })
    .await;
    let tables = Tables {
        dynamodb: aws.dynamodb.clone(),
        deliveries: stack.table("DeliveriesTable").into(),
        state: stack.table("StateTable").into(),
    };
    let steps = check::run(check_options(&url, Duration::from_secs(1)), Some(tables)).await;
    assert_eq!(steps[0].verdict, "pass", "{:#?}", steps[0].evidence);
    assert_eq!(steps[1].verdict, "fail", "{:#?}", steps[1].evidence);
    assert!(
        steps[1]
            .evidence
            .iter()
            .any(|e| e.contains("2 fulfilments")),
        "{:#?}",
        steps[1].evidence
    );
}

fn cli(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_paymos-inbox"))
        .args(args)
        .env_remove("PAYMOS_WEBHOOK_SECRET")
        .env_remove("AWS_ENDPOINT_URL_DYNAMODB")
        .env_remove("AWS_ENDPOINT_URL_SQS")
        .output()
        .expect("run paymos-inbox");
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[tokio::test]
async fn send_pending_mark_paid_and_redrive_work_from_the_command_line() {
    let dev = dev(None).await;
    let info = std::env::temp_dir().join(format!("{}.json", unique("dev-info")));
    std::fs::write(&info, serde_json::to_string(&dev.info).unwrap()).unwrap();
    let info = info.to_str().unwrap().to_owned();
    let url = dev.info.ingest_url.clone();

    // send: one payment through two endpoints, with a rotation header.
    let (ok, out) = tokio::task::spawn_blocking({
        let url = url.clone();
        move || {
            cli(&[
                "send",
                "--url",
                &url,
                "--type",
                "invoice.paid",
                "--resource",
                "inv_cli",
                "--endpoints",
                "2",
                "--secret",
                &format!("whsec_test_old,{TEST_SECRET}"),
            ])
        }
    })
    .await
    .unwrap();
    assert!(ok, "{out}");
    assert_eq!(out.matches("\"status\":\"new\"").count(), 2, "{out}");
    let tables = tables_of(&dev);
    let fulfilled = async {
        for _ in 0..50 {
            let n = aws_state_fulfilments(&tables, "inv_cli").await;
            if n > 0 {
                return n;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        0
    };
    assert_eq!(fulfilled.await, 1, "two endpoints, one fulfilment");

    // mark-paid on an invoice that is already paid: already final.
    let info1 = info.clone();
    let (ok, out) = tokio::task::spawn_blocking(move || {
        cli(&[
            "mark-paid",
            "inv_cli",
            "--actor",
            "support:alice",
            "--dev-info",
            &info1,
        ])
    })
    .await
    .unwrap();
    assert!(ok && out.contains("already_final"), "{out}");
    // mark-paid on a new invoice: fulfilled by hand; a webhook for it afterwards fulfils nothing.
    let info2 = info.clone();
    let (ok, out) = tokio::task::spawn_blocking(move || {
        cli(&[
            "mark-paid",
            "inv_manual_cli",
            "--actor",
            "support:bob",
            "--amount",
            "25.00",
            "--currency",
            "usdt",
            "--dev-info",
            &info2,
        ])
    })
    .await
    .unwrap();
    assert!(ok && out.contains("fulfilled"), "{out}");

    // pending: a delivery recorded but whose work item never arrives (a crash after the put).
    let ledger = paymos_inbox::adapters::dynamodb::DynamoLedger::new(
        dev.dynamodb.clone(),
        &dev.info.tables["DeliveriesTable"],
        None,
    );
    let body = invoice_paid("evt_stuck", "inv_stuck");
    let ingest = paymos_inbox::domain::ingest::Ingest::new(
        paymos_inbox::domain::signature::Verifier::new(
            vec![SigningKey::new("live", &WebhookSecret::new(LIVE_SECRET))],
            300,
        ),
        ledger,
        paymos_inbox::adapters::memory::MemoryQueue::new(),
        paymos_inbox::domain::ingest::IngestSettings::default(),
    );
    let now = paymos_inbox::lambda::now_ms();
    let d = ingest
        .admit(
            &paymos_inbox::domain::ingest::Inbound {
                method: "POST",
                signature: Some(&sign(&body, now / 1000, &[LIVE_SECRET])),
                webhook_id: None,
                body: body.as_bytes(),
            },
            now,
        )
        .unwrap();
    use paymos_inbox::domain::ingest::DeliveryLedger as _;
    ingest.ledger().record(&d, now + 30_000).await.unwrap();
    let info3 = info.clone();
    let (ok, out) = tokio::task::spawn_blocking(move || cli(&["pending", "--dev-info", &info3]))
        .await
        .unwrap();
    assert!(ok, "{out}");
    assert!(
        out.contains("1 deliveries recorded but not processed")
            && out.contains("evt_stuck")
            && out.contains("in flight"),
        "{out}"
    );

    // redrive: a message in the DLQ goes back to the work queue and gets applied.
    let dlq = dev.info.queues["DeadLetterQueue"].clone();
    dev.sqs
        .send_message()
        .queue_url(&dlq)
        .message_body(
            work_item(
                &invoice_paid("evt_from_dlq", "inv_from_dlq"),
                paymos_inbox::domain::signature::Environment::Test,
            )
            .encode(),
        )
        .send()
        .await
        .unwrap();
    let info4 = info.clone();
    let (ok, out) = tokio::task::spawn_blocking(move || cli(&["redrive", "--dev-info", &info4]))
        .await
        .unwrap();
    assert!(ok && out.contains("moved 1 message"), "{out}");
    let mut applied = 0;
    for _ in 0..50 {
        applied = aws_state_fulfilments(&tables, "inv_from_dlq").await;
        if applied > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(applied, 1, "the redriven message was applied");
}

async fn aws_state_fulfilments(t: &Tables, invoice: &str) -> usize {
    t.dynamodb
        .get_item()
        .table_name(&t.state)
        .key(
            "pk",
            AttributeValue::S(paymos_inbox::domain::fulfil::fulfilment_key(invoice)),
        )
        .consistent_read(true)
        .send()
        .await
        .unwrap()
        .item
        .map_or(0, |_| 1)
}
