//! moto's server (`.venv`, installed by `make deps` from requirements-dev.txt's pin) for the
//! AWS services no other emulator here serves: CloudWatch's alarms and CloudFormation's stacks.
//! One per test, on a free loopback port, stopped when dropped.
//!
//! The SDK speaks CloudWatch's newest protocol, Smithy RPC v2 CBOR; moto serves CloudWatch in
//! its JSON and query protocols only. A loopback bridge in front of moto turns each CBOR call
//! into the same call in AWS JSON 1.0 and moto's answer back into CBOR, value for value; every
//! other call passes through as it is. What is stored and answered is moto's.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use minicbor::data::{IanaTag, Tag, Type};
use serde_json::{Map, Number, Value};

/// Where an RPC v2 CBOR call names its service and operation.
const CBOR_PATH: &str = "/service/";

/// moto's server and the bridge before it.
pub struct Moto {
    child: Child,
    /// The endpoint the SDK's clients are given: the bridge's.
    pub url: String,
}

impl Moto {
    /// Starts moto's server on a free loopback port and the bridge before it.
    ///
    /// # Panics
    /// When `.venv` has no moto (`make deps` installs it), or its server does not answer.
    pub async fn start() -> Self {
        let server = Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../.venv/bin/moto_server"
        ));
        assert!(
            server.exists(),
            "{} is missing: `make deps` installs it",
            server.display()
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free loopback port")
            .port();
        let child = Command::new(server)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("moto_server starts");
        let moto = format!("http://127.0.0.1:{port}");
        let mut ready = false;
        for _ in 0..150 {
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                ready = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let mut started = Self {
            child,
            url: String::new(),
        };
        assert!(ready, "moto's server did not answer on port {port}");
        let http = reqwest::Client::new();
        started.url = paymos_inbox_local::stub::serve(move |req| {
            let (http, moto) = (http.clone(), moto.clone());
            async move { bridge(&http, &moto, req).await }
        })
        .await
        .expect("the bridge binds a loopback port");
        started
    }

    /// The SDK's configuration for moto: its endpoint, a region and test credentials.
    pub async fn config(&self) -> aws_config::SdkConfig {
        aws_config::defaults(aws_config::BehaviorVersion::latest())
            .region(aws_config::Region::new("us-east-1"))
            .credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
                "test", "test", None, None, "moto",
            ))
            .endpoint_url(&self.url)
            .load()
            .await
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        self.child.kill().ok();
        self.child.wait().ok();
    }
}

/// One call: a CBOR one translated (`/service/<Service>/operation/<Operation>`), any other
/// passed through.
async fn bridge(
    http: &reqwest::Client,
    moto: &str,
    req: hyper::Request<hyper::body::Incoming>,
) -> hyper::Response<Full<Bytes>> {
    let (parts, body) = req.into_parts();
    let body = body.collect().await.expect("a request body").to_bytes();
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let target = path.strip_prefix(CBOR_PATH).and_then(|rest| {
        let (service, operation) = rest.split_once("/operation/")?;
        Some(format!("{service}.{operation}"))
    });
    let mut forward = http.request(
        parts.method.clone(),
        format!("{moto}{}", if target.is_some() { "/" } else { path }),
    );
    for (name, value) in &parts.headers {
        if !matches!(
            name.as_str(),
            "host" | "content-length" | "content-type" | "smithy-protocol" | "accept"
        ) {
            forward = forward.header(name, value);
        }
    }
    let forward = match &target {
        Some(target) => forward
            .header("x-amz-target", target)
            .header("content-type", "application/x-amz-json-1.0")
            .body(json_of_cbor(&body).to_string()),
        None => {
            let mut f = forward.body(body.to_vec());
            if let Some(ct) = parts.headers.get("content-type") {
                f = f.header("content-type", ct);
            }
            f
        }
    };
    let answer = forward.send().await.expect("moto answers");
    let status = answer.status().as_u16();
    let content_type = answer.headers().get("content-type").cloned();
    let answer = answer.bytes().await.expect("moto's answer");
    let mut reply = if target.is_some() {
        let value: Value = if answer.is_empty() {
            Value::Object(Map::new())
        } else {
            serde_json::from_slice(&answer).unwrap_or_else(|e| {
                panic!(
                    "moto's JSON answer ({e}): {}",
                    String::from_utf8_lossy(&answer)
                )
            })
        };
        let mut r = hyper::Response::new(Full::new(Bytes::from(cbor_of_json(&value))));
        let headers = r.headers_mut();
        headers.insert("content-type", "application/cbor".parse().unwrap());
        headers.insert("smithy-protocol", "rpc-v2-cbor".parse().unwrap());
        r
    } else {
        let mut r = hyper::Response::new(Full::new(answer));
        if let Some(ct) = content_type {
            r.headers_mut().insert("content-type", ct);
        }
        r
    };
    *reply.status_mut() = hyper::StatusCode::from_u16(status).expect("an HTTP status");
    reply
}

