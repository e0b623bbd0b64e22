//! The `paymos-inbox` binary as a merchant runs it.

use std::io::Write;
use std::process::{Command, Stdio};

use paymos_inbox_testkit::scratch;
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
    let header = paymos_inbox_core::wire::signature::signature_header(
        100,
        body,
        &[&paymos_inbox_core::wire::signature::WebhookSecret::new(
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

// Issue 42, item 12: `paymos-inbox completions bash | head` panicked (exit 101) on the closed
// pipe.
#[test]
fn completions_into_a_pipe_closed_early_exit_zero() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_paymos-inbox"))
        .args(["completions", "bash"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run paymos-inbox");
    // The reader goes away before reading a byte, as `head -c0` would.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

// Issue 42, item 12: a missing folder is the caller's to fix (exit 2), not an unreachable
// service (exit 4).
#[test]
fn events_refresh_without_its_folder_is_bad_input() {
    let scratch = scratch("refresh");
    let dir = scratch.path();
    let out = Command::new(env!("CARGO_BIN_EXE_paymos-inbox"))
        .args(["events", "refresh"])
        .current_dir(dir)
        .output()
        .expect("run paymos-inbox");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--dir"), "says how to name it: {stderr}");
}

// Issue 42, item 5: the top-level help and `release --help` said it releases an unconfirmed
// invoice; the code refuses that and points at `recheck`.
#[test]
fn release_is_described_as_the_code_does_it() {
    let help = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_paymos-inbox"))
            .args(args)
            .output()
            .expect("run paymos-inbox");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let top = help(&["--help"]);
    let release = top
        .lines()
        .find(|l| l.trim_start().starts_with("release "))
        .expect("release in the list");
    assert!(!release.contains("unconfirmed"), "{release}");
    let long = help(&["release", "--help"]);
    assert!(long.contains("recheck"), "{long}");
    assert!(!long.contains("paid-late or unconfirmed"), "{long}");
    let operating = include_str!("../../../../docs/operating.md");
    assert!(
        !operating.contains("or an\nunconfirmed `invoice.paid`"),
        "docs/operating.md says release ships an unconfirmed payment"
    );
}

// Issue 42, item 12: a table or queue missing from what `--dev-info` named was answered with
// "pass … --dev-info dev.json (a running `dev`)", the flag just given.
#[test]
fn a_name_missing_from_dev_info_is_said_without_suggesting_dev_info_again() {
    let scratch = scratch("need");
    let dir = scratch.path();
    // A `dev` line that names no table and no queue (another version's); its endpoints answer
    // nothing, and nothing is called before the names are checked.
    std::fs::write(
        dir.join("dev.json"),
        r#"{"ingest_url":"http://127.0.0.1:9/","dynamodb_endpoint":"http://127.0.0.1:9","sqs_endpoint":"http://127.0.0.1:9","tables":{},"queues":{}}"#,
    )
    .unwrap();
    for (args, missing) in [
        (
            &["pending", "--dev-info", "dev.json"][..],
            "deliveries-table",
        ),
        (&["exceptions", "--dev-info", "dev.json"][..], "state-table"),
        (
            &["events", "redrive", "--dev-info", "dev.json"][..],
            "webhook-queue-url",
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_paymos-inbox"))
            .args(args)
            .current_dir(dir)
            .env_remove("DELIVERIES_TABLE")
            .env_remove("STATE_TABLE")
            .env_remove("WEBHOOK_QUEUE_URL")
            .env_remove("WEBHOOK_DLQ_URL")
            .env_remove("PAYMOS_INBOX_STACK_NAME")
            .env_remove("PAYMOS_INBOX_CONFIG_ENV")
            .output()
            .expect("run paymos-inbox");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.starts_with(&format!("error: no {missing}: dev.json names none")),
            "{args:?}: {stderr}"
        );
        assert!(
            !stderr.contains("--dev-info"),
            "{args:?}: suggests the flag given: {stderr}"
        );
        assert!(
            stderr.contains(&format!("or pass --{missing}")),
            "{args:?}: {stderr}"
        );
    }
}

/// Every command's `--help` as the binary prints it (the root, groups and leaves), by path.
fn helps(path: &[&str], out: &mut Vec<(String, String)>) {
    let out_of = Command::new(env!("CARGO_BIN_EXE_paymos-inbox"))
        .args(path)
        .arg("--help")
        .output()
        .expect("run paymos-inbox");
    let text = String::from_utf8_lossy(&out_of.stdout).into_owned();
    let subcommands: Vec<String> = text
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect();
    out.push((path.join(" "), text));
    for sub in &subcommands {
        let mut deeper = path.to_vec();
        deeper.push(sub);
        helps(&deeper, out);
    }
}

// Issue 42, item 12: every example a `--help` gives with the exit code it states
// (`… # exit N`) exits with it, run as a reader's shell would (its variables set, `…` a value,
// redirections to nothing), with nothing from the developer's environment. That each example
// parses: `doc_commands::every_help_example_parses_with_the_variables_it_sets`.
#[test]
fn every_help_example_that_states_an_exit_code_exits_with_it() {
    let mut all = Vec::new();
    helps(&[], &mut all);
    assert!(all.len() >= 20, "{} helps", all.len());
    let scratch = scratch("help-examples");
    let dir = scratch.path();
    let mut checked = 0;
    let mut failures = Vec::new();
    for (path, help) in &all {
        for line in help.lines() {
            let (Some(at), Some((command, comment))) =
                (line.find("paymos-inbox "), line.split_once(" # exit "))
            else {
                continue;
            };
            let code: i32 = comment
                .split(|c: char| !c.is_ascii_digit())
                .next()
                .and_then(|c| c.parse().ok())
                .expect("# exit N");
            let env: Vec<(String, String)> = line[..at]
                .split_whitespace()
                .filter_map(|w| w.split_once('='))
                .map(|(n, v)| (n.to_owned(), v.replace('…', "x")))
                .collect();
            let words = shell_words::split(&command[at..].replace('…', "x")).unwrap();
            let args: Vec<&String> = words
                .iter()
                .skip(1)
                .take_while(|w| !matches!(w.as_str(), ">" | ">>" | "<" | "|" | "2>"))
                .collect();
            let out = Command::new(env!("CARGO_BIN_EXE_paymos-inbox"))
                .args(&args)
                .env_clear()
                .env("PATH", std::env::var_os("PATH").unwrap_or_default())
                .env("HOME", dir)
                .envs(env)
                .current_dir(dir)
                .stdin(Stdio::null())
                .output()
                .expect("run paymos-inbox");
            checked += 1;
            if out.status.code() != Some(code) {
                failures.push(format!(
                    "paymos-inbox {path} --help: {}\n  exit {:?}, not {code}: {}",
                    line.trim(),
                    out.status.code(),
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(checked >= 1, "an example states its exit code");
}

// Attack round 4, F6: `pending --limit 0` listed nothing and exited 0, as if nothing were
// pending. A limit of 0 is bad input (exit 2), said before any read.
#[test]
fn pending_with_a_limit_of_zero_is_bad_input() {
    let scratch = scratch("pending-limit");
    let out = Command::new(env!("CARGO_BIN_EXE_paymos-inbox"))
        .args(["pending", "--limit", "0", "--dev-info", "absent.json"])
        .current_dir(scratch.path())
        .output()
        .expect("run paymos-inbox");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--limit") && stderr.contains("0 would list nothing"),
        "refused for its limit, before reading anything: {stderr}"
    );
}
