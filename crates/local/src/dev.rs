//! `paymos-inbox dev`: the whole pipeline on a laptop. The ingest handler is served over plain
//! HTTP exactly as a function URL delivers it (each request is turned into a payload 2.0 event
//! and read back by `lambda_http`, so the same code runs), and a poller feeds the fulfil handler
//! real SQS batches with partial batch failures, visibility timeouts and the DLQ redrive.

use paymos_inbox_aws::paymos_api::PaymosApi;
use paymos_inbox_core::roads::reconcile::scheduled;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use std::time::Duration;
use tracing::Instrument;

use base64::Engine as _;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use crate::emulators::{self, Emulator};
use crate::pipeline::Pipeline;
use crate::poller::poll_once;
use crate::template::{self, Created};
use paymos_inbox_core::roads::fulfil::Fulfil;
use paymos_inbox_core::roads::ingest::{Ingest, IngestSettings};
use paymos_inbox_core::wire::signature::{SigningKey, Verifier};
use paymos_inbox_lambda::{ingest::respond, now_ms};

/// Function URLs accept at most 6 MB of payload.
const FUNCTION_URL_MAX_BYTES: usize = 6 * 1024 * 1024;

/// How to run the local pipeline.
#[derive(Clone)]
pub struct DevOptions {
    /// An existing DynamoDB endpoint (else DynamoDB Local is started).
    pub dynamodb_endpoint: Option<String>,
    /// An existing SQS endpoint (else fauxqs is started).
    pub sqs_endpoint: Option<String>,
    /// Port for the ingest URL on 127.0.0.1 (0: any free one).
    pub port: u16,
    /// Secrets the receiver holds.
    pub keys: Vec<SigningKey>,
    /// Signature tolerance in seconds.
    pub tolerance_secs: u64,
    /// Hold the reply to the first attempt of each event id this long AFTER handling it: the
    /// work is done but the sender's 10 s timeout fires first, so its retry collides with it.
    pub slow: Option<Duration>,
    /// Prefix of the table and queue names.
    pub prefix: String,
    /// The environment whose deliveries fulfil applies (as `PAYMOS_ENVIRONMENT` on AWS).
    pub environment: paymos_inbox_core::wire::signature::Environment,
    /// The projects whose deliveries fulfil applies (as `PAYMOS_PROJECT_IDS` on AWS; none:
    /// every project).
    pub projects: paymos_inbox_core::money::change::Projects,
    /// Run the handlers in process (ingest on the URL, the fulfil poller, the publisher);
    /// without them, only the emulators, tables, queues and secrets, for the real binaries
    /// (`make watch`).
    pub handlers: bool,
    /// The webhook secrets as text (`label=whsec_…` lines), served for the binaries' INIT.
    pub secrets_text: Option<String>,
    /// A Paymos API client: with it, `dev`'s fulfil runs the reverse check before applying a
    /// payment, a refund or a credit (as a stack with `PaymosApiSecretName` does), and `dev`
    /// runs the reconciliation every [`DEV_RECONCILE_EVERY`] (report only), as the scheduled
    /// function does on AWS.
    pub reconcile_with: Option<paymos::PaymosClient>,
    /// The merchant's local endpoint: every hand-off event is posted there as the stack's
    /// deliver function posts it (signed, retried on the schedule compressed 60 times, parked
    /// after the last attempt or a 410), like `stripe listen --forward-to`.
    pub forward_to: Option<String>,
}

/// How often `dev` reconciles when given an API (on AWS: `ReconcileRate`, hourly).
pub const DEV_RECONCILE_EVERY: Duration = Duration::from_secs(60);

/// The hours `dev`'s reconciliation reads back at least (on AWS: `RECONCILE_WINDOW_HOURS`).
pub const DEV_RECONCILE_HOURS: u64 = 48;

/// The environment `dev` applies when none is asked for: the one of its secrets when they all
/// name the same, else sandbox (the fixture secret's).
#[must_use]
pub fn default_environment(keys: &[SigningKey]) -> paymos_inbox_core::wire::signature::Environment {
    use paymos_inbox_core::wire::signature::Environment;
    let mut named = keys.iter().filter_map(SigningKey::environment);
    match named.next() {
        Some(first) if named.all(|e| e == first) => first,
        _ => Environment::Test,
    }
}

