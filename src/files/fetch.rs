//! `upload`'s third source (ChatGPT file references, docs/files.md): the bytes
//! behind an `https://` URL, fetched by the server and streamed into the
//! same atomic commit and SHA-256 as every other upload ([`super::commit`]).
//!
//! # What is bounded
//! - **Scheme**: `https://` only, on the first URL and on every redirect; a
//!   plain `http://` URL is refused before anything is sent.
//! - **Trust**: rustls (the `ring` provider) with the roots of
//!   `MCP_EXEC_CA_FILE` when set (a private CA; it *replaces* the system's),
//!   else the first system bundle of [`SYSTEM_BUNDLES`]. No bundle (a
//!   `FROM scratch` image) is a clear error naming both, never an
//!   unverified connection.
//! - **Size**: at most `MCP_EXEC_MAX_TRANSFER_BYTES`: a `Content-Length`
//!   over it is refused before the body is read; a body without one (or a
//!   chunked one) is counted as it arrives and cut at the first byte over.
//! - **Time**: one deadline for the whole fetch, redirects included
//!   (`MCP_EXEC_FETCH_TIMEOUT`); the call's cancellation drops the fetch at
//!   once (the connection, its driver task and the staged file go with it).
//! - **Redirects**: at most [`MAX_REDIRECTS`], each to `https://`.
//! - **Memory**: the body is never held whole: frames go through a channel
//!   of [`QUEUED_FRAMES`] to a writer on the blocking pool that writes and
//!   hashes them ([`super::commit::Staged`]); PID 1's runtime only moves
//!   them.
//!
//! # What is not
//! The server fetches what its caller names, loopback and private addresses
//! included: the caller can already run `curl` as a job, so refusing them
//! would protect nothing (SECURITY.md, "Fetching URLs"). Error texts name
//! the URL without its query, which for signed download links (ChatGPT's)
//! holds the credential.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::Uri;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::sync::mpsc;
use tokio_rustls::TlsConnector;
use tokio_util::task::AbortOnDropHandle;

use super::commit::{Committed, Options, Staged};
use super::error::{FileError, Kind, url_for_errors};
use super::place::Place;

/// Redirects followed at most.
pub const MAX_REDIRECTS: usize = 5;

/// Frames in flight between the connection and the writer. A frame is what
/// one read of hyper's connection gave (its read buffer stops growing at
/// about 400 KiB), so this bounds what the fetch holds to a few MiB at
/// worst, whatever the file's size (12.3 MiB peak RSS for the whole server
/// during a 100 MiB fetch, BENCHMARKS.md).
pub const QUEUED_FRAMES: usize = 16;

/// The system CA bundles looked for, in order (Debian/Ubuntu/Alpine/Arch,
/// Fedora/RHEL, Alpine/BSD, openSUSE).
pub const SYSTEM_BUNDLES: [&str; 4] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
    "/etc/ssl/ca-bundle.pem",
];

/// What bounds one fetch.
#[derive(Debug, Clone)]
pub struct Limits {
    /// `MCP_EXEC_MAX_TRANSFER_BYTES`.
    pub max_bytes: u64,
    /// `MCP_EXEC_FETCH_TIMEOUT`: the whole fetch, redirects included.
    pub timeout: Duration,
    /// `MCP_EXEC_CA_FILE`: the roots to trust instead of the system's.
    pub ca_file: Option<PathBuf>,
}

/// Fetches `url` into `place` and commits it as [`Staged::commit_hashed`] does
/// (`expected` verified, `opts` applied). Errors are [`FileError`]s whose
/// text says what failed: the remote's status, the TLS reason, the limit,
/// the deadline.
pub async fn fetch_into(
    url: &str,
    limits: &Limits,
    place: Place,
    expected: Option<[u8; 32]>,
    opts: Options,
) -> Result<Committed, FileError> {
    let first = parse_https(url)?;
    let shown = shown(&first);
    let late = || {
        FileError::new(
            Kind::Io,
            format!(
                "fetching {shown} took longer than {} s (MCP_EXEC_FETCH_TIMEOUT): nothing was written",
                limits.timeout.as_secs_f64()
            ),
        )
    };
    // The deadline ends the request and the body where they wait (so that
    // the writer is awaited and its temporary file is gone before the
    // answer); this outer bound only catches what lies outside them.
    let deadline = tokio::time::Instant::now() + limits.timeout;
    let fetched = fetch(
        first,
        limits,
        Deadline {
            at: deadline,
            late: &late,
        },
        place,
        expected,
        opts,
    );
    match tokio::time::timeout_at(deadline + BACKSTOP, fetched).await {
        Ok(done) => done,
        Err(_) => Err(late()),
    }
}

