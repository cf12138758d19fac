//! `download`: read a file (docs/files.md); a Part II tool (from revision
//! 2025-03-26).
//!
//! Input: `path` (absolute), `offset` (default 0), `length` (default: to
//! the end). Output: the JSON `{path, offset, bytes, total_bytes, sha256}`
//! (`sha256` of the bytes returned — of the whole file when all of it was)
//! as the text block and `structuredContent`, and the bytes as an embedded
//! resource: `{"uri":"file:///…","mimeType":…,"text":…}` for valid UTF-8,
//! `"blob":<base64>` otherwise. More than `MCP_EXEC_MAX_TRANSFER_BYTES`
//! in one call is an error that says how to page or to use `GET /files/…`.
//! Only regular files are read (never a FIFO, device or symlink).

use std::path::Path;
use std::sync::Arc;

use base64::Engine;
use serde::Serialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::upload::path_arg;
use super::{Args, Call, Effect, Running, Tool, ToolError, ToolOutcome, cancellable};
use crate::files::place::Place;
use crate::files::transfer;
use crate::files::{self as files, FileError, Kind, read};
use crate::protocol::result::Payload;

/// The tool.
pub const TOOL: Tool = Tool {
    name: "download",
    title: "Download a file",
    description: "Read a file: returns it as an embedded resource (text for UTF-8, else a base64 blob) with {path, offset, bytes, total_bytes, sha256}. Page large files with offset and length; for files over the transfer limit, GET /files/<path> over HTTP streams them.",
    effect: Effect::ReadOnly,
    input_schema: |_| {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Absolute path of the file."},
                "offset": {"type": "integer", "minimum": 0, "description": "First byte to return (default 0)."},
                "length": {"type": "integer", "minimum": 0, "description": "Bytes to return (default: to the end)."}
            },
            "required": ["path"]
        })
    },
    output_schema: |_| {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "offset": {"type": "integer"},
                "bytes": {"type": "integer"},
                "total_bytes": {"type": "integer"},
                "sha256": {"type": "string"}
            },
            "required": ["path", "offset", "bytes", "total_bytes", "sha256"]
        })
    },
    file_params: &[],
    starts_jobs: false,
    run,
};

/// The metadata: text block and `structuredContent`.
#[derive(Serialize)]
struct Meta {
    path: String,
    offset: u64,
    bytes: u64,
    total_bytes: u64,
    sha256: String,
}

/// The embedded resource (MCP `TextResourceContents` or
/// `BlobResourceContents`).
#[derive(Serialize)]
struct Resource {
    uri: String,
    #[serde(rename = "mimeType")]
    mime_type: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    blob: Option<String>,
}

fn opt_u64(a: &Args, key: &str) -> Result<Option<u64>, ToolError> {
    match a.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_u64()
            .map(Some)
            .ok_or_else(|| ToolError::invalid(format!("\"{key}\" must be a non-negative integer"))),
        Some(_) => Err(ToolError::invalid(format!(
            "\"{key}\" must be a non-negative integer"
        ))),
    }
}

fn run<'a>(call: &'a Call, a: &'a Args) -> Running<'a> {
    Box::pin(download(call, a))
}

async fn download(call: &Call, a: &Args) -> ToolOutcome {
    let path = path_arg(a)?;
    let offset = opt_u64(a, "offset")?.unwrap_or(0);
    let length = opt_u64(a, "length")?;
    let max = call.host.config().max_transfer_bytes;
    let host = Arc::clone(&call.host);
    let task = transfer::blocking(move || {
        let place = Place::resolve(host.cwd(), &path, false)?;
        let opened = read::open(&place)?;
        let total = opened.size;
        if offset > total {
            return Err(FileError::new(
                Kind::Invalid,
                format!("offset {offset} is past the end of {path:?} ({total} bytes)"),
            ));
        }
        let want = length.unwrap_or(total - offset).min(total - offset);
        if want > max as u64 {
            return Err(FileError::new(
                Kind::TooLarge,
                too_large(&path, offset, want, total, max),
            ));
        }
        let data = read::read_at(&opened, offset, want as usize, &place)?;
        Ok((path, total, data))
    });
    let (path, total, data) = cancellable(&call.cancel, task)
        .await?
        .map_err(|e| ToolError::File(e.to_string()))?;
    crate::metrics::transfer_bytes(true, data.len() as u64);
    let meta = Meta {
        path: path.display().to_string(),
        offset,
        bytes: data.len() as u64,
        total_bytes: total,
        sha256: files::hex(&Sha256::digest(&data)),
    };
    let size = data.len();
    let resource = match String::from_utf8(data) {
        Ok(text) => Resource {
            uri: file_uri(&path),
            mime_type: mime_of(&path, true),
            text: Some(text),
            blob: None,
        },
        Err(e) => Resource {
            uri: file_uri(&path),
            mime_type: mime_of(&path, false),
            text: None,
            blob: Some(base64::engine::general_purpose::STANDARD.encode(e.as_bytes())),
        },
    };
    Ok(Payload::object(meta)
        .with_resource(resource)
        .sized(size.saturating_mul(4) / 3))
}

/// The error past the limit: how to page, or where to stream it from.
fn too_large(path: &Path, offset: u64, want: u64, total: u64, max: usize) -> String {
    format!(
        "{want} bytes of {path:?} ({total} in all, from offset {offset}) are more than MCP_EXEC_MAX_TRANSFER_BYTES ({max}) in one call: page with \"offset\" and \"length\" (at most {max} each), or stream it with GET /files{} over HTTP",
        path.display()
    )
}

/// `file://` and the path, percent-encoded where a URI needs it.
pub fn file_uri(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut out = String::from("file://");
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~!$&'()*+,;=:@".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A MIME type from the extension (a few common ones), else by content.
fn mime_of(path: &Path, utf8: bool) -> &'static str {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    match ext.as_deref() {
        Some("json") => "application/json",
        Some("png") => "image/png",
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("gif") => "image/gif",
        Some("pdf") => "application/pdf",
        Some("html" | "htm") => "text/html",
        Some("md") => "text/markdown",
        Some("csv") => "text/csv",
        _ if utf8 => "text/plain",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_uri_escapes_what_a_uri_cannot_hold() {
        assert_eq!(
            file_uri(Path::new("/tmp/a b%.txt")),
            "file:///tmp/a%20b%25.txt"
        );
        assert_eq!(file_uri(Path::new("/x/é")), "file:///x/%C3%A9");
    }
}
