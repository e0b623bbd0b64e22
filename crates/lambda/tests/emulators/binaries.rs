//! The Lambda binaries as built, `main()` included: each runs under a Lambda Runtime API stub
//! (the project's own: cargo-lambda's emulator needs its watcher and a build of its own, and
//! Docker is not everywhere), reads its settings from `events/env.json`, fetches its secrets
//! from a Secrets Manager stub at INIT exactly as on AWS, and talks to the emulators. Every
//! file in `events/` goes through them, re-signed at the current time first.

use std::collections::{HashMap, VecDeque};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use serde_json::{Value, json};
use tokio::sync::{Notify, oneshot};

use paymos_inbox_testkit::*;

type Reply = oneshot::Sender<Result<Value, String>>;

#[derive(Default)]
struct RuntimeState {
    pending: VecDeque<(String, String)>,
    waiting: HashMap<String, Reply>,
    init_error: Option<String>,
}

/// A Lambda Runtime API on loopback: `next` hands out queued invocations, `response`/`error`
/// complete them.
struct RuntimeApi {
    addr: String,
    state: Arc<Mutex<RuntimeState>>,
    ready: Arc<Notify>,
}

impl RuntimeApi {
    async fn start() -> Self {
        let state: Arc<Mutex<RuntimeState>> = Arc::default();
        let ready = Arc::new(Notify::new());
        let (st, rd) = (state.clone(), ready.clone());
        let addr =
            paymos_inbox_local::stub::serve(move |req: hyper::Request<hyper::body::Incoming>| {
                let (st, rd) = (st.clone(), rd.clone());
                async move { runtime_route(req, st, rd).await }
            })
            .await
            .unwrap();
        Self { addr, state, ready }
    }

    /// Invokes the function with `payload` and waits for its answer (or its error).
    async fn invoke(&self, payload: &str) -> Result<Value, String> {
        let id = format!("req-{}", unique("inv"));
        let (tx, rx) = oneshot::channel();
        {
            let mut st = self.state.lock().unwrap();
            st.waiting.insert(id.clone(), tx);
            st.pending.push_back((id, payload.to_owned()));
        }
        self.ready.notify_waiters();
        self.ready.notify_one();
        match tokio::time::timeout(Duration::from_secs(60), rx).await {
            Ok(Ok(answer)) => answer,
            _ => Err(format!(
                "no answer (init error: {:?})",
                self.state.lock().unwrap().init_error
            )),
        }
    }
}

fn text(status: u16, body: String) -> hyper::Response<Full<Bytes>> {
    let mut r = hyper::Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = hyper::StatusCode::from_u16(status).unwrap();
    r
}

async fn runtime_route(
    req: hyper::Request<hyper::body::Incoming>,
    state: Arc<Mutex<RuntimeState>>,
    ready: Arc<Notify>,
) -> hyper::Response<Full<Bytes>> {
    let path = req.uri().path().to_owned();
    let body = req
        .into_body()
        .collect()
        .await
        .map(|c| c.to_bytes())
        .unwrap_or_default();
    let body = String::from_utf8_lossy(&body).into_owned();
    if path.ends_with("/runtime/invocation/next") {
        loop {
            let next = state.lock().unwrap().pending.pop_front();
            if let Some((id, payload)) = next {
                // The longest timeout of the template's functions (the reconciliation's 300 s):
                // a scheduled run reads as many hour slices as its time allows.
                let deadline = paymos_inbox_lambda::now_ms() + 300_000;
                let mut r = text(200, payload);
                let h = r.headers_mut();
                h.insert("lambda-runtime-aws-request-id", id.parse().unwrap());
                h.insert(
                    "lambda-runtime-deadline-ms",
                    deadline.to_string().parse().unwrap(),
                );
                h.insert(
                    "lambda-runtime-invoked-function-arn",
                    "arn:aws:lambda:us-east-1:000000000000:function:test"
                        .parse()
                        .unwrap(),
                );
                h.insert("content-type", "application/json".parse().unwrap());
                return r;
            }
            let _ = tokio::time::timeout(Duration::from_millis(100), ready.notified()).await;
        }
    }
    if path.ends_with("/runtime/init/error") {
        state.lock().unwrap().init_error = Some(body);
        return text(202, "{}".into());
    }
    let mut parts = path
        .trim_start_matches("/2018-06-01/runtime/invocation/")
        .split('/');
    let (id, kind) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
    let waiter = state.lock().unwrap().waiting.remove(id);
    if let Some(tx) = waiter {
        let _ = tx.send(if kind == "response" {
            serde_json::from_str(&body).map_err(|e| format!("{e}: {body}"))
        } else {
            Err(body)
        });
    }
    text(202, "{}".into())
}

