//! The one fake Paymos API of the emulator tests, on loopback, reached through the official
//! `paymos` crate: invoices (one answer per read, the last repeated; listed with status filters
//! and cursor pages of two), refunds (read and listed by invoice), withdrawals and deposits.
//! Every request's signature is checked; it can answer 404, hang, or refuse the key (401).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use hmac::{KeyInit, Mac};
use http_body_util::Full;
use hyper::body::Bytes;
use serde_json::{Value, json};

/// The API key and secret the fake accepts.
pub const KEY: &str = "pk_test_fake";
pub const SECRET: &str = "sk_test_fake_secret";

/// What the fake answers for one invoice.
#[derive(Clone, Debug)]
pub enum Answer {
    /// These invoice documents, one per read, the last repeated.
    Invoices(Vec<Value>),
    /// 404.
    NotFound,
    /// Never answers.
    Hang,
}

#[derive(Default)]
struct State {
    invoices: BTreeMap<String, Answer>,
    /// List items given as such (else derived from the invoices' current documents).
    listed: Option<Arc<Vec<Value>>>,
    refunds: Vec<Value>,
    withdrawals: HashMap<String, Value>,
    deposits: HashMap<String, Value>,
    refuse_key: bool,
    /// Items a page (0: two).
    page_size: usize,
    /// How long each list page takes to answer (Paymos' latency).
    page_latency: Duration,
    /// How many list requests are answered 429 with `Retry-After: 1` before the others.
    throttle: usize,
}

/// Requests the fake saw, by whether their signature verified.
#[derive(Default)]
pub struct Seen {
    pub verified: AtomicUsize,
    pub rejected: AtomicUsize,
    /// List pages being answered now, and the most ever at once.
    pub listing: AtomicUsize,
    pub most_listing: AtomicUsize,
    /// List requests answered 429.
    pub throttled: AtomicUsize,
    /// Each list request's `created_from` and `created_to`, in the order they came.
    pub listed: Mutex<Vec<(Option<i64>, Option<i64>)>>,
}

/// A running fake.
#[derive(Clone)]
pub struct FakePaymos {
    pub url: String,
    state: Arc<Mutex<State>>,
    pub seen: Arc<Seen>,
}

/// An invoice document as `GET /v1/invoices/{id}` answers it (order `order-{id}`).
pub fn invoice(id: &str, status: &str, order: (&str, &str), token: (&str, &str)) -> Value {
    json!({"invoice_id": id, "project_id": "prj_1", "status": status, "is_final": status == "paid",
        "is_test": false, "payment_url": "https://pay.example/x",
        "order": {"external_id": format!("order-{id}"), "amount": order.0, "currency": order.1},
        "payment": {"currency": token.1, "network": "TON", "chain_id": 1, "expected": token.0},
        "created_at": 1, "updated_at": 2})
}

/// A completed refund of `invoice_id` as `GET /v1/refunds/{id}` answers it.
pub fn refund(withdrawal_id: &str, invoice_id: &str, mode: &str, amount: &str) -> Value {
    json!({"type": "refund", "withdrawal_id": withdrawal_id, "invoice_id": invoice_id,
        "mode": mode, "status": "completed", "is_final": true, "is_test": false,
        "amount": amount, "currency": "USDT", "network": "TON", "first_sender": "UQ…",
        "created_at": 1})
}

/// A final deposit as `GET /v1/payment-channel-deposits/{id}` answers it.
pub fn deposit(id: &str, payer: &str, net: &str) -> Value {
    json!({"id": id, "payment_channel_id": "pc_1", "project_id": "prj_1",
        "payment_channel_external_id": payer, "status": "confirmed", "is_final": true,
        "is_test": false, "currency": "USDT", "network": "TON", "chain_id": 1, "gross": net,
        "fee": "0", "net": net, "applied_fee_percent": 0.0, "customer_fee_percent": 0.0,
        "tx_hash": "0x1", "transfer_id": "trf_1", "destination_address": "UQ…",
        "block_height": 1, "created_at": 1, "updated_at": 2})
}

/// The list item of an invoice document.
fn list_item(doc: &Value) -> Value {
    let mut item = json!({"invoice_id": doc["invoice_id"], "project_id": "prj_1",
        "external_order_id": doc["order"]["external_id"], "status": doc["status"],
        "is_final": doc["is_final"], "is_test": doc["is_test"],
        "amount": doc["order"]["amount"], "currency": doc["order"]["currency"],
        "created_at": doc["created_at"]});
    if let Some(late) = doc.get("paid_late_at") {
        item["paid_late_at"] = late.clone();
    }
    item
}

