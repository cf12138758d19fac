//! `/mcp`: the MCP endpoint. `POST` carries one JSON-RPC message
//! (or, in a 2025-03-26 session, a batch); `DELETE` ends the session; `GET`
//! offers no stream (`405`).
//!
//! `initialize` creates an [`SessionEntry`] carrying a new [`McpSession`] —
//! the same protocol code the stdio transport uses — and names it in
//! `Mcp-Session-Id`; every later request must carry that header. Each POST
//! gets an [`Outbox`](crate::server::outbox::Outbox) of its own: the session
//! queues that message's response (and its progress notifications) there,
//! and [`post`] turns what arrives into the HTTP response: `202` when
//! nothing answers (a notification, a response), `application/json` with
//! the one response, or `text/event-stream` with the progress notifications
//! and then the response when the request asked for progress and the client
//! accepts SSE.
//!
//! A 2026-07-28 request (its body's `_meta` names its revision, or its
//! `MCP-Protocol-Version` header a modern one) takes no session: see
//! [`stateless`]. Both eras are served on the one endpoint at once.

use std::sync::Arc;

use bytes::Bytes;
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Request, StatusCode};
use tokio::sync::mpsc;

use super::read::{Accepts, read_body};
use super::routing;
use super::state::{Busy, HttpState, SessionEntry, lock, new_session_id};
use crate::net::reply::{HttpReply, empty, json, sse, status};
use crate::net::sse::event as sse_event;
use crate::protocol::era::{Era, META_PROTOCOL_VERSION};
use crate::protocol::version::{Revision, SUPPORTED};
use crate::protocol::{self, ErrorCode, RequestId};
use crate::server::outbox::{self, Inbox, Message, Outgoing};
use crate::server::session::{Inbound, McpSession, modern_method};

/// `POST /mcp`, after the guard (Host, Origin, token) let it through.
pub(super) async fn post(state: &Arc<HttpState>, req: Request<Incoming>) -> HttpReply {
    let accepts = Accepts::of(req.headers());
    if !accepts.json {
        return status(
            StatusCode::NOT_ACCEPTABLE,
            "Accept must allow application/json",
        );
    }
    let (parts, bytes) = match read_body(state, req).await {
        Ok(read) => read,
        Err(reply) => return reply,
    };
    // Parsed once: the transport asks the parsed message what it must know
    // first (does it open a session, does it want progress), and the
    // session takes it as it is.
    let message = Inbound::from_slice(&bytes);
    drop(bytes);
    if message.is_per_request() || modern_header(&parts.headers) {
        return stateless(state, &parts.headers, message, accepts).await;
    }

    let (entry, new_id) = if message.opens_session() {
        let Some(id) = new_session_id() else {
            return status(
                StatusCode::INTERNAL_SERVER_ERROR,
                "no randomness for a session id",
            );
        };
        let session = McpSession::new(Arc::clone(&state.app), &state.shutdown, "http");
        (SessionEntry::new(session), Some(id))
    } else {
        match known_session(state, &parts.headers) {
            Ok(entry) => (entry, None),
            Err((code, why)) => return status(code, &why),
        }
    };
    let busy = Busy::new(&entry);
    let (out, inbox) = outbox::new(outbox::BUDGET);
    let wants_progress = message.wants_progress();
    entry.session.on_inbound(message, &out).await;
    // Only the call's task holds the outbox now: when it is done (or when
    // nothing answers at all), the inbox ends.
    drop(out);
    if let Some(id) = &new_id {
        if !state.admit_session(id.clone(), Arc::clone(&entry)) {
            drop(busy);
            entry.session.end();
            return status(
                StatusCode::SERVICE_UNAVAILABLE,
                "every HTTP session is serving a request (MCP_EXEC_HTTP_MAX_SESSIONS)",
            );
        }
        tracing::info!(session = %id, "HTTP session started");
    }
    let mut reply = if accepts.sse && wants_progress {
        stream(inbox, Some(busy))
    } else {
        let reply = answer(inbox).await;
        drop(busy);
        reply
    };
    if let Some(v) = new_id.and_then(|id| HeaderValue::from_str(&id).ok()) {
        reply.headers_mut().insert("mcp-session-id", v);
    }
    reply
}

/// Whether `MCP-Protocol-Version` names a modern revision (then the request
/// is served statelessly, or refused as such, whatever its body says).
fn modern_header(headers: &hyper::HeaderMap) -> bool {
    headers
        .get("mcp-protocol-version")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| Revision::modern(v).is_some())
}