/// A CBOR request body as JSON: maps, arrays, text, numbers, booleans; a timestamp (tag 1) as
/// its epoch seconds, which is how AWS JSON 1.0 writes one.
fn json_of_cbor(bytes: &[u8]) -> Value {
    if bytes.is_empty() {
        return Value::Object(Map::new());
    }
    let mut d = minicbor::Decoder::new(bytes);
    let value = decode(&mut d);
    assert_eq!(d.position(), bytes.len(), "one CBOR value per body");
    value
}

fn fail<T>(e: minicbor::decode::Error) -> T {
    panic!("a CBOR body the bridge cannot read: {e}")
}

fn decode(d: &mut minicbor::Decoder<'_>) -> Value {
    match d.datatype().unwrap_or_else(fail) {
        Type::Bool => Value::Bool(d.bool().unwrap_or_else(fail)),
        Type::Null | Type::Undefined => {
            d.skip().unwrap_or_else(fail);
            Value::Null
        }
        Type::U8 | Type::U16 | Type::U32 | Type::U64 => d.u64().unwrap_or_else(fail).into(),
        Type::I8 | Type::I16 | Type::I32 | Type::I64 => d.i64().unwrap_or_else(fail).into(),
        Type::F16 | Type::F32 | Type::F64 => {
            Number::from_f64(d.f64().unwrap_or_else(fail)).map_or(Value::Null, Value::Number)
        }
        Type::String | Type::StringIndef => {
            let mut text = String::new();
            for part in d.str_iter().unwrap_or_else(fail) {
                text.push_str(part.unwrap_or_else(fail));
            }
            Value::String(text)
        }
        Type::Array | Type::ArrayIndef => {
            let mut items = Vec::new();
            match d.array().unwrap_or_else(fail) {
                Some(n) => (0..n).for_each(|_| items.push(decode(d))),
                None => {
                    while d.datatype().unwrap_or_else(fail) != Type::Break {
                        items.push(decode(d));
                    }
                    d.skip().unwrap_or_else(fail);
                }
            }
            Value::Array(items)
        }
        Type::Map | Type::MapIndef => {
            let mut map = Map::new();
            let mut entry = |d: &mut minicbor::Decoder<'_>| {
                let key = d.str().unwrap_or_else(fail).to_owned();
                map.insert(key, decode(d));
            };
            match d.map().unwrap_or_else(fail) {
                Some(n) => (0..n).for_each(|_| entry(d)),
                None => {
                    while d.datatype().unwrap_or_else(fail) != Type::Break {
                        entry(d);
                    }
                    d.skip().unwrap_or_else(fail);
                }
            }
            Value::Object(map)
        }
        Type::Tag => {
            let tag = d.tag().unwrap_or_else(fail);
            assert_eq!(
                tag,
                Tag::from(IanaTag::Timestamp),
                "a CBOR tag other than a timestamp"
            );
            decode(d)
        }
        other => panic!("a CBOR {other} the bridge does not translate"),
    }
}

/// moto's JSON answer as CBOR. AWS JSON 1.0 writes a timestamp as a bare number, so a number
/// under a key ending in `Timestamp` (CloudWatch's names for them) is written as one (tag 1).
fn cbor_of_json(value: &Value) -> Vec<u8> {
    let mut e = minicbor::Encoder::new(Vec::new());
    encode(&mut e, value, false);
    e.into_writer()
}

fn encode(e: &mut minicbor::Encoder<Vec<u8>>, value: &Value, timestamp: bool) {
    let ok = |r: Result<_, minicbor::encode::Error<std::convert::Infallible>>| {
        r.expect("CBOR writes to a vector");
    };
    match value {
        Value::Null => ok(e.null().map(drop)),
        Value::Bool(b) => ok(e.bool(*b).map(drop)),
        Value::Number(n) => {
            if timestamp {
                ok(e.tag(IanaTag::Timestamp).map(drop));
            }
            if let Some(u) = n.as_u64() {
                ok(e.u64(u).map(drop));
            } else if let Some(i) = n.as_i64() {
                ok(e.i64(i).map(drop));
            } else {
                ok(e.f64(n.as_f64().unwrap_or_default()).map(drop));
            }
        }
        Value::String(s) => ok(e.str(s).map(drop)),
        Value::Array(items) => {
            ok(e.array(items.len() as u64).map(drop));
            items.iter().for_each(|v| encode(e, v, timestamp));
        }
        Value::Object(map) => {
            ok(e.map(map.len() as u64).map(drop));
            for (k, v) in map {
                ok(e.str(k).map(drop));
                encode(e, v, k.ends_with("Timestamp"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_crosses_the_bridge_both_ways_with_its_timestamps_tagged() {
        let value = serde_json::json!({"AlarmNames": ["a", "b"], "MaxRecords": 100,
            "Threshold": 1.5, "StateUpdatedTimestamp": 1_796_000_000.25, "Enabled": true});
        let bytes = cbor_of_json(&value);
        let mut d = minicbor::Decoder::new(&bytes);
        d.map().unwrap();
        let mut tagged = false;
        while d.position() < bytes.len() {
            if d.str().unwrap() == "StateUpdatedTimestamp" {
                tagged = d.tag().unwrap() == Tag::from(IanaTag::Timestamp);
            }
            d.skip().unwrap();
        }
        assert!(tagged, "the timestamp is written with tag 1");
        assert_eq!(json_of_cbor(&bytes), value);
    }
}
