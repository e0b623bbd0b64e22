//! Paymos webhook signatures: `X-Webhook-Signature: t=<unix>,v1=<hex>[,v1=<hex>…]`, where each
//! `v1` is `hex(HMAC-SHA256(secret, ascii(t) + "." + raw_body))`.
//!
//! The verifier holds one or more labelled secrets, computes ONE MAC per secret over the exact raw
//! bytes and compares it in constant time with every `v1` candidate of the header.

use std::fmt;

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use subtle::{Choice, ConstantTimeEq};

type HmacSha256 = Hmac<Sha256>;

/// The length of a SHA-256 MAC in bytes (64 hex characters in a header).
const MAC_LEN: usize = 32;
/// Headers longer than this are refused before any parsing work (real ones are about 150 bytes).
pub const MAX_HEADER_LEN: usize = 4096;
/// At most this many `v1` values are considered; a real sender sends one, or two during rotation.
pub const MAX_CANDIDATES: usize = 16;
/// The sender's default and ours: |now - t| may be at most this many seconds.
pub const DEFAULT_TOLERANCE_SECS: u64 = 300;

/// The environment a secret belongs to, which `data.is_test` of a delivery must agree with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Environment {
    /// Production: secrets `whsec_live_…`, deliveries with `is_test == false`.
    Live,
    /// Sandbox: secrets `whsec_test_…`, deliveries with `is_test == true`.
    Test,
}

impl Environment {
    /// The environment a label names: its first `-`/`_`/`.` separated word is `live` or `prod…`
    /// for [`Environment::Live`], `test` or `sandbox` for [`Environment::Test`].
    #[must_use]
    pub fn from_label(label: &str) -> Option<Self> {
        let word = label
            .split(['-', '_', '.', ':'])
            .next()
            .unwrap_or_default()
            .to_ascii_lowercase();
        match word.as_str() {
            "live" | "prod" | "production" => Some(Self::Live),
            "test" | "sandbox" => Some(Self::Test),
            _ => None,
        }
    }

    /// The environment a secret's own prefix names (`whsec_live_…`, `whsec_test_…`), if any.
    #[must_use]
    pub fn from_secret_prefix(secret: &str) -> Option<Self> {
        if secret.starts_with("whsec_live_") {
            Some(Self::Live)
        } else if secret.starts_with("whsec_test_") {
            Some(Self::Test)
        } else {
            None
        }
    }

    /// The value `data.is_test` carries for deliveries of this environment.
    #[must_use]
    pub fn is_test(self) -> bool {
        matches!(self, Self::Test)
    }

    /// `live` or `test`, as stored in the ledger.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Live => "live",
            Self::Test => "test",
        }
    }
}

impl fmt::Display for Environment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A webhook signing secret. It never prints itself and is wiped from memory when dropped.
#[derive(Clone)]
pub struct WebhookSecret(zeroize::Zeroizing<String>);

impl WebhookSecret {
    /// Wraps the secret exactly as Paymos shows it (`whsec_…`): the whole string is the HMAC key.
    #[must_use]
    pub fn new(secret: impl Into<String>) -> Self {
        Self(zeroize::Zeroizing::new(secret.into()))
    }

    /// The secret's text, for the few places that must hand it to the HMAC.
    #[must_use]
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// `v1` of this secret for timestamp `t` over `body`, as lower-case hex.
    #[must_use]
    pub fn sign(&self, timestamp: u64, body: &[u8]) -> String {
        hex::encode(mac_of(&self.key(), timestamp, body))
    }

    fn key(&self) -> HmacSha256 {
        // HMAC accepts keys of any length; this cannot fail.
        <HmacSha256 as KeyInit>::new_from_slice(self.0.as_bytes()).expect("HMAC takes any key")
    }
}

impl fmt::Debug for WebhookSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("WebhookSecret([redacted])")
    }
}

/// Builds a complete `X-Webhook-Signature` value: one `v1` per secret, in the given order.
#[must_use]
pub fn signature_header(timestamp: u64, body: &[u8], secrets: &[&WebhookSecret]) -> String {
    let mut header = format!("t={timestamp}");
    for secret in secrets {
        header.push_str(",v1=");
        header.push_str(&secret.sign(timestamp, body));
    }
    header
}

