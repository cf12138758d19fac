//! Routing one message: a notification (`notifications/cancelled`, …) or
//! a request, whose era is decided first ([`McpSession::era_of`]), then
//! answered inline (`initialize`, `ping`, `tools/list`, `server/discover`,
//! `tasks/*`, errors) or started as a call ([`McpSession::start_call`]).
//!
//! # Invariants
//! - Every request's revision is decided before it is dispatched: its own
//!   `_meta` (2026-07-28) or its session's `initialize`.
//! - Inline answers are in order; one response per request.

// One MCP session split by concern: the parent's imports and items are
// this module's too.
use super::*;

impl McpSession {
    /// Handles one message; returns its response, if it gets one now. A
    /// `tools/call` gets a task that sends its response.
    pub(super) fn on_message(self: &Arc<Self>, msg: Incoming, out: &Outbox) -> Option<RpcReply> {
        match msg {
            Incoming::Request { id, method, params } => {
                Some(self.on_request(id, method, params, out))
            }
            Incoming::Notification { method, params } => {
                self.on_notification(&method, &params);
                None
            }
            Incoming::Response => None,
            Incoming::Invalid { id, message } => Some(RpcReply::Now(protocol::error_line(
                id.as_ref(),
                ErrorCode::INVALID_REQUEST,
                &message,
            ))),
        }
    }

