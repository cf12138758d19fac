//! `/filesystem.Filesystem/<Method>` (envd's filesystem service): `Stat`,
//! `MakeDir`, `Move`, `ListDir`, `Remove`, `WatchDir` (server stream) and the
//! polling watcher (`CreateWatcher`, `GetWatcherEvents`, `RemoveWatcher`).
//!
//! Not served yet: every method answers `unimplemented` (the `envdfs`
//! branch replaces this module). The extension point is [`handle`]: it gets
//! the method's name and the whole request; [`super::connect`] reads and
//! answers each RPC shape (`refusal`, `unary_request`, `stream_request`,
//! `ok`, `Envelopes`, `Error`), and [`super::proto`] has the ProtoJSON
//! helpers (`b64`, `or_default`, `u32_any`).

use std::sync::Arc;

use hyper::Request;
use hyper::body::Incoming;

use super::EnvdState;
use super::connect::{Code, Error, Reply};

/// Serves `/filesystem.Filesystem/<rpc>`.
pub(super) async fn handle(_state: &Arc<EnvdState>, rpc: &str, _req: Request<Incoming>) -> Reply {
    Error::new(
        Code::Unimplemented,
        format!("filesystem.Filesystem/{rpc} is not served yet"),
    )
    .unary()
}