/// Secrets Manager's `GetSecretValue` on loopback, for INIT (the one `dev` serves too).
pub(crate) async fn secrets_manager(secrets: HashMap<String, String>) -> String {
    paymos_inbox_local::secrets::serve(secrets)
        .await
        .expect("a loopback port")
}

/// One function's settings from `events/env.json` (what `sam local invoke --env-vars` reads),
/// with the names of the tables and queues this test created.
pub(crate) fn env_json(function: &str, names: &HashMap<&str, String>) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(format!(
        "{}/events/env.json",
        concat!(env!("CARGO_MANIFEST_DIR"), "/../..")
    ))
    .expect("events/env.json");
    let all: Value = serde_json::from_str(&text).expect("events/env.json is JSON");
    all[function]
        .as_object()
        .unwrap_or_else(|| panic!("events/env.json has {function}"))
        .iter()
        .map(|(k, v)| {
            let value = names
                .get(k.as_str())
                .cloned()
                .unwrap_or_else(|| v.as_str().unwrap_or_default().to_owned());
            (k.clone(), value)
        })
        .collect()
}

/// A built binary running under its own Runtime API stub, its stdout and stderr captured.
struct Function {
    runtime: RuntimeApi,
    child: tokio::process::Child,
    stdout: Arc<Mutex<String>>,
    stderr: Arc<Mutex<String>>,
}

fn capture(pipe: Option<impl tokio::io::AsyncRead + Unpin + Send + 'static>) -> Arc<Mutex<String>> {
    use tokio::io::AsyncBufReadExt;
    let out: Arc<Mutex<String>> = Arc::default();
    if let Some(pipe) = pipe {
        let sink = out.clone();
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(pipe).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let mut s = sink.lock().unwrap();
                s.push_str(&line);
                s.push('\n');
            }
        });
    }
    out
}

impl Function {
    async fn start(binary: &str, env: Vec<(String, String)>, secrets_url: &str) -> Self {
        let runtime = RuntimeApi::start().await;
        let (dynamodb, sqs) = endpoint_urls();
        let child = tokio::process::Command::new(binary)
            .env_clear()
            .envs(env)
            .env("AWS_LAMBDA_RUNTIME_API", &runtime.addr)
            .env("AWS_LAMBDA_FUNCTION_NAME", "test")
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
            .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
            .env("AWS_LAMBDA_LOG_STREAM_NAME", "test")
            .env("AWS_LAMBDA_LOG_GROUP_NAME", "test")
            .env("AWS_LAMBDA_LOG_LEVEL", "warn")
            .env("AWS_REGION", "us-east-1")
            .env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test")
            .env("AWS_ENDPOINT_URL_DYNAMODB", dynamodb)
            .env("AWS_ENDPOINT_URL_SQS", sqs)
            .env("AWS_ENDPOINT_URL_SECRETS_MANAGER", secrets_url)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("{binary}: {e}"));
        let mut child = child;
        let stdout = capture(child.stdout.take());
        let stderr = capture(child.stderr.take());
        Self {
            runtime,
            child,
            stdout,
            stderr,
        }
    }
}

