//! `paymos-inbox check`: the five-step idempotency proof, automated. It checks the HTTP answers
//! of any receiver and, given access to a paymos-inbox deployment's tables, the business
//! outcome (one record per event, one fulfilment per invoice, nothing lost).

use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::AttributeValue;

use crate::domain::fulfil::fulfilment_key;
use crate::domain::signature::WebhookSecret;
use crate::tools::send::{Attempt, data_for, envelope, new_event_id, post};

/// The tables of the receiver under test.
#[derive(Debug, Clone)]
pub struct Tables {
    /// A client that reaches them.
    pub dynamodb: aws_sdk_dynamodb::Client,
    /// The deliveries table.
    pub deliveries: String,
    /// The state table.
    pub state: String,
}

/// One step's verdict.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Step {
    /// 1 to 5.
    pub number: u8,
    /// What it proves.
    pub name: &'static str,
    /// `pass`, `fail` or `skip`.
    pub verdict: &'static str,
    /// What was seen.
    pub evidence: Vec<String>,
}

/// How to run the check.
#[derive(Debug, Clone)]
pub struct CheckOptions {
    /// The receiver's URL.
    pub url: String,
    /// The secret it holds.
    pub secret: WebhookSecret,
    /// A secret it does NOT hold (to make step 4's first delivery fail).
    pub wrong_secret: WebhookSecret,
    /// Whether to send live events (`is_test = false`).
    pub live: bool,
    /// How many copies collide in step 3.
    pub collisions: usize,
    /// How long to keep retrying a 503/timeout before calling it lost.
    pub patience: Duration,
    /// How long the sender waits for an answer (Paymos: 10 s).
    pub timeout: Duration,
}

fn ok(a: &Attempt) -> bool {
    (200..300).contains(&a.status)
}

fn show(a: &Attempt) -> String {
    if a.status == 0 {
        format!("attempt {}: {}", a.attempt, a.body)
    } else {
        format!("attempt {}: {} {}", a.attempt, a.status, a.body.trim())
    }
}

struct Sender {
    client: reqwest::Client,
    options: CheckOptions,
}

impl Sender {
    fn body(&self, event_id: &str, invoice: &str) -> String {
        let now = crate::lambda::now_ms() / 1000;
        envelope(
            event_id,
            "invoice.paid",
            now,
            &data_for("invoice.paid", invoice, !self.options.live, now, None),
        )
    }

    async fn once(
        &self,
        event_id: &str,
        body: &str,
        secret: &WebhookSecret,
        attempt: usize,
    ) -> Attempt {
        let now = crate::lambda::now_ms() / 1000;
        post(
            &self.client,
            &self.options.url,
            event_id,
            body,
            std::slice::from_ref(secret),
            now,
            attempt,
            self.options.timeout,
        )
        .await
    }

