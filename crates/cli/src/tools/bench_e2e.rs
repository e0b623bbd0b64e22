//! `paymos-inbox bench-e2e`: deliveries per second and latency through the local pipeline
//! (HTTP → ingest handler → DynamoDB Local + fauxqs), against a raw loop of the same
//! conditional put and send (the adapters' own calls, without HTTP, translation or
//! verification) issued directly to the same emulators.
//!
//! Like for like: first every delivery once (timed, nothing else running), then fulfil drains
//! the queue (untimed, as it would between Paymos' retries), then the duplicate share again
//! (timed: each finds its record processed, one conditional put). The raw loop does the same
//! calls in the same two phases.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;

use crate::tools::send::{SENDER_TIMEOUT, post};
use paymos_inbox_aws::dynamodb::{DynamoLedger, DynamoResources};
use paymos_inbox_aws::sqs::SqsQueue;
use paymos_inbox_core::roads::fulfil::Fulfil;
use paymos_inbox_core::roads::ingest::{Inbound, Ingest, IngestSettings};
use paymos_inbox_core::wire::signature::{SigningKey, Verifier, WebhookSecret, signature_header};
use paymos_inbox_lambda::fulfil::QueueVisibility;
use paymos_inbox_local::dev::{clients, run_poller, serve_ingest};
use paymos_inbox_local::pipeline::Pipeline;
use paymos_inbox_local::template;

const SECRET: &str = "whsec_live_paymos_inbox_bench";

/// How to run it.
#[derive(Debug, Clone)]
pub struct E2eOptions {
    /// DynamoDB endpoint.
    pub dynamodb_endpoint: String,
    /// SQS endpoint.
    pub sqs_endpoint: String,
    /// Distinct deliveries.
    pub deliveries: usize,
    /// Share of deliveries sent a second time (after the first was acknowledged).
    pub duplicate_share: f64,
    /// Requests in flight at once.
    pub concurrency: usize,
}

/// One side's figures.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Figures {
    /// Requests (deliveries and duplicates) completed.
    pub requests: usize,
    /// Requests per second.
    pub per_second: f64,
    /// Median latency, ms.
    pub p50_ms: f64,
    /// 99th percentile latency, ms.
    pub p99_ms: f64,
}

/// Both sides and their ratio.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct E2eReport {
    /// Through the pipeline.
    pub pipeline: Figures,
    /// The raw put + send loop.
    pub raw: Figures,
    /// pipeline / raw requests per second (target ≥ 0.8).
    pub ratio: f64,
}

fn figures(mut latencies: Vec<Duration>, elapsed: Duration) -> Figures {
    latencies.sort();
    let pick = |q: f64| {
        #[allow(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            clippy::cast_precision_loss
        )]
        let i = ((latencies.len() as f64 - 1.0) * q).round() as usize;
        latencies.get(i).map_or(0.0, |d| d.as_secs_f64() * 1000.0)
    };
    #[allow(clippy::cast_precision_loss)]
    let per_second = latencies.len() as f64 / elapsed.as_secs_f64();
    Figures {
        requests: latencies.len(),
        per_second,
        p50_ms: pick(0.5),
        p99_ms: pick(0.99),
    }
}

fn body(i: usize, run: u128) -> String {
    format!(
        r#"{{"event_id":"evt_bench_{run}_{i}","event_type":"invoice.confirming","version":1,"occurred_at":1760000000,"data":{{"invoice_id":"inv_bench_{i}","status":"confirming","is_test":false,"order":{{"external_id":"order-{i}","amount":"25.00","currency":"USDT"}}}}}}"#
    )
}

