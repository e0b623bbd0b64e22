//! The audit trail (issue 40): every operator's action, from the command line and from the
//! console, is recorded once, through the functions both doors call, with who, why and what
//! it changed; `audit` and the console's `/api/audit` read it back. Against `dev`, whose
//! emulators have no STS: the actor is `--actor`.

use std::process::Stdio;
use std::time::Duration;

use paymos_inbox_aws::dynamodb::DynamoResources;
use paymos_inbox_core::money::record::{ActionKind, OperatorAction};
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt as _;

use paymos_inbox_testkit::paymos_fake::{self, FakePaymos};
use paymos_inbox_testkit::*;

/// `dev`, its info file, a fake Paymos API, and a held payment (25.00 paid for an order
/// registered at 10.00) under `held`.
struct Rig {
    dev: paymos_inbox_local::dev::Dev,
    info: String,
    api: FakePaymos,
    state: DynamoResources,
    /// Holds `info`; removed with the rig.
    _scratch: TempDir,
}

impl Rig {
    async fn new(held: &str) -> Self {
        let dev = crate::tools::dev(None).await;
        let scratch_info = scratch("audit-info");
        let info = scratch_info.path().join("audit-info.json");
        std::fs::write(&info, serde_json::to_string(&dev.info).unwrap()).unwrap();
        let state = DynamoResources::new(
            dev.dynamodb.clone(),
            &dev.info.tables["StateTable"],
            &dev.info.tables["DeliveriesTable"],
        );
        let rig = Self {
            info: info.to_str().unwrap().to_owned(),
            api: FakePaymos::start().await,
            dev,
            state,
            _scratch: scratch_info,
        };
        // What Paymos has of the invoices a person marks paid (`mark-paid` asks it first).
        for manual in [
            "inv_audit_manual",
            "inv_audit_cli_manual",
            "inv_audit_console_manual",
        ] {
            let mut at = paymos_fake::invoice(manual, "paid", ("10.00", "USDT"), ("10.00", "USDT"));
            at["is_test"] = json!(true);
            at["project_id"] = json!("prj_local");
            at["order"]["external_id"] = json!("order-manual");
            rig.api
                .answer(manual, paymos_fake::Answer::Invoices(vec![at]));
        }
        // And of the held one (`release` asks it first): paid, its order, the local project.
        let mut at = paymos_fake::invoice(held, "paid", ("10.00", "USDT"), ("10.00", "USDT"));
        at["is_test"] = json!(true);
        at["project_id"] = json!("prj_local");
        rig.api
            .answer(held, paymos_fake::Answer::Invoices(vec![at]));
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
        let (code, out) = rig.cli(&register).await;
        assert_eq!(code, Some(0), "{out}");
        let send = [
            "send",
            "--type",
            "invoice.paid",
            "--resource",
            held,
            "--wait",
            "--json",
        ];
        let (_, out) = rig.cli(&send).await;
        assert!(out.contains("\"applied\":true"), "{out}");
        rig
    }

