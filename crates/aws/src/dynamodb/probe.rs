//! Whether the caller may write a table, learnt without writing anything: an update of a key
//! no item has, under a condition no item can meet. IAM decides before the condition is read,
//! so the refusal says which: the condition's (the grant exists) or IAM's (it does not).

use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata as _, SdkError};
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;

use super::item::s;

/// The key the probe names: nothing of this project writes it.
pub const PROBE_KEY: &str = "write-probe#never-written";

/// What the probe learnt about the caller's `dynamodb:UpdateItem` on a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteGrant {
    /// The condition refused the update: IAM let it through.
    Granted,
    /// IAM refused it: AWS's own sentence (the identity, the action, the table).
    Denied(String),
    /// Neither: unreachable, throttled, a credential refused outright, no such table.
    Unknown(String),
}

/// Whether the caller may `dynamodb:UpdateItem` on `table` (hash key `pk`), asked by an update
/// that cannot succeed: the key never exists and the condition contradicts itself.
pub async fn may_update(client: &aws_sdk_dynamodb::Client, table: &str) -> WriteGrant {
    let answer = client
        .update_item()
        .table_name(table)
        .key("pk", s(PROBE_KEY))
        .update_expression("SET #probe = :probe")
        .condition_expression("attribute_exists(pk) AND attribute_not_exists(pk)")
        .expression_attribute_names("#probe", "write_probe")
        .expression_attribute_values(":probe", s("never"))
        .send()
        .await;
    match answer {
        // Unreachable: no item meets the condition.
        Ok(_) => WriteGrant::Granted,
        Err(e) => grant_of(&e),
    }
}

/// What the probe's refusal means: the condition's is a grant, IAM's (`AccessDenied…`) is
/// none, and any other failure leaves it unknown.
fn grant_of<R: std::fmt::Debug>(e: &SdkError<UpdateItemError, R>) -> WriteGrant {
    let said = |e: &UpdateItemError| {
        e.message()
            .map_or_else(|| DisplayErrorContext(e).to_string(), str::to_owned)
    };
    match e.as_service_error() {
        Some(UpdateItemError::ConditionalCheckFailedException(_)) => WriteGrant::Granted,
        Some(service) => match service.code() {
            Some("ConditionalCheckFailedException") => WriteGrant::Granted,
            Some("AccessDeniedException" | "AccessDenied") => WriteGrant::Denied(said(service)),
            Some(code) => WriteGrant::Unknown(format!("{code}: {}", said(service))),
            None => WriteGrant::Unknown(said(service)),
        },
        None => WriteGrant::Unknown(DisplayErrorContext(e).to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodb::error::ErrorMetadata;
    use aws_sdk_dynamodb::types::error::ConditionalCheckFailedException;

    fn refused(code: &str, message: &str) -> SdkError<UpdateItemError, ()> {
        SdkError::service_error(
            UpdateItemError::generic(ErrorMetadata::builder().code(code).message(message).build()),
            (),
        )
    }

    #[test]
    fn the_conditions_refusal_is_a_grant_iams_is_none_and_anything_else_is_unknown() {
        let condition = SdkError::service_error(
            UpdateItemError::ConditionalCheckFailedException(
                ConditionalCheckFailedException::builder()
                    .message("The conditional request failed")
                    .build(),
            ),
            (),
        );
        assert_eq!(grant_of(&condition), WriteGrant::Granted);
        assert_eq!(
            grant_of(&refused(
                "ConditionalCheckFailedException",
                "The conditional request failed"
            )),
            WriteGrant::Granted
        );
        let denied = "User: arn:aws:sts::1:assumed-role/viewer/ann is not authorized to perform: dynamodb:UpdateItem on resource: arn:aws:dynamodb:eu-west-1:1:table/state";
        assert_eq!(
            grant_of(&refused("AccessDeniedException", denied)),
            WriteGrant::Denied(denied.to_owned())
        );
        for code in [
            "ThrottlingException",
            "ResourceNotFoundException",
            "UnrecognizedClientException",
            "ExpiredTokenException",
        ] {
            match grant_of(&refused(code, "said")) {
                WriteGrant::Unknown(why) => assert_eq!(why, format!("{code}: said")),
                other => panic!("{code}: {other:?}"),
            }
        }
        let unreachable: SdkError<UpdateItemError, ()> =
            SdkError::timeout_error("no answer in 3 s");
        assert!(
            matches!(grant_of(&unreachable), WriteGrant::Unknown(why) if why.contains("no answer in 3 s")),
            "{:?}",
            grant_of(&unreachable)
        );
    }
}