/// What `dev` prints on start, as one JSON line.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct DevInfo {
    /// Where to POST webhooks.
    pub ingest_url: String,
    /// The DynamoDB endpoint in use.
    pub dynamodb_endpoint: String,
    /// The SQS endpoint in use.
    pub sqs_endpoint: String,
    /// Logical id → table name.
    pub tables: std::collections::BTreeMap<String, String>,
    /// Logical id → queue URL.
    pub queues: std::collections::BTreeMap<String, String>,
    /// Where the webhook secrets are served for the real binaries' INIT
    /// (`AWS_ENDPOINT_URL_SECRETS_MANAGER`), under the secret id `paymos-inbox/webhook-secrets`.
    #[serde(default)]
    pub secrets_manager_endpoint: Option<String>,
    /// The environment `dev` applies (`live` or `sandbox`), as a stack's
    /// `PaymosEnvironmentOutput` says it.
    #[serde(default)]
    pub environment: Option<String>,
    /// The projects `dev` applies, the first its home project (none: every project), as a
    /// stack's `PaymosProjectIdsOutput` says them.
    #[serde(default)]
    pub projects: Vec<String>,
    /// Whether `dev` runs the reverse check (it was given the API's key), as a stack's
    /// `ReverseCheckOutput` says it: a person's word without the API then ships nothing.
    #[serde(default)]
    pub reverse_check: bool,
    /// With `--forward-to`: where the hand-off is posted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forward_to: Option<String>,
    /// With `--forward-to`: the signing secret the consumer verifies with (`whsec_…`, made for
    /// this run; a local secret, never a deployed stack's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook_signing_secret: Option<String>,
    /// With `--forward-to`: the stand-in of Lambda's API for the deliverer's event source
    /// mapping (`events pause`/`resume` switch it; [`crate::switch`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lambda_endpoint: Option<String>,
}

/// How often `dev` runs the sweep (on AWS: `SweepRate`, 5 minutes).
pub const DEV_SWEEP_EVERY: Duration = Duration::from_secs(10);
/// How old a `received` record must be before `dev`'s sweep re-sends it (on AWS: 10 minutes):
/// past the 30 s lease, so a stranded delivery is healed within a minute locally.
pub const DEV_SWEEP_AFTER_SECS: u64 = 40;

/// The secret id `dev` serves the webhook secrets under (as `events/env.json` names it).
pub const DEV_SECRET_ID: &str = "paymos-inbox/webhook-secrets";

/// A running pipeline; everything it started stops when it is dropped.
pub struct Dev {
    /// What it prints.
    pub info: DevInfo,
    /// The clients it uses (for tools that inspect the tables).
    pub dynamodb: aws_sdk_dynamodb::Client,
    /// The SQS client.
    pub sqs: aws_sdk_sqs::Client,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    _emulators: Vec<Emulator>,
}

impl Drop for Dev {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// The shared AWS configuration of local clients. Credentials and region come from the
/// environment when set (a real account), else dummy ones an emulator accepts.
/// The configuration of the local clients: the environment's credentials or local ones, a
/// region, and a 5 s attempt timeout.
pub async fn shared_config() -> aws_config::SdkConfig {
    let mut loader = aws_config::from_env().app_name(paymos_inbox_aws::aws::app_name());
    if std::env::var_os("AWS_ACCESS_KEY_ID").is_none() && std::env::var_os("AWS_PROFILE").is_none()
    {
        loader = loader.credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
            "local",
            "local",
            None,
            None,
            "paymos-inbox-dev",
        ));
    }
    if std::env::var_os("AWS_REGION").is_none() && std::env::var_os("AWS_DEFAULT_REGION").is_none()
    {
        loader = loader.region(aws_config::Region::new("us-east-1"));
    }
    loader
        .timeout_config(
            aws_config::timeout::TimeoutConfig::builder()
                .operation_attempt_timeout(Duration::from_secs(5))
                .build(),
        )
        .load()
        .await
}

/// Clients of DynamoDB and SQS for explicit endpoints.
pub async fn clients(dynamodb: &str, sqs: &str) -> (aws_sdk_dynamodb::Client, aws_sdk_sqs::Client) {
    let shared = shared_config().await;
    let ddb = aws_sdk_dynamodb::config::Builder::from(&shared)
        .endpoint_url(dynamodb)
        .build();
    let sqs_conf = aws_sdk_sqs::config::Builder::from(&shared)
        .endpoint_url(sqs)
        .build();
    (
        aws_sdk_dynamodb::Client::from_conf(ddb),
        aws_sdk_sqs::Client::from_conf(sqs_conf),
    )
}

