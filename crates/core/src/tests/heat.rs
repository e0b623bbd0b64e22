//! Issue 39, keys that spread: one second of a busy merchant's deliveries (20,000, the typical
//! mix: 60 % invoice events of which a quarter pay, a third of the payments through a second
//! endpoint, 20 % withdrawals, 20 % deposits, a few hot payers and hot orders) planned and
//! applied with the real write vocabulary on the memory twin, every write counted on the
//! partition it lands in, as DynamoDB counts them:
//!
//! - a table item: 1 write a write (a refused condition consumes it too), 2 inside a
//!   transaction;
//! - an index (the state table's `listed`, the ledger's `waiting` and `pending-by-age`): a new
//!   entry 1, a removed one 1, a key change 2 (removed from one partition, added to another,
//!   or the range key moved: both in the same one), an entry whose projected attributes
//!   changed 1, nothing changed 0; doubled inside a transaction;
//! - ingest's own writes (the body item, the record, its `pending-by-age` entry) and the
//!   processed mark's removal of that entry.
//!
//! Items here are under 1 KB (one write unit each). A partition takes 1,000 writes a second;
//! none may take more than 800.

use std::collections::BTreeMap;
use std::sync::Mutex;

use crate::fulfil::{Fulfil, ResourceStore};
use crate::memory::MemoryResources;
use crate::port::PortError;
use crate::signature::Environment;
use crate::work::{WorkItem, delivery_key};
use crate::write::{Field, Fields, Key, Stored, Table, Value, What, Write, shard_of};

/// Deliveries in the measured second.
const RATE: usize = 20_000;
/// The most a partition may take in a second (DynamoDB's bound is 1,000).
const BOUND: u64 = 800;
/// The deliveries ledger's `pending-by-age` shards (`LedgerSchema::PENDING_SHARDS`).
const PENDING_SHARDS: u32 = 64;
/// Noon of the first day whose lists are spread.
const NOW_MS: u64 = crate::write::SHARDED_FROM_MS + 43_200_000;

/// The indexes: name, the field that is the entry's partition, the field it ranges by.
const INDEXES: [(&str, Field, Field); 2] = [
    ("listed", Field::ListedIn, Field::UpdatedAt),
    ("waiting", Field::Waiting, Field::ProcessedAt),
];

/// The memory twin, every write counted on its partitions.
#[derive(Default)]
struct Metered {
    inner: MemoryResources,
    writes: Mutex<BTreeMap<String, u64>>,
    total: std::sync::atomic::AtomicU64,
    /// Strongly consistent reads of an item of at most 4 KB: a read unit each.
    reads: std::sync::atomic::AtomicU64,
}

impl Metered {
    fn count(&self, partition: String, n: u64) {
        *self.writes.lock().unwrap().entry(partition).or_default() += n;
        self.total.fetch_add(n, std::sync::atomic::Ordering::SeqCst);
    }

    fn table(key: &Key) -> String {
        match key.table {
            Table::State => format!("state {}", key.id),
            Table::Ledger => format!("deliveries {}", key.id),
        }
    }

    /// The index writes of one item going from `before` to `after`.
    fn index_writes(&self, before: Option<&Fields>, after: Option<&Fields>, factor: u64) {
        for (index, partition, range) in &INDEXES {
            let entry = |f: Option<&Fields>| {
                let f = f?;
                let list = f.get(partition).and_then(Value::as_text)?.to_owned();
                Some((list, f.get(range).cloned()))
            };
            match (entry(before), entry(after)) {
                (None, None) => {}
                (None, Some((l, _))) | (Some((l, _)), None) => {
                    self.count(format!("{index} {l}"), factor);
                }
                (Some((p, pr)), Some((l, lr))) => {
                    if p != l {
                        self.count(format!("{index} {p}"), factor);
                        self.count(format!("{index} {l}"), factor);
                    } else if pr != lr {
                        self.count(format!("{index} {l}"), 2 * factor);
                    } else if before != after {
                        self.count(format!("{index} {l}"), factor);
                    }
                }
            }
        }
    }
}

impl ResourceStore for Metered {
    async fn write(&self, writes: &[Write]) -> Result<Stored, PortError> {
        let before: Vec<Option<Fields>> =
            writes.iter().map(|w| self.inner.fields(&w.key)).collect();
        let stored = self.inner.write(writes).await?;
        let factor = if writes.len() > 1 { 2 } else { 1 };
        for (w, before) in writes.iter().zip(&before) {
            self.count(Self::table(&w.key), factor);
            if matches!(stored, Stored::Committed) {
                self.index_writes(before.as_ref(), self.inner.fields(&w.key).as_ref(), factor);
                if w.what == What::Processed {
                    // The processed mark removes the record's `pending-by-age` entry.
                    let shard = shard_of(&w.key.id, PENDING_SHARDS);
                    self.count(format!("pending-by-age p{shard}"), factor);
                }
            }
        }
        Ok(stored)
    }

