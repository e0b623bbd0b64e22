//! One exit-code table for every command, and errors in one or two lines with the next step.
//!
//! | code | meaning |
//! |---|---|
//! | 0 | done |
//! | 1 | something waits for a person, or a check failed |
//! | 2 | bad usage or input: nothing was read or written (validated before any I/O) |
//! | 3 | unproven: nothing failed, something could not be proven (`check`) |
//! | 4 | could not reach AWS, Paymos or the receiver, could not read its answer, or it lacks what was named |
//!
//! A failure has a [`Kind`]; the kind alone decides the exit code and the console's HTTP status
//! ([`Kind::answer`], one table for both doors). A port's error ([`PortError`]) keeps its kind
//! to here; only text from something we did not write is classified ([`classify`]).
//!
//! A failure prints `error: …` and, when there is one, `  next: …` on stderr; the detail an SDK
//! or a library gave (its error chain) only with `--verbose`.

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

use paymos_inbox_core::port::{PortError, PortErrorKind};

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
  4  could not reach AWS, Paymos or the receiver, could not read its answer,
     or it lacks what was named";

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

/// What kind of failure a command met: it alone decides the exit code and the console's HTTP
/// status ([`Kind::answer`], the one table for both doors).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Bad usage or input, found before any I/O: nothing was done.
    Usage,
    /// Something waits for a person (a body that expired, a refusal to act on).
    NeedsAPerson,
    /// A port of ours (DynamoDB, SQS, STS, the Paymos API, …) failed, of this kind.
    Port(PortErrorKind),
    /// Could not reach what the command needs, said as text by something we did not write
    /// ([`classify`]), or as a sentence of ours.
    Unreachable,
}

impl Kind {
    /// The exit code and the console's HTTP status of a failure of this kind. No wildcard: a
    /// new kind of port error does not compile until it is given its row.
    #[must_use]
    pub fn answer(self) -> (u8, hyper::StatusCode) {
        use hyper::StatusCode;
        match self {
            Self::Usage => (USAGE, StatusCode::BAD_REQUEST),
            Self::NeedsAPerson => (NEEDS_A_PERSON, StatusCode::CONFLICT),
            Self::Port(kind) => match kind {
                PortErrorKind::Throttled => (UNREACHABLE, StatusCode::SERVICE_UNAVAILABLE),
                PortErrorKind::Unavailable => (UNREACHABLE, StatusCode::BAD_GATEWAY),
                PortErrorKind::Misconfigured => (UNREACHABLE, StatusCode::INTERNAL_SERVER_ERROR),
                PortErrorKind::Conflict => (UNREACHABLE, StatusCode::CONFLICT),
                PortErrorKind::Unreadable => (UNREACHABLE, StatusCode::BAD_GATEWAY),
            },
            Self::Unreachable => (UNREACHABLE, StatusCode::BAD_GATEWAY),
        }
    }
}

/// What a port error of each kind is said as, and its next step (a refused credential, which
/// the port names as one, apart). No wildcard, as [`Kind::answer`].
fn port_said(kind: PortErrorKind, refused_credential: bool) -> (&'static str, &'static str) {
    match kind {
        PortErrorKind::Throttled => (
            "the service asked us to slow down (throttled)",
            "wait a minute and run it again",
        ),
        PortErrorKind::Unavailable => (CANNOT_REACH, CANNOT_REACH_NEXT),
        PortErrorKind::Misconfigured if refused_credential => (
            "AWS refused the credentials or denied the call",
            "sign in again (`aws sso login`), or check the profile's keys; the identity needs \
             the operator's permissions in docs/security.md",
        ),
        PortErrorKind::Misconfigured => (
            "the service refused the request as configured (a missing table, queue or index, \
             or a malformed request)",
            "check --state-table/--deliveries-table and the queue URLs (or the stack's outputs) \
             and --region",
        ),
        PortErrorKind::Conflict => (
            "another writer held the same items at that moment",
            "run it again",
        ),
        PortErrorKind::Unreadable => (
            "the service answered something this tool cannot read",
            "it reads the same until Paymos or paymos-inbox changes: update paymos-inbox, \
             or send what it names to Paymos' support; Paymos' dashboard shows the invoice",
        ),
    }
}

const CANNOT_REACH: &str = "could not reach the service (no connection or no answer)";
const CANNOT_REACH_NEXT: &str = "check the network, --region and any endpoint \
     (--dynamodb-endpoint, AWS_ENDPOINT_URL_*); for `dev`'s emulators, is `paymos-inbox dev` \
     still running?";

