//! The merchant's tools against the emulators: `dev` + `send`, `pending`, `mark-paid`,
//! `redrive` (`check` has its own file, with its gallery of broken receivers).

use std::process::Command;
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use paymos_inbox::tools::check::Tables;
use paymos_inbox_core::wire::signature::{SigningKey, WebhookSecret};
use paymos_inbox_local::dev::{DevOptions, start};

use paymos_inbox_testkit::*;

pub(crate) async fn dev(slow: Option<Duration>) -> paymos_inbox_local::dev::Dev {
    // The project `send` and `check` name (`prj_local`): another project's events are
    // `other_project`, as on a stack with PaymosProjectIds.
    dev_of(slow, &["prj_local"]).await
}

/// `dev`'s info in a scratch folder, as `--dev-info` reads it: the folder (removed when
/// dropped) and the file's path.
pub(crate) fn info_file(
    dev: &paymos_inbox_local::dev::Dev,
    prefix: &str,
) -> (paymos_inbox_testkit::TempDir, String) {
    let folder = scratch(prefix);
    let info = folder.path().join("dev-info.json");
    std::fs::write(&info, serde_json::to_string(&dev.info).unwrap()).unwrap();
    let info = info.to_str().unwrap().to_owned();
    (folder, info)
}

/// A sandbox `dev` on the emulators, its tables and queues under a `prefix` of its own, with
/// its handlers, signing with the fixture secret, for every project; the tests change what
/// they need.
pub(crate) fn dev_options(prefix: &str) -> DevOptions {
    let (dynamodb, sqs) = endpoint_urls();
    DevOptions {
        dynamodb_endpoint: Some(dynamodb),
        sqs_endpoint: Some(sqs),
        port: 0,
        keys: vec![SigningKey::new("test", &WebhookSecret::new(TEST_SECRET))],
        tolerance_secs: 300,
        slow: None,
        prefix: unique(prefix),
        environment: paymos_inbox_core::wire::signature::Environment::Test,
        handlers: true,
        secrets_text: None,
        reconcile_with: None,
        forward_to: None,
        projects: paymos_inbox_core::money::change::Projects::all(),
    }
}

/// `dev` applying `projects`, the first its home project.
pub(crate) async fn dev_of(
    slow: Option<Duration>,
    projects: &[&str],
) -> paymos_inbox_local::dev::Dev {
    start(DevOptions {
        slow,
        projects: paymos_inbox_core::money::change::Projects::only(
            projects.iter().map(|p| (*p).to_owned()).collect(),
        ),
        ..dev_options("dev")
    })
    .await
    .expect("dev starts")
}

pub(crate) fn tables_of(d: &paymos_inbox_local::dev::Dev) -> Tables {
    Tables {
        dynamodb: d.dynamodb.clone(),
        deliveries: d.info.tables["DeliveriesTable"].clone(),
        state: d.info.tables["StateTable"].clone(),
        projects: paymos_inbox_core::money::change::Projects::only(d.info.projects.clone()),
    }
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
    let (_scratch_info, info) = info_file(&dev, "dev-info");
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
            "--order-id",
            "order-manual-cli",
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
    let ledger = paymos_inbox_aws::dynamodb::DynamoLedger::new(
        dev.dynamodb.clone(),
        &dev.info.tables["DeliveriesTable"],
        None,
    );
    let body = invoice_paid("evt_stuck", "inv_stuck");
    let ingest = paymos_inbox_core::roads::ingest::Ingest::new(
        paymos_inbox_core::wire::signature::Verifier::new(
            vec![SigningKey::new("live", &WebhookSecret::new(LIVE_SECRET))],
            300,
        ),
        ledger,
        paymos_inbox_core::testkit::memory::MemoryQueue::new(),
        paymos_inbox_core::roads::ingest::IngestSettings::default(),
    );
    let now = paymos_inbox_lambda::now_ms();
    let d = ingest
        .admit(
            &paymos_inbox_core::roads::ingest::Inbound {
                method: "POST",
                signature: Some(&sign(&body, now / 1000, &[LIVE_SECRET])),
                webhook_id: None,
                body: body.as_bytes(),
            },
            now,
        )
        .unwrap();
    use paymos_inbox_core::roads::ingest::DeliveryLedger as _;
    ingest.ledger().record(&d, now + 30_000).await.unwrap();
    let info3 = info.clone();
    let (ok, out) = tokio::task::spawn_blocking(move || cli(&["pending", "--dev-info", &info3]))
        .await
        .unwrap();
    assert!(ok, "{out}");
    assert!(
        out.contains("1 delivery recorded but not processed")
            && out.contains("evt_stuck")
            && out.contains("in flight"),
        "{out}"
    );

    // redrive: a message of a recorded delivery in the DLQ goes back to the work queue and
    // gets applied.
    let dlq = dev.info.queues["DeadLetterQueue"].clone();
    let parked = invoice_paid("evt_from_dlq", "inv_from_dlq");
    let test = paymos_inbox_core::wire::signature::Environment::Test;
    ingest
        .ledger()
        .record(&recorded_delivery(&parked, test, now), 0)
        .await
        .unwrap();
    dev.sqs
        .send_message()
        .queue_url(&dlq)
        .message_body(work_item(&parked, test).encode())
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

/// `args` run as the command line: its exit code and what it printed.
fn cli_code(args: Vec<String>) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_paymos-inbox"))
        .args(args)
        .env_remove("PAYMOS_WEBHOOK_SECRET")
        .env_remove("AWS_ENDPOINT_URL_DYNAMODB")
        .env_remove("AWS_ENDPOINT_URL_SQS")
        .output()
        .expect("run paymos-inbox");
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code(), said)
}

