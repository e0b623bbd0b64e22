//! One exit-code table for every command, and errors in one or two lines with the next step.
//!
//! | code | meaning |
//! |---|---|
//! | 0 | done |
//! | 1 | something waits for a person, or a check failed |
//! | 2 | bad usage or input: nothing was read or written (validated before any I/O) |
//! | 3 | unproven: nothing failed, something could not be proven (`check`) |
//! | 4 | could not reach AWS, Paymos or the receiver (or it lacks what was named) |
//!
//! A failure prints `error: …` and, when there is one, `  next: …` on stderr; the detail an SDK
//! or a library gave (its error chain) only with `--verbose`.

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

/// Something waits for a person (a finding, a failed `check` step, a refused `release`, an
/// invalid signature).
pub const NEEDS_A_PERSON: u8 = 1;
/// Bad usage or input, found before any I/O: nothing was done.
pub const USAGE: u8 = 2;
/// Nothing failed, something is unproven (`check`).
pub const UNPROVEN: u8 = 3;
/// Could not reach AWS, Paymos, an emulator or the receiver, or it lacks what was named.
pub const UNREACHABLE: u8 = 4;

/// The table, as every command's `--help` ends.
pub const TABLE: &str = "\
Exit codes:
  0  done
  1  something waits for a person, or a check failed
  2  bad usage or input (nothing was done)
  3  unproven: nothing failed, something could not be proven (check)
  4  could not reach AWS, Paymos or the receiver, or it lacks what was named";

static VERBOSE: AtomicBool = AtomicBool::new(false);

/// `--verbose`: failures print their detail.
/// clap's reading of an id a person types (an invoice, an order, an actor, a reason): the
/// domain's rule ([`paymos_inbox_core::money::change::named`]), so a blank one (an unset shell
/// variable) is bad input, exit 2, before anything is read or written.
///
/// # Errors
/// When `text` is empty or only whitespace.
pub fn named(text: &str) -> Result<String, String> {
    paymos_inbox_core::money::change::named(text)
        .map(str::to_owned)
        .ok_or_else(|| {
            "is empty or only whitespace: it names nothing (an unset shell variable?)".to_owned()
        })
}

/// An id a person types (an order, an invoice, a project, an event): [`named`], and never with
/// spaces around it. Ids are matched exactly, so `" 9608 "` would be another order than the
/// `9608` a webhook names, and ship again.
///
/// # Errors
/// When `text` names nothing or has spaces around it.
pub fn id(text: &str) -> Result<String, String> {
    let id = named(text)?;
    if id.trim() == id {
        Ok(id)
    } else {
        Err(format!(
            "has spaces around it: ids are matched exactly, so {id:?} is not {:?}; give it without them",
            id.trim()
        ))
    }
}

pub fn set_verbose(on: bool) {
    VERBOSE.store(on, Ordering::Relaxed);
}

/// A command that could not do what it was asked: its exit code, one line saying what, the
/// next step, and the detail behind it (printed only with `--verbose`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub code: u8,
    pub message: String,
    pub next: Option<String>,
    pub detail: Option<String>,
}

impl Failure {
    /// Bad usage or input (exit 2).
    pub fn usage(message: impl Into<String>) -> Self {
        Self {
            code: USAGE,
            message: message.into(),
            next: None,
            detail: None,
        }
    }

    /// Could not reach what the command needs (exit 4), said as given.
    pub fn unreachable(message: impl Into<String>) -> Self {
        Self {
            code: UNREACHABLE,
            message: message.into(),
            next: None,
            detail: None,
        }
    }

    #[must_use]
    pub fn next(mut self, step: impl Into<String>) -> Self {
        self.next = Some(step.into());
        self
    }

    /// The lines printed on stderr.
    pub fn lines(&self, verbose: bool) -> Vec<String> {
        let mut out = vec![format!("error: {}", self.message)];
        if let Some(next) = &self.next {
            out.push(format!("  next: {next}"));
        }
        match &self.detail {
            Some(detail) if verbose => out.push(format!("  detail: {detail}")),
            Some(_) => out.push("  (--verbose shows the detail)".to_owned()),
            None => {}
        }
        out
    }

    /// Prints the failure on stderr and answers its exit code.
    pub fn report(&self) -> ExitCode {
        for line in self.lines(VERBOSE.load(Ordering::Relaxed)) {
            tell!("{line}");
        }
        ExitCode::from(self.code)
    }
}

/// What a command can fail with: a [`Failure`] as it is, any other error by its text
/// ([`classify`]).
pub trait IntoFailure {
    fn into_failure(self) -> Failure;
}

impl IntoFailure for Failure {
    fn into_failure(self) -> Failure {
        self
    }
}

