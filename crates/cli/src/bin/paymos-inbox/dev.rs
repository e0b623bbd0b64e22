//! `paymos-inbox dev`.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use paymos_inbox_lambda::config::parse_secrets;
use paymos_inbox_local::dev::{DevOptions, StartError, default_environment, start};

use crate::exit::Failure;
use crate::{DEFAULT_PORT, FIXTURE_SECRET};

#[derive(clap::Args)]
pub struct DevArgs {
    /// Use this DynamoDB endpoint (LocalStack, a DynamoDB Local you run, or real AWS) instead
    /// of starting DynamoDB Local.
    #[arg(long, env = "AWS_ENDPOINT_URL_DYNAMODB")]
    dynamodb_endpoint: Option<String>,
    /// Use this SQS endpoint instead of starting fauxqs.
    #[arg(long, env = "AWS_ENDPOINT_URL_SQS")]
    sqs_endpoint: Option<String>,
    /// Port of the ingest URL on 127.0.0.1 (0 picks a free one).
    #[arg(long, default_value_t = DEFAULT_PORT)]
    port: u16,
    /// Secrets the receiver holds, as label=whsec_… (default: the fixture sandbox secret, which
    /// `send` also uses by default).
    #[arg(long = "secret", value_delimiter = ',', default_value = FIXTURE_SECRET, hide_default_value = true)]
    secrets: Vec<String>,
    /// Allowed |now - t| of a signature, in seconds.
    #[arg(long, default_value_t = 300)]
    tolerance: u64,
    /// Hold the reply to the first attempt of each event this many seconds after handling it
    /// (work done, reply late: past Paymos' 10 s the sender retries and collides with it).
    #[arg(long)]
    slow: Option<f64>,
    /// Prefix of the table and queue names (default: paymos-inbox-dev-<pid>).
    #[arg(long)]
    prefix: Option<String>,
    /// The environment whose deliveries are applied, live or sandbox (PAYMOS_ENVIRONMENT on
    /// AWS). Default: the secrets' environment when they all name one, else sandbox.
    #[arg(long)]
    environment: Option<String>,
    /// A project whose deliveries are applied (prj_…; repeat for several, the first the home
    /// project, as PaymosProjectIds on AWS). Default: every project.
    #[arg(long = "project", value_parser = crate::exit::named)]
    projects: Vec<String>,
    /// `text` (readable, on stderr) or `json`: exactly what the functions print on Lambda,
    /// flat JSON log lines and the metrics as EMF documents, on stdout.
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
    log_format: String,
    /// Only the emulators, the stack's tables and queues, and the secrets served for INIT: no
    /// handlers in process, for the real binaries under `cargo lambda watch` (`make watch`).
    #[arg(long)]
    no_handlers: bool,
    /// Also write the JSON line to this file, for the tools' `--dev-info` (`send` reads
    /// ./dev.json by itself); removed when `dev` stops.
    #[arg(long, default_value = crate::stack::DEV_INFO_FILE)]
    info_file: std::path::PathBuf,
    /// Post every hand-off event to your local endpoint, signed as the stack's deliver function
    /// signs it (the secret is in the JSON line: `webhook_signing_secret`), retried on its
    /// schedule compressed sixty times; like `stripe listen --forward-to`.
    ///   paymos-inbox dev --forward-to http://localhost:3000/hooks
    #[arg(long)]
    forward_to: Option<String>,
    #[command(flatten)]
    api: crate::stack::OptionalApiArgs,
}

impl DevArgs {
    /// Whether logs (and metrics) are printed as on Lambda.
    pub fn json_logs(&self) -> bool {
        self.log_format == "json"
    }
}

pub async fn run(args: DevArgs) -> ExitCode {
    let keys = match parse_secrets(&args.secrets.join("\n"), "--secret", false) {
        Ok(k) => k,
        Err(e) => return Failure::usage(e.to_string()).report(),
    };
    let environment = match &args.environment {
        None => default_environment(&keys),
        Some(v) => match paymos_inbox_lambda::config::environment(&|_: &str| Some(v.clone())) {
            Ok(e) => e,
            Err(_) => {
                return Failure::usage(format!("--environment must be live or sandbox, got {v:?}"))
                    .report();
            }
        },
    };
    let reconcile_with = match args.api.client() {
        Ok(client) => client,
        Err(e) => return Failure::usage(e).report(),
    };
    let reverse_check = reconcile_with.is_some();
    let projects = match paymos_inbox_lambda::config::projects(
        &|_: &str| Some(args.projects.join(",")),
        paymos_inbox_core::wire::signature::Environment::Test,
    ) {
        Ok(p) => p,
        Err(e) => return Failure::usage(format!("--project: {e}")).report(),
    };
    let options = DevOptions {
        reconcile_with,
        environment,
        projects,
        handlers: !args.no_handlers,
        secrets_text: Some(args.secrets.join("\n")),
        forward_to: args.forward_to.clone(),
        dynamodb_endpoint: args.dynamodb_endpoint,
        sqs_endpoint: args.sqs_endpoint,
        port: args.port,
        keys,
        tolerance_secs: args.tolerance,
        slow: args.slow.map(Duration::from_secs_f64),
        prefix: args
            .prefix
            .unwrap_or_else(|| format!("paymos-inbox-dev-{}", std::process::id())),
    };
    let dev = match start(options).await {
        Ok(dev) => dev,
        Err(e @ StartError::PortBusy { .. }) => {
            return Failure::usage(e.to_string())
                .next("pass --port 0 (a free port; dev.json and the ready line name it), or stop what listens there")
                .report();
        }
        Err(e @ StartError::ForwardTo { .. }) => return Failure::usage(e.to_string()).report(),
        Err(StartError::Local(e)) => return crate::failed(e),
        Err(StartError::Other(e)) => return crate::failed(e),
    };
    let line = serde_json::to_string(&dev.info).expect("info serialises");
    say!("{line}");
    if let Err(e) = std::fs::write(&args.info_file, format!("{line}\n")) {
        return Failure::usage(format!("--info-file {}: {e}", args.info_file.display())).report();
    }
    let _ = std::io::stdout().flush();
    if reverse_check {
        tracing::info!(
            "the reverse check is on: every payment, refund and credit is read back at Paymos before it is applied"
        );
    }
    if dev.info.projects.is_empty() {
        tracing::warn!(
            "applying every project (an endpoint without a project filter), each keyed by its own; a payment naming no project waits project_unknown: pass --project prj_… to apply only yours, as PaymosProjectIds does on AWS"
        );
    } else {
        tracing::info!(projects = ?dev.info.projects, "applying these projects only; another project's deliveries are recorded other_project");
    }
    if args.no_handlers {
        tracing::info!("ready: local AWS only (no handlers in process); Ctrl-C stops everything");
    } else {
        tracing::info!(url = %dev.info.ingest_url, "ready: send a webhook with `paymos-inbox send --type invoice.paid`; Ctrl-C stops everything");
    }
    stopped().await;
    tracing::info!("stopping");
    // A stale file would send the tools to a port nobody listens on.
    let _ = std::fs::remove_file(&args.info_file);
    drop(dev);
    ExitCode::SUCCESS
}

/// Until Ctrl-C, or SIGTERM (a process manager, `kill`, a CI runner), which stop `dev` alike.
async fn stopped() {
    #[cfg(unix)]
    if let Ok(mut term) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
    {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        return;
    }
    let _ = tokio::signal::ctrl_c().await;
}
