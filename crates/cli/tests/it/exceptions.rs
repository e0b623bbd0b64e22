//! The reverse check a merchant can leave on, and a way out for every exception, against
//! DynamoDB Local, fauxqs' shapes and a fake Paymos API on loopback.

use std::time::{Duration, Instant};

use aws_lambda_events::sqs::{SqsEvent, SqsMessage};
use paymos_inbox_aws::dynamodb::{DynamoLedger, DynamoResources, balance_key};
use paymos_inbox_aws::paymos_api::PaymosApi;
use paymos_inbox_core::money::change::{Applied, OrderRef};
use paymos_inbox_core::money::effect::RecordFulfilment;
use paymos_inbox_core::money::status::Amount;
use paymos_inbox_core::roads::exceptions;
use paymos_inbox_core::roads::fulfil::{Fulfil, FulfilError};
use paymos_inbox_core::roads::release::ReleaseBy;
use paymos_inbox_core::wire::signature::Environment;
use paymos_inbox_lambda::fulfil::{QueueVisibility, handle_batch};
use serde_json::{Value, json};

use paymos_inbox_testkit::*;

use paymos_inbox_testkit::paymos_fake::{self, Answer, FakePaymos, invoice};

struct Rig {
    aws: Aws,
    state: String,
    ledger: String,
    api: FakePaymos,
}

impl Rig {
    async fn new(paid: Vec<Value>) -> Self {
        let aws = Aws::new();
        let stack = aws.stack().await;
        let api = FakePaymos::start().await;
        if !paid.is_empty() {
            api.list(paid);
        }
        Self {
            state: stack.table("StateTable").to_owned(),
            ledger: stack.table("DeliveriesTable").to_owned(),
            aws,
            api,
        }
    }

    fn answer(&self, invoice: &str, answer: Answer) {
        self.api.answer(invoice, answer);
    }

    fn client(&self) -> paymos::PaymosClient {
        self.api.client()
    }

    fn client_with_timeout(&self, timeout: Duration) -> paymos::PaymosClient {
        self.api.client_with_timeout(timeout)
    }

    fn store(&self) -> DynamoResources {
        DynamoResources::new(self.aws.dynamodb.clone(), &self.state, &self.ledger)
    }

    fn ledger(&self) -> DynamoLedger {
        DynamoLedger::new(self.aws.dynamodb.clone(), &self.ledger, None)
    }

    fn checked(&self, deadline: Duration) -> Fulfil<DynamoResources, PaymosApi> {
        Fulfil::new(self.store())
            .for_projects(paymos_inbox_core::money::change::Projects::parse("prj_1"))
            .with_confirmation(PaymosApi::new(self.client()).with_deadline(deadline))
    }

    async fn fulfilments(&self, invoice: &str) -> usize {
        self.aws
            .scan(&self.state)
            .await
            .iter()
            .filter(|i| get_s(i, "kind") == "fulfilment" && get_s(i, "invoice_id") == invoice)
            .count()
    }

    async fn outcome(&self, event_id: &str) -> String {
        get_s(
            &self
                .aws
                .item(&self.ledger, "event_id", event_id)
                .await
                .unwrap(),
            "outcome",
        )
        .to_owned()
    }

    /// `invoice.paid` of `invoice` (order `order-<invoice>`, 25.00 USDT, prj_1) recorded and
    /// applied under the reverse check, Paymos answering 404: it waits `unconfirmed`.
    async fn refuted_payment(&self, event_id: &str, invoice: &str) {
        self.answer(invoice, Answer::NotFound);
        let body = envelope(
            event_id,
            "invoice.paid",
            json!({"invoice_id": invoice, "project_id": "prj_1", "order": {"external_id": format!("order-{invoice}"), "amount": "25.00", "currency": "USDT"}}),
        );
        self.record(&body).await;
        let (_, applied) = self
            .checked(Duration::from_secs(5))
            .apply(&live(&body), NOW_MS)
            .await
            .unwrap();
        assert_eq!(applied, Applied::Unconfirmed);
    }

    /// Records the delivery as ingest would (so the processed mark has a record to update).
    async fn record(&self, body: &str) {
        use paymos_inbox_core::roads::ingest::DeliveryLedger;
        let delivery = recorded_delivery(
            body,
            paymos_inbox_core::wire::signature::Environment::Live,
            NOW_MS,
        );
        self.ledger().record(&delivery, NOW_MS).await.unwrap();
    }
}

/// `invoice.paid` as the official `ton_invoice_v2` vector sends it: no `order`, the token
/// amount in `payment.expected`.
fn paid_in_tokens(event_id: &str, invoice: &str, expected: &str) -> String {
    envelope(
        event_id,
        "invoice.paid",
        json!({"invoice_id": invoice, "status": "paid", "is_test": false,
               "payment": {"network": "TON", "currency": "USDT", "expected": expected}}),
    )
}

fn message(id: &str, body: &str, receives: u32) -> SqsMessage {
    let mut m = SqsMessage::default();
    m.message_id = Some(id.to_owned());
    m.body = Some(live(body).encode());
    m.attributes
        .insert("ApproximateReceiveCount".into(), receives.to_string());
    m
}

fn deposit(event_id: &str, pcd: &str) -> String {
    envelope(
        event_id,
        "payment_channel.deposit.confirmed",
        json!({"id": pcd, "is_final": true, "payment_channel_external_id": "payer-9", "currency": "USDT", "net": "5.00"}),
    )
}

#[tokio::test]
async fn a_usd_priced_invoice_paid_in_usdt_passes_the_reverse_check() {
    let rig = Rig::new(Vec::new()).await;
    rig.answer(
        "inv_usd",
        Answer::Invoices(vec![invoice(
            "inv_usd",
            "paid",
            ("10", "USD"),
            ("10.50", "USDT"),
        )]),
    );
    let body = paid_in_tokens("evt_usd", "inv_usd", "10.5");
    rig.record(&body).await;
    let (_, applied) = rig
        .checked(Duration::from_secs(5))
        .apply(&live(&body), NOW_MS)
        .await
        .unwrap();
    assert_eq!(applied, Applied::Fulfilled);
    assert_eq!(rig.fulfilments("inv_usd").await, 1);
    // A token amount that differs is still refused.
    rig.answer(
        "inv_short",
        Answer::Invoices(vec![invoice(
            "inv_short",
            "paid",
            ("10", "USD"),
            ("10.50", "USDT"),
        )]),
    );
    let short = paid_in_tokens("evt_short", "inv_short", "1.05");
    rig.record(&short).await;
    let (_, applied) = rig
        .checked(Duration::from_secs(5))
        .apply(&live(&short), NOW_MS)
        .await
        .unwrap();
    assert_eq!(applied, Applied::Unconfirmed);
    assert_eq!(rig.fulfilments("inv_short").await, 0);
}

