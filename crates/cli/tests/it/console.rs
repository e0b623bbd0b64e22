//! `paymos-inbox console` in a real browser: Debian's chromium, headless, driven by npm's
//! playwright-core (`console.mjs`), against `dev` with deliveries seeded by `send`. Never
//! skipped: without chromium or playwright-core it fails, saying what to install.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use paymos_inbox_aws::dynamodb::DynamoResources;
use serde_json::Value;
use tokio::io::AsyncBufReadExt as _;

use paymos_inbox_testkit::*;

const CHROMIUM: &str = "/usr/bin/chromium";

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The browser and its driver, or a failure naming what to install.
fn browser_installed() {
    assert!(
        Path::new(CHROMIUM).exists(),
        "the console's browser tests need Debian's chromium package at {CHROMIUM}: `make browser` (apt-get install chromium)"
    );
    assert!(
        workspace().join("node_modules/playwright-core").is_dir(),
        "the console's browser tests need npm's playwright-core: `make deps` (npm ci)"
    );
}

/// The command line's exit code, stdout and stderr.
fn cli(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_paymos-inbox"))
        .args(args)
        .env_remove("PAYMOS_WEBHOOK_SECRET")
        .env_remove("AWS_ENDPOINT_URL_DYNAMODB")
        .env_remove("AWS_ENDPOINT_URL_SQS")
        .env_remove("PAYMOS_API_KEY")
        .env_remove("PAYMOS_API_SECRET")
        .output()
        .expect("run paymos-inbox");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

async fn run(args: Vec<String>) -> (Option<i32>, String, String) {
    tokio::task::spawn_blocking(move || cli(&args.iter().map(String::as_str).collect::<Vec<_>>()))
        .await
        .unwrap()
}

fn args(words: &[&str], info: &str) -> Vec<String> {
    words
        .iter()
        .copied()
        .chain(["--dev-info", info])
        .map(str::to_owned)
        .collect()
}

/// How many of each kind `exceptions --json` lists, and which resources.
async fn exceptions(info: &str) -> (BTreeMap<String, u64>, Vec<String>) {
    let (_, out, err) = run(args(&["exceptions", "--json"], info)).await;
    let mut counts = BTreeMap::new();
    let mut ids = Vec::new();
    for line in out.lines() {
        let e: Value = serde_json::from_str(line).unwrap_or_else(|_| panic!("{line}\n{err}"));
        *counts
            .entry(e["kind"].as_str().unwrap().to_owned())
            .or_insert(0) += 1;
        ids.push(
            e["resource_id"]
                .as_str()
                .or(e["event_id"].as_str())
                .unwrap_or("-")
                .to_owned(),
        );
    }
    (counts, ids)
}

#[tokio::test]
async fn a_non_loopback_bind_is_refused_before_anything_listens() {
    for address in ["0.0.0.0", "::", "192.168.1.10"] {
        let (code, out, err) = cli(&["console", "--bind", address, "--dev-info", "nowhere.json"]);
        assert_eq!(code, Some(2), "{address}: {out}{err}");
        assert!(out.is_empty(), "{address}: no URL printed: {out}");
        assert!(
            err.starts_with(&format!(
                "error: --bind {address}: the console listens on loopback only"
            )),
            "{err}"
        );
    }
}

#[tokio::test]
async fn a_held_payment_found_by_its_invoice_is_released_once_in_a_real_browser() {
    browser_installed();
    let dev = crate::tools::dev(None).await;
    let (_scratch_info, info) = crate::tools::info_file(&dev, "console-info");
    let (held, late) = ("inv_console_held", "inv_console_late");

    // Seeded by `send`: a payment of 25.00 for an order registered at 10.00 (held), a payment
    // after its invoice expired (paid late), and a dead letter.
    // The held payment names its customer: the console shows its body without them.
    let scratch_personal = scratch("personal");
    let personal = scratch_personal.path().join("personal.json");
    std::fs::write(
        &personal,
        r#"{"customer": {"email": "ann@example.com", "name": "Ann Example"}}"#,
    )
    .unwrap();
    let held_event = held_and_late(&info, (held, late), Some(&personal)).await;
    dead_letter(&dev, "inv_console_dlq").await;
    let (before, listed) = exceptions(&info).await;
    assert_eq!(before.get("held"), Some(&1), "{before:?}");
    assert_eq!(before.get("paid_late"), Some(&1), "{before:?}");
    assert!(listed.iter().any(|id| id == held), "{listed:?}");

    let state = DynamoResources::new(
        dev.dynamodb.clone(),
        &dev.info.tables["StateTable"],
        &dev.info.tables["DeliveriesTable"],
    );
    let fulfilments = async |invoice: &str| {
        state
            .fulfilments()
            .await
            .unwrap()
            .iter()
            .filter(|f| f.invoice_id == invoice)
            .count()
    };

    let mut console = tokio::process::Command::new(env!("CARGO_BIN_EXE_paymos-inbox"))
        .args(["console", "--actor", "alice", "--dev-info", &info])
        .env_remove("AWS_ENDPOINT_URL_DYNAMODB")
        .env_remove("AWS_ENDPOINT_URL_SQS")
        .env_remove("PAYMOS_API_KEY")
        .env_remove("PAYMOS_API_SECRET")
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("console starts");
    let mut lines = tokio::io::BufReader::new(console.stdout.take().unwrap()).lines();
    let url = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
        .await
        .expect("the console prints its URL")
        .unwrap()
        .expect("a URL line");
    let printed = url;
    let url = base(&printed);

    // Refused before any route: a plain client on the host that GETs the page, then POSTs
    // (it learned nothing to act with), and a request with a cookie but another site's Host
    // (a DNS-rebinding page): nothing changes.
    let plain = reqwest::Client::new();
    let page = plain.get(&url).send().await.unwrap();
    assert_eq!(page.status(), 403);
    let page = page.text().await.unwrap();
    assert!(page.contains("one-time login"), "{page}");
    let forged = serde_json::json!({"id": held, "reason": "forged", "override_amount": true});
    let without = plain
        .post(format!("{url}api/release"))
        .json(&forged)
        .send()
        .await
        .unwrap();
    assert_eq!(without.status(), 403);
    let rebound = plain
        .post(format!("{url}api/release"))
        .header(
            "host",
            format!(
                "rebind.example:{}",
                url.rsplit(':').next().unwrap().trim_end_matches('/')
            ),
        )
        .header("cookie", format!("paymos_console={}", "0".repeat(64)))
        .json(&forged)
        .send()
        .await
        .unwrap();
    assert_eq!(rebound.status(), 421);
    assert_eq!(
        fulfilments(held).await,
        0,
        "a refused request changed nothing"
    );

    let shots = workspace().join("docs");
    let driven = tokio::process::Command::new("node")
        .arg(workspace().join("crates/cli/tests/it/console.mjs"))
        .args([&printed, held, shots.to_str().unwrap(), &held_event])
        .env("CHROMIUM", CHROMIUM)
        .output()
        .await
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&driven.stdout);
    assert!(
        driven.status.success(),
        "the browser run failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&driven.stderr)
    );
    let seen: Value = serde_json::from_str(stdout.trim()).expect("the driver's JSON");
    assert_eq!(seen["page_errors"], Value::Null, "{seen}");

    // The browser's first visit spent the printed key: it holds the session in a cookie no
    // script reads and no other site sends, and the address bar no longer shows the key.
    assert_eq!(
        seen["url_after_login"].as_str(),
        Some(url.as_str()),
        "{seen}"
    );
    assert_eq!(seen["cookie"]["httpOnly"], true, "{seen}");
    assert_eq!(seen["cookie"]["sameSite"], "Strict", "{seen}");
    assert_eq!(seen["script_sees_cookie"], false, "{seen}");
    let again = plain.get(&printed).send().await.unwrap();
    assert_eq!(again.status(), 403, "the printed URL logs in once");
    let http = with_cookie(seen["cookie"]["value"].as_str().unwrap());
    let api_home = &seen["api_home"];
    let story = &seen["api_story"];
    // The page's counts are `exceptions --json`'s.
    assert_eq!(
        api_home["total"].as_u64(),
        Some(before.values().sum::<u64>())
    );
    assert_eq!(api_home["header"]["dead_letters"], 1, "{api_home}");
    assert_eq!(
        api_home["header"]["oldest_pending"],
        Value::Null,
        "{api_home}"
    );
    // dev has no CloudWatch: the header says so, not an error, and reads everything it lists.
    assert_eq!(
        api_home["header"]["alarms"],
        serde_json::json!({"none": "no alarms on dev"}),
        "{api_home}"
    );
    assert_eq!(api_home["header"]["not_read"], Value::Null, "{api_home}");

    // One delivery's story by its event id: its outcome, its invoice, its body redacted.
    let delivery = &story["deliveries_of_id"][0];
    assert_eq!(delivery["environment"], "sandbox", "{story}");
    assert_eq!(delivery["outcome"], "held", "{story}");
    assert!(
        !delivery["secret_label"].as_str().unwrap().is_empty(),
        "{story}"
    );
    assert!(delivery["received_at_ms"].as_u64().unwrap() > 0, "{story}");
    assert!(delivery["processed_at_ms"].as_u64().unwrap() > 0, "{story}");
    assert_eq!(story["not_read"], Value::Null, "{story}");
    let reached = &story["invoice"]["timeline"][0];
    assert_eq!(reached["what"], "reached paid", "{story}");
    assert_eq!(reached["by"], held_event, "{story}");
    assert_eq!(delivery["body"]["data"]["invoice_id"], held, "{story}");
    assert_eq!(
        delivery["body"]["data"]["order"]["amount"], "25.00",
        "{story}"
    );
    assert_eq!(
        delivery["body"]["data"]["customer"]["email"], "[redacted]",
        "{story}"
    );
    assert!(!story.to_string().contains("ann@example.com"), "{story}");
    assert!(!story.to_string().contains("Ann Example"), "{story}");
    assert_eq!(
        story["invoice"]["invoice"]["standing"], "held: paid, but not as the registered order says",
        "{story}"
    );
    assert_eq!(story["invoice"]["fulfilled"], false, "{story}");

    let page_counts: BTreeMap<String, u64> = seen["counts"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, n)| n.as_u64() != Some(0))
        .map(|(k, n)| (k.clone(), n.as_u64().unwrap()))
        .collect();
    assert_eq!(page_counts, before, "{seen}");
    assert_eq!(seen["total"].as_u64(), Some(before.values().sum::<u64>()));
    assert_eq!(seen["health"]["dead_letters"], "1", "{seen}");
    assert_eq!(seen["health"]["oldest_pending"], "none", "{seen}");
    assert_eq!(seen["health"]["alarms"], "no alarms on dev", "{seen}");
    assert_eq!(
        seen["health"]["last_reconciliation"], "never run clean",
        "{seen}"
    );
    // dev's identity may write: no read-only banner, no button disabled.
    assert_eq!(seen["banner_hidden"], true, "{seen}");
    assert_eq!(seen["disabled_buttons"], 0, "{seen}");
    assert!(
        seen["story"]
            .as_str()
            .unwrap()
            .contains("order-inv_console_held"),
        "{seen}"
    );

    let steps = seen["steps"].as_str().unwrap_or_default();
    assert!(
        steps.contains("reached paid") && steps.contains(&held_event),
        "the timeline names the status and the delivery: {seen}"
    );
    let facts = seen["facts"].as_str().unwrap_or_default();
    assert!(
        facts.contains("Payment Needs Review") && !facts.contains("Order Paid"),
        "a held payment's fact, no order paid yet: {seen}"
    );

    // Without the override, the domain's own sentence; with it, one fulfilment.
    let refusal = seen["refusal"].as_str().unwrap();
    assert!(
        refusal.contains("is not what order order-inv_console_held was registered for"),
        "{refusal}"
    );
    assert!(
        seen["released"].as_str().unwrap().ends_with(": fulfilled"),
        "{seen}"
    );
    assert_eq!(fulfilments(held).await, 1);
    let invoice = dev
        .dynamodb
        .get_item()
        .table_name(&dev.info.tables["StateTable"])
        .key("pk", AttributeValue::S(held.into()))
        .consistent_read(true)
        .send()
        .await
        .unwrap()
        .item
        .unwrap();
    assert_eq!(get_s(&invoice, "released_by"), "manual:alice");
    assert_eq!(
        get_s(&invoice, "release_reason"),
        "customer confirmed the price change by email"
    );

    // A second release: already final, and still one fulfilment; from a browser that never
    // logged in: 403.
    assert_eq!(seen["second"]["status"], 200, "{seen}");
    assert_eq!(seen["second"]["body"]["outcome"], "already_final", "{seen}");
    assert_eq!(seen["without_session"]["status"], 403, "{seen}");
    assert_eq!(fulfilments(held).await, 1);
    // The audit trail: the release that shipped names alice, her reason and the override,
    // on the page and in the table; the refused one before it is recorded as not done, in
    // the domain's words; the second click as what it changed (nothing: already final); the
    // one without the session is not recorded at all.
    let audit_row = seen["audit_row"].as_str().unwrap();
    for said in [
        "alice",
        "customer confirmed the price change by email",
        "fulfilled (amount overridden)",
    ] {
        assert!(audit_row.contains(said), "{said}: {audit_row}");
    }
    let mut releases: Vec<_> = state
        .recent_actions(100)
        .await
        .unwrap()
        .into_iter()
        .filter(|a| a.subject == held)
        .collect();
    releases.reverse();
    let recorded: Vec<(&str, Option<&str>, &str)> = releases
        .iter()
        .map(|a| (a.actor.as_str(), a.reason.as_deref(), a.result.as_str()))
        .collect();
    let refusal_said = format!(
        "not done: {}",
        refusal.trim_start_matches("release refused: ")
    );
    assert_eq!(
        recorded,
        [
            (
                "alice",
                Some("customer confirmed the price change by email"),
                refusal_said.as_str(),
            ),
            (
                "alice",
                Some("customer confirmed the price change by email"),
                "fulfilled (amount overridden)"
            ),
            ("alice", Some("again"), "already_final"),
        ]
    );

    // The redrive: its count shown before anything moved, then the message applied once.
    assert!(
        seen["redrive_offer"]
            .as_str()
            .unwrap()
            .contains("1 message will move from the dead-letter queue back to the work queue"),
        "{seen}"
    );
    assert_eq!(seen["redrive_count_after_first_click"], 1, "{seen}");
    let order_story = seen["order_story"].as_str().unwrap_or_default();
    assert!(
        order_story.contains(&format!("Fulfilled by invoice {held} on ")),
        "{seen}"
    );
    assert!(order_story.contains("Registered for 10"), "{seen}");
    assert!(
        seen["redrive_result"]
            .as_str()
            .unwrap()
            .contains("moved 1 message from"),
        "{seen}"
    );
    let mut redriven = 0;
    for _ in 0..100 {
        redriven = fulfilments("inv_console_dlq").await;
        if redriven > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(redriven, 1, "the redriven message was applied once");

    // The other actions, through the command line's functions and in its words.
    let act = async |action: &str, fields: Value, session: bool| {
        let client = if session { &http } else { &plain };
        let answer = client
            .post(format!("{url}api/{action}"))
            .json(&fields)
            .send()
            .await
            .unwrap();
        let status = answer.status().as_u16();
        (status, answer.json::<Value>().await.unwrap())
    };
    let t = true;
    let (status, body) = act("mark-paid", serde_json::json!({"id": "order-7"}), t).await;
    assert_eq!(
        (status, body["refused"].as_str()),
        (
            400,
            Some("\"order-7\": an invoice id is inv_ followed by letters, digits, _ or -")
        ),
        "{body}"
    );
    // Found by the attack on `dev`: a blank order id marked the invoice paid with no order
    // (`order_unknown`, listed), and one with spaces around it was another order than the
    // webhook's. Both are refused, as on the command line, and nothing is written.
    for (order_id, why) in [
        ("  ", "order_id is empty or only whitespace"),
        (" 9608 ", "order_id has spaces around it"),
    ] {
        let (status, body) = act(
            "mark-paid",
            serde_json::json!({"id": "inv_console_blank", "order_id": order_id}),
            t,
        )
        .await;
        assert_eq!(status, 400, "{body}");
        assert!(body["refused"].as_str().unwrap().starts_with(why), "{body}");
    }
    assert_eq!(fulfilments("inv_console_blank").await, 0);
    let (_, out, _) = run(args(&["exceptions", "--json"], &info)).await;
    assert!(!out.contains("inv_console_blank"), "nothing written: {out}");
    let (status, body) = act(
        "mark-paid",
        serde_json::json!({"id": "inv_console_manual", "order_id": "order-manual"}),
        t,
    )
    .await;
    assert_eq!(
        (status, body["outcome"].as_str()),
        (200, Some("fulfilled")),
        "{body}"
    );
    assert_eq!(fulfilments("inv_console_manual").await, 1);
    let (_, out, _) = run(args(
        &[
            "mark-paid",
            "inv_console_manual",
            "--actor",
            "bob",
            "--json",
        ],
        &info,
    ))
    .await;
    assert!(out.contains("\"outcome\":\"already_final\""), "{out}");
    let (status, body) = act("recheck", serde_json::json!({"id": late}), t).await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["refused"]
            .as_str()
            .unwrap()
            .starts_with("recheck asks Paymos' API"),
        "{body}"
    );
    let (status, body) = act("release", serde_json::json!({"id": late}), t).await;
    assert_eq!(status, 400, "a release needs a reason: {body}");
    assert_eq!(fulfilments(late).await, 0);
    let (status, body) = act(
        "release",
        serde_json::json!({"id": late, "reason": "paid in good faith"}),
        false,
    )
    .await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(fulfilments(late).await, 0);
    let (status, body) = act(
        "release",
        serde_json::json!({"id": late, "reason": "paid in good faith"}),
        t,
    )
    .await;
    assert_eq!(
        (status, body["outcome"].as_str()),
        (200, Some("fulfilled")),
        "{body}"
    );
    assert_eq!(fulfilments(late).await, 1);

    let (after, listed) = exceptions(&info).await;
    assert!(
        !listed.iter().any(|id| id == held || id == late),
        "{listed:?}"
    );
    assert_eq!(after.get("held"), None, "{after:?}");
    assert_eq!(after.get("paid_late"), None, "{after:?}");
    for shot in ["console-home.png", "console-timeline.png"] {
        let bytes = std::fs::read(shots.join(shot)).unwrap();
        assert!(bytes.starts_with(b"\x89PNG"), "{shot} is a PNG");
    }
    console.kill().await.unwrap();
}

