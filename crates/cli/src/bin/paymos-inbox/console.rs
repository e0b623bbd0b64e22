//! `console`: the operator's page on loopback. What waits for a person, one payment's story,
//! and the command line's own actions, behind a per-session token and a Host check; the page,
//! its script and its style are embedded (no build step, nothing served from outside).

mod api;

use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::ExitCode;
use std::sync::Arc;

use http_body_util::{BodyExt as _, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, HOST, HeaderValue, X_CONTENT_TYPE_OPTIONS,
};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;

use crate::exit::Failure;
use crate::stack::StackArgs;

const INDEX: &str = include_str!("console/index.html");
const SCRIPT: &str = include_str!("console/console.js");
const STYLE: &str = include_str!("console/console.css");

/// The header every state-changing request carries the session's token in.
pub const TOKEN_HEADER: &str = "x-console-token";

/// The most a request body may hold: an action's few fields.
const MAX_BODY: usize = 16 * 1024;

#[derive(clap::Args)]
pub struct ConsoleArgs {
    /// The port (default: a free one).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// The loopback address to listen on (127.0.0.1 or ::1): anything else is refused, as the
    /// console acts with your AWS credentials.
    #[arg(long, default_value_t = IpAddr::V4(Ipv4Addr::LOCALHOST))]
    bind: IpAddr,
    /// Open the page in the desktop's browser (xdg-open, open).
    #[arg(long)]
    open: bool,
    /// Who acts from the console (kept as released_by and on the fulfilment; default: $USER).
    #[arg(long, value_parser = crate::exit::named)]
    actor: Option<String>,
    #[command(flatten)]
    api: crate::stack::OptionalApiArgs,
    #[command(flatten)]
    stack: StackArgs,
}

/// Why a request is refused before it reaches a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refusal {
    /// The Host header is not the console's own address (a DNS-rebinding page, a proxy).
    ForeignHost,
    /// A state-changing request without the session's token (a cross-site form, a script).
    NoToken,
}

impl Refusal {
    fn status(self) -> StatusCode {
        match self {
            Self::ForeignHost => StatusCode::MISDIRECTED_REQUEST,
            Self::NoToken => StatusCode::FORBIDDEN,
        }
    }

    fn sentence(self) -> &'static str {
        match self {
            Self::ForeignHost => {
                "this console answers only at its loopback address: open the URL it printed"
            }
            Self::NoToken => {
                "a state-changing request needs the session's token: act from the console's own page"
            }
        }
    }
}

/// The session: where it listens and the token its page holds.
struct Session {
    hosts: Vec<String>,
    token: String,
}

impl Session {
    fn new(address: SocketAddr) -> Self {
        let port = address.port();
        let mut hosts = vec![address.to_string(), format!("localhost:{port}")];
        if address.ip() == IpAddr::V4(Ipv4Addr::LOCALHOST) {
            hosts.push(format!("127.0.0.1:{port}"));
        }
        let mut bytes = [0_u8; 32];
        getrandom::fill(&mut bytes).expect("the system's random source answers");
        Self {
            hosts,
            token: hex::encode(bytes),
        }
    }

    /// Whether a request may reach its route: its Host is ours, and a state-changing one
    /// carries the token (compared in constant time).
    fn admit(
        &self,
        method: &Method,
        host: Option<&str>,
        token: Option<&[u8]>,
    ) -> Result<(), Refusal> {
        if !host.is_some_and(|h| self.hosts.iter().any(|ours| ours.eq_ignore_ascii_case(h))) {
            return Err(Refusal::ForeignHost);
        }
        let safe = matches!(*method, Method::GET | Method::HEAD);
        if safe || token.is_some_and(|t| same(t, self.token.as_bytes())) {
            Ok(())
        } else {
            Err(Refusal::NoToken)
        }
    }
}

/// Equal bytes, in a time that does not tell how many matched.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0_u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// Refuses an address that is not loopback (exit 2), before anything listens.
fn loopback(bind: IpAddr) -> Result<IpAddr, Failure> {
    if bind.is_loopback() {
        Ok(bind)
    } else {
        Err(Failure::usage(format!(
            "--bind {bind}: the console listens on loopback only (it acts with your AWS credentials)"
        ))
        .next("drop --bind (127.0.0.1), or pass --bind ::1; to reach it from elsewhere, use an SSH tunnel"))
    }
}