/// A command that could not do what it was asked: its kind (which decides its exit code and
/// HTTP status), one line saying what, the next step, and the detail behind it (printed only
/// with `--verbose`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub kind: Kind,
    pub message: String,
    pub next: Option<String>,
    pub detail: Option<String>,
}

impl Failure {
    /// A failure of `kind`, said as given.
    pub fn of(kind: Kind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            next: None,
            detail: None,
        }
    }

    /// Bad usage or input (exit 2).
    pub fn usage(message: impl Into<String>) -> Self {
        Self::of(Kind::Usage, message)
    }

    /// Could not reach what the command needs (exit 4), said as given.
    pub fn unreachable(message: impl Into<String>) -> Self {
        Self::of(Kind::Unreachable, message)
    }

    /// Its exit code ([`Kind::answer`]).
    #[must_use]
    pub fn code(&self) -> u8 {
        self.kind.answer().0
    }

    /// The console's HTTP status of it ([`Kind::answer`]).
    #[must_use]
    pub fn status(&self) -> hyper::StatusCode {
        self.kind.answer().1
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
        ExitCode::from(self.code())
    }
}

/// A port's failure, by its kind: the kind decides the exit code, the HTTP status, the
/// sentence and the next step; its text only names, among the cases of that same kind, which
/// one it is (a missing table, no credentials found), never another kind's. The whole text is
/// the detail.
impl From<PortError> for Failure {
    fn from(e: PortError) -> Self {
        let text = e.to_string();
        let (mut said, mut next) = port_said(e.kind, e.is_refused_credential());
        let mut message = None;
        if !e.is_refused_credential()
            && let Some(row) = row_of(&text, Some(e.kind))
        {
            (said, next) = (row.2, row.3);
            message = Some(with_missing_files(said, |var| std::env::var(var).ok()));
        }
        // What could not be read is the answer's, not ours: said whole (which invoice, which
        // field), never only with --verbose.
        if e.kind == PortErrorKind::Unreadable {
            message = Some(format!("{said}: {}", e.message));
        }
        // Paymos' refusals are Paymos', not AWS's: its key, or an answer that does not fit
        // the stack (the other environment's key, another project's), said whole.
        if e.operation.starts_with("Paymos") {
            if e.is_refused_credential() {
                (said, next) = (
                    "Paymos refused the API key (401/403)",
                    "check --api-key and --api-secret (or the secret PAYMOS_API_SECRETS_ID \
                     names): a key of this stack's environment",
                );
                message = Some(said.to_owned());
            } else if e.kind == PortErrorKind::Misconfigured {
                (said, next) = (
                    "Paymos' answer does not fit this stack",
                    "use the API key of this stack's environment (sandbox or live) and of a \
                     project it applies",
                );
                message = Some(format!("{said}: {}", e.message));
            }
        }
        Self {
            kind: Kind::Port(e.kind),
            message: format!(
                "{}: {}",
                e.operation,
                message.unwrap_or_else(|| said.to_owned())
            ),
            next: Some(next.to_owned()),
            detail: Some(text),
        }
    }
}

/// Text from something we did not write (an SDK before any port exists, a library of the
/// local pipeline): classified ([`classify`]), said in one line with the next step; the whole
/// text is the detail.
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

/// The local pipeline's failures (`sign`'s event files, the stack `dev` and the tools make from
/// the template): whatever their kind, could not do it (exit 4, [`Kind::Unreachable`]), said
/// in one line as their text reads ([`classify`]), as before they were typed.
impl From<paymos_inbox_local::error::LocalError> for Failure {
    fn from(e: paymos_inbox_local::error::LocalError) -> Self {
        classify(&e.to_string())
    }
}

/// The kinds of I/O error a person can act on: what the text contains (lower case), what to
/// say, and the next step. The first that matches wins.
/// A row of [`KINDS`]: the port kind whose cases it names (`None`: only text says it), what
/// the text contains (lower case), what to say, and the next step.
type Row = (
    Option<PortErrorKind>,
    &'static [&'static str],
    &'static str,
    &'static str,
);