/// `MCP_EXEC_FETCH_TIMEOUT`'s instant, and the error that says it passed.
#[derive(Clone, Copy)]
struct Deadline<'a> {
    at: tokio::time::Instant,
    late: &'a (dyn Fn() -> FileError + Sync),
}

/// How long past the deadline the whole fetch may take: the writer's
/// cleanup after the deadline ended the body.
const BACKSTOP: Duration = Duration::from_secs(5);

async fn fetch(
    mut url: Uri,
    limits: &Limits,
    deadline: Deadline<'_>,
    place: Place,
    expected: Option<[u8; 32]>,
    opts: Options,
) -> Result<Committed, FileError> {
    let ca_file = limits.ca_file.clone();
    let tls = tokio::task::spawn_blocking(move || client_config(ca_file.as_deref()))
        .await
        .map_err(|e| FileError::new(Kind::Io, format!("loading the CA roots failed: {e}")))??;
    let connector = TlsConnector::from(Arc::new(tls));
    let mut hops = 0;
    let asked = async {
        loop {
            let (response, conn) = get(&connector, &url).await?;
            let status = response.status();
            if !status.is_redirection() || status == hyper::StatusCode::NOT_MODIFIED {
                break Ok((response, conn));
            }
            let location = response
                .headers()
                .get(hyper::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .ok_or_else(|| {
                    remote(format!(
                        "{} answered {status} without a Location",
                        shown(&url)
                    ))
                })?;
            let next = resolve(&url, location)?;
            if next.scheme_str() != Some("https") {
                return Err(invalid(format!(
                    "{} redirected to {}: only https:// is fetched",
                    shown(&url),
                    shown(&next)
                )));
            }
            hops += 1;
            if hops > MAX_REDIRECTS {
                return Err(remote(format!(
                    "fetching {} took more than {MAX_REDIRECTS} redirects",
                    shown(&url)
                )));
            }
            url = next;
        }
    };
    let (response, _conn) = match tokio::time::timeout_at(deadline.at, asked).await {
        Ok(got) => got?,
        Err(_) => return Err((deadline.late)()),
    };
    let status = response.status();
    if !status.is_success() {
        return Err(remote(format!("{} answered {status}", shown(&url))));
    }
    let (shown_url, max) = (shown(&url), limits.max_bytes);
    let too_big = move |n: Option<u64>| {
        let what = match n {
            Some(n) => format!("is {n} bytes, more than MCP_EXEC_MAX_TRANSFER_BYTES ({max})"),
            None => format!("sent more than MCP_EXEC_MAX_TRANSFER_BYTES ({max}) bytes"),
        };
        FileError::new(
            Kind::TooLarge,
            format!("{shown_url} {what}: nothing was written"),
        )
    };
    let length = response
        .headers()
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if let Some(n) = length
        && n > limits.max_bytes
    {
        return Err(too_big(Some(n)));
    }
    stream(
        response.into_body(),
        &url,
        deadline,
        limits.max_bytes,
        place,
        expected,
        opts,
        too_big,
    )
    .await
}

/// The writer on the blocking pool, fed frame by frame; dropped (the
/// channel closed without [`Piece::End`]) it leaves nothing behind.
enum Piece {
    Data(Bytes),
    End,
}

#[allow(
    clippy::too_many_arguments,
    reason = "the body, where it goes and its three bounds (deadline, size, the size error)"
)]
async fn stream(
    mut body: Incoming,
    url: &Uri,
    deadline: Deadline<'_>,
    max: u64,
    place: Place,
    expected: Option<[u8; 32]>,
    opts: Options,
    too_big: impl Fn(Option<u64>) -> FileError,
) -> Result<Committed, FileError> {
    let (tx, mut rx) = mpsc::channel::<Piece>(QUEUED_FRAMES);
    let writer = tokio::task::spawn_blocking(move || {
        use sha2::Digest;
        let mut staged = Staged::create(place)?;
        let mut sha = sha2::Sha256::new();
        while let Some(piece) = rx.blocking_recv() {
            match piece {
                Piece::Data(b) => {
                    staged.append(&b)?;
                    sha.update(&b);
                }
                Piece::End => return staged.commit_hashed(sha.finalize().into(), expected, opts),
            }
        }
        Err(FileError::new(Kind::Io, "the fetch was abandoned"))
    });
    // Dropped with the future on cancellation: the writer then sees the
    // channel close and removes its temporary file.
    let writer = AbortOnDropHandle::new(writer);
    let mut total: u64 = 0;
    let fed = async {
        while let Some(frame) = body.frame().await {
            let frame = frame
                .map_err(|e| remote(format!("reading {} failed: {}", shown(url), reason(&e))))?;
            let Ok(data) = frame.into_data() else {
                continue;
            };
            total += data.len() as u64;
            if total > max {
                return Err(too_big(None));
            }
            if tx.send(Piece::Data(data)).await.is_err() {
                // The writer failed: its error is the answer.
                return Ok(false);
            }
        }
        Ok(tx.send(Piece::End).await.is_ok())
    };
    let fed = match tokio::time::timeout_at(deadline.at, fed).await {
        Ok(fed) => fed,
        Err(_) => Err((deadline.late)()),
    };
    drop(tx);
    // Awaited on every path, so that a refused fetch's temporary file is
    // gone before the answer (the writer removes it once the channel
    // closes without `End`).
    let written = writer
        .await
        .map_err(|e| FileError::new(Kind::Io, format!("the writer failed: {e}")));
    match fed {
        Err(e) => Err(e),
        Ok(_) => written?,
    }
}