// Issue 49, defect 7: on a stack of two projects, `mark-paid --project prj_b` of an invoice
// whose events named the home project is refused (exit 2) and ships nothing; an invoice whose
// record names no project needs its project named. Before: `fulfilled`, B's order shipped.
#[tokio::test]
async fn mark_paid_naming_another_project_than_the_record_is_refused_with_exit_2() {
    let dev = dev_of(None, &["prj_local", "prj_b"]).await;
    let (_scratch_info, info) = info_file(&dev, "dev-info");
    let args = |a: &[&str]| -> Vec<String> { a.iter().map(|s| (*s).to_owned()).collect() };
    let sent = args(&[
        "send",
        "--type",
        "invoice.awaiting_payment",
        "--resource",
        "inv_home",
        "--wait",
        "--dev-info",
        &info,
    ]);
    let (code, out) = tokio::task::spawn_blocking(move || cli_code(sent))
        .await
        .unwrap();
    assert_eq!(code, Some(0), "{out}");
    let other = args(&[
        "mark-paid",
        "inv_home",
        "--project",
        "prj_b",
        "--order-id",
        "1001",
        "--actor",
        "support:eve",
        "--dev-info",
        &info,
    ]);
    let (code, out) = tokio::task::spawn_blocking(move || cli_code(other))
        .await
        .unwrap();
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("of project prj_local, not prj_b"), "{out}");
    let unnamed = args(&[
        "mark-paid",
        "inv_nowhere",
        "--order-id",
        "1001",
        "--actor",
        "support:eve",
        "--dev-info",
        &info,
    ]);
    let (code, out) = tokio::task::spawn_blocking(move || cli_code(unnamed))
        .await
        .unwrap();
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("name its project with --project"), "{out}");
    // Found by the attack on `dev`: an order id with spaces around it was another order than
    // the webhook's `1001`, and shipped again; it is bad input now, nothing written.
    let spaced = args(&[
        "mark-paid",
        "inv_home",
        "--project",
        "prj_local",
        "--order-id",
        " 1001 ",
        "--actor",
        "support:eve",
        "--dev-info",
        &info,
    ]);
    let (code, out) = tokio::task::spawn_blocking(move || cli_code(spaced))
        .await
        .unwrap();
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("has spaces around it"), "{out}");
    // This stop's attack (its F6): `send --wait` of another project's payment exited 0, as if
    // applied; the stack applied nothing of it, as with another environment's: exit 1, why.
    let elsewhere = _scratch_info.path().join("elsewhere.json");
    std::fs::write(&elsewhere, r#"{"project_id": "prj_zz"}"#).unwrap();
    let sent = args(&[
        "send",
        "--type",
        "invoice.paid",
        "--resource",
        "inv_elsewhere",
        "--data",
        elsewhere.to_str().unwrap(),
        "--wait",
        "--dev-info",
        &info,
    ]);
    let (code, out) = tokio::task::spawn_blocking(move || cli_code(sent))
        .await
        .unwrap();
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("outcome: other_project (the stack applies other projects"),
        "{out}"
    );
    let tables = tables_of(&dev);
    assert_eq!(
        aws_state_fulfilments(&tables, "inv_home").await
            + aws_state_fulfilments(&tables, "inv_nowhere").await,
        0
    );
}

async fn aws_state_fulfilments(t: &Tables, invoice: &str) -> usize {
    t.dynamodb
        .get_item()
        .table_name(&t.state)
        .key(
            "pk",
            AttributeValue::S(paymos_inbox_core::money::effect::fulfilment_key(invoice)),
        )
        .consistent_read(true)
        .send()
        .await
        .unwrap()
        .item
        .map_or(0, |_| 1)
}

