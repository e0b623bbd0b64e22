//! `paymos-inbox soak`: a simulated Paymos sends thousands of deliveries through the local
//! pipeline while faults are injected into every DynamoDB and SQS call of ingest and fulfil,
//! then checks the two numbers this project promises: nothing lost, nothing doubled.

mod verify;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::json;

use crate::faults::{Faults, Faulty};
use crate::local::dev::{clients, run_poller, serve_ingest};
use crate::local::pipeline::Pipeline;
use crate::local::redrive::redrive;
use crate::local::template;
use crate::tools::send::{SENDER_TIMEOUT, post};
use paymos_inbox_core::fulfil::Fulfil;
use paymos_inbox_core::ingest::{Ingest, IngestSettings};
use paymos_inbox_core::signature::{SigningKey, Verifier, WebhookSecret};
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
    /// Bodies with a lone surrogate, a number beyond f64 and U+FFFF/U+FFFE.
    pub hostile_bodies: usize,
    /// Second paid invoices for an order already paid (each pair must fulfil once).
    pub second_invoices: usize,
    /// Paid events without `data.order` (as the official `ton_invoice` vectors): the order
    /// comes from the invoice's record.
    pub silent_payments: usize,
    /// Partial refunds of paid invoices, some applied before the payment.
    pub refunds: usize,
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

