//! The server: its shared state, its sessions, its transports, and the
//! shutdown sequence.
//!
//! - [`app`]: [`App`], the state every session and transport shares (the
//!   job service, the Tasks, the policies, the settings); the tools see it
//!   as `tools::Host`.
//! - [`session`]: one MCP session's protocol state and dispatch, for any
//!   transport.
//! - [`tasks`]: MCP Tasks on the wire (task-augmented `execute`, `tasks/*`,
//!   the 2026 extension), over the records of `crate::tasks`.
//! - [`discover`]: `server/discover` (2026-07-28): versions, capabilities,
//!   identity, instructions.
//! - [`outbox`]: a transport's outgoing queue, bounded in bytes.
//! - [`progress`]: progress notifications of long calls.
//! - [`transport`]: stdio, Streamable HTTP and the platform front-ends
//!   (envd, sandboxd), each on the floor (`crate::net`).
//! - `shutdown`: the shutdown sequence, phase by phase.
//!
//! [`run`] is assembly, then the server's actor: it starts the listeners
//! configured (envd, sandboxd gRPC and REST, HTTP and metrics: tasks of
//! their own with one session per client, sharing the [`App`] and the
//! shutdown token) and stdio; then it feeds stdin's lines to the stdio
//! session, waits for the next line only while the outbox has room
//! (backpressure), and waits on the init layer's events, stdout and (init
//! mode) the main command, until one of them ends the server; then it
//! runs the shutdown sequence (`shutdown.rs`: calls settle, the rest are
//! cancelled, every job ends, every answer is written).
//!
//! With a listener serving, stdin EOF (or a closed stdout) ends the stdio
//! session only (its calls get the grace, then are cancelled) and the
//! server serves on until a signal; `--no-stdio` serves no MCP on stdio at
//! all.

pub mod app;
pub mod discover;
pub mod outbox;
pub mod progress;
pub mod session;
mod shutdown;
pub mod tasks;
pub mod transport;

use std::sync::Arc;

use std::net::SocketAddr;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::policy::cwd::CwdPolicy;
use app::App;
use session::McpSession;
use transport::http;
use transport::sandboxd::settings::{SandboxRoot, SandboxdGrpc};
use transport::stdio::{self, Input, Stdio};

/// Which transports serve, from the listener settings (validated: an
/// error names the setting, and `main` exits 2).
#[derive(Debug)]
pub struct Listeners {
    /// Serve MCP on stdio.
    pub stdio: bool,
    /// The Streamable HTTP listener.
    pub http: Option<http::HttpSettings>,
    /// The token-free metrics and health listener.
    pub metrics: Option<SocketAddr>,
    /// E2B envd's listener (docs/envd.md).
    pub envd: Option<transport::envd::EnvdSettings>,
    /// sandboxd's gRPC `process.v1.ProcessService` (docs/sandboxd.md).
    pub sandboxd_grpc: Option<transport::sandboxd::settings::SandboxdGrpc>,
    /// sandboxd's REST API (docs/sandboxd.md).
    pub sandboxd_rest: Option<transport::sandboxd::rest::SandboxdRest>,
}