#[tokio::test]
async fn events_tail_prints_what_was_committed_and_leaves_the_merchants_queue_alone() {
    let dev = dev(None).await;
    let (_scratch_info, info) = info_file(&dev, "dev-info");
    let url = dev.info.ingest_url.clone();
    let (ok, out) = tokio::task::spawn_blocking(move || {
        cli(&[
            "send",
            "--url",
            &url,
            "--type",
            "invoice.paid",
            "--resource",
            "inv_tail",
            "--secret",
            TEST_SECRET,
        ])
    })
    .await
    .unwrap();
    assert!(ok, "{out}");
    let queue = dev.info.queues["EventsDeliveryQueue"].clone();
    let waiting = || async {
        dev.sqs
            .get_queue_attributes()
            .queue_url(&queue)
            .attribute_names(aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessages)
            .send()
            .await
            .unwrap()
            .attributes
            .unwrap_or_default()
            .get(&aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessages)
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let mut before = 0;
    for _ in 0..50 {
        before = waiting().await;
        if before > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(before > 0, "the Order Paid reached the events queue");
    let (ok, out) = tokio::task::spawn_blocking(move || {
        cli(&["events", "tail", "--since", "1h", "--dev-info", &info])
    })
    .await
    .unwrap();
    assert!(ok, "{out}");
    assert!(
        out.contains("\"order-paid:inv_tail\"") && out.contains("\"environment\":\"sandbox\""),
        "{out}"
    );
    assert_eq!(
        waiting().await,
        before,
        "nothing taken from the merchant's queue"
    );
}

#[tokio::test]
async fn dev_heals_a_delivery_left_received_with_no_message_by_itself() {
    use paymos_inbox_core::roads::ingest::DeliveryLedger as _;
    let dev = dev(None).await;
    let tables = tables_of(&dev);
    let body = envelope(
        "evt_stranded",
        "invoice.paid",
        serde_json::json!({"invoice_id": "inv_stranded", "is_test": true, "order": {"external_id": "order-stranded"}}),
    );
    let received = paymos_inbox_lambda::now_ms() - 60_000;
    // Recorded by an attempt that died before its send: no message, the lease long over.
    let delivery = recorded_delivery(
        &body,
        paymos_inbox_core::wire::signature::Environment::Test,
        received,
    );
    paymos_inbox_aws::dynamodb::DynamoLedger::new(dev.dynamodb.clone(), &tables.deliveries, None)
        .record(&delivery, received + 1_000)
        .await
        .unwrap();
    let started = std::time::Instant::now();
    while aws_state_fulfilments(&tables, "inv_stranded").await == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "dev's sweep heals it within a minute"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

// Issue 30: the hand-off's dead-letter queue had no way back but a console click. `events
// redrive` moves it back paced, so an endpoint that just came back is not flooded.
#[tokio::test]
async fn the_hand_offs_parked_events_go_back_paced() {
    let aws = Aws::new();
    let pair = aws.queue().await;
    // The same six parked events, moved unpaced then at 4 a second: pacing adds 1.5 s.
    let mut took = Vec::new();
    for per_second in [None, Some(4)] {
        for i in 0..6 {
            aws.sqs
                .send_message()
                .queue_url(&pair.dlq_url)
                .message_body(format!("{{\"parked\":{i}}}"))
                .send()
                .await
                .unwrap();
        }
        let started = std::time::Instant::now();
        let moved = paymos_inbox_local::redrive::redrive_paced(
            &aws.sqs,
            &pair.dlq_url,
            &pair.queue_url,
            100,
            per_second,
        )
        .await
        .unwrap();
        took.push(started.elapsed());
        assert_eq!(moved.moved(), 6, "{per_second:?}");
        let mut back = 0;
        for _ in 0..5 {
            let messages = aws
                .sqs
                .receive_message()
                .queue_url(&pair.queue_url)
                .max_number_of_messages(10)
                .wait_time_seconds(1)
                .send()
                .await
                .unwrap()
                .messages
                .unwrap_or_default();
            for m in &messages {
                aws.sqs
                    .delete_message()
                    .queue_url(&pair.queue_url)
                    .receipt_handle(m.receipt_handle().unwrap())
                    .send()
                    .await
                    .unwrap();
            }
            back += messages.len();
            if back == 6 {
                break;
            }
        }
        assert_eq!(back, 6, "every parked event is back in the queue, once");
    }
    assert!(
        took[1] >= took[0] + Duration::from_millis(1_200),
        "six at four a second take 1.5 s longer: {took:?}"
    );
}

/// A merchant's endpoint: what it received (headers, body), answered `status(attempt)`.
async fn merchant(
    status: fn(usize) -> u16,
) -> (String, paymos_inbox_testkit::standard_webhooks::Received) {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let received: paymos_inbox_testkit::standard_webhooks::Received = Arc::default();
    let answered = Arc::new(AtomicUsize::new(0));
    let (kept, count) = (received.clone(), answered.clone());
    let endpoint =
        paymos_inbox_local::stub::serve(move |req: hyper::Request<hyper::body::Incoming>| {
            let (kept, count) = (kept.clone(), count.clone());
            async move {
                use http_body_util::BodyExt as _;
                let headers = req
                    .headers()
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or_default().to_owned()))
                    .collect();
                let body = req.into_body().collect().await.unwrap().to_bytes();
                kept.lock()
                    .unwrap()
                    .push((headers, String::from_utf8_lossy(&body).into_owned()));
                let mut r =
                    hyper::Response::new(http_body_util::Full::new(hyper::body::Bytes::new()));
                *r.status_mut() =
                    hyper::StatusCode::from_u16(status(count.fetch_add(1, Ordering::SeqCst)))
                        .unwrap();
                r
            }
        })
        .await
        .unwrap();
    (endpoint, received)
}

/// `dev` of the sandbox, of `send`'s project, forwarding the hand-off to `endpoint`.
pub(crate) async fn dev_forwarding_to(
    prefix: &str,
    endpoint: String,
) -> paymos_inbox_local::dev::Dev {
    start(DevOptions {
        forward_to: Some(endpoint),
        projects: paymos_inbox_core::money::change::Projects::only(vec!["prj_local".into()]),
        ..dev_options(prefix)
    })
    .await
    .expect("dev starts")
}

// Issue 30: a merchant could not see the hand-off locally. `dev --forward-to` posts every
// hand-off event to their endpoint with the deliver function's own code: a 503 comes back on
// the compressed schedule, and what arrives verifies with the secret `dev` prints.
#[tokio::test]
async fn dev_forwards_the_hand_off_signed_and_retried_to_a_local_endpoint() {
    // Down for the first attempt, up afterwards.
    let (endpoint, received) = merchant(|attempt| if attempt == 0 { 503 } else { 204 }).await;
    let dev = dev_forwarding_to("fwd", endpoint).await;
    let secret = dev
        .info
        .webhook_signing_secret
        .clone()
        .expect("dev prints the signing secret");
    assert!(secret.starts_with("whsec_"));
    let url = dev.info.ingest_url.clone();
    let (ok, out) = tokio::task::spawn_blocking(move || {
        cli(&[
            "send",
            "--url",
            &url,
            "--type",
            "invoice.paid",
            "--resource",
            "inv_fwd",
            "--secret",
            TEST_SECRET,
        ])
    })
    .await
    .unwrap();
    assert!(ok, "{out}");
    let mut posts = Vec::new();
    for _ in 0..150 {
        posts = received.lock().unwrap().clone();
        if posts.len() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(posts.len(), 2, "refused once, then delivered: {posts:?}");
    let id = |headers: &[(String, String)]| {
        headers
            .iter()
            .find(|(k, _)| k == "webhook-id")
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    assert_eq!(
        id(&posts[0].0),
        id(&posts[1].0),
        "the same event, by its id"
    );
    assert_eq!(id(&posts[1].0), "order-paid:inv_fwd");
    paymos_inbox_testkit::standard_webhooks::verifies_with(&secret, &posts[1].0, &posts[1].1)
        .expect("it verifies with the secret dev printed");
    // What the endpoint received (the closing note of issue 30 quotes it).
    for (k, v) in &posts[1].0 {
        println!("{k}: {v}");
    }
    println!("\n{}", posts[1].1);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        received.lock().unwrap().len(),
        2,
        "delivered once: nothing after the 2xx"
    );
}

/// One exported span, as an OTLP collector receives it: its name, trace, own and parent span
/// ids (lower-case hex) and string attributes.
#[derive(Debug, Clone)]
struct Exported {
    name: String,
    trace: String,
    id: String,
    parent: String,
    attributes: std::collections::BTreeMap<String, String>,
}

/// An OTLP/HTTP collector on its own thread and runtime (the exporter's flush blocks the
/// caller until it answers): its base URL, and the spans it has received.
fn collector() -> (String, std::sync::Arc<std::sync::Mutex<Vec<Exported>>>) {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::common::v1::any_value::Value;
    use prost::Message as _;
    let spans = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let kept = spans.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let url = paymos_inbox_local::stub::serve(
                move |req: hyper::Request<hyper::body::Incoming>| {
                    let kept = kept.clone();
                    async move {
                        use http_body_util::BodyExt as _;
                        let body = req.into_body().collect().await.unwrap().to_bytes();
                        let request = ExportTraceServiceRequest::decode(body).unwrap();
                        let spans = request
                            .resource_spans
                            .into_iter()
                            .flat_map(|r| r.scope_spans)
                            .flat_map(|s| s.spans);
                        kept.lock().unwrap().extend(spans.map(|span| {
                            Exported {
                                name: span.name,
                                trace: hex::encode(span.trace_id),
                                id: hex::encode(span.span_id),
                                parent: hex::encode(span.parent_span_id),
                                attributes: span
                                    .attributes
                                    .into_iter()
                                    .filter_map(|kv| match kv.value?.value? {
                                        Value::StringValue(v) => Some((kv.key, v)),
                                        _ => None,
                                    })
                                    .collect(),
                            }
                        }));
                        hyper::Response::new(http_body_util::Full::new(hyper::body::Bytes::new()))
                    }
                },
            )
            .await
            .unwrap();
            tx.send(url).unwrap();
            std::future::pending::<()>().await;
        });
    });
    (rx.recv().unwrap(), spans)
}