/// Every `events/ingest-*.json`, re-signed now, into a temporary folder.
pub(crate) fn fresh_ingest_events() -> Vec<(String, String)> {
    let scratch_dir = scratch("events");
    let dir = scratch_dir.path().to_owned();
    let source = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join("events");
    for entry in std::fs::read_dir(&source).unwrap().filter_map(Result::ok) {
        std::fs::copy(entry.path(), dir.join(entry.file_name())).unwrap();
    }
    let now = paymos_inbox_lambda::now_ms() / 1000;
    let names = paymos_inbox_local::events::refresh(
        &dir,
        &paymos_inbox_core::wire::signature::WebhookSecret::new(TEST_SECRET),
        now,
    )
    .unwrap();
    names
        .into_iter()
        .map(|n| {
            let text = std::fs::read_to_string(dir.join(&n)).unwrap();
            (n, text)
        })
        .collect()
}

#[tokio::test]
async fn the_ingest_binary_answers_every_event_file_and_records_the_good_ones() {
    let aws = Aws::new();
    let stack = aws.stack().await;
    let names = HashMap::from([
        (
            "DELIVERIES_TABLE",
            stack.table("DeliveriesTable").to_owned(),
        ),
        ("STATE_TABLE", stack.table("StateTable").to_owned()),
        ("WORK_QUEUE_URL", stack.queue("WorkQueue").to_owned()),
    ]);
    let env = env_json("IngestFunction", &names);
    let secret_id = env
        .iter()
        .find(|(k, _)| k == "WEBHOOK_SECRETS_ID")
        .map(|(_, v)| v.clone())
        .expect("env.json names the secret");
    let secrets = secrets_manager(HashMap::from([(
        secret_id,
        json!({"test": TEST_SECRET}).to_string(),
    )]))
    .await;
    let ingest = Function::start(env!("CARGO_BIN_EXE_paymos-ingest"), env, &secrets).await;

    let expected: HashMap<&str, u16> = HashMap::from([
        ("ingest-invoice-paid.json", 200),
        ("ingest-invoice-confirming.json", 200),
        ("ingest-invoice-paid-over.json", 200),
        ("ingest-withdrawal-completed.json", 200),
        ("ingest-deposit-confirmed.json", 200),
        ("ingest-base64-body.json", 200),
        ("ingest-rotation-two-v1.json", 200),
        ("ingest-bad-signature.json", 401),
        ("ingest-stale-timestamp.json", 401),
        ("ingest-id-mismatch.json", 400),
    ]);
    let events = fresh_ingest_events();
    assert_eq!(
        events.len(),
        expected.len(),
        "every file has an expected answer"
    );
    for (name, event) in &events {
        let answer = ingest
            .runtime
            .invoke(event)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            answer["statusCode"].as_u64(),
            Some(u64::from(expected[name.as_str()])),
            "{name}: {answer}"
        );
        let body: Value = serde_json::from_str(answer["body"].as_str().unwrap_or("{}")).unwrap();
        if expected[name.as_str()] == 200 {
            assert_eq!(body["status"], "new", "{name}: {body}");
        } else {
            assert!(body["error"].is_string(), "{name}: {body}");
        }
    }
    assert_eq!(
        aws.scan(stack.table("DeliveriesTable")).await.len(),
        7,
        "the seven good ones"
    );
    assert_eq!(aws.drain(stack.queue("WorkQueue")).await.len(), 7);
    // What it printed: an EMF document per invocation, its answers counted by outcome.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let printed = ingest.stdout.lock().unwrap().clone();
    let answered: f64 = printed
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|d| d.get("_aws").is_some())
        .filter_map(|d| d["IngestAnswers"].as_f64())
        .sum();
    assert_eq!(answered, 10.0, "{printed}");
}

