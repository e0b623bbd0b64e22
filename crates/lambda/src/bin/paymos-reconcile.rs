//! The scheduled reconciliation (EventBridge Scheduler, hourly by default): Paymos' paid
//! invoices of the last hours (or since the last clean run ended, when that is earlier: runs
//! that failed leave no gap) against the fulfilments here, and invoices still open here
//! re-read at Paymos. Anything that needs a person (MISSING not applied, DOUBLE, DUPLICATE
//! PAYMENT, UNKNOWN) or an API failure fails the invocation, which the template alarms on. The
//! window is read an hour's slice at a time; a run whose time runs out keeps where it got to,
//! and the next one continues that window from there (`reconciliation cut short` in the log,
//! `ReconcileBehindSeconds` growing until a run finishes a window).

use std::time::{Duration, Instant};

use lambda_runtime::{Error, LambdaEvent, service_fn};
use paymos_inbox_aws::aws::load_config;
use paymos_inbox_aws::dynamodb::DynamoResources;
use paymos_inbox_aws::paymos_api::PaymosApi;
use paymos_inbox_aws::secrets::paymos_client;
use paymos_inbox_core::money::change::Applied;
use paymos_inbox_core::roads::fulfil::Fulfil;
use paymos_inbox_core::roads::reconcile::{Progress, Report, scheduled};
use paymos_inbox_lambda::config::{PAYMOS_API_SECRETS_ID, ReconcileConfig};
use paymos_inbox_lambda::telemetry::metric;

#[tokio::main]
async fn main() -> Result<(), Error> {
    paymos_inbox_lambda::telemetry::init_json();
    paymos_inbox_lambda::telemetry::init_metrics("reconcile");
    let config = ReconcileConfig::from_lookup(|k| std::env::var(k).ok())?;
    let aws = load_config(Duration::from_secs(3), 3).await;
    let dynamodb = aws_sdk_dynamodb::Client::new(&aws);
    let api = paymos_client(
        &aws_sdk_secretsmanager::Client::new(&aws),
        &config.api_secrets_id,
        PAYMOS_API_SECRETS_ID,
        &config.api_base_url,
        Duration::from_secs(10),
        2,
    )
    .await
    .map_err(|e| {
        paymos_inbox_lambda::telemetry::misconfigured_at_start(PAYMOS_API_SECRETS_ID, &e);
        Error::from(e.to_string())
    })?;
    // Each read of the reconciliation may take the client's two retries of 10 s.
    let api = PaymosApi::patient(api);
    if let Err(e) = api.prove(config.environment).await {
        paymos_inbox_lambda::telemetry::misconfigured_at_start(PAYMOS_API_SECRETS_ID, &e);
        return Err(Error::from(e.to_string()));
    }
    let fulfil = Fulfil::new(DynamoResources::new(
        dynamodb.clone(),
        config.state_table.clone(),
        config.deliveries_table.clone(),
    ))
    .for_environment(config.environment)
    .for_projects(config.projects.clone());
    let (api, fulfil, config) = (&api, &fulfil, &config);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<serde_json::Value>| async move {
        let now_ms = paymos_inbox_lambda::now_ms();
        let deadline_ms = event.context.deadline;
        paymos_inbox_lambda::telemetry::invocation_started();
        behind(fulfil.store(), now_ms).await;
        let found = |outcome: &'static str, n: usize| {
            if paymos_inbox_lambda::telemetry::writes(metric::RECONCILE_FINDINGS) {
                metrics::counter!(metric::RECONCILE_FINDINGS, metric::OUTCOME => outcome)
                    .increment(n as u64);
            }
        };
        // The last `window_hours`, or from where the last clean run ended when that is earlier;
        // or the rest of the window a run cut short left.
        let (report, progress) = match scheduled(
            api,
            fulfil,
            (config.window_hours, config.apply),
            now_ms,
            time_for_another(deadline_ms),
        )
        .await
        {
            Ok(done) => done,
            Err(e) => {
                found("api_error", 1);
                paymos_inbox_lambda::telemetry::flush_metrics();
                tracing::error!(error = %e, "reconciliation could not run");
                return Err(Error::from(e));
            }
        };
        found("missing", report.missing.len());
        found("applied", report
                .applied
                .values()
                .filter(|a| **a == Ok(Applied::Fulfilled))
                .count());
        found("double", report.double.len());
        found("duplicate_payment", report.duplicate_payments.len());
        found("unknown", report.unknown.len());
        found("paid_late", report.paid_late.len());
        found("refunded", report.refunded.len());
        found("unreadable", report.unreadable.len());
        paymos_inbox_lambda::telemetry::flush_metrics();
        log_run(&report, &progress);
        let (from, now) = progress.window;
        if !report.clean() {
            return Err(Error::from(format!(
                "reconciliation needs a person: {} missing ({} applied), {} double, {} duplicate payments, {} shipped otherwise, {} unknown, {} paid late, {} unreadable; run `paymos-inbox reconcile --from {}h` for the list",
                report.missing.len(),
                report.applied.len(),
                report.double.len(),
                report.duplicate_payments.len(),
                report.shipped_otherwise.len(),
                report.unknown.len(),
                report.paid_late.len(),
                report.unreadable.len(),
                (now - from).div_ceil(3600)
            )));
        }
        Ok::<_, Error>(serde_json::to_value(&report)?)
    }))
    .await
}