// Issue 54: each function had its own trace; nothing followed a payment from Paymos to the
// merchant. With spans exported, the sender's `traceparent` is continued by ingest, fulfil (through
// the work item's message attribute), the publisher (through the state item's) and the hand-off
// (through EventBridge's trace header): one trace, each hop's span the child of the one
// before, and the merchant's endpoint receives that trace's `traceparent`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_trace_spans_ingest_fulfil_the_publisher_and_the_hand_offs_post() {
    use tracing_subscriber::layer::SubscriberExt as _;
    let (otlp, spans) = collector();
    let layer = paymos_inbox_lambda::trace::layer("dev", Some(&otlp))
        .unwrap()
        .expect("an endpoint: spans are exported");
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer))
        .expect("the only subscriber of this process");
    let (endpoint, received) = merchant(|_| 204).await;
    let dev = dev_forwarding_to("trace", endpoint).await;
    let (trace, sender) = ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7");
    let now = paymos_inbox_lambda::now_ms() / 1000;
    let (event, invoice) = (unique("evt_trace"), unique("inv_trace"));
    let body = serde_json::json!({"event_id": event, "event_type": "invoice.paid", "version": 1,
        "occurred_at": now, "data": {"invoice_id": invoice, "status": "paid", "is_final": true,
        "is_test": true, "order": {"external_id": "order-trace", "amount": "10.50", "currency": "USDT"}}})
    .to_string();
    let answer = reqwest::Client::new()
        .post(&dev.info.ingest_url)
        .header("content-type", "application/json")
        .header("x-webhook-id", &event)
        .header("x-webhook-signature", sign(&body, now, &[TEST_SECRET]))
        .header("traceparent", format!("00-{trace}-{sender}-01"))
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200, "{:?}", answer.text().await);
    // Every hop, in the sender's trace, each the child of the one before.
    let mut hops = Vec::new();
    for _ in 0..150 {
        let ours: Vec<Exported> = spans
            .lock()
            .unwrap()
            .iter()
            .filter(|s| s.trace == trace)
            .cloned()
            .collect();
        let child_of = |parent: &str, name: &str| {
            ours.iter()
                .find(|s| s.parent == parent && s.name == name)
                .cloned()
        };
        let ingest = child_of(sender, "delivery");
        let fulfil = ingest.as_ref().and_then(|s| child_of(&s.id, "delivery"));
        let publish = fulfil.as_ref().and_then(|s| child_of(&s.id, "publish"));
        let hand_off = publish.as_ref().and_then(|s| child_of(&s.id, "hand-off"));
        if let (Some(i), Some(f), Some(p), Some(h)) = (ingest, fulfil, publish, hand_off) {
            hops = vec![i, f, p, h];
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let spans_now = spans.lock().unwrap().clone();
    assert_eq!(
        hops.len(),
        4,
        "ingest, fulfil, publish, hand-off: {spans_now:#?}"
    );
    let [ingest, fulfil, publish, hand_off] = &hops[..] else {
        unreachable!()
    };
    assert_eq!(ingest.attributes["event_id"], event, "{ingest:?}");
    assert_eq!(fulfil.attributes["event_id"], event, "{fulfil:?}");
    assert_eq!(fulfil.attributes["resource_id"], invoice, "{fulfil:?}");
    assert_eq!(publish.attributes["resource_id"], invoice, "{publish:?}");
    assert_eq!(hand_off.attributes["event_id"], event, "{hand_off:?}");
    assert_eq!(hand_off.attributes["resource_id"], invoice, "{hand_off:?}");
    // The merchant's endpoint sees the trace, its parent the hand-off's span.
    let posts = received.lock().unwrap().clone();
    let traceparent = posts
        .iter()
        .flat_map(|(headers, _)| headers)
        .find(|(k, _)| k == "traceparent")
        .map(|(_, v)| v.clone());
    assert_eq!(
        traceparent,
        Some(format!("00-{trace}-{}-01", hand_off.id)),
        "{posts:?}"
    );
}

// Issue 31: with another emulator busy, a CreateTable retried after its 5 s attempt timeout
// (the first having succeeded) failed the set-up with ResourceInUseException. Creating the
// stack's tables and queues again is the same as creating them once.
#[tokio::test]
async fn creating_the_local_stack_twice_is_creating_it_once() {
    let aws = Aws::new();
    let prefix = unique("twice");
    let first = paymos_inbox_local::template::create_all(&aws.dynamodb, &aws.sqs, &prefix)
        .await
        .expect("created");
    let again = paymos_inbox_local::template::create_all(&aws.dynamodb, &aws.sqs, &prefix)
        .await
        .expect("created again: the same tables and queues");
    assert_eq!(first.tables, again.tables);
    assert_eq!(first.queues, again.queues);
}

// Issue 31: `send` posted to port 8787 whatever port `dev` chose, and read `--dev-info` only for
// `--wait`. It now finds `dev`'s ingest URL in --dev-info, or in ./dev.json (which `dev` writes).
#[tokio::test]
async fn send_finds_dev_on_whatever_port_it_chose() {
    let dev = dev(None).await;
    assert!(
        !dev.info.ingest_url.contains(":8787/"),
        "{}",
        dev.info.ingest_url
    );
    let scratch_dir = scratch("dev-dir");
    let dir = scratch_dir.path().to_owned();
    std::fs::write(
        dir.join("dev.json"),
        serde_json::to_string(&dev.info).unwrap(),
    )
    .unwrap();
    for (how, args) in [
        ("--dev-info", vec!["--dev-info", "dev.json"]),
        ("./dev.json", vec![]),
    ] {
        let dir = dir.clone();
        let (ok, out) = tokio::task::spawn_blocking(move || {
            let out = Command::new(env!("CARGO_BIN_EXE_paymos-inbox"))
                .args(["send", "--type", "invoice.confirming", "--json"])
                .args(args)
                .args(["--secret", TEST_SECRET])
                .current_dir(&dir)
                .env_remove("PAYMOS_WEBHOOK_SECRET")
                .output()
                .unwrap();
            (
                out.status.success(),
                String::from_utf8_lossy(&out.stdout).into_owned()
                    + &String::from_utf8_lossy(&out.stderr),
            )
        })
        .await
        .unwrap();
        assert!(ok && out.contains("\"status\":200"), "{how}: {out}");
    }
}

/// `paymos-inbox args` run in `dir`, its home too, with nothing of this machine's AWS setting
/// or stack names (no region, profile, endpoint, secret): its exit code and what it printed.
async fn in_a_bare_folder(dir: std::path::PathBuf, args: &[&str]) -> (Option<i32>, String) {
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    tokio::task::spawn_blocking(move || {
        let out = Command::new(env!("CARGO_BIN_EXE_paymos-inbox"))
            .args(&args)
            .current_dir(&dir)
            .env_remove("PAYMOS_WEBHOOK_SECRET")
            .env_remove("PAYMOS_INBOX_STACK_NAME")
            .env_remove("PAYMOS_INBOX_CONFIG_ENV")
            .env_remove("AWS_REGION")
            .env_remove("AWS_DEFAULT_REGION")
            .env_remove("AWS_PROFILE")
            .env_remove("AWS_ENDPOINT_URL_DYNAMODB")
            .env_remove("AWS_ENDPOINT_URL_SQS")
            .env("HOME", &dir)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr),
        )
    })
    .await
    .unwrap()
}