#[tokio::test]
async fn not_paid_yet_then_paid_ends_fulfilled_once() {
    let rig = Rig::new(Vec::new()).await;
    rig.answer(
        "inv_lag",
        Answer::Invoices(vec![
            invoice(
                "inv_lag",
                "confirming",
                ("25.00", "USDT"),
                ("25.00", "USDT"),
            ),
            invoice("inv_lag", "paid", ("25.00", "USDT"), ("25.00", "USDT")),
        ]),
    );
    let body = paid_in_tokens("evt_lag", "inv_lag", "25.00");
    rig.record(&body).await;
    let fulfil = rig.checked(Duration::from_secs(5));
    let first = fulfil
        .apply_received(&live(&body), NOW_MS, 1)
        .await
        .unwrap_err();
    assert!(matches!(first, FulfilError::NotYet { .. }), "{first:?}");
    assert_eq!(rig.fulfilments("inv_lag").await, 0);
    let (_, applied) = fulfil
        .apply_received(&live(&body), NOW_MS, 2)
        .await
        .unwrap();
    assert_eq!(applied, Applied::Fulfilled);
    assert_eq!(rig.fulfilments("inv_lag").await, 1);
    assert_eq!(rig.outcome("evt_lag").await, "fulfilled");
}

#[tokio::test]
async fn a_404_is_unconfirmed_and_leaves_the_rest_of_the_batch_alone() {
    let rig = Rig::new(Vec::new()).await;
    rig.answer("inv_forged", Answer::NotFound);
    rig.api.deposit(
        "pcd_dep1",
        paymos_fake::deposit("pcd_dep1", "payer-9", "5.00"),
    );
    let (forged, credit) = (
        paid_in_tokens("evt_forged", "inv_forged", "25.00"),
        deposit("evt_dep1", "pcd_dep1"),
    );
    rig.record(&forged).await;
    rig.record(&credit).await;
    let mut event = SqsEvent::default();
    event.records = vec![message("m1", &forged, 1), message("m2", &credit, 1)];
    let response = handle_batch(
        &rig.checked(Duration::from_secs(5)),
        &QueueVisibility,
        event,
        NOW_MS,
    )
    .await;
    assert!(
        response.batch_item_failures.is_empty(),
        "nothing retried, nothing to the DLQ"
    );
    assert_eq!(rig.outcome("evt_forged").await, "unconfirmed");
    assert_eq!(rig.outcome("evt_dep1").await, "credited");
    assert_eq!(rig.fulfilments("inv_forged").await, 0);
}

#[tokio::test]
async fn an_api_that_hangs_fails_only_its_own_message_and_in_time() {
    let rig = Rig::new(Vec::new()).await;
    rig.answer("inv_hang", Answer::Hang);
    rig.api.deposit(
        "pcd_dep2",
        paymos_fake::deposit("pcd_dep2", "payer-9", "5.00"),
    );
    let (slow, credit) = (
        paid_in_tokens("evt_hang", "inv_hang", "25.00"),
        deposit("evt_dep2", "pcd_dep2"),
    );
    rig.record(&slow).await;
    rig.record(&credit).await;
    let mut event = SqsEvent::default();
    event.records = vec![message("m1", &slow, 1), message("m2", &credit, 1)];
    // The client would wait a minute: the check's own deadline is what bounds it.
    let fulfil = Fulfil::new(rig.store())
        .for_projects(paymos_inbox_core::money::change::Projects::parse("prj_1"))
        .with_confirmation(
            PaymosApi::new(rig.client_with_timeout(Duration::from_secs(60)))
                .with_deadline(Duration::from_millis(500)),
        );
    let started = Instant::now();
    let response = handle_batch(&fulfil, &QueueVisibility, event, NOW_MS).await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "bounded: {:?}",
        started.elapsed()
    );
    let failed: Vec<_> = response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.as_str())
        .collect();
    assert_eq!(failed, ["m1"], "only the invoice waits for Paymos");
    assert_eq!(rig.outcome("evt_dep2").await, "credited");
}

#[tokio::test]
async fn releasing_a_held_invoice_fulfils_once_against_a_second_release_and_a_replayed_webhook() {
    let rig = Rig::new(Vec::new()).await;
    let store = rig.store();
    paymos_inbox::tools::exceptions::register_order(
        &store,
        (None, "order-inv_held"),
        "10.00",
        "usdt",
    )
    .await
    .unwrap();
    let fulfil = Fulfil::new(rig.store())
        .for_projects(paymos_inbox_core::money::change::Projects::parse("prj_1"));
    let paid = |event: &str| {
        envelope(
            event,
            "invoice.paid",
            json!({"invoice_id": "inv_held", "status": "paid",
                   "order": {"external_id": "order-inv_held", "amount": "12.00", "currency": "USDT"}}),
        )
    };
    rig.record(&paid("evt_h1")).await;
    assert_eq!(
        fulfil
            .apply(&live(&paid("evt_h1")), NOW_MS)
            .await
            .unwrap()
            .1,
        Applied::Held
    );
    // mark-paid cannot ship a held invoice (it stays held); release can.
    let none = OrderRef {
        external_id: None,
        amount: None,
        currency: None,
        project: None,
        home: false,
        unlisted: false,
    };
    // mark-paid reports what exists: the payment is held.
    assert_eq!(
        fulfil
            .mark_paid("inv_held", none, "support:bob", NOW_MS)
            .await
            .unwrap(),
        Applied::Held
    );
    let listed = exceptions::list(&store, &rig.ledger(), 0).await.unwrap();
    assert!(
        listed
            .iter()
            .any(|e| e.kind == "held" && e.resource_id.as_deref() == Some("inv_held")),
        "{listed:?}"
    );

    rig.record(&paid("evt_h2")).await;
    let ledger = rig.ledger();
    let replay = live(&paid("evt_h2"));
    let (alice, bob) = (
        by("alice", Some("customer confirmed"), true),
        by("bob", Some("checked"), true),
    );
    let (a, b, c) = tokio::join!(
        exceptions::release(
            &store,
            &ledger,
            "inv_held",
            &alice,
            &RecordFulfilment,
            NOW_MS
        ),
        exceptions::release(&store, &ledger, "inv_held", &bob, &RecordFulfilment, NOW_MS),
        fulfil.apply(&replay, NOW_MS),
    );
    let released = [a.unwrap(), b.unwrap()];
    assert_eq!(
        released
            .iter()
            .filter(|r| **r == Applied::Fulfilled)
            .count(),
        1,
        "{released:?}"
    );
    assert_eq!(c.unwrap().1, Applied::AlreadyFinal);
    assert_eq!(rig.fulfilments("inv_held").await, 1);
    let item = rig.aws.item(&rig.state, "pk", "inv_held").await.unwrap();
    assert!(get_s(&item, "released_by").starts_with("manual:"));
    // Still marked held (the review it was held for stays a fact), and listed nowhere.
    assert!(item.contains_key("released_at"));
    let listed = exceptions::list(&store, &rig.ledger(), 0).await.unwrap();
    assert!(
        listed
            .iter()
            .all(|e| e.resource_id.as_deref() != Some("inv_held")),
        "{listed:?}"
    );
    // A second release later changes nothing.
    assert_eq!(
        exceptions::release(
            &store,
            &ledger,
            "inv_held",
            &by("carol", Some("checked"), true),
            &RecordFulfilment,
            NOW_MS
        )
        .await
        .unwrap(),
        Applied::AlreadyFinal
    );
}

