//! What a sender controls at a function URL (method, path, query, headers, body; the body
//! base64-encoded by AWS when it is binary), with the fields AWS sets (domain, host,
//! x-forwarded-proto) fixed, through lambda_http's translation and the ingest handler with
//! in-memory ports: never a panic, and never a 2xx without a recorded delivery.
#![no_main]

use base64::Engine as _;
use libfuzzer_sys::fuzz_target;
use paymos_inbox_core::testkit::memory::{MemoryLedger, MemoryQueue};
use paymos_inbox_core::roads::ingest::{Ingest, IngestSettings};
use paymos_inbox_core::wire::signature::{SigningKey, Verifier, WebhookSecret};

const DOMAIN: &str = "abcdefghijklmnopqrstuvwxyz0.lambda-url.eu-west-1.on.aws";

/// A path or query as RFC 3986 allows it (unreserved, sub-delims, `:@/?%`). lambda_http 1.3
/// panics building the URI for a raw `"` or `{` in a query string; with `panic = "unwind"`
/// lambda_runtime turns that into an invocation error (nothing is written), so those inputs
/// are left out here to keep the fuzzer on our code.
fn visible(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_ascii_alphanumeric() || "-._~!$&'()*+,;=:@/?%".contains(*c))
        .collect()
}

fn token(s: &str) -> String {
    s.chars().filter(|c| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(*c)).collect()
}

fuzz_target!(|input: (u8, String, String, Vec<(String, String)>, Vec<u8>, bool)| {
    let (method, path, query, headers, body, sign_it) = input;
    let method = ["POST", "GET", "PUT", "post", "OPTIONS"][usize::from(method) % 5];
    let path = format!("/{}", visible(&path).trim_start_matches('/'));
    let query = visible(&query);
    let secret = WebhookSecret::new("whsec_live_fuzz");
    let mut map = serde_json::Map::new();
    for (k, v) in headers {
        let k = token(&k).to_ascii_lowercase();
        let v: String = v.chars().filter(|c| *c == '\t' || (' '..='~').contains(c)).collect();
        if k.is_empty() || k == "host" || k == "x-forwarded-proto" {
            continue;
        }
        map.insert(k, v.into());
    }
    if sign_it {
        map.insert("x-webhook-signature".into(), paymos_inbox_core::wire::signature::signature_header(1_700_000_000, &body, &[&secret]).into());
    }
    map.insert("host".into(), DOMAIN.into());
    map.insert("x-forwarded-proto".into(), "https".into());
    let (body, base64) = match std::str::from_utf8(&body) {
        Ok(text) => (text.to_owned(), false),
        Err(_) => (base64::engine::general_purpose::STANDARD.encode(&body), true),
    };
    let event = serde_json::json!({
        "version": "2.0", "routeKey": "$default", "rawPath": path, "rawQueryString": query, "headers": map,
        "requestContext": {"accountId": "anonymous", "apiId": "abcdefghijklmnopqrstuvwxyz0", "domainName": DOMAIN,
            "domainPrefix": "abcdefghijklmnopqrstuvwxyz0", "http": {"method": method, "path": path, "protocol": "HTTP/1.1",
            "sourceIp": "203.0.113.7", "userAgent": "fuzz"}, "requestId": "r", "routeKey": "$default", "stage": "$default",
            "time": "", "timeEpoch": 1_700_000_000_000u64},
        "body": body, "isBase64Encoded": base64,
    });
    let Ok(request) = lambda_http::request::from_str(&event.to_string()) else { return };
    let ingest = Ingest::new(
        Verifier::new(vec![SigningKey::new("live", &secret)], 300),
        MemoryLedger::new(),
        MemoryQueue::new(),
        IngestSettings::default(),
    );
    let rt = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
    let response = rt.block_on(paymos_inbox_lambda::ingest::respond(&ingest, &request, 1_700_000_000_000));
    if response.status().is_success() {
        assert_eq!(ingest.ledger().len(), 1, "a 2xx always means a recorded delivery");
    }
});