impl<E: std::fmt::Display> IntoFailure for E {
    fn into_failure(self) -> Failure {
        classify(&self.to_string())
    }
}

/// An error from I/O (AWS, Paymos' API, an emulator, a file), as its text: classified, and
/// said in one line with the next step; the whole text is the detail.
impl From<String> for Failure {
    fn from(text: String) -> Self {
        classify(&text)
    }
}

impl From<&str> for Failure {
    fn from(text: &str) -> Self {
        classify(text)
    }
}

/// The kinds of I/O error a person can act on: what the text contains (lower case), what to
/// say, and the next step. The first that matches wins.
const KINDS: &[(&[&str], &str, &str)] = &[
    (
        &[
            "no credentials",
            "credentialsnotloaded",
            "credentials not loaded",
            "failed to load credentials",
            "could not load credentials",
            "no providers in chain provided credentials",
            "while loading credentials",
        ],
        "no AWS credentials found",
        "sign in (`aws sso login --profile NAME`, then --profile NAME), or set AWS_PROFILE, \
         or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
    ),
    (
        &[
            "expiredtoken",
            "unrecognizedclientexception",
            "invalidclienttokenid",
            "security token included in the request is invalid",
            "signaturedoesnotmatch",
            "token has expired",
        ],
        "AWS refused the credentials (expired or invalid)",
        "sign in again (`aws sso login`), or check the profile's keys",
    ),
    (
        &["accessdenied", "is not authorized to perform"],
        "AWS denied the call",
        "the identity needs the operator's permissions in docs/security.md",
    ),
    (
        &[
            "resourcenotfoundexception",
            "cannot do operations on a non-existent table",
        ],
        "the table does not exist here",
        "check --state-table/--deliveries-table (or the stack's outputs) and --region",
    ),
    (
        &["does not have the specified index"],
        "the table has no such index yet (the stack is older than this command, or DynamoDB is \
         still building it)",
        "update the stack (`sam deploy`), wait until `aws dynamodb describe-table` shows the \
         index ACTIVE, then run `paymos-inbox exceptions --reindex` once",
    ),
    (
        &[
            "nonexistentqueue",
            "queuedoesnotexist",
            "queue does not exist",
        ],
        "the queue does not exist here",
        "check the queue URL (or the stack's outputs) and --region",
    ),
    (
        &["is not installed", "no `node` on path", "no `java` on path"],
        "",
        "run `make deps` (npm ci) in the project folder, or pass --dynamodb-endpoint and \
         --sqs-endpoint of running emulators",
    ),
    (
        &[
            "dispatch failure",
            "connection refused",
            "tcp connect",
            "error trying to connect",
            "dns error",
            "failed to lookup address",
            "timed out",
            "timeout",
            "connection reset",
            "error sending request",
            "connect error",
            "io error",
        ],
        "could not reach the service (no connection or no answer)",
        "check the network, --region and any endpoint (--dynamodb-endpoint, AWS_ENDPOINT_URL_*); \
         for `dev`'s emulators, is `paymos-inbox dev` still running?",
    ),
];

/// What an error's text says, in one line with the next step (exit 4). The SDKs' errors carry
/// their whole chain (`DisplayErrorContext`) and debug structures; the person reading needs
/// the kind and what to do, and the text itself only with `--verbose`.
pub fn classify(text: &str) -> Failure {
    classify_with(text, |var| std::env::var(var).ok())
}

/// The AWS files an environment variable names that do not exist: the SDK then finds no
/// profile, and says so only in a warning (silenced: the command says it, once).
fn missing_aws_files(lookup: &impl Fn(&str) -> Option<String>) -> Vec<String> {
    ["AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"]
        .into_iter()
        .filter_map(|var| {
            let path = lookup(var).filter(|p| !p.trim().is_empty())?;
            (!std::path::Path::new(&path).exists())
                .then(|| format!("{var} names {path}, which does not exist"))
        })
        .collect()
}