#[tokio::test]
async fn unconfirmed_and_late_payments_are_listed_and_released_and_a_refund_clears_a_duplicate() {
    let rig = Rig::new(Vec::new()).await;
    let store = rig.store();
    let ledger = rig.ledger();
    // Unconfirmed: Paymos did not know it (404). It names its order: a release ships nothing
    // under no order.
    rig.answer("inv_unc", Answer::NotFound);
    let unc = envelope(
        "evt_unc",
        "invoice.paid",
        json!({"invoice_id": "inv_unc", "order": {"external_id": "order-inv_unc", "amount": "25.00", "currency": "USDT"}}),
    );
    rig.record(&unc).await;
    rig.checked(Duration::from_secs(5))
        .apply(&live(&unc), NOW_MS)
        .await
        .unwrap();
    // Paid late: expired, then paid.
    let fulfil = Fulfil::new(rig.store())
        .for_projects(paymos_inbox_core::money::change::Projects::parse("prj_1"));
    for (e, ty) in [("evt_exp", "invoice.expired"), ("evt_late", "invoice.paid")] {
        let body = envelope(
            e,
            ty,
            json!({"invoice_id": "inv_late", "order": {"external_id": "order-inv_late", "amount": "5", "currency": "USDT"}}),
        );
        rig.record(&body).await;
        fulfil.apply(&live(&body), NOW_MS).await.unwrap();
    }
    // A duplicate payment: two invoices for one order.
    for (e, inv) in [("evt_d1", "inv_first"), ("evt_d2", "inv_second")] {
        let body = envelope(
            e,
            "invoice.paid",
            json!({"invoice_id": inv, "order": {"external_id": "order-dup", "amount": "5", "currency": "USDT"}}),
        );
        rig.record(&body).await;
        fulfil.apply(&live(&body), NOW_MS).await.unwrap();
    }
    let kinds = |list: &[exceptions::Exception]| {
        let mut k: Vec<(&str, String)> = list
            .iter()
            .map(|e| (e.kind, e.resource_id.clone().unwrap_or_default()))
            .collect();
        k.sort();
        k
    };
    let listed = exceptions::list(&store, &ledger, 0).await.unwrap();
    assert_eq!(
        kinds(&listed),
        [
            ("duplicate_payment", "inv_second".to_owned()),
            ("paid_late", "inv_late".to_owned()),
            ("unconfirmed", "inv_unc".to_owned())
        ]
    );
    assert!(
        listed
            .iter()
            .all(|e| !e.action.is_empty() && !e.why.is_empty())
    );

    // Only an unconfirmed delivery names inv_unc: a forgery looks the same, so release refuses
    // it, and so does a person's word without Paymos' (`mark-paid` with no API). Paymos never
    // knew it: the person takes it off the list as forged; the late one ships.
    let refused = exceptions::release(
        &store,
        &ledger,
        "inv_unc",
        &by("alice", Some("paid, seen on chain"), false),
        &RecordFulfilment,
        NOW_MS,
    )
    .await;
    assert!(
        matches!(&refused, Err(paymos_inbox_core::roads::release::ReleaseError::NotReleasable(why)) if why.contains("recheck inv_unc")),
        "{refused:?}"
    );
    assert_eq!(rig.fulfilments("inv_unc").await, 0);
    let word = exceptions::refuses_word(&store, &ledger, "inv_unc", false).await;
    assert!(
        matches!(&word, Ok(Some(why)) if why.contains("recheck inv_unc")),
        "{word:?}"
    );
    assert_eq!(
        exceptions::resolve(&ledger, "evt_unc", None, "alice", NOW_MS)
            .await
            .unwrap(),
        Applied::Unconfirmed
    );
    assert_eq!(
        exceptions::release(
            &store,
            &ledger,
            "inv_late",
            &by("alice", None, false),
            &RecordFulfilment,
            NOW_MS
        )
        .await
        .unwrap(),
        Applied::Fulfilled
    );
    assert_eq!(rig.fulfilments("inv_unc").await, 0);
    assert_eq!(rig.fulfilments("inv_late").await, 1);
    // A duplicate is refunded, never released.
    assert!(
        exceptions::release(
            &store,
            &ledger,
            "inv_second",
            &by("alice", None, false),
            &RecordFulfilment,
            NOW_MS
        )
        .await
        .is_err()
    );
    let refund = envelope(
        "evt_refund",
        "withdrawal.completed",
        json!({"withdrawal_id": "wdr_back", "invoice_id": "inv_second", "mode": "full", "amount": "5", "currency": "USDT"}),
    );
    rig.record(&refund).await;
    fulfil.apply(&live(&refund), NOW_MS).await.unwrap();
    let second = rig.aws.item(&rig.state, "pk", "inv_second").await.unwrap();
    assert!(
        second.contains_key("refunds"),
        "the refund is recorded beside the invoice"
    );
    assert!(
        exceptions::list(&store, &ledger, 0)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(rig.fulfilments("inv_second").await, 0);
}

#[tokio::test]
async fn recheck_applies_what_paymos_now_confirms() {
    let rig = Rig::new(Vec::new()).await;
    rig.answer(
        "inv_rc",
        Answer::Invoices(vec![invoice(
            "inv_rc",
            "confirming",
            ("25.00", "USDT"),
            ("25.00", "USDT"),
        )]),
    );
    let body = paid_in_tokens("evt_rc", "inv_rc", "25.00");
    rig.record(&body).await;
    rig.checked(Duration::from_secs(5))
        .apply(&live(&body), NOW_MS)
        .await
        .unwrap();
    assert_eq!(rig.outcome("evt_rc").await, "unconfirmed");
    rig.answer(
        "inv_rc",
        Answer::Invoices(vec![invoice(
            "inv_rc",
            "paid",
            ("25.00", "USDT"),
            ("25.00", "USDT"),
        )]),
    );
    let api = PaymosApi::new(rig.client());
    let results = exceptions::recheck(
        &rig.store(),
        &rig.ledger(),
        &api,
        &RecordFulfilment,
        Environment::Live,
        None,
        NOW_MS,
    )
    .await
    .unwrap();
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].outcome.as_str(), "fulfilled");
    assert_eq!(rig.fulfilments("inv_rc").await, 1);
    assert!(
        exceptions::recheck(
            &rig.store(),
            &rig.ledger(),
            &api,
            &RecordFulfilment,
            Environment::Live,
            None,
            NOW_MS
        )
        .await
        .unwrap()
        .is_empty()
    );
}

