//! `reconcile` and the reverse check through the official paymos crate, against a fake Paymos
//! API on loopback that checks every request's signature and pages with cursors.

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use paymos_inbox_aws::dynamodb::DynamoResources;
use paymos_inbox_core::money::change::{Applied, OrderRef};
use paymos_inbox_core::roads::fulfil::Fulfil;
use serde_json::json;

use paymos_inbox_testkit::paymos_fake::{Answer, FakePaymos, KEY, SECRET, invoice};
use paymos_inbox_testkit::*;

/// The stack's fulfil use case on its DynamoDB Local tables, of its one project.
fn on_the_stack(aws: &Aws, stack: &Created) -> Fulfil<DynamoResources> {
    Fulfil::new(DynamoResources::new(
        aws.dynamodb.clone(),
        stack.table("StateTable"),
        stack.table("DeliveriesTable"),
    ))
    .for_projects(crate::one_project())
}

/// `inv_x_again` is a second checkout for `inv_x`'s order.
fn list_item(id: &str, status: &str) -> serde_json::Value {
    let order = format!("order-{}", id.trim_end_matches("_again"));
    json!({"invoice_id": id, "project_id": "prj_1", "external_order_id": order, "status": status,
           "is_final": true, "is_test": false, "amount": "25.00", "currency": "USDT", "created_at": NOW - 100})
}

/// The fake Paymos API listing `paid` and answering `others` (invoice, status) when read.
async fn fake_paymos(
    paid: Vec<(&'static str, &'static str)>,
    others: HashMap<&'static str, &'static str>,
) -> FakePaymos {
    let fake = FakePaymos::start().await;
    fake.list(paid.iter().map(|(id, st)| list_item(id, st)).collect());
    for (id, status) in others {
        fake.answer(
            id,
            Answer::Invoices(vec![invoice(
                id,
                status,
                ("25.00", "USDT"),
                ("25.00", "USDT"),
            )]),
        );
    }
    fake
}

#[tokio::test]
async fn reconcile_finds_missing_and_unknown_and_apply_fulfils_the_missing_once() {
    let aws = Aws::new();
    let stack = aws.stack().await;
    let fulfil = on_the_stack(&aws, &stack);
    // Here: inv_r1 and inv_r2 fulfilled by webhooks; inv_local fulfilled by hand but expired at Paymos.
    for (event, invoice) in [("evt_r1", "inv_r1"), ("evt_r2", "inv_r2")] {
        fulfil
            .apply(&live(&invoice_paid(event, invoice)), NOW_MS)
            .await
            .unwrap();
    }
    let local = OrderRef {
        external_id: Some("order-inv_local".into()),
        amount: None,
        currency: None,
        project: None,
        home: false,
        unlisted: false,
    };
    fulfil
        .mark_paid("inv_local", local, "support:eve", NOW_MS)
        .await
        .unwrap();

    let paid = vec![
        ("inv_r1", "paid"),
        ("inv_r2", "paid"),
        ("inv_r3", "paid"),
        ("inv_r4", "paid_over"),
        ("inv_r5", "paid"),
    ];
    let fake = fake_paymos(paid, HashMap::new()).await;
    let (url, seen) = (fake.url.clone(), fake.seen.clone());
    let api = paymos::PaymosClient::builder(KEY, SECRET)
        .base_url(url)
        .build()
        .unwrap();

    let report = reconcile(
        &api,
        &fulfil,
        (NOW - 3600) as i64,
        (NOW + 3600) as i64,
        false,
        NOW_MS,
    )
    .await
    .unwrap();
    assert_eq!(report.paid_at_paymos, 5, "three pages were followed");
    assert_eq!(report.matched, 2);
    let missing: Vec<&str> = report
        .missing
        .iter()
        .map(|m| m.invoice_id.as_str())
        .collect();
    assert_eq!(missing, ["inv_r3", "inv_r4", "inv_r5"]);
    assert_eq!(report.unknown, ["inv_local"]);
    assert!(report.double.is_empty());
    assert!(!report.clean());

    let report = reconcile(
        &api,
        &fulfil,
        (NOW - 3600) as i64,
        (NOW + 3600) as i64,
        true,
        NOW_MS,
    )
    .await
    .unwrap();
    assert!(
        report
            .applied
            .values()
            .all(|a| *a == Ok(Applied::Fulfilled)),
        "{:?}",
        report.applied
    );
    let invoice = aws
        .item(stack.table("StateTable"), "pk", "inv_r4")
        .await
        .unwrap();
    assert_eq!(get_s(&invoice, "status"), "paid_over");
    assert_eq!(
        get_s(
            &aws.item(stack.table("StateTable"), "pk", "fulfilment#inv_r4")
                .await
                .unwrap(),
            "won_by"
        ),
        "manual:reconcile"
    );

    // A webhook for a reconciled invoice arriving late fulfils nothing; a second run is clean
    // but for the unknown one.
    assert_eq!(
        fulfil
            .apply(&live(&invoice_paid("evt_r3_late", "inv_r3")), NOW_MS)
            .await
            .unwrap()
            .1,
        paymos_inbox_core::money::change::Applied::AlreadyFinal
    );
    let report = reconcile(
        &api,
        &fulfil,
        (NOW - 3600) as i64,
        (NOW + 3600) as i64,
        true,
        NOW_MS,
    )
    .await
    .unwrap();
    assert!(report.missing.is_empty());
    assert_eq!(report.matched, 5);
    assert!(seen.verified.load(Ordering::SeqCst) >= 7);
    assert_eq!(
        seen.rejected.load(Ordering::SeqCst),
        0,
        "every request carried a valid signature"
    );
}