fn classify_with(text: &str, lookup: impl Fn(&str) -> Option<String>) -> Failure {
    let lower = text.to_ascii_lowercase();
    let first = text.lines().next().unwrap_or(text);
    // What was being done, when the text says it first (`--stack-name shop: …`).
    let context = text
        .split_once(": ")
        .map(|(head, _)| head)
        .filter(|h| h.len() <= 60 && !h.contains('(') && !h.contains('{'))
        .map(|h| format!("{h}: "))
        .unwrap_or_default();
    match KINDS
        .iter()
        .find(|(needles, _, _)| needles.iter().any(|n| lower.contains(n)))
    {
        Some((_, said, next)) => {
            let mut message = if said.is_empty() {
                first.to_owned()
            } else {
                format!("{context}{said}")
            };
            let missing = missing_aws_files(&lookup);
            if *said == "no AWS credentials found" && !missing.is_empty() {
                message = format!("{message}: {}", missing.join("; "));
            }
            Failure {
                code: UNREACHABLE,
                message,
                next: Some((*next).to_owned()),
                detail: Some(text.to_owned()),
            }
        }
        None => {
            let short: String = first.chars().take(240).collect();
            Failure {
                code: UNREACHABLE,
                detail: (short != text).then(|| text.to_owned()),
                message: short,
                next: None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Issue 41: with AWS_CONFIG_FILE naming a missing file, the SDK's warnings came first and
    // the command never said why no profile was found.
    #[test]
    fn no_credentials_names_the_aws_file_that_does_not_exist() {
        let text = "--stack-name shop: dispatch failure: other: the credential provider was not enabled: no providers in chain provided credentials";
        let with = |vars: &'static [(&'static str, &'static str)]| {
            classify_with(text, move |var| {
                vars.iter()
                    .find(|(k, _)| *k == var)
                    .map(|(_, v)| (*v).to_owned())
            })
            .message
        };
        assert_eq!(
            with(&[("AWS_CONFIG_FILE", "/nowhere/config")]),
            "--stack-name shop: no AWS credentials found: AWS_CONFIG_FILE names /nowhere/config, which does not exist"
        );
        assert_eq!(
            with(&[("AWS_CONFIG_FILE", "/")]),
            "--stack-name shop: no AWS credentials found",
            "a file that exists is not named"
        );
        assert_eq!(with(&[]), "--stack-name shop: no AWS credentials found");
    }

    #[test]
    fn an_sdk_dump_becomes_one_line_with_the_next_step_and_the_dump_only_when_verbose() {
        let dump = "--stack-name shop: dispatch failure: io error: error trying to connect: tcp connect error: Connection refused (os error 111) DispatchFailure(DispatchFailure { source: ConnectorError { kind: Io } })";
        let f = Failure::from(dump.to_owned());
        assert_eq!(f.code, UNREACHABLE);
        assert_eq!(
            f.message,
            "--stack-name shop: could not reach the service (no connection or no answer)"
        );
        let quiet = f.lines(false);
        assert_eq!(quiet.len(), 3, "{quiet:?}");
        assert!(
            quiet.iter().all(|l| !l.contains("DispatchFailure")),
            "{quiet:?}"
        );
        assert!(quiet[1].starts_with("  next: "));
        assert!(f.lines(true)[2].contains("DispatchFailure {"));
    }

    #[test]
    fn an_id_is_refused_blank_or_with_spaces_around_it() {
        assert_eq!(id("9608"), Ok("9608".to_owned()));
        assert_eq!(id("order 9608"), Ok("order 9608".to_owned()));
        for bad in ["", "  ", " 9608 ", "9608\t", "\n9608"] {
            assert!(id(bad).is_err(), "{bad:?}");
        }
        assert!(id(" 9608 ").unwrap_err().contains("\"9608\""));
    }

    #[test]
    fn each_kind_of_aws_error_is_named() {
        for (text, says) in [
            (
                "dispatch failure: other: the credential provider was not enabled: no providers in chain provided credentials",
                "no AWS credentials found",
            ),
            (
                "--stack-name shop: dispatch failure: other: an error occurred while loading credentials: failed to load IMDS session token (DispatchFailure(DispatchFailure { source: ConnectorError { kind: Other(None) } }))",
                "--stack-name shop: no AWS credentials found",
            ),
            (
                "service error: UnrecognizedClientException: The security token included in the request is invalid.",
                "AWS refused the credentials",
            ),
            (
                "service error: AccessDeniedException: User: arn:aws:iam::1:user/x is not authorized to perform: dynamodb:Query",
                "AWS denied the call",
            ),
            (
                "service error: ResourceNotFoundException: Cannot do operations on a non-existent table",
                "the table does not exist here",
            ),
            (
                "service error: QueueDoesNotExist: The specified queue does not exist.",
                "the queue does not exist here",
            ),
            (
                "DynamoDB Query: service error: ValidationException: The table does not have the specified index: waiting",
                "the table has no such index yet",
            ),
        ] {
            let f = classify(text);
            assert!(f.message.contains(says), "{text} → {}", f.message);
            assert_eq!(f.code, UNREACHABLE);
            assert!(f.next.is_some());
        }
    }

    #[test]
    fn a_plain_message_is_kept_whole_and_has_no_hidden_detail() {
        let f = classify("Paymos API client: a base URL must be https");
        assert_eq!(f.message, "Paymos API client: a base URL must be https");
        assert_eq!(f.detail, None);
        assert_eq!(f.lines(false).len(), 1);
    }
}