#[tokio::test]
async fn reconciliation_re_reads_open_invoices_and_applies_a_missing_one_once() {
    let rig = Rig::new(Vec::new()).await;
    let fulfil = Fulfil::new(rig.store())
        .for_projects(paymos_inbox_core::money::change::Projects::parse("prj_1"));
    // The confirming webhook arrived; the paid one never did.
    let confirming = envelope(
        "evt_open",
        "invoice.confirming",
        json!({"invoice_id": "inv_open", "order": {"external_id": "order-inv_open", "amount": "25.00", "currency": "USDT"}}),
    );
    rig.record(&confirming).await;
    fulfil.apply(&live(&confirming), NOW_MS).await.unwrap();
    rig.answer(
        "inv_open",
        Answer::Invoices(vec![invoice(
            "inv_open",
            "paid",
            ("25.00", "USDT"),
            ("25.00", "USDT"),
        )]),
    );
    let api = rig.client();
    let run = |apply| {
        reconcile(
            &api,
            &fulfil,
            (NOW - 3600) as i64,
            (NOW + 3600) as i64,
            apply,
            NOW_MS,
        )
    };
    let report = run(false).await.unwrap();
    assert_eq!(report.open_rechecked, 1);
    assert_eq!(report.missing.len(), 1);
    assert!(!report.clean());
    let report = run(true).await.unwrap();
    assert_eq!(report.applied["inv_open"], Ok(Applied::Fulfilled));
    assert_eq!(rig.fulfilments("inv_open").await, 1);
    let again = run(true).await.unwrap();
    assert!(again.clean() && again.missing.is_empty(), "{again:?}");
    assert_eq!(rig.fulfilments("inv_open").await, 1);
}

#[tokio::test]
async fn the_amount_guard_is_registered_without_rust_and_refuses_bad_input() {
    let rig = Rig::new(Vec::new()).await;
    let store = rig.store();
    assert!(
        paymos_inbox::tools::exceptions::register_order(&store, (None, "o-1"), "ten", "USD")
            .await
            .unwrap_err()
            .contains("decimal")
    );
    assert!(
        paymos_inbox::tools::exceptions::register_order(&store, (None, "o-1"), "10", "U$D")
            .await
            .is_err()
    );
    paymos_inbox::tools::exceptions::register_order(&store, (None, "o-1"), "10.50", "usd")
        .await
        .unwrap();
    let item = rig.aws.item(&rig.state, "pk", "order#o-1").await.unwrap();
    assert_eq!(
        item["amount"].as_n().unwrap(),
        "10.5",
        "a Number: compared as a decimal"
    );
    assert_eq!(get_s(&item, "currency"), "USD");
}

/// Who releases, why, and whether they override the amount check.
fn by(
    actor: &'static str,
    reason: Option<&'static str>,
    override_amount: bool,
) -> ReleaseBy<'static> {
    ReleaseBy {
        actor,
        reason,
        override_amount,
        project: None,
        order: None,
    }
}

/// Runs the `paymos-inbox` binary on the rig's tables and fake API: its exit code and output.
async fn paymos_inbox(rig: &Rig, args: &[&str]) -> (Option<i32>, String) {
    run_paymos_inbox(rig, args, true).await
}

/// [`paymos_inbox`], given the API's key (`with_api`) or not.
async fn run_paymos_inbox(rig: &Rig, args: &[&str], with_api: bool) -> (Option<i32>, String) {
    run_paymos_inbox_with(rig, args, with_api, &[]).await
}

