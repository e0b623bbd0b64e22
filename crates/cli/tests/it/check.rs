//! `check` against a gallery of receivers, each broken in one classic way (and one that is
//! not): `check` must fail each at the step that exposes its flaw, pass the sound ones, and
//! never say PASS for what it could not observe. Then our own `dev` through its tables.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use paymos_inbox::tools::check::{self, CheckOptions, MarkPaid, Probe, StepVerdict};
use paymos_inbox_core::wire::signature::{SigningKey, Verifier, WebhookSecret};
use tokio::sync::Mutex;

use crate::tools::{dev, tables_of};
use paymos_inbox_testkit::*;

/// The classic mistakes, one per receiver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flaw {
    /// Verifies, deduplicates by event id, ships once per order: sound.
    None,
    /// Answers 2xx, then dies before writing anything.
    AcksBeforeRecording,
    /// Deduplicates by the resource id: the `paid` after `confirming` is dropped.
    DedupsByResource,
    /// Keys orders by event id: the same payment through two endpoints ships twice.
    KeysOrdersByEventId,
    /// Reads only the last `v1` of the signature header (fails during a rotation).
    ReadsOnlyTheLastV1,
    /// Ships on every delivery, deduplicating nothing.
    ShipsEveryDelivery,
    /// Looks whether the order shipped, calls the (slow) shipping API, then records it:
    /// concurrent copies all ship.
    RecordsAfterShipping,
}

/// A small receiver whose order rows live in a file (one invoice id per row), so a shell
/// command can count them as `--orders-cmd` would.
struct Receiver {
    flaw: Flaw,
    rows: PathBuf,
    seen_events: Mutex<HashSet<String>>,
    seen_resources: Mutex<HashSet<String>>,
    verifier: Verifier,
}

impl Receiver {
    fn count(&self, invoice: &str) -> usize {
        std::fs::read_to_string(&self.rows)
            .unwrap_or_default()
            .lines()
            .filter(|l| *l == invoice)
            .count()
    }

    fn ship(&self, invoice: &str) {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.rows)
            .unwrap();
        writeln!(f, "{invoice}").unwrap();
    }

    fn verified(&self, header: &str, body: &[u8]) -> bool {
        if self.flaw != Flaw::ReadsOnlyTheLastV1 {
            return self.verifier.verify(Some(header), body, now_secs()).is_ok();
        }
        let t: u64 = header
            .split(',')
            .find_map(|p| p.strip_prefix("t="))
            .and_then(|t| t.parse().ok())
            .unwrap_or(0);
        let last = header
            .split(',')
            .filter_map(|p| p.strip_prefix("v1="))
            .next_back()
            .unwrap_or("");
        WebhookSecret::new(TEST_SECRET).sign(t, body) == last
    }

    async fn webhook(&self, header: &str, body: &[u8]) -> u16 {
        if !self.verified(header, body) {
            return 401;
        }
        let event: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
        let id = event["event_id"].as_str().unwrap_or_default().to_owned();
        let invoice = event["data"]["invoice_id"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        // A sound receiver applies its own project's payments only (`send`'s `prj_local`).
        let ours = event["data"]["project_id"]
            .as_str()
            .is_none_or(|p| p == "prj_local");
        let paid = event["event_type"] == "invoice.paid";
        match self.flaw {
            Flaw::AcksBeforeRecording => {}
            Flaw::ShipsEveryDelivery => {
                if paid {
                    self.ship(&invoice);
                }
            }
            Flaw::DedupsByResource => {
                if self.seen_resources.lock().await.insert(invoice.clone()) && paid {
                    self.ship(&invoice);
                }
            }
            Flaw::KeysOrdersByEventId => {
                if self.seen_events.lock().await.insert(id) && paid {
                    self.ship(&invoice);
                }
            }
            Flaw::RecordsAfterShipping => {
                if paid && self.count(&invoice) == 0 {
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    self.ship(&invoice);
                }
            }
            Flaw::None | Flaw::ReadsOnlyTheLastV1 => {
                let mut seen = self.seen_events.lock().await;
                if seen.insert(id) && paid && ours && self.count(&invoice) == 0 {
                    self.ship(&invoice);
                }
            }
        }
        200
    }
}

