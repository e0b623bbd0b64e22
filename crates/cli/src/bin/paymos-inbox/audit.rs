//! The audit trail: who took which operator's action, when, why and what it changed. The
//! functions both doors call (`release`, `mark-paid`, `recheck`, `redrive`, `pending --resend`
//! and the console) learn who acts, record the entry before acting ([`begin`]), then what the
//! action answered ([`finish`]); `audit` lists the newest entries (one query of the `actions`
//! list, never a scan).

use std::process::ExitCode;

use paymos_inbox_core::money::record::{ActionKind, OperatorAction};
use paymos_inbox_core::money::write::Stored;
use paymos_inbox_core::roads::fulfil::ResourceStore as _;
use paymos_inbox_lambda::now_ms;

use crate::exit::Failure;
use crate::stack::{Stack, StackArgs};

/// Who acts, as the audit entry, `released_by` and `won_by` record it. On AWS, the caller's
/// verified identity (its ARN, from STS `GetCallerIdentity`: what the credentials are) beside
/// the name given (`--actor`), as `ARN (declared NAME)`; on `dev`'s emulators, `given`, else
/// the login name, else `dev`. Whether the stack is `dev` is decided by `dev`'s info file or
/// loopback endpoints ([`Stack::sts`]), never by which variables are set.
///
/// # Errors
/// STS's failure, said as such (exit 4 and its next step, by its kind): no action is taken
/// when nobody can be named for it.
pub(crate) async fn who(stack: &Stack, given: Option<&str>) -> Result<String, Failure> {
    let Some(sts) = &stack.sts else {
        return Ok(given
            .map(str::to_owned)
            .or_else(|| std::env::var("USER").ok().filter(|u| !u.trim().is_empty()))
            .unwrap_or_else(|| "dev".to_owned()));
    };
    let answered = sts
        .get_caller_identity()
        .send()
        .await
        .map_err(|e| paymos_inbox_aws::aws::port_error("STS GetCallerIdentity", e));
    match answered.map(|identity| identity.arn) {
        Ok(Some(arn)) => Ok(verified(&arn, given)),
        Ok(None) => Err(Failure::unreachable(
            "STS GetCallerIdentity named no ARN: nothing was done (the audit trail names who acts)",
        )),
        Err(e) => {
            let failed = Failure::from(e);
            Err(Failure {
                message: format!(
                    "could not learn who acts from STS GetCallerIdentity, so nothing was done: {}",
                    failed.message
                ),
                ..failed
            })
        }
    }
}

/// The verified identity first, then the name a person gave (where they gave one).
fn verified(arn: &str, given: Option<&str>) -> String {
    match given.filter(|g| !g.trim().is_empty()) {
        Some(name) => format!("{arn} (declared {name})"),
        None => arn.to_owned(),
    }
}

/// Records the entry of an action about to be taken, before it (record before work): begun,
/// by `actor`, now. An action whose entry cannot be written is not taken.
///
/// # Errors
/// No state table named (exit 2), or the store's failure: nothing was done.
pub(crate) async fn begin(
    stack: &Stack,
    kind: ActionKind,
    actor: &str,
    subject: &str,
    reason: Option<&str>,
) -> Result<OperatorAction, Failure> {
    let entry = OperatorAction::begun(kind, (actor, now_ms()), subject, reason);
    let undone = |failure: Failure| Failure {
        message: format!(
            "{kind} of {subject} was not done: its audit entry could not be recorded first: {}",
            failure.message
        ),
        ..failure
    };
    match stack
        .resources()
        .map_err(undone)?
        .write(&[entry.write()])
        .await
    {
        Ok(Stored::Committed) => Ok(entry),
        Ok(Stored::Refused(_)) => Err(undone(Failure::unreachable(format!(
            "an entry {} exists already",
            entry.key()
        )))),
        Err(e) => Err(undone(Failure::from(e))),
    }
}