// Issue 42, item 6: `send --wait` after `dev` posted to dev (found by ./dev.json) and then read
// the stack samconfig.toml names: "no AWS region" (exit 2), or 60 s on the deployed sandbox
// stack's table for an event that went to dev. It now waits where it sent.
#[tokio::test]
async fn send_wait_after_dev_waits_on_devs_tables() {
    let dev = dev(None).await;
    let scratch_dir = scratch("clone");
    let dir = scratch_dir.path().to_owned();
    std::fs::write(
        dir.join("dev.json"),
        serde_json::to_string(&dev.info).unwrap(),
    )
    .unwrap();
    // A clone's top folder: samconfig.toml names a deployed stack.
    std::fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/../../samconfig.toml"),
        dir.join("samconfig.toml"),
    )
    .unwrap();
    let args = [
        "send",
        "--type",
        "invoice.paid",
        "--resource",
        "inv_wait_dev",
        "--secret",
        TEST_SECRET,
        "--wait",
        "--json",
    ];
    let (code, out) = in_a_bare_folder(dir, &args).await;
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("\"applied\":true"), "{out}");
}

// Issue 42, item 12: `events redrive --dev-info dev.json` could not find dev's hand-off queues
// (only --webhook-queue-url/--webhook-dlq-url or a stack's outputs named them), and its hint
// said to pass --dev-info.
#[tokio::test]
async fn events_redrive_finds_devs_hand_off_queues_in_its_info() {
    let dev = dev(None).await;
    let scratch_dir = scratch("redrive-dev");
    let dir = scratch_dir.path().to_owned();
    std::fs::write(
        dir.join("dev.json"),
        serde_json::to_string(&dev.info).unwrap(),
    )
    .unwrap();
    let (code, out) = tokio::task::spawn_blocking(move || {
        let out = Command::new(env!("CARGO_BIN_EXE_paymos-inbox"))
            .args(["events", "redrive", "--dev-info", "dev.json", "--json"])
            .current_dir(&dir)
            .env_remove("WEBHOOK_QUEUE_URL")
            .env_remove("WEBHOOK_DLQ_URL")
            .env_remove("AWS_ENDPOINT_URL_DYNAMODB")
            .env_remove("AWS_ENDPOINT_URL_SQS")
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr),
        )
    })
    .await
    .unwrap();
    assert_eq!(code, Some(0), "{out}");
}