impl Listeners {
    /// Validates the listener settings of `config`; a sandboxd listener's
    /// root must lie within `cwd`, the working-directory policy.
    pub fn from_config(config: &Config, cwd: &CwdPolicy) -> Result<Listeners, String> {
        // Every listener's cap comes from it: checked with any listener,
        // not only with --http.
        let any_listener = config.http.is_some()
            || config.metrics_listen.is_some()
            || config.envd.is_some()
            || config.sandboxd_grpc.is_some()
            || config.sandboxd_rest.is_some();
        if any_listener {
            config.http_max_connections()?;
        }
        let http = http::HttpSettings::from_config(config)?;
        let metrics = config
            .metrics_listen
            .as_deref()
            .map(|raw| {
                http::settings::listen_address("MCP_EXEC_METRICS_LISTEN (--metrics-listen)", raw)
            })
            .transpose()?;
        let envd = transport::envd::EnvdSettings::from_config(config)?;
        if config.sandboxd_grpc.is_some() && !cfg!(feature = "sandboxd") {
            return Err(
                "MCP_EXEC_SANDBOXD_GRPC (--sandboxd-grpc): this mcp-exec was built without \
                 the `sandboxd` feature"
                    .into(),
            );
        }
        // The platform listeners' start-up rule (a non-loopback listener
        // without our token needs MCP_EXEC_PLATFORM_INSECURE=1).
        let grpc_auth = config
            .sandboxd_grpc
            .as_deref()
            .map(|raw| {
                transport::platform::PlatformAuth::new(
                    transport::platform::Platform::SandboxdGrpc,
                    raw,
                    config,
                )
            })
            .transpose()?;
        // Either sandboxd listener works in the root: it must exist at
        // start-up, also for gRPC alone, whose jobs start there.
        let (sandboxd_grpc, sandboxd_rest) =
            if grpc_auth.is_some() || config.sandboxd_rest.is_some() {
                let root = SandboxRoot::from_config(config, cwd)?;
                let rest = transport::sandboxd::rest::SandboxdRest::from_config(config, &root)?;
                let grpc = grpc_auth.map(|auth| SandboxdGrpc { auth, root });
                (grpc, rest)
            } else {
                (None, None)
            };
        // Any listener that serves jobs or files will do; the metrics
        // listener serves neither, so it alone leaves nothing to serve.
        let serves =
            http.is_some() || envd.is_some() || sandboxd_grpc.is_some() || sandboxd_rest.is_some();
        if config.no_stdio && !serves {
            let metrics_only = if metrics.is_some() {
                "; --metrics-listen (MCP_EXEC_METRICS_LISTEN) serves only metrics and health, no job or file"
            } else {
                ""
            };
            return Err(format!(
                "--no-stdio needs a listener that serves jobs or files: --http (MCP_EXEC_HTTP), \
                 --envd (MCP_EXEC_ENVD), --sandboxd-grpc (MCP_EXEC_SANDBOXD_GRPC) or \
                 --sandboxd-rest (MCP_EXEC_SANDBOXD_REST){metrics_only}: nothing would serve"
            ));
        }
        Ok(Listeners {
            stdio: !config.no_stdio,
            http,
            metrics,
            envd,
            sandboxd_grpc,
            sandboxd_rest,
        })
    }
}

/// Why the server ended.
#[derive(Debug, Clone, Copy)]
pub enum EndReason {
    /// stdin closed.
    Eof,
    /// A shutdown signal arrived.
    Signal(init::Signal),
    /// The client closed stdout.
    StdoutClosed,
    /// Init mode: the main command exited; the server exits with this code.
    MainExited(i32),
}

