//! `sam local invoke`, as a merchant runs it: SAM's own local machinery (it reads
//! `template.yaml`, builds its runtime image, runs AWS's Runtime Interface Emulator in a
//! container) runs each function's binary as built, with `events/env.json` and the endpoints of
//! the emulators through `--env-vars`, and every file of `events/` meant for the function. The
//! template is `template.yaml` with each `CodeUri` a folder holding the binary as `bootstrap`
//! and the host's architecture (`scripts/sam-local-template.py`).
//!
//! All six functions: ingest, fulfil, publish and the sweep against the emulators; reconcile
//! against the stand-in Paymos API and deliver to a receiver, both behind HTTPS (the two
//! clients speak plain HTTP to loopback only, and a container's loopback is not the host's),
//! with a certificate authority of the test's own trusted through `SSL_CERT_FILE`.
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

/// What `scripts/sam-local-engine.sh` found: the engine's settings and its gateway.
fn engine() -> HashMap<String, String> {
    let written = root().join("target/sam-local/engine.env");
    std::fs::read_to_string(&written)
        .unwrap_or_else(|_| {
            panic!(
                "no container engine for `sam local invoke`: run `make sam-local-engine` \
                 (scripts/sam-local-engine.sh says what is missing), then the tests again"
            )
        })
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// SAM with the engine `scripts/sam-local-engine.sh` set up, and the derived template.
struct Sam {
    engine: HashMap<String, String>,
    template: PathBuf,
    /// The derived template, a copy of each binary and the invocations' files; removed with
    /// the value (~300 MB a time).
    dir: TempDir,
}

impl Sam {
    fn new() -> Self {
        Self::trusting(None)
    }

    /// With `ca` (a PEM certificate authority) trusted by the functions instead of the image's
    /// bundle: a local HTTPS receiver stands in for the merchant's endpoint.
    fn trusting(ca: Option<&Path>) -> Self {
        let root = root();
        let engine = engine();
        let sam = root.join(".venv/bin/sam");
        assert!(
            sam.exists(),
            "{} is missing: `make deps` installs the SAM CLI",
            sam.display()
        );
        let dir = scratch("sam-local");
        let binaries = Path::new(env!("CARGO_BIN_EXE_paymos-ingest"))
            .parent()
            .unwrap();
        let derived = std::process::Command::new("python3")
            .arg(root.join("scripts/sam-local-template.py"))
            .arg(binaries)
            .arg(&engine["SAM_ARCH"])
            .arg(dir.path())
            .args(
                ca.map(|ca| vec![std::ffi::OsStr::new("--trust"), ca.as_os_str()])
                    .unwrap_or_default(),
            )
            .output()
            .expect("python3");
        assert!(
            derived.status.success(),
            "{}",
            String::from_utf8_lossy(&derived.stderr)
        );
        Self {
            template: dir.path().join("template.yaml"),
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
            self.dir.path().join(format!("{id}-event.json")),
            self.dir.path().join(format!("{id}-env.json")),
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
        // The function's log lines, shown when the test fails.
        eprintln!(
            "{function} on {name}:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
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
        ("STATE_TABLE", stack.table("StateTable").to_owned()),
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
        // A stack of one project: the fixtures' payments name none, which a stack listing
        // none (or several) cannot key.
        ("PAYMOS_PROJECT_IDS", "prj_1".to_owned()),
    ]);
    let secrets = secrets_manager(HashMap::new()).await;
    let mut env = env_json("FulfilFunction", &names);
    env.extend(sam.endpoints(&secrets));
    let read = |name: &str| std::fs::read_to_string(root().join("events").join(name)).unwrap();
    // Recorded by ingest before fulfil receives them.
    for name in ["fulfil-single.json", "fulfil-batch-with-poison.json"] {
        aws.record_work_items(stack.table("DeliveriesTable"), &read(name), 0)
            .await;
    }

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
        assert_eq!(e["EventBusName"], "paymos-inbox-local-payments");
    }
}

#[tokio::test]
async fn sam_local_invoke_sweep_sends_a_stranded_delivery_again() {
    use paymos_inbox_core::roads::ingest::DeliveryLedger as _;
    let sam = Sam::new();
    let aws = Aws::new();
    let stack = aws.stack().await;
    let hour_ago = paymos_inbox_lambda::now_ms() - 3_600_000;
    let delivery = recorded_delivery(
        &invoice_paid("evt_sam_stranded", "inv_sam_stranded"),
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
    let names = HashMap::from([
        (
            "DELIVERIES_TABLE",
            stack.table("DeliveriesTable").to_owned(),
        ),
        ("STATE_TABLE", stack.table("StateTable").to_owned()),
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

#[tokio::test]
async fn sam_local_invoke_reconcile_finds_a_missing_invoice_and_with_apply_fulfils_it_once() {
    use paymos_inbox_testkit::paymos_fake::{Answer, FakePaymos, KEY, SECRET, invoice};
    let mut tls = Tls::new();
    let aws = Aws::new();
    let stack = aws.stack().await;
    let fake = FakePaymos::start().await;
    let api = tls.front(&fake.url).await;
    let mut paid = invoice(
        "inv_sam_missing",
        "paid",
        ("25.00", "USDT"),
        ("25.00", "USDT"),
    );
    paid["created_at"] = json!(paymos_inbox_lambda::now_ms() / 1000 - 600);
    fake.answer("inv_sam_missing", Answer::Invoices(vec![paid]));
    let names = HashMap::from([
        (
            "DELIVERIES_TABLE",
            stack.table("DeliveriesTable").to_owned(),
        ),
        ("STATE_TABLE", stack.table("StateTable").to_owned()),
        // The stand-in Paymos answers a live project's key.
        ("PAYMOS_ENVIRONMENT", "live".to_owned()),
        ("PAYMOS_PROJECT_IDS", "prj_1".to_owned()),
    ]);
    let mut env = env_json("ReconcileFunction", &names);
    let secret_id = env
        .iter()
        .find(|(k, _)| k == "PAYMOS_API_SECRETS_ID")
        .map(|(_, v)| v.clone())
        .expect("env.json names the API key's secret");
    let secrets = secrets_manager(HashMap::from([(
        secret_id,
        json!({"api_key": KEY, "api_secret": SECRET}).to_string(),
    )]))
    .await;
    env.extend(tls.sam.endpoints(&secrets));
    // Declared by template.yaml (LocalPaymosApiEndpoint), so `--env-vars` sets it. The Paymos
    // client, as the hand-off, speaks HTTPS only (plain HTTP to loopback alone).
    env.push(("PAYMOS_API_BASE_URL".into(), api));
    env.push(tls.trust());
    let sam = &tls.sam;
    let fulfilments = || async {
        aws.scan(stack.table("StateTable"))
            .await
            .into_iter()
            .filter(|i| get_s(i, "kind") == "fulfilment")
            .count()
    };
    // Report only (env.json's RECONCILE_APPLY): the run fails, which is the alarm's signal.
    let report = sam
        .invoke(
            "ReconcileFunction",
            "(a scheduled run, report only)",
            "{}",
            &env,
        )
        .await;
    let said = report["errorMessage"].as_str().unwrap_or_default();
    assert!(said.contains("1 missing"), "{report}");
    assert_eq!(fulfilments().await, 0, "a report changes nothing");
    for (k, v) in &mut env {
        if k == "RECONCILE_APPLY" {
            "true".clone_into(v);
        }
    }
    let applied = sam
        .invoke(
            "ReconcileFunction",
            "(a scheduled run, applying)",
            "{}",
            &env,
        )
        .await;
    assert_eq!(
        applied["applied"]["inv_sam_missing"], "fulfilled",
        "{applied}"
    );
    let again = sam
        .invoke("ReconcileFunction", "(the next run)", "{}", &env)
        .await;
    assert_eq!(again["matched"], 1, "{again}");
    assert_eq!(fulfilments().await, 1, "fulfilled once, whatever the runs");
}

/// A certificate authority and a server certificate it signs for `host` (the address at which
/// the containers reach the host), made with the openssl command line: `(ca, cert, key)`.
fn certificates(dir: &Path, host: &str) -> (PathBuf, PathBuf, PathBuf) {
    let openssl = |args: &[&str]| {
        let out = std::process::Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("the openssl command line (Debian's openssl package)");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
    ];
    openssl(
        &[
            &["req", "-x509"][..],
            &ec,
            &[
                "-keyout",
                "ca.key",
                "-out",
                "ca.pem",
                "-days",
                "1",
                "-subj",
                "/CN=paymos-inbox test CA",
            ],
        ]
        .concat(),
    );
    openssl(
        &[
            &["req"][..],
            &ec,
            &[
                "-keyout",
                "receiver.key",
                "-out",
                "receiver.csr",
                "-subj",
                "/CN=receiver",
            ],
        ]
        .concat(),
    );
    let san = if host.parse::<std::net::IpAddr>().is_ok() {
        format!("IP:{host}")
    } else {
        format!("DNS:{host}")
    };
    std::fs::write(
        dir.join("receiver.ext"),
        format!("subjectAltName={san}\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"),
    )
    .unwrap();
    openssl(&[
        "x509",
        "-req",
        "-in",
        "receiver.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "1",
        "-extfile",
        "receiver.ext",
        "-out",
        "receiver.pem",
    ]);
    (
        dir.join("ca.pem"),
        dir.join("receiver.pem"),
        dir.join("receiver.key"),
    )
}

/// HTTPS in front of a server of this test kit on the host's loopback (`upstream`, a port):
/// Python's own TLS terminating every connection with `cert` and piping it through. Its port.
async fn https_in_front_of(upstream: u16, cert: &Path, key: &Path) -> (u16, tokio::process::Child) {
    use tokio::io::AsyncBufReadExt as _;
    const PROXY: &str = r#"
import asyncio, ssl, sys
cert, key, upstream = sys.argv[1], sys.argv[2], int(sys.argv[3])
async def pipe(reader, writer):
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    finally:
        writer.close()
async def serve(reader, writer):
    up_reader, up_writer = await asyncio.open_connection("127.0.0.1", upstream)
    await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer), return_exceptions=True)
async def main():
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=tls)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()
asyncio.run(main())
"#;
    let mut child = tokio::process::Command::new("python3")
        .args(["-c", PROXY])
        .arg(cert)
        .arg(key)
        .arg(upstream.to_string())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("python3");
    let mut line = String::new();
    tokio::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .await
        .unwrap();
    (line.trim().parse().expect("the proxy's port"), child)
}

fn port_of(url: &str) -> u16 {
    url.trim_end_matches('/')
        .rsplit(':')
        .next()
        .and_then(|p| p.split('/').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("a port in {url}"))
}

/// HTTPS for a server of this test kit, as a container reaches it: a certificate for the
/// engine's gateway, its authority trusted by the functions (`SSL_CERT_FILE` in the derived
/// template, and in `--env-vars`: SAM gives a declared variable the shell's value before the
/// template's).
struct Tls {
    sam: Sam,
    cert: PathBuf,
    key: PathBuf,
    gateway: String,
    proxies: Vec<tokio::process::Child>,
    /// The authority, certificate and key; removed with the value.
    _dir: TempDir,
}

impl Tls {
    fn new() -> Self {
        let dir = scratch("sam-tls");
        let gateway = engine()["HOST_GATEWAY"].clone();
        let (ca, cert, key) = certificates(dir.path(), &gateway);
        Self {
            _dir: dir,
            sam: Sam::trusting(Some(&ca)),
            cert,
            key,
            gateway,
            proxies: Vec::new(),
        }
    }

    /// `https://GATEWAY:PORT` in front of the loopback server at `url`.
    async fn front(&mut self, url: &str) -> String {
        let (port, proxy) = https_in_front_of(port_of(url), &self.cert, &self.key).await;
        self.proxies.push(proxy);
        format!("https://{}:{port}", self.gateway)
    }

    fn trust(&self) -> (String, String) {
        ("SSL_CERT_FILE".into(), "/var/task/local-ca.pem".into())
    }
}

#[tokio::test]
async fn sam_local_invoke_deliver_posts_a_signed_message_the_reference_library_verifies() {
    use paymos_inbox_testkit::standard_webhooks::verifies_with;
    const SIGNING: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let mut tls = Tls::new();
    let (url, received) = super::deliver::receiver(204).await;
    let endpoint = tls.front(&url).await;
    let aws = Aws::new();
    let stack = aws.stack().await;
    let names = HashMap::from([
        (
            "WEBHOOK_QUEUE_URL",
            stack.queue("WebhookDeliveryQueue").to_owned(),
        ),
        (
            "WEBHOOK_DLQ_URL",
            stack.queue("WebhookTargetDeadLetterQueue").to_owned(),
        ),
        (
            "WEBHOOK_TARGET_URL",
            format!("{endpoint}/paymos-inbox/hooks"),
        ),
    ]);
    let mut env = env_json("DeliverFunction", &names);
    let secret_id = env
        .iter()
        .find(|(k, _)| k == "WEBHOOK_SIGNING_SECRET_ID")
        .map(|(_, v)| v.clone())
        .expect("env.json names the signing secret");
    let secrets = secrets_manager(HashMap::from([(
        secret_id,
        json!({ "key": SIGNING }).to_string(),
    )]))
    .await;
    env.extend(tls.sam.endpoints(&secrets));
    env.push(tls.trust());
    let event = std::fs::read_to_string(root().join("events/deliver-order-paid.json")).unwrap();
    let answer = tls
        .sam
        .invoke("DeliverFunction", "deliver-order-paid.json", &event, &env)
        .await;
    assert_eq!(answer["batchItemFailures"], json!([]), "{answer}");
    let posts = received.lock().unwrap().clone();
    assert_eq!(posts.len(), 1, "posted once: {posts:#?}");
    let (headers, body) = &posts[0];
    let payload: Value = serde_json::from_str(body).unwrap();
    assert_eq!(
        (&payload["type"], &payload["data"]["order_id"]),
        (&json!("Order Paid"), &json!("order-1001")),
        "{body}"
    );
    // Signed at the invocation's clock: the reference library checks the timestamp too.
    verifies_with(SIGNING, headers, body).expect("the standardwebhooks package verifies it");
    assert!(
        verifies_with(SIGNING, headers, &body.replace("25.00", "0.01")).is_err(),
        "a tampered body does not"
    );
    assert!(
        aws.drain(stack.queue("WebhookTargetDeadLetterQueue"))
            .await
            .is_empty()
    );
}
