//! `paymos-inbox soak`: a simulated Paymos sends thousands of deliveries through the local
//! pipeline while faults are injected into every DynamoDB and SQS call of ingest and fulfil,
//! then checks the two numbers this project promises: nothing lost, nothing doubled.

mod plan;
mod verify;

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::json;

use crate::faults::{Faults, Faulty};
use crate::tools::send::{SENDER_TIMEOUT, post};
use paymos_inbox_core::roads::fulfil::Fulfil;
use paymos_inbox_core::roads::ingest::{Ingest, IngestSettings};
use paymos_inbox_core::wire::signature::{SigningKey, Verifier, WebhookSecret};
use paymos_inbox_lambda::fulfil::QueueVisibility;
use paymos_inbox_local::dev::{clients, run_poller, serve_ingest};
use paymos_inbox_local::pipeline::Pipeline;
use paymos_inbox_local::redrive::redrive;
use paymos_inbox_local::template;
use plan::plan;
use verify::verify;

const SECRET: &str = "whsec_live_paymos_inbox_soak";
const RETIRED: &str = "whsec_live_paymos_inbox_soak_retired";
/// The sandbox secret the same endpoint holds: what it signs must never move live state.
const SANDBOX: &str = "whsec_test_paymos_inbox_soak";
/// Valid JSON a strict decoder into `Value` refuses, and characters SQS refuses: inserted into
/// some bodies' `data`.
const HOSTILE_FIELDS: &str =
    "\"note\":\"cut \\ud83d\",\"fee\":1e400,\"memo\":\"x\u{ffff}\u{fffe}y\",";

/// How to run a soak.
#[derive(Debug, Clone)]
pub struct SoakOptions {
    /// DynamoDB endpoint (an emulator).
    pub dynamodb_endpoint: String,
    /// SQS endpoint (an emulator).
    pub sqs_endpoint: String,
    /// How many distinct deliveries (event ids) to plan, at least.
    pub deliveries: usize,
    /// Share of port calls that fail (half before the call, half with the reply lost).
    pub fail_rate: f64,
    /// Share of port calls that crash the invocation.
    pub crash_rate: f64,
    /// Deliveries in flight at once.
    pub concurrency: usize,
    /// Seed of every random choice.
    pub seed: u64,
    /// Where the run counts what it has done so far, for a progress line.
    pub progress: Arc<SoakProgress>,
}

/// What a running soak has done so far: read while it runs (a progress line), counted
/// instead of logged.
#[derive(Debug, Default)]
pub struct SoakProgress {
    /// Deliveries planned (known once the plan is made).
    pub planned: std::sync::atomic::AtomicUsize,
    /// Deliveries the receiver acknowledged with a 2xx.
    pub acknowledged: std::sync::atomic::AtomicUsize,
    /// HTTP attempts so far.
    pub attempts: AtomicU64,
    faults: std::sync::OnceLock<Arc<Faults>>,
}

impl SoakProgress {
    /// Faults injected so far (failed calls, lost replies, crashes).
    pub fn injected(&self) -> u64 {
        self.faults.get().map_or(0, |f| {
            f.failed.load(Ordering::Relaxed)
                + f.lost_replies.load(Ordering::Relaxed)
                + f.crashes.load(Ordering::Relaxed)
        })
    }

    /// One line: acknowledged of planned, attempts, faults injected.
    pub fn line(&self) -> String {
        format!(
            "{}/{} deliveries acknowledged, {} attempts, {} faults injected",
            self.acknowledged.load(Ordering::Relaxed),
            self.planned.load(Ordering::Relaxed),
            self.attempts.load(Ordering::Relaxed),
            self.injected()
        )
    }
}

