//! envd's messages as ProtoJSON, by hand: serde structs matching the
//! vendored `proto/e2b/envd/process/process.proto` (origin and license in
//! `proto/e2b/ORIGIN`), no protobuf crate. The mapping's rules:
//! lowerCamelCase names (the proto's snake_case accepted too), `bytes` as
//! base64 ([`b64`]), enums by name (their number accepted too), a `oneof`
//! as the key of the member that is set, unknown fields ignored, default
//! values left out of what we send (as Go's `protojson` does).
//!
//! The filesystem's messages live beside their handlers
//! (`filesystem.rs`); the helpers here serve both.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};

/// `bytes` fields: standard base64 with padding out; standard or URL-safe,
/// padded or not, in (ProtoJSON accepts either).
pub mod b64 {
    use base64::Engine;
    use base64::engine::DecodePaddingMode;
    use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, STANDARD};
    use serde::{Deserialize, Deserializer, Serializer};

    const LENIENT: GeneralPurposeConfig =
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent);
    const STANDARD_ANY: GeneralPurpose = GeneralPurpose::new(&base64::alphabet::STANDARD, LENIENT);
    const URL_ANY: GeneralPurpose = GeneralPurpose::new(&base64::alphabet::URL_SAFE, LENIENT);

    /// Encodes.
    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(bytes))
    }

    /// Decodes.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let s = Option::<String>::deserialize(d)?.unwrap_or_default();
        STANDARD_ANY
            .decode(&s)
            .or_else(|_| URL_ANY.decode(&s))
            .map_err(|e| serde::de::Error::custom(format!("not base64: {e}")))
    }
}

/// A field that may be `null`: its default then (ProtoJSON's rule).
pub fn or_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// A 32-bit unsigned integer as a number or a string (ProtoJSON accepts both).
pub fn u32_any<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum N {
        Num(u32),
        Text(String),
    }
    match Option::<N>::deserialize(d)? {
        None => Ok(0),
        Some(N::Num(n)) => Ok(n),
        Some(N::Text(s)) => s.parse().map_err(serde::de::Error::custom),
    }
}

fn is_zero_i32(n: &i32) -> bool {
    *n == 0
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// `process.ProcessConfig`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default, rename_all = "camelCase")]
pub struct ProcessConfig {
    /// The program.
    #[serde(deserialize_with = "or_default")]
    pub cmd: String,
    /// Its arguments.
    #[serde(deserialize_with = "or_default", skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Variables layered over the environment.
    #[serde(
        deserialize_with = "or_default",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub envs: BTreeMap<String, String>,
    /// The working directory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
}

/// `process.PTY.Size`.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(default)]
pub struct Size {
    /// Columns.
    #[serde(deserialize_with = "u32_any")]
    pub cols: u32,
    /// Rows.
    #[serde(deserialize_with = "u32_any")]
    pub rows: u32,
}

/// `process.PTY`.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(default)]
pub struct Pty {
    /// Its size.
    pub size: Option<Size>,
}

/// `process.StartRequest`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct StartRequest {
    /// What to run.
    pub process: Option<ProcessConfig>,
    /// Run it on a terminal of this size.
    pub pty: Option<Pty>,
    /// A name to find it by.
    pub tag: Option<String>,
    /// Keep stdin open (absent: open, as envd).
    pub stdin: Option<bool>,
}

/// `process.ProcessSelector`: a oneof of `pid` and `tag`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct ProcessSelector {
    /// By pid.
    #[serde(deserialize_with = "opt_u32")]
    pub pid: Option<u32>,
    /// By tag.
    pub tag: Option<String>,
}

fn opt_u32<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    u32_any(d).map(Some)
}

/// A request naming one process: `ConnectRequest`, `CloseStdinRequest`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Selected {
    /// Which one.
    pub process: Option<ProcessSelector>,
}

/// `process.ProcessInput`: a oneof of `stdin` and `pty`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct ProcessInput {
    /// Bytes for a pipe's stdin.
    #[serde(deserialize_with = "opt_b64")]
    pub stdin: Option<Vec<u8>>,
    /// Bytes for a terminal.
    #[serde(deserialize_with = "opt_b64")]
    pub pty: Option<Vec<u8>>,
}

