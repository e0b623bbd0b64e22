//! `console`: the operator's page on loopback. What waits for a person, one payment's story,
//! and the command line's own actions, behind a one-time login traded for a session cookie
//! and a Host check; the page, its script and its style are embedded (no build step, nothing
//! served from outside).

pub(crate) mod api;
mod do_line;

use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::ExitCode;
use std::sync::Arc;

use http_body_util::{BodyExt as _, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, HOST, HeaderValue, LOCATION, SET_COOKIE,
    X_CONTENT_TYPE_OPTIONS,
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

/// The cookie the session's secret travels in: `HttpOnly` (no script reads it),
/// `SameSite=Strict` (no other site's page sends it).
pub const COOKIE: &str = "paymos_console";

/// The query parameter of the printed URL that carries the one-time login key.
pub const LOGIN: &str = "login";

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
    /// No session cookie (a plain client on the host, a browser that never logged in), or a
    /// login key already spent or never issued.
    NoSession,
    /// A state-changing request another origin's page sent (another port of loopback is the
    /// same site, so its browser may carry the cookie).
    CrossOrigin,
}

impl Refusal {
    fn status(self) -> StatusCode {
        match self {
            Self::ForeignHost => StatusCode::MISDIRECTED_REQUEST,
            Self::NoSession | Self::CrossOrigin => StatusCode::FORBIDDEN,
        }
    }

    fn sentence(self) -> &'static str {
        match self {
            Self::ForeignHost => {
                "this console answers only at its loopback address: open the URL it printed"
            }
            Self::NoSession => {
                "this console answers only the browser that opened the URL it printed (a one-time login): start it again for a new one"
            }
            Self::CrossOrigin => "a state-changing request comes only from the console's own page",
        }
    }
}

/// What a request says of itself that the session judges.
#[derive(Debug, Default, Clone, Copy)]
struct Asked<'a> {
    host: Option<&'a str>,
    /// The `Cookie` header, whole.
    cookies: Option<&'a str>,
    /// The `login` parameter of a `GET /`.
    login: Option<&'a str>,
    /// `Origin` and `Sec-Fetch-Site`, which browsers send and a page cannot forge.
    origin: Option<&'a str>,
    fetch_site: Option<&'a str>,
}

/// How a request is let in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Admitted {
    /// It carries the session's cookie.
    Session,
    /// It spends the one-time login key: its answer sets the cookie.
    Login,
}

/// The session: where it listens, the one-time key of the URL it prints, and the secret its
/// cookie carries. The page holds neither: a page any local process can GET would hand it
/// the operator's credentials.
struct Session {
    hosts: Vec<String>,
    login: std::sync::Mutex<Option<String>>,
    secret: String,
}

impl Session {
    fn new(address: SocketAddr) -> Self {
        let port = address.port();
        let mut hosts = vec![address.to_string(), format!("localhost:{port}")];
        if address.ip() == IpAddr::V4(Ipv4Addr::LOCALHOST) {
            hosts.push(format!("127.0.0.1:{port}"));
        }
        Self {
            hosts,
            login: std::sync::Mutex::new(Some(random())),
            secret: random(),
        }
    }

    /// The one-time key, for the URL printed once at start.
    fn login_key(&self) -> String {
        self.login
            .lock()
            .expect("no thread panics holding the key")
            .clone()
            .unwrap_or_default()
    }

    /// Whether a request may reach its route: its Host is ours, and it carries the session's
    /// cookie (a state-changing one from our own origin), or it is the first visit of the
    /// printed URL, whose key is spent by it. Secrets are compared in constant time.
    fn admit(&self, method: &Method, asked: Asked<'_>) -> Result<Admitted, Refusal> {
        if !asked
            .host
            .is_some_and(|h| self.hosts.iter().any(|ours| ours.eq_ignore_ascii_case(h)))
        {
            return Err(Refusal::ForeignHost);
        }
        if cookie(asked.cookies, COOKIE).is_some_and(|c| same(c.as_bytes(), self.secret.as_bytes()))
        {
            let safe = matches!(*method, Method::GET | Method::HEAD);
            return if safe || self.own_origin(asked) {
                Ok(Admitted::Session)
            } else {
                Err(Refusal::CrossOrigin)
            };
        }
        if *method == Method::GET
            && let Some(key) = asked.login
        {
            let mut login = self.login.lock().expect("no thread panics holding the key");
            if login
                .as_ref()
                .is_some_and(|k| same(key.as_bytes(), k.as_bytes()))
            {
                *login = None;
                return Ok(Admitted::Login);
            }
        }
        Err(Refusal::NoSession)
    }