#[tokio::test]
async fn reconcile_reports_a_bad_api_secret_instead_of_an_empty_list() {
    let aws = Aws::new();
    let stack = aws.stack().await;
    let fulfil = on_the_stack(&aws, &stack);
    let fake = fake_paymos(vec![("inv_x", "paid")], HashMap::new()).await;
    let (url, seen) = (fake.url.clone(), fake.seen.clone());
    let api = paymos::PaymosClient::builder(KEY, "sk_wrong")
        .base_url(url)
        .max_retries(0)
        .build()
        .unwrap();
    let err = reconcile(&api, &fulfil, 0, (NOW + 3600) as i64, false, NOW_MS)
        .await
        .unwrap_err();
    assert!(err.contains("Paymos API"), "{err}");
    // The slices in flight at once each hear it once; none is retried, no other slice asked.
    let rejected = seen.rejected.load(Ordering::SeqCst);
    assert!(
        (1..=paymos_inbox_aws::paymos_api::SLICES_AT_ONCE).contains(&rejected),
        "{rejected}"
    );
}

fn paid_event(event_id: &str, invoice: &str, amount: &str) -> String {
    envelope(
        event_id,
        "invoice.paid",
        json!({"invoice_id": invoice, "status": "paid", "is_test": false,
        "order": {"external_id": format!("order-{invoice}"), "amount": amount, "currency": "USDT"}}),
    )
}

