//! Issue 32: years of data. 100,000 old facts and processed deliveries are seeded on DynamoDB
//! Local, then each operator read is measured by the items DynamoDB examined to answer it (the
//! adapters' `CallCounter::examined`: a Scan's or Query's `ScannedCount`, what reads are billed
//! by). A read that costs what it returns examines about as many items as it lists, whatever
//! the history; a scan examines the table. The figures are printed for the closing note.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::{AttributeValue, PutRequest, WriteRequest};
use futures::StreamExt as _;
use paymos_inbox_aws::dynamodb::DynamoLedger;
use paymos_inbox_core::money::write::{day_listing, review_list, waiting_shard};
use paymos_inbox_core::roads::exceptions::{DELIVERY_OUTCOMES, ReviewLedger as _};
use paymos_inbox_core::roads::handoff::StateRecords as _;
use paymos_inbox_core::wire::signature::Environment;

use paymos_inbox_testkit::*;

/// Old processed deliveries, and old closed invoices.
const OLD_DELIVERIES: usize = 50_000;
const OLD_FACTS: usize = 50_000;

fn s(v: &str) -> AttributeValue {
    AttributeValue::S(v.to_owned())
}

fn n(v: u64) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

/// A processed delivery of `invoice` as the ledger keeps it.
fn delivery(
    event_id: &str,
    invoice: &str,
    outcome: &str,
    at_ms: u64,
) -> HashMap<String, AttributeValue> {
    HashMap::from([
        ("event_id".to_owned(), s(event_id)),
        ("event_type".to_owned(), s("invoice.paid")),
        ("category".to_owned(), s("invoice")),
        ("resource_id".to_owned(), s(invoice)),
        ("environment".to_owned(), s("live")),
        ("secret_label".to_owned(), s("live")),
        ("version".to_owned(), n(1)),
        ("occurred_at".to_owned(), n(at_ms / 1000)),
        ("signed_at".to_owned(), n(at_ms / 1000)),
        ("received_at".to_owned(), n(at_ms)),
        (
            "body".to_owned(),
            AttributeValue::B(
                format!("{{\"event_id\":\"{event_id}\"}}")
                    .into_bytes()
                    .into(),
            ),
        ),
        ("body_sha256".to_owned(), s("0")),
        ("state".to_owned(), s("processed")),
        ("outcome".to_owned(), s(outcome)),
        ("processed_at".to_owned(), n(at_ms + 50)),
    ])
}

/// The same, as the processed mark leaves one that waits for a person.
fn waiting(
    event_id: &str,
    invoice: &str,
    outcome: &str,
    at_ms: u64,
) -> HashMap<String, AttributeValue> {
    let mut item = delivery(event_id, invoice, outcome, at_ms);
    item.insert("waiting".to_owned(), s(&waiting_shard(event_id)));
    item
}

/// A closed, fulfilled invoice as the state table keeps it (listed by its day, as its write
/// lists it, unless it was written before the index: `listed` false).
fn invoice(id: &str, at_ms: u64, listed: bool) -> HashMap<String, AttributeValue> {
    let mut item = HashMap::from([
        ("pk".to_owned(), s(id)),
        ("kind".to_owned(), s("invoice")),
        ("status".to_owned(), s("paid")),
        ("status_at".to_owned(), n(at_ms / 1000)),
        ("status_rank".to_owned(), n(3)),
        ("updated_at".to_owned(), n(at_ms)),
    ]);
    if listed {
        item.insert("listed_in".to_owned(), s(&day_listing(at_ms)));
    }
    item
}

/// An invoice's fulfilment as its write leaves it.
fn fulfilment(invoice: &str, at_ms: u64) -> HashMap<String, AttributeValue> {
    HashMap::from([
        ("pk".to_owned(), s(&format!("fulfilment#{invoice}"))),
        ("kind".to_owned(), s("fulfilment")),
        ("invoice_id".to_owned(), s(invoice)),
        ("order_id".to_owned(), s(&format!("order-{invoice}"))),
        ("won_by".to_owned(), s("evt_x")),
        ("status".to_owned(), s("paid")),
        ("fulfilled_at".to_owned(), n(at_ms)),
        ("updated_at".to_owned(), n(at_ms)),
        ("listed_in".to_owned(), s(&day_listing(at_ms))),
    ])
}