/// Why [`start`] could not start `dev`, of its kind: the caller's choice (a port taken,
/// `--forward-to` no URL the hand-off posts to), or what else failed, in words that say what to
/// do.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The port asked for cannot be bound (taken, most often).
    #[error("cannot listen on 127.0.0.1:{port}: {source}")]
    PortBusy {
        /// The port asked for.
        port: u16,
        /// Why it could not be bound.
        #[source]
        source: std::io::Error,
    },
    /// `--forward-to` is no URL the hand-off can post to.
    #[error("--forward-to {url}: {why}")]
    ForwardTo {
        /// The URL given.
        url: String,
        /// Why it cannot be used.
        why: String,
    },
    /// The stack could not be set up (the template, the emulators' tables and queues), of its
    /// kind.
    #[error(transparent)]
    Local(#[from] crate::error::LocalError),
    /// What else could not be started.
    #[error("{0}")]
    Other(String),
}

impl From<String> for StartError {
    fn from(said: String) -> Self {
        Self::Other(said)
    }
}

/// The hand-off's switch (on) and, when `dev` forwards to an endpoint, the stand-in of Lambda's
/// API that `events pause`/`resume` turn it with.
async fn delivery_switch(
    forwards: bool,
) -> Result<(Arc<std::sync::atomic::AtomicBool>, Option<String>), String> {
    let on = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let endpoint = if forwards {
        Some(crate::switch::serve(Arc::clone(&on)).await?)
    } else {
        None
    };
    Ok((on, endpoint))
}

/// What the caller chose, checked before anything starts: the port first (a busy one is said
/// at once, not after the emulators' seconds of start-up), then `--forward-to`. The listener.
async fn chosen(options: &DevOptions) -> Result<TcpListener, StartError> {
    let listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], options.port)))
        .await
        .map_err(|source| StartError::PortBusy {
            port: options.port,
            source,
        })?;
    if let Some(url) = &options.forward_to {
        paymos_inbox_aws::webhook::endpoint(url).map_err(|e| StartError::ForwardTo {
            url: url.clone(),
            why: e.to_string(),
        })?;
    }
    Ok(listener)
}

/// Starts everything and returns once the ingest URL accepts requests.
///
/// # Errors
/// What could not be started, of its kind, in words that say what to do.
pub async fn start(options: DevOptions) -> Result<Dev, StartError> {
    let listener = chosen(&options).await?;
    let (given_dynamodb, given_sqs) = (
        options.dynamodb_endpoint.clone(),
        options.sqs_endpoint.clone(),
    );
    let (dynamodb_endpoint, sqs_endpoint, running) = tokio::task::spawn_blocking(move || {
        emulators::endpoints_or_start(given_dynamodb, given_sqs)
    })
    .await
    .map_err(|e| e.to_string())?
    .map_err(|e| e.to_string())?;
    let (dynamodb, sqs) = clients(&dynamodb_endpoint, &sqs_endpoint).await;
    let created: Created = template::create_all(&dynamodb, &sqs, &options.prefix).await?;
    let signing_secret = options.forward_to.as_ref().map(|_| new_signing_secret());

    let pipeline = Pipeline::on(&created, &dynamodb, &sqs);
    let ingest = Arc::new(pipeline.ingest(
        Verifier::new(options.keys.clone(), options.tolerance_secs),
        IngestSettings::default(),
    ));
    // As the stack's fulfil: its environment, its projects, and, given an API, the reverse
    // check (`PaymosApiSecretName` on AWS).
    let stack_fulfil = || {
        pipeline
            .fulfil()
            .for_environment(options.environment)
            .for_projects(options.projects.clone())
    };
    // Its home project, pinned as the stack's fulfil pins it: tables kept from a `dev` run
    // that listed another project first are refused, never read as this one's.
    stack_fulfil()
        .pin_home_project()
        .await
        .map_err(|e| e.to_string())?;

    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let secrets_manager_endpoint = serve_secrets(options.secrets_text.as_deref()).await?;
    let (delivering, lambda_endpoint) = delivery_switch(options.forward_to.is_some()).await?;
    let info = DevInfo {
        ingest_url: format!("http://{addr}/"),
        dynamodb_endpoint: dynamodb_endpoint.clone(),
        sqs_endpoint,
        tables: created.tables.clone(),
        queues: created.queues.clone(),
        secrets_manager_endpoint,
        environment: Some(stack_environment(options.environment).to_owned()),
        projects: options.projects.ids().to_vec(),
        reverse_check: options.reconcile_with.is_some(),
        forward_to: options.forward_to.clone(),
        webhook_signing_secret: signing_secret.clone(),
        lambda_endpoint,
    };
    if !options.handlers {
        drop(listener);
        return Ok(Dev {
            info,
            dynamodb,
            sqs,
            tasks: Vec::new(),
            _emulators: running,
        });
    }
    let server = serve_ingest(listener, ingest, options.slow, None);
    let publisher = hand_off(
        &dynamodb,
        &dynamodb_endpoint,
        &sqs,
        &created,
        paymos_inbox_core::money::change::Applying {
            environment: options.environment,
            projects: options.projects.clone(),
        },
        options.forward_to.is_some(),
    )
    .await?;
    let poller = fulfil_poller(
        &sqs,
        created.queue("WorkQueue"),
        stack_fulfil(),
        options.reconcile_with.as_ref(),
    );
    let mut tasks = vec![server, poller, publisher, sweep(&dynamodb, &sqs, &created)];
    if let (Some(url), Some(secret)) = (&options.forward_to, &signing_secret) {
        tasks.push(crate::forward::run(
            sqs.clone(),
            &created,
            (url, secret),
            delivering,
        )?);
    }
    if let Some(api) = options.reconcile_with.map(PaymosApi::new) {
        tasks.push(reconcile_every_minute(api, stack_fulfil()));
    }

    Ok(Dev {
        info,
        dynamodb,
        sqs,
        tasks,
        _emulators: running,
    })
}

