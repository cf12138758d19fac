//! `/mcp`: the MCP endpoint (SPEC §11). `POST` carries one JSON-RPC message
//! (or, in a 2025-03-26 session, a batch); `DELETE` ends the session; `GET`
//! offers no stream (`405`).
//!
//! `initialize` creates an [`HttpSession`] carrying a new [`McpSession`] —
//! the same protocol code the stdio transport uses — and names it in
//! `Mcp-Session-Id`; every later request must carry that header. Each POST
//! gets an [`Outbox`](crate::server::outbox::Outbox) of its own: the session
//! queues that message's response (and its progress notifications) there,
//! and [`post`] turns what arrives into the HTTP response: `202` when
//! nothing answers (a notification, a response), `application/json` with
//! the one response, or `text/event-stream` with the progress notifications
//! and then the response when the request asked for progress and the client
//! accepts SSE.

use std::sync::Arc;

use bytes::Bytes;
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Request, StatusCode};
use tokio::sync::mpsc;

use super::read::{Accepts, read_body};
use super::reply::{HttpReply, empty, json, sse, status};
use super::state::{Busy, HttpSession, HttpState, lock, new_session_id};
use crate::protocol::version::SUPPORTED;
use crate::server::outbox::{self, Inbox, Message, Outgoing};
use crate::server::session::{Inbound, McpSession};

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

    let (entry, new_id) = if message.opens_session() {
        let Some(id) = new_session_id() else {
            return status(
                StatusCode::INTERNAL_SERVER_ERROR,
                "no randomness for a session id",
            );
        };
        let session = McpSession::new(Arc::clone(&state.app), &state.shutdown, "http");
        (HttpSession::new(session), Some(id))
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
        stream(inbox, busy)
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

/// The session a request after `initialize` names, checked against its
/// `MCP-Protocol-Version`; `Err` is the refusal.
fn known_session(
    state: &HttpState,
    headers: &hyper::HeaderMap,
) -> Result<Arc<HttpSession>, (StatusCode, String)> {
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
fn stream(mut inbox: Inbox, busy: Busy) -> HttpReply {
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
            let mut event = b"event: message\ndata: ".to_vec();
            if message.write_to(&mut event).is_err() {
                return;
            }
            event.extend_from_slice(b"\n\n");
            let sent = tx.send(Bytes::from(event)).await.is_ok();
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
/// its jobs live on (SPEC §10).
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