async fn seed(aws: &Aws, table: &str, items: Vec<HashMap<String, AttributeValue>>) {
    let batches: Vec<Vec<HashMap<String, AttributeValue>>> =
        items.chunks(25).map(<[_]>::to_vec).collect();
    futures::stream::iter(batches.into_iter().map(|batch| async move {
        let mut requests: Vec<WriteRequest> = batch
            .into_iter()
            .map(|item| {
                WriteRequest::builder()
                    .put_request(PutRequest::builder().set_item(Some(item)).build().unwrap())
                    .build()
            })
            .collect();
        while !requests.is_empty() {
            let out = aws
                .dynamodb
                .batch_write_item()
                .request_items(table, requests)
                .send()
                .await
                .expect("DynamoDB Local takes the batch");
            requests = out
                .unprocessed_items
                .and_then(|mut u| u.remove(table))
                .unwrap_or_default();
        }
    }))
    .buffer_unordered(8)
    .collect::<Vec<()>>()
    .await;
}

/// What the operator's reads did before the indexes: a filtered scan of the whole table (how
/// many items it found).
async fn filtered_scan(
    aws: &Aws,
    table: &str,
    filter: &str,
    values: &[(&str, AttributeValue)],
) -> usize {
    let mut found = 0;
    let mut start = None;
    loop {
        let mut scan = aws
            .dynamodb
            .scan()
            .table_name(table)
            .filter_expression(filter)
            .set_exclusive_start_key(start);
        if filter.contains("#s") {
            scan = scan.expression_attribute_names("#s", "status");
        }
        for (name, value) in values {
            scan = scan.expression_attribute_values(*name, value.clone());
        }
        let page = scan.send().await.unwrap();
        found += page.items().len();
        start = page.last_evaluated_key;
        if start.is_none() {
            return found;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn operator_reads_examine_what_they_list_not_the_history() {
    let aws = Aws::new();
    let deliveries = aws.deliveries_table().await;
    let state = aws.state_table().await;
    let old = NOW_MS - 400 * 86_400_000;
    seed(
        &aws,
        &deliveries,
        (0..OLD_DELIVERIES)
            .map(|i| {
                delivery(
                    &format!("evt_old_{i}"),
                    &format!("inv_old_{}", i % 20_000),
                    "fulfilled",
                    old + i as u64,
                )
            })
            .collect(),
    )
    .await;
    seed(
        &aws,
        &state,
        (0..OLD_FACTS)
            .map(|i| {
                let (id, at) = (format!("inv_old_{}", i / 2), old + i as u64);
                if i % 2 == 0 {
                    invoice(&id, at, true)
                } else {
                    fulfilment(&id, at)
                }
            })
            .collect(),
    )
    .await;
    // What waits today: three deliveries of one invoice the reverse check did not confirm,
    // one unusable, each marked waiting by its processed mark; and one that waited since
    // before the update that added the index (not in it until reindexed).
    let mut recent: Vec<_> = (0..3)
        .map(|i| {
            waiting(
                &format!("evt_recent_{i}"),
                "inv_recent",
                "unconfirmed",
                NOW_MS + i,
            )
        })
        .collect();
    recent.push(waiting("evt_broken", "inv_other", "unusable", NOW_MS + 9));
    recent.push(delivery(
        "evt_before_update",
        "inv_before",
        "order_unknown",
        old + 5,
    ));
    seed(&aws, &deliveries, recent).await;

    let ledger = DynamoLedger::new(aws.dynamodb.clone(), &deliveries, None);
    let mut figures = Vec::new();
    let mut measure = |what: &str, listed: usize, examined: usize| {
        figures.push(format!("| {what} | {listed} | {examined} |"));
        examined
    };

    // Before (what `exceptions` and `release` did until now): a filtered scan of the table.
    aws.calls.reset();
    let scanned = filtered_scan(
        &aws,
        &deliveries,
        "outcome IN (:a, :b, :c)",
        &[
            (":a", s("unconfirmed")),
            (":b", s("unusable")),
            (":c", s("order_unknown")),
        ],
    )
    .await;
    let before = measure(
        "deliveries waiting, by a filtered scan (before)",
        scanned,
        aws.calls.examined(),
    );
    assert!(
        before > OLD_DELIVERIES,
        "a scan examines the whole history: {before}"
    );
    assert_eq!(scanned, 5, "the scan finds all five that wait");

    aws.calls.reset();
    let waiting = ledger
        .with_outcomes(&DELIVERY_OUTCOMES, None)
        .await
        .unwrap();
    let examined = measure(
        "deliveries waiting (exceptions, recheck --all-unconfirmed)",
        waiting.len(),
        aws.calls.examined(),
    );
    assert_eq!(waiting.len(), 4, "{waiting:?}");
    assert!(
        examined <= waiting.len(),
        "examined {examined} to list {}",
        waiting.len()
    );

    // The one-time reindex after the update: the delivery that waited before it is listed.
    assert_eq!(ledger.reindex_waiting().await.unwrap(), 1);
    assert_eq!(ledger.reindex_waiting().await.unwrap(), 0, "idempotent");
    aws.calls.reset();
    let waiting_now = ledger
        .with_outcomes(&DELIVERY_OUTCOMES, None)
        .await
        .unwrap();
    let examined = measure(
        "deliveries waiting, after the reindex",
        waiting_now.len(),
        aws.calls.examined(),
    );
    assert_eq!(waiting_now.len(), 5);
    assert!(examined <= 5, "examined {examined}");

    aws.calls.reset();
    let of_one = ledger
        .with_outcomes(&DELIVERY_OUTCOMES, Some("inv_recent"))
        .await
        .unwrap();
    let examined = measure(
        "one invoice's waiting deliveries (release, recheck inv_…)",
        of_one.len(),
        aws.calls.examined(),
    );
    assert_eq!(of_one.len(), 3);
    assert!(examined <= 5, "examined {examined}");

    // An old invoice with deliveries, none waiting: nothing waiting is examined beyond the
    // few that wait (the filter reads the index, not the history).
    aws.calls.reset();
    let none = ledger
        .with_outcomes(&DELIVERY_OUTCOMES, Some("inv_old_7"))
        .await
        .unwrap();
    let examined = measure(
        "an old invoice's waiting deliveries",
        none.len(),
        aws.calls.examined(),
    );
    assert!(none.is_empty());
    assert!(examined <= 5, "examined {examined}");

    aws.calls.reset();
    let pending = ledger.pending(50).await.unwrap();
    let examined = measure(
        "pending (pending-by-age)",
        pending.len(),
        aws.calls.examined(),
    );
    assert!(examined <= pending.len(), "examined {examined}");

    // Invoices that need something: two held and two open, listed as the writes leave them;
    // one paid twice and one open from before the update that added the index (reindexed
    // below); one held and then released today (listed by its day), with its fulfilment.
    let with = |id: &str, at: u64, extra: &[(&str, AttributeValue)]| {
        let mut item = invoice(id, at, false);
        for (k, v) in extra {
            item.insert((*k).to_owned(), v.clone());
        }
        item
    };
    let review = |id: &str| ("listed_in", s(&review_list(id)));
    let open = ("listed_in", s("open"));
    let held = ("held", AttributeValue::Bool(true));
    let awaiting = ("status", s("awaiting_payment"));
    seed(
        &aws,
        &state,
        vec![
            with("inv_held_1", NOW_MS, &[held.clone(), review("inv_held_1")]),
            with("inv_held_2", NOW_MS, &[held.clone(), review("inv_held_2")]),
            with("inv_twice", old + 3, &[("duplicate_of", s("inv_old_2"))]),
            with(
                "inv_released",
                NOW_MS,
                &[
                    ("released_by", s("support:alice")),
                    ("listed_in", s(&day_listing(NOW_MS))),
                ],
            ),
            fulfilment("inv_released", NOW_MS),
            with("inv_open_1", NOW_MS, &[awaiting.clone(), open.clone()]),
            with("inv_open_2", NOW_MS, &[awaiting.clone(), open]),
            with("inv_open_before", old + 4, &[awaiting]),
        ],
    )
    .await;
    let resources =
        paymos_inbox_aws::dynamodb::DynamoResources::new(aws.dynamodb.clone(), &state, &deliveries);

    aws.calls.reset();
    let scanned = filtered_scan(
        &aws,
        &state,
        "kind = :i AND (held = :t OR attribute_exists(paid_late_at) OR attribute_exists(duplicate_of))",
        &[(":i", s("invoice")), (":t", AttributeValue::Bool(true))],
    )
    .await;
    let before = measure(
        "invoices waiting, by a filtered scan (before)",
        scanned,
        aws.calls.examined(),
    );
    assert!(before > OLD_FACTS, "{before}");
    aws.calls.reset();
    let scanned = filtered_scan(
        &aws,
        &state,
        "kind = :i AND #s IN (:a, :b, :c, :d)",
        &[
            (":i", s("invoice")),
            (":a", s("awaiting_client")),
            (":b", s("awaiting_payment")),
            (":c", s("confirming")),
            (":d", s("underpaid_waiting")),
        ],
    )
    .await;
    let before = measure(
        "open invoices, by a filtered scan (before: the reconciliation's re-read)",
        scanned,
        aws.calls.examined(),
    );
    assert!(before > OLD_FACTS, "{before}");

    aws.calls.reset();
    let review = resources.invoices_under_review().await.unwrap();
    let examined = measure(
        "invoices waiting (exceptions)",
        review.len(),
        aws.calls.examined(),
    );
    assert_eq!(review.len(), 2, "{review:?}");
    assert!(examined <= 2, "examined {examined}");
    aws.calls.reset();
    let opened = resources.open_invoices().await.unwrap();
    let examined = measure(
        "open invoices (the reconciliation's re-read)",
        opened.len(),
        aws.calls.examined(),
    );
    assert_eq!(opened.len(), 2, "{opened:?}");
    assert!(examined <= 2, "examined {examined}");

    assert_eq!(resources.reindex_listed().await.unwrap(), 2);
    assert_eq!(resources.reindex_listed().await.unwrap(), 0, "idempotent");
    aws.calls.reset();
    let review = resources.invoices_under_review().await.unwrap();
    let opened = resources.open_invoices().await.unwrap();
    let examined = measure(
        "invoices waiting and open, after the reindex",
        review.len() + opened.len(),
        aws.calls.examined(),
    );
    assert_eq!(
        (review.len(), opened.len()),
        (3, 3),
        "{review:?} {opened:?}"
    );
    assert!(examined <= 6, "examined {examined}");

    // What changed in the last hour (`events since`, `events resend`): the scan before, the
    // two short lists and the day lists since after.
    let hour_ago = NOW_MS - 3_600_000;
    aws.calls.reset();
    let scanned = filtered_scan(
        &aws,
        &state,
        "updated_at >= :since",
        &[(":since", n(hour_ago))],
    )
    .await;
    let before = measure(
        "what changed in the last hour, by a filtered scan (before: events since)",
        scanned,
        aws.calls.examined(),
    );
    assert!(before > OLD_FACTS, "{before}");
    aws.calls.reset();
    let changed = resources.changed_since(hour_ago).await.unwrap();
    let examined = measure(
        "what changed in the last hour (events since)",
        changed.len(),
        aws.calls.examined(),
    );
    // Two held, two open, the released invoice and its fulfilment.
    assert_eq!(changed.len(), 6, "{changed:?}");
    assert!(examined <= changed.len(), "examined {examined}");
    let events = paymos_inbox_core::roads::handoff::since(&resources, hour_ago, Environment::Live)
        .await
        .unwrap();
    assert!(
        events
            .iter()
            .any(|(_, e)| e.detail_type == "Order Paid"
                && e.idempotency_key.contains("inv_released")),
        "{events:?}"
    );

    // The fulfilments a reconciliation of the last day compares with Paymos' list.
    aws.calls.reset();
    let scanned = filtered_scan(&aws, &state, "kind = :f", &[(":f", s("fulfilment"))]).await;
    let before = measure(
        "fulfilments, by a filtered scan (before: the reconciliation)",
        scanned,
        aws.calls.examined(),
    );
    assert!(before > OLD_FACTS, "{before}");
    aws.calls.reset();
    let window = NOW_MS - 86_400_000;
    let fulfilled = resources.fulfilments_since(window).await.unwrap();
    let examined = measure(
        "fulfilments of the last day (the reconciliation)",
        fulfilled.len(),
        aws.calls.examined(),
    );
    assert_eq!(fulfilled.len(), 1, "{fulfilled:?}");
    // Its day lists hold the day's changes, of every kind: the released invoice too.
    assert!(examined <= 2, "examined {examined}");

    println!(
        "| read | listed | items examined |\n|---|---|---|\n{}",
        figures.join("\n")
    );
}