/// What the soak did and found.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct SoakReport {
    /// Distinct deliveries (event ids) planned.
    pub deliveries: usize,
    /// Sends including duplicates, collisions and replays.
    pub sends: usize,
    /// HTTP attempts in all.
    pub attempts: u64,
    /// Sends that collided with another copy in flight.
    pub collisions: usize,
    /// Payments fanned out to two endpoints.
    pub two_endpoint_payments: usize,
    /// Calls through the fault wrappers.
    pub port_calls: u64,
    /// Calls failed before the service.
    pub injected_failures: u64,
    /// Calls whose reply was lost.
    pub injected_lost_replies: u64,
    /// Invocations crashed.
    pub injected_crashes: u64,
    /// Sandbox-signed deliveries for live resources (each must end `other_environment`).
    pub sandbox_signed: usize,
    /// Of those, deliveries reusing a live paid event's id (the live one must still apply).
    pub sandbox_reused: usize,
    /// Bodies with a lone surrogate, a number beyond f64 and U+FFFF/U+FFFE.
    pub hostile_bodies: usize,
    /// Second paid invoices for an order already paid (each pair must fulfil once).
    pub second_invoices: usize,
    /// Paid events without `data.order` (as the official `ton_invoice` vectors): the order
    /// comes from the invoice's record.
    pub silent_payments: usize,
    /// Of those, payments applied before any event named their order: recorded
    /// `order_unknown` for a person, nothing shipped.
    pub order_unknown: usize,
    /// Refunds of paid invoices (`overpayment` and `full`), some applied before the payment.
    pub refunds: usize,
    /// Payments applied after their full refund: recorded `refunded`, never shipped.
    pub refunded_first: usize,
    /// Deliveries whose sender gave up after its first failed attempt.
    pub given_up: usize,
    /// Of those, records the sweep had to send again.
    pub swept: usize,
    /// Messages found in the DLQ (each after maxReceiveCount failed receives under faults),
    /// then redriven.
    pub dlq_redriven: usize,
    /// Acknowledged deliveries found recorded and processed.
    pub processed: usize,
    /// Invoices planned / fulfilled exactly once / expected to be fulfilled.
    pub invoices: usize,
    /// Invoices fulfilled (exactly once each).
    pub fulfilled: usize,
    /// Deposits credited (exactly once each).
    pub credited: usize,
    /// Payers whose balance was checked against the exact decimal sum.
    pub balances_checked: usize,
    /// Seconds the run took.
    pub seconds: f64,
    /// Every violated invariant (empty: the run passed).
    pub violations: Vec<String>,
}

/// The planned end state of one resource.
#[derive(Debug, Clone)]
pub(crate) enum Expect {
    Invoice {
        final_status: &'static str,
        paid_events: Vec<String>,
        /// The other invoice of the same order, when the order was paid twice.
        pair: Option<String>,
        /// Its paid events leave the order out: applied before any event named the order,
        /// the payment waits for it (`order_unknown`) instead of shipping.
        silent: bool,
        /// Refunded in full: applied before the payment, it keeps it from shipping.
        refunded_in_full: bool,
    },
    Withdrawal {
        final_status: &'static str,
    },
    Deposit {
        payer: String,
        net_cents: u64,
    },
}

#[derive(Debug, Clone)]
struct Send {
    event_id: String,
    body: String,
    rotation: bool,
    /// Signed with the sandbox secret.
    sandbox: bool,
    /// The sender gives up after the first failed attempt (its final state must not depend
    /// on it, so only advisory events do).
    gives_up: bool,
}

impl Send {
    fn new(event_id: String, body: String) -> Self {
        Self {
            event_id,
            body,
            rotation: false,
            sandbox: false,
            gives_up: false,
        }
    }
}

/// What the plan holds besides the resources and their sends.
#[derive(Debug, Default)]
struct Planned {
    two_endpoints: usize,
    sandbox_signed: usize,
    sandbox_reused: usize,
    hostile: usize,
    second_invoices: usize,
    silent: usize,
    refunds: usize,
}

