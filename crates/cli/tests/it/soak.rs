//! The fault soak, shortened: a few hundred deliveries with 5 % of port calls failing (half of
//! them after reaching the service) and 1 % crashing the invocation. The full run
//! (`paymos-inbox soak`, 10,000 deliveries) is documented in the README.

use paymos_inbox::tools::soak::{SoakOptions, run};

use paymos_inbox_testkit::endpoint_urls;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn nothing_is_lost_and_nothing_doubled_under_injected_faults() {
    let (dynamodb_endpoint, sqs_endpoint) = endpoint_urls();
    let report = run(SoakOptions {
        dynamodb_endpoint,
        sqs_endpoint,
        deliveries: 400,
        fail_rate: 0.05,
        crash_rate: 0.01,
        concurrency: 16,
        seed: 7,
        progress: std::sync::Arc::default(),
    })
    .await
    .expect("the soak runs");
    assert!(report.violations.is_empty(), "{:#?}", report.violations);
    assert!(
        report.processed + report.given_up >= report.deliveries,
        "every delivery but those whose sender gave up before any record was processed: {report:?}"
    );
    assert!(
        report.sandbox_signed > 0
            && report.sandbox_reused > 0
            && report.silent_payments > 0
            && report.refunds > 0
            && report.hostile_bodies > 0
            && report.second_invoices > 0
            && report.given_up > 0,
        "the edge cases were exercised: {report:?}"
    );
    assert!(
        report.injected_failures + report.injected_lost_replies > 0 && report.injected_crashes > 0,
        "faults were injected: {report:?}"
    );
    assert!(report.fulfilled > 0 && report.credited > 0 && report.sends > report.deliveries);
}