/// Checks `Authorization: HMAC-SHA256 {key}:{base64 HMAC(secret, ts\nMETHOD\npath\n?query\nbody-hash)}`.
fn signed(req: &hyper::Request<hyper::body::Incoming>) -> bool {
    let ts = req
        .headers()
        .get("x-request-timestamp")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let query = req
        .uri()
        .query()
        .map(|q| format!("?{q}"))
        .unwrap_or_default();
    let canonical = format!("{ts}\n{}\n{}\n{query}\n", req.method(), req.uri().path());
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
    mac.update(canonical.as_bytes());
    let expected = format!(
        "HMAC-SHA256 {KEY}:{}",
        base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
    );
    req.headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        == Some(expected.as_str())
}

fn reply(status: u16, body: &Value) -> hyper::Response<Full<Bytes>> {
    let mut r = hyper::Response::new(Full::new(Bytes::from(body.to_string())));
    *r.status_mut() = hyper::StatusCode::from_u16(status).unwrap();
    r.headers_mut()
        .insert("content-type", "application/json".parse().unwrap());
    r
}

fn problem(status: u16, title: &str) -> hyper::Response<Full<Bytes>> {
    reply(
        status,
        &json!({"type": "about:blank", "title": title, "status": status}),
    )
}

/// One page of two from `items`, at the opaque cursor `c{n}`.
/// One page of `items` from the request's cursor, `size` long (two by default, so that a few
/// items already take several pages; [`FakePaymos::page_size`] sets what Paymos' `limit` would).
fn page(items: &[&Value], query: &[(String, String)], size: usize) -> Value {
    let start: usize = query
        .iter()
        .find(|(k, _)| k == "cursor")
        .and_then(|(_, c)| c.strip_prefix('c'))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let next = (start + size < items.len()).then(|| format!("c{}", start + size));
    json!({"items": items.iter().skip(start).take(size).collect::<Vec<_>>(), "next_cursor": next})
}

impl FakePaymos {
    /// Starts the fake on a free loopback port.
    pub async fn start() -> Self {
        let state: Arc<Mutex<State>> = Arc::default();
        let seen: Arc<Seen> = Arc::default();
        let (s, n) = (state.clone(), seen.clone());
        let url = paymos_inbox_local::stub::serve(move |req| {
            let (state, seen) = (s.clone(), n.clone());
            async move { Self::serve(&state, &seen, req).await }
        })
        .await
        .unwrap();
        Self { url, state, seen }
    }

