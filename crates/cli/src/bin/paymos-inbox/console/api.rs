//! The console's JSON answers: the home page from `exceptions`' own reads, a payment's story
//! from the reads that exist, and the actions through the command line's own functions (so a
//! rule lives once, and a refusal is the domain's own sentence). A bulk job runs in the
//! background, one at a time, and is read back while it runs.
//!
//! Here: the console itself (the stack it resolved, who acts, whether it may write) and its
//! answers. Each page has a module: `home` (what waits, the header, the audit trail), `story`
//! (one payment's story), `jobs` (the bulk jobs) and `act` (the actions).

use std::sync::Mutex;

use hyper::StatusCode;
use paymos_inbox_aws::dynamodb::{DynamoLedger, DynamoResources, WriteGrant};
use serde_json::{Value, json};

use crate::exit::Failure;
use crate::stack::{Stack, StackArgs};

mod act;
mod home;
mod jobs;
mod story;

pub(crate) use home::header;
use jobs::Jobs;

/// An answer: its status and its JSON.
pub struct Answered {
    pub status: StatusCode,
    pub body: Value,
}

impl Answered {
    fn ok(body: Value) -> Self {
        Self {
            status: StatusCode::OK,
            body,
        }
    }

    /// A refusal in the domain's (or the command line's) own words: 409 for a state that does
    /// not allow it, 400 for input.
    fn refused(status: StatusCode, why: impl Into<String>) -> Self {
        Self {
            status,
            body: json!({"refused": why.into()}),
        }
    }

    /// A failure, with the HTTP status its kind decides ([`crate::exit::Kind::answer`], the
    /// exit code's table): 400 for input, 502/503 for a store or an API that failed or asked us
    /// to slow down, 500 for a stack configured wrong.
    fn failed(f: &Failure) -> Self {
        let status = f.status();
        tracing::warn!(status = status.as_u16(), "console: {}", f.message);
        Self::refused(status, said(f))
    }
}

/// A failure's sentence and what to do next, on one line.
fn said(f: &Failure) -> String {
    match &f.next {
        Some(next) => format!("{}: {next}", f.message),
        None => f.message.clone(),
    }
}

/// The resolved stack the console reads and acts on, and who acts.
pub struct Console {
    stack: Stack,
    state: DynamoResources,
    ledger: DynamoLedger,
    actor: String,
    /// Who the audit trail records for this console's actions ([`crate::audit::who`]), or why
    /// it is not known (each action asks again, and is not taken without it).
    identity: String,
    api: Option<paymos::PaymosClient>,
    /// Whether this identity may write the state table (every action writes there, its audit
    /// entry at least), learnt once at start ([`paymos_inbox_aws::dynamodb::may_update`]).
    write: WriteGrant,
    /// Where `events resend` publishes (the stack's bus, or `dev`'s events queue), or why it
    /// cannot (said when the action is asked for).
    publish_to: Result<crate::handoff::Target, Failure>,
    jobs: Mutex<Jobs>,
}

impl Console {
    /// Resolves the stack as every operator command does (`--dev-info`, `--stack-name`, …).
    ///
    /// # Errors
    /// What the command line says when the stack cannot be resolved.
    pub async fn open(
        args: &StackArgs,
        actor: String,
        api: Option<paymos::PaymosClient>,
    ) -> Result<Self, Failure> {
        let stack = args.resolve().await?;
        let state = stack.resources()?;
        let ledger = stack.ledger()?;
        let identity = crate::audit::who(&stack, Some(&actor))
            .await
            .unwrap_or_else(|f| format!("unknown ({})", f.message));
        let table = stack.require(&stack.state, "state-table")?;
        let write = paymos_inbox_aws::dynamodb::may_update(&stack.dynamodb, table).await;
        match &write {
            WriteGrant::Granted => {}
            WriteGrant::Denied(why) => tracing::warn!("console: read-only: {why}"),
            WriteGrant::Unknown(why) => {
                tracing::warn!("console: whether this identity may write is not known: {why}");
            }
        }
        let publish_to = crate::handoff::target(&stack, args, None).await;
        Ok(Self {
            stack,
            state,
            ledger,
            actor,
            identity,
            api,
            write,
            publish_to,
            jobs: Mutex::default(),
        })
    }

    /// Why this console only reads (the identity lacks the state table's write grant), the
    /// sentence its page shows and every action is refused with; `None` when it may act.
    pub fn read_only(&self) -> Option<String> {
        match &self.write {
            WriteGrant::Denied(why) => Some(format!(
                "read-only: this identity may not write the state table (dynamodb:UpdateItem): {why}"
            )),
            WriteGrant::Granted | WriteGrant::Unknown(_) => None,
        }
    }

    /// Why it is not known whether this console may act (the probe's write could not say);
    /// its actions are offered, and a refused one says so.
    pub fn write_unknown(&self) -> Option<String> {
        match &self.write {
            WriteGrant::Unknown(why) => Some(format!(
                "whether this identity may write the state table is not known ({why}): an action it may not take is refused by AWS"
            )),
            WriteGrant::Granted | WriteGrant::Denied(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The console answers a failure with the HTTP status its kind decides, from the
    // exit code's own table, and says it as the command line does (its sentence and next step).
    #[test]
    fn a_failure_is_answered_with_the_status_of_its_kind() {
        use paymos_inbox_core::port::{PortError, PortErrorKind};
        for (failure, status) in [
            (Failure::usage("--id is empty"), StatusCode::BAD_REQUEST),
            (
                Failure::from(PortError::of_kind(
                    "DynamoDB Query",
                    PortErrorKind::Throttled,
                    "ProvisionedThroughputExceededException",
                )),
                StatusCode::SERVICE_UNAVAILABLE,
            ),
            (
                Failure::from(PortError::new(
                    "DynamoDB Query",
                    "dispatch failure: User x is not authorized to perform: dynamodb:Query",
                )),
                StatusCode::BAD_GATEWAY,
            ),
            (
                Failure::from(PortError::refused_credential(
                    "DynamoDB Query",
                    "UnrecognizedClientException",
                )),
                StatusCode::INTERNAL_SERVER_ERROR,
            ),
            (
                Failure::from(PortError::of_kind(
                    "DynamoDB TransactWriteItems",
                    PortErrorKind::Conflict,
                    "TransactionConflict",
                )),
                StatusCode::CONFLICT,
            ),
        ] {
            let answered = Answered::failed(&failure);
            assert_eq!(answered.status, status, "{failure:?}");
            assert_eq!(answered.status, failure.status());
            assert_eq!(answered.body["refused"], json!(said(&failure)));
        }
    }
}
