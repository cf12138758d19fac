//! `upload`: write a file atomically (docs/files.md); a Part II tool (from
//! revision 2025-03-26).
//!
//! Input: `path` (absolute), exactly one source — `content_base64`, `text`
//! or `file` (below) — `sha256` (hex, verified before the rename), `mode`
//! (`"0644"`: octal; default: the replaced file's, else 0644), `overwrite`
//! (default true), `mkdirs` (default false). At most
//! `MCP_EXEC_MAX_TRANSFER_BYTES` decoded bytes; larger files go over
//! `PUT /files/<path>`.
//!
//! `file` (feature `https-fetch`): a ChatGPT file reference
//! `{download_url, file_id, mime_type?, file_name?}`, or a bare `https://`
//! URL (what ChatGPT's mobile apps are reported to send); the server
//! fetches it ([`crate::files::fetch`]) into the same commit. The tool
//! declares `_meta["openai/fileParams"]: ["file"]` so that ChatGPT
//! replaces the argument with the reference (from 2025-06-18, the first
//! revision whose `Tool` has `_meta`; `file` itself is an input wherever
//! `upload` is).
//!
//! Output: `{path, bytes, sha256, unchanged}` (and `file_id` for a file
//! reference). The commit is [`crate::files::commit`]'s; an existing file
//! with the same bytes is left alone (`unchanged:true`) before anything is
//! written, so a retry costs a read, not a write (a fetched file is
//! compared after the fetch, at the commit).

use std::path::PathBuf;
use std::sync::Arc;

use base64::Engine;
use serde_json::{Value, json};

use super::{Args, Call, Effect, Host, Running, Tool, ToolError, ToolOutcome, args, cancellable};
use crate::files::commit::{self, Committed, Options};
use crate::files::mode::{self, Form, ModeError};
use crate::files::place::Place;
use crate::files::transfer;
use crate::files::{self as files, FileError};
use crate::policy::cwd::CwdPolicy;
use crate::protocol::result::Payload;
use crate::protocol::version::Revision;

/// Whether this build fetches `file` references (feature `https-fetch`).
pub const FETCHES: bool = cfg!(feature = "https-fetch");

/// The tool.
pub const TOOL: Tool = Tool {
    name: "upload",
    title: "Upload a file",
    description: if FETCHES {
        "Write a file atomically from exactly one source: content_base64 (bytes), text (UTF-8), or file (a file reference {download_url, file_id} or an https:// URL, which the server downloads itself). Optionally verified against sha256 (hex). The file appears whole or not at all; identical content leaves it unchanged (unchanged:true), so retries are safe. Paths are absolute. For files over the transfer limit, use PUT /files/<path> over HTTP."
    } else {
        "Write a file atomically: content_base64 (bytes) or text (UTF-8), optionally verified against sha256 (hex). The file appears whole or not at all; identical content leaves it unchanged (unchanged:true), so retries are safe. Paths are absolute. For files over the transfer limit, use PUT /files/<path> over HTTP."
    },
    effect: Effect::Destructive,
    input_schema,
    output_schema: |_| {
        let mut schema = json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "bytes": {"type": "integer"},
                "sha256": {"type": "string"},
                "unchanged": {"type": "boolean"}
            },
            "required": ["path", "bytes", "sha256", "unchanged"]
        });
        if FETCHES {
            schema["properties"]["file_id"] = json!({"type": "string"});
        }
        schema
    },
    file_params: if FETCHES { &["file"] } else { &[] },
    starts_jobs: false,
    run,
};

