//! The console header's alarm states, read from moto's server (`make deps` installs it in
//! `.venv`; the test kit bridges the SDK's CBOR to it): CloudWatch's DescribeAlarms by the names
//! given, in the order ALARM, INSUFFICIENT_DATA, OK; and a stack's alarms are its own
//! resources', never the account's.

use aws_sdk_cloudwatch::types::{ComparisonOperator, StateValue, Statistic};
use paymos_inbox::tools::alarms::{AlarmState, StackAlarms, states};
use paymos_inbox_testkit::moto::Moto;

async fn put_alarm(cloudwatch: &aws_sdk_cloudwatch::Client, name: &str, state: Option<StateValue>) {
    cloudwatch
        .put_metric_alarm()
        .alarm_name(name)
        .namespace("PaymosInbox")
        .metric_name("Errors")
        .statistic(Statistic::Sum)
        .period(60)
        .evaluation_periods(1)
        .threshold(1.0)
        .comparison_operator(ComparisonOperator::GreaterThanOrEqualToThreshold)
        .send()
        .await
        .expect("PutMetricAlarm");
    if let Some(state) = state {
        cloudwatch
            .set_alarm_state()
            .alarm_name(name)
            .state_value(state)
            .state_reason("set by the test")
            .send()
            .await
            .expect("SetAlarmState");
    }
}

#[tokio::test]
async fn the_named_alarms_are_read_alarm_first_then_insufficient_data_then_ok() {
    let moto = Moto::start().await;
    let cloudwatch = aws_sdk_cloudwatch::Client::new(&moto.config().await);
    put_alarm(&cloudwatch, "shop-a-quiet", None).await;
    put_alarm(&cloudwatch, "shop-b-burning", Some(StateValue::Alarm)).await;
    put_alarm(
        &cloudwatch,
        "shop-c-unsure",
        Some(StateValue::InsufficientData),
    )
    .await;
    put_alarm(&cloudwatch, "elsewhere-burning", Some(StateValue::Alarm)).await;

    let names = [
        "shop-a-quiet",
        "shop-b-burning",
        "shop-c-unsure",
        "shop-deleted",
    ]
    .map(str::to_owned);
    let read = states(&cloudwatch, &names).await.expect("DescribeAlarms");
    let seen: Vec<(&str, AlarmState)> = read.iter().map(|a| (a.name.as_str(), a.state)).collect();
    assert_eq!(
        seen,
        [
            ("shop-b-burning", AlarmState::Alarm),
            ("shop-c-unsure", AlarmState::InsufficientData),
            ("shop-a-quiet", AlarmState::Ok),
        ],
        "an alarm not named (elsewhere-burning) is not read; a name CloudWatch lacks is left out"
    );
    assert_eq!(read[0].reason.as_deref(), Some("set by the test"));
    assert!(read[0].since_ms.is_some_and(|t| t > 0), "{read:?}");
}

#[tokio::test]
async fn a_stacks_alarms_are_its_own_resources_never_the_accounts() {
    let moto = Moto::start().await;
    let shared = moto.config().await;
    let cloudwatch = aws_sdk_cloudwatch::Client::new(&shared);
    put_alarm(&cloudwatch, "elsewhere-burning", Some(StateValue::Alarm)).await;
    // A stack with no alarm among its resources (moto's CloudFormation creates no
    // `AWS::CloudWatch::Alarm`; a dashboard it does).
    aws_sdk_cloudformation::Client::new(&shared)
        .create_stack()
        .stack_name("shop")
        .template_body(
            r#"{"Resources": {"Board": {"Type": "AWS::CloudWatch::Dashboard",
                "Properties": {"DashboardName": "shop", "DashboardBody": "{\"widgets\": []}"}}}}"#,
        )
        .send()
        .await
        .expect("CreateStack");
    let read = StackAlarms::new(&shared, "shop")
        .read()
        .await
        .expect("read");
    assert!(read.is_empty(), "the account's alarms were read: {read:?}");

    let missing = StackAlarms::new(&shared, "no-such-stack")
        .read()
        .await
        .expect_err("a stack that does not exist");
    assert!(
        missing
            .to_string()
            .contains("cloudformation:ListStackResources"),
        "{missing}"
    );
}