#[tokio::test]
async fn the_reverse_check_refuses_payments_paymos_does_not_confirm() {
    use paymos_inbox_aws::paymos_api::PaymosApi;
    use paymos_inbox_core::money::change::Applied;
    use paymos_inbox_core::roads::fulfil::FulfilError;

    let aws = Aws::new();
    let stack = aws.stack().await;
    let at_paymos = HashMap::from([
        ("inv_genuine", "paid"),
        ("inv_forged", "awaiting_payment"),
        ("inv_wrong_amount", "paid"),
    ]);
    let fake = fake_paymos(Vec::new(), at_paymos).await;
    let (url, seen) = (fake.url.clone(), fake.seen.clone());
    let api = paymos::PaymosClient::builder(KEY, SECRET)
        .base_url(url)
        .build()
        .unwrap();
    let fulfil = on_the_stack(&aws, &stack).with_confirmation(PaymosApi::new(api));

    // Paymos' invoices are for 25.00 USDT ("25" and "25.00" are the same decimal).
    let apply = |body: String| {
        let fulfil = &fulfil;
        async move { fulfil.apply(&live(&body), NOW_MS).await.map(|(_, a)| a) }
    };
    assert_eq!(
        apply(paid_event("evt_genuine", "inv_genuine", "25"))
            .await
            .unwrap(),
        Applied::Fulfilled
    );
    assert_eq!(
        apply(paid_event("evt_forged", "inv_forged", "25.00"))
            .await
            .unwrap(),
        Applied::Unconfirmed
    );
    assert_eq!(
        apply(paid_event("evt_wrong", "inv_wrong_amount", "2.50"))
            .await
            .unwrap(),
        Applied::Unconfirmed
    );
    let state = stack.table("StateTable");
    assert!(
        aws.item(state, "pk", "fulfilment#inv_genuine")
            .await
            .is_some()
    );
    assert!(
        aws.item(state, "pk", "fulfilment#inv_forged")
            .await
            .is_none(),
        "a forged payment fulfils nothing"
    );
    assert!(
        aws.item(state, "pk", "inv_forged").await.is_none(),
        "and moves no invoice"
    );
    assert!(
        aws.item(state, "pk", "fulfilment#inv_wrong_amount")
            .await
            .is_none()
    );
    let ledger = aws
        .item(stack.table("DeliveriesTable"), "event_id", "evt_forged")
        .await
        .unwrap();
    assert_eq!(
        (get_s(&ledger, "state"), get_s(&ledger, "outcome")),
        ("processed", "unconfirmed")
    );
    assert_eq!(seen.rejected.load(Ordering::SeqCst), 0);

    // Paymos unreachable: the message fails (and is retried); nothing is decided.
    let down = paymos::PaymosClient::builder(KEY, SECRET)
        .base_url("http://127.0.0.1:9")
        .max_retries(0)
        .build()
        .unwrap();
    let fulfil_down = on_the_stack(&aws, &stack).with_confirmation(PaymosApi::new(down));
    let err = fulfil_down
        .apply(&live(&paid_event("evt_down", "inv_down", "25.00")), NOW_MS)
        .await
        .unwrap_err();
    assert!(matches!(err, FulfilError::Unavailable(_)), "{err:?}");
    assert!(aws.item(state, "pk", "inv_down").await.is_none());
}

#[tokio::test]
async fn an_order_paid_twice_is_a_duplicate_payment_to_refund_never_missing_or_fulfilled_again() {
    let aws = Aws::new();
    let stack = aws.stack().await;
    let fulfil = on_the_stack(&aws, &stack);
    fulfil
        .apply(&live(&invoice_paid("evt_d1", "inv_d1")), NOW_MS)
        .await
        .unwrap();
    let fake = fake_paymos(
        vec![("inv_d1", "paid"), ("inv_d1_again", "paid")],
        HashMap::new(),
    )
    .await;
    let api = paymos::PaymosClient::builder(KEY, SECRET)
        .base_url(&fake.url)
        .build()
        .unwrap();
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
    assert_eq!(report.matched, 1);
    assert!(report.missing.is_empty(), "{report:?}");
    let duplicates: Vec<&str> = report
        .duplicate_payments
        .iter()
        .map(|d| d.invoice_id.as_str())
        .collect();
    assert_eq!(duplicates, ["inv_d1_again"]);
    assert!(report.double.is_empty());
    assert!(!report.clean(), "a payer paid twice: a person must refund");

    let report = run(true).await.unwrap();
    assert_eq!(
        report.applied["inv_d1_again"],
        Ok(Applied::DuplicatePayment)
    );
    let fulfilments = aws
        .scan(stack.table("StateTable"))
        .await
        .into_iter()
        .filter(|i| get_s(i, "kind") == "fulfilment")
        .count();
    assert_eq!(fulfilments, 1, "the order is fulfilled once");
}