// Issue 41: `send` to a `dev` started with its own secret signed with the fixture secret, which
// that `dev` does not hold: 401, exit 1. It now signs with a secret `dev` holds, of the event's
// environment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_to_dev_signs_with_a_secret_dev_holds() {
    const HELD: &str = "whsec_test_held_by_this_dev_only";
    let dev = start(DevOptions {
        keys: vec![SigningKey::new("test", &WebhookSecret::new(HELD))],
        // As `paymos-inbox dev --secret …` serves them to the functions' INIT.
        secrets_text: Some(format!("live=whsec_live_not_this_one\ntest={HELD}")),
        projects: paymos_inbox_core::money::change::Projects::only(vec!["prj_local".into()]),
        ..dev_options("dev")
    })
    .await
    .expect("dev starts");
    let scratch_dir = scratch("held");
    let dir = scratch_dir.path().to_owned();
    std::fs::write(
        dir.join("dev.json"),
        serde_json::to_string(&dev.info).unwrap(),
    )
    .unwrap();
    let (code, out) = tokio::task::spawn_blocking(move || {
        let out = Command::new(env!("CARGO_BIN_EXE_paymos-inbox"))
            .args(["send", "--resource", "inv_held_secret", "--wait", "--json"])
            .current_dir(&dir)
            .env_remove("PAYMOS_WEBHOOK_SECRET")
            .env("HOME", &dir)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr),
        )
    })
    .await
    .unwrap();
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("\"status\":200"), "{out}");
    assert!(out.contains("\"applied\":true"), "{out}");
}

