//! The hand-off destination's health on `dev --forward-to` (its event source mapping's
//! stand-in, switched through the same adapter as Lambda's): `events pause` keeps every event
//! in its queue, `events resume` delivers each once, `events test` posts a signed test event,
//! and each is one audit entry.

use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use paymos_inbox_testkit::*;

type Posts = Arc<Mutex<Vec<(Vec<(String, String)>, String)>>>;

/// A consumer that takes everything (204) and keeps what it got.
async fn consumer() -> (String, Posts) {
    let posts: Posts = Arc::default();
    let kept = posts.clone();
    let url = paymos_inbox_local::stub::serve(move |req: hyper::Request<hyper::body::Incoming>| {
        let kept = kept.clone();
        async move {
            use http_body_util::BodyExt as _;
            let headers = req
                .headers()
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or_default().to_owned()))
                .collect();
            let body = req.into_body().collect().await.unwrap().to_bytes();
            kept.lock()
                .unwrap()
                .push((headers, String::from_utf8_lossy(&body).into_owned()));
            let mut r = hyper::Response::new(http_body_util::Full::new(hyper::body::Bytes::new()));
            *r.status_mut() = hyper::StatusCode::NO_CONTENT;
            r
        }
    })
    .await
    .unwrap();
    (url, posts)
}

async fn cli(args: Vec<String>) -> (Option<i32>, String) {
    let out = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_paymos-inbox"))
            .args(&args)
            .env_remove("PAYMOS_WEBHOOK_SECRET")
            .env_remove("AWS_ENDPOINT_URL_DYNAMODB")
            .env_remove("AWS_ENDPOINT_URL_SQS")
            .output()
            .expect("run paymos-inbox")
    })
    .await
    .unwrap();
    (
        out.status.code(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

fn words(w: &[&str]) -> Vec<String> {
    w.iter().map(|w| (*w).to_owned()).collect()
}

fn ids(posts: &Posts) -> Vec<String> {
    posts
        .lock()
        .unwrap()
        .iter()
        .filter_map(|(h, _)| {
            h.iter()
                .find(|(k, _)| k == "webhook-id")
                .map(|(_, v)| v.clone())
        })
        .collect()
}

#[tokio::test]
async fn a_paused_hand_off_keeps_every_event_and_resumed_delivers_each_once_each_step_audited() {
    let (endpoint, posts) = consumer().await;
    let dev = crate::tools::dev_forwarding_to("pause", endpoint.clone()).await;
    let (_folder, info) = crate::tools::info_file(&dev, "pause-info");
    let on_dev = |w: &[&str]| {
        let mut all = words(w);
        all.extend(["--dev-info".to_owned(), info.clone()]);
        all
    };

    let (code, out) = cli(on_dev(&[
        "events",
        "pause",
        "--actor",
        "alice",
        "--reason",
        "migrating",
    ]))
    .await;
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("paused"), "{out}");
    let (code, out) = cli(on_dev(&["events", "pause", "--actor", "alice"])).await;
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("already paused"), "{out}");

    let invoices = ["inv_pause_1", "inv_pause_2", "inv_pause_3"];
    for invoice in invoices {
        let (code, out) = cli(words(&[
            "send",
            "--url",
            &dev.info.ingest_url,
            "--type",
            "invoice.paid",
            "--resource",
            invoice,
            "--secret",
            TEST_SECRET,
        ]))
        .await;
        assert_eq!(code, Some(0), "{out}");
    }
    // Published to the hand-off's queue meanwhile, and none posted.
    let queue = dev.info.queues["WebhookDeliveryQueue"].clone();
    // Polled until there (the pipeline runs beside every other suite in CI: minutes, not
    // seconds, are the bound).
    let mut waiting = 0;
    for _ in 0..600 {
        let attributes = dev
            .sqs
            .get_queue_attributes()
            .queue_url(&queue)
            .attribute_names(aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessages)
            .send()
            .await
            .unwrap();
        waiting = attributes
            .attributes()
            .and_then(|a| {
                a.get(&aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessages)
            })
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        if waiting >= invoices.len() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(waiting, invoices.len(), "every event waits in the queue");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        ids(&posts).is_empty(),
        "nothing posted while paused: {:?}",
        ids(&posts)
    );

    // `status` says so, and that a person is needed: the events wait.
    let hand_off = |out: &str| -> serde_json::Value {
        let status: serde_json::Value =
            serde_json::from_str(out.lines().find(|l| l.starts_with('{')).unwrap()).unwrap();
        status["header"]["hand_off"].clone()
    };
    let (code, out) = cli(on_dev(&["status", "--json"])).await;
    assert_eq!(
        (code, hand_off(&out)["state"].as_str()),
        (Some(1), Some("paused")),
        "{out}"
    );

    let (code, out) = cli(on_dev(&["events", "resume", "--actor", "alice"])).await;
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("resumed"), "{out}");
    let expected: std::collections::BTreeSet<String> =
        invoices.iter().map(|i| format!("order-paid:{i}")).collect();
    let mut got = std::collections::BTreeSet::new();
    for _ in 0..600 {
        got = ids(&posts).into_iter().collect();
        if got == expected {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(got, expected, "every event delivered after the resume");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(ids(&posts).len(), invoices.len(), "each once");
    let (_, out) = cli(on_dev(&["status", "--json"])).await;
    assert_eq!(hand_off(&out)["state"], "delivering", "{out}");

    // The signed test event: answered 204, and it verifies with dev's secret.
    let (code, out) = cli(on_dev(&["events", "test", "--actor", "alice", "--json"])).await;
    assert_eq!(code, Some(0), "{out}");
    let answer: serde_json::Value =
        serde_json::from_str(out.lines().find(|l| l.starts_with('{')).unwrap()).unwrap();
    assert_eq!(answer["status"], 204, "{answer}");
    let test = posts.lock().unwrap().last().cloned().unwrap();
    assert!(
        answer["webhook_id"]
            .as_str()
            .unwrap()
            .starts_with("endpoint-test:")
    );
    assert!(test.1.contains("\"type\":\"Endpoint Test\""), "{}", test.1);
    paymos_inbox_testkit::standard_webhooks::verifies_with(
        dev.info.webhook_signing_secret.as_deref().unwrap(),
        &test.0,
        &test.1,
    )
    .expect("signed as every event is");

    // Four entries: the pause, the pause that changed nothing, the resume, the test.
    let (code, out) = cli(on_dev(&["audit", "--json"])).await;
    assert_eq!(code, Some(0), "{out}");
    let entries: Vec<serde_json::Value> = out
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let said: Vec<(&str, &str)> = entries
        .iter()
        .map(|e| (e["kind"].as_str().unwrap(), e["result"].as_str().unwrap()))
        .collect();
    let expected = [
        ("events-test", "the endpoint answered 204 in "),
        ("events-resume", "resumed"),
        ("events-pause", "already paused"),
        ("events-pause", "paused"),
    ];
    assert_eq!(said.len(), expected.len(), "{out}");
    for ((kind, result), (want_kind, want_result)) in said.iter().zip(expected) {
        assert_eq!(*kind, want_kind, "{out}");
        assert!(result.starts_with(want_result), "{kind}: {result}");
    }
    assert!(entries.iter().all(|e| e["actor"] == "alice"), "{out}");
}