/// Runs both loops; duplicates follow their first copy once it was acknowledged.
///
/// # Errors
/// When the resources cannot be created.
pub async fn run(options: E2eOptions) -> Result<E2eReport, String> {
    let (dynamodb, sqs) = clients(&options.dynamodb_endpoint, &options.sqs_endpoint).await;
    let run_id = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let secret = WebhookSecret::new(SECRET);
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )]
    let duplicates = (options.deliveries as f64 * options.duplicate_share) as usize;
    // The raw loop's order: every delivery, then the duplicate share again.
    let order: Vec<usize> = (0..options.deliveries).chain(0..duplicates).collect();

    // 0. Warm the emulators (DynamoDB Local's JVM compiles as it serves): one untimed raw pass,
    //    so neither side is measured against a cold emulator.
    raw_loop(
        &dynamodb,
        &sqs,
        &secret,
        &options,
        &order,
        &format!("warm-{run_id}"),
        run_id.wrapping_add(1),
    )
    .await?;

    // 1. Through the pipeline.
    let pipeline = through_the_pipeline(&dynamodb, &sqs, &options, run_id, duplicates).await?;

    let raw = raw_loop(
        &dynamodb,
        &sqs,
        &secret,
        &options,
        &order,
        &format!("raw-{run_id}"),
        run_id,
    )
    .await?;

    let ratio = if raw.per_second > 0.0 {
        pipeline.per_second / raw.per_second
    } else {
        0.0
    };
    Ok(E2eReport {
        pipeline,
        raw,
        ratio,
    })
}

