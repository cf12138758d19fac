//! The result of a `tools/call` request (MCP `CallToolResult`), as it goes on
//! the wire.
//!
//! Success:
//! `{"content":[{"type":"text","text":<compact JSON of the payload>}],"structuredContent"?:<object>,"isError":false}`
//! - `content[0].text` is the compact JSON of the tool's payload in every
//!   revision (`wait`'s payload is an array).
//! - A payload with a resource (`download`) has it second, so
//!   that the first block stays the JSON text in every result:
//!   `content` is `[{"type":"text",…}, {"type":"resource","resource":{…}}]`.
//! - `structuredContent` (revisions that have it, see
//!   [`Revision::has_structured_content`](super::version::Revision::has_structured_content))
//!   is the same payload as an object: MCP requires an object, so a payload
//!   that is an array goes under the key its tool names (`wait`:
//!   `{"results":[…]}`).
//!
//! Failure (a tool error):
//! `{"content":[{"type":"text","text":<message>}],"isError":true}`.
//!
//! In 2026-07-28 both are followed by `"resultType":"complete"` and
//! `"_meta":{"io.modelcontextprotocol/serverInfo":…}` (see
//! [`super::era::Stamped`]).
//!
//! The payload is any `Serialize` value, kept typed until it is written: the
//! text block is produced by streaming the payload's JSON through the string
//! escaper (`collect_str`), so a result carrying a megabyte of output is
//! never held as an intermediate `Value` or `String`.

use std::fmt;

use serde::Serialize;
use serde::ser::SerializeMap;

use super::era::{ResultType, Stamped, StampedFields};

/// A tool's successful output, typed, serialised on write.
pub struct Payload {
    value: Box<dyn erased_serde::Serialize + Send + Sync>,
    /// `Some(key)`: the payload is an array, shown in `structuredContent`
    /// as `{key: payload}`.
    array_key: Option<&'static str>,
    /// About how many bytes its JSON takes (for a transport's queue budget).
    size_hint: usize,
    /// An embedded resource shown before the text block.
    resource: Option<Box<dyn erased_serde::Serialize + Send + Sync>>,
    /// What to do if it never reaches its client ([`Payload::on_lost`]).
    lost: Option<Lost>,
}

/// Runs its action when dropped, unless [`Lost::disarm`] came first: a
/// result that a tool claimed from the job table (`wait`, `kill`, a blocking
/// `execute`) and that is dropped unsent — its client went away before the
/// transport took it — puts what it claimed back. Dropping is
/// the one way every unsent path ends (a closed outbox, a queue dropped
/// with its messages, a failed write), so none can forget to.
struct Lost(std::sync::Mutex<Option<Box<dyn FnOnce() + Send>>>);

impl Lost {
    fn disarm(&self) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take();
    }
}

impl Drop for Lost {
    fn drop(&mut self) {
        let action = self.0.get_mut().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(action) = action {
            action();
        }
    }
}

/// The size hint of a payload that does not give one.
const SMALL: usize = 256;

impl Payload {
    /// A payload that serialises as a JSON object.
    pub fn object(value: impl Serialize + Send + Sync + 'static) -> Payload {
        Payload {
            value: Box::new(value),
            array_key: None,
            size_hint: SMALL,
            resource: None,
            lost: None,
        }
    }

    /// Adds an embedded resource (the object under `"resource"`: `uri`,
    /// `mimeType`, `text` or `blob`) as a second content block.
    pub fn with_resource(mut self, resource: impl Serialize + Send + Sync + 'static) -> Payload {
        self.resource = Some(Box::new(resource));
        self
    }

    /// A payload that serialises as a JSON array; `structuredContent` wraps
    /// it as `{key: […]}`.
    pub fn array(key: &'static str, value: impl Serialize + Send + Sync + 'static) -> Payload {
        Payload {
            value: Box::new(value),
            array_key: Some(key),
            size_hint: SMALL,
            resource: None,
            lost: None,
        }
    }