    async fn read(&self, key: &Key) -> Result<Option<Fields>, PortError> {
        self.reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.inner.read(key).await
    }
}

fn envelope(event_id: &str, event_type: &str, data: &serde_json::Value) -> Vec<u8> {
    serde_json::json!({"event_id": event_id, "event_type": event_type, "version": 1,
        "occurred_at": NOW_MS / 1000 - 5, "data": data})
    .to_string()
    .into_bytes()
}

/// The second's deliveries: `(event id, body)`.
fn the_mix() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::with_capacity(RATE);
    let mut n = 0usize;
    while out.len() < RATE {
        n += 1;
        let id = |kind: &str| format!("{kind}_{n:07}");
        match n % 10 {
            // 60 %: invoice events, a quarter of them paying. A paid invoice was open first
            // (its `confirming`, then `paid`: its list entry is written, then moves), and one
            // slot in four sends nothing to keep the shares.
            0..=5 => {
                let invoice = id("inv");
                if n % 4 == 2 {
                    continue;
                }
                if n.is_multiple_of(4) {
                    let open = serde_json::json!({"invoice_id": invoice, "status": "confirming"});
                    let first = format!("evt_{n:07}_c");
                    out.push((first.clone(), envelope(&first, "invoice.confirming", &open)));
                    // A few hot orders: one paid invoice in a hundred pays one of three.
                    let order = if n.is_multiple_of(400) {
                        format!("order-hot-{}", n % 3)
                    } else {
                        format!("order-{invoice}")
                    };
                    let data = serde_json::json!({"invoice_id": invoice, "status": "paid",
                        "is_final": true, "order": {"external_id": order, "amount": "10.50",
                        "currency": "USDT"}});
                    out.push((id("evt"), envelope(&id("evt"), "invoice.paid", &data)));
                    // 1.3 endpoints a payment: another event id for the same payment.
                    if n % 10 < 3 {
                        let second = format!("evt_{n:07}_b");
                        out.push((second.clone(), envelope(&second, "invoice.paid", &data)));
                    }
                } else {
                    let data = serde_json::json!({"invoice_id": invoice, "status": "confirming"});
                    out.push((id("evt"), envelope(&id("evt"), "invoice.confirming", &data)));
                }
            }
            // 20 %: withdrawals.
            6 | 7 => {
                let data = serde_json::json!({"withdrawal_id": id("wdr"), "type": "payout",
                    "amount": "5.00", "currency": "USDT"});
                out.push((
                    id("evt"),
                    envelope(&id("evt"), "withdrawal.completed", &data),
                ));
            }
            // 20 %: final deposits; three hot payers take 5 % of them each.
            _ => {
                let payer = match n % 20 {
                    9 if n % 60 < 20 => "payer-hot-a".to_owned(),
                    9 if n % 60 < 40 => "payer-hot-b".to_owned(),
                    9 => "payer-hot-c".to_owned(),
                    _ => format!("payer-{n}"),
                };
                let data = serde_json::json!({"id": id("pcd"), "is_final": true,
                    "payment_channel_external_id": payer, "net": "1.00", "currency": "TRX"});
                out.push((
                    id("evt"),
                    envelope(&id("evt"), "payment_channel.deposit.confirmed", &data),
                ));
            }
        }
    }
    out.truncate(RATE);
    out
}

/// The second applied: every partition's writes, and per outcome its deliveries, the write
/// units they took (ingest's and fulfil's, indexes included) and the read units.
struct Second {
    writes: BTreeMap<String, u64>,
    by_outcome: BTreeMap<&'static str, (u64, u64, u64)>,
}

async fn the_second() -> Second {
    let fulfil = Fulfil::new(Metered::default());
    let store = fulfil.store();
    let total = || store.total.load(std::sync::atomic::Ordering::SeqCst);
    let reads = || store.reads.load(std::sync::atomic::Ordering::SeqCst);
    let mut by_outcome: BTreeMap<&'static str, (u64, u64, u64)> = BTreeMap::new();
    for (event_id, body) in the_mix() {
        let (before, read_before) = (total(), reads());
        // Ingest: the body item, the record, its `pending-by-age` entry.
        let key = delivery_key(Some(Environment::Live), &event_id);
        store.count(format!("deliveries body#{key}"), 1);
        store.count(format!("deliveries {key}"), 1);
        store.count(
            format!("pending-by-age p{}", shard_of(&key, PENDING_SHARDS)),
            1,
        );
        let item = WorkItem {
            event_id,
            environment: Some(Environment::Live),
            body,
            received_at_ms: Some(NOW_MS),
        };
        let (_, outcome) = fulfil.apply(&item, NOW_MS).await.expect("applied");
        let entry = by_outcome.entry(outcome.as_str()).or_default();
        entry.0 += 1;
        entry.1 += total() - before;
        entry.2 += reads() - read_before;
    }
    let writes = store.writes.lock().unwrap().clone();
    Second { writes, by_outcome }
}