/// A console on `dev` (its info file `info`) acting as alice, with `extra` flags: the process
/// (stopped when dropped), its URL (without the login), its page, and a client holding the
/// session's cookie, as the browser that visited the printed URL does.
struct Opened {
    _console: tokio::process::Child,
    url: String,
    page: String,
    http: reqwest::Client,
}

/// The printed URL without its one-time login: the console's own address.
pub fn base(printed: &str) -> String {
    printed.split('?').next().unwrap().to_owned()
}

/// A client whose every request carries the session's cookie.
pub fn with_cookie(secret: &str) -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        "cookie",
        format!("paymos_console={secret}").parse().unwrap(),
    );
    reqwest::Client::builder()
        .default_headers(headers)
        .build()
        .unwrap()
}

/// Visits the printed URL as a browser does the first time: the console answers with its
/// session's cookie and a redirect to its page. The client holding the cookie.
pub async fn log_in(printed: &str) -> reqwest::Client {
    let visit = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(printed)
        .send()
        .await
        .unwrap();
    assert_eq!(visit.status(), 303, "{printed}");
    let set = visit.headers()["set-cookie"].to_str().unwrap();
    let secret = set
        .strip_prefix("paymos_console=")
        .and_then(|rest| rest.split(';').next())
        .unwrap_or_else(|| panic!("{set}"));
    with_cookie(secret)
}