/// The receivers verify at the real time: `check` signs with it.
fn now_secs() -> u64 {
    paymos_inbox_lambda::now_ms() / 1000
}

/// Starts a receiver with `flaw`; returns its base URL and its rows file.
async fn receiver(flaw: Flaw) -> (String, PathBuf) {
    let rows = std::env::temp_dir().join(format!("{}.rows", unique("receiver")));
    std::fs::write(&rows, "").unwrap();
    let state = Arc::new(Receiver {
        flaw,
        rows: rows.clone(),
        seen_events: Mutex::default(),
        seen_resources: Mutex::default(),
        verifier: Verifier::new(
            vec![SigningKey::new("test", &WebhookSecret::new(TEST_SECRET))],
            300,
        ),
    });
    let url = paymos_inbox_local::stub::serve(move |req: hyper::Request<hyper::body::Incoming>| {
        let state = state.clone();
        async move {
            let path = req.uri().path().to_owned();
            let invoice = req
                .uri()
                .query()
                .and_then(|q| q.strip_prefix("invoice="))
                .unwrap_or_default()
                .to_owned();
            let header = req
                .headers()
                .get("x-webhook-signature")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned();
            let body = req
                .into_body()
                .collect()
                .await
                .map(|c| c.to_bytes())
                .unwrap_or_default();
            let (status, text) = match path.as_str() {
                "/orders" => (200, format!("{{\"count\": {}}}", state.count(&invoice))),
                "/mark-paid" => {
                    if state.count(&invoice) == 0 {
                        state.ship(&invoice);
                    }
                    (200, "{}".to_owned())
                }
                _ => (state.webhook(&header, &body).await, "{}".to_owned()),
            };
            let mut response = hyper::Response::new(Full::new(Bytes::from(text)));
            *response.status_mut() = hyper::StatusCode::from_u16(status).unwrap();
            response
        }
    })
    .await
    .unwrap();
    (url, rows)
}

fn options(url: &str) -> CheckOptions {
    CheckOptions {
        project: "prj_local".into(),
        url: format!("{url}/"),
        secret: WebhookSecret::new(TEST_SECRET),
        wrong_secret: WebhookSecret::new("whsec_test_wrong"),
        live: false,
        collisions: 4,
        patience: Duration::from_secs(3),
        timeout: Duration::from_secs(1),
        settle: Duration::from_millis(300),
        probe: Some(Probe::Url(format!("{url}/orders?invoice={{invoice_id}}"))),
        mark_paid: Some(MarkPaid::Url(format!(
            "{url}/mark-paid?invoice={{invoice_id}}"
        ))),
        api: None,
    }
}

fn first_failure(steps: &[StepVerdict]) -> Option<u8> {
    steps.iter().find(|s| s.verdict == "fail").map(|s| s.number)
}

async fn fails_at(flaw: Flaw, step: u8) {
    let (url, _) = receiver(flaw).await;
    let steps = check::run(options(&url)).await;
    assert_eq!(
        first_failure(&steps),
        Some(step),
        "{flaw:?} must fail step {step}: {steps:#?}"
    );
}

#[tokio::test]
async fn a_receiver_that_acknowledges_before_recording_fails_step_one() {
    fails_at(Flaw::AcksBeforeRecording, 1).await;
}

#[tokio::test]
async fn a_receiver_that_deduplicates_by_resource_fails_step_one() {
    fails_at(Flaw::DedupsByResource, 1).await;
}

#[tokio::test]
async fn a_receiver_that_reads_only_the_last_v1_fails_step_one() {
    fails_at(Flaw::ReadsOnlyTheLastV1, 1).await;
}

#[tokio::test]
async fn a_receiver_that_keys_orders_by_event_id_fails_step_two() {
    fails_at(Flaw::KeysOrdersByEventId, 2).await;
}

#[tokio::test]
async fn a_receiver_that_ships_every_delivery_fails_step_two() {
    fails_at(Flaw::ShipsEveryDelivery, 2).await;
}