pub async fn run(args: ConsoleArgs) -> ExitCode {
    let bind = match loopback(args.bind) {
        Ok(b) => b,
        Err(e) => return e.report(),
    };
    let recheck = match args.api.client() {
        Ok(c) => c,
        Err(e) => return Failure::usage(e).report(),
    };
    let console = match api::Console::open(&args.stack, actor(args.actor), recheck).await {
        Ok(s) => Arc::new(s),
        Err(e) => return e.report(),
    };
    let listener = match tokio::net::TcpListener::bind(SocketAddr::new(bind, args.port)).await {
        Ok(l) => l,
        Err(e) => {
            return Failure::usage(format!("--port {}: {e}", args.port))
                .next("pass another --port, or none for a free one")
                .report();
        }
    };
    let address = listener
        .local_addr()
        .expect("a bound listener has an address");
    let session = Arc::new(Session::new(address));
    let url = match address {
        SocketAddr::V4(a) => format!("http://{a}/"),
        SocketAddr::V6(a) => format!("http://[{}]:{}/", a.ip(), a.port()),
    };
    say!("{url}");
    tracing::info!(%url, "console: listening on loopback; Ctrl-C stops it");
    if args.open {
        open_browser(&url);
    }
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "console: a connection failed");
                    continue;
                }
            },
            _ = tokio::signal::ctrl_c() => return ExitCode::SUCCESS,
        };
        let (session, console) = (session.clone(), console.clone());
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let (session, console) = (session.clone(), console.clone());
                async move { Ok::<_, Infallible>(answer(&session, &console, request).await) }
            });
            if let Err(e) = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                tracing::debug!(error = %e, "console: connection closed");
            }
        });
    }
}

/// Who acts: `--actor`, else the login name, else `console`.
fn actor(given: Option<String>) -> String {
    given
        .or_else(|| std::env::var("USER").ok().filter(|u| !u.is_empty()))
        .unwrap_or_else(|| "console".to_owned())
}

fn open_browser(url: &str) {
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    if let Err(e) = std::process::Command::new(opener).arg(url).spawn() {
        tracing::warn!(error = %e, "console: could not open a browser ({opener}): open {url}");
    }
}

type Answer = Response<Full<Bytes>>;

async fn answer(
    session: &Session,
    console: &Arc<api::Console>,
    request: Request<Incoming>,
) -> Answer {
    let headers = request.headers();
    let host = headers.get(HOST).and_then(|h| h.to_str().ok());
    let token = headers.get(TOKEN_HEADER).map(HeaderValue::as_bytes);
    if let Err(refused) = session.admit(request.method(), host, token) {
        tracing::warn!(
            method = %request.method(),
            path = request.uri().path(),
            "console: refused ({refused:?})"
        );
        return json(
            refused.status(),
            &serde_json::json!({"refused": refused.sentence()}),
        );
    }
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let query = request.uri().query().unwrap_or_default().to_owned();
    match (method, path.as_str()) {
        (Method::GET, "/") => page(
            "text/html; charset=utf-8",
            INDEX
                .replace("{{TOKEN}}", &session.token)
                .replace(
                    "{{READ_ONLY}}",
                    &attribute(&console.read_only().unwrap_or_default()),
                )
                .replace(
                    "{{WRITE_UNKNOWN}}",
                    &attribute(&console.write_unknown().unwrap_or_default()),
                ),
        ),
        (Method::GET, "/console.js") => page("text/javascript; charset=utf-8", SCRIPT.to_owned()),
        (Method::GET, "/console.css") => page("text/css; charset=utf-8", STYLE.to_owned()),
        (Method::GET, "/api/home") => reply(console.home().await),
        (Method::GET, "/api/jobs") => reply(console.jobs().await),
        (Method::GET, "/api/audit") => reply(console.audit().await),
        (Method::GET, "/api/search") => reply(console.search(&param(&query, "id")).await),
        (Method::GET, job) if job.starts_with("/api/jobs/") => reply(console.job(&job[10..])),
        (Method::POST, action) if action.starts_with("/api/") => {
            match Limited::new(request.into_body(), MAX_BODY).collect().await {
                Ok(body) => reply(console.act(&action[5..], &body.to_bytes()).await),
                Err(_) => json(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    &serde_json::json!({"refused": format!("a request body holds at most {MAX_BODY} bytes")}),
                ),
            }
        }
        (
            _,
            "/" | "/console.js" | "/console.css" | "/api/home" | "/api/jobs" | "/api/search"
            | "/api/audit",
        ) => json(
            StatusCode::METHOD_NOT_ALLOWED,
            &serde_json::json!({"refused": "not with this method"}),
        ),
        _ => json(
            StatusCode::NOT_FOUND,
            &serde_json::json!({"refused": format!("no page {path}")}),
        ),
    }
}