fn input_schema(_: Revision) -> Value {
    let mut schema = json!({
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Absolute path of the file."},
            "content_base64": {"type": "string", "description": "The bytes, base64 (give this or text)."},
            "text": {"type": "string", "description": "The content as UTF-8 text (give this or content_base64)."},
            "sha256": {"type": "string", "description": "Expected SHA-256 of the bytes, hex; checked before the file is replaced."},
            "mode": {"type": "string", "description": "Permission bits, octal (\"0644\"). Default: the replaced file's, else 0644."},
            "overwrite": {"type": "boolean", "description": "Replace an existing different file (default true)."},
            "mkdirs": {"type": "boolean", "description": "Create missing parent directories (default false)."}
        },
        "required": ["path"]
    });
    if FETCHES {
        schema["properties"]["content_base64"]["description"] =
            json!("The bytes, base64 (give one of content_base64, text, file).");
        schema["properties"]["text"]["description"] =
            json!("The content as UTF-8 text (give one of content_base64, text, file).");
        schema["properties"]["file"] = json!({
            "type": "object",
            "description": "A file to download, fetched by the server over https (give one of content_base64, text, file): a ChatGPT file reference, or a bare https:// URL string. At most MCP_EXEC_MAX_TRANSFER_BYTES.",
            "properties": {
                "download_url": {"type": "string", "description": "An https:// URL of the bytes."},
                "file_id": {"type": "string", "description": "The file's id, echoed in the answer."},
                "mime_type": {"type": "string"},
                "file_name": {"type": "string"}
            },
            "required": ["download_url", "file_id"]
        });
    }
    schema
}

/// A validated `upload` call: what to write where.
struct Upload {
    path: PathBuf,
    source: Source,
    sha256: Option<[u8; 32]>,
    opts: Options,
    mkdirs: bool,
}

/// Where the bytes come from.
#[cfg_attr(
    not(feature = "https-fetch"),
    allow(dead_code, reason = "no `file` without the feature")
)]
enum Source {
    /// `content_base64` or `text`, decoded.
    Bytes(Vec<u8>),
    /// `file`: fetched from `url`.
    Url {
        url: String,
        file_id: Option<String>,
    },
}

/// The answer to a `file` upload: the commit's, and the reference's id.
#[cfg(feature = "https-fetch")]
#[derive(serde::Serialize)]
struct Fetched {
    #[serde(flatten)]
    committed: Committed,
    #[serde(skip_serializing_if = "Option::is_none")]
    file_id: Option<String>,
}

/// The absolute path argument of a file tool.
pub fn path_arg(a: &Args) -> Result<PathBuf, ToolError> {
    let text = args::opt_str(a, "path")?.ok_or(ToolError::PathRequired)?;
    files::path::from_text(text).map_err(|e| ToolError::invalid(format!("\"path\": {e}")))
}

fn parse(a: &Args, max: usize) -> Result<Upload, ToolError> {
    let path = path_arg(a)?;
    let too_big = |n: usize| {
        ToolError::File(format!(
            "the content of {path:?} is {n} bytes, more than MCP_EXEC_MAX_TRANSFER_BYTES ({max}) in one call: use PUT /files{} over HTTP",
            path.display()
        ))
    };
    let file = a.get("file").filter(|v| !v.is_null());
    let b64 = args::opt_str(a, "content_base64")?;
    let text = args::opt_str(a, "text")?;
    let given =
        usize::from(b64.is_some()) + usize::from(text.is_some()) + usize::from(file.is_some());
    let sources = if FETCHES {
        "\"content_base64\", \"text\" or \"file\""
    } else {
        "\"content_base64\" or \"text\""
    };
    if given > 1 {
        return Err(ToolError::invalid(format!(
            "give exactly one of {sources}, not several"
        )));
    }
    let source = match (b64, text, file) {
        (_, _, Some(file)) => file_source(file)?,
        (None, Some(text), _) if text.len() > max => return Err(too_big(text.len())),
        (None, Some(text), _) => Source::Bytes(text.as_bytes().to_vec()),
        (Some(b64), _, _) => {
            if b64.len() / 4 * 3 > max.saturating_add(3) {
                return Err(too_big(b64.len() / 4 * 3));
            }
            let bytes = decode_base64(b64)?;
            if bytes.len() > max {
                return Err(too_big(bytes.len()));
            }
            Source::Bytes(bytes)
        }
        (None, None, None) => return Err(ToolError::invalid(format!("{sources} is required"))),
    };
    let sha256 = match args::opt_str(a, "sha256")? {
        None => None,
        Some(hex) => Some(
            files::parse_sha256(hex)
                .ok_or_else(|| ToolError::invalid("\"sha256\" must be 64 hex digits"))?,
        ),
    };
    let mode = match args::opt_str(a, "mode")? {
        None => None,
        Some(m) => Some(mode::parse_mode(m, Form::Octal).map_err(|e| match e {
            ModeError::Malformed => ToolError::invalid(format!(
                "\"mode\" must be octal permission bits like \"0644\", not {m:?}"
            )),
            ModeError::SetId(_) => ToolError::invalid(e.to_string()),
        })?),
    };
    let overwrite = match a.get("overwrite") {
        None | Some(serde_json::Value::Null) => true,
        _ => args::opt_bool(a, "overwrite")?,
    };
    Ok(Upload {
        path,
        source,
        sha256,
        opts: Options { mode, overwrite },
        mkdirs: args::opt_bool(a, "mkdirs")?,
    })
}