#[tokio::test]
async fn a_receiver_that_records_after_shipping_fails_step_three() {
    fails_at(Flaw::RecordsAfterShipping, 3).await;
}

#[tokio::test]
async fn a_sound_receiver_passes_through_a_url_probe_and_through_shell_commands() {
    let (url, rows) = receiver(Flaw::None).await;
    let steps = check::run(options(&url)).await;
    for s in &steps {
        assert_eq!(s.verdict, "pass", "{s:#?}");
    }
    // The same receiver observed and corrected through shell commands on its rows file.
    let rows = rows.display();
    let mut by_shell = options(&url);
    by_shell.probe = Some(Probe::Command(format!(
        "grep -cx '{{invoice_id}}' {rows}; true"
    )));
    by_shell.mark_paid = Some(MarkPaid::Command(format!("echo {{invoice_id}} >> {rows}")));
    let steps = check::run(by_shell).await;
    for s in &steps {
        assert_eq!(s.verdict, "pass", "{s:#?}");
    }
}

#[tokio::test]
async fn without_a_probe_nothing_is_passed_and_the_exit_code_says_unproven() {
    let (url, _) = receiver(Flaw::ShipsEveryDelivery).await;
    let mut blind = options(&url);
    blind.probe = None;
    blind.mark_paid = None;
    let steps = check::run(blind).await;
    assert!(
        steps.iter().all(|s| s.verdict == "unproven"),
        "a receiver that ships every delivery is never PASSED blind: {steps:#?}"
    );
    assert!(
        steps[0]
            .missing
            .as_deref()
            .unwrap()
            .contains("--orders-cmd")
    );

    let url = format!("{url}/");
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_paymos-inbox"))
            .args(["check", &url, "--patience", "3", "--settle", "0.2"])
            .env_remove("PAYMOS_WEBHOOK_SECRET")
            .env_remove("PAYMOS_API_KEY")
            .env_remove("PAYMOS_API_SECRET")
            .env_remove("DELIVERIES_TABLE")
            .env_remove("STATE_TABLE")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{text}");
    assert!(
        text.contains("UNPROVEN") && !text.contains("PASS"),
        "{text}"
    );
}

#[tokio::test]
async fn check_against_dev_passes_all_six_steps_with_evidence_even_when_replies_are_late() {
    // The first attempt of each event is answered after 1.5 s; the sender gives up after 1 s
    // (Paymos' 10 s, scaled), so its retries collide with recorded, in-flight deliveries.
    let dev = dev(Some(Duration::from_millis(1500))).await;
    let tables = tables_of(&dev);
    let mut options = options("http://unused");
    options.url = dev.info.ingest_url.clone();
    // Beyond ingest's lease (30 s): on a loaded machine an attempt the sender gave up on can
    // hold it that long, and every retry meanwhile is rightly `in_progress` (a clean-clone CI
    // run saw 30 of them in 20 s); the sender retries for hours, so the check waits it out.
    options.patience =
        Duration::from_secs(paymos_inbox_core::roads::ingest::DEFAULT_LEASE_SECS + 15);
    options.probe = Some(Probe::Tables(tables.clone()));
    options.mark_paid = Some(MarkPaid::Tables(tables));
    let steps = check::run(options).await;
    for s in &steps {
        assert_eq!(s.verdict, "pass", "step {}: {s:#?}", s.number);
        assert!(
            s.evidence
                .iter()
                .any(|e| e.contains(": 1 fulfilment item ") || e.contains(": 1 row")),
            "step {} shows the row it counted: {s:#?}",
            s.number
        );
    }
    assert!(
        steps[2].evidence[0].contains("still working past the sender's"),
        "{:#?}",
        steps[2].evidence
    );
    assert!(
        steps[3]
            .evidence
            .iter()
            .any(|e| e.contains("mark-paid inv_")),
        "{:#?}",
        steps[3].evidence
    );
}

