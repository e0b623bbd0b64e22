//! `paymos-inbox check`: the six-step replay proof, against any receiver. The HTTP answers
//! alone prove nothing about shipping, so every step that claims a business outcome reads it
//! through a *probe* of the receiver's orders (its own tables for paymos-inbox, or a command or
//! URL that prints a count for any other receiver). A step whose outcome could not be observed
//! is `unproven`, never `pass`.
//!
//! 1. One delivery (an advisory `invoice.confirming`, then `invoice.paid` with a rotation header
//!    whose valid `v1` comes first): one order row.
//! 2. The same event again, and the same payment through a second endpoint (another event id):
//!    2xx, the row has not moved.
//! 3. Colliding attempts (copies at once; against `dev --slow` the first attempt is still
//!    running past the sender's timeout): one row.
//! 4. An event that failed while the receiver was broken, for an order made right by hand
//!    meanwhile (the mark-paid hook), replayed: still one row.
//! 5. The receiver against the source: with API credentials, Paymos' paid invoices (MISSING,
//!    DOUBLE); else every invoice this run got a 2xx for has exactly one row.
//! 6. Another project's payment (an endpoint without a project filter receives every project)
//!    for the same order id as step 1's: 2xx, and it ships nothing; `unproven` against a
//!    receiver that applies every project.

use std::time::{Duration, Instant};

use crate::tools::send::{Attempt, data_for, envelope, new_event_id, post};
use paymos_inbox_aws::dynamodb::{DynamoLedger, DynamoResources};
use paymos_inbox_core::money::change::{OrderRef, Projects};
use paymos_inbox_core::money::status::Amount;
use paymos_inbox_core::roads::fulfil::Fulfil;
use paymos_inbox_core::roads::ingest::delivery_key;
use paymos_inbox_core::wire::signature::{Environment, WebhookSecret};

/// The tables of a paymos-inbox receiver under test.
#[derive(Debug, Clone)]
pub struct Tables {
    /// A client that reaches them.
    pub dynamodb: aws_sdk_dynamodb::Client,
    /// The deliveries table.
    pub deliveries: String,
    /// The state table.
    pub state: String,
    /// The projects it applies, the first its home project (none listed: every project): how
    /// step 4's mark-paid keys the order of the project the steps pay in.
    pub projects: Projects,
}

/// How `check` observes the receiver's orders.
#[derive(Debug, Clone)]
pub enum Probe {
    /// paymos-inbox's own tables: fulfilment items per invoice, and each event's ledger record.
    Tables(Tables),
    /// A shell command printing a count, with `{invoice_id}`, `{order_id}`, `{event_id}`
    /// filled in (e.g. `psql … -c "select count(*) from orders where invoice_id = '{invoice_id}'"`).
    Command(String),
    /// A URL answering a count, or a JSON object with a `count`.
    Url(String),
}

/// How `check` makes an order right by hand (step 4), as support or a reconciliation would.
#[derive(Debug, Clone)]
pub enum MarkPaid {
    /// paymos-inbox's manual path, through the same conditional transition as a webhook.
    Tables(Tables),
    /// A shell command, with the same placeholders as [`Probe::Command`].
    Command(String),
    /// A URL to POST to, with the same placeholders.
    Url(String),
}

/// The ids a probe or hook is asked about.
#[derive(Debug, Clone)]
pub struct Ids {
    /// `inv_…`.
    pub invoice_id: String,
    /// The merchant's order id the events carry (`order-<invoice_id>`).
    pub order_id: String,
    /// The event most recently sent for it.
    pub event_id: String,
}

impl Ids {
    fn fill(&self, template: &str) -> String {
        template
            .replace("{invoice_id}", &self.invoice_id)
            .replace("{order_id}", &self.order_id)
            .replace("{event_id}", &self.event_id)
    }
}

/// One step's verdict.
#[derive(Debug, Clone, serde::Serialize)]
pub struct StepVerdict {
    /// 1 to 6.
    pub number: u8,
    /// What it proves.
    pub name: &'static str,
    /// `pass`, `fail` or `unproven`.
    pub verdict: &'static str,
    /// What was seen.
    pub evidence: Vec<String>,
    /// For `unproven`: what is missing to prove it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub missing: Option<String>,
}