/// Serves MCP on stdio and HTTP as `listeners` say until a shutdown signal
/// (or, with stdio the only transport, EOF or a closed stdout), then shuts
/// down.
pub async fn run(
    app: Arc<App>,
    mut events: mpsc::UnboundedReceiver<init::Event>,
    listeners: Listeners,
    mut main: Option<init::PendingExit>,
) -> std::io::Result<EndReason> {
    let shutdown = CancellationToken::new();
    // envd, like HTTP, serves on after the stdio session ends.
    let serving_envd = listeners.envd.is_some();
    if let Some(envd) = listeners.envd {
        transport::envd::start(envd, Arc::clone(&app), &shutdown).await?;
    }
    // A platform listener serves on after stdin's end, as HTTP does.
    let serving_http = listeners.http.is_some()
        || listeners.sandboxd_rest.is_some()
        || listeners.sandboxd_grpc.is_some();
    #[cfg(feature = "sandboxd")]
    if let Some(grpc) = listeners.sandboxd_grpc {
        transport::sandboxd::grpc::start(grpc, Arc::clone(&app), &shutdown).await?;
    }
    // The listeners are assembled here: sandboxd's REST paths get a
    // listener of their own, or, on the MCP listener's address, are mounted
    // there; the front-ends never name each other.
    let in_flight = crate::net::http::InFlight::new();
    let mcp_addr = listeners.http.as_ref().map(|h| h.addr);
    let mut mount = None;
    if let Some(rest) = listeners.sandboxd_rest {
        if !rest.auth().has_token() {
            tracing::warn!(
                listener = rest.auth().platform().name(),
                "a platform listener serves without a token: anyone who can reach {} can write \
                 files (on a pod network a NetworkPolicy is the boundary; local processes of \
                 other users are refused)",
                rest.auth().addr()
            );
        }
        if transport::sandboxd::rest::shares(&rest, mcp_addr) {
            mount = Some(transport::sandboxd::rest::mount(
                rest,
                Arc::clone(&app),
                &shutdown,
            ));
        } else {
            transport::sandboxd::rest::start(rest, Arc::clone(&app), &shutdown, &in_flight).await?;
        }
    }
    let http = if listeners.http.is_some() || listeners.metrics.is_some() {
        Some(
            http::start(
                listeners.http,
                listeners.metrics,
                mount,
                Arc::clone(&app),
                &shutdown,
                &in_flight,
            )
            .await?,
        )
    } else {
        None
    };
    let mut stdio = if listeners.stdio {
        Some(stdio::start(app.config.max_line_bytes)?)
    } else {
        None
    };
    let session = McpSession::new(Arc::clone(&app), &shutdown, "stdio");
    let stdio_out = stdio.as_ref().map(|io| io.outbox.clone());
    let stdio_broken = stdio.as_ref().map(|io| io.broken.clone());

    let reason = loop {
        let ended = tokio::select! {
            biased;
            Some(ev) = events.recv() => match on_event(Some(ev)) {
                Some(signal) => break EndReason::Signal(signal),
                None => continue,
            },
            () = broken(stdio_broken.as_ref()), if stdio.is_some() => EndReason::StdoutClosed,
            // Init mode: the main command's end is the server's.
            status = async { match main.as_mut() { Some(m) => m.await, None => std::future::pending().await } }, if main.is_some() => {
                break EndReason::MainExited(crate::init_mode::code_of(status));
            }
            // Backpressure: take the next request only while the answers
            // already queued leave room.
            msg = next_line(stdio.as_mut()) => match msg {
                Some(Input::Line(line)) => {
                    if let Some(out) = &stdio_out {
                        session.on_line(line, out).await;
                    }
                    continue;
                }
                Some(Input::Eof) | None => EndReason::Eof,
            },
        };
        if !serving_http && !serving_envd {
            break ended;
        }
        // HTTP serves on: only the stdio session ends.
        if let Some(io) = stdio.take() {
            shutdown::end_stdio_session(io, &session, ended, app.config.shutdown_grace);
        }
    };
    Ok(shutdown::Serving {
        app,
        session,
        stdio,
        http,
        cancel: shutdown,
    }
    .shut_down(reason, &mut events)
    .await)
}

/// Completes when stdout is broken; never without stdio.
async fn broken(token: Option<&CancellationToken>) {
    match token {
        Some(t) => t.cancelled().await,
        None => std::future::pending().await,
    }
}

/// The next stdin line once the outbox has room; never without stdio.
async fn next_line(stdio: Option<&mut Stdio>) -> Option<Input> {
    match stdio {
        Some(io) => {
            io.outbox.room().await;
            io.input.recv().await
        }
        None => std::future::pending().await,
    }
}

/// Logs a forwarded signal; returns a shutdown signal.
fn on_event(ev: Option<init::Event>) -> Option<init::Signal> {
    match ev {
        Some(init::Event::Shutdown(sig)) => Some(sig),
        Some(init::Event::Forwarded { signal, groups }) => {
            tracing::info!(%signal, groups, "forwarded signal to job groups");
            None
        }
        None => None,
    }
}