/// Plans resources and their deliveries until `n` deliveries exist.
#[allow(clippy::too_many_lines)]
fn plan(n: usize, rng: &mut Rng, run: u64) -> (BTreeMap<String, Expect>, Vec<Send>, Planned) {
    let mut expect = BTreeMap::new();
    let mut sends = Vec::new();
    let mut planned = Planned::default();
    let mut next = 0u64;
    let mut id = |rng: &mut Rng| {
        next += 1;
        format!("evt_soak_{run:x}_{next}_{:x}", rng.below(1 << 20))
    };
    let t0 = 1_760_000_000;
    let mut r = 0;
    while sends.len() < n {
        r += 1;
        let kind = rng.below(10);
        if kind < 6 {
            let inv = format!("inv_soak_{run:x}_{r}");
            let order = format!("order-{inv}");
            let final_status = match rng.below(20) {
                0..=11 => "paid",
                12..=13 => "paid_over",
                14..=16 => "expired",
                17 => "cancelled",
                _ => "underpaid",
            };
            let data = |invoice: &str, status: &str| {
                json!({"invoice_id": invoice, "status": status, "is_test": false,
                "order": {"external_id": order, "amount": "25.00", "currency": "USDT"}})
            };
            // A second checkout for the order (paid too, fulfilled never twice), or a paid event
            // that leaves the order out. Not both: with neither event naming the order before
            // the payment, nothing anywhere could tell the two invoices belong together.
            let paid = final_status.starts_with("paid");
            let second_checkout = paid && rng.chance(0.05);
            let silent = paid && !second_checkout && rng.chance(0.3);
            planned.silent += usize::from(silent);
            for (i, status) in ["awaiting_payment", "confirming"].iter().enumerate() {
                let e = id(rng);
                let mut send = Send::new(
                    e.clone(),
                    body(
                        &e,
                        &format!("invoice.{status}"),
                        t0 + i as u64,
                        &data(&inv, status),
                    ),
                );
                send.gives_up = rng.chance(0.05);
                sends.push(send);
            }
            // A partial (overpayment) refund, in any order with the payment: the payment is
            // still fulfilled, the refund recorded beside it.
            if paid && rng.chance(0.05) {
                let wdr = format!("wdr_soak_{run:x}_{r}_refund");
                let e = id(rng);
                let refund = json!({"withdrawal_id": wdr, "status": "completed", "is_test": false,
                    "type": "refund", "mode": "overpayment", "invoice_id": inv,
                    "amount": "0.10", "currency": "USDT"});
                sends.push(Send::new(
                    e.clone(),
                    body(&e, "withdrawal.completed", t0 + 12, &refund),
                ));
                expect.insert(
                    wdr,
                    Expect::Withdrawal {
                        final_status: "completed",
                    },
                );
                planned.refunds += 1;
            }
            let mut paid_events = Vec::new();
            let endpoints = if final_status.starts_with("paid") && rng.chance(0.2) {
                2
            } else {
                1
            };
            planned.two_endpoints += usize::from(endpoints == 2);
            for _ in 0..endpoints {
                let e = id(rng);
                paid_events.push(e.clone());
                let paid_data = if silent {
                    json!({"invoice_id": inv, "status": final_status, "is_test": false,
                        "payment": {"network": "TON", "currency": "USDT", "expected": "25.00"}})
                } else {
                    data(&inv, final_status)
                };
                let mut text = body(&e, &format!("invoice.{final_status}"), t0 + 10, &paid_data);
                if rng.chance(0.05) {
                    text = hostile(&text);
                    planned.hostile += 1;
                }
                sends.push(Send::new(e, text));
            }
            // A sandbox-signed paid event for this live invoice, claiming nothing (no is_test).
            if rng.chance(0.05) {
                let e = id(rng);
                let forged = json!({"invoice_id": inv, "status": "paid",
                    "order": {"external_id": order, "amount": "25.00", "currency": "USDT"}});
                let mut send = Send::new(e.clone(), body(&e, "invoice.paid", t0 + 5, &forged));
                send.sandbox = true;
                sends.push(send);
                planned.sandbox_signed += 1;
            }
            // A second checkout for an order that gets paid: paid too, fulfilled never twice.
            let pair = second_checkout.then(|| {
                let second = format!("{inv}_again");
                let e = id(rng);
                sends.push(Send::new(
                    e.clone(),
                    body(&e, "invoice.paid", t0 + 11, &data(&second, "paid")),
                ));
                planned.second_invoices += 1;
                expect.insert(
                    second.clone(),
                    Expect::Invoice {
                        final_status: "paid",
                        paid_events: vec![e],
                        pair: Some(inv.clone()),
                    },
                );
                second
            });
            expect.insert(
                inv,
                Expect::Invoice {
                    final_status,
                    paid_events,
                    pair,
                },
            );
        } else if kind < 8 {
            let wdr = format!("wdr_soak_{run:x}_{r}");
            let final_status = if rng.chance(0.8) {
                "completed"
            } else {
                "failed"
            };
            for (i, status) in ["created", "processing", final_status].iter().enumerate() {
                let e = id(rng);
                let data = json!({"withdrawal_id": wdr, "status": status, "is_test": false, "amount": "5.00", "currency": "USDT"});
                let mut send = Send::new(
                    e.clone(),
                    body(&e, &format!("withdrawal.{status}"), t0 + i as u64, &data),
                );
                send.gives_up = i < 2 && rng.chance(0.05);
                sends.push(send);
            }
            expect.insert(wdr, Expect::Withdrawal { final_status });
        } else {
            let pcd = format!("pcd_soak_{run:x}_{r}");
            let payer = format!("payer-{}", rng.below(40));
            let net_cents = 1 + rng.below(100_000);
            let net = format!("{}.{:02}", net_cents / 100, net_cents % 100);
            let mut statuses = vec!["confirming"];
            if rng.chance(0.3) {
                statuses.push("reorged");
            }
            statuses.push("confirmed");
            for (i, status) in statuses.iter().enumerate() {
                let e = id(rng);
                let data = json!({"id": pcd, "status": status, "is_final": *status == "confirmed", "is_test": false,
                    "payment_channel_external_id": payer, "currency": "USDT", "gross": net, "fee": "0", "net": net});
                let mut text = body(
                    &e,
                    &format!("payment_channel.deposit.{status}"),
                    t0 + i as u64,
                    &data,
                );
                if *status == "confirmed" && rng.chance(0.05) {
                    text = hostile(&text);
                    planned.hostile += 1;
                }
                let mut send = Send::new(e, text);
                send.gives_up = *status != "confirmed" && rng.chance(0.05);
                sends.push(send);
            }
            expect.insert(pcd, Expect::Deposit { payer, net_cents });
        }
    }
    (expect, sends, planned)
}

