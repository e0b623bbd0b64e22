//! A deployed stack's alarms and their states, for the console's header: the names of the
//! stack's own `AWS::CloudWatch::Alarm` resources (CloudFormation's ListStackResources), read
//! with CloudWatch's DescribeAlarms by those names, never every alarm of the account.

use std::fmt;

/// The resource type whose physical ids are the stack's alarm names.
const ALARM_TYPE: &str = "AWS::CloudWatch::Alarm";

/// The most alarm names one DescribeAlarms call takes (CloudWatch's bound).
const NAMES_PER_CALL: usize = 100;

/// An alarm's state, in the order a person reads them: what alarms first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum AlarmState {
    Alarm,
    InsufficientData,
    Ok,
    /// A state this version does not know (CloudWatch added one): shown last, never dropped.
    Unknown,
}

impl AlarmState {
    /// CloudWatch's own word for it.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Alarm => "ALARM",
            Self::InsufficientData => "INSUFFICIENT_DATA",
            Self::Ok => "OK",
            Self::Unknown => "UNKNOWN",
        }
    }

    fn of(value: Option<&aws_sdk_cloudwatch::types::StateValue>) -> Self {
        use aws_sdk_cloudwatch::types::StateValue;
        match value {
            Some(StateValue::Alarm) => Self::Alarm,
            Some(StateValue::InsufficientData) => Self::InsufficientData,
            Some(StateValue::Ok) => Self::Ok,
            _ => Self::Unknown,
        }
    }
}

impl fmt::Display for AlarmState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One alarm as CloudWatch reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alarm {
    pub name: String,
    pub state: AlarmState,
    /// CloudWatch's sentence for the state (`Threshold Crossed: …`).
    pub reason: Option<String>,
    /// When it entered that state, in Unix milliseconds.
    pub since_ms: Option<u64>,
}

/// Why the alarms could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AlarmsError {
    /// The stack's resources could not be listed (`cloudformation:ListStackResources`).
    #[error("the resources of stack '{stack}' (cloudformation:ListStackResources): {why}")]
    Resources { stack: String, why: String },
    /// The alarms could not be described (`cloudwatch:DescribeAlarms`).
    #[error("the stack's alarms (cloudwatch:DescribeAlarms): {0}")]
    Describe(String),
}

/// A deployed stack's alarms: its name and the clients that read them.
#[derive(Clone)]
pub struct StackAlarms {
    stack: String,
    cloudformation: aws_sdk_cloudformation::Client,
    cloudwatch: aws_sdk_cloudwatch::Client,
}

impl StackAlarms {
    /// The alarms of stack `stack`, read with the credentials and region of `shared`.
    #[must_use]
    pub fn new(shared: &aws_config::SdkConfig, stack: &str) -> Self {
        Self {
            stack: stack.to_owned(),
            cloudformation: aws_sdk_cloudformation::Client::new(shared),
            cloudwatch: aws_sdk_cloudwatch::Client::new(shared),
        }
    }

    /// Every alarm of the stack with its state, in [`states`]' order.
    ///
    /// # Errors
    /// When the stack's resources cannot be listed, or the alarms described.
    pub async fn read(&self) -> Result<Vec<Alarm>, AlarmsError> {
        let mut names = Vec::new();
        let mut pages = self
            .cloudformation
            .list_stack_resources()
            .stack_name(&self.stack)
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| AlarmsError::Resources {
                stack: self.stack.clone(),
                why: aws_sdk_cloudformation::error::DisplayErrorContext(&e).to_string(),
            })?;
            names.extend(alarm_names(page.stack_resource_summaries().iter().map(
                |r| {
                    (
                        r.resource_type().unwrap_or_default(),
                        r.physical_resource_id(),
                    )
                },
            )));
        }
        states(&self.cloudwatch, &names).await
    }
}

/// The alarm names among a stack's resources (type, physical id): an alarm's physical id is
/// its name; one not created yet has none.
pub fn alarm_names<'a>(
    resources: impl IntoIterator<Item = (&'a str, Option<&'a str>)>,
) -> Vec<String> {
    resources
        .into_iter()
        .filter(|(kind, _)| *kind == ALARM_TYPE)
        .filter_map(|(_, id)| id.filter(|i| !i.is_empty()).map(str::to_owned))
        .collect()
}

/// The states of the alarms named `names` (DescribeAlarms by name, at most 100 a call), those
/// in ALARM first, then INSUFFICIENT_DATA, then OK, each state's by name. A name CloudWatch
/// does not know is left out (the alarm was deleted outside the stack).
///
/// # Errors
/// When a DescribeAlarms call fails.
pub async fn states(
    cloudwatch: &aws_sdk_cloudwatch::Client,
    names: &[String],
) -> Result<Vec<Alarm>, AlarmsError> {
    let mut found = Vec::new();
    for chunk in names.chunks(NAMES_PER_CALL) {
        let mut pages = cloudwatch
            .describe_alarms()
            .set_alarm_names(Some(chunk.to_vec()))
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| {
                AlarmsError::Describe(
                    aws_sdk_cloudwatch::error::DisplayErrorContext(&e).to_string(),
                )
            })?;
            found.extend(page.metric_alarms().iter().map(|a| {
                Alarm {
                    name: a.alarm_name().unwrap_or_default().to_owned(),
                    state: AlarmState::of(a.state_value()),
                    reason: a.state_reason().map(str::to_owned),
                    since_ms: a
                        .state_updated_timestamp()
                        .and_then(|t| t.to_millis().ok())
                        .and_then(|t| u64::try_from(t).ok()),
                }
            }));
        }
    }
    found.sort_by(|a, b| (a.state, &a.name).cmp(&(b.state, &b.name)));
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_stacks_alarm_resources_name_alarms() {
        let names = alarm_names([
            ("AWS::CloudWatch::Alarm", Some("shop-DeadLetters")),
            ("AWS::SQS::Queue", Some("https://sqs/queue")),
            ("AWS::CloudWatch::Dashboard", Some("shop-board")),
            ("AWS::CloudWatch::Alarm", None),
            ("AWS::CloudWatch::Alarm", Some("shop-Errors")),
        ]);
        assert_eq!(names, ["shop-DeadLetters", "shop-Errors"]);
    }

    #[test]
    fn states_read_in_the_order_alarm_insufficient_data_ok() {
        let mut states = [
            AlarmState::Ok,
            AlarmState::Unknown,
            AlarmState::Alarm,
            AlarmState::InsufficientData,
        ];
        states.sort();
        assert_eq!(
            states.map(AlarmState::as_str),
            ["ALARM", "INSUFFICIENT_DATA", "OK", "UNKNOWN"]
        );
    }
}
