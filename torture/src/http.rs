//! A minimal HTTP/1.1 client over hyper for the harness's own requests: the fake's
//! control API and listing, the relay's metrics. One connection per request, a
//! deadline on each.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context as _, bail};
use bytes::Bytes;
use http::{Method, Request};
use http_body_util::{BodyExt as _, Full};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// How long one request may take, connecting included.
const DEADLINE: Duration = Duration::from_secs(30);

/// `method path_and_query` to `addr` with `body`; the status and the whole body.
pub async fn request(
    method: Method,
    addr: SocketAddr,
    path_and_query: &str,
    body: Bytes,
) -> anyhow::Result<(u16, Bytes)> {
    let what = format!("{method} http://{addr}{path_and_query}");
    tokio::time::timeout(DEADLINE, exchange(method, addr, path_and_query, body))
        .await
        .with_context(|| format!("{what}: no answer within {DEADLINE:?}"))?
        .with_context(|| what)
}

async fn exchange(
    method: Method,
    addr: SocketAddr,
    path_and_query: &str,
    body: Bytes,
) -> anyhow::Result<(u16, Bytes)> {
    let stream = TcpStream::connect(addr).await?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    let connection = tokio::spawn(connection);
    let request = Request::builder()
        .method(method)
        .uri(path_and_query)
        .header(http::header::HOST, addr.to_string())
        .body(Full::new(body))?;
    let response = sender.send_request(request).await?;
    let status = response.status().as_u16();
    let body = response.into_body().collect().await?.to_bytes();
    connection.abort();
    Ok((status, body))
}

/// `GET path` that must answer 200; its body.
pub async fn get_ok(addr: SocketAddr, path_and_query: &str) -> anyhow::Result<Bytes> {
    let (status, body) = request(Method::GET, addr, path_and_query, Bytes::new()).await?;
    if status != 200 {
        bail!(
            "GET http://{addr}{path_and_query}: {status} {}",
            String::from_utf8_lossy(&body)
        );
    }
    Ok(body)
}