    #[allow(
        clippy::too_many_lines,
        reason = "one fake API: every route in one match, as the real one's table reads"
    )]
    async fn serve(
        state: &Mutex<State>,
        seen: &Seen,
        req: hyper::Request<hyper::body::Incoming>,
    ) -> hyper::Response<Full<Bytes>> {
        if !signed(&req) || state.lock().unwrap().refuse_key {
            seen.rejected.fetch_add(1, Ordering::SeqCst);
            return problem(401, "bad signature");
        }
        seen.verified.fetch_add(1, Ordering::SeqCst);
        let path = req.uri().path().to_owned();
        let query: Vec<(String, String)> = req
            .uri()
            .query()
            .unwrap_or_default()
            .split('&')
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        let wanted = |name: &str| -> Vec<String> {
            query
                .iter()
                .filter(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
                .collect()
        };
        if path == "/v1/invoices" {
            let (latency, throttled) = {
                let mut st = state.lock().unwrap();
                let throttled = st.throttle > 0;
                st.throttle = st.throttle.saturating_sub(1);
                (st.page_latency, throttled)
            };
            if throttled {
                seen.throttled.fetch_add(1, Ordering::SeqCst);
                let mut r = problem(429, "slow down");
                r.headers_mut().insert("retry-after", "1".parse().unwrap());
                return r;
            }
            let now = seen.listing.fetch_add(1, Ordering::SeqCst) + 1;
            seen.most_listing.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(latency).await;
            seen.listing.fetch_sub(1, Ordering::SeqCst);
            let statuses = wanted("status");
            // Shared, not copied: a listing of many pages reads the same items each time.
            let items: Arc<Vec<Value>> = {
                let st = state.lock().unwrap();
                st.listed.clone().unwrap_or_else(|| {
                    Arc::new(
                        st.invoices
                            .values()
                            .filter_map(|a| match a {
                                Answer::Invoices(docs) => docs.last().map(list_item),
                                _ => None,
                            })
                            .collect(),
                    )
                })
            };
            let bound = |name: &str| wanted(name).first().and_then(|v| v.parse::<i64>().ok());
            let (from, to) = (bound("created_from"), bound("created_to"));
            seen.listed.lock().unwrap().push((from, to));
            let items: Vec<&Value> = items
                .iter()
                .filter(|i| {
                    statuses.is_empty() || statuses.iter().any(|s| i["status"].as_str() == Some(s))
                })
                .filter(|i| {
                    let at = i["created_at"].as_i64().unwrap_or_default();
                    from.is_none_or(|f| at >= f) && to.is_none_or(|t| at <= t)
                })
                .collect();
            let size = match state.lock().unwrap().page_size {
                0 => 2,
                n => n,
            };
            return reply(200, &page(&items, &query, size));
        }
        if let Some(id) = path.strip_prefix("/v1/invoices/") {
            let answer = state.lock().unwrap().invoices.get(id).cloned();
            return match answer {
                Some(Answer::Hang) => {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    reply(200, &json!({}))
                }
                Some(Answer::Invoices(mut docs)) => {
                    let next = docs.remove(0);
                    if !docs.is_empty() {
                        state
                            .lock()
                            .unwrap()
                            .invoices
                            .insert(id.to_owned(), Answer::Invoices(docs));
                    }
                    reply(200, &next)
                }
                Some(Answer::NotFound) | None => problem(404, "not found"),
            };
        }
        if path == "/v1/refunds" {
            let invoice = wanted("invoice_id");
            let items: Vec<Value> = state
                .lock()
                .unwrap()
                .refunds
                .iter()
                .filter(|r| invoice.iter().all(|i| r["invoice_id"].as_str() == Some(i)))
                .cloned()
                .collect();
            let size = match state.lock().unwrap().page_size {
                0 => 2,
                n => n,
            };
            return reply(200, &page(&items.iter().collect::<Vec<_>>(), &query, size));
        }
        let found = |doc: Option<Value>| match doc {
            Some(d) => reply(200, &d),
            None => problem(404, "not found"),
        };
        if let Some(id) = path.strip_prefix("/v1/refunds/") {
            let doc = state
                .lock()
                .unwrap()
                .refunds
                .iter()
                .find(|r| r["withdrawal_id"].as_str() == Some(id))
                .cloned();
            return found(doc);
        }
        if let Some(id) = path.strip_prefix("/v1/withdrawals/") {
            return found(state.lock().unwrap().withdrawals.get(id).cloned());
        }
        if let Some(id) = path.strip_prefix("/v1/payment-channel-deposits/") {
            return found(state.lock().unwrap().deposits.get(id).cloned());
        }
        problem(404, "not found")
    }

    /// What the fake answers for `invoice`.
    pub fn answer(&self, invoice: &str, answer: Answer) {
        self.state
            .lock()
            .unwrap()
            .invoices
            .insert(invoice.to_owned(), answer);
    }

    /// The list endpoint's items, as given (instead of the invoices' documents).
    pub fn list(&self, items: Vec<Value>) {
        self.state.lock().unwrap().listed = Some(Arc::new(items));
    }

    /// Pages of `size` items (Paymos' largest `limit` is 100), instead of two.
    pub fn page_size(&self, size: usize) {
        self.state.lock().unwrap().page_size = size;
    }

    /// Each list page answered after `latency`, as Paymos' would be.
    pub fn page_latency(&self, latency: Duration) {
        self.state.lock().unwrap().page_latency = latency;
    }

    /// The next `n` list requests are answered 429 with `Retry-After: 1`.
    pub fn throttle(&self, n: usize) {
        self.state.lock().unwrap().throttle = n;
    }

    /// A refund the fake knows.
    pub fn refund(&self, doc: Value) {
        self.state.lock().unwrap().refunds.push(doc);
    }

    /// A deposit the fake knows.
    pub fn deposit(&self, id: &str, doc: Value) {
        self.state
            .lock()
            .unwrap()
            .deposits
            .insert(id.to_owned(), doc);
    }

    /// Every request from now on is refused with 401 (a revoked key).
    pub fn refuse_key(&self) {
        self.state.lock().unwrap().refuse_key = true;
    }

    /// A client of the official crate for the fake (no retries).
    pub fn client_with_timeout(&self, timeout: Duration) -> paymos::PaymosClient {
        paymos::PaymosClient::builder(KEY, SECRET)
            .base_url(&self.url)
            .timeout(timeout)
            .max_retries(0)
            .build()
            .unwrap()
    }

    /// [`FakePaymos::client_with_timeout`] with 3 s.
    pub fn client(&self) -> paymos::PaymosClient {
        self.client_with_timeout(Duration::from_secs(3))
    }
}