async fn run_paymos_inbox_with(
    rig: &Rig,
    args: &[&str],
    with_api: bool,
    envs: &[(&str, &str)],
) -> (Option<i32>, String) {
    let envs: Vec<(String, String)> = envs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let (dynamodb, sqs) = endpoint_urls();
    let mut all: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    all.extend(
        [
            "--dynamodb-endpoint",
            &dynamodb,
            "--sqs-endpoint",
            &sqs,
            "--region",
            "us-east-1",
            "--deliveries-table",
            &rig.ledger,
            "--state-table",
            &rig.state,
        ]
        .map(str::to_owned),
    );
    let api = rig.api.url.clone();
    let out = tokio::task::spawn_blocking(move || {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_paymos-inbox"));
        if with_api {
            command
                .env("PAYMOS_API_KEY", paymos_fake::KEY)
                .env("PAYMOS_API_SECRET", paymos_fake::SECRET)
                .env("PAYMOS_API_BASE_URL", api);
        } else {
            command
                .env_remove("PAYMOS_API_KEY")
                .env_remove("PAYMOS_API_SECRET");
        }
        command
            .args(&all)
            .envs(envs)
            .env_remove("PAYMOS_INBOX_STACK_NAME")
            .env_remove("PAYMOS_INBOX_CONFIG_ENV")
            .env_remove("DEAD_LETTER_QUEUE_URL")
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

// Issue 49 (F8): on a stack with the reverse check, a payment Paymos did not confirm (a 404:
// forged, or of a key that does not read it) was shipped by `mark-paid --order-id` without the
// API, the way out `release` offered: the person's word carried the forged delivery's order
// past Paymos' answer. Only Paymos' word ships it now: the API's `mark-paid` or `recheck`.
#[tokio::test]
async fn mark_paid_without_the_api_ships_nothing_paymos_did_not_confirm() {
    let rig = Rig::new(Vec::new()).await;
    rig.refuted_payment("evt_unc", "inv_unc").await;
    let word = [
        "mark-paid",
        "inv_unc",
        "--order-id",
        "order-inv_unc",
        "--project",
        "prj_1",
        "--actor",
        "alice",
    ];
    let (code, out) = run_paymos_inbox(&rig, &word, false).await;
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("did not confirm it") && out.contains("exceptions --resolve evt_unc"),
        "{out}"
    );
    assert_eq!(rig.fulfilments("inv_unc").await, 0, "nothing shipped");
    assert_eq!(rig.outcome("evt_unc").await, "unconfirmed", "still listed");
    // Paymos shows it paid now: the API's word ships it, once.
    rig.answer(
        "inv_unc",
        Answer::Invoices(vec![invoice(
            "inv_unc",
            "paid",
            ("25.00", "USDT"),
            ("25.00", "USDT"),
        )]),
    );
    let (code, out) = paymos_inbox(&rig, &word).await;
    assert_eq!(
        (code, rig.fulfilments("inv_unc").await),
        (Some(0), 1),
        "{out}"
    );
}

// Issue 49 (attack H1): on a stack with the reverse check, a person's word without the API
// shipped what Paymos never confirmed once nothing waited `unconfirmed`: a payment Paymos
// answered 404 to, after its delivery was resolved as forged, and an invoice no delivery ever
// named. On such a stack only Paymos' word makes an invoice paid (`mark-paid` with the API,
// `recheck`, `reconcile --apply`): a person's word alone ships nothing, whatever waits.
#[tokio::test]
async fn on_a_stack_with_the_reverse_check_a_word_without_the_api_ships_nothing() {
    let rig = Rig::new(Vec::new()).await;
    rig.refuted_payment("evt_forged", "inv_forged").await;
    let resolve = [
        "exceptions",
        "--resolve",
        "evt_forged",
        "--actor",
        "alice",
        "--reason",
        "forged: Paymos has no such invoice",
    ];
    let (code, out) = run_checked_stack(&rig, &resolve).await;
    assert_eq!(code, Some(0), "{out}");
    for invoice in ["inv_forged", "inv_never_seen"] {
        let order = format!("order-{invoice}");
        let word = [
            "mark-paid",
            invoice,
            "--order-id",
            &order,
            "--project",
            "prj_1",
            "--actor",
            "alice",
        ];
        let (code, out) = run_checked_stack(&rig, &word).await;
        assert_eq!(
            (code, rig.fulfilments(invoice).await),
            (Some(1), 0),
            "{invoice}: nothing ships on a word alone: {out}"
        );
        assert!(out.contains("reverse check"), "{out}");
    }
}

/// `paymos-inbox` on the rig's tables, the stack saying it runs the reverse check, without
/// the API's key.
async fn run_checked_stack(rig: &Rig, args: &[&str]) -> (Option<i32>, String) {
    run_paymos_inbox_with(rig, args, false, &[("PAYMOS_INBOX_REVERSE_CHECK", "on")]).await
}

// Issue 28, case 4: an invoice named only by an unconfirmed closure is not shipped.
#[tokio::test]
async fn release_refuses_an_invoice_named_only_by_an_unconfirmed_closure() {
    let rig = Rig::new(Vec::new()).await;
    // Paymos' API lags: it still shows the invoice open.
    rig.answer(
        "inv_closed",
        Answer::Invoices(vec![invoice(
            "inv_closed",
            "awaiting_payment",
            ("25.00", "USDT"),
            ("25.00", "USDT"),
        )]),
    );
    let body = envelope(
        "evt_closed",
        "invoice.expired",
        json!({"invoice_id": "inv_closed", "order": {"external_id": "order-inv_closed", "amount": "25.00", "currency": "USDT"}}),
    );
    rig.record(&body).await;
    let (_, applied) = rig
        .checked(Duration::from_secs(5))
        .apply(&live(&body), NOW_MS)
        .await
        .unwrap();
    assert_eq!(applied, Applied::Unconfirmed);
    let (code, out) = paymos_inbox(&rig, &["exceptions", "--json"]).await;
    assert_eq!(code, Some(1), "{out}");
    let listed: Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    let action = listed["action"].as_str().unwrap();
    assert!(
        action.contains("paymos-inbox recheck inv_closed") && !action.contains("release"),
        "{action}"
    );
    let (code, out) = paymos_inbox(&rig, &["release", "inv_closed", "--actor", "alice"]).await;
    assert_eq!(code, Some(1), "refused as any release is: {out}");
    // Asked first, Paymos has it open: what it has is the refusal.
    assert!(
        out.contains("Paymos has inv_closed awaiting_payment, not paid: nothing released"),
        "{out}"
    );
    assert_eq!(rig.fulfilments("inv_closed").await, 0, "nothing shipped");
    assert!(
        rig.aws.item(&rig.state, "pk", "inv_closed").await.is_none(),
        "no paid invoice invented"
    );
    assert_eq!(
        rig.outcome("evt_closed").await,
        "unconfirmed",
        "waits for its recheck"
    );
}

// Issue 28, case 5: a deposit Paymos' API could not confirm in time is credited by `recheck`.
#[tokio::test]
async fn recheck_credits_an_unconfirmed_deposit_once() {
    let rig = Rig::new(Vec::new()).await;
    let mut lagging = paymos_fake::deposit("pcd_lag", "payer-9", "5.00");
    lagging["status"] = json!("confirming");
    lagging["is_final"] = json!(false);
    rig.api.deposit("pcd_lag", lagging);
    let body = deposit("evt_lag_d", "pcd_lag");
    rig.record(&body).await;
    let (_, applied) = rig
        .checked(Duration::from_secs(5))
        .apply(&live(&body), NOW_MS)
        .await
        .unwrap();
    assert_eq!(applied, Applied::Unconfirmed);
    let (code, out) = paymos_inbox(&rig, &["exceptions"]).await;
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("paymos-inbox recheck pcd_lag") && !out.contains("release"),
        "{out}"
    );
    // Paymos confirms it now.
    rig.api.deposit(
        "pcd_lag",
        paymos_fake::deposit("pcd_lag", "payer-9", "5.00"),
    );
    let recheck = ["recheck", "pcd_lag", "--environment", "live"];
    let (code, out) = paymos_inbox(&rig, &recheck).await;
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("evt_lag_d: credited"), "{out}");
    // The rig's stack lists no projects: the balance is keyed by Paymos' project (prj_1).
    let balance = || async {
        rig.aws
            .item(
                &rig.state,
                "pk",
                &balance_key(Some("prj_1"), "payer-9", "USDT"),
            )
            .await
            .map(|b| b["balance"].as_n().unwrap().to_owned())
    };
    let five = |b: Option<String>| {
        b.and_then(|b| Amount::parse(&b))
            .is_some_and(|b| b.same_value(&Amount::parse("5").unwrap()))
    };
    assert!(five(balance().await));
    assert_eq!(rig.outcome("evt_lag_d").await, "rechecked_credited");
    // Once: a second recheck finds nothing, the same deposit from a second endpoint credits
    // nothing, and nothing waits.
    let (code, out) = paymos_inbox(&rig, &recheck).await;
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("no unconfirmed delivery"), "{out}");
    let second = deposit("evt_lag_d2", "pcd_lag");
    rig.record(&second).await;
    let (_, applied) = rig
        .checked(Duration::from_secs(5))
        .apply(&live(&second), NOW_MS)
        .await
        .unwrap();
    assert_eq!(applied, Applied::AlreadyFinal);
    assert!(five(balance().await), "credited once");
    let (code, out) = paymos_inbox(&rig, &["exceptions"]).await;
    assert_eq!(code, Some(0), "{out}");
}