/// The environment as a stack's `PaymosEnvironmentOutput` names it.
fn stack_environment(environment: paymos_inbox_core::wire::signature::Environment) -> &'static str {
    if environment.is_test() {
        "sandbox"
    } else {
        "live"
    }
}

/// The fulfil poller on the work queue: with an API, behind the reverse check, as a stack with
/// `PaymosApiSecretName` runs it.
fn fulfil_poller(
    sqs: &aws_sdk_sqs::Client,
    queue: &str,
    fulfil: Fulfil<paymos_inbox_aws::dynamodb::DynamoResources>,
    api: Option<&paymos::PaymosClient>,
) -> tokio::task::JoinHandle<()> {
    // A failed message comes back on fulfil's own backoff, as the function sets it on AWS.
    let on = || {
        let retry = paymos_inbox_aws::sqs::SqsQueue::new(sqs.clone(), queue);
        (sqs.clone(), queue.to_owned(), retry)
    };
    match api {
        Some(client) => {
            let checked = fulfil.with_confirmation(
                PaymosApi::new(client.clone()).with_deadline(Duration::from_secs(10)),
            );
            run_poller(on(), Arc::new(checked), 10, None)
        }
        None => run_poller(on(), Arc::new(fulfil), 10, None),
    }
}

/// The hand-off: the state table's stream → the publisher → the template's events queue,
/// standing in for the bus and its rule to that queue (`paymos-inbox events tail` reads it),
/// and, when `forwarding`, to the signed hand-off's queue as a second rule would.
async fn hand_off(
    dynamodb: &aws_sdk_dynamodb::Client,
    dynamodb_endpoint: &str,
    sqs: &aws_sdk_sqs::Client,
    created: &Created,
    stack: paymos_inbox_core::money::change::Applying,
    forwarding: bool,
) -> Result<tokio::task::JoinHandle<()>, String> {
    let mut events = paymos_inbox_aws::events::QueuePublisher::new(
        sqs.clone(),
        created.queue("EventsDeliveryQueue"),
        paymos_inbox_lambda::now_ms,
    );
    if forwarding {
        events = events.also_to(created.queue("WebhookDeliveryQueue"));
    }
    run_publisher(
        dynamodb.clone(),
        dynamodb_endpoint,
        created.table("StateTable"),
        events,
        stack,
        sqs.clone(),
        created.queue("PublishFailuresQueue").to_owned(),
    )
    .await
}