/// How to run the check.
#[derive(Clone)]
pub struct CheckOptions {
    /// The receiver's URL.
    pub url: String,
    /// The project steps 1 to 5 pay in: one the receiver applies.
    pub project: String,
    /// The secret it holds.
    pub secret: WebhookSecret,
    /// A secret it does NOT hold: step 4's "broken" delivery, and the retired `v1` of step 1's
    /// rotation header.
    pub wrong_secret: WebhookSecret,
    /// Whether to send live events (`is_test = false`).
    pub live: bool,
    /// How many copies collide in step 3.
    pub collisions: usize,
    /// How long to keep retrying a 503/timeout, and to wait for a row to appear.
    pub patience: Duration,
    /// How long the sender waits for an answer (Paymos: 10 s).
    pub timeout: Duration,
    /// How long to wait after a 2xx before counting rows (a receiver that ships asynchronously
    /// has time to ship twice).
    pub settle: Duration,
    /// How the receiver's orders are observed.
    pub probe: Option<Probe>,
    /// How an order is made right by hand (step 4).
    pub mark_paid: Option<MarkPaid>,
    /// Paymos' API, for step 5 against the source, and how far back to look.
    pub api: Option<(std::sync::Arc<paymos::PaymosClient>, Duration)>,
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

/// The project of step 6's payment: none a merchant has.
pub const OTHER_PROJECT: &str = "prj_paymos_inbox_check_other";

const NO_PROBE: &str = "nothing observed the receiver's orders: give --orders-cmd, --orders-url, or the receiver's tables (--dev-info / --deliveries-table and --state-table)";

struct Sender {
    client: reqwest::Client,
    options: CheckOptions,
}

impl Sender {
    fn body(&self, event_id: &str, event_type: &str, invoice: &str) -> String {
        let now = paymos_inbox_lambda::now_ms() / 1000;
        let project = serde_json::json!({"project_id": self.options.project});
        envelope(
            event_id,
            event_type,
            now,
            &data_for(event_type, invoice, !self.options.live, now, Some(&project)),
        )
    }

    async fn once(
        &self,
        event_id: &str,
        body: &str,
        secrets: &[WebhookSecret],
        attempt: usize,
    ) -> Attempt {
        let now = paymos_inbox_lambda::now_ms() / 1000;
        post(
            &self.client,
            &self.options.url,
            event_id,
            body,
            secrets,
            now,
            attempt,
            self.options.timeout,
        )
        .await
    }