fn hostile(body: &str) -> String {
    body.replacen("\"data\":{", &format!("\"data\":{{{HOSTILE_FIELDS}"), 1)
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn chance(&mut self, p: f64) -> bool {
        #[allow(clippy::cast_precision_loss)]
        let x = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        x < p
    }
}

fn body(event_id: &str, event_type: &str, at: u64, data: &serde_json::Value) -> String {
    json!({"event_id": event_id, "event_type": event_type, "version": 1, "occurred_at": at, "data": data}).to_string()
}

/// The pipeline a soak drives: tables and queues of its own, ingest behind a loopback URL and
/// two fulfil pollers, every port behind the same fault injection.
struct Rig {
    dynamodb: aws_sdk_dynamodb::Client,
    sqs: aws_sdk_sqs::Client,
    created: template::Created,
    pipeline: Pipeline,
    faults: Arc<Faults>,
    url: String,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Rig {
    async fn start(options: &SoakOptions) -> Result<Self, String> {
        let (dynamodb, sqs) = clients(&options.dynamodb_endpoint, &options.sqs_endpoint).await;
        let prefix = format!("soak-{:x}-{}", options.seed, std::process::id());
        let created = template::create_all(&dynamodb, &sqs, &prefix).await?;
        let queue = created.queue("WorkQueue").to_owned();
        // Redeliveries within the run: a 2 s visibility timeout instead of the template's 180 s.
        sqs.set_queue_attributes()
            .queue_url(&queue)
            .attributes(
                aws_sdk_sqs::types::QueueAttributeName::VisibilityTimeout,
                "2",
            )
            .send()
            .await
            .map_err(|e| aws_sdk_sqs::error::DisplayErrorContext(e).to_string())?;
        let faults = Faults::new(
            options.fail_rate,
            options.crash_rate,
            options.seed ^ 0x9e37_79b9_7f4a_7c15,
        );
        let _ = options.progress.faults.set(faults.clone());
        let pipeline = Pipeline::on(&created, &dynamodb, &sqs);
        let ingest = Arc::new(Ingest::new(
            Verifier::new(
                vec![
                    SigningKey::new("live", &WebhookSecret::new(SECRET)),
                    SigningKey::new("test", &WebhookSecret::new(SANDBOX)),
                ],
                300,
            ),
            Faulty::new(pipeline.ledger.clone(), faults.clone()),
            Faulty::new(pipeline.queue.clone(), faults.clone()),
            // Compressed as the sweep is: a lease of a second, each check due a second later.
            IngestSettings {
                lease_secs: 1,
                check_after_secs: 1,
                ..IngestSettings::default()
            },
        ));
        // One project: the soak's deliveries name none, each that project's (a stack listing
        // none would hold them for their project).
        let fulfil = Arc::new(
            Fulfil::new(Faulty::new(pipeline.resources.clone(), faults.clone())).for_projects(
                paymos_inbox_core::money::change::Projects::parse("prj_soak"),
            ),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| e.to_string())?;
        let url = format!(
            "http://{}/",
            listener.local_addr().map_err(|e| e.to_string())?
        );
        // A crashed invocation ends at the function timeout; a crashed batch likewise.
        let mut tasks = vec![serve_ingest(
            listener,
            ingest,
            None,
            Some(Duration::from_millis(400)),
        )];
        for _ in 0..2 {
            // The queue's 2 s visibility, not fulfil's backoff: every fault comes back in the run.
            let poller = run_poller(
                (sqs.clone(), queue.clone(), QueueVisibility),
                fulfil.clone(),
                10,
                Some(Duration::from_secs(1)),
            );
            tasks.push(poller);
        }
        Ok(Self {
            dynamodb,
            sqs,
            created,
            pipeline,
            faults,
            url,
            tasks,
        })
    }

    /// Faults off; lets fulfil drain, redriving the DLQ and running the sweep until every
    /// record is processed. Returns how many messages were redriven and how many swept.
    async fn drain(&self) -> Result<(usize, usize), String> {
        self.faults.set_enabled(false);
        let (queue, dlq) = (
            self.created.queue("WorkQueue"),
            self.created.queue("DeadLetterQueue"),
        );
        let (ledger, sweep_queue) = (&self.pipeline.ledger, &self.pipeline.queue);
        let redriven = std::cell::Cell::new(0);
        let swept = std::cell::Cell::new(0);
        ledger
            .wait_until_processed(Duration::from_secs(180), || async {
                let moved = redrive(&self.sqs, dlq, queue, 10_000).await?;
                redriven.set(redriven.get() + moved.moved());
                // The scheduled sweep, compressed: anything still `received` past its lease.
                let now = paymos_inbox_lambda::now_ms();
                let resent = paymos_inbox_core::roads::sweep::resend_stranded(
                    ledger,
                    sweep_queue,
                    1,
                    now,
                    now,
                    1000,
                )
                .await?;
                swept.set(swept.get() + resent.resent);
                Ok(())
            })
            .await
            .map_err(|e| e.to_string())?;
        for task in &self.tasks {
            task.abort();
        }
        Ok((redriven.get(), swept.get()))
    }
}

/// The order Paymos sends in: every delivery shuffled (out of order within every resource),
/// ~30 % sent again (half colliding with the first, half replayed after everything else), some
/// signed with a retired secret beside the current one.
struct Schedule {
    sends: Vec<Send>,
    replays: Vec<Send>,
    collisions: usize,
    copies: usize,
}

impl Schedule {
    fn of(mut sends: Vec<Send>, rng: &mut Rng) -> Self {
        let mut copies = Vec::new();
        let mut collisions = 0;
        for s in &sends {
            if rng.chance(0.3) {
                let mut copy = s.clone();
                copy.rotation = rng.chance(0.5);
                let collide = rng.chance(0.5);
                collisions += usize::from(collide);
                copies.push((copy, collide));
            }
        }
        for s in &mut sends {
            s.rotation = rng.chance(0.2);
        }
        for i in (1..sends.len()).rev() {
            let j = usize::try_from(rng.below(i as u64 + 1)).unwrap_or(0);
            sends.swap(i, j);
        }
        let mut ordered = Vec::with_capacity(sends.len() + copies.len());
        for s in sends {
            let collision = copies
                .iter()
                .find(|(c, collide)| *collide && c.event_id == s.event_id)
                .map(|(c, _)| c.clone());
            ordered.push(s);
            ordered.extend(collision);
        }
        let replays = copies
            .iter()
            .filter(|(_, collide)| !collide)
            .map(|(s, _)| s.clone())
            .collect();
        Self {
            sends: ordered,
            replays,
            collisions,
            copies: copies.len(),
        }
    }
}

/// A simulated Paymos on `url`: each delivery retried on its ladder until a 2xx (or until its
/// sender gives up), `concurrency` at a time.
struct Sender {
    client: reqwest::Client,
    url: String,
    attempts: AtomicU64,
    acknowledged: std::sync::Mutex<HashSet<String>>,
    progress: Arc<SoakProgress>,
}

impl Sender {
    fn new(url: &str, concurrency: usize, progress: Arc<SoakProgress>) -> Result<Self, String> {
        Ok(Self {
            client: reqwest::Client::builder()
                .pool_max_idle_per_host(concurrency)
                .build()
                .map_err(|e| e.to_string())?,
            url: url.to_owned(),
            attempts: AtomicU64::new(0),
            acknowledged: std::sync::Mutex::default(),
            progress,
        })
    }