// Issue 39: the reconciliation keeps up with a busy merchant. The claims of the orders Paymos
// lists paid in the window are read a hundred at once (BatchGetItem), never one GetItem an
// order: a window of n paid orders costs n/100 reads of claims, and (issue 50: a slice's
// fulfilments read by key, not the window's) n/100 of their fulfilments.
#[tokio::test]
async fn the_claims_of_a_window_are_read_a_hundred_at_once() {
    use futures::StreamExt as _;
    const PAID: usize = 450;
    let aws = Aws::new();
    let stack = aws.stack().await;
    let fulfil = on_the_stack(&aws, &stack);
    let ids: Vec<String> = (0..PAID).map(|i| format!("inv_b{i}")).collect();
    futures::stream::iter(ids.iter().map(|id| {
        let fulfil = &fulfil;
        async move {
            let paid = envelope(
                &format!("evt_{id}"),
                "invoice.paid",
                json!({"invoice_id": id, "project_id": "prj_1", "status": "paid", "is_final": true,
                    "order": {"external_id": format!("order-{id}"), "amount": "25.00", "currency": "USDT"}}),
            );
            fulfil.apply(&live(&paid), NOW_MS).await.unwrap();
        }
    }))
    .buffer_unordered(16)
    .collect::<Vec<()>>()
    .await;
    let fake = FakePaymos::start().await;
    fake.list(ids.iter().map(|id| list_item(id, "paid")).collect());
    fake.page_size(100);
    let api = paymos::PaymosClient::builder(KEY, SECRET)
        .base_url(fake.url.clone())
        .build()
        .unwrap();

    aws.calls.reset();
    let report = reconcile(
        &api,
        &fulfil,
        (NOW - 3600) as i64,
        (NOW + 3600) as i64,
        false,
        NOW_MS,
    )
    .await
    .unwrap();
    assert_eq!(report.matched, PAID, "{report:?}");
    assert!(report.clean());
    let operations = aws.calls.operations();
    let count = |op: &str| operations.iter().filter(|o| *o == op).count();
    assert_eq!(
        count("DynamoDB.BatchGetItem"),
        2 * PAID.div_ceil(100),
        "the fulfilments of the listed invoices and their orders' claims, a hundred a call: {operations:?}"
    );
    assert_eq!(count("DynamoDB.GetItem"), 0, "no claim read alone");
    println!(
        "reconciliation of {PAID} paid orders: {} BatchGetItem, {} GetItem",
        count("DynamoDB.BatchGetItem"),
        count("DynamoDB.GetItem")
    );
}