    /// Sends until a 2xx or a 4xx, re-signing each time, like a compressed Paymos ladder.
    async fn until_answered(
        &self,
        event_id: &str,
        body: &str,
        secrets: &[WebhookSecret],
    ) -> Vec<Attempt> {
        let deadline = Instant::now() + self.options.patience;
        let mut attempts = Vec::new();
        loop {
            let a = self.once(event_id, body, secrets, attempts.len() + 1).await;
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
    fn ledger_table(&self) -> DynamoLedger {
        DynamoLedger::new(self.dynamodb.clone(), &self.deliveries, None)
    }

    /// The record of `event_id` signed by a secret of `environment`.
    async fn ledger(
        &self,
        environment: Option<Environment>,
        event_id: &str,
    ) -> Result<Option<(String, String)>, String> {
        let state = self
            .ledger_table()
            .state_of(&delivery_key(environment, event_id))
            .await
            .map_err(|e| e.to_string())?;
        Ok(state.map(|(state, outcome)| (state.as_str().to_owned(), outcome.unwrap_or_default())))
    }

    /// Every fulfilment item for an invoice (any key), so a receiver that writes two is caught:
    /// what was written in the last hour (the check's own invoice is minutes old), never the
    /// books.
    async fn fulfilments(&self, invoice: &str) -> Result<u64, String> {
        const HOUR_MS: u64 = 3_600_000;
        let resources = DynamoResources::new(self.dynamodb.clone(), &self.state, &self.deliveries);
        let since = u64::try_from(jiff::Timestamp::now().as_millisecond())
            .unwrap_or_default()
            .saturating_sub(HOUR_MS);
        let found = resources
            .fulfilments_of(invoice, since)
            .await
            .map_err(|e| e.to_string())?;
        Ok(found.len() as u64)
    }

    /// Waits until each event, signed by a secret of `environment`, is recorded and processed
    /// (fulfil is asynchronous); evidence per event. False when one was acknowledged but never
    /// recorded.
    async fn settle(
        &self,
        events: &[String],
        environment: Option<Environment>,
        patience: Duration,
        evidence: &mut Vec<String>,
    ) -> bool {
        let deadline = Instant::now() + patience;
        loop {
            let mut seen = Vec::new();
            for e in events {
                match self.ledger(environment, e).await {
                    Ok(r) => seen.push((e, r)),
                    Err(err) => {
                        evidence.push(format!("cannot read the deliveries table: {err}"));
                        return false;
                    }
                }
            }
            let settled = seen
                .iter()
                .all(|(_, r)| r.as_ref().is_some_and(|(s, _)| s == "processed"));
            if settled || Instant::now() > deadline {
                let mut good = true;
                for (e, r) in seen {
                    match r {
                        Some((state, outcome)) => {
                            evidence.push(format!("ledger {e}: {state} {outcome}"));
                        }
                        None => {
                            evidence.push(format!(
                                "ledger {e}: MISSING (acknowledged but not recorded)"
                            ));
                            good = false;
                        }
                    }
                }
                return good;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
}

impl Probe {
    /// How many order rows the receiver holds for `ids`.
    async fn count(&self, ids: &Ids, client: &reqwest::Client) -> Result<u64, String> {
        match self {
            Self::Tables(t) => t.fulfilments(&ids.invoice_id).await,
            Self::Command(template) => {
                let out = run_command(&ids.fill(template)).await?;
                parse_count(&out).ok_or_else(|| {
                    format!(
                        "--orders-cmd printed no count (last line: {:?})",
                        last_line(&out)
                    )
                })
            }
            Self::Url(template) => {
                let url = ids.fill(template);
                let response = client
                    .get(&url)
                    .timeout(Duration::from_secs(10))
                    .send()
                    .await
                    .map_err(|e| format!("--orders-url {url}: {e}"))?;
                let status = response.status();
                let text = response.text().await.unwrap_or_default();
                if !status.is_success() {
                    return Err(format!("--orders-url {url}: HTTP {status}"));
                }
                parse_count(&text).ok_or_else(|| {
                    format!(
                        "--orders-url {url} answered no count (a number, or JSON with \"count\")"
                    )
                })
            }
        }
    }

    fn describe(&self) -> &'static str {
        match self {
            Self::Tables(_) => "fulfilment item",
            Self::Command(_) | Self::Url(_) => "order row",
        }
    }
}

impl MarkPaid {
    /// Marks `ids`' invoice paid, its order of `project` (the project the steps pay in).
    async fn apply(
        &self,
        ids: &Ids,
        project: &str,
        client: &reqwest::Client,
    ) -> Result<String, String> {
        match self {
            Self::Tables(t) => {
                // As `mark-paid --project`: the stack's projects key the order in its own.
                let fulfil = Fulfil::new(DynamoResources::new(
                    t.dynamodb.clone(),
                    t.state.clone(),
                    t.deliveries.clone(),
                ))
                .for_projects(t.projects.clone());
                let order = OrderRef {
                    external_id: Some(ids.order_id.clone()),
                    amount: Amount::parse("25.00"),
                    currency: Some("USDT".into()),
                    project: Some(project.to_owned()),
                    home: false,
                    unlisted: false,
                };
                let applied = fulfil
                    .mark_paid(
                        &ids.invoice_id,
                        order,
                        "check",
                        paymos_inbox_lambda::now_ms(),
                    )
                    .await
                    .map_err(|e| e.to_string())?;
                Ok(format!("mark-paid {}: {applied}", ids.invoice_id))
            }
            Self::Command(template) => {
                run_command(&ids.fill(template)).await?;
                Ok(format!("--mark-paid-cmd ran for {}", ids.invoice_id))
            }
            Self::Url(template) => {
                let url = ids.fill(template);
                let response = client
                    .post(&url)
                    .timeout(Duration::from_secs(10))
                    .send()
                    .await
                    .map_err(|e| format!("--mark-paid-url {url}: {e}"))?;
                if response.status().is_success() {
                    Ok(format!("--mark-paid-url {}: {}", url, response.status()))
                } else {
                    Err(format!("--mark-paid-url {url}: HTTP {}", response.status()))
                }
            }
        }
    }
}

async fn run_command(command: &str) -> Result<String, String> {
    let output = tokio::time::timeout(
        Duration::from_secs(30),
        tokio::process::Command::new("sh")
            .arg("-c")
            .arg(command)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .map_err(|_| format!("`{command}` did not finish within 30 s"))?
    .map_err(|e| format!("`{command}`: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "`{command}` exited with {}: {}",
            output.status,
            last_line(&String::from_utf8_lossy(&output.stderr))
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

fn last_line(text: &str) -> &str {
    text.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
}

/// A count from a probe's output: a bare number (the last non-empty line, as `psql -t` or
/// `wc -l` print it), or JSON with a numeric `count` (or `Count`, as the AWS CLI prints it).
#[must_use]
pub fn parse_count(text: &str) -> Option<u64> {
    let text = text.trim();
    if let Ok(value) = serde_json::from_str::<serde_json::Value>(text) {
        return match value {
            serde_json::Value::Number(n) => n.as_u64(),
            serde_json::Value::Object(map) => ["count", "Count"]
                .iter()
                .find_map(|k| map.get(*k).and_then(serde_json::Value::as_u64)),
            _ => None,
        };
    }
    last_line(text).parse().ok()
}

fn verdict(pass: bool) -> &'static str {
    if pass { "pass" } else { "fail" }
}

/// One step under construction.
struct Proof {
    number: u8,
    name: &'static str,
    evidence: Vec<String>,
    failed: bool,
    missing: Option<String>,
}

impl Proof {
    fn new(number: u8, name: &'static str) -> Self {
        Self {
            number,
            name,
            evidence: Vec::new(),
            failed: false,
            missing: None,
        }
    }

    fn fail(&mut self, why: impl Into<String>) {
        self.evidence.push(why.into());
        self.failed = true;
    }

    fn unproven(&mut self, why: &str) {
        if self.missing.is_none() {
            self.missing = Some(why.to_owned());
        }
    }

    fn done(self) -> StepVerdict {
        let verdict = if self.failed {
            "fail"
        } else if self.missing.is_some() {
            "unproven"
        } else {
            verdict(true)
        };
        // Progress: the steps take minutes (retries, the slow-reply wait), one line each.
        tracing::info!(step = self.number, of = 6, verdict, "check: {}", self.name);
        StepVerdict {
            number: self.number,
            name: self.name,
            verdict,
            evidence: self.evidence,
            missing: self.missing,
        }
    }
}

struct Checker {
    sender: Sender,
}

impl Checker {
    fn options(&self) -> &CheckOptions {
        &self.sender.options
    }

    /// Counts rows for `ids`, first waiting for the receiver to finish: until each event is
    /// processed (own tables) or a row appears (any receiver), then `settle` more.
    async fn rows(&self, ids: &Ids, events: &[String], proof: &mut Proof) -> Option<u64> {
        let Some(probe) = &self.options().probe else {
            proof.unproven(NO_PROBE);
            return None;
        };
        let patience = self.options().patience;
        let environment = Environment::from_secret_prefix(self.options().secret.expose());
        if let Probe::Tables(t) = probe
            && !t
                .settle(events, environment, patience, &mut proof.evidence)
                .await
        {
            proof.failed = true;
        }
        let deadline = Instant::now() + patience;
        loop {
            match probe.count(ids, &self.sender.client).await {
                Ok(n) if n > 0 || Instant::now() > deadline => break,
                Ok(_) => tokio::time::sleep(Duration::from_millis(200)).await,
                Err(e) => {
                    proof.fail(format!("probe failed: {e}"));
                    return None;
                }
            }
        }
        tokio::time::sleep(self.options().settle).await;
        match probe.count(ids, &self.sender.client).await {
            Ok(n) => {
                proof.evidence.push(format!(
                    "{}: {n} {}{} (order {})",
                    ids.invoice_id,
                    probe.describe(),
                    if n == 1 { "" } else { "s" },
                    ids.order_id
                ));
                Some(n)
            }
            Err(e) => {
                proof.fail(format!("probe failed: {e}"));
                None
            }
        }
    }

    /// Expects exactly one row.
    async fn one_row(&self, ids: &Ids, events: &[String], proof: &mut Proof) {
        if let Some(n) = self.rows(ids, events, proof).await
            && n != 1
        {
            proof.fail(format!(
                "{}: {n} rows, expected exactly 1 ({})",
                ids.invoice_id,
                if n == 0 {
                    "a 2xx was given but nothing was shipped: lost"
                } else {
                    "shipped more than once"
                }
            ));
        }
    }

    fn ids(invoice: &str, event_id: &str) -> Ids {
        Ids {
            invoice_id: invoice.to_owned(),
            order_id: format!("order-{invoice}"),
            event_id: event_id.to_owned(),
        }
    }

    fn acknowledged(attempts: &[Attempt], proof: &mut Proof) -> bool {
        proof.evidence.extend(attempts.iter().map(show));
        let acked = attempts.last().is_some_and(ok);
        if !acked {
            proof.fail("the delivery was never acknowledged with a 2xx");
        }
        acked
    }
}

/// Runs the six steps against `options.url`.
pub async fn run(options: CheckOptions) -> Vec<StepVerdict> {
    let secret = options.secret.clone();
    let rotation = [options.secret.clone(), options.wrong_secret.clone()];
    let checker = Checker {
        sender: Sender {
            client: reqwest::Client::new(),
            options,
        },
    };
    let mut run = Run {
        checker: &checker,
        secret,
        rotation,
        acknowledged: Vec::new(),
    };
    let (one, first) = run.one_delivery().await;
    let two = run.again(&first).await;
    let three = run.collisions().await;
    let four = run.made_right_by_hand().await;
    let five = run.against_the_source().await;
    let six = run.another_project(&first).await;
    vec![one, two, three, four, five, six]
}

/// The first paid event of step 1: what step 2 sends again.
struct First {
    ids: Ids,
    body: String,
}

/// One run of the steps: the secrets, and every invoice acknowledged so far (what step 5
/// checks when no API stands in for Paymos' paid list).
struct Run<'c> {
    checker: &'c Checker,
    secret: WebhookSecret,
    rotation: [WebhookSecret; 2],
    acknowledged: Vec<Ids>,
}

impl Run<'_> {
    fn secret(&self) -> &[WebhookSecret] {
        std::slice::from_ref(&self.secret)
    }

    /// 1. One delivery: the advisory `confirming` first (a receiver deduplicating by resource
    ///    id drops the `paid` after it), then `paid` during a secret rotation (the valid v1
    ///    first).
    async fn one_delivery(&mut self) -> (StepVerdict, First) {
        let (checker, sender) = (self.checker, &self.checker.sender);
        let mut proof = Proof::new(1, "one delivery ships the order once");
        let invoice = format!("inv_check_{}", &new_event_id()[4..]);
        let confirming = new_event_id();
        let attempts = sender
            .until_answered(
                &confirming,
                &sender.body(&confirming, "invoice.confirming", &invoice),
                self.secret(),
            )
            .await;
        proof
            .evidence
            .extend(attempts.iter().map(|a| format!("confirming {}", show(a))));
        let first = new_event_id();
        let body = sender.body(&first, "invoice.paid", &invoice);
        let attempts = sender.until_answered(&first, &body, &self.rotation).await;
        let ids = Checker::ids(&invoice, &first);
        if Checker::acknowledged(&attempts, &mut proof) {
            self.acknowledged.push(ids.clone());
            checker
                .one_row(&ids, &[confirming, first], &mut proof)
                .await;
        }
        (proof.done(), First { ids, body })
    }

    /// 2. The same event again (a retry, re-signed), and the same payment from a second
    ///    endpoint (another event id, same invoice).
    async fn again(&self, first: &First) -> StepVerdict {
        let (checker, sender) = (self.checker, &self.checker.sender);
        let mut proof = Proof::new(
            2,
            "the same event again, or from a second endpoint, ships nothing more",
        );
        let event_id = &first.ids.event_id;
        let again = sender
            .until_answered(event_id, &first.body, self.secret())
            .await;
        let acked_again = Checker::acknowledged(&again, &mut proof);
        let second_endpoint = new_event_id();
        let other = sender
            .until_answered(
                &second_endpoint,
                &sender.body(&second_endpoint, "invoice.paid", &first.ids.invoice_id),
                self.secret(),
            )
            .await;
        proof
            .evidence
            .extend(other.iter().map(|a| format!("second endpoint {}", show(a))));
        if !other.last().is_some_and(ok) {
            proof.fail("the second endpoint's event was never acknowledged with a 2xx");
        }
        if acked_again {
            checker
                .one_row(&first.ids, &[event_id.clone(), second_endpoint], &mut proof)
                .await;
        }
        proof.done()
    }

    /// 3. Collisions: copies of one new event at once, then retries until answered.
    async fn collisions(&mut self) -> StepVerdict {
        let (checker, sender) = (self.checker, &self.checker.sender);
        let mut proof = Proof::new(3, "colliding attempts ship once");
        let invoice = format!("inv_check_{}", &new_event_id()[4..]);
        let collide = new_event_id();
        let body = sender.body(&collide, "invoice.paid", &invoice);
        let started = Instant::now();
        let copies = futures::future::join_all(
            (0..checker.options().collisions.max(2))
                .map(|i| sender.once(&collide, &body, self.secret(), i + 1)),
        )
        .await;
        proof.evidence.extend(copies.iter().map(show));
        proof.evidence.insert(
            0,
            how_they_collided(&copies, started.elapsed(), checker.options().timeout),
        );
        if !copies
            .iter()
            .all(|a| ok(a) || a.status == 503 || a.status == 0)
        {
            proof.fail("a colliding copy got an answer other than 2xx, 503 or a timeout");
        }
        let retry = sender.until_answered(&collide, &body, self.secret()).await;
        proof
            .evidence
            .extend(retry.iter().map(|a| format!("retry {}", show(a))));
        let ids = Checker::ids(&invoice, &collide);
        if copies.iter().chain(&retry).any(ok) {
            self.acknowledged.push(ids.clone());
            checker
                .one_row(&ids, std::slice::from_ref(&collide), &mut proof)
                .await;
        } else {
            proof.fail("no copy was ever acknowledged with a 2xx");
        }
        proof.done()
    }

    /// 4. Broken, made right by hand, replayed.
    async fn made_right_by_hand(&mut self) -> StepVerdict {
        let (checker, sender) = (self.checker, &self.checker.sender);
        let mut proof = Proof::new(
            4,
            "an event that failed, replayed after the order was made right by hand, ships nothing more",
        );
        let invoice = format!("inv_check_{}", &new_event_id()[4..]);
        let failed = new_event_id();
        let body = sender.body(&failed, "invoice.paid", &invoice);
        let wrong = std::slice::from_ref(&checker.options().wrong_secret);
        let refused = sender.once(&failed, &body, wrong, 1).await;
        proof
            .evidence
            .push(format!("while broken: {}", show(&refused)));
        if ok(&refused) {
            proof.fail(
                "a delivery signed with a secret the receiver does not hold was acknowledged",
            );
        }
        let ids = Checker::ids(&invoice, &failed);
        checker.mark_paid(&ids, &mut proof).await;
        let replay = sender.until_answered(&failed, &body, self.secret()).await;
        proof
            .evidence
            .extend(replay.iter().map(|a| format!("replay {}", show(a))));
        if replay.last().is_some_and(ok) {
            self.acknowledged.push(ids.clone());
            checker
                .one_row(&ids, std::slice::from_ref(&failed), &mut proof)
                .await;
        } else {
            proof.fail("the replay was never acknowledged with a 2xx");
        }
        proof.done()
    }

    /// 5. The receiver against the source: Paymos' paid list with an API key, else every
    ///    invoice this run had acknowledged.
    /// 6. Another project's payment of an order with the same id as step 1's: order ids are
    ///    unique only within a project, and a stack applies only its own projects.
    async fn another_project(&self, first: &First) -> StepVerdict {
        let (checker, sender) = (self.checker, &self.checker.sender);
        let mut proof = Proof::new(6, "another project's payment ships nothing here");
        let invoice = format!("inv_check_{}", &new_event_id()[4..]);
        let event_id = new_event_id();
        let now = paymos_inbox_lambda::now_ms() / 1000;
        let mut data = data_for("invoice.paid", &invoice, !checker.options().live, now, None);
        data["project_id"] = serde_json::Value::from(OTHER_PROJECT);
        data["order"]["external_id"] = serde_json::Value::from(first.ids.order_id.as_str());
        let body = envelope(&event_id, "invoice.paid", now, &data);
        let attempts = sender.until_answered(&event_id, &body, self.secret()).await;
        if !Checker::acknowledged(&attempts, &mut proof) {
            return proof.done();
        }
        let ids = Ids {
            invoice_id: invoice,
            order_id: first.ids.order_id.clone(),
            event_id: event_id.clone(),
        };
        match &checker.options().probe {
            None => proof.unproven(NO_PROBE),
            Some(Probe::Tables(t)) => {
                let environment =
                    Environment::from_secret_prefix(checker.options().secret.expose());
                t.settle(
                    std::slice::from_ref(&event_id),
                    environment,
                    checker.options().patience,
                    &mut proof.evidence,
                )
                .await;
                match t.ledger(environment, &event_id).await {
                    Ok(Some((_, outcome))) if outcome == "other_project" => proof
                        .evidence
                        .push(format!("{event_id}: other_project, nothing applied")),
                    Ok(Some((_, outcome))) => proof.unproven(&format!(
                        "{event_id} of project {OTHER_PROJECT} ended {outcome:?}: this receiver applies every project (no PaymosProjectIds, or `dev` without --project), so it cannot show that another project's payment ships nothing"
                    )),
                    Ok(None) => proof.fail(format!("{event_id}: acknowledged, never recorded")),
                    Err(e) => proof.fail(format!("probe failed: {e}")),
                }
            }
            Some(probe) => {
                tokio::time::sleep(checker.options().settle).await;
                match probe.count(&ids, &sender.client).await {
                    Ok(0) => proof
                        .evidence
                        .push(format!("{}: 0 rows", ids.invoice_id)),
                    Ok(n) => proof.fail(format!(
                        "{}: {n} rows for a payment of project {OTHER_PROJECT}: another shop's order {} was shipped here",
                        ids.invoice_id, ids.order_id
                    )),
                    Err(e) => proof.fail(format!("probe failed: {e}")),
                }
            }
        }
        // Step 1's order, of this receiver's own project, still has its one row.
        checker.one_row(&first.ids, &[], &mut proof).await;
        proof.done()
    }

    async fn against_the_source(&self) -> StepVerdict {
        let (checker, sender) = (self.checker, &self.checker.sender);
        let mut proof = Proof::new(5, "the receiver's rows match what was paid");
        match (&checker.options().api, &checker.options().probe) {
            (_, None) => proof.unproven(NO_PROBE),
            (Some((api, since)), Some(probe)) => {
                against_api(api, *since, probe, &sender.client, &mut proof).await;
            }
            (None, Some(probe)) => {
                proof.evidence.push(format!(
                    "{} acknowledged in this run; without API credentials (--api-key/--api-secret) they stand in for Paymos' paid list",
                    crate::counted(self.acknowledged.len(), "invoice")
                ));
                for ids in &self.acknowledged {
                    match probe.count(ids, &sender.client).await {
                        Ok(1) => proof.evidence.push(format!("{}: 1 row", ids.invoice_id)),
                        Ok(0) => proof.fail(format!(
                            "MISSING {}: acknowledged, no row (lost after the 2xx)",
                            ids.invoice_id
                        )),
                        Ok(n) => proof.fail(format!(
                            "DOUBLE {}: {n} rows (a key problem: rows keyed by something other than the order)",
                            ids.invoice_id
                        )),
                        Err(e) => proof.fail(format!("probe failed: {e}")),
                    }
                }
            }
        }
        proof.done()
    }
}

/// How step 3's copies met the receiver: held past the sender's timeout, or all answered.
fn how_they_collided(copies: &[Attempt], spread: Duration, timeout: Duration) -> String {
    if copies.iter().any(|a| a.status == 0) {
        format!(
            "how: {} copies at once; the receiver was still working past the sender's {timeout:?} timeout, so the retries below arrived while the first attempt ran",
            copies.len(),
        )
    } else {
        format!(
            "how: {} concurrent copies, all answered within {} ms; the receiver could not be held past the sender's timeout (with paymos-inbox, `dev --slow 11` does that)",
            copies.len(),
            spread.as_millis()
        )
    }
}

impl Checker {
    /// Step 4's hand: the mark-paid hook, then exactly one row.
    async fn mark_paid(&self, ids: &Ids, proof: &mut Proof) {
        match &self.options().mark_paid {
            Some(hook) => match hook
                .apply(ids, &self.options().project, &self.sender.client)
                .await
            {
                Ok(done) => {
                    proof.evidence.push(format!("by hand: {done}"));
                    if let Some(n) = self.rows(ids, &[], proof).await
                        && n != 1
                    {
                        proof.fail(format!(
                            "after marking it paid by hand the receiver holds {n} rows, expected 1 (the hook did not ship it, or shipped it twice)"
                        ));
                    }
                }
                Err(e) => proof.fail(format!("the mark-paid hook failed: {e}")),
            },
            None => proof.unproven(
                "nothing made the order right by hand: give --mark-paid-cmd or --mark-paid-url (or the receiver's tables)",
            ),
        }
    }
}

/// Step 5 with credentials: every invoice Paymos lists as paid since `since` has exactly one row.
async fn against_api(
    api: &paymos::PaymosClient,
    since: Duration,
    probe: &Probe,
    client: &reqwest::Client,
    proof: &mut Proof,
) {
    let now = i64::try_from(paymos_inbox_lambda::now_ms() / 1000).unwrap_or(i64::MAX);
    let from = now - i64::try_from(since.as_secs()).unwrap_or(0);
    let params = paymos::InvoiceListParams {
        status: Some(vec![
            paymos::InvoiceStatus::Paid,
            paymos::InvoiceStatus::PaidOver,
        ]),
        created_from: Some(from),
        created_to: Some(now),
        limit: Some(100),
        ..paymos::InvoiceListParams::default()
    };
    // Every page: the crate's default bound (100 pages) would end the listing quietly.
    let mut pager = match api.invoices().pager(params, Some(usize::MAX)) {
        Ok(p) => p,
        Err(e) => return proof.fail(format!("Paymos API: {e}")),
    };
    let (mut listed, mut matched) = (0, 0);
    loop {
        let item = match pager.next().await {
            Ok(Some(item)) => item,
            Ok(None) => break,
            Err(e) => return proof.fail(format!("Paymos API: {e}")),
        };
        listed += 1;
        let ids = Ids {
            invoice_id: item.invoice_id.clone(),
            order_id: item.external_order_id.clone(),
            event_id: String::new(),
        };
        match probe.count(&ids, client).await {
            Ok(1) => matched += 1,
            Ok(0) => proof.fail(format!(
                "MISSING {} (order {}): paid at Paymos, no row here: a subscription, firewall or secret problem",
                ids.invoice_id, ids.order_id
            )),
            Ok(n) => proof.fail(format!(
                "DOUBLE {} (order {}): {n} rows: a key problem",
                ids.invoice_id, ids.order_id
            )),
            Err(e) => return proof.fail(format!("probe failed: {e}")),
        }
    }
    proof.evidence.insert(
        0,
        format!("Paymos lists {listed} paid invoices since {from}; {matched} have exactly one row"),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_read_from_the_usual_outputs() {
        assert_eq!(parse_count("1\n"), Some(1));
        assert_eq!(parse_count("   count\n-------\n     2\n"), Some(2));
        assert_eq!(parse_count(r#"{"count": 3}"#), Some(3));
        assert_eq!(parse_count(r#"{"Count": 1, "ScannedCount": 9}"#), Some(1));
        assert_eq!(parse_count("0"), Some(0));
        assert_eq!(parse_count("yes"), None);
        assert_eq!(parse_count(r#"{"rows": []}"#), None);
    }

    #[test]
    fn placeholders_are_filled() {
        let ids = Ids {
            invoice_id: "inv_1".into(),
            order_id: "order-inv_1".into(),
            event_id: "evt_1".into(),
        };
        assert_eq!(
            ids.fill("q {invoice_id} {order_id} {event_id} {invoice_id}"),
            "q inv_1 order-inv_1 evt_1 inv_1"
        );
    }
}