/// The webhook secrets served for the real binaries' INIT, when given.
async fn serve_secrets(text: Option<&str>) -> Result<Option<String>, String> {
    match text {
        Some(text) => Ok(Some(
            crate::secrets::serve(std::collections::HashMap::from([(
                DEV_SECRET_ID.to_owned(),
                text.to_owned(),
            )]))
            .await?,
        )),
        None => Ok(None),
    }
}

/// A signing secret for this run's forwarded hand-off: 32 random bytes, `whsec_<base64>`.
fn new_signing_secret() -> String {
    use base64::Engine as _;
    let mut bytes = [0_u8; 32];
    getrandom::fill(&mut bytes).expect("the system's random source answers");
    format!(
        "whsec_{}",
        base64::engine::general_purpose::STANDARD.encode(bytes)
    )
}

/// The scheduled sweep on a short local schedule: it heals a delivery recorded but never sent
/// within a minute, and reports the oldest pending one and what waits as on AWS.
fn sweep(
    dynamodb: &aws_sdk_dynamodb::Client,
    sqs: &aws_sdk_sqs::Client,
    created: &Created,
) -> tokio::task::JoinHandle<()> {
    let ledger = paymos_inbox_aws::dynamodb::DynamoLedger::new(
        dynamodb.clone(),
        created.table("DeliveriesTable"),
        None,
    );
    let state = paymos_inbox_aws::dynamodb::DynamoResources::new(
        dynamodb.clone(),
        created.table("StateTable"),
        created.table("DeliveriesTable"),
    );
    let queue = paymos_inbox_aws::sqs::SqsQueue::new(sqs.clone(), created.queue("WorkQueue"));
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(DEV_SWEEP_EVERY).await;
            let now = paymos_inbox_lambda::now_ms();
            if let Err(error) = paymos_inbox_lambda::sweep::sweep_once(
                (&ledger, &state),
                &queue,
                paymos_inbox_core::roads::ingest::DEFAULT_LEASE_SECS,
                DEV_SWEEP_AFTER_SECS,
                now,
            )
            .await
            {
                tracing::warn!(error = %error, "the local sweep failed; it runs again");
            }
            paymos_inbox_lambda::telemetry::flush_metrics();
        }
    })
}

/// The scheduled reconciliation on a short local schedule, as the function runs it
/// ([`scheduled`]: the window from where the last clean run ended, report only): what each
/// window found is kept where `status` reads it, and said in the log.
fn reconcile_every_minute<S>(api: PaymosApi, fulfil: Fulfil<S>) -> tokio::task::JoinHandle<()>
where
    S: paymos_inbox_core::roads::reconcile::ReconcileStore
        + paymos_inbox_core::roads::reconcile::ReconcileCheckpoint
        + 'static,
{
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(DEV_RECONCILE_EVERY).await;
            let now_ms = paymos_inbox_lambda::now_ms();
            match scheduled(&api, &fulfil, (DEV_RECONCILE_HOURS, false), now_ms, || true).await {
                Ok((report, _)) => tracing::info!(
                    paid_at_paymos = report.paid_at_paymos,
                    missing = report.missing.len(),
                    paid_late = report.paid_late.len(),
                    refunded = report.refunded.len(),
                    double = report.double.len(),
                    unknown = report.unknown.len(),
                    clean = report.clean(),
                    "reconciliation done (`paymos-inbox status` says it, `paymos-inbox reconcile` lists it)"
                ),
                Err(error) => {
                    tracing::warn!(error = %error, "the local reconciliation could not run; it runs again")
                }
            }
        }
    })
}