fn mac_of(key: &HmacSha256, timestamp: u64, body: &[u8]) -> [u8; MAC_LEN] {
    let mut mac = key.clone();
    let mut digits = [0u8; 20];
    mac.update(ascii_digits(timestamp, &mut digits));
    mac.update(b".");
    mac.update(body);
    mac.finalize().into_bytes().into()
}

fn ascii_digits(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[i..];
        }
    }
}

/// Why a header is malformed. A malformed header is refused before any MAC is computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Malformed {
    /// The header is empty or only white space.
    Empty,
    /// Longer than [`MAX_HEADER_LEN`].
    TooLong,
    /// No `t=` part.
    MissingTimestamp,
    /// More than one `t=` part.
    DuplicateTimestamp,
    /// `t` is not a non-empty string of decimal digits that fits 64 bits.
    InvalidTimestamp,
    /// No non-empty `v1=` part.
    MissingSignature,
    /// More than [`MAX_CANDIDATES`] `v1=` parts.
    TooManySignatures,
}

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Empty => "the header is empty",
            Self::TooLong => "the header is longer than 4096 bytes",
            Self::MissingTimestamp => "there is no t= part",
            Self::DuplicateTimestamp => "there is more than one t= part",
            Self::InvalidTimestamp => "t= is not a Unix time in decimal digits",
            Self::MissingSignature => "there is no non-empty v1= part",
            Self::TooManySignatures => "there are more than 16 v1= parts",
        })
    }
}

/// Why a delivery's signature was refused. All of them mean HTTP 401 to the sender.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SignatureError {
    /// No `X-Webhook-Signature` header.
    #[error("the X-Webhook-Signature header is missing")]
    MissingHeader,
    /// The header does not follow `t=<unix>,v1=<hex>[,v1=<hex>]`.
    #[error("the X-Webhook-Signature header is malformed: {0}")]
    MalformedHeader(Malformed),
    /// `|now - t|` is larger than the tolerance: a stale (or replayed) or future-dated delivery.
    #[error(
        "the signature timestamp {timestamp} is {skew}s away from now, more than the {tolerance}s tolerance"
    )]
    TimestampOutsideTolerance {
        /// `t` from the header.
        timestamp: u64,
        /// `|now - t|` in seconds.
        skew: u64,
        /// The configured tolerance in seconds.
        tolerance: u64,
    },
    /// No `v1` candidate matched any configured secret.
    #[error(
        "no v1 signature of the header ({candidates} in all) matches a configured secret ({secrets} tried)"
    )]
    SignatureMismatch {
        /// How many `v1` values the header carried.
        candidates: usize,
        /// How many secrets were tried.
        secrets: usize,
    },
}

impl SignatureError {
    /// The name used by the official test vectors and in our logs.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            Self::MissingHeader => "missing_signature",
            Self::MalformedHeader(_) => "malformed_header",
            Self::TimestampOutsideTolerance { .. } => "timestamp_outside_tolerance",
            Self::SignatureMismatch { .. } => "signature_mismatch",
        }
    }
}

/// A parsed signature header: the timestamp and the decoded `v1` candidates.
///
/// Candidates that are not 64 hex digits can never match; they are kept as `None` so that
/// they count, and so that a valid `v1` beside them still verifies (rotation headers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignatureHeader {
    /// `t`: the Unix time the sender signed this attempt at.
    pub timestamp: u64,
    // Inline, so verifying allocates nothing.
    candidates: [[u8; MAC_LEN]; MAX_CANDIDATES],
    usable: [bool; MAX_CANDIDATES],
    count: usize,
}