// Issue 49, the attack's F6: a deposit and a refund Paymos answers 404 for (forged, or of a
// project the API key does not read) waited `unconfirmed`; `recheck` then "refuted" both, exit
// 0, and `exceptions` forgot them: nothing credited, nothing recorded. Now each recheck exits 1
// and says it still waits, `exceptions` keeps both with the way out a person takes once they
// checked at Paymos (`exceptions --resolve`), and only that takes one off the list.
#[tokio::test]
async fn recheck_keeps_a_deposit_and_a_refund_paymos_does_not_know_listed_for_a_person() {
    let rig = Rig::new(Vec::new()).await;
    let deposit = envelope(
        "evt_nf_d",
        "payment_channel.deposit.confirmed",
        json!({"id": "pcd_nf", "is_final": true, "payment_channel_external_id": "payer-9",
               "currency": "USDT", "net": "5.00", "project_id": "prj_b"}),
    );
    let refund = envelope(
        "evt_nf_r",
        "withdrawal.completed",
        json!({"withdrawal_id": "wdr_nf", "type": "refund", "invoice_id": "inv_nf", "mode": "full",
               "amount": "5.00", "currency": "USDT", "project_id": "prj_b"}),
    );
    for body in [&deposit, &refund] {
        rig.record(body).await;
        let (_, applied) = rig
            .checked(Duration::from_secs(5))
            .apply(&live(body), NOW_MS)
            .await
            .unwrap();
        assert_eq!(applied, Applied::Unconfirmed);
    }
    for (resource, event) in [("pcd_nf", "evt_nf_d"), ("wdr_nf", "evt_nf_r")] {
        let (code, out) = paymos_inbox(&rig, &["recheck", resource, "--environment", "live"]).await;
        assert_eq!(code, Some(1), "still waits: {out}");
        assert!(out.contains(&format!("{event}: unconfirmed")), "{out}");
        assert!(out.contains("404"), "{out}");
        assert_eq!(rig.outcome(event).await, "unconfirmed");
    }
    let (code, out) = paymos_inbox(&rig, &["exceptions", "--json"]).await;
    assert_eq!(code, Some(1), "{out}");
    let listed: Vec<Value> = out
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    for (resource, event) in [("pcd_nf", "evt_nf_d"), ("wdr_nf", "evt_nf_r")] {
        let e = listed
            .iter()
            .find(|e| e["resource_id"] == resource)
            .unwrap_or_else(|| panic!("{resource} not listed: {out}"));
        assert_eq!(e["kind"], "unconfirmed", "{e}");
        let action = e["action"].as_str().unwrap();
        assert!(
            action.contains(&format!("recheck {resource}"))
                && action.contains("at Paymos")
                && action.contains(&format!("exceptions --resolve {event}")),
            "{action}"
        );
    }
    assert!(
        rig.aws
            .item(&rig.state, "pk", &balance_key(None, "payer-9", "USDT"))
            .await
            .is_none(),
        "nothing credited"
    );
    // A person who checked at Paymos and found the refund forged resolves it; the deposit waits.
    let resolve = [
        "exceptions",
        "--resolve",
        "evt_nf_r",
        "--actor",
        "alice",
        "--reason",
        "no such refund at Paymos",
    ];
    let (code, out) = paymos_inbox(&rig, &resolve).await;
    assert_eq!(code, Some(0), "{out}");
    let (code, out) = paymos_inbox(&rig, &["exceptions", "--json"]).await;
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("pcd_nf") && !out.contains("wdr_nf"), "{out}");
}