/// Serves `ingest` on `listener` as a function URL would. `slow` holds the first reply of each
/// event (see [`DevOptions::slow`]); `timeout` ends a request like a function timeout does
/// (the sender sees a 502 and retries).
pub fn serve_ingest<L, Q>(
    listener: TcpListener,
    ingest: Arc<Ingest<L, Q>>,
    slow: Option<Duration>,
    timeout: Option<Duration>,
) -> tokio::task::JoinHandle<()>
where
    L: paymos_inbox_core::roads::ingest::DeliveryLedger + 'static,
    Q: paymos_inbox_core::roads::ingest::WorkQueue + 'static,
{
    let slow = slow.map(|d| (d, SeenIds::default()));
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            // Without it, Nagle's algorithm holds the reply's last segment for the client's
            // delayed ACK: milliseconds per request on loopback.
            let _ = stream.set_nodelay(true);
            let ingest = Arc::clone(&ingest);
            let slow = slow.clone();
            tokio::spawn(async move {
                let service = service_fn(move |req| {
                    let ingest = Arc::clone(&ingest);
                    let slow = slow.clone();
                    async move {
                        let served = serve(&ingest, req, slow);
                        let response = match timeout {
                            Some(limit) => tokio::time::timeout(limit, served)
                                .await
                                .unwrap_or_else(|_| plain(502, "the function timed out")),
                            None => served.await,
                        };
                        Ok::<_, Infallible>(response)
                    }
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    })
}

/// Feeds `fulfil` from `queue_url` like Lambda's SQS event source: batches of `batch_size`,
/// partial failures, each failed message back when `retry` sets it to (`dev`'s: fulfil's own
/// backoff, as on AWS, so `14 s` in its log is 14 s); `timeout` ends a batch like a function
/// timeout (nothing of it is deleted, so all of it is redelivered).
pub fn run_poller<S, C, Q>(
    (sqs, queue_url, retry): (aws_sdk_sqs::Client, String, Q),
    fulfil: Arc<Fulfil<S, C>>,
    batch_size: i32,
    timeout: Option<Duration>,
) -> tokio::task::JoinHandle<()>
where
    S: paymos_inbox_core::roads::fulfil::ResourceStore + 'static,
    C: paymos_inbox_core::roads::confirm::PaymentConfirmation + 'static,
    Q: paymos_inbox_core::roads::outbound::RetryQueue + Send + Sync + 'static,
{
    tokio::spawn(async move {
        loop {
            let poll = poll_once((&sqs, &queue_url, &retry), &fulfil, batch_size, 1, now_ms)
                .instrument(invocation_span());
            let result = match timeout {
                Some(limit) => tokio::time::timeout(limit, poll)
                    .await
                    .unwrap_or_else(|_| Err("the batch timed out (crashed)".into())),
                None => poll.await,
            };
            paymos_inbox_lambda::telemetry::flush_metrics();
            if let Err(e) = result {
                tracing::warn!(error = %e, "poller: the batch failed; its messages will be redelivered");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    })
}

/// Reads `state_table`'s stream and publishes what it commits, as the publisher function's
/// DynamoDB event source does on AWS.
///
/// # Errors
/// When the stream cannot be opened.
pub async fn run_publisher<P>(
    dynamodb: aws_sdk_dynamodb::Client,
    dynamodb_endpoint: &str,
    state_table: &str,
    publisher: P,
    stack: paymos_inbox_core::money::change::Applying,
    sqs: aws_sdk_sqs::Client,
    on_failure: String,
) -> Result<tokio::task::JoinHandle<()>, String>
where
    P: paymos_inbox_core::roads::handoff::EventPublisher + 'static,
{
    let streams = aws_sdk_dynamodbstreams::Client::from_conf(
        aws_sdk_dynamodbstreams::config::Builder::from(&shared_config().await)
            .endpoint_url(dynamodb_endpoint)
            .build(),
    );
    let mut reader = crate::stream::StreamReader::open(&dynamodb, streams, state_table)
        .await
        .map_err(|e| e.to_string())?;
    let retries = crate::stream::Retries {
        attempts: 3,
        pause: Duration::from_millis(500),
    };
    Ok(tokio::spawn(async move {
        loop {
            match reader.next_batch().await {
                Ok(batch) if batch.is_empty() => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Ok(batch) => {
                    if let Err(e) = crate::stream::deliver(
                        &publisher,
                        &batch,
                        &stack,
                        retries,
                        &sqs,
                        &on_failure,
                    )
                    .await
                    {
                        tracing::warn!(error = %e, "publisher: could not park a failed batch");
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "publisher: reading the stream failed");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    }))
}

/// One HTTP request → payload 2.0 event → the ingest handler → HTTP response.
async fn serve<L, Q>(
    ingest: &Ingest<L, Q>,
    req: hyper::Request<Incoming>,
    slow: Option<(Duration, SeenIds)>,
) -> hyper::Response<Full<Bytes>>
where
    L: paymos_inbox_core::roads::ingest::DeliveryLedger,
    Q: paymos_inbox_core::roads::ingest::WorkQueue,
{
    let hold = slow.and_then(|(delay, seen)| {
        let id = req.headers().get("x-webhook-id")?.to_str().ok()?.to_owned();
        seen.lock().insert(id).then_some(delay)
    });
    // As the runtime does on Lambda: a span naming the invocation around the handler, and the
    // metrics flushed after it.
    let response = handle(ingest, req).instrument(invocation_span()).await;
    paymos_inbox_lambda::telemetry::flush_metrics();
    if let Some(delay) = hold {
        tracing::info!(?delay, "--slow: holding the reply to this first attempt");
        tokio::time::sleep(delay).await;
    }
    response
}

/// The span Lambda's runtime puts around an invocation, with a local request id.
fn invocation_span() -> tracing::Span {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let id = format!("local-{:08}", N.fetch_add(1, Ordering::Relaxed));
    tracing::info_span!("Lambda runtime invoke", requestId = %id)
}

#[derive(Clone, Default)]
struct SeenIds(Arc<std::sync::Mutex<std::collections::HashSet<String>>>);

impl SeenIds {
    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::HashSet<String>> {
        self.0.lock().expect("seen ids")
    }
}

async fn handle<L, Q>(
    ingest: &Ingest<L, Q>,
    req: hyper::Request<Incoming>,
) -> hyper::Response<Full<Bytes>>
where
    L: paymos_inbox_core::roads::ingest::DeliveryLedger,
    Q: paymos_inbox_core::roads::ingest::WorkQueue,
{
    let (parts, body) = req.into_parts();
    let Ok(body) = Limited::new(body, FUNCTION_URL_MAX_BYTES)
        .collect()
        .await
        .map(|c| c.to_bytes())
    else {
        return plain(
            413,
            "the request body is larger than a function URL accepts (6 MB)",
        );
    };
    let event = function_url_event(&parts, &body, now_ms());
    let request = match lambda_http::request::from_str(&event.to_string()) {
        Ok(r) => r,
        Err(e) => return plain(400, &format!("cannot translate the request: {e}")),
    };
    let response = respond(ingest, &request, now_ms()).await;
    let (parts, body) = response.into_parts();
    let bytes = match body {
        lambda_http::Body::Text(t) => Bytes::from(t),
        lambda_http::Body::Binary(b) => Bytes::from(b),
        _ => Bytes::new(),
    };
    let mut out = hyper::Response::new(Full::new(bytes));
    *out.status_mut() = parts.status;
    for (name, value) in &parts.headers {
        out.headers_mut().append(name, value.clone());
    }
    out
}

fn plain(status: u16, message: &str) -> hyper::Response<Full<Bytes>> {
    let mut out = hyper::Response::new(Full::new(Bytes::from(
        serde_json::json!({"received": false, "message": message}).to_string(),
    )));
    *out.status_mut() =
        hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::BAD_REQUEST);
    out
}

/// The payload 2.0 event a function URL would hand Lambda for this request: header names
/// lower-cased, repeated headers joined with commas, a UTF-8 body as text and anything else
/// base64-encoded.
#[must_use]
pub fn function_url_event(
    parts: &hyper::http::request::Parts,
    body: &[u8],
    now_ms: u64,
) -> serde_json::Value {
    let mut headers = serde_json::Map::new();
    for (name, value) in &parts.headers {
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        let key = name.as_str().to_ascii_lowercase();
        match headers.get_mut(&key) {
            Some(serde_json::Value::String(existing)) => {
                existing.push(',');
                existing.push_str(&value);
            }
            _ => {
                headers.insert(key, value.into());
            }
        }
    }
    let (body, base64) = match std::str::from_utf8(body) {
        Ok(text) => (text.to_owned(), false),
        Err(_) => (base64::engine::general_purpose::STANDARD.encode(body), true),
    };
    let path = parts.uri.path();
    serde_json::json!({
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": parts.uri.query().unwrap_or_default(),
        "headers": headers,
        "requestContext": {
            "accountId": "anonymous",
            "apiId": "paymos-inbox-dev",
            "domainName": "127.0.0.1",
            "domainPrefix": "paymos-inbox-dev",
            "http": {"method": parts.method.as_str(), "path": path, "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1", "userAgent": ""},
            "requestId": format!("dev-{now_ms}"),
            "routeKey": "$default",
            "stage": "$default",
            "time": "",
            "timeEpoch": now_ms,
        },
        "body": body,
        "isBase64Encoded": base64,
    })
}