/// Connects, shakes hands and sends one `GET`; the connection's driver
/// runs as its own task, aborted when the returned handle is dropped.
async fn get(
    connector: &TlsConnector,
    url: &Uri,
) -> Result<(hyper::Response<Incoming>, AbortOnDropHandle<()>), FileError> {
    let host = url.host().unwrap_or_default();
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let port = url.port_u16().unwrap_or(443);
    let tcp = tokio::net::TcpStream::connect((bare, port))
        .await
        .map_err(|e| {
            remote(format!(
                "connecting to {host}:{port} failed: {}",
                init::errno_text(&e)
            ))
        })?;
    let _ = tcp.set_nodelay(true);
    let name = ServerName::try_from(bare.to_owned())
        .map_err(|_| invalid(format!("{host:?} is not a host name TLS can verify")))?;
    let tls = connector
        .connect(name, tcp)
        .await
        .map_err(|e| remote(format!("TLS with {host}:{port} failed: {}", tls_reason(&e))))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .map_err(|e| remote(format!("HTTP with {host}:{port} failed: {}", reason(&e))))?;
    let conn = AbortOnDropHandle::new(tokio::spawn(async move {
        let _ = conn.await;
    }));
    let authority = url.authority().map(|a| a.as_str()).unwrap_or(host);
    let path = url.path_and_query().map_or("/", |p| p.as_str());
    let request = hyper::Request::get(path)
        .header(hyper::header::HOST, authority)
        .header(
            hyper::header::USER_AGENT,
            concat!("mcp-exec/", env!("CARGO_PKG_VERSION")),
        )
        .header(hyper::header::ACCEPT, "*/*")
        .header(hyper::header::ACCEPT_ENCODING, "identity")
        .body(http_body_util::Empty::<Bytes>::new())
        .map_err(|e| invalid(format!("{}: {e}", shown(url))))?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| remote(format!("GET {} failed: {}", shown(url), reason(&e))))?;
    Ok((response, conn))
}

