//! `sam local invoke`, as a merchant runs it: SAM's own local machinery (it reads
//! `template.yaml`, builds its runtime image, runs AWS's Runtime Interface Emulator in a
//! container) runs each function's binary as built, with `events/env.json` and the endpoints of
//! the emulators through `--env-vars`, and every file of `events/` meant for the function. The
//! template is `template.yaml` with each `CodeUri` a folder holding the binary as `bootstrap`
//! and the host's architecture (`scripts/sam-local-template.py`).
//!
//! The container engine (Docker, or podman with a stand-in base image) is set up by
//! `scripts/sam-local-engine.sh` (`make sam-local-engine`, run by `make test`); without it these
//! tests fail and say so. Every answer is also written to `target/sam-local/answers.txt`, which
//! `make test` prints.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::binaries::{env_json, eventbridge, fresh_ingest_events, secrets_manager};
use paymos_inbox_testkit::*;

fn root() -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).to_path_buf()
}

/// SAM with the engine `scripts/sam-local-engine.sh` set up, and the derived template.
struct Sam {
    engine: HashMap<String, String>,
    template: PathBuf,
    dir: PathBuf,
}

impl Sam {
    fn new() -> Self {
        let root = root();
        let written = root.join("target/sam-local/engine.env");
        let engine: HashMap<String, String> = std::fs::read_to_string(&written)
            .unwrap_or_else(|_| {
                panic!(
                    "no container engine for `sam local invoke`: run `make sam-local-engine` \
                     (scripts/sam-local-engine.sh says what is missing), then the tests again"
                )
            })
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        let sam = root.join(".venv/bin/sam");
        assert!(
            sam.exists(),
            "{} is missing: `make deps` installs the SAM CLI",
            sam.display()
        );
        let dir = std::env::temp_dir().join(unique("sam-local"));
        std::fs::create_dir_all(&dir).unwrap();
        let binaries = Path::new(env!("CARGO_BIN_EXE_paymos-ingest"))
            .parent()
            .unwrap();
        let derived = std::process::Command::new("python3")
            .arg(root.join("scripts/sam-local-template.py"))
            .arg(binaries)
            .arg(&engine["SAM_ARCH"])
            .arg(&dir)
            .output()
            .expect("python3");
        assert!(
            derived.status.success(),
            "{}",
            String::from_utf8_lossy(&derived.stderr)
        );
        Self {
            template: dir.join("template.yaml"),
            engine,
            dir,
        }
    }

    /// A loopback URL as a container reaches it: through the engine's gateway.
    fn reachable(&self, url: &str) -> String {
        url.replace("127.0.0.1", &self.engine["HOST_GATEWAY"])
    }

    /// The endpoints of the emulators this test kit started, for `--env-vars`.
    fn endpoints(&self, secrets: &str) -> Vec<(String, String)> {
        let (dynamodb, sqs) = endpoint_urls();
        vec![
            (
                "AWS_ENDPOINT_URL_DYNAMODB".into(),
                self.reachable(&dynamodb),
            ),
            ("AWS_ENDPOINT_URL_SQS".into(), self.reachable(&sqs)),
            (
                "AWS_ENDPOINT_URL_SECRETS_MANAGER".into(),
                self.reachable(secrets),
            ),
        ]
    }