#[tokio::test]
async fn the_fulfil_binary_applies_the_sqs_event_files_and_reports_only_the_poison() {
    let aws = Aws::new();
    let stack = aws.stack().await;
    let names = HashMap::from([
        (
            "DELIVERIES_TABLE",
            stack.table("DeliveriesTable").to_owned(),
        ),
        ("STATE_TABLE", stack.table("StateTable").to_owned()),
        // A stack of one project: the fixtures' payments name none, which a stack listing
        // none (or several) cannot key.
        ("PAYMOS_PROJECT_IDS", "prj_1".to_owned()),
    ]);
    let env = env_json("FulfilFunction", &names);
    let secrets = secrets_manager(HashMap::new()).await;
    let fulfil = Function::start(env!("CARGO_BIN_EXE_paymos-fulfil"), env, &secrets).await;
    let read = |name: &str| {
        std::fs::read_to_string(format!(
            "{}/events/{name}",
            concat!(env!("CARGO_MANIFEST_DIR"), "/../..")
        ))
        .unwrap()
    };
    // Recorded by ingest before fulfil receives them.
    for name in ["fulfil-single.json", "fulfil-batch-with-poison.json"] {
        aws.record_work_items(stack.table("DeliveriesTable"), &read(name), 0)
            .await;
    }

    let single = fulfil
        .runtime
        .invoke(&read("fulfil-single.json"))
        .await
        .unwrap();
    assert_eq!(single["batchItemFailures"], json!([]), "{single}");
    let batch = read("fulfil-batch-with-poison.json");
    let poison = serde_json::from_str::<Value>(&batch).unwrap()["Records"][4]["messageId"].clone();
    let answer = fulfil.runtime.invoke(&batch).await.unwrap();
    assert_eq!(
        answer["batchItemFailures"],
        json!([{"itemIdentifier": poison}]),
        "{answer}"
    );
    let fulfilments = aws
        .scan(stack.table("StateTable"))
        .await
        .into_iter()
        .filter(|i| get_s(i, "kind") == "fulfilment")
        .count();
    assert_eq!(fulfilments, 10, "1 single + 9 of the batch");
    // The same batch again (SQS redelivers): nothing more.
    let again = fulfil.runtime.invoke(&batch).await.unwrap();
    assert_eq!(
        again["batchItemFailures"],
        json!([{"itemIdentifier": poison}])
    );
    drop(fulfil.child);
}

#[tokio::test]
async fn the_ingest_binary_stops_at_init_with_a_clear_error_when_its_secret_is_missing() {
    let aws = Aws::new();
    let stack = aws.stack().await;
    let names = HashMap::from([
        (
            "DELIVERIES_TABLE",
            stack.table("DeliveriesTable").to_owned(),
        ),
        ("STATE_TABLE", stack.table("StateTable").to_owned()),
        ("WORK_QUEUE_URL", stack.queue("WorkQueue").to_owned()),
    ]);
    let secrets = secrets_manager(HashMap::new()).await;
    let mut ingest = Function::start(
        env!("CARGO_BIN_EXE_paymos-ingest"),
        env_json("IngestFunction", &names),
        &secrets,
    )
    .await;
    let status = tokio::time::timeout(Duration::from_secs(30), ingest.child.wait())
        .await
        .expect("INIT fails fast")
        .unwrap();
    assert!(!status.success());
    tokio::time::sleep(Duration::from_millis(200)).await;
    let said = format!(
        "{}{}",
        ingest.stderr.lock().unwrap(),
        ingest.stdout.lock().unwrap()
    );
    assert!(
        said.contains("WEBHOOK_SECRETS_ID") && said.contains("could not read the webhook secrets"),
        "the INIT error names the setting: {said}"
    );
}