/// What a run read and found, in its log; a run cut short says so, and where it got to.
fn log_run(report: &Report, progress: &Progress) {
    let (from, now) = progress.window;
    if !progress.finished() {
        tracing::warn!(
            from,
            to = now,
            done_until = progress.done_until,
            "reconciliation cut short: the next run continues the window from done_until"
        );
    }
    tracing::info!(
        paid_at_paymos = report.paid_at_paymos,
        matched = report.matched,
        missing = report.missing.len(),
        applied = report.applied.len(),
        double = report.double.len(),
        duplicate_payments = report.duplicate_payments.len(),
        shipped_otherwise = report.shipped_otherwise.len(),
        unknown = report.unknown.len(),
        paid_late = report.paid_late.len(),
        refunded = report.refunded.len(),
        unreadable = report.unreadable.len(),
        open_rechecked = report.open_rechecked,
        from,
        to = now,
        "reconciliation done"
    );
}

/// Left of an invocation's time at its end, besides the longest slice read so far: the
/// progress writes and the re-read of the invoices still open, after the window's last slice.
const MARGIN: Duration = Duration::from_secs(60);

/// Whether an invocation ending at `deadline_ms` (Unix ms) has time for another slice: as long
/// as the longest one so far (the first one's time counts from here), and [`MARGIN`].
fn time_for_another(deadline_ms: u64) -> impl FnMut() -> bool + Send {
    let (mut last, mut longest) = (Instant::now(), Duration::ZERO);
    move || {
        let now = Instant::now();
        longest = longest.max(now.duration_since(last));
        last = now;
        let left = deadline_ms.saturating_sub(paymos_inbox_lambda::now_ms());
        Duration::from_millis(left) > longest + MARGIN
    }
}

/// How far behind the runs are, whatever this one will find (`ReconcileBehindSeconds`): runs cut
/// short (the function's time, Paymos' API down) show here, apart from findings. A store that
/// cannot say is the run's to find out.
async fn behind(store: &DynamoResources, now_ms: u64) {
    if let Ok(Some(behind)) = paymos_inbox_core::roads::reconcile::behind(store, now_ms).await {
        metrics::gauge!(metric::RECONCILE_BEHIND).set(behind as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A run stops before a slice when the invocation's time left is under the margin the
    // open invoices' re-read and the writes need after the window's last slice.
    #[test]
    fn another_slice_only_with_more_than_the_margin_left() {
        let now = paymos_inbox_lambda::now_ms();
        assert!(time_for_another(now + 240_000)(), "four minutes left");
        assert!(!time_for_another(now + 50_000)(), "under a minute left");
        assert!(
            !time_for_another(now.saturating_sub(1))(),
            "past the deadline"
        );
    }
}