// Issue 39: a busy merchant's window, through the official crate against the fake API: 100,000
// invoices paid at Paymos in the window, all but the last fulfilled here (on the memory twin:
// the claims' BatchGetItem of a hundred on DynamoDB is the test above). The last one is found
// missing (the crate's pager stops quietly after 100 pages unless told otherwise: 10,000
// invoices, and a run reported clean). The run lists them a hundred a page (Paymos' largest)
// and reads the store in four bulk reads, never one invoice alone: its round trips grow as
// n/100.
#[tokio::test]
async fn a_window_of_a_hundred_thousand_paid_invoices_takes_n_over_a_hundred_round_trips() {
    use paymos_inbox_core::money::status::InvoiceStatus;
    use paymos_inbox_core::testkit::memory::MemoryResources;
    use std::sync::Arc;
    const PAID: usize = 100_000;
    let store = Arc::new(MemoryResources::new());
    let fulfil = Fulfil::new(Arc::clone(&store)).for_projects(crate::one_project());
    let ids: Vec<String> = (0..PAID).map(|i| format!("inv_w{i:06}")).collect();
    // The last one listed was paid at Paymos, and its webhook never came.
    let (fulfilled, never_came) = ids.split_at(PAID - 1);
    for id in fulfilled {
        let order = OrderRef {
            external_id: Some(format!("order-{id}")),
            amount: paymos_inbox_core::money::status::Amount::parse("25.00"),
            currency: Some("USDT".into()),
            project: None,
            home: false,
            unlisted: false,
        };
        let applied = fulfil
            .apply_by_hand(id, InvoiceStatus::Paid, order, "webhook", NOW_MS)
            .await
            .unwrap();
        assert_eq!(applied, Applied::Fulfilled);
    }
    let fake = FakePaymos::start().await;
    fake.list(ids.iter().map(|id| list_item(id, "paid")).collect());
    fake.page_size(100);
    let api = paymos_inbox_aws::paymos_api::PaymosApi::new(
        paymos::PaymosClient::builder(KEY, SECRET)
            .base_url(fake.url.clone())
            .build()
            .unwrap(),
    );
    let reads = store.reconcile_reads();
    let started = std::time::Instant::now();
    let report = paymos_inbox_core::roads::reconcile::reconcile(
        &api,
        &fulfil,
        ((NOW - 3600) as i64, (NOW + 3600) as i64),
        false,
        NOW_MS,
    )
    .await
    .unwrap();
    let took = started.elapsed();
    let missing: Vec<&str> = report
        .missing
        .iter()
        .map(|m| m.invoice_id.as_str())
        .collect();
    assert_eq!(
        missing,
        [never_came[0].as_str()],
        "found, however far down the list"
    );
    assert_eq!(report.matched, PAID - 1);
    let calls = fake.seen.verified.load(Ordering::SeqCst);
    let empty_slices = paymos_inbox_aws::paymos_api::SLICES as usize - 1;
    assert_eq!(
        calls,
        PAID / 100 + empty_slices + 1,
        "a page of a hundred a call (the window's other slices hold none: one call each), and the refunds of the one missing (read before it is reported)"
    );
    assert_eq!(
        store.reconcile_reads() - reads,
        4,
        "four bulk reads: the listed invoices' fulfilments, the window's, the claims, the open invoices"
    );
    println!(
        "reconciliation of {PAID} paid invoices: {calls} Paymos calls, 4 bulk reads of the store, {took:?}"
    );
}