impl SignatureHeader {
    /// Parses the header with the Paymos grammar: split on `,`, trim, split on the first `=`;
    /// exactly one `t` of decimal digits; one or more non-empty `v1`; other keys ignored.
    ///
    /// # Errors
    /// [`SignatureError::MalformedHeader`] naming the first rule the header breaks.
    pub fn parse(header: &str) -> Result<Self, SignatureError> {
        let malformed = |m| Err(SignatureError::MalformedHeader(m));
        if header.len() > MAX_HEADER_LEN {
            return malformed(Malformed::TooLong);
        }
        if header.trim().is_empty() {
            return malformed(Malformed::Empty);
        }
        let mut timestamp = None;
        let mut candidates = [[0u8; MAC_LEN]; MAX_CANDIDATES];
        let mut usable = [false; MAX_CANDIDATES];
        let mut count = 0;
        for part in header.split(',') {
            let Some((key, value)) = part.trim().split_once('=') else {
                continue;
            };
            match key.trim() {
                "t" => {
                    if timestamp.is_some() {
                        return malformed(Malformed::DuplicateTimestamp);
                    }
                    let value = value.trim();
                    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
                        return malformed(Malformed::InvalidTimestamp);
                    }
                    let Ok(t) = value.parse::<u64>() else {
                        return malformed(Malformed::InvalidTimestamp);
                    };
                    timestamp = Some(t);
                }
                "v1" => {
                    let value = value.trim();
                    if value.is_empty() {
                        continue;
                    }
                    if count == MAX_CANDIDATES {
                        return malformed(Malformed::TooManySignatures);
                    }
                    usable[count] = hex::decode_to_slice(value, &mut candidates[count]).is_ok();
                    count += 1;
                }
                _ => {}
            }
        }
        let Some(timestamp) = timestamp else {
            return malformed(Malformed::MissingTimestamp);
        };
        if count == 0 {
            return malformed(Malformed::MissingSignature);
        }
        Ok(Self {
            timestamp,
            candidates,
            usable,
            count,
        })
    }

    /// How many `v1` values the header carried.
    #[must_use]
    pub fn candidate_count(&self) -> usize {
        self.count
    }

    /// The candidates that are 64 hex digits (either case: the server sends lower case, some
    /// SDKs accept upper); others can never match.
    fn usable(&self) -> impl Iterator<Item = &[u8; MAC_LEN]> {
        self.candidates[..self.count]
            .iter()
            .zip(&self.usable)
            .filter_map(|(c, ok)| ok.then_some(c))
    }
}

/// Compares two MACs without a data-dependent branch or early exit.
fn same_mac(a: &[u8; MAC_LEN], b: &[u8; MAC_LEN]) -> Choice {
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    diff.ct_eq(&0)
}

/// One configured secret: its label (`live`, `test`, `live-previous`, …), its environment and
/// the HMAC state with the key already absorbed, so a verification hashes only `t.body`.
#[derive(Clone)]
pub struct SigningKey {
    label: String,
    environment: Option<Environment>,
    key: HmacSha256,
    /// A MAC of a fixed text under the key: tells two keys apart without keeping the secret.
    fingerprint: [u8; MAC_LEN],
}

impl SigningKey {
    /// A key whose environment is told by its label, else by the secret's `whsec_live_` /
    /// `whsec_test_` prefix, else unknown (no `is_test` check is possible then).
    #[must_use]
    pub fn new(label: impl Into<String>, secret: &WebhookSecret) -> Self {
        let label = label.into();
        let environment = Environment::from_label(&label)
            .or_else(|| Environment::from_secret_prefix(secret.expose()));
        let key = secret.key();
        let fingerprint = key
            .clone()
            .chain_update(b"paymos-inbox key fingerprint")
            .finalize()
            .into_bytes()
            .into();
        Self {
            label,
            environment,
            key,
            fingerprint,
        }
    }

    /// The label this key was configured with.
    #[must_use]
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The environment this key belongs to, if its label or prefix tells.
    #[must_use]
    pub fn environment(&self) -> Option<Environment> {
        self.environment
    }
}

impl PartialEq for SigningKey {
    fn eq(&self, other: &Self) -> bool {
        self.label == other.label
            && self.environment == other.environment
            && bool::from(self.fingerprint.ct_eq(&other.fingerprint))
    }
}

impl Eq for SigningKey {}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SigningKey")
            .field("label", &self.label)
            .field("environment", &self.environment)
            .field("key", &"[redacted]")
            .finish()
    }
}

/// What a successful verification proved.
#[derive(Debug, Clone, Copy)]
pub struct Verified<'v> {
    /// `t` of the header.
    pub timestamp: u64,
    /// The configured key that produced a matching `v1`.
    pub key: &'v SigningKey,
}

/// Verifies deliveries against a set of labelled secrets.
#[derive(Debug, Clone)]
pub struct Verifier {
    keys: Vec<SigningKey>,
    tolerance: u64,
}

impl Verifier {
    /// A verifier over `keys` (tried in order; the first that matches wins) with a symmetric
    /// timestamp tolerance in seconds.
    #[must_use]
    pub fn new(keys: Vec<SigningKey>, tolerance_secs: u64) -> Self {
        Self {
            keys,
            tolerance: tolerance_secs,
        }
    }