    async fn send_all(&self, sends: Vec<Send>, concurrency: usize) {
        futures::stream::iter(sends.into_iter().map(|s| self.deliver(s)))
            .buffer_unordered(concurrency)
            .collect::<Vec<()>>()
            .await;
    }

    async fn deliver(&self, s: Send) {
        let keys = if s.sandbox {
            vec![WebhookSecret::new(SANDBOX)]
        } else if s.rotation {
            vec![WebhookSecret::new(RETIRED), WebhookSecret::new(SECRET)]
        } else {
            vec![WebhookSecret::new(SECRET)]
        };
        // Paymos' ladder, compressed: 1 min → 20 ms, doubling, capped at 640 ms; past the 11th
        // attempt the event "fails" and an operator replays it, so it goes on.
        let mut gap = Duration::from_millis(20);
        loop {
            self.attempts.fetch_add(1, Ordering::Relaxed);
            self.progress.attempts.fetch_add(1, Ordering::Relaxed);
            let now = paymos_inbox_lambda::now_ms() / 1000;
            let a = post(
                &self.client,
                &self.url,
                &s.event_id,
                &s.body,
                &keys,
                now,
                1,
                SENDER_TIMEOUT,
            )
            .await;
            if (200..300).contains(&a.status) {
                let mut acknowledged = self.acknowledged.lock().expect("lock");
                if acknowledged.insert(s.event_id.clone()) {
                    self.progress.acknowledged.fetch_add(1, Ordering::Relaxed);
                }
                return;
            }
            if s.gives_up {
                // This sender stops here: if the attempt recorded the delivery before it died,
                // only the sweep will ever send it again.
                return;
            }
            tokio::time::sleep(gap).await;
            gap = (gap * 2).min(Duration::from_millis(640));
        }
    }
}

/// Runs a soak; the report's `violations` is empty when nothing was lost or doubled.
///
/// # Errors
/// When the pipeline cannot be set up (emulators, tables).
pub async fn run(options: SoakOptions) -> Result<SoakReport, String> {
    let started = Instant::now();
    let mut rng = Rng(options.seed | 1);
    let rig = Rig::start(&options).await?;
    let (expect, sends, planned) = plan(options.deliveries, &mut rng, options.seed);
    let deliveries = sends.len();
    options
        .progress
        .planned
        .store(deliveries, Ordering::Relaxed);
    let sandbox_ids: Vec<String> = sends
        .iter()
        .filter(|s| s.sandbox)
        .map(|s| s.event_id.clone())
        .collect();
    let given_up = sends.iter().filter(|s| s.gives_up).count();
    let schedule = Schedule::of(sends, &mut rng);
    let sender = Sender::new(&rig.url, options.concurrency, options.progress.clone())?;
    sender.send_all(schedule.sends, options.concurrency).await;
    sender.send_all(schedule.replays, options.concurrency).await;
    let (dlq_redriven, swept) = rig.drain().await?;
    let faults = &rig.faults;
    let mut report = SoakReport {
        deliveries,
        sends: deliveries + schedule.copies,
        attempts: sender.attempts.load(Ordering::Relaxed),
        collisions: schedule.collisions,
        two_endpoint_payments: planned.two_endpoints,
        sandbox_signed: planned.sandbox_signed,
        sandbox_reused: planned.sandbox_reused,
        hostile_bodies: planned.hostile,
        second_invoices: planned.second_invoices,
        silent_payments: planned.silent,
        order_unknown: 0,
        refunded_first: 0,
        refunds: planned.refunds,
        given_up,
        swept,
        port_calls: faults.calls.load(Ordering::Relaxed),
        injected_failures: faults.failed.load(Ordering::Relaxed),
        injected_lost_replies: faults.lost_replies.load(Ordering::Relaxed),
        injected_crashes: faults.crashes.load(Ordering::Relaxed),
        dlq_redriven,
        ..SoakReport::default()
    };
    let acknowledged = sender.acknowledged.lock().expect("lock").clone();
    verify(
        &rig.dynamodb,
        &rig.created,
        &expect,
        &acknowledged,
        &sandbox_ids,
        &mut report,
    )
    .await?;
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}