// Issue 50: one cursor reads one page after another, so a busy merchant's 48 h window no
// longer fitted in a run (about 200,000 invoices at 150 ms a page). The window is listed in
// disjoint creation-time slices, four at once: 20,000 invoices spread over 48 h, each listed
// once, in as many pages as the slices hold, with four pages in flight (one before), and the
// store read in bulk as before.
#[tokio::test]
async fn a_48_hour_window_is_listed_in_slices_four_pages_at_once_every_invoice_once() {
    use paymos_inbox_core::money::status::InvoiceStatus;
    use paymos_inbox_core::testkit::memory::MemoryResources;
    use std::sync::Arc;
    const PAID: i64 = 20_000;
    const SPAN: i64 = 48 * 3600;
    let (from, to) = (NOW as i64 - SPAN, NOW as i64 - 1);
    let store = Arc::new(MemoryResources::new());
    let fulfil = Fulfil::new(Arc::clone(&store)).for_projects(crate::one_project());
    let mut items = Vec::new();
    for i in 0..PAID {
        let id = format!("inv_s{i:05}");
        let order = OrderRef {
            external_id: Some(format!("order-{id}")),
            amount: paymos_inbox_core::money::status::Amount::parse("25.00"),
            currency: Some("USDT".into()),
            project: None,
            home: false,
            unlisted: false,
        };
        let applied = fulfil
            .apply_by_hand(&id, InvoiceStatus::Paid, order, "webhook", NOW_MS)
            .await
            .unwrap();
        assert_eq!(applied, Applied::Fulfilled);
        let mut item = list_item(&id, "paid");
        item["created_at"] = json!(from + i * SPAN / PAID);
        items.push(item);
    }
    let fake = FakePaymos::start().await;
    fake.list(items);
    fake.page_size(100);
    fake.page_latency(std::time::Duration::from_millis(20));
    let api = paymos_inbox_aws::paymos_api::PaymosApi::new(
        paymos::PaymosClient::builder(KEY, SECRET)
            .base_url(fake.url.clone())
            .build()
            .unwrap(),
    );
    let reads = store.reconcile_reads();
    let report =
        paymos_inbox_core::roads::reconcile::reconcile(&api, &fulfil, (from, to), false, NOW_MS)
            .await
            .unwrap();
    assert_eq!(
        report.paid_at_paymos, PAID as usize,
        "every invoice listed once"
    );
    assert_eq!(report.matched, PAID as usize);
    assert!(report.clean(), "{report:?}");
    let slices = paymos_inbox_aws::paymos_api::slices(from, to);
    assert_eq!(slices.len(), 16);
    let calls = fake.seen.verified.load(Ordering::SeqCst);
    let pages: usize = slices
        .iter()
        .map(|(a, b)| {
            let n = (0..PAID)
                .filter(|i| (*a..=*b).contains(&(from + i * SPAN / PAID)))
                .count();
            n.div_ceil(100).max(1)
        })
        .sum();
    assert_eq!(
        calls, pages,
        "each slice's pages of a hundred, nothing twice"
    );
    assert!(pages <= PAID as usize / 100 + 16, "{pages}");
    assert_eq!(
        fake.seen.most_listing.load(Ordering::SeqCst),
        4,
        "four pages in flight at once, never more"
    );
    assert_eq!(store.reconcile_reads() - reads, 4, "four bulk reads");
}

// Issue 50: Paymos' 429s of slices listed at once are retried (the official crate waits the
// answer's `Retry-After`, or its backoff if longer), and the listing goes on: nothing is left
// out, nothing is read twice.
#[tokio::test]
async fn a_listing_paymos_throttles_waits_its_retry_after_and_lists_every_invoice() {
    use paymos_inbox_core::roads::reconcile::PaymosLedger as _;
    let fake = FakePaymos::start().await;
    fake.list(
        (0..10)
            .map(|i| list_item(&format!("inv_t{i}"), "paid"))
            .collect(),
    );
    fake.throttle(2);
    let api = paymos_inbox_aws::paymos_api::PaymosApi::new(
        paymos::PaymosClient::builder(KEY, SECRET)
            .base_url(fake.url.clone())
            .max_retries(2)
            .base_delay(std::time::Duration::from_millis(10))
            .build()
            .unwrap(),
    );
    let listed = api
        .invoices_created(NOW as i64 - 3600, NOW as i64)
        .await
        .unwrap();
    let ids: std::collections::BTreeSet<&str> = listed.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!((listed.len(), ids.len()), (10, 10), "{ids:?}");
    assert_eq!(fake.seen.throttled.load(Ordering::SeqCst), 2);
}

