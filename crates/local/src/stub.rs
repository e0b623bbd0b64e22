//! A loopback HTTP server for local stand-ins: the Secrets Manager stand-in here, and in the
//! tests the Lambda Runtime API, Paymos' API, EventBridge and the receivers `check` probes.

use std::convert::Infallible;
use std::future::Future;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};

/// Serves `answer` on a free loopback port for as long as the process runs, one task per
/// connection; returns the base URL (`http://127.0.0.1:<port>`).
///
/// # Errors
/// When no loopback port can be bound.
pub async fn serve<H, F>(answer: H) -> std::io::Result<String>
where
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let answer = answer.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req| {
                    let reply = answer(req);
                    async move { Ok::<_, Infallible>(reply.await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok(url)
}