async fn open_console(info: &str, extra: &[&str]) -> Opened {
    let mut console = tokio::process::Command::new(env!("CARGO_BIN_EXE_paymos-inbox"))
        .args(["console", "--actor", "alice", "--dev-info", info])
        .args(extra)
        .env_remove("AWS_ENDPOINT_URL_DYNAMODB")
        .env_remove("AWS_ENDPOINT_URL_SQS")
        .env_remove("PAYMOS_API_KEY")
        .env_remove("PAYMOS_API_SECRET")
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("console starts");
    let mut lines = tokio::io::BufReader::new(console.stdout.take().unwrap()).lines();
    let printed = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
        .await
        .expect("the console prints its URL")
        .unwrap()
        .expect("a URL line");
    let http = log_in(&printed).await;
    let url = base(&printed);
    let page = http.get(&url).send().await.unwrap().text().await.unwrap();
    Opened {
        _console: console,
        url,
        page,
        http,
    }
}

impl Opened {
    async fn get(&self, path: &str) -> Value {
        self.http
            .get(format!("{}{path}", self.url))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// A started job (the answer to its POST) read back until it ends, as the page reads it:
    /// its last answer, and every one read while it ran.
    async fn followed(&self, started: &Value) -> (Value, Vec<Value>) {
        let job = started["job"]
            .as_u64()
            .unwrap_or_else(|| panic!("{started}"));
        let mut running = Vec::new();
        for _ in 0..600 {
            let read = self.get(&format!("api/jobs/{job}")).await;
            if read["done"] == true {
                return (read, running);
            }
            running.push(read);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("job {job} did not end in a minute: {running:?}");
    }

    /// An action in the session: its status and its answer.
    async fn act(&self, action: &str, fields: Value) -> (u16, Value) {
        let answer = self
            .http
            .post(format!("{}api/{action}", self.url))
            .json(&fields)
            .send()
            .await
            .unwrap();
        (answer.status().as_u16(), answer.json().await.unwrap())
    }
}

/// Seeded by `send` on `dev` (`info`): a payment of 25.00 for an order registered at 10.00
/// (`held`, its body carrying `held_data` where given), and a payment after its invoice expired
/// (`late`). The held payment's event id.
async fn held_and_late(info: &str, (held, late): (&str, &str), held_data: Option<&Path>) -> String {
    let order = format!("order-{held}");
    let register = [
        "orders",
        "register",
        &order,
        "--amount",
        "10.00",
        "--currency",
        "USDT",
    ];
    let (code, out, err) = run(args(&register, info)).await;
    assert_eq!(code, Some(0), "{out}{err}");
    let mut held_event = String::new();
    for (ty, resource) in [
        ("invoice.paid", held),
        ("invoice.expired", late),
        ("invoice.paid", late),
    ] {
        let mut words = vec![
            "send",
            "--type",
            ty,
            "--resource",
            resource,
            "--wait",
            "--json",
        ];
        if let (true, Some(data)) = (resource == held, held_data) {
            words.extend(["--data", data.to_str().unwrap()]);
        }
        let (_, out, err) = run(args(&words, info)).await;
        if resource == held {
            let sent: Value = serde_json::from_str(out.lines().next().unwrap_or_default())
                .unwrap_or_else(|_| panic!("send --json: {out}{err}"));
            held_event = sent["event_id"].as_str().unwrap_or_default().to_owned();
        }
        assert!(
            out.contains("\"applied\":true"),
            "{ty} {resource}: {out}{err}"
        );
    }
    held_event
}

/// A dead letter in `dev`'s work queue's dead-letter queue: a payment of `invoice`
/// (`evt_<invoice>`), as fulfil leaves one it failed to apply five times.
pub(crate) async fn dead_letter(dev: &paymos_inbox_local::dev::Dev, invoice: &str) {
    use paymos_inbox_core::roads::ingest::DeliveryLedger as _;
    let body = invoice_paid(&format!("evt_{invoice}"), invoice);
    let test = paymos_inbox_core::wire::signature::Environment::Test;
    // A recorded delivery's work item (its check queued with it: not listed as pending), as
    // only those reach the dead-letter queue.
    let ledger = paymos_inbox_aws::dynamodb::DynamoLedger::new(
        dev.dynamodb.clone(),
        &dev.info.tables["DeliveriesTable"],
        None,
    );
    let delivery = recorded_delivery(&body, test, paymos_inbox_lambda::now_ms());
    ledger.keep_body(&delivery).await.unwrap();
    ledger
        .record_listed(
            &delivery,
            0,
            paymos_inbox_core::roads::ingest::Listing::ByCheck,
        )
        .await
        .unwrap();
    dev.sqs
        .send_message()
        .queue_url(&dev.info.queues["DeadLetterQueue"])
        .message_body(work_item(&body, test).encode())
        .send()
        .await
        .unwrap();
}

/// `dev`, and its info file (removed with the scratch folder).
async fn dev_with_info(prefix: &str) -> (paymos_inbox_local::dev::Dev, String, TempDir) {
    let dev = crate::tools::dev(None).await;
    let scratch_info = scratch(prefix);
    let info = scratch_info.path().join("info.json");
    std::fs::write(&info, serde_json::to_string(&dev.info).unwrap()).unwrap();
    (dev, info.to_str().unwrap().to_owned(), scratch_info)
}

#[tokio::test]
async fn the_header_says_where_the_last_clean_reconciliation_ended_or_that_none_did() {
    use paymos_inbox_core::roads::fulfil::ResourceStore as _;
    let (dev, info, _scratch) = dev_with_info("console-reconciled").await;
    let console = open_console(&info, &[]).await;
    let header = &console.get("api/home").await["header"];
    let verdict = header["reconciliation"]["verdict"]
        .as_str()
        .unwrap_or_default();
    assert!(verdict.starts_with("never run clean"), "{header}");
    assert!(
        !header["not_read"].to_string().contains("reconciliation"),
        "{header}"
    );

    // What a clean scheduled run keeps, written through the store it writes with.
    let until = paymos_inbox_lambda::now_ms() / 1000 - 3600;
    let state = DynamoResources::new(
        dev.dynamodb.clone(),
        &dev.info.tables["StateTable"],
        &dev.info.tables["DeliveriesTable"],
    );
    state
        .write(&[paymos_inbox_core::money::write::reconciled(
            until,
            paymos_inbox_lambda::now_ms(),
        )])
        .await
        .unwrap();
    let reconciled = &console.get("api/home").await["header"]["reconciliation"];
    assert_eq!(reconciled["clean_until_ms"], until * 1000, "{reconciled}");
    assert!(
        (3600..3700).contains(&reconciled["age_secs"].as_u64().unwrap()),
        "{reconciled}"
    );
    assert!(
        reconciled["verdict"]
            .as_str()
            .unwrap()
            .starts_with("clean through "),
        "{reconciled}"
    );
}

#[tokio::test]
async fn parked_hand_off_events_wait_on_home_and_move_back_as_a_job_counted_first_and_audited() {
    let (dev, info, _scratch) = dev_with_info("console-parked").await;
    let (parked, posting) = (
        &dev.info.queues["WebhookTargetDeadLetterQueue"],
        &dev.info.queues["WebhookDeliveryQueue"],
    );
    for n in 0..2 {
        dev.sqs
            .send_message()
            .queue_url(parked)
            .message_body(format!(r#"{{"webhook-id": "fact_parked_{n}"}}"#))
            .send()
            .await
            .unwrap();
    }
    let depth = async |queue: &str| {
        paymos_inbox_aws::sqs::approximate_messages(&dev.sqs, queue)
            .await
            .unwrap()
    };
    let console = open_console(&info, &[]).await;

    // Home: its own group, as `exceptions --json` lists it, saying what to do.
    let (listed, _) = exceptions(&info).await;
    assert_eq!(listed.get("parked_handoff"), Some(&1), "{listed:?}");
    let home = console.get("api/home").await;
    let group = home["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["kind"] == "parked_handoff")
        .unwrap_or_else(|| panic!("{home}"));
    assert_eq!(group["count"], 1, "{home}");
    let item = &group["items"][0];
    assert!(
        item["why"]
            .as_str()
            .unwrap()
            .starts_with("2 events of the signed hand-off parked"),
        "{item}"
    );
    assert!(
        item["action"]
            .as_str()
            .unwrap()
            .ends_with("then press Move them back… under Parked hand-off events"),
        "{item}"
    );

    // The job: its count first; nothing moves without the confirmed count.
    let jobs = console.get("api/jobs").await;
    let offer = &jobs["events-redrive"];
    assert_eq!(offer["count"], 2, "{jobs}");
    assert_eq!(
        offer["sentence"],
        "2 messages will move from the hand-off's dead-letter queue back to the queue the deliver function posts from, at most 10 a second",
        "{jobs}"
    );
    let (status, body) = console
        .act("events-redrive", serde_json::json!({"id": "webhook-queue"}))
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(depth(parked).await, 2, "nothing moved without a count");

    let (status, body) = console
        .act(
            "events-redrive",
            serde_json::json!({"id": "webhook-queue", "count": 2}),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let (ended, _) = console.followed(&body).await;
    assert_eq!(ended["moved"], 2, "{ended}");
    assert_eq!(depth(parked).await, 0);
    assert_eq!(
        depth(posting).await,
        2,
        "back where the deliver function posts from"
    );

    // Recorded as the command line records `events redrive`: one more parked, moved back by
    // bob from the command line, and the two entries alike but for who and how many.
    dev.sqs
        .send_message()
        .queue_url(parked)
        .message_body(r#"{"webhook-id": "fact_parked_2"}"#)
        .send()
        .await
        .unwrap();
    let (code, out, err) = run(args(
        &["events", "redrive", "--actor", "bob", "--json"],
        &info,
    ))
    .await;
    assert_eq!(code, Some(0), "{out}{err}");
    let state = DynamoResources::new(
        dev.dynamodb.clone(),
        &dev.info.tables["StateTable"],
        &dev.info.tables["DeliveriesTable"],
    );
    let recorded: Vec<_> = state
        .recent_actions(10)
        .await
        .unwrap()
        .into_iter()
        .map(|a| (a.kind, a.actor, a.subject, a.result, a.count))
        .collect();
    let entry = |actor: &str, moved: u64| {
        (
            paymos_inbox_core::money::record::ActionKind::Redrive,
            actor.to_owned(),
            "webhook-queue".to_owned(),
            format!("moved {moved}"),
            Some(moved),
        )
    };
    assert_eq!(recorded, [entry("bob", 1), entry("alice", 2)]);
    let (listed, _) = exceptions(&info).await;
    assert_eq!(listed.get("parked_handoff"), None, "{listed:?}");
}

// Issue 40: a job runs in the console's background and says how far it got; before, the POST
// answered only when the whole job had ended, and the page showed nothing meanwhile.
#[tokio::test]
async fn a_paced_job_answers_at_once_shows_its_progress_refuses_a_second_and_is_audited_once() {
    let (dev, info, _scratch) = dev_with_info("console-job-progress").await;
    let (parked, posting) = (
        &dev.info.queues["WebhookTargetDeadLetterQueue"],
        &dev.info.queues["WebhookDeliveryQueue"],
    );
    for n in 0..3 {
        dev.sqs
            .send_message()
            .queue_url(parked)
            .message_body(format!(r#"{{"webhook-id": "fact_progress_{n}"}}"#))
            .send()
            .await
            .unwrap();
    }
    let console = open_console(&info, &[]).await;
    let job = serde_json::json!({"id": "webhook-queue", "count": 3, "per_second": 1});
    let (status, started) = console.act("events-redrive", job.clone()).await;
    assert_eq!(status, 202, "{started}");
    assert_eq!(
        (&started["action"], &started["count"], &started["done"]),
        (
            &serde_json::json!("events-redrive"),
            &serde_json::json!(3),
            &serde_json::json!(false)
        ),
        "{started}"
    );

    // One job at a time: another (of either kind) is refused while it runs, and listed.
    for (action, fields) in [
        ("events-redrive", job.clone()),
        (
            "redrive",
            serde_json::json!({"id": "work-queue", "count": 1}),
        ),
    ] {
        let (status, body) = console.act(action, fields).await;
        assert_eq!(status, 409, "{body}");
        assert!(
            body["refused"]
                .as_str()
                .unwrap()
                .contains("is still running: this console runs one job at a time"),
            "{body}"
        );
    }
    let jobs = console.get("api/jobs").await;
    assert_eq!(jobs["running"]["job"], started["job"], "{jobs}");

    let (ended, running) = console.followed(&started).await;
    assert!(
        running
            .iter()
            .any(|r| r["moved"].as_u64().is_some_and(|m| (1..3).contains(&m))),
        "some but not all moved was read before it ended: {running:?}"
    );
    assert!(
        running
            .iter()
            .all(|r| r["done"] == false && r["count"] == 3),
        "{running:?}"
    );
    assert_eq!(ended["moved"], 3, "{ended}");
    assert_eq!(ended["error"], Value::Null, "{ended}");
    assert!(
        ended["result"]
            .as_str()
            .unwrap()
            .starts_with("moved 3 messages from the hand-off's dead-letter queue"),
        "{ended}"
    );
    let depth = async |queue: &str| {
        paymos_inbox_aws::sqs::approximate_messages(&dev.sqs, queue)
            .await
            .unwrap()
    };
    assert_eq!((depth(parked).await, depth(posting).await), (0, 3));

    // Recorded once, when it ended, as `events redrive` records it.
    let state = DynamoResources::new(
        dev.dynamodb.clone(),
        &dev.info.tables["StateTable"],
        &dev.info.tables["DeliveriesTable"],
    );
    let recorded: Vec<_> = state
        .recent_actions(10)
        .await
        .unwrap()
        .into_iter()
        .map(|a| (a.kind, a.actor, a.subject, a.result, a.count))
        .collect();
    assert_eq!(
        recorded,
        [(
            paymos_inbox_core::money::record::ActionKind::Redrive,
            "alice".to_owned(),
            "webhook-queue".to_owned(),
            "moved 3".to_owned(),
            Some(3),
        )]
    );

    // Ended: nothing runs, a new job may start, and an unknown job is not found.
    assert_eq!(console.get("api/jobs").await["running"], Value::Null);
    let (status, body) = console
        .act(
            "redrive",
            serde_json::json!({"id": "work-queue", "count": 1}),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    console.followed(&body).await;
    let unknown = console
        .http
        .get(format!("{}api/jobs/99", console.url))
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status().as_u16(), 404);
}

/// A stand-in for DynamoDB that denies every request as IAM does, and the operations
/// (`X-Amz-Target`) it was asked for.
async fn denying_dynamodb(
    denied: &'static str,
) -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let asked = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = asked.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0_u8; 4096];
                loop {
                    let Ok(n) = stream.read(&mut buf).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    request.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&request).to_ascii_lowercase();
                    let Some(end) = text.find("\r\n\r\n") else {
                        continue;
                    };
                    let header = |name: &str| {
                        text.lines()
                            .find_map(|l| l.strip_prefix(name))
                            .map(|v| v.trim().to_owned())
                    };
                    let length = header("content-length:")
                        .and_then(|v| v.parse::<usize>().ok())
                        .unwrap_or(0);
                    if request.len() < end + 4 + length {
                        continue;
                    }
                    seen.lock()
                        .unwrap()
                        .push(header("x-amz-target:").unwrap_or_default());
                    request.drain(..end + 4 + length);
                    let body = serde_json::json!({
                        "__type": "com.amazon.coral.service#AccessDeniedException",
                        "message": denied,
                    })
                    .to_string();
                    let answer = format!(
                        "HTTP/1.1 400 Bad Request\r\ncontent-type: application/x-amz-json-1.0\r\ncontent-length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if stream.write_all(answer.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (url, asked)
}

#[tokio::test]
async fn a_console_that_may_not_write_says_what_is_missing_and_refuses_every_action_before_acting()
{
    let (_dev, info, _scratch) = dev_with_info("console-read-only").await;
    let meta = |page: &str| {
        page.split("name=\"console-read-only\" content=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .expect("the page says whether it is read-only")
            .to_owned()
    };

    // On dev the identity may write: no banner, and an action reaches its use case.
    let writable = open_console(&info, &[]).await;
    assert_eq!(meta(&writable.page), "", "{}", writable.page);
    let home = writable.get("api/home").await;
    assert_eq!(home["about"]["read_only"], Value::Null, "{home}");
    assert_eq!(home["about"]["write_unknown"], Value::Null, "{home}");
    let (status, body) = writable
        .act("release", serde_json::json!({"id": "inv_console_nothing"}))
        .await;
    assert_eq!(status, 400, "reached the release's own checks: {body}");

    // An identity IAM lets read but not write: the banner names what is missing, in AWS's
    // words, and every action is refused with it before any use case asks the table.
    let denied = "User: arn:aws:sts::123456789012:assumed-role/viewer/ann is not authorized to perform: dynamodb:UpdateItem on resource: arn:aws:dynamodb:us-east-1:123456789012:table/state";
    let (endpoint, asked) = denying_dynamodb(denied).await;
    let read_only = open_console(&info, &["--dynamodb-endpoint", &endpoint]).await;
    let sentence = format!(
        "read-only: this identity may not write the state table (dynamodb:UpdateItem): {denied}"
    );
    assert_eq!(meta(&read_only.page), sentence, "{}", read_only.page);
    let probed = asked.lock().unwrap().clone();
    assert_eq!(
        probed,
        ["dynamodb_20120810.updateitem"],
        "one probe at start"
    );
    for (action, fields) in [
        (
            "release",
            serde_json::json!({"id": "inv_1", "reason": "checked", "override_amount": true}),
        ),
        (
            "mark-paid",
            serde_json::json!({"id": "inv_1", "order_id": "order-1"}),
        ),
        ("recheck", serde_json::json!({"id": "inv_1"})),
        (
            "redrive",
            serde_json::json!({"id": "work-queue", "count": 1}),
        ),
        (
            "events-redrive",
            serde_json::json!({"id": "webhook-queue", "count": 1}),
        ),
        ("resend", serde_json::json!({"id": "stranded", "count": 1})),
        ("events-resend", serde_json::json!({"id": "inv_1"})),
    ] {
        let (status, body) = read_only.act(action, fields).await;
        assert_eq!(
            (status, body["refused"].as_str()),
            (403, Some(sentence.as_str())),
            "{action}"
        );
    }
    assert_eq!(
        asked.lock().unwrap().clone(),
        probed,
        "no action asked DynamoDB anything"
    );
}

// A stack deployed without `WebhookTargetUrl` has no hand-off queues: nothing is parked, and
// no job offers to move them (nor says a name is missing, as if the stack were too old).
#[tokio::test]
async fn a_stack_without_the_signed_hand_off_offers_no_parked_events_job() {
    let (mut dev, _, _scratch) = dev_with_info("console-no-hand-off").await;
    dev.info.queues.remove("WebhookDeliveryQueue");
    dev.info.queues.remove("WebhookTargetDeadLetterQueue");
    let scratch_info = scratch("console-no-hand-off-info");
    let info = scratch_info.path().join("info.json");
    std::fs::write(&info, serde_json::to_string(&dev.info).unwrap()).unwrap();
    let console = open_console(info.to_str().unwrap(), &[]).await;
    let jobs = console.get("api/jobs").await;
    assert_eq!(jobs["events-redrive"], Value::Null, "{jobs}");
    assert_eq!(jobs["redrive"]["count"], 0, "{jobs}");
    let home = console.get("api/home").await;
    let parked = home["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["kind"] == "parked_handoff")
        .map(|g| g["count"].clone());
    assert_eq!(parked, Some(serde_json::json!(0)), "{home}");
}

// A withdrawal, a deposit and an order found by their ids show their records (a GetItem by
// key each), where the search once said no read of them existed.
#[tokio::test]
async fn a_withdrawal_a_deposit_and_an_order_found_by_their_ids_show_their_records() {
    let (_dev, info, scratch) = dev_with_info("console-search").await;
    let (paid, order) = ("inv_search_paid", "order-inv_search_paid");
    let (code, out, err) = run(args(
        &[
            "orders",
            "register",
            order,
            "--amount",
            "25.00",
            "--currency",
            "USDT",
        ],
        &info,
    ))
    .await;
    assert_eq!(code, Some(0), "{out}{err}");
    for (ty, resource) in [
        ("invoice.confirming", paid),
        ("invoice.paid", paid),
        ("withdrawal.completed", "wdr_search_1"),
        ("payment_channel.deposit.confirmed", "pcd_search_1"),
    ] {
        let (_, out, err) = run(args(
            &[
                "send",
                "--type",
                ty,
                "--resource",
                resource,
                "--wait",
                "--json",
            ],
            &info,
        ))
        .await;
        assert!(
            out.contains("\"applied\":true"),
            "{ty} {resource}: {out}{err}"
        );
    }
    // A second payment of the same order (another invoice): it waits for a refund.
    let second = scratch.path().join("second-payment.json");
    std::fs::write(
        &second,
        format!(r#"{{"order":{{"external_id":"{order}","amount":"25.00","currency":"USDT"}}}}"#),
    )
    .unwrap();
    let (_, out, err) = run(args(
        &[
            "send",
            "--resource",
            "inv_search_twice",
            "--data",
            second.to_str().unwrap(),
            "--wait",
            "--json",
        ],
        &info,
    ))
    .await;
    assert!(out.contains("duplicate_payment"), "{out}{err}");
    let console = open_console(&info, &[]).await;
    let no_read = |story: &Value| {
        let said = story["not_read"].to_string();
        assert!(!said.contains("no read of"), "{story}");
    };

    // Each status it reached, in Paymos' time, with the delivery that moved it there as the
    // ledger recorded it.
    let steps = |story: &Value| -> Vec<(String, String, String)> {
        story["timeline"]
            .as_array()
            .unwrap_or_else(|| panic!("a timeline: {story}"))
            .iter()
            .map(|t| {
                let d = &t["delivery"];
                assert_eq!(d["event_id"], t["by"], "{story}");
                assert_eq!(d["environment"], "sandbox", "{story}");
                assert!(!d["secret_label"].as_str().unwrap().is_empty(), "{story}");
                assert!(d["received_at_ms"].as_u64().unwrap() > 0, "{story}");
                assert!(t["at_ms"].as_u64().unwrap() > 0, "{story}");
                let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
                (
                    text(&t["what"]),
                    text(&d["event_type"]),
                    text(&d["outcome"]),
                )
            })
            .collect()
    };
    let step = |what: &str, ty: &str, outcome: &str| (what.into(), ty.into(), outcome.into());
    let invoice = console.get(&format!("api/search?id={paid}")).await;
    assert_eq!(
        steps(&invoice),
        [
            step("reached confirming", "invoice.confirming", "updated"),
            step("reached paid", "invoice.paid", "fulfilled"),
        ],
        "{invoice}"
    );
    // The facts its records stand for, as the hand-off published them.
    let published = |story: &Value| -> Vec<String> {
        story["facts"]
            .as_array()
            .unwrap_or_else(|| panic!("facts: {story}"))
            .iter()
            .map(|f| {
                assert!(f["idempotency_key"].as_str().unwrap().len() > 8, "{story}");
                assert!(f["committed_at_ms"].as_u64().unwrap() > 0, "{story}");
                f["detail_type"].as_str().unwrap().to_owned()
            })
            .collect()
    };
    assert_eq!(published(&invoice), ["Order Paid"], "{invoice}");
    let withdrawal = console.get("api/search?id=wdr_search_1").await;
    assert_eq!(
        published(&withdrawal),
        ["Withdrawal Completed"],
        "{withdrawal}"
    );
    assert_eq!(
        steps(&withdrawal),
        [step("reached completed", "withdrawal.completed", "updated")]
    );
    assert_eq!(withdrawal["kind"], "withdrawal", "{withdrawal}");
    let record = &withdrawal["record"];
    assert_eq!(record["status"], "completed", "{withdrawal}");
    assert_eq!(record["amount"], "10.00", "{withdrawal}");
    assert_eq!(record["currency"], "USDT", "{withdrawal}");
    assert!(
        record["updated_at_ms"].as_u64().unwrap() > 0,
        "{withdrawal}"
    );
    assert_eq!(
        withdrawal["deliveries"],
        serde_json::json!([]),
        "{withdrawal}"
    );
    no_read(&withdrawal);

    let deposit = console.get("api/search?id=pcd_search_1").await;
    assert_eq!(deposit["kind"], "deposit", "{deposit}");
    let record = &deposit["record"];
    assert_eq!(
        steps(&deposit),
        [step(
            "reached confirmed",
            "payment_channel.deposit.confirmed",
            "credited"
        )]
    );
    assert_eq!(published(&deposit), ["Deposit Credited"], "{deposit}");
    assert_eq!(record["status"], "confirmed", "{deposit}");
    assert_eq!(record["credited"], true, "{deposit}");
    assert_eq!(record["net"], "99.00", "{deposit}");
    assert_eq!(record["currency"], "USDT", "{deposit}");
    assert!(record["updated_at_ms"].as_u64().unwrap() > 0, "{deposit}");
    no_read(&deposit);

    let unknown = console.get("api/search?id=wdr_never_sent").await;
    assert_eq!(unknown["record"], Value::Null, "{unknown}");

    let found = console.get(&format!("api/search?id={order}")).await;
    assert_eq!(found["kind"], "order", "{found}");
    let orders = found["orders"].as_array().unwrap();
    assert_eq!(orders.len(), 1, "dev applies one project: {found}");
    assert_eq!(orders[0]["project"], "prj_local", "{found}");
    let claim = &orders[0]["claim"];
    assert_eq!(claim["invoice_id"], paid, "{found}");
    assert!(
        claim["won_by"].as_str().unwrap().starts_with("evt_"),
        "{found}"
    );
    assert!(claim["paid_at_ms"].as_u64().unwrap() > 0, "{found}");
    assert_eq!(
        found["waiting_invoices"],
        serde_json::json!([{"invoice_id": "inv_search_twice", "standing": "a second payment: inv_search_paid fulfilled its order", "project": "prj_local"}]),
        "{found}"
    );
    let registered = &orders[0]["registered"];
    assert_eq!(registered["currency"], "USDT", "{found}");
    assert!(
        ["25", "25.00"].contains(&registered["amount"].as_str().unwrap()),
        "{found}"
    );
    no_read(&found);

    let nobodys = console.get("api/search?id=order-nobody-placed").await;
    assert_eq!(nobodys["orders"][0]["claim"], Value::Null, "{nobodys}");
    assert_eq!(nobodys["orders"][0]["registered"], Value::Null, "{nobodys}");
}

// Issue 49, defect 7, the console's door: on a stack of two projects, *Mark paid* naming
// another project than the invoice's record is refused with 409 and ships nothing, as is one
// naming none where the record knows none; the story shows the record's project, the home
// project's by its id.
#[tokio::test]
async fn the_consoles_mark_paid_naming_another_project_than_the_record_is_a_409() {
    let dev = crate::tools::dev_of(None, &["prj_local", "prj_b"]).await;
    let (_scratch_info, info) = crate::tools::info_file(&dev, "console-projects");
    let (code, out, err) = run(args(
        &[
            "send",
            "--type",
            "invoice.awaiting_payment",
            "--resource",
            "inv_home",
            "--wait",
        ],
        &info,
    ))
    .await;
    assert_eq!(code, Some(0), "{out}{err}");
    let console = open_console(&info, &[]).await;
    let (status, body) = console
        .act(
            "mark-paid",
            serde_json::json!({"id": "inv_home", "order_id": "1001", "project": "prj_b"}),
        )
        .await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["refused"]
            .as_str()
            .unwrap()
            .contains("of project prj_local, not prj_b"),
        "{body}"
    );
    let (status, body) = console
        .act(
            "mark-paid",
            serde_json::json!({"id": "inv_nowhere", "order_id": "1001"}),
        )
        .await;
    assert_eq!(status, 409, "{body}");
    let story = console.get("api/search?id=inv_home").await;
    assert_eq!(story["invoice"]["order"]["project"], "prj_local", "{story}");
    assert_eq!(story["fulfilled"], false, "{story}");
}

// A stack that lists no projects receives every project and keys each project's orders apart
// (`order_paid#<project>#<id>`). Its order view read only the claim of before projects
// (`order_paid#<id>`), so an order that shipped since showed "No invoice fulfilled it". The view
// now asks which project, as `mark-paid --project` does, and finds the order under it; an
// order shipped before the upgrade is found under any project, as fulfil refuses it again.
#[tokio::test]
async fn on_a_stack_that_lists_no_projects_the_order_view_finds_the_order_under_its_project() {
    let dev = crate::tools::dev_of(None, &[]).await;
    let (_scratch_info, info) = crate::tools::info_file(&dev, "console-unlisted");
    let (code, out, err) = run(args(
        &[
            "send",
            "--type",
            "invoice.paid",
            "--resource",
            "inv_unlisted",
            "--wait",
        ],
        &info,
    ))
    .await;
    assert_eq!(code, Some(0), "{out}{err}");
    // An order shipped before the upgrade: its claim under the order id alone.
    dev.dynamodb
        .put_item()
        .table_name(&dev.info.tables["StateTable"])
        .item("pk", AttributeValue::S("order_paid#order-old".into()))
        .item("kind", AttributeValue::S("order_payment".into()))
        .item("order_id", AttributeValue::S("order-old".into()))
        .item("invoice_id", AttributeValue::S("inv_old".into()))
        .item("won_by", AttributeValue::S("evt_old".into()))
        .item("paid_at", AttributeValue::N("1700000000000".into()))
        .send()
        .await
        .unwrap();
    let console = open_console(&info, &[]).await;

    let asked = console.get("api/search?id=order-inv_unlisted").await;
    assert_eq!(asked["kind"], "order", "{asked}");
    assert!(
        asked["project_needed"]
            .as_str()
            .is_some_and(|why| why.contains("every project")),
        "a stack of every project asks for the order's project: {asked}"
    );
    assert!(
        asked["orders"]
            .as_array()
            .unwrap()
            .iter()
            .all(|o| o["before_projects"] == true),
        "without a project only the claims of before projects are read: {asked}"
    );

    let found = console
        .get("api/search?id=order-inv_unlisted&project=prj_local")
        .await;
    assert_eq!(found["project_needed"], Value::Null, "{found}");
    let orders = found["orders"].as_array().unwrap();
    assert_eq!(orders.len(), 1, "{found}");
    assert_eq!(orders[0]["project"], "prj_local", "{found}");
    assert_eq!(
        orders[0]["claim"]["invoice_id"], "inv_unlisted",
        "shipped: {found}"
    );
    assert_eq!(orders[0]["claim"]["before_projects"], false, "{found}");

    let elsewhere = console
        .get("api/search?id=order-inv_unlisted&project=prj_b")
        .await;
    assert_eq!(elsewhere["orders"][0]["project"], "prj_b", "{elsewhere}");
    assert_eq!(
        elsewhere["orders"][0]["claim"],
        Value::Null,
        "another project's order of the same id is another order: {elsewhere}"
    );

    let old = console
        .get("api/search?id=order-old&project=prj_local")
        .await;
    assert_eq!(old["orders"][0]["claim"]["invoice_id"], "inv_old", "{old}");
    assert_eq!(old["orders"][0]["claim"]["before_projects"], true, "{old}");
}

// Issue 49 (attack F3), the console's door: an invoice whose events named two projects is
// held; *Release* without a project is refused (409) and ships nothing; naming the project
// the person checked (the console's *of project*) ships that project's order, once.
#[tokio::test]
async fn the_consoles_release_of_an_invoice_whose_events_named_two_projects_needs_its_project() {
    let dev = crate::tools::dev_of(None, &["prj_local", "prj_b"]).await;
    let (scratch_info, info) = crate::tools::info_file(&dev, "console-two-projects");
    for (event_type, project) in [
        ("invoice.awaiting_payment", "prj_b"),
        ("invoice.paid", "prj_local"),
    ] {
        let data = scratch_info.path().join(format!("{project}.json"));
        std::fs::write(
            &data,
            serde_json::json!({"project_id": project, "order": {"external_id": "1001"}})
                .to_string(),
        )
        .unwrap();
        let (code, out, err) = run(args(
            &[
                "send",
                "--type",
                event_type,
                "--resource",
                "inv_two",
                "--data",
                data.to_str().unwrap(),
                "--wait",
            ],
            &info,
        ))
        .await;
        assert!(
            code == Some(0) || event_type == "invoice.paid",
            "{out}{err}"
        );
    }
    let (kinds, resources) = exceptions(&info).await;
    assert_eq!(kinds.get("held"), Some(&1), "{kinds:?}");
    assert!(resources.contains(&"inv_two".to_owned()), "{resources:?}");
    let console = open_console(&info, &[]).await;
    let (status, body) = console
        .act(
            "release",
            serde_json::json!({"id": "inv_two", "reason": "checked at Paymos"}),
        )
        .await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["refused"].as_str().unwrap().contains("two projects"),
        "{body}"
    );
    let story = console.get("api/search?id=inv_two").await;
    assert_eq!(story["fulfilled"], false, "{story}");
    let (status, body) = console
        .act(
            "release",
            serde_json::json!({"id": "inv_two", "reason": "checked at Paymos", "project": "prj_b"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["outcome"], "fulfilled", "{body}");
    let story = console.get("api/search?id=inv_two").await;
    assert_eq!(story["fulfilled"], true, "{story}");
    assert_eq!(story["invoice"]["order"]["project"], "prj_b", "{story}");
}

// Issue 54: the console's header as one command. A quiet `dev` is healthy (exit 0); a dead
// letter needs a person (exit 1), counted in `--json` as the console's header counts it.
#[tokio::test]
async fn status_says_healthy_or_why_not_as_the_consoles_header_does() {
    let (dev, info, _scratch) = dev_with_info("console-status").await;
    let (code, out, err) = run(args(&["status"], &info)).await;
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.starts_with("healthy\n"), "{out}");
    assert!(out.contains("waiting:         nothing"), "{out}");
    assert!(out.contains("alarms:          no alarms on dev"), "{out}");

    dead_letter(&dev, "inv_status_dlq").await;
    let (code, out, err) = run(args(&["status", "--json"], &info)).await;
    assert_eq!(code, Some(1), "{out}{err}");
    let status: Value = serde_json::from_str(out.trim()).unwrap_or_else(|_| panic!("{out}"));
    assert_eq!(status["health"], "needs a person", "{status}");
    assert_eq!(
        status["waiting"],
        serde_json::json!({"dead_letter": 1}),
        "{status}"
    );
    assert_eq!(status["header"]["dead_letters"], 1, "{status}");
    assert_eq!(status["header"]["oldest_pending"], Value::Null, "{status}");
    assert_eq!(
        status["why"],
        serde_json::json!(["1 waiting for a person (exceptions lists them)"]),
        "{status}"
    );
}

// Attack round 4, F2: a delivery fulfil could not apply yet (here: its record is not there)
// waits out of sight on the work queue until its retry, and its delayed check lists it
// pending only minutes later; `status` said "work queue: 0" meanwhile. It counts the
// messages in flight now, in words and in `--json`.
#[tokio::test]
async fn status_counts_the_work_queues_messages_in_flight() {
    let (dev, info, _scratch) = dev_with_info("console-in-flight").await;
    let body = invoice_paid("evt_in_flight", "inv_in_flight");
    let test = paymos_inbox_core::wire::signature::Environment::Test;
    dev.sqs
        .send_message()
        .queue_url(&dev.info.queues["WorkQueue"])
        .message_body(work_item(&body, test).encode())
        .send()
        .await
        .unwrap();
    let mut in_flight = Value::Null;
    for _ in 0..40 {
        let (_, out, _) = run(args(&["status", "--json"], &info)).await;
        let status: Value = serde_json::from_str(out.trim()).unwrap_or_else(|_| panic!("{out}"));
        in_flight = status["header"]["work_queue_in_flight"].clone();
        if in_flight == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(in_flight, 1);
    let (_, out, err) = run(args(&["status"], &info)).await;
    assert!(
        out.contains("work queue:      0 (1 in flight: being applied, or not applied yet"),
        "{out}{err}"
    );
}

// Issue 49 (A3): with `dev` reconciling against a fake Paymos API, `status` said healthy (exit 0)
// and `exceptions` listed nothing while the log said `missing=182` every minute. The scheduled
// run keeps what its window found beside where it ended; `status` reads it (one item), needs a
// person, and says what to run.
#[tokio::test]
async fn a_scheduled_reconciliation_that_found_a_missing_payment_makes_status_need_a_person() {
    use paymos_inbox_core::roads::confirm::ConfirmedInvoice;
    use paymos_inbox_core::roads::fulfil::Fulfil;
    use paymos_inbox_core::testkit::memory::MemoryPaymos;
    let (dev, info, _scratch) = dev_with_info("console-reconcile-found").await;
    let fulfil = Fulfil::new(DynamoResources::new(
        dev.dynamodb.clone(),
        &dev.info.tables["StateTable"],
        &dev.info.tables["DeliveriesTable"],
    ))
    .for_environment(paymos_inbox_core::wire::signature::Environment::Test);
    let now_ms = paymos_inbox_lambda::now_ms();
    let paymos = MemoryPaymos::new();
    paymos.invoice(
        "inv_status_missing",
        ConfirmedInvoice {
            status: "paid".into(),
            is_test: true,
            order_id: Some("order-status-missing".into()),
            order_amount: paymos_inbox_core::money::status::Amount::parse("25.00"),
            order_currency: Some("USDT".into()),
            token_amount: None,
            token_currency: None,
            paid_late: false,
            paid_at: None,
            project_id: Some("prj_local".into()),
        },
    );
    paymos.created_at(
        "inv_status_missing",
        i64::try_from(now_ms / 1000 - 600).unwrap(),
    );
    let (report, progress) = paymos_inbox_core::roads::reconcile::scheduled(
        &paymos,
        &fulfil,
        (2, false),
        now_ms,
        || true,
    )
    .await
    .unwrap();
    assert_eq!(report.missing.len(), 1, "{report:?}");
    let from = jiff::Timestamp::from_second(i64::try_from(progress.window.0).unwrap()).unwrap();

    let (code, out, err) = run(args(&["status"], &info)).await;
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(out.starts_with("needs a person\n"), "{out}");
    let line = out
        .lines()
        .find(|l| l.starts_with("reconciliation:"))
        .unwrap_or_default();
    assert!(line.contains("found missing 1"), "{out}");
    let why = format!(
        "why:             the last reconciliation found missing 1: `paymos-inbox reconcile --from {from}` lists them"
    );
    assert!(out.contains(&why), "{out}");
    let (code, out, err) = run(args(&["status", "--json"], &info)).await;
    assert_eq!(code, Some(1), "{out}{err}");
    let status: Value = serde_json::from_str(out.trim()).unwrap_or_else(|_| panic!("{out}"));
    let last = &status["header"]["reconciliation"]["last_run"];
    assert_eq!(last["found"], serde_json::json!({"missing": 1}), "{status}");
    assert_eq!(last["for_a_person"], true, "{status}");
    assert_eq!(status["waiting"], serde_json::json!({}), "{status}");
}

// Issue 54, item 4: beside the button that does it, a "Do:" line told the operator to run a
// command line (`paymos-inbox release … --override-amount`), and a count of one read
// "1 message(s)". The console names its own button where its page has one; `exceptions` (the
// same sentence, one source) keeps naming the command in the terminal; counts are said in
// words.
#[tokio::test]
async fn the_do_lines_name_the_consoles_own_buttons_and_counts_are_said_in_words() {
    let (dev, info, _scratch) = dev_with_info("console-do-lines").await;
    let (held, late) = ("inv_do_held", "inv_do_late");
    held_and_late(&info, (held, late), None).await;
    dead_letter(&dev, "inv_do_dlq").await;
    let console = open_console(&info, &[]).await;
    let home = console.get("api/home").await;
    let action = |kind: &str| {
        home["groups"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["kind"] == kind)
            .and_then(|g| g["items"][0]["action"].as_str())
            .unwrap_or_else(|| panic!("{kind} in {home}"))
            .to_owned()
    };
    assert_eq!(
        action("held"),
        "check the order; ship: press Override the amount… (beside Release; a reason is required), or refund in full"
    );
    assert_eq!(
        action("paid_late"),
        "ship anyway: press Release (a reason is required), or refund in full"
    );
    assert_eq!(
        action("dead_letter"),
        "read the fulfil logs for the cause, fix it, then press Move them back… under Dead letters"
    );
    // The invoice's story, where the buttons are, says it as the home page does.
    let story = console.get(&format!("api/search?id={held}")).await;
    assert_eq!(
        story["waits"][0]["action"],
        action("held").as_str(),
        "{story}"
    );

    // The terminal's list: the same sentences, naming the commands.
    let (code, out, err) = run(args(&["exceptions"], &info)).await;
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(
        out.contains(&format!(
            "ship with `paymos-inbox release {held} --actor <you> --override-amount --reason …`"
        )),
        "{out}"
    );
    assert!(out.contains("then `paymos-inbox redrive`"), "{out}");
    assert!(!out.contains("press "), "{out}");

    // One message is "1 message"; none is "0 deliveries".
    let jobs = console.get("api/jobs").await;
    assert_eq!(
        jobs["redrive"]["sentence"],
        "1 message will move from the dead-letter queue back to the work queue",
        "{jobs}"
    );
    assert!(
        jobs["resend"]["sentence"]
            .as_str()
            .unwrap()
            .starts_with("0 deliveries recorded over "),
        "{jobs}"
    );
    let (status, started) = console
        .act(
            "redrive",
            serde_json::json!({"id": "work-queue", "count": 1}),
        )
        .await;
    assert_eq!(status, 202, "{started}");
    let (ended, _) = console.followed(&started).await;
    assert_eq!(
        ended["result"], "moved 1 message from the dead-letter queue back to the work queue",
        "{ended}"
    );
}

// Issue 54: the page lacked the button its "Do:" line needed for a payment after a full
// refund (`after_refund`): the line sent the operator to `release` on a terminal. A person's
// word of a payment while a full refund is on record waits for a person; the page's line now
// says to press Release, and the console's release ships it once.
#[tokio::test]
async fn a_payment_after_a_full_refund_is_released_from_the_console() {
    let (_dev, info, scratch) = dev_with_info("console-after-refund").await;
    let invoice = "inv_console_after";
    let refund = scratch.path().join("full-refund.json");
    std::fs::write(
        &refund,
        format!(
            r#"{{"type": "refund", "mode": "full", "invoice_id": "{invoice}", "amount": "10.00", "currency": "USDT"}}"#
        ),
    )
    .unwrap();
    let words = [
        "send",
        "--type",
        "withdrawal.completed",
        "--resource",
        "wdr_console_after",
        "--data",
        refund.to_str().unwrap(),
        "--wait",
        "--json",
    ];
    let (_, out, err) = run(args(&words, &info)).await;
    assert!(out.contains("\"applied\":true"), "{out}{err}");
    let words = [
        "mark-paid",
        invoice,
        "--order-id",
        "order-after",
        "--actor",
        "support:ann",
    ];
    let (code, out, err) = run(args(&words, &info)).await;
    assert_eq!(code, Some(1), "waits for a person: {out}{err}");
    let console = open_console(&info, &[]).await;
    let home = console.get("api/home").await;
    let item = home["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["kind"] == "after_refund")
        .map(|g| g["items"][0].clone())
        .unwrap_or_else(|| panic!("after_refund in {home}"));
    assert_eq!(item["resource_id"], invoice, "{item}");
    assert!(
        item["action"].as_str().unwrap().starts_with(
            "check at Paymos when this payment was made: after the full refund (the customer paid again), ship it: press Release (a reason is required)"
        ),
        "{item}"
    );
    let release = serde_json::json!({"id": invoice, "reason": "paid again, checked at Paymos"});
    let (status, body) = console.act("release", release.clone()).await;
    assert_eq!(
        (status, body["outcome"].as_str()),
        (200, Some("fulfilled")),
        "{body}"
    );
    let (status, body) = console.act("release", release).await;
    assert_eq!(
        (status, body["outcome"].as_str()),
        (200, Some("already_final")),
        "once: {body}"
    );
    let story = console.get(&format!("api/search?id={invoice}")).await;
    assert_eq!(story["fulfilled"], true, "{story}");
}