// Issue 42, item 7: the unusable outcome said to "read the archived body of evt_… in the
// deliveries table", where no body is (a body is an item of its own, `body#<key>#<sha256>`,
// deflated, under `test#evt_…` for a sandbox delivery), and no command printed one.
#[tokio::test]
async fn exceptions_body_prints_an_unusable_deliverys_exact_bytes_live_and_sandbox() {
    use paymos_inbox_core::roads::ingest::DeliveryLedger as _;
    let rig = Rig::new(Vec::new()).await;
    // A deposit to no channel (unusable), long enough to be stored deflated, with non-ASCII
    // text and the trailing newline Paymos sent: the bytes, not a re-serialisation.
    let body = |id: &str| {
        format!(
            "{}\n",
            envelope(
                id,
                "payment_channel.deposit.confirmed",
                json!({"id": format!("pcd_{id}"), "is_final": true, "payment_channel_external_id": "c-1", "net": "abc", "currency": "USDT", "memo": "Zürich, café ".repeat(40)}),
            )
        )
    };
    let (live_body, sandbox_body) = (body("evt_body_live"), body("evt_body_sandbox"));
    for (text, environment) in [
        (&live_body, Environment::Live),
        (&sandbox_body, Environment::Test),
    ] {
        // Received now: a body item past its expiry counts as gone.
        let now = paymos_inbox_lambda::now_ms();
        rig.ledger()
            .record(&recorded_delivery(text, environment, now), now)
            .await
            .unwrap();
        let (_, applied) = Fulfil::new(rig.store())
            .for_projects(paymos_inbox_core::money::change::Projects::parse("prj_1"))
            .for_environment(environment)
            .apply(&work_item(text, environment), NOW_MS)
            .await
            .unwrap();
        assert_eq!(applied, Applied::Unusable);
    }
    let body_key = |key: &str, body: &str| {
        format!(
            "body#{key}#{}",
            paymos_inbox_core::roads::ingest::sha256_hex(body.as_bytes())
        )
    };
    let sandbox_body_key = body_key("test#evt_body_sandbox", &sandbox_body);
    let stored = rig
        .aws
        .item(&rig.ledger, "event_id", &sandbox_body_key)
        .await
        .expect("the sandbox body item, under its own key");
    assert_eq!(
        get_s(&stored, "body_encoding"),
        "deflate",
        "stored deflated"
    );

    // What `exceptions` says to do names the command, with the delivery's environment.
    let (code, out) = paymos_inbox(&rig, &["exceptions", "--json"]).await;
    assert_eq!(code, Some(1), "{out}");
    let actions: Vec<String> = out
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["kind"] == "unusable")
        .map(|e| e["action"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(actions.len(), 2, "{out}");
    for (id, environment) in [("evt_body_live", "live"), ("evt_body_sandbox", "sandbox")] {
        let command = format!("paymos-inbox exceptions --body {id} --environment {environment}");
        assert!(
            actions.iter().any(|a| a.contains(&command)),
            "{command} in {actions:#?}"
        );
    }
    assert!(
        actions.iter().all(|a| !a.contains("archived body")),
        "{actions:#?}"
    );

    // The command prints the exact bytes, with or without the environment named.
    for (args, expected) in [
        (
            &[
                "exceptions",
                "--body",
                "evt_body_live",
                "--environment",
                "live",
            ][..],
            &live_body,
        ),
        (&["exceptions", "--body", "evt_body_live"][..], &live_body),
        (
            &[
                "exceptions",
                "--body",
                "evt_body_sandbox",
                "--environment",
                "sandbox",
            ][..],
            &sandbox_body,
        ),
        (
            &["exceptions", "--body", "evt_body_sandbox"][..],
            &sandbox_body,
        ),
    ] {
        let (code, stdout, stderr) = paymos_inbox_bytes(&rig, args).await;
        assert_eq!(code, Some(0), "{args:?}: {stderr}");
        assert_eq!(stdout, expected.as_bytes(), "{args:?}: byte-exact");
    }

    // No such delivery (or not in the environment named): exit 4, one line, nothing printed.
    for args in [
        &["exceptions", "--body", "evt_nobody"][..],
        &[
            "exceptions",
            "--body",
            "evt_body_live",
            "--environment",
            "sandbox",
        ][..],
    ] {
        let (code, stdout, stderr) = paymos_inbox_bytes(&rig, args).await;
        assert_eq!(code, Some(4), "{args:?}: {stderr}");
        assert!(stdout.is_empty());
        assert!(
            stderr.starts_with("error: no delivery evt_"),
            "{args:?}: {stderr}"
        );
    }

    // Its body expired (what the TTL does, or an item past its expiry the TTL has not removed
    // yet): exit 1, said in one line with the next step, nothing printed.
    rig.aws
        .dynamodb
        .delete_item()
        .table_name(&rig.ledger)
        .key(
            "event_id",
            aws_sdk_dynamodb::types::AttributeValue::S(sandbox_body_key),
        )
        .send()
        .await
        .unwrap();
    let live_body_key = body_key("evt_body_live", &live_body);
    rig.aws
        .dynamodb
        .update_item()
        .table_name(&rig.ledger)
        .key(
            "event_id",
            aws_sdk_dynamodb::types::AttributeValue::S(live_body_key),
        )
        .update_expression("SET expires_at = :past")
        .expression_attribute_values(
            ":past",
            aws_sdk_dynamodb::types::AttributeValue::N((NOW - 1).to_string()),
        )
        .send()
        .await
        .unwrap();
    for id in ["evt_body_sandbox", "evt_body_live"] {
        let (code, stdout, stderr) = paymos_inbox_bytes(&rig, &["exceptions", "--body", id]).await;
        assert_eq!(code, Some(1), "{id}: {stderr}");
        assert!(stdout.is_empty(), "{id}");
        assert!(
            stderr.starts_with(&format!("error: the body of {id} ")) && stderr.contains("expired"),
            "{id}: {stderr}"
        );
        assert!(stderr.contains("  next: replay"), "{stderr}");
    }

    // Bad input is found before anything is read.
    let (code, _, stderr) =
        paymos_inbox_bytes(&rig, &["exceptions", "--body", "test#evt_body_sandbox"]).await;
    assert_eq!(code, Some(2), "{stderr}");
    let (code, _, stderr) = paymos_inbox_bytes(&rig, &["exceptions", "--body", " "]).await;
    assert_eq!(code, Some(2), "{stderr}");
}

/// [`paymos_inbox`] naming only the deliveries table (all `--body` needs), its stdout as
/// bytes and its stderr apart.
async fn paymos_inbox_bytes(rig: &Rig, args: &[&str]) -> (Option<i32>, Vec<u8>, String) {
    let (dynamodb, sqs) = endpoint_urls();
    let mut all: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    all.extend(
        [
            "--dynamodb-endpoint",
            &dynamodb,
            "--sqs-endpoint",
            &sqs,
            "--region",
            "us-east-1",
            "--deliveries-table",
            &rig.ledger,
        ]
        .map(str::to_owned),
    );
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_paymos-inbox"))
            .args(&all)
            .env_remove("PAYMOS_INBOX_STACK_NAME")
            .env_remove("PAYMOS_INBOX_CONFIG_ENV")
            .env_remove("DEAD_LETTER_QUEUE_URL")
            .env_remove("RUST_LOG")
            .env_remove("STATE_TABLE")
            .output()
            .expect("run paymos-inbox")
    })
    .await
    .unwrap();
    (
        out.status.code(),
        out.stdout,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

// Found by the attack on `dev` (issue 49): a held payment whose refund webhook was lost was
// released although Paymos had refunded it in full after the payment. With the API, `release`
// records Paymos' completed full refunds of the invoice first (dated by Paymos), and refuses.
#[tokio::test]
async fn release_with_the_api_records_a_lost_full_refund_and_ships_nothing() {
    let rig = Rig::new(Vec::new()).await;
    let store = rig.store();
    paymos_inbox::tools::exceptions::register_order(
        &store,
        (None, "order-inv_rf"),
        "10.00",
        "usdt",
    )
    .await
    .unwrap();
    let paid = envelope(
        "evt_rf",
        "invoice.paid",
        json!({"invoice_id": "inv_rf", "status": "paid",
               "order": {"external_id": "order-inv_rf", "amount": "12.00", "currency": "USDT"}}),
    );
    rig.record(&paid).await;
    let (_, applied) = Fulfil::new(rig.store())
        .for_projects(paymos_inbox_core::money::change::Projects::parse("prj_1"))
        .apply(&live(&paid), NOW_MS)
        .await
        .unwrap();
    assert_eq!(applied, Applied::Held);
    // Paymos has it paid, and refunded the payment in full after it was made; the refund's
    // webhook never arrived.
    rig.answer(
        "inv_rf",
        Answer::Invoices(vec![invoice(
            "inv_rf",
            "paid",
            ("12.00", "USDT"),
            ("12.00", "USDT"),
        )]),
    );
    let mut refund = paymos_fake::refund("wdr_rf", "inv_rf", "full", "12.00");
    refund["completed_at"] = json!(NOW + 60);
    rig.api.refund(refund);
    let (code, out) = paymos_inbox(
        &rig,
        &[
            "release",
            "inv_rf",
            "--actor",
            "alice",
            "--reason",
            "price agreed",
            "--override-amount",
        ],
    )
    .await;
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("refunded in full"), "{out}");
    assert_eq!(rig.fulfilments("inv_rf").await, 0, "nothing shipped");
    let refund = rig.aws.item(&rig.state, "pk", "wdr_rf").await;
    assert!(refund.is_some(), "Paymos' refund is on record");
}

// Issue 54: an order id carrying terminal escapes (`ESC[2K ESC[1A` erases the line above and
// rewrites it) reached the operator's terminal raw in `exceptions`' lines (order ids are
// refused only when blank; resource ids are refused unless plain). Every human-readable line
// now writes control characters as text; `--json` escapes them as JSON.
#[tokio::test]
async fn an_order_id_carrying_terminal_escapes_is_printed_escaped() {
    let rig = Rig::new(Vec::new()).await;
    let evil = "o-\u{1b}[2K\u{1b}[1Aok";
    let event = |event_id: &str, event_type: &str, order: &str| {
        envelope(
            event_id,
            event_type,
            json!({"invoice_id": "inv_esc", "order": {"external_id": order, "amount": "10.00", "currency": "USDT"}}),
        )
    };
    let fulfil = Fulfil::new(rig.store())
        .for_projects(paymos_inbox_core::money::change::Projects::parse("prj_1"));
    let open = event("evt_eo", "invoice.awaiting_payment", evil);
    assert_eq!(
        fulfil.apply(&live(&open), NOW_MS).await.unwrap().1,
        Applied::Updated
    );
    // The event names another order than the record's: held, and listed with the record's.
    let paid = event("evt_ep", "invoice.paid", "o-B");
    assert_eq!(
        fulfil.apply(&live(&paid), NOW_MS).await.unwrap().1,
        Applied::Held
    );
    let (code, out) = paymos_inbox(&rig, &["exceptions"]).await;
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("o-\\u{1b}[2K\\u{1b}[1Aok"), "{out}");
    assert!(!out.contains('\u{1b}'), "no raw escape: {out:?}");
    let (_, json) = paymos_inbox(&rig, &["exceptions", "--json"]).await;
    assert!(json.contains(r"o-\u001b[2K"), "{json:?}");
    assert!(!json.contains('\u{1b}'), "{json:?}");
}