    /// The configured keys.
    #[must_use]
    pub fn keys(&self) -> &[SigningKey] {
        &self.keys
    }

    /// The tolerance in seconds.
    #[must_use]
    pub fn tolerance(&self) -> u64 {
        self.tolerance
    }

    /// Verifies `header` over the exact `body` bytes at Unix time `now`.
    ///
    /// The header is parsed and the timestamp checked before any MAC work; then one MAC per
    /// configured secret is compared with every candidate in constant time.
    ///
    /// # Errors
    /// Any [`SignatureError`]: the sender gets 401 and nothing is written.
    pub fn verify(
        &self,
        header: Option<&str>,
        body: &[u8],
        now: u64,
    ) -> Result<Verified<'_>, SignatureError> {
        let header = SignatureHeader::parse(header.ok_or(SignatureError::MissingHeader)?)?;
        self.verify_parsed(&header, body, now)
    }

    /// [`Verifier::verify`] for a header that is already parsed.
    ///
    /// # Errors
    /// [`SignatureError::TimestampOutsideTolerance`] or [`SignatureError::SignatureMismatch`].
    pub fn verify_parsed(
        &self,
        header: &SignatureHeader,
        body: &[u8],
        now: u64,
    ) -> Result<Verified<'_>, SignatureError> {
        let skew = now.abs_diff(header.timestamp);
        if skew > self.tolerance {
            return Err(SignatureError::TimestampOutsideTolerance {
                timestamp: header.timestamp,
                skew,
                tolerance: self.tolerance,
            });
        }
        for key in &self.keys {
            let expected = mac_of(&key.key, header.timestamp, body);
            let mut matched = Choice::from(0);
            for candidate in header.usable() {
                matched |= same_mac(candidate, &expected);
            }
            if bool::from(matched) {
                return Ok(Verified {
                    timestamp: header.timestamp,
                    key,
                });
            }
        }
        Err(SignatureError::SignatureMismatch {
            candidates: header.count,
            secrets: self.keys.len(),
        })
    }
}

/// Why a set of webhook secrets cannot be used (names a label, never a secret).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct InvalidKeys {
    /// What is wrong, for the operator.
    pub reason: String,
}

/// The `(label, secret)` pairs of a secrets text, in any form [`parse_keys`] reads (a bare
/// secret labelled by its prefix), unchecked: what `send` signs with under the labels `dev`
/// takes.
///
/// # Errors
/// [`InvalidKeys`] when the text is not one of those forms or names no secret.
pub fn labelled_secrets(text: &str) -> Result<Vec<(String, WebhookSecret)>, InvalidKeys> {
    let invalid = |reason: String| InvalidKeys { reason };
    let text = text.trim();
    let mut pairs: Vec<(String, WebhookSecret)> = Vec::new();
    if text.starts_with('{') {
        let map: serde_json::Map<String, serde_json::Value> = serde_json::from_str(text)
            .map_err(|_| invalid("not a JSON object of label → secret strings".into()))?;
        for (label, value) in map {
            let secret = value
                .as_str()
                .ok_or_else(|| invalid(format!("the value of '{label}' is not a string")))?;
            pairs.push((label, WebhookSecret::new(secret.trim())));
        }
    } else {
        for entry in text
            .split([',', '\n'])
            .map(str::trim)
            .filter(|e| !e.is_empty())
        {
            match entry.split_once('=').filter(|(label, _)| is_label(label)) {
                Some((label, secret)) => {
                    pairs.push((label.trim().to_owned(), WebhookSecret::new(secret.trim())));
                }
                None => {
                    let label = match Environment::from_secret_prefix(entry) {
                        Some(env) => env.as_str().to_owned(),
                        None => "default".to_owned(),
                    };
                    pairs.push((label, WebhookSecret::new(entry)));
                }
            }
        }
    }
    if pairs.is_empty() {
        return Err(invalid("no secret is configured".into()));
    }
    Ok(pairs)
}