// Found by the attack on `dev`: `recheck --environment live` of a sandbox stack (or a leftover
// PAYMOS_ENVIRONMENT) re-checked its deliveries against the other environment's key. It is
// refused before anything is read at Paymos (exit 2).
#[tokio::test]
async fn recheck_naming_another_environment_than_the_stacks_is_refused_with_exit_2() {
    let dev = dev(None).await;
    let (_scratch_info, info) = info_file(&dev, "dev-info");
    let words = [
        "recheck",
        "inv_x",
        "--environment",
        "live",
        "--api-key",
        "k",
        "--api-secret",
        "s",
        "--api-base-url",
        "http://127.0.0.1:9",
        "--actor",
        "support:eve",
        "--dev-info",
        &info,
    ];
    let args: Vec<String> = words.iter().map(|s| (*s).to_owned()).collect();
    let (code, out) = tokio::task::spawn_blocking(move || cli_code(args))
        .await
        .unwrap();
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("this stack applies sandbox"), "{out}");
}

// Issue 49: `mark-paid --order-id B` of an invoice that shipped order A answered
// `already_final` and exited 0, as if B shipped. Now it says the invoice shipped another
// order and exits 1; nothing more ships.
#[tokio::test]
async fn mark_paid_naming_another_order_than_the_one_shipped_exits_1_and_says_so() {
    let dev = dev_of(None, &["prj_local"]).await;
    let (_scratch_info, info) = info_file(&dev, "dev-info");
    let args = |a: &[&str]| -> Vec<String> { a.iter().map(|s| (*s).to_owned()).collect() };
    let sent = args(&[
        "send",
        "--type",
        "invoice.paid",
        "--resource",
        "inv_shipped",
        "--wait",
        "--dev-info",
        &info,
    ]);
    let (code, out) = tokio::task::spawn_blocking(move || cli_code(sent))
        .await
        .unwrap();
    assert_eq!(code, Some(0), "{out}");
    let mark = |order: &str| {
        args(&[
            "mark-paid",
            "inv_shipped",
            "--order-id",
            order,
            "--actor",
            "support:eve",
            "--dev-info",
            &info,
        ])
    };
    let other = mark("order-elsewhere");
    let (code, out) = tokio::task::spawn_blocking(move || cli_code(other))
        .await
        .unwrap();
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("shipped another order"), "{out}");
    let same = mark("order-inv_shipped");
    let (code, out) = tokio::task::spawn_blocking(move || cli_code(same))
        .await
        .unwrap();
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("already_final"), "{out}");
    assert_eq!(
        aws_state_fulfilments(&tables_of(&dev), "inv_shipped").await,
        1
    );
}