    /// Runs `action` if the payload is dropped before it was handed to its
    /// client ([`CallResult::sent`]): a tool that claimed results passes
    /// what puts them back, so a result is delivered exactly once to a
    /// client that reads it, and lost to none that vanished.
    pub fn on_lost(mut self, action: impl FnOnce() + Send + 'static) -> Payload {
        self.lost = Some(Lost(std::sync::Mutex::new(Some(Box::new(action)))));
        self
    }

    /// Says about how many bytes its JSON takes (output data it carries),
    /// so that a transport can account for it before writing it.
    pub fn sized(mut self, bytes: usize) -> Payload {
        self.size_hint = bytes.saturating_add(SMALL);
        self
    }
}

impl fmt::Debug for Payload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Payload({})", CompactJson(self.value.as_ref()))
    }
}

/// A `tools/call` result.
#[derive(Debug)]
pub enum CallResult {
    /// The tool succeeded.
    Success {
        /// Its output.
        payload: Payload,
        /// Whether to add `structuredContent` (decided by the revision).
        structured: bool,
    },
    /// The tool failed with this message (`isError:true`).
    Error(String),
    /// A result that is not a tool's, written as is with its modern
    /// `resultType`: a task-augmented call's `CreateTaskResult`, or the
    /// 2026 Tasks extension's task handle (`"task"`). An object
    /// without `resultType` or `_meta.serverInfo` of its own.
    Raw(serde_json::Value, ResultType),
}

impl CallResult {
    /// The transport handed the result to its client (written to stdout,
    /// or to the HTTP response): from now on dropping it loses nothing.
    pub fn sent(&self) {
        if let CallResult::Success { payload, .. } = self
            && let Some(lost) = &payload.lost
        {
            lost.disarm();
        }
    }

    /// About how many bytes the result takes on the wire (escapes not
    /// counted): the payload once, twice with `structuredContent`.
    pub fn size_hint(&self) -> usize {
        match self {
            CallResult::Success {
                payload,
                structured,
            } => payload
                .size_hint
                .saturating_mul(if *structured { 2 } else { 1 }),
            CallResult::Error(message) => message.len() + 64,
            CallResult::Raw(..) => 512,
        }
    }
}

/// Displays a serialisable value as its compact JSON, written in pieces.
struct CompactJson<'a>(&'a (dyn erased_serde::Serialize + Send + Sync));

impl fmt::Display for CompactJson<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        /// `io::Write` over a formatter. serde_json only ever writes whole
        /// UTF-8 sequences (it splits strings at ASCII escapes only).
        struct Adapter<'a, 'b>(&'a mut fmt::Formatter<'b>);
        impl std::io::Write for Adapter<'_, '_> {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                let s = std::str::from_utf8(buf).map_err(std::io::Error::other)?;
                self.0.write_str(s).map_err(std::io::Error::other)?;
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mut ser = serde_json::Serializer::new(Adapter(f));
        erased_serde::serialize(self.0, &mut ser).map_err(|_| fmt::Error)
    }
}

/// `{"type":"text","text":<compact JSON of the payload>}`.
struct JsonText<'a>(&'a Payload);

impl Serialize for JsonText<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct Text<'a>(&'a Payload);
        impl Serialize for Text<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(&CompactJson(self.0.value.as_ref()))
            }
        }
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("type", "text")?;
        m.serialize_entry("text", &Text(self.0))?;
        m.end()
    }
}

/// The payload as an object.
struct Structured<'a>(&'a Payload);

impl Serialize for Structured<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0.array_key {
            Some(key) => {
                let mut m = s.serialize_map(Some(1))?;
                m.serialize_entry(key, self.0.value.as_ref())?;
                m.end()
            }
            None => self.0.value.as_ref().serialize(s),
        }
    }
}

/// `{"type":"resource","resource":<the resource>}`.
struct ResourceBlock<'a>(&'a (dyn erased_serde::Serialize + Send + Sync));

impl Serialize for ResourceBlock<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("type", "resource")?;
        m.serialize_entry("resource", self.0)?;
        m.end()
    }
}