#[tokio::test]
async fn the_sweep_binary_sends_a_stranded_delivery_again_and_reports_the_oldest_pending() {
    use paymos_inbox_core::roads::ingest::DeliveryLedger;
    let aws = Aws::new();
    let stack = aws.stack().await;
    let names = HashMap::from([
        (
            "DELIVERIES_TABLE",
            stack.table("DeliveriesTable").to_owned(),
        ),
        ("STATE_TABLE", stack.table("StateTable").to_owned()),
        ("WORK_QUEUE_URL", stack.queue("WorkQueue").to_owned()),
    ]);
    let secrets = secrets_manager(HashMap::new()).await;
    let sweep = Function::start(
        env!("CARGO_BIN_EXE_paymos-sweep"),
        env_json("SweepFunction", &names),
        &secrets,
    )
    .await;
    // Issue 51: an idle run writes one metric series, `PaymentsWaiting` (each series is billed
    // a month); no count of nothing sent, no age of nothing pending, no cold start.
    let idle = sweep.runtime.invoke("{}").await.unwrap();
    assert_eq!(idle["found"].as_u64(), Some(0), "{idle}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let printed = sweep.stdout.lock().unwrap().clone();
    let documents: Vec<&str> = printed.lines().filter(|l| l.contains("\"_aws\"")).collect();
    assert_eq!(documents.len(), 1, "{printed}");
    let written: Vec<String> = serde_json::from_str::<serde_json::Value>(documents[0]).unwrap()
        ["_aws"]["CloudWatchMetrics"][0]["Metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["Name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(written, ["PaymentsWaiting"], "{printed}");
    sweep.stdout.lock().unwrap().clear();
    // A delivery recorded an hour ago whose sender gave up before any send.
    let body = invoice_paid("evt_stranded", "inv_stranded");
    let hour_ago = paymos_inbox_lambda::now_ms() - 3_600_000;
    let delivery = recorded_delivery(
        &body,
        paymos_inbox_core::wire::signature::Environment::Live,
        hour_ago,
    );
    paymos_inbox_aws::dynamodb::DynamoLedger::new(
        aws.dynamodb.clone(),
        stack.table("DeliveriesTable"),
        None,
    )
    .record(&delivery, hour_ago + 30_000)
    .await
    .unwrap();
    // What EventBridge Scheduler sends.
    let answer = sweep.runtime.invoke("{}").await.unwrap();
    assert_eq!(
        (answer["found"].as_u64(), answer["resent"].as_u64()),
        (Some(1), Some(1)),
        "{answer}"
    );
    let messages = aws.drain(stack.queue("WorkQueue")).await;
    assert_eq!(messages.len(), 1);
    assert_eq!(
        message_event(&messages[0]),
        String::from_utf8(delivery.body).unwrap()
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    let printed = sweep.stdout.lock().unwrap().clone();
    assert!(
        printed.lines().any(|l| l.contains("\"StrandedResent\":1")),
        "{printed}"
    );
    assert!(
        printed
            .lines()
            .any(|l| l.contains("\"OldestPendingSeconds\":")),
        "{printed}"
    );
    // What waits for a person, counted each run for the alarm that stays on while it waits.
    assert_eq!(answer["waiting"].as_u64(), Some(0), "{answer}");
    assert!(
        printed.lines().any(|l| l.contains("\"PaymentsWaiting\":0")),
        "{printed}"
    );
}

#[tokio::test]
async fn the_scheduled_reconciliation_finds_a_missing_invoice_and_with_apply_fulfils_it_once() {
    use paymos_inbox_testkit::paymos_fake::{Answer, FakePaymos, KEY, SECRET, invoice};
    let aws = Aws::new();
    let stack = aws.stack().await;
    let fake = FakePaymos::start().await;
    let mut paid = invoice("inv_sched", "paid", ("25.00", "USDT"), ("25.00", "USDT"));
    paid["created_at"] = json!(paymos_inbox_lambda::now_ms() / 1000 - 600);
    fake.answer("inv_sched", Answer::Invoices(vec![paid]));
    let api = fake.url.clone();
    let secrets = secrets_manager(HashMap::from([(
        "paymos-inbox/api".to_owned(),
        json!({"api_key": KEY, "api_secret": SECRET}).to_string(),
    )]))
    .await;
    let env = |apply: &str| {
        vec![
            (
                "DELIVERIES_TABLE".to_owned(),
                stack.table("DeliveriesTable").to_owned(),
            ),
            (
                "STATE_TABLE".to_owned(),
                stack.table("StateTable").to_owned(),
            ),
            (
                "PAYMOS_API_SECRETS_ID".to_owned(),
                "paymos-inbox/api".to_owned(),
            ),
            ("PAYMOS_API_BASE_URL".to_owned(), api.clone()),
            ("PAYMOS_PROJECT_IDS".to_owned(), "prj_1".to_owned()),
            ("RECONCILE_APPLY".to_owned(), apply.to_owned()),
        ]
    };
    let fulfilments = || async {
        aws.scan(stack.table("StateTable"))
            .await
            .into_iter()
            .filter(|i| get_s(i, "kind") == "fulfilment")
            .count()
    };
    // Report only: the invocation fails (the alarm's signal) and nothing is fulfilled.
    let report_only = Function::start(
        env!("CARGO_BIN_EXE_paymos-reconcile"),
        env("false"),
        &secrets,
    )
    .await;
    let err = report_only.runtime.invoke("{}").await.unwrap_err();
    assert!(err.contains("1 missing"), "{err}");
    assert_eq!(fulfilments().await, 0);
    // Applying: fulfilled once, and a second run is clean.
    let applying = Function::start(
        env!("CARGO_BIN_EXE_paymos-reconcile"),
        env("true"),
        &secrets,
    )
    .await;
    let report = applying.runtime.invoke("{}").await.unwrap();
    assert_eq!(report["applied"]["inv_sched"], "fulfilled", "{report}");
    assert_eq!(fulfilments().await, 1);
    let again = applying.runtime.invoke("{}").await.unwrap();
    assert_eq!(again["matched"], 1, "{again}");
    assert_eq!(fulfilments().await, 1);
}

#[tokio::test]
async fn fulfil_and_the_reconciliation_stop_at_init_when_the_paymos_key_is_refused() {
    use paymos_inbox_testkit::paymos_fake::{FakePaymos, KEY, SECRET};
    let aws = Aws::new();
    let stack = aws.stack().await;
    let fake = FakePaymos::start().await;
    fake.refuse_key();
    let secrets = secrets_manager(HashMap::from([(
        "paymos-inbox/api".to_owned(),
        json!({"api_key": KEY, "api_secret": SECRET}).to_string(),
    )]))
    .await;
    for binary in [
        env!("CARGO_BIN_EXE_paymos-fulfil"),
        env!("CARGO_BIN_EXE_paymos-reconcile"),
    ] {
        let env = vec![
            (
                "DELIVERIES_TABLE".to_owned(),
                stack.table("DeliveriesTable").to_owned(),
            ),
            (
                "STATE_TABLE".to_owned(),
                stack.table("StateTable").to_owned(),
            ),
            (
                "PAYMOS_API_SECRETS_ID".to_owned(),
                "paymos-inbox/api".to_owned(),
            ),
            ("PAYMOS_API_BASE_URL".to_owned(), fake.url.clone()),
            ("PAYMOS_PROJECT_IDS".to_owned(), "prj_1".to_owned()),
            ("PAYMOS_INBOX_STACK".to_owned(), "it".to_owned()),
        ];
        let mut function = Function::start(binary, env, &secrets).await;
        let status = tokio::time::timeout(Duration::from_secs(30), function.child.wait())
            .await
            .expect("INIT fails fast")
            .unwrap();
        assert!(!status.success(), "{binary}");
        tokio::time::sleep(Duration::from_millis(200)).await;
        let said = format!(
            "{}{}",
            function.stderr.lock().unwrap(),
            function.stdout.lock().unwrap()
        );
        assert!(
            said.contains("PAYMOS_API_SECRETS_ID") && said.contains("401"),
            "{binary}: the INIT error names the setting: {said}"
        );
        assert!(
            said.lines()
                .any(|l| l.contains("\"Misconfigured\":1") || l.contains("\"Misconfigured\":[1")),
            "{binary}: the misconfiguration alarm's metric: {said}"
        );
    }
}

/// EventBridge's `PutEvents` on loopback: keeps what it was sent; refuses entries whose detail
/// contains `refuse`.
pub(crate) async fn eventbridge(received: Arc<Mutex<Vec<Value>>>) -> String {
    paymos_inbox_local::stub::serve(move |req: hyper::Request<hyper::body::Incoming>| {
        let received = received.clone();
        async move {
            let body = req
                .into_body()
                .collect()
                .await
                .map(|c| c.to_bytes())
                .unwrap_or_default();
            let asked: Value = serde_json::from_slice(&body).unwrap_or_default();
            let mut failed = 0;
            let entries: Vec<Value> = asked["Entries"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .enumerate()
                .map(|(i, e)| {
                    received.lock().unwrap().push(e.clone());
                    if e["Detail"].as_str().unwrap_or_default().contains("refuse") {
                        failed += 1;
                        json!({"ErrorCode": "InternalFailure", "ErrorMessage": "refused"})
                    } else {
                        json!({"EventId": format!("eb-{i}")})
                    }
                })
                .collect();
            let mut r = text(
                200,
                json!({"FailedEntryCount": failed, "Entries": entries}).to_string(),
            );
            r.headers_mut().insert(
                "content-type",
                "application/x-amz-json-1.1".parse().unwrap(),
            );
            r
        }
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn the_publish_binary_sends_each_fact_of_a_stream_batch_to_the_bus() {
    let received: Arc<Mutex<Vec<Value>>> = Arc::default();
    let bus = eventbridge(received.clone()).await;
    let secrets = secrets_manager(HashMap::new()).await;
    let mut env = env_json("PublisherFunction", &HashMap::new());
    env.push(("AWS_ENDPOINT_URL_EVENTBRIDGE".into(), bus));
    let publish = Function::start(env!("CARGO_BIN_EXE_paymos-publish"), env, &secrets).await;
    let batch = std::fs::read_to_string(format!(
        "{}/events/publish-stream.json",
        concat!(env!("CARGO_MANIFEST_DIR"), "/../..")
    ))
    .unwrap();
    let answer = publish.runtime.invoke(&batch).await.unwrap();
    assert_eq!(answer["batchItemFailures"], json!([]), "{answer}");
    let sent = received.lock().unwrap().clone();
    // Each fact once; the publisher puts resources in lanes at once, so only one resource's
    // facts keep their order among themselves.
    let mut types: Vec<&str> = sent
        .iter()
        .map(|e| e["DetailType"].as_str().unwrap())
        .collect();
    types.sort_unstable();
    assert_eq!(
        types,
        ["Deposit Credited", "Invoice Closed", "Order Paid"],
        "{sent:#?}"
    );
    for e in &sent {
        assert_eq!(e["Source"], "paymos-inbox");
        assert_eq!(e["EventBusName"], "paymos-inbox-local-payments");
        let detail: Value = serde_json::from_str(e["Detail"].as_str().unwrap()).unwrap();
        assert_eq!(detail["environment"], "sandbox");
        assert!(detail["idempotency_key"].is_string());
    }

    // A refused entry fails its record, and the stream is retried from it.
    let refused = batch.replace("order-1002", "refuse-1002");
    received.lock().unwrap().clear();
    let answer = publish.runtime.invoke(&refused).await.unwrap();
    assert_eq!(
        answer["batchItemFailures"],
        json!([{"itemIdentifier": "102"}]),
        "{answer}"
    );
}