/// The cases of I/O error a person can act on, as text says them. For a [`PortError`] only the
/// rows of its own kind name its case; text from something we did not write is classified by
/// all of them ([`classify`]). The first that matches wins.
const KINDS: &[Row] = &[
    (
        Some(PortErrorKind::Unavailable),
        &[
            "no credentials",
            "credentialsnotloaded",
            "credentials not loaded",
            "failed to load credentials",
            "could not load credentials",
            "no providers in chain provided credentials",
            "while loading credentials",
        ],
        NO_CREDENTIALS,
        "sign in (`aws sso login --profile NAME`, then --profile NAME), or set AWS_PROFILE, \
         or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
    ),
    (
        Some(PortErrorKind::Misconfigured),
        &[
            "resourcenotfoundexception",
            "cannot do operations on a non-existent table",
        ],
        "the table does not exist here",
        "check --state-table/--deliveries-table (or the stack's outputs) and --region",
    ),
    (
        Some(PortErrorKind::Misconfigured),
        &["does not have the specified index"],
        "the table has no such index yet (the stack is older than this command, or DynamoDB is \
         still building it)",
        "update the stack (`sam deploy`), wait until `aws dynamodb describe-table` shows the \
         index ACTIVE, then run `paymos-inbox exceptions --reindex` once",
    ),
    (
        Some(PortErrorKind::Misconfigured),
        &[
            "nonexistentqueue",
            "queuedoesnotexist",
            "queue does not exist",
        ],
        "the queue does not exist here",
        "check the queue URL (or the stack's outputs) and --region",
    ),
    (
        None,
        &["is not installed", "no `node` on path", "no `java` on path"],
        "",
        "run `make deps` (npm ci) in the project folder, or pass --dynamodb-endpoint and \
         --sqs-endpoint of running emulators",
    ),
    (
        Some(PortErrorKind::Unavailable),
        &[
            "api returned 5",
            "internalservererror",
            "internal server error",
            "serviceunavailable",
            "service unavailable",
        ],
        "the service answered with an error of its own (5xx): reached, but failing",
        "run it again in a few minutes; if it keeps failing, check the \
         service's status (Paymos' status page, AWS Health)",
    ),
    (
        Some(PortErrorKind::Unavailable),
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
        CANNOT_REACH,
        CANNOT_REACH_NEXT,
    ),
];

const NO_CREDENTIALS: &str = "no AWS credentials found";

/// What an error's text says, in one line with the next step (exit 4, [`Kind::Unreachable`]).
/// Only for errors that still arrive as text, beside any port: the local pipeline's (`dev`,
/// `soak`, `bench-e2e`: the emulators it starts, the tools it runs) and `sign`'s files. A
/// port's error keeps its kind (`Failure`'s `From<PortError>`).
/// The SDKs' errors carry their whole chain (`DisplayErrorContext`) and debug structures; the
/// person reading needs the kind and what to do, and the text itself only with `--verbose`.
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

/// The first row of [`KINDS`] whose needles `text` contains: of the port kind `only`, when
/// given.
fn row_of(text: &str, only: Option<PortErrorKind>) -> Option<&'static Row> {
    let lower = text.to_ascii_lowercase();
    KINDS.iter().find(|(kind, needles, _, _)| {
        (only.is_none() || *kind == only) && needles.iter().any(|n| lower.contains(n))
    })
}

/// `said`, and when it is that no AWS credentials were found, the AWS files the environment
/// names that do not exist.
fn with_missing_files(said: &str, lookup: impl Fn(&str) -> Option<String>) -> String {
    let missing = missing_aws_files(&lookup);
    if said == NO_CREDENTIALS && !missing.is_empty() {
        format!("{said}: {}", missing.join("; "))
    } else {
        said.to_owned()
    }
}