// Issue 39: where the last clean run ended is kept on DynamoDB as the domain says it, and read
// back; an older run finishing late never moves it back.
#[tokio::test]
async fn where_the_last_clean_run_ended_is_kept_and_never_moves_back() {
    use paymos_inbox_core::roads::reconcile::{Progress, ReconcileCheckpoint as _, scheduled};
    let aws = Aws::new();
    let stack = aws.stack().await;
    let store = DynamoResources::new(
        aws.dynamodb.clone(),
        stack.table("StateTable"),
        stack.table("DeliveriesTable"),
    );
    let fulfil = Fulfil::new(store.clone()).for_projects(crate::one_project());
    let fake = FakePaymos::start().await;
    let api = paymos_inbox_aws::paymos_api::PaymosApi::new(
        paymos::PaymosClient::builder(KEY, SECRET)
            .base_url(fake.url.clone())
            .build()
            .unwrap(),
    );
    assert_eq!(store.clean_until().await.unwrap(), None);
    assert_eq!(store.read_until().await.unwrap(), None);
    // Issue 50: a run with time for two slices keeps where it got to, and no end; the next
    // continues that window from there and finishes it (asserted by what each run lists).
    let mut one_more = Some(());
    let (_, cut) = scheduled(&api, &fulfil, (48, false), NOW_MS, move || {
        one_more.take().is_some()
    })
    .await
    .unwrap();
    assert!(!cut.finished());
    let done_until = cut.window.0 + 2 * 3600 - 1;
    assert_eq!(cut.done_until, Some(done_until));
    assert_eq!(Progress::kept(&store).await.unwrap(), Some(cut.clone()));
    assert_eq!(store.read_until().await.unwrap(), None);
    let listed = |from: u64, to: u64| {
        let calls = std::mem::take(&mut *fake.seen.listed.lock().unwrap());
        let bounds = |(a, b): (Option<i64>, Option<i64>)| (a.unwrap() as u64, b.unwrap() as u64);
        let calls: Vec<(u64, u64)> = calls.into_iter().map(bounds).collect();
        // In creation order (four at once: sorted), each part once, the whole of `[from, to]`.
        let mut sorted = calls.clone();
        sorted.sort_unstable();
        assert_eq!(sorted.first().map(|c| c.0), Some(from), "{calls:?}");
        assert_eq!(sorted.last().map(|c| c.1), Some(to), "{calls:?}");
        assert!(sorted.windows(2).all(|w| w[1].0 == w[0].1 + 1), "{calls:?}");
    };
    listed(cut.window.0, done_until);
    let (report, done) = scheduled(&api, &fulfil, (48, false), NOW_MS + 60_000, || true)
        .await
        .unwrap();
    assert!(report.clean(), "{report:?}");
    assert_eq!(done.window, cut.window, "the same window, continued");
    listed(done_until + 1, done.window.1);
    let window = done.window;
    assert_eq!(store.clean_until().await.unwrap(), Some(window.1));
    assert_eq!(store.read_until().await.unwrap(), Some(window.1));
    let (late, _) = scheduled(&api, &fulfil, (48, false), NOW_MS - 3_600_000, || true)
        .await
        .unwrap();
    assert!(late.clean());
    assert_eq!(store.clean_until().await.unwrap(), Some(NOW_MS / 1000));
    assert_eq!(store.read_until().await.unwrap(), Some(NOW_MS / 1000));
    let behind = paymos_inbox_core::roads::reconcile::behind(&store, NOW_MS + 7_200_000)
        .await
        .unwrap();
    assert_eq!(behind, Some(7_200));
}