/// Records what `begun`'s action answered: `said` of what it did, or that it was refused or
/// failed (its failure's own words). Returns the action's answer as it was.
///
/// # Errors
/// The action's own failure, or, when it was done, the entry's: said with what was done (the
/// action stands; its entry still says it began).
pub(crate) async fn finish<T>(
    stack: &Stack,
    begun: &OperatorAction,
    done: Result<T, Failure>,
    said: impl FnOnce(&T) -> (String, Option<u64>),
) -> Result<T, Failure> {
    let (result, count) = match &done {
        Ok(answer) => said(answer),
        Err(f) => (format!("not done: {}", f.message), None),
    };
    let finished = match stack.resources() {
        Ok(state) => state
            .write(&[begun.finish(&result, count)])
            .await
            .map_err(Failure::from),
        Err(f) => Err(f),
    };
    let failure = match finished {
        Ok(Stored::Committed) => {
            tracing::info!(
                action = %begun.kind,
                subject = %begun.subject,
                actor = %begun.actor,
                result = %result,
                "operator action recorded"
            );
            return done;
        }
        Ok(Stored::Refused(_)) => Failure::unreachable("it was finished already"),
        Err(f) => f,
    };
    let message = format!(
        "{} of {} by {} answered ({result}), but its audit entry still says it began: {}",
        begun.kind, begun.subject, begun.actor, failure.message
    );
    tracing::error!(action = %begun.kind, subject = %begun.subject, "{message}");
    match done {
        Err(f) => Err(f),
        Ok(_) => Err(Failure { message, ..failure }),
    }
}

/// The state table an entry will be recorded in, checked before acting (an action whose entry
/// could not be written is not taken).
///
/// # Errors
/// No state table named (exit 2).
pub(crate) fn recordable(stack: &Stack) -> Result<(), Failure> {
    stack.require(&stack.state, "state-table").map(|_| ())
}

#[derive(clap::Args)]
pub struct AuditArgs {
    /// At most this many entries, newest first.
    #[arg(long, default_value_t = 50)]
    limit: usize,
    /// One JSON object per line.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    stack: StackArgs,
}

/// An entry as `audit --json` and the console show it.
pub(crate) fn to_json(a: &OperatorAction) -> serde_json::Value {
    serde_json::json!({
        "kind": a.kind.as_str(),
        "actor": a.actor,
        "at_ms": a.at_ms,
        "reason": a.reason,
        "subject": a.subject,
        "result": a.result,
        "count": a.count,
    })
}

/// The newest `limit` entries of the stack's audit trail.
///
/// # Errors
/// No state table named, or the read's failure.
pub(crate) async fn recent(stack: &Stack, limit: usize) -> Result<Vec<OperatorAction>, Failure> {
    stack
        .resources()?
        .recent_actions(limit)
        .await
        .map_err(Failure::from)
}

/// Exit 0 with the list (none recorded is no failure), as the other read commands.
pub async fn list(args: AuditArgs) -> ExitCode {
    let stack = match args.stack.resolve().await {
        Ok(s) => s,
        Err(e) => return e.report(),
    };
    let found = match recent(&stack, args.limit.max(1)).await {
        Ok(f) => f,
        Err(e) => return e.report(),
    };
    if args.json {
        for a in &found {
            say!("{}", to_json(a));
        }
        return ExitCode::SUCCESS;
    }
    say!(
        "{}, newest first",
        paymos_inbox::counted(found.len(), "action")
    );
    for a in &found {
        let at = i64::try_from(a.at_ms)
            .ok()
            .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
            .map_or_else(|| a.at_ms.to_string(), |t| t.to_string());
        let reason = a
            .reason
            .as_deref()
            .map_or(String::new(), |r| format!("  reason: {r}"));
        say!(
            "{at}  {:<9} {:<24} by {}  → {}{reason}",
            a.kind.as_str(),
            a.subject,
            a.actor,
            a.result
        );
    }
    ExitCode::SUCCESS
}
