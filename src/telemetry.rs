//! Logging set-up: JSON lines for Lambda (CloudWatch parses them), readable lines for the CLI.
//!
//! Our own code never logs a body or a secret. The AWS SDK, hyper, rustls and the Lambda
//! runtime do at DEBUG/TRACE (wire bodies, raw events), so they are capped at INFO whatever level
//! the function runs at; only an explicit `RUST_LOG` (local debugging) lifts that.

use tracing_subscriber::EnvFilter;

/// Crates whose DEBUG/TRACE output contains request or response bodies.
const WIRE_LOGGERS: [&str; 14] = [
    "aws_smithy_runtime",
    "aws_smithy_runtime_api",
    "aws_smithy_http_client",
    "aws_sdk_dynamodb",
    "aws_sdk_sqs",
    "aws_sdk_secretsmanager",
    "aws_config",
    "hyper",
    "hyper_util",
    "h2",
    "rustls",
    "reqwest",
    "lambda_runtime",
    "lambda_http",
];

/// The filter for an application level (`info`, `debug`, `trace`, …): that level for our
/// code, at most INFO for the crates that log wire contents.
#[must_use]
pub fn filter_for(level: &str) -> EnvFilter {
    let mut filter =
        EnvFilter::try_new(level.to_ascii_lowercase()).unwrap_or_else(|_| EnvFilter::new("info"));
    for quiet in WIRE_LOGGERS {
        filter = filter.add_directive(format!("{quiet}=info").parse().expect("a valid directive"));
    }
    filter
}

fn filter() -> EnvFilter {
    // AWS_LAMBDA_LOG_LEVEL is set by Lambda's logging controls (ApplicationLogLevel).
    EnvFilter::try_from_env("RUST_LOG").unwrap_or_else(|_| {
        filter_for(&std::env::var("AWS_LAMBDA_LOG_LEVEL").unwrap_or_else(|_| "info".into()))
    })
}

/// JSON logs on stdout without ANSI colours or timestamps (Lambda adds its own).
pub fn init_json() {
    let _ = tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter())
        .with_current_span(false)
        .with_ansi(false)
        .without_time()
        .with_target(false)
        .try_init();
}

/// Human-readable logs on stderr, for the CLI.
pub fn init_human() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter())
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}