/// Runs a soak; the report's `violations` is empty when nothing was lost or doubled.
///
/// # Errors
/// When the pipeline cannot be set up (emulators, tables).
#[allow(clippy::too_many_lines)]
pub async fn run(options: SoakOptions) -> Result<SoakReport, String> {
    let started = Instant::now();
    let mut rng = Rng(options.seed | 1);
    let run_id = options.seed;
    let (dynamodb, sqs) = clients(&options.dynamodb_endpoint, &options.sqs_endpoint).await;
    let prefix = format!("soak-{run_id:x}-{}", std::process::id());
    let created = template::create_all(&dynamodb, &sqs, &prefix).await?;
    let queue = created.queue("WorkQueue").to_owned();
    let dlq = created.queue("DeadLetterQueue").to_owned();
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
    let pipeline = Pipeline::on(&created, &dynamodb, &sqs);
    let ledger = pipeline.ledger.clone();
    let ingest = Arc::new(Ingest::new(
        Verifier::new(
            vec![
                SigningKey::new("live", &WebhookSecret::new(SECRET)),
                SigningKey::new("test", &WebhookSecret::new(SANDBOX)),
            ],
            300,
        ),
        Faulty::new(ledger.clone(), faults.clone()),
        Faulty::new(pipeline.queue.clone(), faults.clone()),
        IngestSettings {
            lease_secs: 1,
            ..IngestSettings::default()
        },
    ));
    let fulfil = Arc::new(Fulfil::new(Faulty::new(
        pipeline.resources.clone(),
        faults.clone(),
    )));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let url = format!(
        "http://{}/",
        listener.local_addr().map_err(|e| e.to_string())?
    );
    // A crashed invocation ends at the function timeout; a crashed batch likewise.
    let server = serve_ingest(listener, ingest, None, Some(Duration::from_millis(400)));
    let pollers: Vec<_> = (0..2)
        .map(|_| {
            run_poller(
                sqs.clone(),
                queue.clone(),
                fulfil.clone(),
                10,
                Some(Duration::from_secs(1)),
            )
        })
        .collect();

    // The simulated Paymos: every delivery, ~30 % duplicates (half colliding, half replayed
    // later), out of order, some with a rotation header, each retried until a 2xx.
    let (expect, mut sends, planned) = plan(options.deliveries, &mut rng, run_id);
    let deliveries = sends.len();
    let sandbox_ids: Vec<String> = sends
        .iter()
        .filter(|s| s.sandbox)
        .map(|s| s.event_id.clone())
        .collect();
    let given_up = sends.iter().filter(|s| s.gives_up).count();
    let mut copies = Vec::new();
    let mut collisions = 0;
    for s in &sends {
        if rng.chance(0.3) {
            let mut copy = s.clone();
            copy.rotation = rng.chance(0.5);
            if rng.chance(0.5) {
                collisions += 1;
                copies.push((copy, true));
            } else {
                copies.push((copy, false));
            }
        }
    }
    for s in &mut sends {
        s.rotation = rng.chance(0.2);
    }
    // Shuffle: out-of-order within every resource.
    for i in (1..sends.len()).rev() {
        let j = usize::try_from(rng.below(i as u64 + 1)).unwrap_or(0);
        sends.swap(i, j);
    }
    let mut schedule: Vec<(Send, bool)> = Vec::with_capacity(sends.len() + copies.len());
    let replays: Vec<Send> = copies
        .iter()
        .filter(|(_, c)| !c)
        .map(|(s, _)| s.clone())
        .collect();
    for s in sends {
        schedule.push((s.clone(), false));
        if let Some((c, _)) = copies
            .iter()
            .find(|(c, collide)| *collide && c.event_id == s.event_id)
        {
            schedule.push((c.clone(), true));
        }
    }
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(options.concurrency)
        .build()
        .map_err(|e| e.to_string())?;
    let attempts = Arc::new(AtomicU64::new(0));
    let secret = WebhookSecret::new(SECRET);
    let retired = WebhookSecret::new(RETIRED);
    let sandbox = WebhookSecret::new(SANDBOX);
    let acknowledged = Arc::new(std::sync::Mutex::new(std::collections::HashSet::new()));
    let deliver = |s: Send| {
        let (client, url, attempts) = (client.clone(), url.clone(), attempts.clone());
        let acknowledged = acknowledged.clone();
        let keys = if s.sandbox {
            vec![sandbox.clone()]
        } else if s.rotation {
            vec![retired.clone(), secret.clone()]
        } else {
            vec![secret.clone()]
        };
        async move {
            // Paymos' ladder, compressed: 1 min → 20 ms, doubling, capped at 640 ms; past the
            // 11th attempt the event "fails" and an operator replays it, so it goes on.
            let mut gap = Duration::from_millis(20);
            loop {
                attempts.fetch_add(1, Ordering::Relaxed);
                let now = paymos_inbox_lambda::now_ms() / 1000;
                let a = post(
                    &client,
                    &url,
                    &s.event_id,
                    &s.body,
                    &keys,
                    now,
                    1,
                    SENDER_TIMEOUT,
                )
                .await;
                if (200..300).contains(&a.status) {
                    acknowledged
                        .lock()
                        .expect("lock")
                        .insert(s.event_id.clone());
                    return;
                }
                if s.gives_up {
                    // This sender stops here: if the attempt recorded the delivery before it
                    // died, only the sweep will ever send it again.
                    return;
                }
                tokio::time::sleep(gap).await;
                gap = (gap * 2).min(Duration::from_millis(640));
            }
        }
    };
    futures::stream::iter(schedule.into_iter().map(|(s, _)| deliver(s)))
        .buffer_unordered(options.concurrency)
        .collect::<Vec<()>>()
        .await;
    futures::stream::iter(replays.iter().cloned().map(deliver))
        .buffer_unordered(options.concurrency)
        .collect::<Vec<()>>()
        .await;
    let sends_total = deliveries + copies.len();

    // Faults off; let fulfil drain; anything in the DLQ is redriven once it is there.
    faults.set_enabled(false);
    let redriven = std::cell::Cell::new(0);
    let swept = std::cell::Cell::new(0);
    let sweep_queue = pipeline.queue.clone();
    ledger
        .wait_until_processed(Duration::from_secs(180), || async {
            let moved = redrive(&sqs, &dlq, &queue, 10_000)
                .await
                .map_err(|e| paymos_inbox_core::ingest::PortError::new("SQS redrive", e))?;
            redriven.set(redriven.get() + moved.moved());
            // The scheduled sweep, compressed: anything still `received` past its lease.
            let now = paymos_inbox_lambda::now_ms();
            let resent =
                paymos_inbox_core::sweep::resend_stranded(&ledger, &sweep_queue, 1, now, now, 1000)
                    .await?;
            swept.set(swept.get() + resent.resent);
            Ok(())
        })
        .await
        .map_err(|e| e.to_string())?;
    let dlq_redriven = redriven.get();
    server.abort();
    for p in pollers {
        p.abort();
    }

    let mut report = SoakReport {
        deliveries,
        sends: sends_total,
        attempts: attempts.load(Ordering::Relaxed),
        collisions,
        two_endpoint_payments: planned.two_endpoints,
        sandbox_signed: planned.sandbox_signed,
        hostile_bodies: planned.hostile,
        second_invoices: planned.second_invoices,
        silent_payments: planned.silent,
        refunds: planned.refunds,
        given_up,
        swept: swept.get(),
        port_calls: faults.calls.load(Ordering::Relaxed),
        injected_failures: faults.failed.load(Ordering::Relaxed),
        injected_lost_replies: faults.lost_replies.load(Ordering::Relaxed),
        injected_crashes: faults.crashes.load(Ordering::Relaxed),
        dlq_redriven,
        ..SoakReport::default()
    };
    let acknowledged = acknowledged.lock().expect("lock").clone();
    verify(
        &dynamodb,
        &created,
        &expect,
        &acknowledged,
        &sandbox_ids,
        &mut report,
    )
    .await?;
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}