/// Every delivery through ingest (timed until acknowledged), fulfil drained, then the
/// duplicate share again.
async fn through_the_pipeline(
    dynamodb: &aws_sdk_dynamodb::Client,
    sqs: &aws_sdk_sqs::Client,
    options: &E2eOptions,
    run_id: u128,
    duplicates: usize,
) -> Result<Figures, String> {
    let secret = WebhookSecret::new(SECRET);
    let created = template::create_all(dynamodb, sqs, &format!("bench-{run_id}")).await?;
    let pipeline = Pipeline::on(&created, dynamodb, sqs);
    let ingest = Arc::new(pipeline.ingest(
        Verifier::new(vec![SigningKey::new("live", &secret)], 300),
        IngestSettings::default(),
    ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let url = format!(
        "http://{}/",
        listener.local_addr().map_err(|e| e.to_string())?
    );
    let server = serve_ingest(listener, Arc::clone(&ingest), None, None);
    let sender = Acknowledged {
        client: reqwest::Client::builder()
            .pool_max_idle_per_host(options.concurrency)
            .build()
            .map_err(|e| e.to_string())?,
        url,
        secret,
        run_id,
        concurrency: options.concurrency,
    };
    let started = Instant::now();
    let mut latencies = sender.send_all(0..options.deliveries).await;
    let mut elapsed = started.elapsed();
    let poller = run_poller(
        (
            sqs.clone(),
            created.queue("WorkQueue").to_owned(),
            QueueVisibility,
        ),
        Arc::new(pipeline.fulfil()),
        10,
        None,
    );
    let ledger = DynamoLedger::new(dynamodb.clone(), created.table("DeliveriesTable"), None);
    ledger
        .wait_until_processed(Duration::from_secs(300), || async { Ok(()) })
        .await
        .map_err(|e| e.to_string())?;
    poller.abort();
    let started = Instant::now();
    latencies.extend(sender.send_all(0..duplicates).await);
    elapsed += started.elapsed();
    server.abort();
    Ok(figures(latencies, elapsed))
}

/// Sends deliveries until each is acknowledged; the time each took.
struct Acknowledged {
    client: reqwest::Client,
    url: String,
    secret: WebhookSecret,
    run_id: u128,
    concurrency: usize,
}

impl Acknowledged {
    async fn send_all(&self, ids: std::ops::Range<usize>) -> Vec<Duration> {
        futures::stream::iter(ids.map(|i| self.until_acknowledged(i)))
            .buffered(self.concurrency)
            .collect::<Vec<Duration>>()
            .await
    }

    async fn until_acknowledged(&self, i: usize) -> Duration {
        let b = body(i, self.run_id);
        let id = format!("evt_bench_{}_{i}", self.run_id);
        loop {
            let now = paymos_inbox_lambda::now_ms() / 1000;
            let t = Instant::now();
            let a = post(
                &self.client,
                &self.url,
                &id,
                &b,
                std::slice::from_ref(&self.secret),
                now,
                1,
                SENDER_TIMEOUT,
            )
            .await;
            if (200..300).contains(&a.status) {
                return t.elapsed();
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// The same conditional put and send as ingest makes (the adapters' own calls), in the same two
/// phases, without HTTP, translation or verification.
async fn raw_loop(
    dynamodb: &aws_sdk_dynamodb::Client,
    sqs: &aws_sdk_sqs::Client,
    secret: &WebhookSecret,
    options: &E2eOptions,
    order: &[usize],
    prefix: &str,
    run_id: u128,
) -> Result<Figures, String> {
    let raw_stack = template::create_all(dynamodb, sqs, prefix).await?;
    let table = raw_stack.table("DeliveriesTable").to_owned();
    let queue = raw_stack.queue("WorkQueue").to_owned();
    let ledger = DynamoLedger::new(dynamodb.clone(), &table, None);
    let raw_queue = SqsQueue::new(sqs.clone(), &queue);
    // Only `admit` (verify and parse, no I/O) is called: the deliveries are prepared before the
    // clock starts, and the loop below calls the ledger and the queue itself.
    let admit = Ingest::new(
        Verifier::new(vec![SigningKey::new("live", secret)], 300),
        ledger.clone(),
        raw_queue.clone(),
        IngestSettings::default(),
    );
    let deliveries: Vec<_> = order
        .iter()
        .map(|&i| {
            let b = body(i, run_id);
            let now = paymos_inbox_lambda::now_ms();
            let header = signature_header(now / 1000, b.as_bytes(), &[secret]);
            admit
                .admit(
                    &Inbound {
                        method: "POST",
                        signature: Some(&header),
                        webhook_id: None,
                        body: b.as_bytes(),
                    },
                    now,
                )
                .expect("a valid delivery")
        })
        .collect();
    // The same two phases; fulfil drains in between so duplicates find processed records.
    let raw_fulfil = Arc::new(Fulfil::new(DynamoResources::new(
        dynamodb.clone(),
        raw_stack.table("StateTable"),
        &table,
    )));
    let (first, again) = deliveries.split_at(options.deliveries);
    let raw_phase = |batch: &[paymos_inbox_core::roads::ingest::Delivery]| {
        let batch = batch.to_vec();
        let (ledger, raw_queue) = (ledger.clone(), raw_queue.clone());
        async move {
            futures::stream::iter(batch.into_iter().map(|d| {
                let (ledger, raw_queue) = (ledger.clone(), raw_queue.clone());
                async move {
                    use paymos_inbox_core::roads::ingest::{
                        DeliveryLedger as _, Recorded, WorkQueue as _,
                    };
                    let t = Instant::now();
                    if let Ok(Recorded::New) = ledger.record(&d, d.received_at_ms + 30_000).await {
                        let _ = raw_queue.enqueue(&d).await;
                    }
                    t.elapsed()
                }
            }))
            .buffered(options.concurrency)
            .collect::<Vec<Duration>>()
            .await
        }
    };
    let started = Instant::now();
    let mut latencies = raw_phase(first).await;
    let mut elapsed = started.elapsed();
    let poller = run_poller(
        (sqs.clone(), queue.clone(), QueueVisibility),
        raw_fulfil,
        10,
        None,
    );
    ledger
        .wait_until_processed(Duration::from_secs(300), || async { Ok(()) })
        .await
        .map_err(|e| e.to_string())?;
    poller.abort();
    let started = Instant::now();
    latencies.extend(raw_phase(again).await);
    elapsed += started.elapsed();
    Ok(figures(latencies, elapsed))
}