/// Parses the webhook secrets as kept in Secrets Manager (or given to the CLI):
/// - a JSON object `{"live": "whsec_live_…", "live-previous": "whsec_live_…", "test": "whsec_test_…"}`
///   (Secrets Manager's key/value form);
/// - or `label=secret` entries separated by commas or new lines;
/// - or one bare secret, labelled by its prefix (`live` for `whsec_live_…`, `test` for
///   `whsec_test_…`, else `default`).
///
/// With `require_environment`, every label (or, failing that, the secret's prefix) must name an
/// environment, so that `data.is_test` can be checked.
///
/// # Errors
/// [`InvalidKeys`], naming the label at fault but never a secret.
pub fn parse_keys(text: &str, require_environment: bool) -> Result<Vec<SigningKey>, InvalidKeys> {
    let invalid = |reason: String| InvalidKeys { reason };
    let pairs = labelled_secrets(text)?;
    let mut keys = Vec::with_capacity(pairs.len());
    for (label, secret) in pairs {
        if label.is_empty() || secret.expose().is_empty() {
            return Err(invalid(
                "an entry has an empty label or an empty secret".into(),
            ));
        }
        if keys.iter().any(|k: &SigningKey| k.label() == label) {
            return Err(invalid(format!("the label '{label}' is used twice")));
        }
        if let (Some(named), Some(own)) = (
            Environment::from_label(&label),
            Environment::from_secret_prefix(secret.expose()),
        ) && named != own
        {
            return Err(invalid(format!(
                "the label '{label}' names the {named} environment but its secret is a whsec_{own}_ \
                 secret: fix the label (or the secret) so a {own} secret is never taken for {named}"
            )));
        }
        let key = SigningKey::new(label.clone(), &secret);
        if require_environment && key.environment().is_none() {
            return Err(invalid(format!(
                "the label '{label}' names no environment: start it with 'live' or 'test' \
                 (e.g. live, live-previous, test), or use a whsec_live_/whsec_test_ secret"
            )));
        }
        keys.push(key);
    }
    Ok(keys)
}