    /// Sends until a 2xx or a 4xx, re-signing each time, like a compressed Paymos ladder.
    async fn until_answered(&self, event_id: &str, body: &str) -> Vec<Attempt> {
        let deadline = Instant::now() + self.options.patience;
        let mut attempts = Vec::new();
        loop {
            let a = self
                .once(event_id, body, &self.options.secret, attempts.len() + 1)
                .await;
            let done = ok(&a) || (400..500).contains(&a.status) || Instant::now() > deadline;
            attempts.push(a);
            if done {
                return attempts;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

impl Tables {
    async fn ledger(&self, event_id: &str) -> Result<Option<(String, String)>, String> {
        let item = self
            .dynamodb
            .get_item()
            .table_name(&self.deliveries)
            .key("event_id", AttributeValue::S(event_id.into()))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| aws_sdk_dynamodb::error::DisplayErrorContext(e).to_string())?
            .item;
        Ok(item.map(|i| {
            let get = |k: &str| {
                i.get(k)
                    .and_then(|v| v.as_s().ok())
                    .cloned()
                    .unwrap_or_default()
            };
            (get("state"), get("outcome"))
        }))
    }

    /// Every fulfilment item for an invoice (any key), so a receiver that writes two is caught.
    async fn fulfilments(&self, invoice: &str) -> Result<usize, String> {
        let mut count = 0;
        let mut start = None;
        loop {
            let page = self
                .dynamodb
                .scan()
                .table_name(&self.state)
                .filter_expression("kind = :f AND invoice_id = :i")
                .expression_attribute_values(":f", AttributeValue::S("fulfilment".into()))
                .expression_attribute_values(":i", AttributeValue::S(invoice.into()))
                .set_exclusive_start_key(start)
                .consistent_read(true)
                .send()
                .await
                .map_err(|e| aws_sdk_dynamodb::error::DisplayErrorContext(e).to_string())?;
            count += page.items.map_or(0, |i| i.len());
            start = page.last_evaluated_key;
            if start.is_none() {
                return Ok(count);
            }
        }
    }

    /// Waits until every event is processed (fulfil is asynchronous), then reports.
    async fn settle(
        &self,
        events: &[String],
        patience: Duration,
    ) -> Result<Vec<(String, Option<(String, String)>)>, String> {
        let deadline = Instant::now() + patience;
        loop {
            let mut seen = Vec::new();
            for e in events {
                seen.push((e.clone(), self.ledger(e).await?));
            }
            let settled = seen
                .iter()
                .all(|(_, r)| r.as_ref().is_some_and(|(s, _)| s == "processed"));
            if settled || Instant::now() > deadline {
                return Ok(seen);
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }

    /// Business evidence for one invoice: each event recorded once and processed, one fulfilment.
    async fn outcome(
        &self,
        invoice: &str,
        events: &[String],
        patience: Duration,
        evidence: &mut Vec<String>,
    ) -> bool {
        let seen = match self.settle(events, patience).await {
            Ok(s) => s,
            Err(e) => {
                evidence.push(format!("cannot read the deliveries table: {e}"));
                return false;
            }
        };
        let mut good = true;
        for (e, r) in seen {
            match r {
                Some((state, outcome)) => evidence.push(format!("ledger {e}: {state} {outcome}")),
                None => {
                    evidence.push(format!(
                        "ledger {e}: MISSING (acknowledged but not recorded)"
                    ));
                    good = false;
                }
            }
        }
        match self.fulfilments(invoice).await {
            Ok(1) => evidence.push(format!(
                "{invoice}: 1 fulfilment ({})",
                fulfilment_key(invoice)
            )),
            Ok(n) => {
                evidence.push(format!("{invoice}: {n} fulfilments (expected exactly 1)"));
                good = false;
            }
            Err(e) => {
                evidence.push(format!("cannot read the state table: {e}"));
                good = false;
            }
        }
        good
    }
}

fn verdict(pass: bool) -> &'static str {
    if pass { "pass" } else { "fail" }
}

/// Runs the five steps against `options.url`; `tables` adds the business checks.
pub async fn run(options: CheckOptions, tables: Option<Tables>) -> Vec<Step> {
    let sender = Sender {
        client: reqwest::Client::new(),
        options: options.clone(),
    };
    let patience = options.patience;
    let mut steps = Vec::new();
    let mut acknowledged: Vec<(String, String)> = Vec::new(); // (event id, invoice)

    // 1. One delivery.
    let invoice = format!("inv_check_{}", &new_event_id()[4..]);
    let first = new_event_id();
    let body = sender.body(&first, &invoice);
    let attempts = sender.until_answered(&first, &body).await;
    let mut evidence: Vec<String> = attempts.iter().map(show).collect();
    let mut pass = attempts.last().is_some_and(ok);
    if pass {
        acknowledged.push((first.clone(), invoice.clone()));
    }
    if let Some(t) = &tables {
        pass &= t
            .outcome(
                &invoice,
                std::slice::from_ref(&first),
                patience,
                &mut evidence,
            )
            .await;
    }
    steps.push(Step {
        number: 1,
        name: "one delivery is acknowledged, recorded and fulfilled once",
        verdict: verdict(pass),
        evidence,
    });

    // 2. The same event again (a retry, re-signed).
    let attempts = sender.until_answered(&first, &body).await;
    let mut evidence: Vec<String> = attempts.iter().map(show).collect();
    let mut pass = attempts.last().is_some_and(ok);
    if let Some(t) = &tables {
        pass &= t
            .outcome(
                &invoice,
                std::slice::from_ref(&first),
                patience,
                &mut evidence,
            )
            .await;
    }
    steps.push(Step {
        number: 2,
        name: "the same event again is acknowledged and changes nothing",
        verdict: verdict(pass),
        evidence,
    });

    // 3. Collisions: copies of one new event at once (with `dev --slow`, the sender's 10 s
    //    timeout fires while the first attempt still runs), then retries until answered.
    let invoice3 = format!("inv_check_{}", &new_event_id()[4..]);
    let collide = new_event_id();
    let body3 = sender.body(&collide, &invoice3);
    let copies = futures::future::join_all(
        (0..options.collisions.max(2))
            .map(|i| sender.once(&collide, &body3, &options.secret, i + 1)),
    )
    .await;
    let mut evidence: Vec<String> = copies.iter().map(show).collect();
    let mut pass = copies
        .iter()
        .all(|a| ok(a) || a.status == 503 || a.status == 0);
    if !pass {
        evidence.push("a colliding copy got an answer other than 2xx, 503 or a timeout".into());
    }
    let retry = sender.until_answered(&collide, &body3).await;
    evidence.extend(retry.iter().map(|a| format!("retry {}", show(a))));
    let answered = copies.iter().chain(&retry).any(ok);
    pass &= answered;
    if answered {
        acknowledged.push((collide.clone(), invoice3.clone()));
    }
    if let Some(t) = &tables {
        pass &= t
            .outcome(
                &invoice3,
                std::slice::from_ref(&collide),
                patience,
                &mut evidence,
            )
            .await;
    }
    steps.push(Step {
        number: 3,
        name: "colliding attempts record once and fulfil once",
        verdict: verdict(pass),
        evidence,
    });

    // 4. A failed event (signed with a secret the receiver does not hold: a broken config),
    //    replayed with the same event id after the receiver "recovers".
    let invoice4 = format!("inv_check_{}", &new_event_id()[4..]);
    let failed = new_event_id();
    let body4 = sender.body(&failed, &invoice4);
    let refused = sender.once(&failed, &body4, &options.wrong_secret, 1).await;
    let mut evidence = vec![format!("while broken: {}", show(&refused))];
    let mut pass = !ok(&refused);
    let replay = sender.until_answered(&failed, &body4).await;
    evidence.extend(replay.iter().map(|a| format!("replay {}", show(a))));
    pass &= replay.last().is_some_and(ok);
    if replay.last().is_some_and(ok) {
        acknowledged.push((failed.clone(), invoice4.clone()));
    }
    if let Some(t) = &tables {
        pass &= t
            .outcome(
                &invoice4,
                std::slice::from_ref(&failed),
                patience,
                &mut evidence,
            )
            .await;
    }
    steps.push(Step {
        number: 4,
        name: "a failed event replayed after recovery is applied once",
        verdict: verdict(pass),
        evidence,
    });

    // 5. Reconcile the sender's log with the receiver's tables.
    let step5 = match &tables {
        None => Step {
            number: 5,
            name: "every acknowledged delivery is recorded and processed",
            verdict: "skip",
            evidence: vec!["give the receiver's tables (--dev-info, or --deliveries-table/--state-table) to reconcile".into()],
        },
        Some(t) => {
            let mut evidence = Vec::new();
            let mut pass = true;
            for (event, invoice) in &acknowledged {
                pass &= t.outcome(invoice, std::slice::from_ref(event), patience, &mut evidence).await;
            }
            evidence.insert(0, format!("{} acknowledged deliveries in the sender's log", acknowledged.len()));
            Step { number: 5, name: "every acknowledged delivery is recorded and processed", verdict: verdict(pass), evidence }
        }
    };
    steps.push(step5);
    steps
}