// This stop's attack (its F7): `check` against `dev --project prj_a` paid steps 1 to 5 in
// prj_local, a project the stack does not apply, and failed them ("2xx given but nothing
// shipped: lost"); it had no `--project`. It now pays in `dev`'s home project (or --project):
// the six steps pass, exit 0.
#[tokio::test]
async fn check_against_a_dev_of_its_own_projects_pays_in_them() {
    let dev = crate::tools::dev_of(None, &["prj_a"]).await;
    let (_folder, info) = crate::tools::info_file(&dev, "check-project");
    let url = dev.info.ingest_url.clone();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_paymos-inbox"))
            .args(["check", &url, "--dev-info", &info, "--settle", "0.2"])
            .env_remove("PAYMOS_WEBHOOK_SECRET")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(!said.contains("FAIL"), "{said}");
}

/// `paymos-inbox` with `args`, as a person runs it: its exit code and what it printed.
async fn paymos_inbox(args: &[&str]) -> (Option<i32>, String) {
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_paymos-inbox"))
            .args(&args)
            .env_remove("PAYMOS_WEBHOOK_SECRET")
            .env_remove("PAYMOS_API_KEY")
            .env_remove("PAYMOS_API_SECRET")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// A payment of `order` in `project` by `invoice`, sent to `dev` (its info file `info`) and
/// applied: its outcome.
async fn paid_in(info: &str, (invoice, order, project): (&str, &str, &str)) -> String {
    let folder = scratch("check-paid-in");
    let data = folder.path().join("data.json");
    std::fs::write(
        &data,
        serde_json::json!({"project_id": project,
            "order": {"external_id": order, "amount": "25.00", "currency": "USDT"}})
        .to_string(),
    )
    .unwrap();
    let send = [
        "send",
        "--type",
        "invoice.paid",
        "--resource",
        invoice,
        "--data",
        data.to_str().unwrap(),
        "--wait",
        "--json",
        "--dev-info",
        info,
    ];
    let (_, out) = paymos_inbox(&send).await;
    out.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find_map(|sent| sent["outcome"].as_str().map(str::to_owned))
        .unwrap_or_else(|| panic!("send --json says no outcome: {out}"))
}

// `check`'s step 4 marked its invoice paid through the tables naming no project, with a fulfil
// that knew none of the stack's: on a stack of two projects, `check --project prj_b` claimed
// the order under the home project's key, so a second payment of prj_b's order shipped it
// again; on a stack of every project, under the key of before projects, so another project's
// order of the same id was refused as a duplicate. The order is now claimed in the project the
// check pays in, as `mark-paid --project` claims it.
#[tokio::test]
async fn checks_mark_paid_through_the_tables_claims_the_order_in_the_project_it_pays_in() {
    for (projects, project, other) in [
        (&["prj_a", "prj_b"][..], "prj_b", "prj_a"),
        (&[][..], "prj_local", "prj_z"),
    ] {
        let dev = crate::tools::dev_of(None, projects).await;
        let (_folder, info) = crate::tools::info_file(&dev, "check-mark-paid");
        let url = dev.info.ingest_url.clone();
        let check = [
            "check",
            &url,
            "--dev-info",
            &info,
            "--project",
            project,
            "--settle",
            "0.2",
            "--json",
        ];
        let (code, out) = paymos_inbox(&check).await;
        // A stack of every project cannot prove step 6 (unproven, exit 3).
        assert!(matches!(code, Some(0 | 3)), "{out}");
        let steps: Vec<serde_json::Value> = out
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        let four = steps.iter().find(|s| s["number"] == 4).expect(&out);
        assert_eq!(four["verdict"], "pass", "{out}");
        let marked = four["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .find_map(|e| e.as_str()?.strip_prefix("by hand: mark-paid "))
            .and_then(|e| e.split(':').next())
            .unwrap_or_else(|| panic!("step 4 marked an invoice paid: {out}"))
            .to_owned();
        let order = format!("order-{marked}");
        assert_eq!(
            paid_in(&info, ("inv_check_again", &order, project)).await,
            "duplicate_payment",
            "{projects:?}: a second payment of {project}'s order {order} never ships it twice"
        );
        assert_eq!(
            paid_in(&info, ("inv_check_other", &order, other)).await,
            "fulfilled",
            "{projects:?}: {other}'s order {order} is another order"
        );
    }
}