    /// `sam local invoke FUNCTION -e EVENT --env-vars ENV`: the function's answer (the first
    /// JSON value SAM prints; its logs follow it).
    async fn invoke(
        &self,
        function: &str,
        name: &str,
        event: &str,
        env: &[(String, String)],
    ) -> Value {
        let id = unique("inv");
        let (event_file, env_file) = (
            self.dir.join(format!("{id}-event.json")),
            self.dir.join(format!("{id}-env.json")),
        );
        std::fs::write(&event_file, event).unwrap();
        let vars: serde_json::Map<String, Value> = env
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        std::fs::write(&env_file, json!({ function: vars }).to_string()).unwrap();
        let mut sam = tokio::process::Command::new(root().join(".venv/bin/sam"));
        sam.args(["local", "invoke", function, "-t"])
            .arg(&self.template)
            .arg("-e")
            .arg(&event_file)
            .arg("--env-vars")
            .arg(&env_file)
            .env("DOCKER_HOST", &self.engine["DOCKER_HOST"])
            .env("SAM_CLI_TELEMETRY", "0")
            .env("AWS_REGION", "us-east-1")
            // With keys set, SAM asks STS for the account id (seconds, and no AWS here).
            .env_remove("AWS_ACCESS_KEY_ID")
            .env_remove("AWS_SECRET_ACCESS_KEY")
            .env_remove("AWS_PROFILE");
        if self.engine["SAM_SKIP_PULL"] == "true" {
            sam.arg("--skip-pull-image");
        }
        let out = sam.output().await.expect("the SAM CLI runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let answer = serde_json::Deserializer::from_str(&stdout)
            .into_iter::<Value>()
            .next()
            .and_then(Result::ok)
            .unwrap_or_else(|| {
                panic!(
                    "{function} on {name}: no answer from sam local invoke\nstdout: {stdout}\nstderr: {}",
                    String::from_utf8_lossy(&out.stderr)
                )
            });
        record(function, name, &answer);
        answer
    }
}

/// Appends one answer to `target/sam-local/answers.txt`.
fn record(function: &str, name: &str, answer: &Value) {
    use std::io::Write as _;
    let path = root().join("target/sam-local/answers.txt");
    let shown = match answer.get("statusCode") {
        Some(status) => format!("{status} {}", answer["body"].as_str().unwrap_or_default()),
        None => answer.to_string(),
    };
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    writeln!(file, "{function:<18} {name:<36} {shown}").unwrap();
}

fn status_and_body(answer: &Value) -> (u64, Value) {
    (
        answer["statusCode"].as_u64().unwrap_or_default(),
        serde_json::from_str(answer["body"].as_str().unwrap_or("{}")).unwrap_or_default(),
    )
}

#[tokio::test]
async fn sam_local_invoke_ingest_answers_every_event_as_on_aws() {
    let sam = Sam::new();
    let aws = Aws::new();
    let stack = aws.stack().await;
    let names = HashMap::from([
        (
            "DELIVERIES_TABLE",
            stack.table("DeliveriesTable").to_owned(),
        ),
        ("WORK_QUEUE_URL", stack.queue("WorkQueue").to_owned()),
    ]);
    let mut env = env_json("IngestFunction", &names);
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
    env.extend(sam.endpoints(&secrets));

    let expected: HashMap<&str, (u64, &str)> = HashMap::from([
        ("ingest-invoice-paid.json", (200, "new")),
        ("ingest-invoice-confirming.json", (200, "new")),
        ("ingest-invoice-paid-over.json", (200, "new")),
        ("ingest-withdrawal-completed.json", (200, "new")),
        ("ingest-deposit-confirmed.json", (200, "new")),
        ("ingest-base64-body.json", (200, "new")),
        ("ingest-rotation-two-v1.json", (200, "new")),
        ("ingest-bad-signature.json", (401, "signature_mismatch")),
        (
            "ingest-stale-timestamp.json",
            (401, "timestamp_outside_tolerance"),
        ),
        ("ingest-id-mismatch.json", (400, "webhook_id_mismatch")),
    ]);
    let mut resent = 0;
    let mut events = fresh_ingest_events();
    assert_eq!(
        events.len(),
        expected.len(),
        "every file has an expected answer"
    );
    // The paid invoice first, so that its repeat comes while the first attempt's lease runs.
    events.sort_by_key(|(name, _)| name != "ingest-invoice-paid.json");
    for (name, event) in &events {
        let (status, body) =
            status_and_body(&sam.invoke("IngestFunction", name, event, &env).await);
        let (want, said) = expected[name.as_str()];
        assert_eq!(status, want, "{name}: {body}");
        let word = if want == 200 {
            &body["status"]
        } else {
            &body["error"]
        };
        assert_eq!(word, said, "{name}: {body}");
        if name != "ingest-invoice-paid.json" {
            continue;
        }
        // The same delivery again: recorded once; the sender is told to retry while the
        // first attempt's lease runs (nothing fulfils it here), or, past it, that it is a
        // duplicate (and its work item is sent again, as a retry past the lease must).
        let (status, body) =
            status_and_body(&sam.invoke("IngestFunction", name, event, &env).await);
        assert!(
            (status, body["error"].as_str()) == (503, Some("in_progress"))
                || (status, body["status"].as_str()) == (200, Some("duplicate")),
            "again: {status} {body}"
        );
        resent = usize::from(status == 200);
    }
    assert_eq!(
        aws.scan(stack.table("DeliveriesTable"))
            .await
            .iter()
            .filter(|i| i.contains_key("state"))
            .count(),
        7,
        "the seven good ones, once each"
    );
    assert_eq!(aws.drain(stack.queue("WorkQueue")).await.len(), 7 + resent);
}

#[tokio::test]
async fn sam_local_invoke_fulfil_applies_the_batches_and_reports_only_the_poison() {
    let sam = Sam::new();
    let aws = Aws::new();
    let stack = aws.stack().await;
    let names = HashMap::from([
        (
            "DELIVERIES_TABLE",
            stack.table("DeliveriesTable").to_owned(),
        ),
        ("STATE_TABLE", stack.table("StateTable").to_owned()),
    ]);
    let secrets = secrets_manager(HashMap::new()).await;
    let mut env = env_json("FulfilFunction", &names);
    env.extend(sam.endpoints(&secrets));
    let read = |name: &str| std::fs::read_to_string(root().join("events").join(name)).unwrap();

    let single = sam
        .invoke(
            "FulfilFunction",
            "fulfil-single.json",
            &read("fulfil-single.json"),
            &env,
        )
        .await;
    assert_eq!(single["batchItemFailures"], json!([]), "{single}");
    let batch = read("fulfil-batch-with-poison.json");
    let poison = serde_json::from_str::<Value>(&batch).unwrap()["Records"][4]["messageId"].clone();
    let answer = sam
        .invoke(
            "FulfilFunction",
            "fulfil-batch-with-poison.json",
            &batch,
            &env,
        )
        .await;
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
}

#[tokio::test]
async fn sam_local_invoke_publish_sends_each_fact_to_the_bus() {
    let sam = Sam::new();
    let received: Arc<Mutex<Vec<Value>>> = Arc::default();
    let bus = eventbridge(received.clone()).await;
    let secrets = secrets_manager(HashMap::new()).await;
    let mut env = env_json("PublisherFunction", &HashMap::new());
    env.extend(sam.endpoints(&secrets));
    env.push(("AWS_ENDPOINT_URL_EVENTBRIDGE".into(), sam.reachable(&bus)));
    let batch = std::fs::read_to_string(root().join("events/publish-stream.json")).unwrap();
    let answer = sam
        .invoke("PublisherFunction", "publish-stream.json", &batch, &env)
        .await;
    assert_eq!(answer["batchItemFailures"], json!([]), "{answer}");
    let sent = received.lock().unwrap().clone();
    let types: Vec<&str> = sent
        .iter()
        .map(|e| e["DetailType"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        ["Order Paid", "Invoice Closed", "Deposit Credited"],
        "{sent:#?}"
    );
    for e in &sent {
        assert_eq!(e["EventBusName"], "paymos-inbox-local-payments");
    }
}

#[tokio::test]
async fn sam_local_invoke_sweep_sends_a_stranded_delivery_again() {
    use paymos_inbox_core::ingest::DeliveryLedger as _;
    let sam = Sam::new();
    let aws = Aws::new();
    let stack = aws.stack().await;
    let hour_ago = paymos_inbox_lambda::now_ms() - 3_600_000;
    let delivery = recorded_delivery(
        &invoice_paid("evt_sam_stranded", "inv_sam_stranded"),
        paymos_inbox_core::signature::Environment::Live,
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
    let names = HashMap::from([
        (
            "DELIVERIES_TABLE",
            stack.table("DeliveriesTable").to_owned(),
        ),
        ("WORK_QUEUE_URL", stack.queue("WorkQueue").to_owned()),
    ]);
    let secrets = secrets_manager(HashMap::new()).await;
    let mut env = env_json("SweepFunction", &names);
    env.extend(sam.endpoints(&secrets));
    // What EventBridge Scheduler sends.
    let answer = sam
        .invoke("SweepFunction", "(a scheduled run)", "{}", &env)
        .await;
    assert_eq!(
        (answer["found"].as_u64(), answer["resent"].as_u64()),
        (Some(1), Some(1)),
        "{answer}"
    );
    assert_eq!(aws.drain(stack.queue("WorkQueue")).await.len(), 1);
}