    /// A browser's request from our own page: `Sec-Fetch-Site` (where sent) says
    /// `same-origin`, and `Origin` (where sent) is one of our addresses.
    fn own_origin(&self, asked: Asked<'_>) -> bool {
        let site = asked.fetch_site.is_none_or(|s| s == "same-origin");
        let origin = asked.origin.is_none_or(|o| {
            o.strip_prefix("http://")
                .is_some_and(|h| self.hosts.iter().any(|ours| ours.eq_ignore_ascii_case(h)))
        });
        site && origin
    }
}

/// 256 random bits, in hex.
fn random() -> String {
    let mut bytes = [0_u8; 32];
    getrandom::fill(&mut bytes).expect("the system's random source answers");
    hex::encode(bytes)
}

/// The value of the cookie `name` in a `Cookie` header.
fn cookie<'a>(header: Option<&'a str>, name: &str) -> Option<&'a str> {
    header?
        .split(';')
        .filter_map(|pair| pair.trim().split_once('='))
        .find_map(|(k, v)| (k == name).then_some(v))
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
    // The one place the login key is shown: the operator's terminal (and their browser, with
    // --open), never a log line.
    let login = format!("{url}?{LOGIN}={}", session.login_key());
    say!("{login}");
    tracing::info!(%url, "console: listening on loopback; the printed URL logs in once; Ctrl-C stops it");
    if args.open {
        open_browser(&login);
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
    let text = |name: &str| headers.get(name).and_then(|h| h.to_str().ok());
    let query = request.uri().query().unwrap_or_default().to_owned();
    let login = (request.uri().path() == "/").then(|| param(&query, LOGIN));
    let asked = Asked {
        host: text(HOST.as_str()),
        cookies: text(hyper::header::COOKIE.as_str()),
        login: login.as_deref().filter(|l| !l.is_empty()),
        origin: text(hyper::header::ORIGIN.as_str()),
        fetch_site: text("sec-fetch-site"),
    };
    match session.admit(request.method(), asked) {
        Ok(Admitted::Session) => {}
        Ok(Admitted::Login) => return logged_in(session),
        Err(refused) => {
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
    }
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    match (method, path.as_str()) {
        (Method::GET, "/") => page(
            "text/html; charset=utf-8",
            INDEX
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
        (Method::GET, "/api/search") => {
            let project = param(&query, "project");
            let project = (!project.is_empty()).then_some(project.as_str());
            reply(console.search(&param(&query, "id"), project).await)
        }
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

/// The answer to the first visit of the printed URL: the session's cookie, and a redirect to
/// the page without the spent key (out of the address bar and the history).
fn logged_in(session: &Session) -> Answer {
    let mut response = Response::new(Full::new(Bytes::new()));
    *response.status_mut() = StatusCode::SEE_OTHER;
    let headers = response.headers_mut();
    headers.insert(LOCATION, HeaderValue::from_static("/"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(
        SET_COOKIE,
        HeaderValue::from_str(&format!(
            "{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/",
            session.secret
        ))
        .expect("hex is a header's text"),
    );
    response
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

    // The JSON answers lacked `X-Content-Type-Options: nosniff` (a browser may then
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

    const HOST: Option<&str> = Some("127.0.0.1:4321");

    fn with_cookie(cookies: &str) -> Asked<'_> {
        Asked {
            host: HOST,
            cookies: Some(cookies),
            ..Asked::default()
        }
    }

    // `GET /` needed no token and wrote it into the page, so any process that could
    // reach loopback read it and acted as the operator. Now every request, GET included, needs
    // the session's cookie; the page holds no secret.
    #[test]
    fn every_request_without_the_sessions_cookie_is_refused() {
        let s = session();
        let plain = Asked {
            host: HOST,
            ..Asked::default()
        };
        for method in [Method::GET, Method::HEAD, Method::POST] {
            assert_eq!(s.admit(&method, plain), Err(Refusal::NoSession), "{method}");
        }
        let wrong = format!("{COOKIE}={}", "0".repeat(64));
        let shorter = format!("{COOKIE}={}", &s.secret[..63]);
        let other_name = format!("console={}", s.secret);
        for cookies in [&wrong, &shorter, &other_name] {
            assert_eq!(
                s.admit(&Method::GET, with_cookie(cookies)),
                Err(Refusal::NoSession),
                "{cookies}"
            );
        }
        let ours = format!("theme=dark; {COOKIE}={}", s.secret);
        assert_eq!(
            s.admit(&Method::GET, with_cookie(&ours)),
            Ok(Admitted::Session)
        );
        assert_eq!(
            s.admit(&Method::POST, with_cookie(&ours)),
            Ok(Admitted::Session)
        );
        assert_eq!(Refusal::NoSession.status(), StatusCode::FORBIDDEN);
        let page = INDEX
            .replace("{{READ_ONLY}}", "")
            .replace("{{WRITE_UNKNOWN}}", "");
        assert!(!page.contains(&s.secret) && !page.contains("{{"), "{page}");
    }

    #[test]
    fn the_printed_login_is_spent_by_its_first_visit() {
        let s = session();
        let key = s.login_key();
        let visit = |login| Asked {
            host: HOST,
            login: Some(login),
            ..Asked::default()
        };
        assert_eq!(s.admit(&Method::POST, visit(&key)), Err(Refusal::NoSession));
        let guessed = "0".repeat(64);
        assert_eq!(
            s.admit(&Method::GET, visit(&guessed)),
            Err(Refusal::NoSession)
        );
        assert_eq!(s.admit(&Method::GET, visit(&key)), Ok(Admitted::Login));
        assert_eq!(
            s.admit(&Method::GET, visit(&key)),
            Err(Refusal::NoSession),
            "once"
        );
        assert_eq!(s.login_key(), "");
        let answer = logged_in(&s);
        assert_eq!(answer.status(), StatusCode::SEE_OTHER);
        assert_eq!(answer.headers()[LOCATION], "/");
        assert_eq!(
            answer.headers()[SET_COOKIE].to_str().unwrap(),
            format!("{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/", s.secret)
        );
        assert_ne!(key, s.secret, "the printed key is not the cookie's secret");
    }

    // Another port of loopback is the same site: its page's browser carries the cookie. A
    // state-changing request from any origin but ours is refused.
    #[test]
    fn a_post_from_another_origin_is_refused_even_with_the_cookie() {
        let s = session();
        let ours = format!("{COOKIE}={}", s.secret);
        let from = |origin, fetch_site| Asked {
            origin,
            fetch_site,
            ..with_cookie(&ours)
        };
        for (origin, site) in [
            (Some("http://127.0.0.1:8080"), None),
            (Some("http://127.0.0.1:4321"), Some("same-site")),
            (Some("null"), None),
            (None, Some("cross-site")),
        ] {
            assert_eq!(
                s.admit(&Method::POST, from(origin, site)),
                Err(Refusal::CrossOrigin),
                "{origin:?} {site:?}"
            );
            assert_eq!(
                s.admit(&Method::GET, from(origin, site)),
                Ok(Admitted::Session)
            );
        }
        for origin in ["http://127.0.0.1:4321", "http://localhost:4321"] {
            assert_eq!(
                s.admit(&Method::POST, from(Some(origin), Some("same-origin"))),
                Ok(Admitted::Session)
            );
        }
    }

    #[test]
    fn a_host_other_than_the_consoles_own_address_is_refused_even_with_the_cookie() {
        let s = session();
        let ours = format!("{COOKIE}={}", s.secret);
        for host in [
            None,
            Some("evil.example:4321"),
            Some("127.0.0.1:4322"),
            Some("127.0.0.1"),
            Some("127.0.0.1.nip.io:4321"),
        ] {
            let asked = Asked {
                host,
                ..with_cookie(&ours)
            };
            for method in [Method::GET, Method::POST] {
                assert_eq!(
                    s.admit(&method, asked),
                    Err(Refusal::ForeignHost),
                    "{host:?}"
                );
            }
        }
        let local = Asked {
            host: Some("localhost:4321"),
            ..with_cookie(&ours)
        };
        assert_eq!(s.admit(&Method::GET, local), Ok(Admitted::Session));
    }

    #[test]
    fn two_sessions_hold_different_secrets_of_256_bits() {
        let (a, b) = (session(), session());
        assert_ne!(a.secret, b.secret);
        assert_ne!(a.login_key(), b.login_key());
        assert_eq!((a.secret.len(), a.login_key().len()), (64, 64));
    }

    #[test]
    fn a_cookie_is_read_by_its_exact_name() {
        assert_eq!(cookie(Some("a=1; paymos_console=x"), COOKIE), Some("x"));
        assert_eq!(cookie(Some("paymos_console_old=y"), COOKIE), None);
        assert_eq!(cookie(None, COOKIE), None);
    }

    #[test]
    fn only_a_loopback_address_is_bound() {
        for ok in ["127.0.0.1", "::1", "127.0.0.2"] {
            assert!(loopback(ok.parse().unwrap()).is_ok(), "{ok}");
        }
        for refused in ["0.0.0.0", "::", "192.168.1.10", "10.0.0.1"] {
            let e = loopback(refused.parse().unwrap()).unwrap_err();
            assert_eq!(e.kind, crate::exit::Kind::Usage, "{refused}");
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
