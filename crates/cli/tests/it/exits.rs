//! Issue 31: every command walked through its failure modes against the one exit-code table
//! (0 done; 1 needs a person or a check failed; 2 bad usage or input; 3 unproven; 4 could not
//! reach AWS, Paymos or the receiver), as a merchant's script sees it: the built binary, its
//! exit code, stderr in one or two lines with no SDK structure, no colour in a pipe, and
//! `--json` output that parses line by line. The table it walks is written to
//! `target/tmp/exit-codes.md`.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use http_body_util::Full;
use hyper::body::Bytes;
use paymos_inbox_core::wire::signature::{WebhookSecret, signature_header};
use serde_json::json;

use paymos_inbox_testkit::paymos_fake::{self, FakePaymos, KEY, SECRET};
use paymos_inbox_testkit::*;

use crate::tools::dev;

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Mode {
    Ok,
    BadInput,
    Unreachable,
    NeedsAPerson,
}

const MODES: [(Mode, &str); 4] = [
    (Mode::Ok, "ok"),
    (Mode::BadInput, "bad input"),
    (Mode::Unreachable, "unreachable"),
    (Mode::NeedsAPerson, "needs a person"),
];

/// One run of the binary, in `dir`, with nothing from the developer's environment.
fn run(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_paymos-inbox"))
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir)
        .env("AWS_REGION", "us-east-1")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .output()
        .expect("run paymos-inbox");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The walk: each command's runs, their expected codes, and what each printed first.
struct Walk<'a> {
    dir: &'a Path,
    table: BTreeMap<String, BTreeMap<Mode, String>>,
    failures: Vec<String>,
}

impl Walk<'_> {
    fn expect(&mut self, command: &str, mode: Mode, args: &[&str], code: i32) -> String {
        let (got, stdout, stderr) = run(self.dir, args);
        let line = args.join(" ");
        if got != code {
            self.failures.push(format!(
                "{line}: exit {got}, expected {code}\n  stdout: {}\n  stderr: {}",
                stdout.trim(),
                stderr.trim()
            ));
        }
        for (name, text) in [("stdout", &stdout), ("stderr", &stderr)] {
            if text.contains('\u{1b}') {
                self.failures
                    .push(format!("{line}: colour (an escape code) in {name}, a pipe"));
            }
            for structure in ["DispatchFailure", "ConnectorError", "SdkBody", "{ source:"] {
                if text.contains(structure) {
                    self.failures.push(format!(
                        "{line}: an SDK structure ({structure}) in {name} without -v"
                    ));
                }
            }
        }
        let said = match stderr.lines().position(|l| l.starts_with("error: ")) {
            Some(at) => {
                let follow = stderr
                    .lines()
                    .skip(at + 1)
                    .take_while(|l| l.starts_with("  "));
                if follow.count() > 2 {
                    self.failures.push(format!(
                        "{line}: the error takes more than three lines: {stderr}"
                    ));
                }
                stderr.lines().nth(at).unwrap_or_default().to_owned()
            }
            None if code == 2 || code == 4 => {
                self.failures.push(format!(
                    "{line}: exit {code} with no `error:` line: {stderr}"
                ));
                String::new()
            }
            None => stdout.lines().next().unwrap_or_default().to_owned(),
        };
        if args.contains(&"--json") && got == code {
            for l in stdout.lines() {
                if serde_json::from_str::<serde_json::Value>(l).is_err() {
                    self.failures.push(format!(
                        "{line}: --json printed a line that is not JSON: {l}"
                    ));
                }
            }
        }
        let shown: String = said.chars().take(90).collect();
        self.table
            .entry(command.to_owned())
            .or_default()
            .insert(mode, format!("`{got}` {}", shown.replace('|', "\\|")));
        stdout
    }

    fn markdown(&self) -> String {
        let mut out = String::from(
            "| command | ok | bad input | unreachable | needs a person |\n|---|---|---|---|---|\n",
        );
        for (command, cells) in &self.table {
            out.push_str(&format!("| `{command}` |"));
            for (mode, _) in MODES {
                out.push_str(&format!(
                    " {} |",
                    cells.get(&mode).map_or("—", String::as_str)
                ));
            }
            out.push('\n');
        }
        out
    }
}