/// `PaymentsNeedReviewAlarm`'s state for one datapoint of its metric, as template.yaml defines
/// it (its metric, statistic, threshold and comparison; one evaluation period), and what it
/// keeps when the sweep sends none (`TreatMissingData`).
fn review_alarm(datapoint: Option<f64>, was: &str) -> String {
    let template: yaml_serde::Value =
        yaml_serde::from_str(include_str!("../../../../template.yaml")).unwrap();
    let alarm = &template["Resources"]["PaymentsNeedReviewAlarm"]["Properties"];
    assert_eq!(alarm["MetricName"].as_str(), Some("PaymentsWaiting"));
    assert_eq!(alarm["Statistic"].as_str(), Some("Maximum"));
    assert_eq!(alarm["EvaluationPeriods"].as_u64(), Some(1));
    let threshold = alarm["Threshold"].as_f64().unwrap();
    let Some(value) = datapoint else {
        return match alarm["TreatMissingData"].as_str() {
            Some("ignore") => was.to_owned(),
            Some("breaching") => "ALARM".to_owned(),
            Some("notBreaching") => "OK".to_owned(),
            _ => "INSUFFICIENT_DATA".to_owned(),
        };
    };
    let breaching = match alarm["ComparisonOperator"].as_str().unwrap() {
        "GreaterThanThreshold" => value > threshold,
        "GreaterThanOrEqualToThreshold" => value >= threshold,
        other => panic!("{other}"),
    };
    if breaching { "ALARM" } else { "OK" }.to_owned()
}

// Issue 51: the alarm counted new outcomes per five minutes, so a held payment paged once and
// went OK ten minutes later while it still waited. The sweep now counts what waits as
// `exceptions` lists it (PaymentsWaiting), and the alarm on that count stays in ALARM for as
// long as the payment waits, through sweeps and the gaps between them, and is OK once it is
// released.
#[tokio::test]
async fn the_review_alarm_stays_in_alarm_while_a_held_payment_waits_and_is_ok_once_released() {
    use paymos_inbox_core::roads::ingest::DeliveryLedger as _;
    let rig = Rig::new(Vec::new()).await;
    let stack = rig.aws.stack().await;
    let (state_table, deliveries) = (stack.table("StateTable"), stack.table("DeliveriesTable"));
    let (store, ledger) = (
        DynamoResources::new(rig.aws.dynamodb.clone(), state_table, deliveries),
        DynamoLedger::new(rig.aws.dynamodb.clone(), deliveries, None),
    );
    let queue = paymos_inbox_aws::sqs::SqsQueue::new(rig.aws.sqs.clone(), stack.queue("WorkQueue"));
    let sweep = async || {
        paymos_inbox_lambda::sweep::sweep_once((&ledger, &store), &queue, 30, 600, NOW_MS)
            .await
            .unwrap()
            .waiting
    };
    #[allow(clippy::cast_precision_loss)]
    let gauge = |n: usize| Some(n as f64);
    assert_eq!(sweep().await, 0);
    let mut state = review_alarm(gauge(0), "INSUFFICIENT_DATA");
    assert_eq!(state, "OK");

    paymos_inbox::tools::exceptions::register_order(
        &store,
        (None, "order-inv_gauge"),
        "10.00",
        "usdt",
    )
    .await
    .unwrap();
    let paid = envelope(
        "evt_gauge",
        "invoice.paid",
        json!({"invoice_id": "inv_gauge", "status": "paid",
               "order": {"external_id": "order-inv_gauge", "amount": "12.00", "currency": "USDT"}}),
    );
    DynamoLedger::new(rig.aws.dynamodb.clone(), deliveries, None)
        .record(&recorded_delivery(&paid, Environment::Live, NOW_MS), NOW_MS)
        .await
        .unwrap();
    let applied = Fulfil::new(DynamoResources::new(
        rig.aws.dynamodb.clone(),
        state_table,
        deliveries,
    ))
    .for_projects(paymos_inbox_core::money::change::Projects::parse("prj_1"))
    .apply(&live(&paid), NOW_MS)
    .await
    .unwrap()
    .1;
    assert_eq!(applied, Applied::Held);
    // Held: in ALARM at the next sweep, and still after many more and between them.
    for _ in 0..3 {
        assert_eq!(sweep().await, 1);
        state = review_alarm(gauge(1), &state);
        assert_eq!(state, "ALARM");
        state = review_alarm(None, &state);
        assert_eq!(state, "ALARM", "no count between two sweeps keeps it");
    }
    let released = exceptions::release(
        &store,
        &ledger,
        "inv_gauge",
        &by("alice", Some("customer confirmed"), true),
        &RecordFulfilment,
        NOW_MS,
    )
    .await
    .unwrap();
    assert_eq!(released, Applied::Fulfilled);
    assert_eq!(sweep().await, 0);
    state = review_alarm(gauge(0), &state);
    assert_eq!(state, "OK", "released: nothing waits");
}

// Issue 50: the `waiting` index was keyed by the outcome (five keys) and the review list was one
// key, each heated by a storm of its outcome; both are eight shards now, which every reader
// queries. What that costs the scheduled sweep, counted on an idle stack: the 64 shards of
// `pending-by-age` twice (the stranded, then the oldest), the eight `waiting` keys twice (the
// bodies kept, then what waits) and the eight review lists: 152 queries of an empty page a
// run, where the five outcome keys twice and the one list made 139 (issue 51's month with no
// traffic prices each as a read unit: 13 more a run, 113,880 a month, $0.014).
#[tokio::test]
async fn an_idle_sweep_queries_each_shard_of_what_waits_once_a_read() {
    let rig = Rig::new(Vec::new()).await;
    let stack = rig.aws.stack().await;
    let (state_table, deliveries) = (stack.table("StateTable"), stack.table("DeliveriesTable"));
    let (store, ledger) = (
        DynamoResources::new(rig.aws.dynamodb.clone(), state_table, deliveries),
        DynamoLedger::new(rig.aws.dynamodb.clone(), deliveries, None),
    );
    let queue = paymos_inbox_aws::sqs::SqsQueue::new(rig.aws.sqs.clone(), stack.queue("WorkQueue"));
    rig.aws.calls.reset();
    let run = paymos_inbox_lambda::sweep::sweep_once((&ledger, &store), &queue, 30, 600, NOW_MS)
        .await
        .unwrap();
    assert_eq!(run.waiting, 0);
    let mut queries = std::collections::BTreeMap::<String, usize>::new();
    for grant in rig.aws.calls.grants() {
        if grant.action == "dynamodb:Query" {
            let index = grant
                .target
                .rsplit('/')
                .next()
                .unwrap_or_default()
                .to_owned();
            *queries.entry(index).or_default() += 1;
        }
    }
    let expected: std::collections::BTreeMap<String, usize> =
        [("listed", 8), ("pending-by-age", 128), ("waiting", 16)]
            .map(|(i, n)| (i.to_owned(), n))
            .into();
    assert_eq!(queries, expected);
    assert_eq!(
        queries.values().sum::<usize>(),
        152,
        "139 before the shards"
    );
}
