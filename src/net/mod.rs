//! The floor under every listener: what the MCP HTTP, metrics, envd,
//! sandboxd REST and sandboxd gRPC listeners share, so that a limit or a
//! fix made here reaches all of them at once. It knows nothing of jobs,
//! tools, MCP or the server (scripts/check-layers.sh keeps it so): a
//! listener brings its protocol's handler, the floor brings the socket.
//!
//! - [`accept`]: binding and announcing, the one accept loop, the silent
//!   first-byte deadline, the refusal past the cap in the listener's own
//!   protocol, and the peer rule of a listener without a token.
//! - [`conns`]: a listener's table of open connections: the cap, and who is
//!   evicted at it.
//! - [`stall`]: the bound on writes that make no progress.
//! - [`gate`]: the one gate (Host, Origin, token) and the table of probes,
//!   the paths that need no token.
//! - [`http`]: HTTP/1.1 and HTTP/2 on an admitted connection, with their
//!   deadlines and limits, each request marked in the table while served.
//! - [`peer`]: which uid owns the local socket at the other end.
//! - [`body`] and [`reply`]: the response body of the HTTP/1.1 listeners,
//!   and the one place that names a content type for a JSON or SSE answer
//!   and the `{"error": …}` shape of a refusal.
//! - [`request`]: a whole request body, bounded in size and in time (the
//!   one body deadline of every listener's unary requests).
//! - [`multipart`]: the one streaming `multipart/form-data` parser.
//! - [`query`]: a URL's query and percent-escapes, with each listener's
//!   rule for `+` (a space or a plus).
//! - [`sse`]: the one framer of a server-sent event.
//! - [`status`]: the one RPC status code, rendered as gRPC's number,
//!   Connect's name and Connect's HTTP status.
//! - [`envelope`]: the 5-byte length-prefixed message envelope of gRPC and
//!   Connect's streams: encoding one, and the incremental decoder with its
//!   bound and typed errors, which each front-end maps to its status.
//! - [`timeout`]: the deadline headers, `grpc-timeout` and
//!   `connect-timeout-ms`.
//!
//! docs/security.md lists what every listener guarantees.

pub mod accept;
pub mod body;
pub mod conns;
pub mod envelope;
pub mod gate;
pub mod http;
pub mod multipart;
pub mod peer;
pub mod query;
pub mod reply;
pub mod request;
pub mod sse;
pub mod stall;
pub mod status;
pub mod timeout;
