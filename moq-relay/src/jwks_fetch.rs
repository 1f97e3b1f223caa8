//! Fetching a JWK Set over HTTP(S) (`auth.key_url`, an identity provider's JWKS
//! endpoint), within a time and size bound: what both the key follower and a reload use.

use std::time::Duration;

use http_body_util::{BodyExt, Limited};

/// The most bytes of a JWK Set fetched.
const MAX_JWKS_BYTES: usize = 1 << 20;

/// How long one fetch may take, connection and TLS included.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// Fetches the text at `url` (`https://`, or `http://` for a sidecar on a trusted
/// network), which must answer 200 within 10 s and 1 MiB.
pub(crate) async fn fetch(url: &str) -> Result<String, String> {
    tokio::time::timeout(FETCH_TIMEOUT, fetch_now(url))
        .await
        .map_err(|_| format!("{url}: no answer within {FETCH_TIMEOUT:?}"))?
}

async fn fetch_now(url: &str) -> Result<String, String> {
    let parsed = url::Url::parse(url).map_err(|e| format!("{url}: {e}"))?;
    let host = parsed
        .host_str()
        .ok_or_else(|| format!("{url}: no host"))?
        .to_owned();
    let port = parsed
        .port_or_known_default()
        .ok_or_else(|| format!("{url}: no port"))?;
    let stream = tokio::net::TcpStream::connect((host.trim_matches(['[', ']']), port))
        .await
        .map_err(|e| format!("connecting to {host}:{port}: {e}"))?;
    let path = match parsed.query() {
        Some(query) => format!("{}?{query}", parsed.path()),
        None => parsed.path().to_owned(),
    };
    match parsed.scheme() {
        "http" => get(stream, &host, &path).await,
        "https" => {
            let mut connector = boring::ssl::SslConnector::builder(boring::ssl::SslMethod::tls())
                .map_err(|e| e.to_string())?;
            connector
                .set_default_verify_paths()
                .map_err(|e| e.to_string())?;
            let config = connector.build().configure().map_err(|e| e.to_string())?;
            let stream = tokio_boring::connect(config, &host, stream)
                .await
                .map_err(|e| format!("TLS with {host}: {e}"))?;
            get(stream, &host, &path).await
        }
        other => Err(format!("{url}: the scheme {other:?} is not http or https")),
    }
}

/// GET `path` over `io` (HTTP/1.1), the body as text.
async fn get<I>(io: I, host: &str, path: &str) -> Result<String, String>
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(io))
            .await
            .map_err(|e| e.to_string())?;
    let connection = tokio::spawn(connection);
    let request = hyper::Request::get(path)
        .header(hyper::header::HOST, host)
        .header(hyper::header::ACCEPT, "application/json")
        .body(http_body_util::Empty::<hyper::body::Bytes>::new())
        .map_err(|e| e.to_string())?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status();
    let body = Limited::new(response.into_body(), MAX_JWKS_BYTES)
        .collect()
        .await
        .map_err(|e| format!("reading the answer: {e}"))?
        .to_bytes();
    connection.abort();
    if !status.is_success() {
        return Err(format!("{host}{path} answered {status}"));
    }
    String::from_utf8(body.to_vec()).map_err(|_| "the answer is not UTF-8".to_owned())
}