/// A 2026-07-28 request: no `Mcp-Session-Id` (one that comes is ignored,
/// none is minted), the body's `_meta` and the routing headers checked
/// first, then served by the listener's stateless session. A closed
/// response stream cancels the request (the session sees its outbox close).
async fn stateless(
    state: &Arc<HttpState>,
    headers: &hyper::HeaderMap,
    message: Inbound,
    accepts: Accepts,
) -> HttpReply {
    let Some(single) = message.single() else {
        let line = protocol::error_line(
            None,
            ErrorCode::INVALID_REQUEST,
            "invalid request: a 2026-07-28 request is one JSON-RPC object",
        );
        return refusal(StatusCode::BAD_REQUEST, line);
    };
    let id = single.id.and_then(RequestId::from_value);
    // The binding defines no client notification (a closed stream is the
    // cancellation): accepted, and nothing to do.
    if single.id.is_none() {
        return empty(StatusCode::ACCEPTED);
    }
    let refuse = |code: StatusCode, error: ErrorCode, message: &str| {
        refusal(code, protocol::error_line(id.as_ref(), error, message))
    };
    if let Err(why) = routing::check_version(headers, &single) {
        return refuse(StatusCode::BAD_REQUEST, ErrorCode::HEADER_MISMATCH, &why);
    }
    match Era::of(single.params, None, Arc::default) {
        Err(e) => {
            let line = match e.data() {
                Some(data) => {
                    protocol::error_line_with_data(id.as_ref(), e.code(), &e.message(), &data)
                }
                None => protocol::error_line(id.as_ref(), e.code(), &e.message()),
            };
            return refusal(StatusCode::BAD_REQUEST, line);
        }
        Ok(era) if !era.per_request => {
            let why = format!("invalid params: _meta[{META_PROTOCOL_VERSION:?}] is required");
            return refuse(StatusCode::BAD_REQUEST, ErrorCode::INVALID_PARAMS, &why);
        }
        Ok(_) => {}
    }
    if let Err(why) = routing::check(headers, &single) {
        return refuse(StatusCode::BAD_REQUEST, ErrorCode::HEADER_MISMATCH, &why);
    }
    let method = single.method.unwrap_or("");
    if !modern_method(method) {
        let why = format!("method not found: {method}");
        return refuse(StatusCode::NOT_FOUND, ErrorCode::METHOD_NOT_FOUND, &why);
    }
    let wants_progress = message.wants_progress();
    let (out, inbox) = outbox::new(outbox::BUDGET);
    state.stateless.on_inbound(message, &out).await;
    drop(out);
    if accepts.sse && wants_progress {
        stream(inbox, None)
    } else {
        answer(inbox).await
    }
}

/// A modern error answered with an HTTP status: the JSON-RPC error `line`.
fn refusal(code: StatusCode, mut line: String) -> HttpReply {
    line.push('\n');
    json(code, line)
}

/// The session a request after `initialize` names, checked against its
/// `MCP-Protocol-Version`; `Err` is the refusal.
fn known_session(
    state: &HttpState,
    headers: &hyper::HeaderMap,
) -> Result<Arc<SessionEntry>, (StatusCode, String)> {
    let entry = state
        .session_of(headers)
        .map_err(|(code, why)| (code, why.to_owned()))?;
    if let Some(v) = headers.get("mcp-protocol-version") {
        let v = v.to_str().unwrap_or("");
        if !SUPPORTED.contains(&v) {
            return Err((
                StatusCode::BAD_REQUEST,
                format!("unsupported MCP-Protocol-Version {v:?}"),
            ));
        }
        if entry.session.is_initialized() && entry.session.revision().as_str() != v {
            return Err((
                StatusCode::BAD_REQUEST,
                "MCP-Protocol-Version differs from the session's revision".to_owned(),
            ));
        }
    }
    Ok(entry)
}

/// The progress notifications and then the response, as server-sent
/// events, fed by a task that keeps the session busy until the response
/// is sent (or the client went away).
fn stream(mut inbox: Inbox, busy: Option<Busy>) -> HttpReply {
    let (tx, rx) = mpsc::channel::<Bytes>(4);
    tokio::spawn(async move {
        let _busy = busy;
        loop {
            let next = tokio::select! {
                m = inbox.rx.recv() => m,
                // The body is gone: the client went away.
                () = tx.closed() => return,
            };
            let Some(Outgoing::Message(message, permit)) = next else {
                return;
            };
            let last = !matches!(message, Message::Notification(_));
            let mut data = Vec::new();
            if message.write_to(&mut data).is_err() {
                return;
            }
            let sent = tx.send(sse_event("message", &data)).await.is_ok();
            // Handed to the response body; if the body is gone instead,
            // dropping the message puts back the results it claimed.
            if sent {
                message.sent();
            }
            drop(message);
            drop(permit);
            if !sent || last {
                return;
            }
        }
    });
    sse(rx)
}

/// The one response as `application/json` (notifications are dropped), or
/// `202` when nothing answers.
async fn answer(mut inbox: Inbox) -> HttpReply {
    loop {
        match inbox.rx.recv().await {
            Some(Outgoing::Message(Message::Notification(_), _)) => {}
            Some(Outgoing::Message(message, _permit)) => {
                let mut body = Vec::new();
                if message.write_to(&mut body).is_err() {
                    return status(StatusCode::INTERNAL_SERVER_ERROR, "encoding the response");
                }
                body.push(b'\n');
                // The body goes to hyper now; a client that vanished before
                // this point dropped this future, and with it the message.
                message.sent();
                return json(StatusCode::OK, body);
            }
            Some(Outgoing::Finish) | None => return empty(StatusCode::ACCEPTED),
        }
    }
}

/// `DELETE /mcp`: ends the session; its calls in flight answer `-32800`,
/// its jobs live on (they are process-wide).
pub(super) fn delete(state: &HttpState, req: &Request<Incoming>) -> HttpReply {
    let entry = match state.session_of(req.headers()) {
        Ok(e) => e,
        Err((code, why)) => return status(code, why),
    };
    lock(&state.sessions).retain(|_, e| !Arc::ptr_eq(e, &entry));
    entry.session.end();
    empty(StatusCode::NO_CONTENT)
}

/// Any other method on `/mcp`.
pub(super) fn not_allowed() -> HttpReply {
    let mut r = status(
        StatusCode::METHOD_NOT_ALLOWED,
        "this server offers no stream on GET /mcp",
    );
    r.headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static("POST, DELETE"));
    r
}
