//! Logging set-up: JSON lines for Lambda (CloudWatch parses them), readable lines for the CLI.

use tracing_subscriber::EnvFilter;

fn filter() -> EnvFilter {
    // AWS_LAMBDA_LOG_LEVEL is set by Lambda's advanced logging controls; RUST_LOG wins locally.
    EnvFilter::try_from_default_env()
        .or_else(|_| {
            EnvFilter::try_new(
                std::env::var("AWS_LAMBDA_LOG_LEVEL")
                    .unwrap_or_else(|_| "info".into())
                    .to_lowercase(),
            )
        })
        .unwrap_or_else(|_| EnvFilter::new("info"))
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