// Issue 49 (A7): `send --wait` said "Paymos does not know this invoice" of every unconfirmed
// delivery, here of one Paymos knows well, paid for another order. It says the reverse check's
// own reason.
#[tokio::test]
async fn send_wait_says_why_the_reverse_check_did_not_confirm_a_delivery() {
    use paymos_inbox_testkit::paymos_fake::{self, Answer, FakePaymos};
    let api = FakePaymos::start().await;
    let mut at = paymos_fake::invoice(
        "inv_send_other",
        "paid",
        ("25.00", "USDT"),
        ("25.00", "USDT"),
    );
    at["is_test"] = serde_json::json!(true);
    at["project_id"] = serde_json::json!("prj_local");
    at["order"]["external_id"] = serde_json::json!("order-other");
    api.answer("inv_send_other", Answer::Invoices(vec![at]));
    let dev = start(DevOptions {
        reconcile_with: Some(
            paymos::PaymosClient::builder(paymos_fake::KEY, paymos_fake::SECRET)
                .base_url(api.url.clone())
                .build()
                .unwrap(),
        ),
        ..dev_options("send-why")
    })
    .await
    .expect("dev starts");
    let (_scratch, info) = info_file(&dev, "send-why");
    let (ok, out) = tokio::task::spawn_blocking(move || {
        cli(&[
            "send",
            "--type",
            "invoice.paid",
            "--resource",
            "inv_send_other",
            "--wait",
            "--dev-info",
            &info,
        ])
    })
    .await
    .unwrap();
    // The attack on `dev` (G9): it exited 0 with `"applied": true`, though the stack applied
    // nothing of it; as with every outcome that applies nothing, exit 1.
    assert!(!ok, "{out}");
    assert!(
        out.contains("outcome: unconfirmed (the reverse check: the event names order order-inv_send_other, Paymos' invoice order order-other"),
        "{out}"
    );
    assert!(!out.contains("does not know"), "{out}");
}

// Issue 49 (A7), at the door: an answer of Paymos that does not decode was said as "could not
// reach the service". `mark-paid` says Paymos answered something it cannot read, naming the
// invoice and the field (exit 4); `reconcile` names the slice it could not read as UNREADABLE
// and goes on (exit 1).
#[tokio::test]
async fn an_answer_paymos_gives_that_cannot_be_read_is_said_so_at_the_door() {
    use paymos_inbox_testkit::paymos_fake::{self, Answer, FakePaymos};
    let dev = dev(None).await;
    let (_scratch_info, info) = info_file(&dev, "unreadable-info");
    let api = FakePaymos::start().await;
    let mut bad = paymos_fake::invoice("inv_bad", "paid", ("25.00", "USDT"), ("25.00", "USDT"));
    bad["is_test"] = serde_json::json!(true);
    bad["order"].as_object_mut().unwrap().remove("amount");
    api.answer("inv_bad", Answer::Invoices(vec![bad]));
    let now = paymos_inbox_lambda::now_ms() / 1000;
    api.list(vec![
        serde_json::json!({"invoice_id": "inv_bad", "project_id": "prj_local",
        "external_order_id": "order-bad", "status": "paid", "is_final": true, "is_test": true,
        "currency": "USDT", "created_at": now - 60}),
    ]);
    let run = |words: &[&str]| {
        let mut all: Vec<String> = words.iter().map(|w| (*w).to_owned()).collect();
        all.extend(["--dev-info".to_owned(), info.clone()]);
        let url = api.url.clone();
        tokio::task::spawn_blocking(move || {
            let out = Command::new(env!("CARGO_BIN_EXE_paymos-inbox"))
                .args(all)
                .env("PAYMOS_API_KEY", paymos_fake::KEY)
                .env("PAYMOS_API_SECRET", paymos_fake::SECRET)
                .env("PAYMOS_API_BASE_URL", url)
                .env_remove("PAYMOS_WEBHOOK_SECRET")
                .env_remove("AWS_ENDPOINT_URL_DYNAMODB")
                .env_remove("AWS_ENDPOINT_URL_SQS")
                .output()
                .expect("run paymos-inbox");
            (
                out.status.code(),
                String::from_utf8_lossy(&out.stdout).into_owned()
                    + &String::from_utf8_lossy(&out.stderr),
            )
        })
    };
    let (code, out) = run(&["mark-paid", "inv_bad", "--actor", "alice"])
        .await
        .unwrap();
    assert_eq!(code, Some(4), "{out}");
    assert!(
        out.contains("the service answered something this tool cannot read: Paymos API returned an invalid response: inv_bad: missing field `amount`"),
        "{out}"
    );
    assert!(!out.contains("could not reach"), "{out}");
    let (code, out) = run(&["reconcile", "--from", "1h"]).await.unwrap();
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("UNREADABLE the invoices created from "),
        "{out}"
    );
    assert!(out.contains("missing field `amount`"), "{out}");
}

// Attack round 3, F7: `status` in a folder where `dev` runs, naming nothing, went to AWS and
// said only "no AWS region" (exit 2). It still does not guess (an operator command without a
// name reads the deployed stack), but its next step names the `dev` that runs there.
#[tokio::test]
async fn a_command_naming_no_receiver_beside_a_running_dev_says_to_name_it() {
    let scratch_dir = scratch("status");
    let dir = scratch_dir.path().to_owned();
    std::fs::write(dir.join("dev.json"), "{}\n").unwrap();
    let (code, out) = in_a_bare_folder(dir, &["status"]).await;
    assert_eq!(code, Some(2), "{out}");
    assert!(
        out.contains("no AWS region") && out.contains("--dev-info dev.json"),
        "{out}"
    );
}