impl ProcessInput {
    /// The bytes, whichever member is set.
    pub fn bytes(self) -> Vec<u8> {
        self.stdin.or(self.pty).unwrap_or_default()
    }
}

fn opt_b64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<u8>>, D::Error> {
    b64::deserialize(d).map(Some)
}

/// `process.SendInputRequest`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct SendInputRequest {
    /// Which process.
    pub process: Option<ProcessSelector>,
    /// What to write.
    pub input: Option<ProcessInput>,
}

/// `process.Signal`, by name or number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SignalName {
    /// `SIGNAL_UNSPECIFIED` (0).
    #[default]
    Unspecified,
    /// `SIGNAL_SIGTERM` (15).
    Term,
    /// `SIGNAL_SIGKILL` (9).
    Kill,
    /// Any other value.
    Other,
}

impl<'de> Deserialize<'de> for SignalName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<SignalName, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum V {
            Num(i64),
            Name(String),
        }
        Ok(match Option::<V>::deserialize(d)? {
            None => SignalName::Unspecified,
            Some(V::Num(15)) => SignalName::Term,
            Some(V::Num(9)) => SignalName::Kill,
            Some(V::Num(0)) => SignalName::Unspecified,
            Some(V::Name(n)) => match n.as_str() {
                "SIGNAL_SIGTERM" => SignalName::Term,
                "SIGNAL_SIGKILL" => SignalName::Kill,
                "SIGNAL_UNSPECIFIED" => SignalName::Unspecified,
                _ => SignalName::Other,
            },
            Some(V::Num(_)) => SignalName::Other,
        })
    }
}

/// `process.SendSignalRequest`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct SendSignalRequest {
    /// Which process.
    pub process: Option<ProcessSelector>,
    /// Which signal.
    pub signal: SignalName,
}

/// `process.UpdateRequest`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct UpdateRequest {
    /// Which process.
    pub process: Option<ProcessSelector>,
    /// Its terminal's new size.
    pub pty: Option<Pty>,
}

/// `process.StreamInputRequest`: a oneof of `start`, `data`, `keepalive`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct StreamInputRequest {
    /// First: which process.
    pub start: Option<Selected>,
    /// Then: input.
    pub data: Option<StreamInputData>,
    /// Or nothing.
    pub keepalive: Option<serde_json::Value>,
}

/// `process.StreamInputRequest.DataEvent`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct StreamInputData {
    /// What to write.
    pub input: Option<ProcessInput>,
}

/// The SDK wraps `StreamInputRequest`'s oneof in `event` (the proto's
/// field is the oneof; the JSON key is its member): both spellings are read.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct StreamInputEnvelope {
    /// The oneof, wrapped.
    pub event: Option<StreamInputRequest>,
    /// Or flat.
    #[serde(flatten)]
    pub flat: StreamInputRequest,
}

impl StreamInputEnvelope {
    /// The oneof, wherever it was written.
    pub fn into_event(self) -> StreamInputRequest {
        self.event.unwrap_or(self.flat)
    }
}

/// `process.ProcessInfo`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcessInfo {
    /// How it was started.
    pub config: ProcessConfig,
    /// Its pid.
    pub pid: u32,
    /// Its tag.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
}

/// `process.ListResponse`.
#[derive(Debug, Clone, Serialize)]
pub struct ListResponse {
    /// The processes.
    pub processes: Vec<ProcessInfo>,
}

