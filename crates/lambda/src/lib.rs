//! paymos-inbox's Lambda functions: settings read once at start-up ([`config`]), logs and
//! metrics ([`telemetry`]), one trace per payment ([`trace`]), and trigger translation only: a function-URL request into the ingest use case and its answer
//! back into an HTTP response; an SQS batch into the fulfil use case and a batch response.

pub mod config;
pub mod deliver;
pub mod fulfil;
pub mod ingest;
pub mod publish;
pub mod sweep;
pub mod telemetry;
pub mod trace;

/// The current Unix time in milliseconds (the only clock the handlers read).
#[must_use]
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