    pub(super) fn on_notification(&self, method: &str, params: &Value) {
        if method != "notifications/cancelled" {
            return; // notifications/initialized and unknown ones: nothing to do
        }
        let Some(id) = params.get("requestId").and_then(RequestId::from_value) else {
            return;
        };
        let token = self
            .in_flight
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&id)
            .cloned();
        if let Some(token) = token {
            tracing::debug!(request = %id, "cancel requested");
            token.cancel();
        }
    }

    /// How a request with `params` is served (see [`Era::of`]); `Err` is
    /// its error line (`-32022`, `-32602`).
    pub(super) fn era_of(&self, id: &RequestId, params: &Value) -> Result<Era, String> {
        Era::of(params, self.revision.get().copied(), || {
            self.client.get().cloned().unwrap_or_default()
        })
        .map_err(|e| match e.data() {
            Some(data) => protocol::error_line_with_data(Some(id), e.code(), &e.message(), &data),
            None => protocol::error_line(Some(id), e.code(), &e.message()),
        })
    }

    pub(super) fn on_request(
        self: &Arc<Self>,
        id: RequestId,
        method: String,
        params: Value,
        out: &Outbox,
    ) -> RpcReply {
        let label = method_label(&method);
        let era = match self.era_of(&id, &params) {
            Ok(era) => era,
            Err(line) => {
                crate::metrics::request(self.transport, label, "error");
                return RpcReply::Now(line);
            }
        };
        let revision = era.revision;
        let known = !revision.is_modern() || modern_method(&method);
        let line = match method.as_str() {
            _ if !known => {
                crate::metrics::request(self.transport, label, "error");
                return RpcReply::Now(protocol::error_line(
                    Some(&id),
                    ErrorCode::METHOD_NOT_FOUND,
                    &format!("method not found: {method}"),
                ));
            }
            // 2026-07-28 has no handshake: `initialize` is a legacy method.
            "initialize" if !era.per_request => self.initialize(&id, &params),
            "tasks/get" | "tasks/list" | "tasks/cancel" | "tasks/result"
                if revision.has_task_augmentation()
                    && (method != "tasks/list" || self.requestor().identified()) =>
            {
                let requestor = self.requestor();
                let app = &self.app;
                match method.as_str() {
                    "tasks/get" => crate::server::tasks::get(app, requestor, &id, &params),
                    "tasks/list" => crate::server::tasks::list(app, requestor, &id, &params),
                    "tasks/cancel" => crate::server::tasks::cancel(app, requestor, &id, &params),
                    _ => return self.task_result(id, params, None, out),
                }
            }
            // The extension's methods need the extension, declared on the
            // request itself (SEP-2663: -32021 otherwise).
            "tasks/get" | "tasks/update" | "tasks/cancel"
                if revision.is_modern()
                    && !era.client.has_extension(crate::server::tasks::EXTENSION) =>
            {
                crate::metrics::request(self.transport, label, "error");
                return RpcReply::Now(protocol::error_line_with_data(
                    Some(&id),
                    ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
                    &format!(
                        "{method} needs the client capability extensions[\"{}\"] on the request",
                        crate::server::tasks::EXTENSION
                    ),
                    &json!({"requiredCapabilities": {"extensions": {crate::server::tasks::EXTENSION: {}}}}),
                ));
            }
            "tasks/get" | "tasks/update" | "tasks/cancel" if revision.is_modern() => {
                crate::server::tasks::modern(
                    &self.app,
                    revision,
                    self.requestor(),
                    &method,
                    &id,
                    &params,
                )
            }
            // Only a listen for task notifications (the Tasks extension): the
            // server has no other notifications to subscribe to, and any
            // other listen stays unknown, as before.
            "subscriptions/listen"
                if revision.is_modern()
                    && era.client.has_extension(crate::server::tasks::EXTENSION)
                    && params["notifications"].get("taskIds").is_some() =>
            {
                return self.task_result(id, params, Some(revision), out);
            }
            "ping" if revision.has_ping() => protocol::success_line(&id, &json!({})),
            "server/discover" if revision.has_discover() => {
                protocol::success_line_raw(&id, discover::result_json(revision))
            }
            "tools/list" => protocol::success_line_raw(&id, tools::list_json(revision)),
            "tools/call" => {
                let call = self.start_call(id, &params, era, out);
                let out = out.clone();
                return RpcReply::Later(self.running.spawn(async move {
                    let (message, ticket) = call.await;
                    out.send(message).await;
                    drop(ticket);
                    (Message::Line(String::new()), None)
                }));
            }
            _ => {
                crate::metrics::request(self.transport, label, "error");
                return RpcReply::Now(protocol::error_line(
                    Some(&id),
                    ErrorCode::METHOD_NOT_FOUND,
                    &format!("method not found: {method}"),
                ));
            }
        };
        crate::metrics::request(self.transport, label, "ok");
        RpcReply::Now(line)
    }

    /// `initialize` (up to 2025-11-25): the first fixes the session's
    /// revision and client; each answers with them.
    fn initialize(&self, id: &RequestId, params: &Value) -> String {
        let requested = params.get("protocolVersion").and_then(Value::as_str);
        let negotiated = Revision::negotiate(requested);
        let revision = *self.revision.get_or_init(|| negotiated);
        self.client
            .get_or_init(|| Arc::new(Client::from_initialize(params)));
        let mut capabilities = json!({"tools": {}});
        if revision.has_task_augmentation() {
            capabilities["tasks"] = crate::server::tasks::capability(self.requestor());
        }
        protocol::success_line(
            id,
            &json!({
                "protocolVersion": revision.as_str(),
                "capabilities": capabilities,
                "serverInfo": {"name": "mcp-exec", "version": env!("CARGO_PKG_VERSION")},
            }),
        )
    }

    /// `tasks/result` (2025-11-25), which blocks until its task is
    /// terminal, or with `listen` (the request's modern revision)
    /// `subscriptions/listen`, which streams `notifications/tasks`: in a
    /// task of its own, cancellable like a call.
    pub(super) fn task_result(
        self: &Arc<Self>,
        id: RequestId,
        params: Value,
        listen: Option<Revision>,
        out: &Outbox,
    ) -> RpcReply {
        let cancel = self.track(&id);
        let session = Arc::clone(self);
        let out = out.clone();
        RpcReply::Later(self.running.spawn(async move {
            let requestor = session.requestor();
            let app = &session.app;
            let answer = async {
                match listen {
                    Some(rev) => {
                        crate::server::tasks::listen(app, rev, requestor, &id, &params, &out).await
                    }
                    None => crate::server::tasks::result(app, requestor, &id, &params).await,
                }
            };
            let line = tokio::select! {
                line = answer => Some(line),
                () = cancel.cancelled() => Some(protocol::error_line(
                    Some(&id),
                    ErrorCode::REQUEST_CANCELLED,
                    "request cancelled",
                )),
                () = out.closed() => None,
            };
            session
                .in_flight
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&id);
            let label = if listen.is_some() {
                "subscriptions/listen"
            } else {
                "tasks/result"
            };
            crate::metrics::request(session.transport, label, "ok");
            if let Some(line) = line {
                out.send(line).await;
            }
            (Message::Line(String::new()), None)
        }))
    }
}

/// The request metric's label of `method`: the methods the server knows,
/// `other` for the rest (so a client cannot grow the metric's labels).
fn method_label(method: &str) -> &'static str {
    match method {
        "initialize" => "initialize",
        "ping" => "ping",
        "server/discover" => "server/discover",
        "tools/list" => "tools/list",
        "tools/call" => "tools/call",
        "tasks/get" => "tasks/get",
        "tasks/result" => "tasks/result",
        "tasks/list" => "tasks/list",
        "tasks/cancel" => "tasks/cancel",
        "tasks/update" => "tasks/update",
        "subscriptions/listen" => "subscriptions/listen",
        _ => "other",
    }
}