/// DynamoDB on-demand, us-east-1: dollars per million write request units.
const DOLLARS_PER_MILLION_WRU: f64 = 0.625;
/// And per million read request units (a strongly consistent read of up to 4 KB is one).
const DOLLARS_PER_MILLION_RRU: f64 = 0.125;

/// The table of write and read units per outcome of the mix, priced, as docs/performance.md
/// shows it.
fn priced(second: &Second) -> String {
    let mut out = String::from(
        "| outcome (share of the mix) | write units a delivery | read units | per million deliveries |\n|---|---|---|---|\n",
    );
    #[allow(clippy::cast_precision_loss, reason = "counts of a few thousand")]
    let per = |n: u64, of: u64| n as f64 / of as f64;
    let dollars =
        |wru: f64, rru: f64| wru * DOLLARS_PER_MILLION_WRU + rru * DOLLARS_PER_MILLION_RRU;
    let (mut deliveries, mut units, mut read) = (0, 0, 0);
    for (outcome, (n, wru, rru)) in &second.by_outcome {
        deliveries += n;
        units += wru;
        read += rru;
        out.push_str(&format!(
            "| `{outcome}` ({:.1} %) | {:.1} | {:.1} | ${:.2} |\n",
            100.0 * per(*n, RATE as u64),
            per(*wru, *n),
            per(*rru, *n),
            dollars(per(*wru, *n), per(*rru, *n))
        ));
    }
    out.push_str(&format!(
        "| **the mix** | **{:.2}** | **{:.2}** | **${:.2}** |\n",
        per(units, deliveries),
        per(read, deliveries),
        dollars(per(units, deliveries), per(read, deliveries))
    ));
    out
}

// Issue 39: the cost table was typed. It is the heat test's second priced: every table and
// index write each delivery of the mix takes, by outcome, at $0.625 per million write units.
#[tokio::test]
async fn docs_performance_prices_the_mix_as_the_heat_test_counts_it() {
    let second = the_second().await;
    let table = priced(&second);
    let doc = include_str!("../../../../docs/performance.md");
    let (begin, end) = (
        "<!-- the heat test's table (crates/core/src/tests/heat.rs): begin -->\n",
        "<!-- end -->",
    );
    let shown = doc
        .split_once(begin)
        .and_then(|(_, rest)| rest.split_once(end))
        .map(|(t, _)| t);
    assert_eq!(
        shown,
        Some(table.as_str()),
        "docs/performance.md's DynamoDB table, between its markers, is:\n{table}"
    );
    let mix = table.lines().last().unwrap_or_default().replace("**", "");
    let (units, dollars) = mix
        .split(" | ")
        .skip(1)
        .map(|c| c.trim_matches(|ch: char| ch == '|' || ch.is_whitespace()))
        .fold((String::new(), String::new()), |(u, d), c| {
            if u.is_empty() {
                (c.to_owned(), d)
            } else {
                (u, c.to_owned())
            }
        });
    let row = doc
        .lines()
        .find(|l| l.starts_with("| DynamoDB"))
        .expect("the all-in table has a DynamoDB row");
    assert!(
        row.contains(&format!("({units})")) && row.contains(&format!("({dollars})")),
        "the all-in table's DynamoDB row says the mix's {units} WRU and {dollars}: {row}"
    );
}

#[tokio::test]
async fn no_partition_takes_more_than_800_writes_a_second_at_20000_deliveries_a_second() {
    let Second { writes, by_outcome } = the_second().await;
    let applied: BTreeMap<&str, u64> = by_outcome.iter().map(|(o, (n, ..))| (*o, *n)).collect();
    let mut hottest: Vec<(&String, &u64)> = writes.iter().collect();
    hottest.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let total: u64 = writes.values().sum();
    println!("{RATE} deliveries in a second: {total} writes, outcomes {applied:?}");
    println!("the ten hottest partitions (writes in that second):");
    for (partition, n) in hottest.iter().take(10) {
        println!("  {n:>5}  {partition}");
    }
    assert!(
        applied.get("fulfilled").copied().unwrap_or(0) > 2_000,
        "the payments ship: {applied:?}"
    );
    let (partition, most) = hottest[0];
    assert!(
        *most <= BOUND,
        "{partition} takes {most} writes in a second (at most {BOUND})"
    );
}