/// `process.ProcessEvent.EndEvent`.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct EndEvent {
    /// The exit code (128 + N for a death by signal N).
    #[serde(skip_serializing_if = "is_zero_i32")]
    pub exit_code: i32,
    /// Whether it exited (rather than died of a signal).
    #[serde(skip_serializing_if = "is_false")]
    pub exited: bool,
    /// Go's `ProcessState.String()`: `exit status 1`, `signal: killed`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub status: String,
    /// What went wrong, when something did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `process.ProcessEvent.DataEvent`: a oneof of `stdout`, `stderr`, `pty`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum DataEvent {
    /// Pipe stdout.
    Stdout(#[serde(with = "b64")] Vec<u8>),
    /// Pipe stderr.
    Stderr(#[serde(with = "b64")] Vec<u8>),
    /// Terminal output.
    Pty(#[serde(with = "b64")] Vec<u8>),
}

/// `process.ProcessEvent.StartEvent`.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct StartEvent {
    /// The process's pid.
    pub pid: u32,
}

/// `process.ProcessEvent`: a oneof.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ProcessEvent {
    /// It runs.
    Start(StartEvent),
    /// Output.
    Data(DataEvent),
    /// It ended.
    End(EndEvent),
    /// Nothing happened for a while.
    Keepalive {},
}

/// `StartResponse` and `ConnectResponse`: `{"event": …}`.
#[derive(Debug, Clone, Serialize)]
pub struct EventResponse {
    /// The event.
    pub event: ProcessEvent,
}

/// An empty message (`UpdateResponse`, `SendInputResponse`, …).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Empty {}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn events_are_written_as_protojson_with_defaults_left_out() {
        let start = EventResponse {
            event: ProcessEvent::Start(StartEvent { pid: 42 }),
        };
        assert_eq!(
            serde_json::to_value(&start).unwrap(),
            json!({"event": {"start": {"pid": 42}}})
        );
        let data = EventResponse {
            event: ProcessEvent::Data(DataEvent::Stdout(b"hi\n".to_vec())),
        };
        assert_eq!(
            serde_json::to_value(&data).unwrap(),
            json!({"event": {"data": {"stdout": "aGkK"}}})
        );
        let end = EventResponse {
            event: ProcessEvent::End(EndEvent {
                exit_code: 0,
                exited: true,
                status: "exit status 0".into(),
                error: None,
            }),
        };
        assert_eq!(
            serde_json::to_value(&end).unwrap(),
            json!({"event": {"end": {"exited": true, "status": "exit status 0"}}})
        );
        let ka = EventResponse {
            event: ProcessEvent::Keepalive {},
        };
        assert_eq!(
            serde_json::to_value(&ka).unwrap(),
            json!({"event": {"keepalive": {}}})
        );
    }

    #[test]
    fn requests_are_read_as_the_sdk_sends_them() {
        let s: StartRequest = serde_json::from_value(json!({
            "process": {"cmd": "/bin/bash", "args": ["-l", "-c", "echo hi"], "envs": {"A": "b"}, "cwd": "/tmp"},
            "stdin": false, "pty": {"size": {"cols": 80, "rows": 24}}, "tag": "t", "unknown": 1
        }))
        .unwrap();
        let p = s.process.unwrap();
        assert_eq!(
            (p.cmd.as_str(), p.args.len(), p.cwd.as_deref()),
            ("/bin/bash", 3, Some("/tmp"))
        );
        assert_eq!(s.stdin, Some(false));
        assert_eq!(s.pty.unwrap().size.unwrap().cols, 80);
        let i: SendInputRequest =
            serde_json::from_value(json!({"process": {"pid": "7"}, "input": {"pty": "aGk="}}))
                .unwrap();
        assert_eq!(i.process.unwrap().pid, Some(7));
        assert_eq!(i.input.unwrap().bytes(), b"hi");
        let k: SendSignalRequest =
            serde_json::from_value(json!({"process": {"tag": "x"}, "signal": "SIGNAL_SIGKILL"}))
                .unwrap();
        assert_eq!(k.signal, SignalName::Kill);
        let n: SendSignalRequest = serde_json::from_value(json!({"signal": 15})).unwrap();
        assert_eq!(n.signal, SignalName::Term);
        let e: StreamInputEnvelope =
            serde_json::from_value(json!({"event": {"data": {"input": {"stdin": "YQ"}}}})).unwrap();
        assert_eq!(e.into_event().data.unwrap().input.unwrap().bytes(), b"a");
    }
}