/// The rustls client configuration with the roots to trust.
fn client_config(ca_file: Option<&std::path::Path>) -> Result<rustls::ClientConfig, FileError> {
    let (path, certs) = match ca_file {
        Some(path) => (path.to_owned(), read_pem(path)?),
        None => {
            let Some(found) = SYSTEM_BUNDLES
                .iter()
                .map(std::path::Path::new)
                .find(|p| p.is_file())
            else {
                return Err(FileError::new(
                    Kind::Io,
                    format!(
                        "no CA bundle to verify https:// with: none of {} exists (an image FROM scratch has none); set MCP_EXEC_CA_FILE to a PEM file of the roots to trust",
                        SYSTEM_BUNDLES.join(", ")
                    ),
                ));
            };
            (found.to_owned(), read_pem(found)?)
        }
    };
    let mut roots = rustls::RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(FileError::new(
            Kind::Io,
            format!("{path:?} holds no usable CA certificate (PEM)"),
        ));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| FileError::new(Kind::Io, format!("TLS set-up failed: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

fn read_pem(path: &std::path::Path) -> Result<Vec<CertificateDer<'static>>, FileError> {
    let iter = CertificateDer::pem_file_iter(path).map_err(|e| {
        FileError::new(
            Kind::Io,
            format!("reading the CA file {path:?} failed: {e}"),
        )
    })?;
    iter.collect::<Result<Vec<_>, _>>()
        .map_err(|e| FileError::new(Kind::Io, format!("the CA file {path:?} is not PEM: {e}")))
}

/// `url` if it is an `https://` URL with a host; otherwise why not.
pub fn parse_https(url: &str) -> Result<Uri, FileError> {
    let uri: Uri = url
        .trim()
        .parse()
        .map_err(|_| invalid(format!("{:?} is not a URL", url_for_errors(url))))?;
    match uri.scheme_str() {
        Some("https") if uri.host().is_some_and(|h| !h.is_empty()) => Ok(uri),
        Some("https") => Err(invalid(format!("{:?} has no host", url_for_errors(url)))),
        Some("http") => Err(invalid(format!(
            "{} is plain http: only https:// URLs are fetched",
            shown(&uri)
        ))),
        _ => Err(invalid(format!(
            "{:?} is not an https:// URL",
            url_for_errors(url)
        ))),
    }
}

/// The URL of `location` (a redirect's target) relative to `base`.
fn resolve(base: &Uri, location: &str) -> Result<Uri, FileError> {
    let bad = || remote(format!("{} redirected to an invalid Location", shown(base)));
    let scheme = base.scheme_str().unwrap_or("https");
    let authority = base.authority().map_or("", |a| a.as_str());
    let text = if location.contains("://") {
        location.to_owned()
    } else if let Some(rest) = location.strip_prefix("//") {
        format!("{scheme}://{rest}")
    } else if location.starts_with('/') {
        format!("{scheme}://{authority}{location}")
    } else {
        let path = base.path();
        let dir = &path[..path.rfind('/').map_or(0, |i| i + 1)];
        let dir = if dir.is_empty() { "/" } else { dir };
        format!("{scheme}://{authority}{dir}{location}")
    };
    text.parse::<Uri>().map_err(|_| bad())
}

/// A URL as errors show it: scheme, authority and path, never the query
/// (a signed link's credential).
fn shown(url: &Uri) -> String {
    let scheme = url.scheme_str().unwrap_or("?");
    let authority = url.authority().map_or("", |a| a.as_str());
    let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
    let query = if url.query().is_some() { "?…" } else { "" };
    format!("{scheme}://{authority}{}{query}", url.path())
}

fn invalid(message: String) -> FileError {
    FileError::new(Kind::Invalid, message)
}

fn remote(message: String) -> FileError {
    FileError::new(Kind::Io, message)
}

/// An error and its causes, as one line.
fn reason(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let more = s.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = s.source();
    }
    text
}

/// rustls' reason (`invalid peer certificate: UnknownIssuer`, …), or the
/// I/O error's.
fn tls_reason(e: &std::io::Error) -> String {
    match e.get_ref() {
        Some(inner) => reason(inner),
        None => init::errno_text(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_https_urls_with_a_host_are_fetched() {
        assert!(parse_https("https://example.com/a?b=c").is_ok());
        let e = parse_https("http://example.com/x").unwrap_err();
        assert!(e.message.contains("only https://"), "{e}");
        for bad in [
            "chat_upload://image_0",
            "ftp://h/x",
            "not a url",
            "https:///x",
        ] {
            let e = parse_https(bad).unwrap_err();
            assert_eq!(e.kind, Kind::Invalid, "{bad}: {e}");
        }
    }

    #[test]
    fn errors_show_a_url_without_its_query_or_user() {
        let u: Uri = "https://u:p@files.example/d/f.png?sig=SECRET"
            .parse()
            .unwrap();
        assert_eq!(shown(&u), "https://files.example/d/f.png?…");
    }

    #[test]
    fn redirect_locations_resolve_against_the_url_they_came_from() {
        let base: Uri = "https://h:8443/a/b?q=1".parse().unwrap();
        let r = |l: &str| resolve(&base, l).unwrap().to_string();
        assert_eq!(r("https://o/x"), "https://o/x");
        assert_eq!(r("//o/x"), "https://o/x");
        assert_eq!(r("/x?y"), "https://h:8443/x?y");
        assert_eq!(r("c"), "https://h:8443/a/c");
        assert_eq!(r("http://o/x"), "http://o/x");
    }

    #[test]
    fn a_missing_ca_file_is_named() {
        let e = client_config(Some(std::path::Path::new("/nonexistent/ca.pem"))).unwrap_err();
        assert!(e.message.contains("/nonexistent/ca.pem"), "{e}");
    }
}