/// `file`: a reference object (`download_url` and `file_id` required) or a
/// bare URL string; a string that is no `https://` URL — ChatGPT's mobile
/// apps send `"chat_upload://image_0"` with no way to fetch it — is
/// refused saying so.
fn file_source(file: &Value) -> Result<Source, ToolError> {
    if !FETCHES {
        return Err(ToolError::invalid(
            "\"file\" is not supported by this build of mcp-exec (built without the https-fetch feature): give \"content_base64\" or \"text\"",
        ));
    }
    let (url, file_id) = match file {
        Value::String(url) => (url.clone(), None),
        Value::Object(o) => {
            let url = match o.get("download_url") {
                Some(Value::String(u)) => u.clone(),
                None | Some(Value::Null) => {
                    return Err(ToolError::invalid(
                        "\"file\" has no \"download_url\": expected {download_url, file_id, mime_type?, file_name?}",
                    ));
                }
                Some(_) => {
                    return Err(ToolError::invalid("\"file.download_url\" must be a string"));
                }
            };
            let file_id = match o.get("file_id") {
                Some(Value::String(id)) => id.clone(),
                None | Some(Value::Null) => {
                    return Err(ToolError::invalid(
                        "\"file\" has no \"file_id\": expected {download_url, file_id, mime_type?, file_name?}",
                    ));
                }
                Some(_) => return Err(ToolError::invalid("\"file.file_id\" must be a string")),
            };
            (url, Some(file_id))
        }
        _ => {
            return Err(ToolError::invalid(
                "\"file\" must be a file reference {download_url, file_id} or an https:// URL",
            ));
        }
    };
    let lower = url.trim().to_ascii_lowercase();
    if !lower.starts_with("https://") && !lower.starts_with("http://") {
        let shown = crate::files::error::url_for_errors(&url);
        return Err(ToolError::invalid(format!(
            "\"file\" is {shown:?}, which is not a URL the server can fetch: ChatGPT's mobile apps are known to send such a placeholder instead of the file's {{download_url, file_id}}; attach the file from ChatGPT on the web, or send its bytes as \"content_base64\""
        )));
    }
    Ok(Source::Url { url, file_id })
}

/// Standard base64, padding optional, whitespace (line breaks) ignored.
fn decode_base64(text: &str) -> Result<Vec<u8>, ToolError> {
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    const LENIENT: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
    );
    let result = if text.bytes().any(|b| b.is_ascii_whitespace()) {
        let compact: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
        LENIENT.decode(compact)
    } else {
        LENIENT.decode(text)
    };
    result.map_err(|e| ToolError::invalid(format!("\"content_base64\" is not base64: {e}")))
}

fn run<'a>(call: &'a Call, a: &'a Args) -> Running<'a> {
    Box::pin(upload(call, a))
}

async fn upload(call: &Call, a: &Args) -> ToolOutcome {
    let req = parse(a, call.host.config().max_transfer_bytes)?;
    let host = Arc::clone(&call.host);
    if let Source::Url { .. } = req.source {
        // A fetch may take a while: progress ticks keep a client's timeout reset.
        call.progress.set("upload still fetching its file");
        return cancellable(&call.cancel, fetched(host, req)).await?;
    }
    let task = transfer::blocking(move || write(host.cwd(), req));
    let done = cancellable(&call.cancel, task)
        .await?
        .map_err(|e| ToolError::File(e.to_string()))?;
    Ok(Payload::object(done))
}