/// A label is a short word such as `live-previous`; a `whsec_…` string is a secret, not a label.
fn is_label(text: &str) -> bool {
    let text = text.trim();
    !text.is_empty()
        && !text.starts_with("whsec_")
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verifier(secrets: &[(&str, &str)]) -> Verifier {
        let keys = secrets
            .iter()
            .map(|(label, s)| SigningKey::new(*label, &WebhookSecret::new(*s)))
            .collect();
        Verifier::new(keys, DEFAULT_TOLERANCE_SECS)
    }

    #[test]
    fn a_signature_made_by_sign_verifies_and_names_its_secret() {
        let live = WebhookSecret::new("whsec_live_a");
        let test = WebhookSecret::new("whsec_test_b");
        let v = verifier(&[("live", "whsec_live_a"), ("test", "whsec_test_b")]);
        let header = signature_header(1_700_000_000, b"{}", &[&test]);
        let ok = v.verify(Some(&header), b"{}", 1_700_000_000).unwrap();
        assert_eq!(ok.key.label(), "test");
        assert_eq!(ok.key.environment(), Some(Environment::Test));
        let both = signature_header(1_700_000_000, b"{}", &[&live, &test]);
        assert_eq!(
            v.verify(Some(&both), b"{}", 1_700_000_000)
                .unwrap()
                .key
                .label(),
            "live"
        );
    }

    #[test]
    fn secrets_never_print() {
        let s = WebhookSecret::new("whsec_live_topsecret");
        let k = SigningKey::new("live", &s);
        let v = Verifier::new(vec![k.clone()], 300);
        for text in [format!("{s:?}"), format!("{k:?}"), format!("{v:?}")] {
            assert!(!text.contains("topsecret"), "{text}");
            // A reader of the log sees that a secret was there, and that it was hidden.
            assert!(text.contains("[redacted]"), "{text}");
        }
    }

    #[test]
    fn a_signature_with_two_bytes_changed_alike_never_verifies() {
        let secret = WebhookSecret::new("whsec_live_a");
        let verifier = Verifier::new(vec![SigningKey::new("live", &secret)], 300);
        let mac = secret.sign(9, b"{}");
        // Flip the same bit of the first two bytes: changes that cancel out under XOR.
        let mut bytes = hex::decode(&mac).unwrap();
        bytes[0] ^= 1;
        bytes[1] ^= 1;
        let forged = format!("t=9,v1={}", hex::encode(bytes));
        assert!(
            verifier
                .verify(Some(&format!("t=9,v1={mac}")), b"{}", 9)
                .is_ok()
        );
        assert!(matches!(
            verifier.verify(Some(&forged), b"{}", 9),
            Err(SignatureError::SignatureMismatch { .. })
        ));
    }

    #[test]
    fn a_header_of_the_longest_length_verifies_and_one_byte_more_is_refused() {
        let secret = WebhookSecret::new("whsec_live_a");
        let verifier = Verifier::new(vec![SigningKey::new("live", &secret)], 300);
        let signed = signature_header(9, b"{}", &[&secret]);
        // Keys other than t and v1 are ignored: padding that changes nothing but the length.
        let of_len = |len: usize| format!("{signed},x={}", "0".repeat(len - signed.len() - 3));
        let longest = of_len(MAX_HEADER_LEN);
        assert_eq!(longest.len(), MAX_HEADER_LEN);
        assert!(verifier.verify(Some(&longest), b"{}", 9).is_ok());
        assert_eq!(
            verifier
                .verify(Some(&of_len(MAX_HEADER_LEN + 1)), b"{}", 9)
                .unwrap_err(),
            SignatureError::MalformedHeader(Malformed::TooLong)
        );
    }

    #[test]
    fn every_official_vector_gets_the_verdict_and_the_error_code_paymos_expects() {
        // The provider's 69 vectors (crates/testkit/fixtures, copied from its reference), here
        // too so that the fast tests pin each refusal's code as the sender and the SDKs name it.
        let file: serde_json::Value = serde_json::from_str(include_str!(
            "../../../testkit/fixtures/paymos-webhook-vectors.json"
        ))
        .expect("the vectors parse");
        let vectors = file["vectors"].as_array().expect("a list of vectors");
        assert_eq!(vectors.len(), 69);
        let mut codes = std::collections::BTreeSet::new();
        for v in vectors {
            let text = |field: &str| v[field].as_str().expect(field).to_owned();
            let number = |field: &str| v[field].as_u64().expect(field);
            let (name, body) = (text("name"), text("raw_body"));
            let verifier = Verifier::new(
                parse_keys(&text("secret"), false).expect("a secret"),
                number("tolerance_seconds"),
            );
            let verdict = verifier.verify(Some(&text("header")), body.as_bytes(), number("now"));
            match (verdict, v["expect_error"].as_str()) {
                (Ok(_), None | Some("invalid_payload")) => {}
                (Err(error), Some(code)) => {
                    assert_eq!(error.code(), code, "{name}");
                    codes.insert(code.to_owned());
                }
                (verdict, expected) => panic!("{name}: expected {expected:?}, got {verdict:?}"),
            }
        }
        assert_eq!(
            codes.into_iter().collect::<Vec<_>>(),
            [
                "malformed_header",
                "signature_mismatch",
                "timestamp_outside_tolerance"
            ]
        );
        assert_eq!(SignatureError::MissingHeader.code(), "missing_signature");
    }

    #[test]
    fn every_form_of_the_secrets_reads_as_its_labels_and_environments() {
        let read = |text: &str| {
            parse_keys(text, false)
                .unwrap()
                .iter()
                .map(|k| (k.label().to_owned(), k.environment()))
                .collect::<Vec<_>>()
        };
        let (live, test) = (Some(Environment::Live), Some(Environment::Test));
        type Case = (&'static str, Vec<(&'static str, Option<Environment>)>);
        let cases: [Case; 7] = [
            (
                r#"{"live": "whsec_live_a", "test": "whsec_test_b"}"#,
                vec![("live", live), ("test", test)],
            ),
            (
                " live=whsec_live_a , live-previous=whsec_live_b ",
                vec![("live", live), ("live-previous", live)],
            ),
            (
                "live=whsec_live_a\n\n\ntest=whsec_test_b\n",
                vec![("live", live), ("test", test)],
            ),
            ("whsec_live_a", vec![("live", live)]),
            ("whsec_test_b", vec![("test", test)]),
            ("whsec_c", vec![("default", None)]),
            ("primary=whsec_live_a", vec![("primary", live)]),
        ];
        for (text, expected) in cases {
            let expected: Vec<_> = expected
                .into_iter()
                .map(|(l, e)| (l.to_owned(), e))
                .collect();
            assert_eq!(read(text), expected, "{text}");
        }
    }

    #[test]
    fn a_bare_secret_with_base64_padding_is_one_secret_not_a_label() {
        let keys = parse_keys("whsec_live_YWJj=", true).unwrap();
        assert_eq!(keys.len(), 1);
        assert_eq!(keys[0].label(), "live");
        let body = b"{}";
        let header = signature_header(9, body, &[&WebhookSecret::new("whsec_live_YWJj=")]);
        let verifier = Verifier::new(keys, 300);
        assert_eq!(
            verifier.verify(Some(&header), body, 9).unwrap().key.label(),
            "live",
            "the whole entry, padding and all, is the secret"
        );
    }

    #[test]
    fn unusable_secrets_are_refused_naming_the_label_never_the_secret() {
        for (text, require_environment, reason) in [
            ("", false, "no secret is configured"),
            (" , \n ", false, "no secret is configured"),
            (
                "live=",
                false,
                "an entry has an empty label or an empty secret",
            ),
            (
                "live=whsec_live_a,live=whsec_live_b",
                false,
                "the label 'live' is used twice",
            ),
            (
                "primary=whsec_a",
                true,
                "the label 'primary' names no environment: start it with 'live' or 'test' \
                 (e.g. live, live-previous, test), or use a whsec_live_/whsec_test_ secret",
            ),
        ] {
            let error = parse_keys(text, require_environment).unwrap_err();
            assert_eq!(error.reason, reason, "{text}");
            assert!(!error.reason.contains("whsec_a"), "{text}");
        }
        let unlabelled = parse_keys("primary=whsec_a", false).unwrap();
        assert_eq!(unlabelled[0].environment(), None, "allowed unless required");
    }

    #[test]
    fn a_secret_filed_under_the_other_environment_is_refused_naming_both() {
        let error = parse_keys("test=whsec_live_0123456789", false).unwrap_err();
        assert_eq!(
            error.reason,
            "the label 'test' names the test environment but its secret is a whsec_live_ \
             secret: fix the label (or the secret) so a live secret is never taken for test"
        );
        assert_eq!(
            format!("{} {}", Environment::Live, Environment::Test),
            "live test"
        );
    }

    #[test]
    fn a_rotation_is_told_by_a_changed_secret_or_label_never_by_the_same_set_read_again() {
        let key = |label: &str, secret: &str| SigningKey::new(label, &WebhookSecret::new(secret));
        let live = key("live", "whsec_live_a");
        assert_eq!(
            live,
            key("live", "whsec_live_a"),
            "read again: the same key"
        );
        assert_ne!(live, key("live", "whsec_live_b"), "a rotated secret");
        assert_ne!(live, key("live-previous", "whsec_live_a"), "relabelled");
        assert_ne!(key("primary", "whsec_a"), key("default", "whsec_a"));
    }

    #[test]
    fn labels_and_prefixes_name_environments() {
        assert_eq!(
            Environment::from_label("live-previous"),
            Some(Environment::Live)
        );
        assert_eq!(Environment::from_label("Sandbox"), Some(Environment::Test));
        assert_eq!(
            Environment::from_label("test_2025"),
            Some(Environment::Test)
        );
        assert_eq!(Environment::from_label("primary"), None);
        let k = SigningKey::new("primary", &WebhookSecret::new("whsec_live_x"));
        assert_eq!(k.environment(), Some(Environment::Live));
    }

    #[test]
    fn header_grammar_edge_cases() {
        use Malformed::*;
        let err = |h: &str| match SignatureHeader::parse(h) {
            Err(SignatureError::MalformedHeader(m)) => Some(m),
            _ => None,
        };
        assert_eq!(err(""), Some(Empty));
        assert_eq!(err("  "), Some(Empty));
        assert_eq!(err("v1=00"), Some(MissingTimestamp));
        assert_eq!(err("t=1,t=1,v1=00"), Some(DuplicateTimestamp));
        assert_eq!(err("t=-1,v1=00"), Some(InvalidTimestamp));
        assert_eq!(err("t=,v1=00"), Some(InvalidTimestamp));
        assert_eq!(
            err("t=99999999999999999999999,v1=00"),
            Some(InvalidTimestamp)
        );
        assert_eq!(err("t=1,v1="), Some(MissingSignature));
        assert_eq!(
            err(&format!("t=1{}", ",v1=00".repeat(17))),
            Some(TooManySignatures)
        );
        assert_eq!(err(&format!("t=1,v1={}", "a".repeat(5000))), Some(TooLong));
        let ok = SignatureHeader::parse(" t=5 , v0=zz, v1=bad ,x").unwrap();
        assert_eq!((ok.timestamp, ok.candidate_count()), (5, 1));
        // Decimal digits only: Rust's own parse would take a sign.
        assert_eq!(err("t=+5,v1=00"), Some(InvalidTimestamp));
        // Every v1 counts, usable or not (the mismatch reports how many came).
        let three = SignatureHeader::parse("t=5,v1=aa,v1=bb,v1=cc").unwrap();
        assert_eq!(three.candidate_count(), 3);
        // The refusal names the rule the header breaks (the sender's 401 and our log line).
        assert_eq!(
            SignatureHeader::parse("v1=00").unwrap_err().to_string(),
            "the X-Webhook-Signature header is malformed: there is no t= part"
        );
        assert_eq!(
            SignatureHeader::parse("t=1,t=1,v1=00")
                .unwrap_err()
                .to_string(),
            "the X-Webhook-Signature header is malformed: there is more than one t= part"
        );
    }

    #[test]
    fn tolerance_is_symmetric_and_inclusive() {
        let s = WebhookSecret::new("whsec_test_x");
        let v = verifier(&[("test", "whsec_test_x")]);
        let h = signature_header(1000, b"b", &[&s]);
        assert!(v.verify(Some(&h), b"b", 1300).is_ok());
        assert!(v.verify(Some(&h), b"b", 700).is_ok());
        assert!(matches!(
            v.verify(Some(&h), b"b", 1301),
            Err(SignatureError::TimestampOutsideTolerance { skew: 301, .. })
        ));
        assert!(matches!(
            v.verify(Some(&h), b"b", 699),
            Err(SignatureError::TimestampOutsideTolerance { skew: 301, .. })
        ));
    }

    #[test]
    fn ascii_digits_match_format() {
        let mut buf = [0u8; 20];
        for n in [0, 7, 10, 1_700_000_000, u64::MAX] {
            assert_eq!(ascii_digits(n, &mut buf), n.to_string().as_bytes());
        }
    }

    mod properties {
        use proptest::prelude::*;

        use super::super::*;

        fn verifier(secret: &WebhookSecret) -> Verifier {
            Verifier::new(
                vec![SigningKey::new("live", secret)],
                DEFAULT_TOLERANCE_SECS,
            )
        }

        proptest! {
            #[test]
            fn a_valid_v1_verifies_at_any_position_among_up_to_eight(
                body in proptest::collection::vec(any::<u8>(), 0..2048),
                t in 0u64..4_000_000_000,
                decoys in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 32), 0..8),
                position in any::<prop::sample::Index>(),
            ) {
                let secret = WebhookSecret::new("whsec_live_property");
                let mut values: Vec<String> = decoys.iter().map(hex::encode).collect();
                values.insert(position.index(values.len() + 1), secret.sign(t, &body));
                let header = format!("t={t},v1={}", values.join(",v1="));
                prop_assert!(verifier(&secret).verify(Some(&header), &body, t).is_ok());
            }

            #[test]
            fn any_single_byte_change_to_body_timestamp_or_signature_fails(
                body in proptest::collection::vec(any::<u8>(), 1..1024),
                t in 1_000u64..4_000_000_000,
                which in 0u8..3,
                at in any::<prop::sample::Index>(),
                flip in 1u8..=255,
            ) {
                let secret = WebhookSecret::new("whsec_live_property");
                let v = verifier(&secret);
                let mut sig = secret.sign(t, &body);
                let mut body2 = body.clone();
                let mut t_text = t.to_string();
                match which {
                    0 => { let i = at.index(body2.len()); body2[i] ^= flip; }
                    1 => {
                        // Another digit at one position of t (the signature was made for t).
                        let i = at.index(t_text.len());
                        let d = t_text.as_bytes()[i] - b'0';
                        let other = (d + 1 + flip % 9) % 10;
                        t_text.replace_range(i..=i, &other.to_string());
                    }
                    _ => {
                        let i = at.index(sig.len());
                        let c = sig.as_bytes()[i];
                        let other = if c == b'0' { '1' } else { '0' };
                        sig.replace_range(i..=i, &other.to_string());
                    }
                }
                let header = format!("t={t_text},v1={sig}");
                let now = t_text.parse::<u64>().unwrap_or(t);
                prop_assert!(v.verify(Some(&header), &body2, now).is_err());
            }
        }
    }
}