/// `text` as an HTML attribute's value (AWS's sentences name ARNs, and may quote).
fn attribute(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The value of `name` in a query string, percent-decoded.
fn param(query: &str, name: &str) -> String {
    reqwest::Url::parse(&format!("http://console/?{query}"))
        .ok()
        .and_then(|u| {
            u.query_pairs()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_default()
}

fn reply(answered: api::Answered) -> Answer {
    json(answered.status, &answered.body)
}

fn json(status: StatusCode, body: &serde_json::Value) -> Answer {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    response
}

fn page(content_type: &'static str, text: String) -> Answer {
    let mut response = Response::new(Full::new(Bytes::from(text)));
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    // Only its own script and style; no frame may hold it (no click-jacking).
    headers.insert(
        CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'self'; script-src 'self'; style-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
        ),
    );
    headers.insert("x-frame-options", HeaderValue::from_static("DENY"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session() -> Session {
        Session::new(SocketAddr::from(([127, 0, 0, 1], 4321)))
    }

    // Issue 54: the JSON answers lacked `X-Content-Type-Options: nosniff` (a browser may then
    // guess a type other than the one said); every answer, page or JSON, says it.
    #[test]
    fn every_answer_forbids_type_sniffing() {
        for answer in [
            json(StatusCode::OK, &serde_json::json!({"id": "inv_1"})),
            json(StatusCode::CONFLICT, &serde_json::json!({"error": "x"})),
            page("text/html; charset=utf-8", String::new()),
        ] {
            assert_eq!(
                answer.headers().get("x-content-type-options"),
                Some(&HeaderValue::from_static("nosniff"))
            );
        }
    }

    #[test]
    fn a_post_without_the_sessions_token_is_refused_and_with_it_admitted() {
        let s = session();
        let host = Some("127.0.0.1:4321");
        assert_eq!(s.admit(&Method::POST, host, None), Err(Refusal::NoToken));
        assert_eq!(
            s.admit(&Method::POST, host, Some(b"0".repeat(64).as_slice())),
            Err(Refusal::NoToken)
        );
        let shorter = &s.token.as_bytes()[..63];
        assert_eq!(
            s.admit(&Method::POST, host, Some(shorter)),
            Err(Refusal::NoToken)
        );
        assert_eq!(
            s.admit(&Method::POST, host, Some(s.token.as_bytes())),
            Ok(())
        );
        assert_eq!(s.admit(&Method::GET, host, None), Ok(()));
        assert_eq!(Refusal::NoToken.status(), StatusCode::FORBIDDEN);
    }

    #[test]
    fn a_host_other_than_the_consoles_own_address_is_refused_even_with_the_token() {
        let s = session();
        let token = Some(s.token.as_bytes());
        for host in [
            None,
            Some("evil.example:4321"),
            Some("127.0.0.1:4322"),
            Some("127.0.0.1"),
            Some("127.0.0.1.nip.io:4321"),
        ] {
            assert_eq!(
                s.admit(&Method::GET, host, token),
                Err(Refusal::ForeignHost),
                "{host:?}"
            );
            assert_eq!(
                s.admit(&Method::POST, host, token),
                Err(Refusal::ForeignHost),
                "{host:?}"
            );
        }
        assert_eq!(s.admit(&Method::GET, Some("localhost:4321"), None), Ok(()));
    }

    #[test]
    fn two_sessions_hold_different_tokens_of_256_bits() {
        let (a, b) = (session(), session());
        assert_ne!(a.token, b.token);
        assert_eq!(a.token.len(), 64);
    }

    #[test]
    fn only_a_loopback_address_is_bound() {
        for ok in ["127.0.0.1", "::1", "127.0.0.2"] {
            assert!(loopback(ok.parse().unwrap()).is_ok(), "{ok}");
        }
        for refused in ["0.0.0.0", "::", "192.168.1.10", "10.0.0.1"] {
            let e = loopback(refused.parse().unwrap()).unwrap_err();
            assert_eq!(e.code, crate::exit::USAGE, "{refused}");
            assert!(e.message.contains("loopback only"), "{}", e.message);
        }
    }

    #[test]
    fn a_sentence_on_the_page_stays_inside_its_attribute() {
        assert_eq!(
            attribute(r#"a "b" <c> & 'd'"#),
            "a &quot;b&quot; &lt;c&gt; &amp; &#39;d&#39;"
        );
    }

    #[test]
    fn a_query_parameter_is_percent_decoded() {
        assert_eq!(param("id=inv_42", "id"), "inv_42");
        assert_eq!(param("x=1&id=order%2F7+", "id"), "order/7");
        assert_eq!(param("", "id"), "");
    }
}