#[derive(Serialize)]
struct TextBlock<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a str,
}

impl CallResult {
    /// Its `resultType` in a modern revision.
    pub fn result_type(&self) -> ResultType {
        match self {
            CallResult::Raw(_, t) => *t,
            _ => ResultType::Complete,
        }
    }
}

impl StampedFields for CallResult {
    fn write_fields<M: SerializeMap>(&self, m: &mut M) -> Result<(), M::Error> {
        if let CallResult::Raw(serde_json::Value::Object(fields), _) = self {
            for (k, v) in fields {
                m.serialize_entry(k, v)?;
            }
            return Ok(());
        }
        match self {
            CallResult::Success {
                payload,
                structured,
            } => {
                match &payload.resource {
                    Some(resource) => m.serialize_entry(
                        "content",
                        &(JsonText(payload), ResourceBlock(resource.as_ref())),
                    )?,
                    None => m.serialize_entry("content", &[JsonText(payload)])?,
                }
                if *structured {
                    m.serialize_entry("structuredContent", &Structured(payload))?;
                }
                m.serialize_entry("isError", &false)?;
            }
            CallResult::Error(message) => {
                let block = TextBlock {
                    kind: "text",
                    text: message,
                };
                m.serialize_entry("content", &[block])?;
                m.serialize_entry("isError", &true)?;
            }
            // Written above (a raw result is an object).
            CallResult::Raw(..) => {}
        }
        Ok(())
    }
}

impl Serialize for CallResult {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        Stamped {
            result: self,
            result_type: None,
        }
        .serialize(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Serialize)]
    struct Job {
        job_id: &'static str,
        data: &'static str,
    }

    #[test]
    fn a_success_carries_the_compact_json_as_text_and_optionally_as_structured_content() {
        let job = || Job {
            job_id: "job-1",
            data: "a\"b\n",
        };
        let plain = CallResult::Success {
            payload: Payload::object(job()),
            structured: false,
        };
        assert_eq!(
            serde_json::to_value(&plain).unwrap(),
            json!({"content":[{"type":"text","text":"{\"job_id\":\"job-1\",\"data\":\"a\\\"b\\n\"}"}],"isError":false})
        );
        let structured = CallResult::Success {
            payload: Payload::object(job()),
            structured: true,
        };
        let v = serde_json::to_value(&structured).unwrap();
        assert_eq!(
            v["structuredContent"],
            json!({"job_id":"job-1","data":"a\"b\n"})
        );
    }

    #[test]
    fn an_array_payload_is_wrapped_under_its_key_only_in_structured_content() {
        let r = CallResult::Success {
            payload: Payload::array("results", vec![1, 2]),
            structured: true,
        };
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["content"][0]["text"], json!("[1,2]"));
        assert_eq!(v["structuredContent"], json!({"results":[1,2]}));
    }

    #[test]
    fn a_resource_follows_the_json_text() {
        let r = CallResult::Success {
            payload: Payload::object(json!({"bytes": 2}))
                .with_resource(json!({"uri": "file:///x", "text": "hi"})),
            structured: true,
        };
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(
            v["content"],
            json!([{"type": "text", "text": "{\"bytes\":2}"},
                   {"type": "resource", "resource": {"uri": "file:///x", "text": "hi"}}])
        );
        assert_eq!(v["structuredContent"], json!({"bytes": 2}));
    }

    #[test]
    fn an_error_is_plain_text_with_is_error_true() {
        let r = CallResult::Error("unknown job_id \"job-9\"".into());
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"content":[{"type":"text","text":"unknown job_id \"job-9\""}],"isError":true}"#
        );
    }

    #[test]
    fn multi_byte_text_survives_the_streaming_escaper() {
        let r = CallResult::Success {
            payload: Payload::object(json!({"data": "héllo→\u{0}"})),
            structured: false,
        };
        let v = serde_json::to_value(&r).unwrap();
        let text = v["content"][0]["text"].as_str().unwrap();
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(text).unwrap(),
            json!({"data": "héllo→\u{0}"})
        );
    }
}