/// The arguments of one command line, from its parts.
fn cat<'a>(parts: &[&[&'a str]]) -> Vec<&'a str> {
    parts.concat()
}

/// A receiver that answers 200 to anything, signed or not (what `check` must catch).
async fn accepts_everything() -> String {
    paymos_inbox_local::stub::serve(|_req| async {
        hyper::Response::new(Full::new(Bytes::from_static(b"ok")))
    })
    .await
    .expect("a stub")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_command_exits_as_the_table_says_in_each_failure_mode() {
    let running = dev(None).await;
    let scratch_dir = scratch("exits");
    let dir = scratch_dir.path().to_owned();
    let info = serde_json::to_value(&running.info).unwrap();
    std::fs::write(dir.join("dev.json"), format!("{info}\n")).unwrap();
    let mut gone = info.clone();
    gone["dynamodb_endpoint"] = json!("http://127.0.0.1:9");
    gone["sqs_endpoint"] = json!("http://127.0.0.1:9");
    std::fs::write(dir.join("gone.json"), format!("{gone}\n")).unwrap();
    let (dynamodb, sqs) = endpoint_urls();
    let url = running.info.ingest_url.clone();
    let queue = running.info.queues["WorkQueue"].clone();
    let dlq = running.info.queues["DeadLetterQueue"].clone();
    let empty = FakePaymos::start().await;
    empty.list(vec![]);
    let missing = FakePaymos::start().await;
    missing.list(vec![json!({"invoice_id": "inv_missing", "project_id": "prj_local",
        "external_order_id": "order-missing", "status": "paid", "is_final": true, "is_test": true,
        "amount": "25.00", "currency": "USDT", "created_at": paymos_inbox_lambda::now_ms() / 1000 - 60})]);
    let stub = accepts_everything().await;
    let body = r#"{"event_id":"evt_1"}"#;
    std::fs::write(dir.join("body.json"), body).unwrap();
    let header = signature_header(NOW, body.as_bytes(), &[&WebhookSecret::new(TEST_SECRET)]);
    let now = NOW.to_string();
    let (dev_info, gone_info) = (["--dev-info", "dev.json"], ["--dev-info", "gone.json"]);
    let api = ["--api-key", KEY, "--api-secret", SECRET, "--api-base-url"];
    let local = ["--dynamodb-endpoint", &dynamodb, "--sqs-endpoint", &sqs];
    let nowhere = [
        "--dynamodb-endpoint",
        "http://127.0.0.1:9",
        "--sqs-endpoint",
        "http://127.0.0.1:9",
    ];
    let mut w = Walk {
        dir: &dir,
        table: BTreeMap::new(),
        failures: Vec::new(),
    };
    use Mode::*;

    // Before anything is fulfilled: nothing waits, nothing is unknown to Paymos.
    w.expect(
        "exceptions",
        Ok,
        &cat(&[&["exceptions", "--json"], &dev_info]),
        0,
    );
    w.expect(
        "exceptions",
        BadInput,
        &["exceptions", "--dev-info", "nowhere.json"],
        2,
    );
    w.expect(
        "exceptions",
        Unreachable,
        &cat(&[&["exceptions"], &gone_info]),
        4,
    );
    w.expect(
        "reconcile",
        Ok,
        &cat(&[
            &["reconcile", "--from", "1h", "--json"],
            &dev_info,
            &api,
            &[&empty.url],
        ]),
        0,
    );
    w.expect(
        "reconcile",
        BadInput,
        &cat(&[
            &["reconcile", "--from", "someday"],
            &dev_info,
            &api,
            &[&empty.url],
        ]),
        2,
    );
    // Found by the attack on `dev`: a window of nothing (ending before it starts, or starting
    // tomorrow) read nothing and said clean, exit 0.
    for window in [
        &["--from", "2h", "--to", "3h"][..],
        &["--from", "2099-01-01"][..],
    ] {
        w.expect(
            "reconcile",
            BadInput,
            &cat(&[&["reconcile"], window, &dev_info, &api, &[&empty.url]]),
            2,
        );
    }
    w.expect(
        "reconcile",
        Unreachable,
        &cat(&[
            &["reconcile", "--from", "1h", "--json"],
            &dev_info,
            &api,
            &["http://127.0.0.1:9"],
        ]),
        4,
    );
    w.expect(
        "reconcile",
        NeedsAPerson,
        &cat(&[
            &["reconcile", "--from", "1h", "--json"],
            &dev_info,
            &api,
            &[&missing.url],
        ]),
        1,
    );

    w.expect(
        "verify",
        Ok,
        &[
            "verify",
            "--secret",
            TEST_SECRET,
            "--header",
            &header,
            "--now",
            &now,
            "--body-file",
            "body.json",
        ],
        0,
    );
    w.expect(
        "verify",
        BadInput,
        &[
            "verify",
            "--secret",
            TEST_SECRET,
            "--header",
            &header,
            "--tolerance",
            "a while",
            "--body-file",
            "body.json",
        ],
        2,
    );
    w.expect(
        "verify",
        NeedsAPerson,
        &[
            "verify",
            "--secret",
            "whsec_test_other",
            "--header",
            &header,
            "--now",
            &now,
            "--body-file",
            "body.json",
        ],
        1,
    );

    w.expect(
        "send",
        Ok,
        // As the README's quick start: no URL, no flag; `send` finds `dev` (on whatever port
        // it took) through ./dev.json.
        &["send", "--json", "--resource", "inv_quick_start"],
        0,
    );
    w.expect(
        "send --wait",
        Ok,
        &["send", "--json", "--wait", "--dev-info", "dev.json"],
        0,
    );
    // Issue 41: a secret given as `dev --secret` takes it (`label=whsec_…`) signs with the
    // secret, not with the whole text (which got 401).
    let labelled = format!("test={TEST_SECRET}");
    w.expect(
        "send --secret label=secret",
        Ok,
        &[
            "send",
            "--json",
            "--wait",
            "--secret",
            &labelled,
            "--dev-info",
            "dev.json",
        ],
        0,
    );
    w.expect("send", BadInput, &["send", "--url", "not a url"], 2);
    w.expect(
        "send",
        Unreachable,
        &["send", "--url", "http://127.0.0.1:9/"],
        4,
    );
    w.expect(
        "send",
        NeedsAPerson,
        &[
            "send",
            "--json",
            "--url",
            &url,
            "--secret",
            "whsec_test_not_the_receivers",
        ],
        1,
    );

    w.expect(
        "check",
        Ok,
        &[
            "check",
            &url,
            "--patience",
            "20",
            "--settle",
            "0.5",
            "--json",
            "--dev-info",
            "dev.json",
        ],
        0,
    );
    w.expect("check", BadInput, &["check", "receiver"], 2);
    w.expect("check", Unreachable, &["check", "http://127.0.0.1:9/"], 4);
    w.expect(
        "check",
        NeedsAPerson,
        &[
            "check",
            &format!("{stub}/"),
            "--patience",
            "3",
            "--settle",
            "0.1",
        ],
        1,
    );

    w.expect("pending", Ok, &cat(&[&["pending", "--json"], &dev_info]), 0);
    w.expect(
        "pending",
        BadInput,
        &cat(&[&["pending", "--limit", "many"], &dev_info]),
        2,
    );
    w.expect("pending", Unreachable, &cat(&[&["pending"], &gone_info]), 4);

    w.expect("redrive", Ok, &cat(&[&["redrive", "--json"], &dev_info]), 0);
    w.expect(
        "redrive",
        BadInput,
        &["redrive", "--deliveries-table", "t"],
        2,
    );
    w.expect("redrive", Unreachable, &cat(&[&["redrive"], &gone_info]), 4);

    // Issue 40: `audit` exits as the other read commands do.
    w.expect("audit", Ok, &cat(&[&["audit", "--json"], &dev_info]), 0);
    w.expect(
        "audit",
        BadInput,
        &cat(&[&["audit", "--limit", "many"], &dev_info]),
        2,
    );
    w.expect("audit", BadInput, &["audit", "--deliveries-table", "t"], 2);
    w.expect("audit", Unreachable, &cat(&[&["audit"], &gone_info]), 4);

    w.expect(
        "mark-paid",
        Ok,
        &cat(&[
            &[
                "mark-paid",
                "inv_by_hand",
                "--actor",
                "support",
                "--order-id",
                "order-by-hand",
                "--json",
            ],
            &dev_info,
        ]),
        0,
    );
    // No order anywhere: the payment waits for its order, and for a person.
    w.expect(
        "mark-paid",
        NeedsAPerson,
        &cat(&[
            &["mark-paid", "inv_no_order", "--actor", "support", "--json"],
            &dev_info,
        ]),
        1,
    );
    w.expect(
        "mark-paid",
        BadInput,
        &cat(&[&["mark-paid", "42", "--actor", "support"], &dev_info]),
        2,
    );
    // The attack on `dev` (G10): each of these shipped (exit 0, or 1 as a duplicate) and wrote
    // its fulfilment: an invoice id with nothing after `inv_` or a space in it, a blank or
    // spaced currency, an amount of nothing. Bad input, found before any I/O.
    for bad in [
        &["inv_"][..],
        &["inv_zz 18"],
        &["inv_zz8", "--amount", "10", "--currency", ""],
        &["inv_zz14", "--amount", "10", "--currency", "US D"],
        &["inv_zz13", "--amount", "0", "--currency", "USD"],
    ] {
        let words = [
            &["mark-paid"][..],
            bad,
            &["--actor", "al", "--order-id", "o-bad"],
        ];
        w.expect(
            "mark-paid",
            BadInput,
            &cat(&[&words.concat(), &dev_info]),
            2,
        );
    }
    // With the API, `mark-paid` asks Paymos first (the last attack's F3): an invoice Paymos has
    // unpaid ships nothing (exit 1), an order other than Paymos' is refused (exit 2), an API
    // that does not answer applies nothing (exit 4), and Paymos' paid invoice ships (exit 0).
    let asked = FakePaymos::start().await;
    for (id, status) in [("inv_asked", "paid"), ("inv_unpaid", "awaiting_payment")] {
        let mut at = paymos_fake::invoice(id, status, ("25.00", "USD"), ("25.00", "USDT"));
        at["is_test"] = json!(true);
        at["project_id"] = json!("prj_local");
        asked.answer(id, paymos_fake::Answer::Invoices(vec![at]));
    }
    let asking = |args: &[&str], url: &str| -> Vec<String> {
        let words: Vec<&str> = [&["mark-paid"][..], args, &dev_info, &api, &[url]].concat();
        words.into_iter().map(str::to_owned).collect()
    };
    for (args, url, mode, code) in [
        (
            &["inv_unpaid", "--actor", "support"][..],
            &asked.url,
            NeedsAPerson,
            1,
        ),
        (
            &[
                "inv_asked",
                "--actor",
                "support",
                "--order-id",
                "not-paymos",
            ][..],
            &asked.url,
            BadInput,
            2,
        ),
        (
            &["inv_asked", "--actor", "support"][..],
            &"http://127.0.0.1:9".to_owned(),
            Unreachable,
            4,
        ),
        (
            &["inv_asked", "--actor", "support", "--json"][..],
            &asked.url,
            Ok,
            0,
        ),
    ] {
        let words = asking(args, url);
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        let out = w.expect("mark-paid", mode, &words, code);
        if code == 0 {
            assert!(out.contains(r#""outcome":"fulfilled""#), "{out}");
        }
    }
    // Issue 38, case 5: a blank id (an unset shell variable) names nothing: refused, no write.
    for blank in ["", " ", "\t"] {
        w.expect(
            "mark-paid",
            BadInput,
            &cat(&[
                &[
                    "mark-paid",
                    "inv_blank",
                    "--actor",
                    "support",
                    "--order-id",
                    blank,
                ],
                &dev_info,
            ]),
            2,
        );
        w.expect(
            "mark-paid",
            BadInput,
            &cat(&[&["mark-paid", "inv_blank", "--actor", blank], &dev_info]),
            2,
        );
        w.expect(
            "release",
            BadInput,
            &cat(&[&["release", blank, "--actor", "support"], &dev_info]),
            2,
        );
        w.expect(
            "orders register",
            BadInput,
            &cat(&[
                &[
                    "orders",
                    "register",
                    blank,
                    "--amount",
                    "1",
                    "--currency",
                    "USD",
                ],
                &dev_info,
            ]),
            2,
        );
    }
    w.expect(
        "mark-paid",
        Unreachable,
        &cat(&[
            &["mark-paid", "inv_by_hand", "--actor", "support"],
            &gone_info,
        ]),
        4,
    );

    // A payment short of its registered order is held: it waits for a person.
    w.expect(
        "orders register",
        Ok,
        &cat(&[
            &[
                "orders",
                "register",
                "order-held",
                "--amount",
                "10.00",
                "--currency",
                "USD",
            ],
            &dev_info,
        ]),
        0,
    );
    w.expect(
        "orders register",
        BadInput,
        &cat(&[
            &[
                "orders",
                "register",
                "order-held",
                "--amount",
                "ten",
                "--currency",
                "USD",
            ],
            &dev_info,
        ]),
        2,
    );
    w.expect(
        "orders register",
        Unreachable,
        &cat(&[
            &[
                "orders",
                "register",
                "order-held",
                "--amount",
                "10.00",
                "--currency",
                "USD",
            ],
            &gone_info,
        ]),
        4,
    );
    run(
        &dir,
        &cat(&[
            &[
                "mark-paid",
                "inv_held",
                "--actor",
                "support",
                "--order-id",
                "order-held",
                "--amount",
                "5.00",
                "--currency",
                "USD",
            ],
            &dev_info,
        ]),
    );
    w.expect(
        "exceptions",
        NeedsAPerson,
        &cat(&[&["exceptions", "--json"], &dev_info]),
        1,
    );
    w.expect(
        "release",
        NeedsAPerson,
        &cat(&[
            &["release", "inv_held", "--actor", "support", "--json"],
            &dev_info,
        ]),
        1,
    );
    // The attack on `dev` (G11): a project the stack does not apply was refused as a payment
    // that waits (exit 1) after an audit entry; it is bad input, as for `mark-paid` (exit 2).
    w.expect(
        "release",
        BadInput,
        &cat(&[
            &[
                "release",
                "inv_held",
                "--actor",
                "al",
                "--project",
                "prj_zz",
            ],
            &dev_info,
        ]),
        2,
    );
    w.expect(
        "release",
        Ok,
        &cat(&[
            &[
                "release",
                "inv_held",
                "--actor",
                "support",
                "--override-amount",
                "--reason",
                "paid the rest by card",
                "--json",
            ],
            &dev_info,
        ]),
        0,
    );
    w.expect(
        "release",
        BadInput,
        &cat(&[&["release", "held", "--actor", "support"], &dev_info]),
        2,
    );
    w.expect(
        "release",
        Unreachable,
        &cat(&[&["release", "inv_held", "--actor", "support"], &gone_info]),
        4,
    );

    w.expect(
        "recheck",
        Ok,
        &cat(&[
            &["recheck", "--all-unconfirmed", "--json"],
            &dev_info,
            &api,
            &[&empty.url],
        ]),
        0,
    );
    w.expect(
        "recheck",
        BadInput,
        &cat(&[&["recheck", "42"], &dev_info, &api, &[&empty.url]]),
        2,
    );
    w.expect(
        "recheck",
        Unreachable,
        &cat(&[
            &["recheck", "--all-unconfirmed", "--json"],
            &gone_info,
            &api,
            &[&empty.url],
        ]),
        4,
    );

    w.expect(
        "events tail",
        Ok,
        &cat(&[&["events", "tail"], &dev_info]),
        0,
    );
    w.expect(
        "events tail",
        BadInput,
        &cat(&[&["events", "tail", "--since", "someday"], &dev_info]),
        2,
    );
    w.expect(
        "events tail",
        Unreachable,
        &cat(&[&["events", "tail"], &gone_info]),
        4,
    );
    let since = w.expect(
        "events since",
        Ok,
        &cat(&[&["events", "since", "1h"], &dev_info]),
        0,
    );
    assert!(
        since.lines().count() >= 2,
        "the payments above stand for events: {since}"
    );
    w.expect(
        "events since",
        BadInput,
        &cat(&[&["events", "since", "someday"], &dev_info]),
        2,
    );
    w.expect(
        "events since",
        Unreachable,
        &cat(&[&["events", "since", "1h"], &gone_info]),
        4,
    );
    w.expect(
        "events resend",
        Ok,
        &cat(&[&["events", "resend", "--since", "1h"], &dev_info]),
        0,
    );
    w.expect(
        "events resend",
        BadInput,
        &cat(&[&["events", "resend", "--since", "someday"], &dev_info]),
        2,
    );
    w.expect(
        "events resend",
        Unreachable,
        &cat(&[&["events", "resend", "--since", "1h"], &gone_info]),
        4,
    );
    let queues = ["--webhook-queue-url", &queue, "--webhook-dlq-url", &dlq];
    w.expect(
        "events redrive",
        Ok,
        &cat(&[&["events", "redrive", "--json"], &dev_info, &queues]),
        0,
    );
    w.expect(
        "events redrive",
        BadInput,
        &cat(&[
            &["events", "redrive", "--per-second", "0"],
            &dev_info,
            &queues,
        ]),
        2,
    );
    w.expect(
        "events redrive",
        Unreachable,
        &cat(&[&["events", "redrive"], &gone_info, &queues]),
        4,
    );
    let events = dir.join("events");
    std::fs::create_dir_all(&events).unwrap();
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../events"));
    for entry in std::fs::read_dir(root).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, events.join(path.file_name().unwrap())).unwrap();
    }
    w.expect(
        "events refresh",
        Ok,
        &["events", "refresh", "--dir", "events", "--at", &now],
        0,
    );
    w.expect(
        "events refresh",
        BadInput,
        &["events", "refresh", "--dir", "events", "--at", "someday"],
        2,
    );

    w.expect(
        "soak",
        Ok,
        &cat(&[&["soak", "--deliveries", "20", "--json"], &local]),
        0,
    );
    w.expect("soak", BadInput, &["soak", "--fail-rate", "often"], 2);
    w.expect(
        "soak",
        Unreachable,
        &cat(&[&["soak", "--deliveries", "20"], &nowhere]),
        4,
    );
    w.expect(
        "bench-e2e",
        Ok,
        &cat(&[&["bench-e2e", "--deliveries", "20", "--json"], &local]),
        0,
    );
    w.expect(
        "bench-e2e",
        BadInput,
        &["bench-e2e", "--duplicates", "some"],
        2,
    );
    w.expect(
        "bench-e2e",
        Unreachable,
        &cat(&[&["bench-e2e", "--deliveries", "20"], &nowhere]),
        4,
    );

    let port = url
        .trim_end_matches('/')
        .rsplit(':')
        .next()
        .unwrap()
        .to_owned();
    w.expect("dev", BadInput, &["dev", "--port", &port], 2);
    w.expect(
        "dev",
        Unreachable,
        &cat(&[&["dev", "--port", "0"], &nowhere]),
        4,
    );
    w.expect("completions", Ok, &["completions", "bash"], 0);
    w.expect("completions", BadInput, &["completions", "tcsh"], 2);

    let table = w.markdown();
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("exit-codes.md");
    std::fs::write(&out, &table).unwrap();
    println!("{table}");
    assert!(
        w.failures.is_empty(),
        "{}\n\n{table}",
        w.failures.join("\n")
    );
    assert!(w.table.len() >= 20, "{} commands walked", w.table.len());
}

// Found by the last attack on `dev`: stopped by SIGTERM (a process manager, `kill`, a CI
// runner), `dev` left its info file behind, which sends `send`, `console` and the operator's
// commands to a port nobody listens on. SIGTERM now stops it as Ctrl-C does: the file goes,
// and it exits 0.
#[test]
fn dev_stopped_by_sigterm_removes_its_info_file() {
    let (dynamodb, sqs) = endpoint_urls();
    let scratch = scratch("dev-sigterm");
    let info = scratch.path().join("dev.json");
    let mut dev = Command::new(env!("CARGO_BIN_EXE_paymos-inbox"))
        .args(["dev", "--port", "0", "--no-handlers", "--prefix"])
        .arg(unique("sigterm"))
        .arg("--info-file")
        .arg(&info)
        .args(["--dynamodb-endpoint", &dynamodb, "--sqs-endpoint", &sqs])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("paymos-inbox dev");
    let started = std::time::Instant::now();
    while !info.is_file() {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(120),
            "dev never wrote its info file"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let killed = Command::new("kill")
        .args(["-TERM", &dev.id().to_string()])
        .status()
        .expect("kill");
    assert!(killed.success());
    let status = dev.wait().expect("dev exits");
    assert!(status.success(), "{status:?}");
    assert!(!info.exists(), "the info file outlived dev");
}