// A window that reaches into the future (a person's late `--to`, a run of the model over all
// time) read the day lists of every day to come: some 27,000 for the model's window. Its end
// is capped at today and a day's margin; counted here: the reads of a window ending a thousand
// days ahead are those of one ending a day ahead.
#[tokio::test]
async fn a_window_reaching_into_the_future_reads_no_day_list_of_days_to_come() {
    use paymos_inbox_core::money::write::days_listing;
    use paymos_inbox_core::roads::reconcile::ReconcileStore as _;
    const DAY_MS: u64 = 86_400_000;
    let aws = Aws::new();
    let stack = aws.stack().await;
    let store = DynamoResources::new(
        aws.dynamodb.clone(),
        stack.table("StateTable"),
        stack.table("DeliveriesTable"),
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let from = now - DAY_MS;
    let queries = |to: u64| {
        let (aws, store) = (&aws, &store);
        async move {
            aws.calls.reset();
            store.fulfilments_between(from, to).await.unwrap();
            aws.calls
                .operations()
                .iter()
                .filter(|o| *o == "DynamoDB.Query")
                .count()
        }
    };
    let a_day_ahead = queries(now + DAY_MS).await;
    let far_ahead = queries(now + 1_000 * DAY_MS).await;
    assert_eq!(far_ahead, a_day_ahead, "no day list of days to come");
    // Each list of the days up to a day ahead, and no more (the uncapped window's lists are
    // some 500 times as many).
    assert!(
        a_day_ahead <= days_listing(from, now + 2 * DAY_MS).len(),
        "{a_day_ahead} queries"
    );
    assert!(days_listing(from, now + 1_000 * DAY_MS).len() > 100 * a_day_ahead);
}

// The attack on `dev` (G16): Paymos' cursor pages may overlap (an invoice that moved between two
// page reads is listed on both). The run asked DynamoDB for that invoice's fulfilment twice in
// one BatchGetItem, which DynamoDB refuses ("Provided list of item keys contains duplicates"):
// the run failed, said as a missing table, and the scheduled run failed so every time. An
// invoice listed twice is one invoice: counted, compared and applied once.
#[tokio::test]
async fn an_invoice_listed_twice_by_overlapping_pages_is_reconciled_once() {
    let aws = Aws::new();
    let stack = aws.stack().await;
    let fulfil = on_the_stack(&aws, &stack);
    fulfil
        .apply(&live(&invoice_paid("evt_o1", "inv_o1")), NOW_MS)
        .await
        .unwrap();
    let fake = fake_paymos(
        vec![
            ("inv_o1", "paid"),
            ("inv_o1", "paid"),
            ("inv_o2", "paid"),
            ("inv_o2", "paid"),
        ],
        HashMap::new(),
    )
    .await;
    let api = paymos::PaymosClient::builder(KEY, SECRET)
        .base_url(fake.url.clone())
        .build()
        .unwrap();
    let window = ((NOW - 3600) as i64, (NOW + 3600) as i64);
    let report = reconcile(&api, &fulfil, window.0, window.1, true, NOW_MS)
        .await
        .unwrap();
    let missing: Vec<&str> = report
        .missing
        .iter()
        .map(|m| m.invoice_id.as_str())
        .collect();
    assert_eq!(
        (report.paid_at_paymos, report.matched, missing),
        (2, 1, vec!["inv_o2"])
    );
    assert_eq!(report.applied.len(), 1, "{:?}", report.applied);
}

// The attack on `dev` (G15): Paymos' answer to `GET /v1/invoices/inv_asked` naming another
// invoice confirmed the asked one (`fulfilled`): the reverse check compared the order, price
// and status, not whose they were. An answer about another invoice confirms nothing: it is
// unreadable (the message is retried, and said), and nothing ships.
#[tokio::test]
async fn an_answer_about_another_invoice_confirms_nothing() {
    use paymos_inbox_aws::paymos_api::PaymosApi;
    use paymos_inbox_core::port::PortErrorKind;
    use paymos_inbox_core::roads::fulfil::FulfilError;

    let aws = Aws::new();
    let stack = aws.stack().await;
    let fake = FakePaymos::start().await;
    // The asked invoice's order, price and status, under another invoice's id.
    let mut other = invoice("inv_asked", "paid", ("25.00", "USDT"), ("25.00", "USDT"));
    other["invoice_id"] = json!("inv_other");
    fake.answer("inv_asked", Answer::Invoices(vec![other]));
    let api = paymos::PaymosClient::builder(KEY, SECRET)
        .base_url(fake.url.clone())
        .build()
        .unwrap();
    let state = stack.table("StateTable");
    let fulfil = on_the_stack(&aws, &stack).with_confirmation(PaymosApi::new(api));
    let err = fulfil
        .apply(
            &live(&paid_event("evt_asked", "inv_asked", "25.00")),
            NOW_MS,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, FulfilError::Unavailable(p) if p.kind == PortErrorKind::Unreadable && p.to_string().contains("inv_other")),
        "{err:?}"
    );
    assert!(
        aws.item(state, "pk", "fulfilment#inv_asked")
            .await
            .is_none()
    );
}