    /// The command line on `dev`, with the fake API's key: its exit code and output.
    async fn cli(&self, words: &[&str]) -> (Option<i32>, String) {
        let mut all: Vec<String> = words.iter().map(|w| (*w).to_owned()).collect();
        all.extend(["--dev-info".to_owned(), self.info.clone()]);
        let api = self.api.url.clone();
        let out = tokio::task::spawn_blocking(move || {
            std::process::Command::new(env!("CARGO_BIN_EXE_paymos-inbox"))
                .args(&all)
                .env("PAYMOS_API_KEY", paymos_fake::KEY)
                .env("PAYMOS_API_SECRET", paymos_fake::SECRET)
                .env("PAYMOS_API_BASE_URL", api)
                .env_remove("PAYMOS_WEBHOOK_SECRET")
                .env_remove("AWS_ENDPOINT_URL_DYNAMODB")
                .env_remove("AWS_ENDPOINT_URL_SQS")
                .output()
                .expect("run paymos-inbox")
        })
        .await
        .unwrap();
        (
            out.status.code(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    }

    /// A payment event whose own snapshot says the invoice did not pay, sent and applied: an
    /// `unusable` delivery waits (what `exceptions --resolve` takes off the list). Its event id.
    async fn unusable(&self) -> String {
        let scratch_data = scratch("audit-unusable");
        let data = scratch_data.path().join("data.json");
        std::fs::write(&data, r#"{"status":"cancelled"}"#).unwrap();
        let send = [
            "send",
            "--type",
            "invoice.paid",
            "--resource",
            "inv_audit_unusable",
            "--data",
            data.to_str().unwrap(),
            "--wait",
            "--json",
        ];
        let (_, out) = self.cli(&send).await;
        let sent: Value = serde_json::from_str(out.lines().last().unwrap_or_default())
            .unwrap_or_else(|e| panic!("{e}: {out}"));
        assert_eq!(sent["outcome"], "unusable", "{out}");
        sent["event_id"].as_str().unwrap().to_owned()
    }

    /// Every entry of `kind` in the state table.
    async fn entries(&self, kind: ActionKind) -> Vec<OperatorAction> {
        self.state
            .recent_actions(1000)
            .await
            .unwrap()
            .into_iter()
            .filter(|a| a.kind == kind)
            .collect()
    }

    /// The one entry of `kind` (exactly one is recorded).
    async fn only(&self, kind: ActionKind) -> OperatorAction {
        let mut found = self.entries(kind).await;
        assert_eq!(found.len(), 1, "exactly one {kind} entry: {found:?}");
        found.remove(0)
    }

    /// The `Operator Action` events dev's publisher sent to its events queue, once `want` of
    /// them arrived (or what arrived in 20 s).
    async fn published_actions(&self, want: usize) -> Vec<Value> {
        let queue = &self.dev.info.queues["EventsDeliveryQueue"];
        let mut found = Vec::new();
        for _ in 0..100 {
            let got = self
                .dev
                .sqs
                .receive_message()
                .queue_url(queue)
                .max_number_of_messages(10)
                .send()
                .await
                .unwrap();
            for m in got.messages.unwrap_or_default() {
                let event: Value = serde_json::from_str(m.body().unwrap()).unwrap();
                if event["detail-type"] == "Operator Action" {
                    found.push(event);
                }
            }
            if found.len() >= want {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        found
    }

    /// Takes (receives and deletes) what reaches dev's events queue until `enough` holds of
    /// what was taken (or 20 s passed), then what else arrives in the next second: so a test
    /// sees everything that was published, and nothing of it is left for the next read.
    async fn take_events(&self, enough: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let queue = &self.dev.info.queues["EventsDeliveryQueue"];
        let mut taken = Vec::new();
        let mut quiet_since: Option<std::time::Instant> = None;
        for _ in 0..150 {
            let got = self
                .dev
                .sqs
                .receive_message()
                .queue_url(queue)
                .max_number_of_messages(10)
                .send()
                .await
                .unwrap()
                .messages
                .unwrap_or_default();
            for m in &got {
                taken.push(serde_json::from_str::<Value>(m.body().unwrap()).unwrap());
                self.dev
                    .sqs
                    .delete_message()
                    .queue_url(queue)
                    .receipt_handle(m.receipt_handle().unwrap())
                    .send()
                    .await
                    .unwrap();
            }
            if !got.is_empty() {
                quiet_since = None;
            } else if enough(&taken) {
                let since = *quiet_since.get_or_insert_with(std::time::Instant::now);
                if since.elapsed() >= Duration::from_secs(1) {
                    break;
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        taken
    }

    /// A dead letter in the work queue's dead-letter queue: a payment of `invoice`.
    async fn dead_letter(&self, invoice: &str) {
        crate::console::dead_letter(&self.dev, invoice).await;
    }
}

/// The door an action comes through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Door {
    CommandLine,
    Console,
}

/// The invoice each one-action test releases or rechecks, and the reason it gives.
const HELD: &str = "inv_audit_held";
const REASON: &str = "the customer confirmed the price change by email";

/// A console on the rig's stack, acting as alice: its URL and a client in its session.
struct Opened {
    _console: tokio::process::Child,
    url: String,
    http: reqwest::Client,
}

async fn open_console(rig: &Rig) -> Opened {
    let mut console = tokio::process::Command::new(env!("CARGO_BIN_EXE_paymos-inbox"))
        .args(["console", "--actor", "alice", "--dev-info", &rig.info])
        .env("PAYMOS_API_KEY", paymos_fake::KEY)
        .env("PAYMOS_API_SECRET", paymos_fake::SECRET)
        .env("PAYMOS_API_BASE_URL", &rig.api.url)
        .env_remove("AWS_ENDPOINT_URL_DYNAMODB")
        .env_remove("AWS_ENDPOINT_URL_SQS")
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
    Opened {
        _console: console,
        url: crate::console::base(&printed),
        http: crate::console::log_in(&printed).await,
    }
}

/// Takes `kind` through `door` as alice, and checks it was done.
async fn act(rig: &Rig, door: Door, kind: ActionKind) {
    let unusable = if kind == ActionKind::Resolve {
        rig.unusable().await
    } else {
        String::new()
    };
    if door == Door::CommandLine {
        let words: &[&str] = match kind {
            ActionKind::Release => &["release", HELD, "--reason", REASON, "--override-amount"],
            ActionKind::MarkPaid => &[
                "mark-paid",
                "inv_audit_manual",
                "--order-id",
                "order-manual",
            ],
            ActionKind::Recheck => &["recheck", HELD],
            ActionKind::Redrive => &["redrive"],
            ActionKind::Resend => &["pending", "--resend", "--older-than", "0"],
            ActionKind::EventsResend => &["events", "resend", "--resource", HELD],
            ActionKind::Resolve => &["exceptions", "--resolve", &unusable, "--reason", REASON],
            ActionKind::EventsPause | ActionKind::EventsResume | ActionKind::EventsTest => {
                unreachable!("the hand-off's switch and test: tests/it/endpoint.rs")
            }
        };
        let mut words = words.to_vec();
        words.extend(["--actor", "alice"]);
        let (code, out) = rig.cli(&words).await;
        assert_eq!(code, Some(0), "{kind}: {out}");
        return;
    }
    let console = open_console(rig).await;
    let (action, fields) = match kind {
        ActionKind::Release => (
            "release",
            json!({"id": HELD, "reason": REASON, "override_amount": true}),
        ),
        ActionKind::MarkPaid => (
            "mark-paid",
            json!({"id": "inv_audit_manual", "order_id": "order-manual"}),
        ),
        ActionKind::Recheck => ("recheck", json!({"id": HELD})),
        ActionKind::Redrive => ("redrive", json!({"id": "work-queue", "count": 1})),
        ActionKind::Resend => ("resend", json!({"id": "stranded", "count": 1})),
        ActionKind::EventsResend => ("events-resend", json!({"id": HELD})),
        ActionKind::Resolve => ("resolve", json!({"id": unusable, "reason": REASON})),
        ActionKind::EventsPause | ActionKind::EventsResume | ActionKind::EventsTest => {
            unreachable!("the hand-off's switch and test: tests/it/endpoint.rs")
        }
    };
    let answer = console
        .http
        .post(format!("{}api/{action}", console.url))
        .json(&fields)
        .send()
        .await
        .unwrap();
    let status = answer.status().as_u16();
    let body: Value = answer.json().await.unwrap();
    if matches!(kind, ActionKind::Redrive | ActionKind::Resend) {
        // A job: started at once, recorded when it ends.
        assert_eq!(status, 202, "{kind}: {body}");
        let ended = job_ended(&console.http, &console.url, &body).await;
        assert_eq!(ended["error"], Value::Null, "{kind}: {ended}");
        return;
    }
    assert_eq!(status, 200, "{kind}: {body}");
    if kind == ActionKind::EventsResend {
        // The answer says what was published: the held invoice's one fact, with its key.
        assert_eq!(
            body["published"],
            json!([{"detail_type": "Payment Needs Review",
                    "idempotency_key": format!("payment-needs-review:{HELD}:held")}]),
            "{body}"
        );
    }
}

/// A console's job (`started`, its POST's answer) read back until it ends: its last answer.
async fn job_ended(http: &reqwest::Client, url: &str, started: &Value) -> Value {
    let job = started["job"]
        .as_u64()
        .unwrap_or_else(|| panic!("{started}"));
    for _ in 0..600 {
        let read: Value = http
            .get(format!("{url}api/jobs/{job}"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if read["done"] == true {
            return read;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("job {job} did not end in a minute");
}

/// One action through one door: exactly one entry in the state table, of that action, naming
/// alice, the reason given (a release's) and what it changed.
async fn recorded_once(door: Door, kind: ActionKind) {
    let rig = Rig::new(HELD).await;
    if kind == ActionKind::Redrive {
        rig.dead_letter("inv_audit_dlq").await;
    }
    act(&rig, door, kind).await;
    let all = rig.state.recent_actions(100).await.unwrap();
    assert_eq!(all.len(), 1, "{door:?} {kind}: one entry: {all:?}");
    let e = &all[0];
    let (subject, reason, count) = match kind {
        ActionKind::Release => (HELD, Some(REASON), None),
        ActionKind::MarkPaid => ("inv_audit_manual", None, None),
        ActionKind::Recheck => (HELD, None, Some(0)),
        ActionKind::Redrive => ("queue", None, Some(1)),
        ActionKind::Resend => ("stranded", None, Some(0)),
        ActionKind::EventsResend => (HELD, None, Some(1)),
        ActionKind::Resolve => (e.subject.as_str(), Some(REASON), None),
        ActionKind::EventsPause | ActionKind::EventsResume | ActionKind::EventsTest => {
            unreachable!("the hand-off's switch and test: tests/it/endpoint.rs")
        }
    };
    if kind == ActionKind::Resolve {
        assert!(e.subject.starts_with("evt_"), "{e:?}");
        let (code, out) = rig.cli(&["exceptions", "--json"]).await;
        assert!(
            !out.contains(&e.subject),
            "resolved, off the list: {code:?} {out}"
        );
    }
    assert_eq!(
        (
            e.kind,
            e.actor.as_str(),
            e.subject.as_str(),
            e.reason.as_deref(),
            e.count
        ),
        (kind, "alice", subject, reason, count),
        "{door:?}: {e:?}"
    );
    let changed = match kind {
        ActionKind::Release => "fulfilled (amount overridden)",
        ActionKind::MarkPaid => "fulfilled (order order-manual)",
        ActionKind::Recheck => "0 rechecked",
        ActionKind::Redrive => "moved 1",
        ActionKind::Resend => {
            "0 stranded, 0 sent again, 0 taken by someone else, 0 failed, 0 without a body"
        }
        ActionKind::EventsResend => "published 1",
        ActionKind::Resolve => "resolved (was unusable)",
        ActionKind::EventsPause | ActionKind::EventsResume | ActionKind::EventsTest => {
            unreachable!("the hand-off's switch and test: tests/it/endpoint.rs")
        }
    };
    assert_eq!(e.result, changed, "{door:?} {kind}");
}

#[tokio::test]
async fn a_release_from_the_command_line_is_recorded_once() {
    recorded_once(Door::CommandLine, ActionKind::Release).await;
}

#[tokio::test]
async fn a_release_from_the_console_is_recorded_once() {
    recorded_once(Door::Console, ActionKind::Release).await;
}

#[tokio::test]
async fn a_mark_paid_from_the_command_line_is_recorded_once() {
    recorded_once(Door::CommandLine, ActionKind::MarkPaid).await;
}

#[tokio::test]
async fn a_mark_paid_from_the_console_is_recorded_once() {
    recorded_once(Door::Console, ActionKind::MarkPaid).await;
}

#[tokio::test]
async fn a_recheck_from_the_command_line_is_recorded_once() {
    recorded_once(Door::CommandLine, ActionKind::Recheck).await;
}

#[tokio::test]
async fn a_recheck_from_the_console_is_recorded_once() {
    recorded_once(Door::Console, ActionKind::Recheck).await;
}

#[tokio::test]
async fn a_redrive_from_the_command_line_is_recorded_once() {
    recorded_once(Door::CommandLine, ActionKind::Redrive).await;
}

#[tokio::test]
async fn a_redrive_from_the_console_is_recorded_once() {
    recorded_once(Door::Console, ActionKind::Redrive).await;
}

#[tokio::test]
async fn a_resend_from_the_command_line_is_recorded_once() {
    recorded_once(Door::CommandLine, ActionKind::Resend).await;
}

#[tokio::test]
async fn a_resend_from_the_console_is_recorded_once() {
    recorded_once(Door::Console, ActionKind::Resend).await;
}

#[tokio::test]
async fn a_resolve_from_the_command_line_is_recorded_once() {
    recorded_once(Door::CommandLine, ActionKind::Resolve).await;
}

#[tokio::test]
async fn a_resolve_from_the_console_is_recorded_once() {
    recorded_once(Door::Console, ActionKind::Resolve).await;
}

#[tokio::test]
async fn an_events_resend_from_the_command_line_is_recorded_once() {
    recorded_once(Door::CommandLine, ActionKind::EventsResend).await;
}

#[tokio::test]
async fn an_events_resend_from_the_console_is_recorded_once() {
    recorded_once(Door::Console, ActionKind::EventsResend).await;
}

/// The (detail type, idempotency key) of each event of `invoice` among `events`, but the
/// audit trail's own `Operator Action`s.
fn facts_of(events: &[Value], invoice: &str) -> std::collections::BTreeSet<(String, String)> {
    events
        .iter()
        .filter(|e| e["detail-type"] != "Operator Action" && e["detail"]["invoice_id"] == invoice)
        .map(|e| {
            (
                e["detail-type"].as_str().unwrap().to_owned(),
                e["detail"]["idempotency_key"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

// `events resend --resource`: exactly that invoice's facts again (its review from its own item,
// its Order Paid from its fulfilment), with the keys of their first publication, nothing of
// another invoice; printed, and audited with the resource and the count. What names no
// resource, or one with no record, exits 2 and records nothing.
#[tokio::test]
async fn events_resend_of_one_invoice_publishes_exactly_its_facts_again_with_their_keys() {
    let held = "inv_audit_resend_held";
    let other = "inv_audit_resend_other";
    let rig = Rig::new(held).await;
    let release = [
        "release",
        held,
        "--reason",
        REASON,
        "--override-amount",
        "--actor",
        "alice",
    ];
    let (code, out) = rig.cli(&release).await;
    assert_eq!(code, Some(0), "{out}");
    let send = [
        "send",
        "--type",
        "invoice.paid",
        "--resource",
        other,
        "--wait",
        "--json",
    ];
    let (_, out) = rig.cli(&send).await;
    assert!(out.contains("\"applied\":true"), "{out}");

    // The first publication, by dev's publisher from the table's stream.
    let first = rig
        .take_events(|taken| facts_of(taken, held).len() == 2 && !facts_of(taken, other).is_empty())
        .await;
    let facts = facts_of(&first, held);
    let expected: std::collections::BTreeSet<(String, String)> = [
        ("Order Paid", format!("order-paid:{held}")),
        (
            "Payment Needs Review",
            format!("payment-needs-review:{held}:held"),
        ),
    ]
    .into_iter()
    .map(|(t, k)| (t.to_owned(), k))
    .collect();
    assert_eq!(facts, expected, "{first:#?}");

    let (code, out) = rig
        .cli(&["events", "resend", "--resource", held, "--actor", "bob"])
        .await;
    assert_eq!(code, Some(0), "{out}");
    for (detail_type, key) in &expected {
        assert!(out.contains(&format!("{detail_type}  {key}\n")), "{out}");
    }
    assert!(out.contains("2 events published again"), "{out}");

    // Again: the same two facts and keys, and nothing else but the entry's Operator Action.
    let again = rig
        .take_events(|taken| {
            facts_of(taken, held).len() == 2
                && taken.iter().any(|e| e["detail"]["kind"] == "events-resend")
        })
        .await;
    assert_eq!(facts_of(&again, held), expected, "{again:#?}");
    let others: Vec<&Value> = again
        .iter()
        .filter(|e| e["detail-type"] != "Operator Action" && e["detail"]["invoice_id"] != held)
        .collect();
    assert!(others.is_empty(), "only {held}'s facts: {others:#?}");
    let order_paid = |events: &[Value]| {
        events
            .iter()
            .find(|e| e["detail-type"] == "Order Paid" && e["detail"]["invoice_id"] == held)
            .map(|e| e["detail"].clone())
            .unwrap()
    };
    assert_eq!(order_paid(&again), order_paid(&first), "the same detail");

    let e = rig.only(ActionKind::EventsResend).await;
    assert_eq!(
        (
            e.actor.as_str(),
            e.subject.as_str(),
            e.count,
            e.result.as_str()
        ),
        ("bob", held, Some(2), "published 2")
    );

    for (words, said) in [
        (
            &["events", "resend", "--resource", "inv_audit_nothing"][..],
            "inv_audit_nothing: no record of it in the state table",
        ),
        (
            &["events", "resend", "--resource", "evt_audit_1"][..],
            "evt_audit_1: not an invoice, withdrawal or deposit id",
        ),
        (&["events", "resend"][..], "--since"),
        (
            &["events", "resend", "--since", "1h", "--resource", held][..],
            "cannot be used with",
        ),
    ] {
        let (code, out) = rig.cli(words).await;
        assert_eq!(code, Some(2), "{words:?}: {out}");
        assert!(out.contains(said), "{words:?}: {out}");
    }
    assert_eq!(rig.entries(ActionKind::EventsResend).await.len(), 1);

    // `--since` is recorded too, with how many it published.
    let (code, out) = rig
        .cli(&["events", "resend", "--since", "1h", "--actor", "carol"])
        .await;
    assert_eq!(code, Some(0), "{out}");
    let printed = out
        .lines()
        .filter(|l| {
            paymos_inbox_core::roads::handoff::DETAIL_TYPES
                .iter()
                .any(|(t, _)| l.starts_with(&format!("{t}  ")))
        })
        .count();
    let e = rig
        .entries(ActionKind::EventsResend)
        .await
        .into_iter()
        .find(|e| e.actor == "carol")
        .expect("the --since resend is recorded");
    assert!(e.subject.starts_with("since "), "{e:?}");
    assert_eq!(e.count, u64::try_from(printed).ok(), "{out}");
    assert!(printed >= 4, "both invoices' facts and the entries': {out}");
}

#[tokio::test]
async fn the_command_lines_actions_are_listed_by_audit_newest_first_and_published_on_the_hand_off()
{
    let held = "inv_audit_cli_held";
    let rig = Rig::new(held).await;

    // A refusal changes nothing, and is recorded as not done, in the domain's words: the
    // entry is written before the action, then takes its answer.
    let (code, out) = rig
        .cli(&[
            "release",
            held,
            "--actor",
            "alice",
            "--reason",
            "looks fine",
        ])
        .await;
    assert_eq!(code, Some(1), "no override: refused: {out}");
    let refused = rig.only(ActionKind::Release).await;
    assert_eq!(
        (refused.actor.as_str(), refused.reason.as_deref()),
        ("alice", Some("looks fine"))
    );
    assert!(
        refused.result.starts_with("not done: ") && refused.result.contains("registered for"),
        "{}",
        refused.result
    );

    let reason = "the customer confirmed the price change by email";
    let release = [
        "release",
        held,
        "--actor",
        "alice",
        "--reason",
        reason,
        "--override-amount",
    ];
    let (code, out) = rig.cli(&release).await;
    assert_eq!(code, Some(0), "{out}");
    let releases = rig.entries(ActionKind::Release).await;
    assert_eq!(releases.len(), 2, "{releases:?}");
    let e = releases
        .into_iter()
        .find(|e| e.key() != refused.key())
        .unwrap();
    assert_eq!(
        (e.actor.as_str(), e.reason.as_deref(), e.subject.as_str()),
        ("alice", Some(reason), held)
    );
    assert_eq!(e.result, "fulfilled (amount overridden)");

    let mark = [
        "mark-paid",
        "inv_audit_cli_manual",
        "--order-id",
        "order-manual",
        "--actor",
        "bob",
    ];
    let (code, out) = rig.cli(&mark).await;
    assert_eq!(code, Some(0), "{out}");
    let e = rig.only(ActionKind::MarkPaid).await;
    assert_eq!(
        (e.actor.as_str(), e.subject.as_str(), e.result.as_str()),
        (
            "bob",
            "inv_audit_cli_manual",
            "fulfilled (order order-manual)"
        )
    );

    let (code, out) = rig.cli(&["recheck", held, "--actor", "carol"]).await;
    assert_eq!(code, Some(0), "{out}");
    let e = rig.only(ActionKind::Recheck).await;
    assert_eq!(
        (e.actor.as_str(), e.subject.as_str(), e.count),
        ("carol", held, Some(0))
    );
    assert_eq!(e.result, "0 rechecked");

    rig.dead_letter("inv_audit_cli_dlq").await;
    let (code, out) = rig.cli(&["redrive", "--actor", "dave", "--json"]).await;
    assert_eq!(code, Some(0), "{out}");
    let e = rig.only(ActionKind::Redrive).await;
    assert_eq!(
        (e.actor.as_str(), e.subject.as_str(), e.count),
        ("dave", "queue", Some(1))
    );
    assert_eq!(e.result, "moved 1");

    let resend = [
        "pending",
        "--resend",
        "--older-than",
        "0",
        "--actor",
        "erin",
    ];
    let (code, out) = rig.cli(&resend).await;
    assert_eq!(code, Some(0), "{out}");
    let e = rig.only(ActionKind::Resend).await;
    assert_eq!((e.actor.as_str(), e.subject.as_str()), ("erin", "stranded"));
    assert!(e.result.ends_with("0 without a body"), "{}", e.result);

    // `audit` reads them back, newest first; no secret in them.
    let (code, out) = rig.cli(&["audit", "--json"]).await;
    assert_eq!(code, Some(0), "{out}");
    let listed: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let kinds: Vec<&str> = listed.iter().map(|a| a["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "resend",
            "redrive",
            "recheck",
            "mark-paid",
            "release",
            "release"
        ]
    );
    assert_eq!(listed[4]["reason"], reason);
    assert_eq!(listed[5]["reason"], "looks fine");
    assert!(!out.contains(paymos_fake::SECRET), "{out}");
    let (code, out) = rig.cli(&["audit"]).await;
    assert_eq!(code, Some(0), "{out}");
    assert!(out.starts_with("6 actions, newest first"), "{out}");

    // Each is an `Operator Action` on the hand-off: rebuilt from the table by `events since`,
    // and published from the stream by dev's publisher.
    let (code, out) = rig.cli(&["events", "since", "1h"]).await;
    assert_eq!(code, Some(0), "{out}");
    let rebuilt: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["detail-type"] == "Operator Action")
        .collect();
    assert_eq!(rebuilt.len(), 6, "{out}");
    let published = rig.published_actions(6).await;
    let mut kinds: Vec<String> = published
        .iter()
        .map(|e| e["detail"]["kind"].as_str().unwrap().to_owned())
        .collect();
    kinds.sort();
    assert_eq!(
        kinds,
        [
            "mark-paid",
            "recheck",
            "redrive",
            "release",
            "release",
            "resend"
        ],
        "{published:?}"
    );
}

#[tokio::test]
async fn the_consoles_actions_are_listed_on_its_page_newest_first_and_one_without_the_session_is_not_recorded()
 {
    let held = "inv_audit_console_held";
    let rig = Rig::new(held).await;
    let mut console = tokio::process::Command::new(env!("CARGO_BIN_EXE_paymos-inbox"))
        .args(["console", "--actor", "alice", "--dev-info", &rig.info])
        .env("PAYMOS_API_KEY", paymos_fake::KEY)
        .env("PAYMOS_API_SECRET", paymos_fake::SECRET)
        .env("PAYMOS_API_BASE_URL", &rig.api.url)
        .env_remove("AWS_ENDPOINT_URL_DYNAMODB")
        .env_remove("AWS_ENDPOINT_URL_SQS")
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
    let (plain, http) = (
        reqwest::Client::new(),
        crate::console::log_in(&printed).await,
    );
    let url = crate::console::base(&printed);
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
    let reason = "paid by phone, price agreed";
    let release = json!({"id": held, "reason": reason, "override_amount": true});

    // Without the session's cookie: refused, nothing recorded.
    let (status, _) = act("release", release.clone(), false).await;
    assert_eq!(status, 403);
    assert!(rig.entries(ActionKind::Release).await.is_empty());

    let (status, body) = act("release", release, t).await;
    assert_eq!((status, body["outcome"].as_str()), (200, Some("fulfilled")));
    let e = rig.only(ActionKind::Release).await;
    assert_eq!(
        (e.actor.as_str(), e.reason.as_deref(), e.subject.as_str()),
        ("alice", Some(reason), held)
    );
    assert_eq!(e.result, "fulfilled (amount overridden)");

    let manual = json!({"id": "inv_audit_console_manual", "order_id": "order-manual"});
    let (status, body) = act("mark-paid", manual, t).await;
    assert_eq!(status, 200, "{body}");
    let e = rig.only(ActionKind::MarkPaid).await;
    assert_eq!(
        (e.actor.as_str(), e.result.as_str()),
        ("alice", "fulfilled (order order-manual)")
    );

    let (status, body) = act("recheck", json!({"id": held}), t).await;
    assert_eq!(status, 200, "{body}");
    let e = rig.only(ActionKind::Recheck).await;
    assert_eq!(
        (e.actor.as_str(), e.subject.as_str(), e.count),
        ("alice", held, Some(0))
    );

    rig.dead_letter("inv_audit_console_dlq").await;
    let (status, body) = act("redrive", json!({"id": "work-queue", "count": 1}), t).await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(job_ended(&http, &url, &body).await["moved"], 1);
    let e = rig.only(ActionKind::Redrive).await;
    assert_eq!((e.actor.as_str(), e.count), ("alice", Some(1)));

    let (status, body) = act("resend", json!({"id": "stranded", "count": 1}), t).await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(job_ended(&http, &url, &body).await["error"], Value::Null);
    let e = rig.only(ActionKind::Resend).await;
    assert_eq!(
        (e.actor.as_str(), e.subject.as_str()),
        ("alice", "stranded")
    );

    // The page's audit view: the five, newest first, under the console's actor.
    let audit: Value = http
        .get(format!("{url}api/audit"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let listed = audit["actions"].as_array().unwrap();
    let kinds: Vec<&str> = listed.iter().map(|a| a["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        ["resend", "redrive", "recheck", "mark-paid", "release"]
    );
    assert!(listed.iter().all(|a| a["actor"] == "alice"), "{audit}");
    let home: Value = http
        .get(format!("{url}api/home"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(home["about"]["identity"], "alice", "{home}");
    assert_eq!(listed[4]["reason"], reason);
    console.kill().await.unwrap();
}

/// A stand-in for STS: answers every `GetCallerIdentity` with `arn`, and its URL.
async fn fake_sts(arn: &'static str) -> String {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0_u8; 4096];
                // The whole request: its headers, then as many bytes as Content-Length says.
                loop {
                    let Ok(n) = stream.read(&mut buf).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    request.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&request).to_ascii_lowercase();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let length = text
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|v| v.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        if request.len() >= end + 4 + length {
                            break;
                        }
                    }
                }
                let body = format!(
                    "<GetCallerIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><GetCallerIdentityResult><Arn>{arn}</Arn><UserId>AROAEXAMPLE:alice</UserId><Account>123456789012</Account></GetCallerIdentityResult><ResponseMetadata><RequestId>1</RequestId></ResponseMetadata></GetCallerIdentityResponse>"
                );
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/xml\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(answer.as_bytes()).await;
            });
        }
    });
    url
}

// On AWS, who acts is what the credentials are (STS), whatever --actor says; and when STS
// cannot say, nothing is done.
#[tokio::test]
async fn on_aws_the_entry_names_the_callers_identity_and_without_it_nothing_is_done() {
    let held = "inv_audit_sts_held";
    let rig = Rig::new(held).await;
    let (dynamodb, _) = endpoint_urls();
    let release = |sts: String| {
        let tables = (
            rig.dev.info.tables["DeliveriesTable"].clone(),
            rig.dev.info.tables["StateTable"].clone(),
        );
        let dynamodb = dynamodb.clone();
        tokio::task::spawn_blocking(move || {
            // Only DynamoDB's endpoint is local: the stack is "on AWS", STS included.
            std::process::Command::new(env!("CARGO_BIN_EXE_paymos-inbox"))
                .args(["release", held, "--actor", "mallory", "--reason", "checked"])
                .args(["--override-amount", "--region", "us-east-1"])
                .args(["--dynamodb-endpoint", &dynamodb])
                .args(["--deliveries-table", &tables.0, "--state-table", &tables.1])
                .env("AWS_ENDPOINT_URL_STS", sts)
                .env("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
                .env("AWS_SECRET_ACCESS_KEY", "not-a-secret")
                .env("AWS_EC2_METADATA_DISABLED", "true")
                .env("AWS_MAX_ATTEMPTS", "1")
                .env_remove("AWS_PROFILE")
                .env_remove("AWS_SESSION_TOKEN")
                .env_remove("AWS_ENDPOINT_URL")
                .env_remove("AWS_ENDPOINT_URL_DYNAMODB")
                .env_remove("AWS_ENDPOINT_URL_SQS")
                .output()
                .expect("run paymos-inbox")
        })
    };
    let fulfilled = async || {
        rig.state
            .fulfilments()
            .await
            .unwrap()
            .iter()
            .filter(|f| f.invoice_id == held)
            .count()
    };

    // STS unreachable: no one to record it under, so no release.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let nowhere = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let out = release(nowhere).await.unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{said}");
    assert!(said.contains("STS GetCallerIdentity"), "{said}");
    assert_eq!(fulfilled().await, 0, "nothing shipped");
    assert!(rig.entries(ActionKind::Release).await.is_empty());

    let arn = "arn:aws:sts::123456789012:assumed-role/ops/alice";
    let out = release(fake_sts(arn).await).await.unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(fulfilled().await, 1);
    let e = rig.only(ActionKind::Release).await;
    assert_eq!(
        e.actor,
        format!("{arn} (declared mallory)"),
        "the credentials' identity first, --actor only beside it"
    );
    assert_eq!(e.reason.as_deref(), Some("checked"));
}

// Issue 54: with both of the SDK's endpoint variables set (also how a VPC or FIPS endpoint is
// named), the command line took the stack for `dev`, skipped STS, and recorded mallory as who
// released it. Only `dev`'s info file or endpoints on this machine make a stack `dev`: here
// STS is asked, and the audit entry and the fulfilment carry the verified identity beside the
// declared name.
#[tokio::test]
async fn endpoint_variables_naming_aws_hosts_still_ask_sts_and_record_the_verified_identity() {
    let held = "inv_audit_vpce_held";
    let rig = Rig::new(held).await;
    let (dynamodb, _) = endpoint_urls();
    let arn = "arn:aws:sts::123456789012:assumed-role/ops/alice";
    let sts = fake_sts(arn).await;
    let tables = (
        rig.dev.info.tables["DeliveriesTable"].clone(),
        rig.dev.info.tables["StateTable"].clone(),
    );
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_paymos-inbox"))
            .args(["release", held, "--actor", "mallory", "--reason", "checked"])
            .args(["--override-amount", "--region", "us-east-1"])
            .args(["--deliveries-table", &tables.0, "--state-table", &tables.1])
            .env("AWS_ENDPOINT_URL_DYNAMODB", &dynamodb)
            .env(
                "AWS_ENDPOINT_URL_SQS",
                "https://sqs-fips.us-east-1.amazonaws.com",
            )
            .env("AWS_ENDPOINT_URL_STS", sts)
            .env("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
            .env("AWS_SECRET_ACCESS_KEY", "not-a-secret")
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("AWS_MAX_ATTEMPTS", "1")
            .env_remove("AWS_PROFILE")
            .env_remove("AWS_SESSION_TOKEN")
            .env_remove("AWS_ENDPOINT_URL")
            .output()
            .expect("run paymos-inbox")
    })
    .await
    .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let both = format!("{arn} (declared mallory)");
    assert_eq!(rig.only(ActionKind::Release).await.actor, both);
    let shipped: Vec<_> = rig
        .state
        .fulfilments()
        .await
        .unwrap()
        .into_iter()
        .filter(|f| f.invoice_id == held)
        .map(|f| f.won_by)
        .collect();
    assert_eq!(shipped, [format!("manual:{both}")]);
}

// An action that ran but whose entry could not be written says what was done, whatever the
// store's failure (a classified "could not reach" alone would hide that messages moved).
#[tokio::test]
async fn an_action_whose_entry_cannot_be_written_is_not_taken() {
    let rig = Rig::new(HELD).await;
    rig.dead_letter("inv_audit_unrecorded").await;
    let redrive = [
        "redrive",
        "--actor",
        "alice",
        "--state-table",
        "no-such-state-table",
    ];
    let (code, out) = rig.cli(&redrive).await;
    assert_eq!(code, Some(4), "{out}");
    assert!(
        out.contains(
            "error: redrive of queue was not done: its audit entry could not be recorded first: "
        ),
        "{out}"
    );
    assert!(rig.entries(ActionKind::Redrive).await.is_empty());
    // Nothing moved: the dead letter is still there for the redrive that can be recorded.
    let (code, out) = rig.cli(&["redrive", "--actor", "alice"]).await;
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(rig.only(ActionKind::Redrive).await.result, "moved 1");
}