fn classify_with(text: &str, lookup: impl Fn(&str) -> Option<String>) -> Failure {
    let first = text.lines().next().unwrap_or(text);
    // What was being done, when the text says it first (`--stack-name shop: …`).
    let context = text
        .split_once(": ")
        .map(|(head, _)| head)
        .filter(|h| h.len() <= 60 && !h.contains('(') && !h.contains('{'))
        .map(|h| format!("{h}: "))
        .unwrap_or_default();
    match row_of(text, None) {
        Some((_, _, said, next)) => Failure {
            kind: Kind::Unreachable,
            message: if said.is_empty() {
                first.to_owned()
            } else {
                format!("{context}{}", with_missing_files(said, lookup))
            },
            next: Some((*next).to_owned()),
            detail: Some(text.to_owned()),
        },
        None => {
            let short: String = first.chars().take(240).collect();
            Failure {
                kind: Kind::Unreachable,
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

    // With AWS_CONFIG_FILE naming a missing file, the SDK's warnings came first and
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

    /// Every port kind, in the order the table below lists them: a new kind does not compile
    /// here (no wildcard) until it is given its exit code and HTTP status.
    fn listed(kind: PortErrorKind) -> usize {
        match kind {
            PortErrorKind::Throttled => 0,
            PortErrorKind::Unavailable => 1,
            PortErrorKind::Misconfigured => 2,
            PortErrorKind::Conflict => 3,
            PortErrorKind::Unreadable => 4,
        }
    }

    #[test]
    fn each_kind_answers_its_exit_code_and_http_status_in_one_table() {
        use hyper::StatusCode;
        let ports = [
            (PortErrorKind::Throttled, UNREACHABLE, 503),
            (PortErrorKind::Unavailable, UNREACHABLE, 502),
            (PortErrorKind::Misconfigured, UNREACHABLE, 500),
            (PortErrorKind::Conflict, UNREACHABLE, 409),
            (PortErrorKind::Unreadable, UNREACHABLE, 502),
        ];
        for (i, (kind, code, status)) in ports.into_iter().enumerate() {
            assert_eq!(listed(kind), i, "{kind}: listed in the order of `listed`");
            let answer = Kind::Port(kind).answer();
            assert_eq!((answer.0, answer.1.as_u16()), (code, status), "{kind}");
            let failure = Failure::from(PortError::of_kind("DynamoDB Query", kind, "x"));
            assert_eq!(
                (failure.code(), failure.status().as_u16()),
                (code, status),
                "{kind}"
            );
            assert!(failure.next.is_some(), "{kind}: a next step");
        }
        for (kind, code, status) in [
            (Kind::Usage, USAGE, StatusCode::BAD_REQUEST),
            (Kind::NeedsAPerson, NEEDS_A_PERSON, StatusCode::CONFLICT),
            (Kind::Unreachable, UNREACHABLE, StatusCode::BAD_GATEWAY),
        ] {
            assert_eq!(kind.answer(), (code, status), "{kind:?}");
        }
        assert_eq!(Failure::usage("x").status(), StatusCode::BAD_REQUEST);
        assert_eq!(classify("anything").code(), UNREACHABLE);
    }

    // Issue 49 (A7): an answer of Paymos the tool could not decode was said as "could not reach
    // the service (no connection or no answer)". It is said as what it is, naming what the
    // answer's decoder named (the invoice, the field), without --verbose.
    #[test]
    fn an_answer_that_cannot_be_read_is_said_so_and_names_what() {
        let failure = Failure::from(PortError::of_kind(
            "Paymos GET /v1/invoices/{id}",
            PortErrorKind::Unreadable,
            "inv_bad: Paymos API returned an invalid response: missing field `amount` at line 1 column 80",
        ));
        assert_eq!(
            failure.message,
            "Paymos GET /v1/invoices/{id}: the service answered something this tool cannot read: inv_bad: Paymos API returned an invalid response: missing field `amount` at line 1 column 80"
        );
        assert!(!failure.message.contains("could not reach"));
        assert_eq!(failure.code(), UNREACHABLE);
    }

    // The attack on `dev` (F5): Paymos answering 500 was said as "could not reach the service
    // (no connection or no answer)", with advice about AWS endpoints, though Paymos was reached
    // every time. A server's error is said as one.
    #[test]
    fn a_server_error_is_said_as_one_not_as_no_answer() {
        let failure = Failure::from(PortError::of_kind(
            "Paymos GET /v1/invoices/{id}",
            PortErrorKind::Unavailable,
            "Paymos API returned 500: Paymos API request failed",
        ));
        assert_eq!(
            failure.message,
            "Paymos GET /v1/invoices/{id}: the service answered with an error of its own (5xx): reached, but failing"
        );
        assert!(
            !failure
                .next
                .as_deref()
                .unwrap_or_default()
                .contains("endpoint")
        );
        assert_eq!(failure.code(), UNREACHABLE);
        let failure = Failure::from(PortError::of_kind(
            "Paymos GET /v1/invoices/{id}",
            PortErrorKind::Unavailable,
            "error sending request: connection refused",
        ));
        assert!(
            failure.message.ends_with(CANNOT_REACH),
            "{}",
            failure.message
        );
    }

    // The attack on `dev` (F5): Paymos refusing the API key was said as "AWS refused the
    // credentials" with `aws sso login` as the next step, and a key of the other environment
    // as "a missing table, queue or index" (the cause only with --verbose). Paymos' refusals
    // are said as Paymos', with what Paymos or the check said.
    #[test]
    fn paymos_refusals_are_said_as_paymos_not_as_aws() {
        let refused = Failure::from(PortError::refused_credential(
            "Paymos GET /v1/refunds/{id}",
            "Paymos API returned 401: invalid signature",
        ));
        assert!(
            refused.message.contains("Paymos refused the API key"),
            "{}",
            refused.message
        );
        let next = refused.next.clone().unwrap_or_default();
        assert!(!next.contains("aws sso"), "{next}");
        assert!(next.contains("--api-key"), "{next}");
        let other = Failure::from(PortError::of_kind(
            "Paymos API",
            PortErrorKind::Misconfigured,
            "the API key reads sandbox resources but this stack applies live",
        ));
        assert_eq!(
            other.message,
            "Paymos API: Paymos' answer does not fit this stack: the API key reads sandbox resources but this stack applies live"
        );
        assert!(!other.next.clone().unwrap_or_default().contains("table"));
        assert_eq!((refused.code(), other.code()), (UNREACHABLE, UNREACHABLE));
    }

    // An error's kind, not its text, decides what it is. `classify` read "is not
    // authorized" in any text as a denial, and "non-existent table" as a missing table (a
    // misconfiguration); an unavailable port is said as unavailable whatever its text says.
    #[test]
    fn a_port_error_is_said_by_its_kind_whatever_its_text_says() {
        let text = "the proxy said: User x is not authorized to perform: dynamodb:Query; ResourceNotFoundException: Cannot do operations on a non-existent table (dispatch failure)";
        assert!(
            classify(text)
                .message
                .contains("the table does not exist here"),
            "the text alone says another kind's case"
        );
        let unavailable = Failure::from(PortError::new("DynamoDB Query", text));
        assert_eq!(unavailable.kind, Kind::Port(PortErrorKind::Unavailable));
        assert_eq!(
            (unavailable.code(), unavailable.status().as_u16()),
            (UNREACHABLE, 502)
        );
        assert_eq!(
            unavailable.message,
            "DynamoDB Query: could not reach the service (no connection or no answer)"
        );
        assert!(
            unavailable
                .detail
                .as_deref()
                .is_some_and(|d| d.contains(text))
        );

        // A refused credential is named by the port, whatever its text says.
        let refused = Failure::from(PortError::refused_credential(
            "SQS SendMessage",
            "connection refused by the proxy: ExpiredToken",
        ));
        assert_eq!(refused.status().as_u16(), 500);
        assert_eq!(
            refused.message,
            "SQS SendMessage: AWS refused the credentials or denied the call"
        );

        // Within its kind, the text names which case it is.
        let missing = Failure::from(PortError::of_kind(
            "DynamoDB Query",
            PortErrorKind::Misconfigured,
            "service error: ResourceNotFoundException: Cannot do operations on a non-existent table",
        ));
        assert_eq!(
            missing.message,
            "DynamoDB Query: the table does not exist here"
        );
        let no_credentials = Failure::from(PortError::new(
            "STS GetCallerIdentity",
            "dispatch failure: other: no providers in chain provided credentials",
        ));
        assert!(
            no_credentials
                .message
                .starts_with("STS GetCallerIdentity: no AWS credentials found"),
            "{}",
            no_credentials.message
        );
        // But never another kind's case: a throttle that mentions a missing table is a throttle.
        let throttled = Failure::from(PortError::of_kind(
            "DynamoDB Query",
            PortErrorKind::Throttled,
            "ResourceNotFoundException retried: ProvisionedThroughputExceededException",
        ));
        assert_eq!(
            throttled.message,
            "DynamoDB Query: the service asked us to slow down (throttled)"
        );
        assert_eq!(throttled.status().as_u16(), 503);
    }

    #[test]
    fn an_sdk_dump_becomes_one_line_with_the_next_step_and_the_dump_only_when_verbose() {
        let dump = "--stack-name shop: dispatch failure: io error: error trying to connect: tcp connect error: Connection refused (os error 111) DispatchFailure(DispatchFailure { source: ConnectorError { kind: Io } })";
        let f = Failure::from(dump.to_owned());
        assert_eq!(f.code(), UNREACHABLE);
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
            assert_eq!(f.code(), UNREACHABLE);
            assert!(f.next.is_some());
        }
        // A refused credential or a denied call is named by the port, not by its text.
        for refused in [
            "service error: UnrecognizedClientException: The security token included in the request is invalid.",
            "service error: AccessDeniedException: User: arn:aws:iam::1:user/x is not authorized to perform: dynamodb:Query",
        ] {
            let f = Failure::from(PortError::refused_credential("DynamoDB Query", refused));
            assert_eq!(
                f.message,
                "DynamoDB Query: AWS refused the credentials or denied the call"
            );
            assert!(
                f.next
                    .as_deref()
                    .is_some_and(|n| n.contains("docs/security.md"))
            );
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
