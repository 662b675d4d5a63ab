//! One HTTP/1.1 GET to the agent, by hyper over TCP or rustls TLS: connect
//! (bounded in time), TLS handshake ([`super::tls`]: the system's roots or
//! `--ca-cert`, a client certificate for mutual TLS), the request with Host, Accept, User-Agent and basic auth,
//! and the response's status sorted into [`Failure::Retry`] (the agent may
//! come back) or [`Failure::Fatal`] (retrying cannot help: credentials
//! refused, certificate not trusted, TLS against a plain-HTTP agent or
//! plain HTTP against a TLS one).

use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Empty};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ACCEPT, AUTHORIZATION, HOST, USER_AGENT};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::TlsConnector;

use super::url::{Credentials, RemoteUrl, Scheme};
use super::Failure;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Connecting, the TLS handshake and the response's head together.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

pub struct Client {
    url: RemoteUrl,
    auth: Option<HeaderValue>,
    /// Set for https://.
    tls: Option<(TlsConnector, ServerName<'static>)>,
}

impl Client {
    /// Everything that can be checked before connecting is checked here
    /// (the CA file, the host name for TLS), so it fails before a UI starts.
    pub fn new(
        url: RemoteUrl,
        creds: Option<&Credentials>,
        ca_cert: Option<&Path>,
        identity: Option<&super::tls::Identity>,
    ) -> anyhow::Result<Client> {
        let auth = creds.map(|c| {
            let mut v = HeaderValue::from_str(&c.basic())
                .unwrap_or_else(|_| HeaderValue::from_static("Basic"));
            v.set_sensitive(true);
            v
        });
        let tls = match url.scheme {
            Scheme::Http => {
                if ca_cert.is_some() || identity.is_some() {
                    anyhow::bail!(
                        "--ca-cert and --client-cert are for https:// agents; {url} is plain HTTP"
                    );
                }
                None
            }
            Scheme::Https => {
                let name = ServerName::try_from(url.host.clone()).map_err(|e| {
                    anyhow::anyhow!("{url}: {:?} is no TLS server name: {e}", url.host)
                })?;
                Some((
                    TlsConnector::from(super::tls::config(ca_cert, identity)?),
                    name,
                ))
            }
        };
        Ok(Client { url, auth, tls })
    }

    /// GET `path` (after the URL's prefix); the response once it is a 200.
    pub async fn get(&self, path: &str) -> Result<Response<Incoming>, Failure> {
        match tokio::time::timeout(REQUEST_TIMEOUT, self.request(path)).await {
            Ok(r) => r,
            Err(_) => Err(Failure::Retry(format!(
                "no response from {} within {}s",
                self.url.authority(),
                REQUEST_TIMEOUT.as_secs()
            ))),
        }
    }

    async fn request(&self, path: &str) -> Result<Response<Incoming>, Failure> {
        let authority = self.url.authority();
        let tcp = match tokio::time::timeout(
            CONNECT_TIMEOUT,
            TcpStream::connect((self.url.host.as_str(), self.url.port)),
        )
        .await
        {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                return Err(Failure::Retry(format!(
                    "cannot connect to {authority}: {e}"
                )))
            }
            Err(_) => {
                return Err(Failure::Retry(format!(
                    "cannot connect to {authority}: no answer within {}s",
                    CONNECT_TIMEOUT.as_secs()
                )))
            }
        };
        let _ = tcp.set_nodelay(true);
        let mut req = Request::get(format!("{}{path}", self.url.base))
            .header(HOST, &authority)
            .header(ACCEPT, "text/event-stream, application/json")
            .header(USER_AGENT, concat!("nfsdtop/", env!("CARGO_PKG_VERSION")));
        if let Some(a) = &self.auth {
            req = req.header(AUTHORIZATION, a.clone());
        }
        let req = req
            .body(Empty::<Bytes>::new())
            .map_err(|e| Failure::Fatal(format!("cannot build a request for {path}: {e}")))?;
        let resp = match &self.tls {
            None => send(tcp, req).await.map_err(|e| self.http_error(e))?,
            Some((connector, name)) => {
                let tls = connector
                    .connect(name.clone(), tcp)
                    .await
                    .map_err(|e| super::tls::error(&authority, &e))?;
                send(tls, req).await.map_err(|e| self.http_error(e))?
            }
        };
        self.check(path, resp).await
    }

    fn http_error(&self, e: hyper::Error) -> Failure {
        // Under TLS 1.3 a refused client certificate is said after the
        // handshake: it comes with the request.
        let io = std::error::Error::source(&e).and_then(|s| s.downcast_ref::<std::io::Error>());
        if let Some(io) = io.filter(|io| {
            io.get_ref()
                .is_some_and(|i| i.is::<tokio_rustls::rustls::Error>())
        }) {
            return super::tls::error(&self.url.authority(), io);
        }
        let hint = if e.is_parse() && self.url.scheme == Scheme::Http {
            " (if nfsdtopd serves TLS, use https://)"
        } else {
            ""
        };
        Failure::Retry(format!("{}: {e}{hint}", self.url.authority()))
    }

    async fn check(
        &self,
        path: &str,
        resp: Response<Incoming>,
    ) -> Result<Response<Incoming>, Failure> {
        let status = resp.status();
        if status == StatusCode::OK {
            return Ok(resp);
        }
        let reason = status.canonical_reason().unwrap_or("");
        let text = body_start(resp).await;
        let said = if text.is_empty() {
            String::new()
        } else {
            format!(": {text}")
        };
        let url = &self.url;
        match status {
            StatusCode::UNAUTHORIZED if self.auth.is_none() => Err(Failure::Fatal(format!(
                "{url} wants a user and password (HTTP 401): give them in $NFSDTOP_AUTH \
                 (USER:PASSWORD), a netrc file or the URL"
            ))),
            StatusCode::UNAUTHORIZED => Err(Failure::Fatal(format!(
                "{url} refused the user and password (HTTP 401 Unauthorized){said}"
            ))),
            StatusCode::FORBIDDEN => Err(Failure::Fatal(format!(
                "{url} refused access (HTTP 403 Forbidden){said}"
            ))),
            // Our requests are fixed: one nfsdtopd cannot take (plain
            // HTTP to its TLS port, a proxy in the way) stays so.
            StatusCode::BAD_REQUEST => Err(Failure::Fatal(format!(
                "{url} cannot take nfsdtop's request (HTTP 400 Bad Request){said}"
            ))),
            _ => Err(Failure::Retry(format!(
                "HTTP {} {reason} from {path}{said}",
                status.as_u16()
            ))),
        }
    }
}

async fn send<S>(io: S, req: Request<Empty<Bytes>>) -> Result<Response<Incoming>, hyper::Error>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io)).await?;
    // The connection's driver; it ends with the response body (or its drop).
    tokio::spawn(async move {
        let _ = conn.await;
    });
    sender.send_request(req).await
}

/// The first 120 characters of an error response, one line.
async fn body_start(resp: Response<Incoming>) -> String {
    let mut body = resp.into_body();
    let mut buf = Vec::new();
    while buf.len() < 240 {
        match tokio::time::timeout(Duration::from_secs(2), body.frame()).await {
            Ok(Some(Ok(f))) => {
                if let Ok(d) = f.into_data() {
                    buf.extend_from_slice(&d);
                }
            }
            _ => break,
        }
    }
    let text = String::from_utf8_lossy(&buf);
    let one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    // An error page is the agent's (or anything's on the way) to write:
    // no escape of it reaches the operator's terminal.
    super::sanitize::displayable(&one_line.chars().take(120).collect::<String>())
}
