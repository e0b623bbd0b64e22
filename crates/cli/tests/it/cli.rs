//! The `paymos-inbox` binary as a merchant runs it.

use std::io::Write;
use std::process::{Command, Stdio};

use paymos_inbox_testkit::vectors::vectors;

fn paymos_inbox(args: &[&str], stdin: &[u8]) -> (i32, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_paymos-inbox"))
        .args(args)
        .env_remove("PAYMOS_WEBHOOK_SECRET")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run paymos-inbox");
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn verify_command_agrees_with_all_69_official_vectors() {
    let mut disagreements = Vec::new();
    for v in vectors() {
        let now = v.now.to_string();
        let tolerance = v.tolerance_seconds.to_string();
        let (code, out) = paymos_inbox(
            &[
                "verify",
                "--json",
                "--secret",
                &v.secret,
                "--now",
                &now,
                "--tolerance",
                &tolerance,
                "--header",
                &v.header,
            ],
            v.raw_body.as_bytes(),
        );
        let json: serde_json::Value = serde_json::from_str(&out).unwrap_or_default();
        // `verify` checks the signature only; the one invalid_payload vector has a valid one.
        let signature_valid = v.expect_valid;
        let agrees = if signature_valid {
            code == 0 && json["valid"] == true
        } else {
            code == 1 && json["error"] == v.expect_error.clone().unwrap_or_default()
        };
        if !agrees {
            disagreements.push(format!("{}: exit {code}, {out}", v.name));
        }
    }
    assert!(disagreements.is_empty(), "{}", disagreements.join("\n"));
}

#[test]
fn verify_command_names_the_matching_secret_and_never_prints_secrets() {
    let body = br#"{"event_id":"evt_1"}"#;
    let header = paymos_inbox_core::signature::signature_header(
        100,
        body,
        &[&paymos_inbox_core::signature::WebhookSecret::new(
            "whsec_test_new",
        )],
    );
    let (code, out) = paymos_inbox(
        &[
            "verify",
            "--secret",
            "live=whsec_live_old",
            "--secret",
            "test-next=whsec_test_new",
            "--now",
            "100",
            "--header",
            &header,
        ],
        body,
    );
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("'test-next'") && out.contains("environment: test"),
        "{out}"
    );
    assert!(!out.contains("whsec_"), "{out}");

    let (code, out) = paymos_inbox(
        &[
            "verify",
            "--secret",
            "whsec_test_new",
            "--now",
            "1000",
            "--header",
            &header,
        ],
        body,
    );
    assert_eq!(code, 1);
    assert!(
        out.contains("timestamp_outside_tolerance") && out.contains("900s"),
        "{out}"
    );
}