/// A `file` upload: the path resolved under the policy first (nothing is
/// fetched for a path that would be refused), then the fetch streamed into
/// its commit. Dropped when the call is cancelled, which ends the fetch.
#[cfg(feature = "https-fetch")]
async fn fetched(host: Arc<dyn Host>, req: Upload) -> ToolOutcome {
    let Source::Url { url, file_id } = req.source else {
        return Err(ToolError::invalid("not a file reference").into());
    };
    let (path, mkdirs) = (req.path, req.mkdirs);
    let policy = Arc::clone(&host);
    let place = transfer::blocking(move || -> Result<Place, FileError> {
        let place = Place::resolve(policy.cwd(), &path, mkdirs)?;
        place.not_a_root("written over")?;
        if let Some(st) = files::read::lstat(&place)?
            && !files::read::is_regular(&st)
        {
            return Err(FileError::not_regular(&place.path));
        }
        Ok(place)
    })
    .await
    .map_err(|e| ToolError::File(e.to_string()))?;
    let limits = files::fetch::Limits {
        max_bytes: host.config().max_transfer_bytes as u64,
        timeout: host.config().fetch_timeout,
        ca_file: host.config().ca_file.as_ref().map(PathBuf::from),
    };
    let committed = files::fetch::fetch_into(&url, &limits, place, req.sha256, req.opts)
        .await
        .map_err(|e| ToolError::File(e.to_string()))?;
    Ok(Payload::object(Fetched { committed, file_id }))
}

#[cfg(not(feature = "https-fetch"))]
async fn fetched(_: Arc<dyn Host>, _: Upload) -> ToolOutcome {
    Err(ToolError::invalid("\"file\" is not supported by this build of mcp-exec").into())
}

/// Resolves and commits ([`commit::commit_bytes`]: hashed once, identical
/// content skipped before anything is written).
fn write(policy: &CwdPolicy, req: Upload) -> Result<Committed, FileError> {
    let Source::Bytes(content) = req.source else {
        return Err(FileError::new(files::Kind::Invalid, "not bytes"));
    };
    let place = Place::resolve(policy, &req.path, req.mkdirs)?;
    commit::commit_bytes(place, &content, req.sha256, req.opts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "https-fetch")]
    #[test]
    fn a_file_is_a_reference_or_a_url_and_a_placeholder_is_refused_saying_why() {
        let r = file_source(&json!({"download_url": "https://h/x", "file_id": "f1"})).unwrap();
        assert!(
            matches!(r, Source::Url { ref url, file_id: Some(ref id) } if url == "https://h/x" && id == "f1")
        );
        let r = file_source(&json!("https://h/y")).unwrap();
        assert!(matches!(r, Source::Url { file_id: None, .. }));
        let e = file_source(&json!("chat_upload://image_0"))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("not a URL the server can fetch"), "{e}");
        let e = file_source(&json!({"download_url": "https://h/x"}))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("no \"file_id\""), "{e}");
        assert!(file_source(&json!(7)).is_err());
    }

    #[cfg(not(feature = "https-fetch"))]
    #[test]
    fn without_the_https_fetch_feature_a_file_is_refused_saying_so_and_not_listed() {
        let e = file_source(&json!("https://h/x"))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("built without the https-fetch feature"), "{e}");
        let schema = input_schema(Revision::V2025_11_25);
        assert!(schema["properties"].get("file").is_none(), "{schema}");
        assert!(TOOL.file_params.is_empty());
    }

    #[test]
    fn exactly_one_source_is_given() {
        let args = |v: Value| v.as_object().unwrap().clone();
        let both = args(json!({"path": "/x", "text": "a", "content_base64": "YQ=="}));
        assert!(parse(&both, 100).is_err());
        let none = args(json!({"path": "/x"}));
        let e = parse(&none, 100).err().unwrap().to_string();
        assert!(e.contains("is required"), "{e}");
    }

    #[test]
    fn base64_may_lack_padding_and_carry_line_breaks() {
        assert_eq!(decode_base64("aGk=").unwrap(), b"hi");
        assert_eq!(decode_base64("aGk").unwrap(), b"hi");
        assert_eq!(decode_base64("aG\nk=\n").unwrap(), b"hi");
        assert!(decode_base64("!!").is_err());
    }
}
