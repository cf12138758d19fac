//! `upload`: write a file atomically (SPEC §13.1); a Part II tool (from
//! revision 2025-03-26).
//!
//! Input: `path` (absolute), `content_base64` or `text` (exactly one),
//! `sha256` (hex, verified before the rename), `mode` (`"0644"`: octal;
//! default: the replaced file's, else 0644), `overwrite` (default true),
//! `mkdirs` (default false). At most `MCP_EXEC_MAX_TRANSFER_BYTES` decoded
//! bytes; larger files go over `PUT /files/<path>`.
//!
//! Output: `{path, bytes, sha256, unchanged}`. The commit is
//! [`crate::files::commit`]'s; an existing file with the same bytes is left
//! alone (`unchanged:true`) before anything is written, so a retry costs a
//! read, not a write.

use std::path::PathBuf;
use std::sync::Arc;

use base64::Engine;
use serde_json::json;
use sha2::{Digest, Sha256};

use super::{Args, Call, Effect, Running, Tool, ToolError, ToolOutcome, args, cancellable};
use crate::files::commit::{self, Committed, Options, Staged};
use crate::files::place::Place;
use crate::files::{self as files, FileError, read};
use crate::policy::cwd::CwdPolicy;
use crate::protocol::result::Payload;

/// The tool.
pub const TOOL: Tool = Tool {
    name: "upload",
    title: "Upload a file",
    description: "Write a file atomically: content_base64 (bytes) or text (UTF-8), optionally verified against sha256 (hex). The file appears whole or not at all; identical content leaves it unchanged (unchanged:true), so retries are safe. Paths are absolute. For files over the transfer limit, use PUT /files/<path> over HTTP.",
    effect: Effect::Destructive,
    input_schema: |_| {
        json!({
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
        })
    },
    output_schema: |_| {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "bytes": {"type": "integer"},
                "sha256": {"type": "string"},
                "unchanged": {"type": "boolean"}
            },
            "required": ["path", "bytes", "sha256", "unchanged"]
        })
    },
    starts_jobs: false,
    run,
};

/// A validated `upload` call: what to write where.
struct Upload {
    path: PathBuf,
    content: Vec<u8>,
    sha256: Option<[u8; 32]>,
    opts: Options,
    mkdirs: bool,
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
    let content = match (
        args::opt_str(a, "content_base64")?,
        args::opt_str(a, "text")?,
    ) {
        (Some(_), Some(_)) => {
            return Err(ToolError::invalid(
                "give either \"content_base64\" or \"text\", not both",
            ));
        }
        (None, None) => {
            return Err(ToolError::invalid(
                "\"content_base64\" or \"text\" is required",
            ));
        }
        (None, Some(text)) if text.len() > max => return Err(too_big(text.len())),
        (None, Some(text)) => text.as_bytes().to_vec(),
        (Some(b64), None) => {
            if b64.len() / 4 * 3 > max.saturating_add(3) {
                return Err(too_big(b64.len() / 4 * 3));
            }
            let bytes = decode_base64(b64)?;
            if bytes.len() > max {
                return Err(too_big(bytes.len()));
            }
            bytes
        }
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
        Some(m) => {
            let mode = parse_mode(m).ok_or_else(|| {
                ToolError::invalid(format!(
                    "\"mode\" must be octal permission bits like \"0644\", not {m:?}"
                ))
            })?;
            Some(without_setid(mode).map_err(ToolError::invalid)?)
        }
    };
    let overwrite = match a.get("overwrite") {
        None | Some(serde_json::Value::Null) => true,
        _ => args::opt_bool(a, "overwrite")?,
    };
    Ok(Upload {
        path,
        content,
        sha256,
        opts: Options { mode, overwrite },
        mkdirs: args::opt_bool(a, "mkdirs")?,
    })
}

/// `"0644"`, `"644"`, `"0o644"`: at most `07777`.
pub fn parse_mode(text: &str) -> Option<u32> {
    let t = text.trim();
    let t = t.strip_prefix("0o").unwrap_or(t);
    if t.is_empty() || t.len() > 5 {
        return None;
    }
    u32::from_str_radix(t, 8).ok().filter(|m| *m <= 0o7777)
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
    let req = parse(a, call.app.config.max_transfer_bytes)?;
    let app = Arc::clone(&call.app);
    let task = tokio::task::spawn_blocking(move || write(&app.cwd, req));
    let done = cancellable(&call.cancel, task)
        .await?
        .map_err(|e| ToolError::File(format!("the upload failed: {e}")))?
        .map_err(|e| ToolError::File(e.to_string()))?;
    Ok(Payload::object(done))
}

/// Resolves, skips identical content, and commits.
fn write(policy: &CwdPolicy, req: Upload) -> Result<Committed, FileError> {
    let place = Place::resolve(policy, &req.path, req.mkdirs)?;
    place.not_a_root("written over")?;
    let sha: [u8; 32] = Sha256::digest(&req.content).into();
    if let Some(expected) = req.sha256
        && expected != sha
    {
        return Err(FileError::new(
            files::Kind::Mismatch,
            format!(
                "sha256 mismatch: expected {}, got {}",
                files::hex(&expected),
                files::hex(&sha)
            ),
        ));
    }
    if let Some(st) = read::lstat(&place)? {
        if !read::is_regular(&st) {
            return Err(FileError::not_regular(&place.path));
        }
        if commit::holds(&place, &st, req.content.len() as u64, &sha, req.opts.mode)? {
            return Ok(Committed {
                path: place.path.display().to_string(),
                bytes: req.content.len() as u64,
                sha256: files::hex(&sha),
                unchanged: true,
                created: false,
            });
        }
        if !req.opts.overwrite {
            return Err(FileError::exists(&place.path));
        }
    }
    let mut staged = Staged::create(place)?;
    staged.write(&req.content)?;
    staged.commit(Some(sha), req.opts)
}

/// `mode`, unless it has the setuid or setgid bit: a file the root server
/// writes with one runs as root (or with root's group) for every job user
/// that can execute it, so a caller of `upload` or `PUT /files` could hand
/// a `nobody` job a way back to root. A job that means it runs `chmod`
/// itself, as whichever user it is. The sticky bit (01000) is harmless and
/// kept.
pub fn without_setid(mode: u32) -> Result<u32, String> {
    if mode & 0o6000 != 0 {
        return Err(format!(
            "mode {mode:04o} sets the setuid or setgid bit, which upload and PUT /files refuse: \
             the file would run as root for any job user (chmod it from a job to mean it)"
        ));
    }
    Ok(mode)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setuid_and_setgid_modes_are_refused_with_a_reason_and_the_sticky_bit_is_kept() {
        for setid in [0o4755, 0o2755, 0o6777] {
            let e = without_setid(setid).unwrap_err();
            assert!(e.contains("setuid or setgid"), "{e}");
        }
        assert_eq!(without_setid(0o1777), Ok(0o1777));
        assert_eq!(without_setid(0o644), Ok(0o644));
    }

    #[test]
    fn modes_are_octal_with_or_without_a_leading_zero() {
        assert_eq!(parse_mode("0644"), Some(0o644));
        assert_eq!(parse_mode("755"), Some(0o755));
        assert_eq!(parse_mode("0o600"), Some(0o600));
        assert_eq!(parse_mode("4755"), Some(0o4755));
        for bad in ["", "rw-r--r--", "0999", "77777", "-1"] {
            assert_eq!(parse_mode(bad), None, "{bad}");
        }
    }

    #[test]
    fn base64_may_lack_padding_and_carry_line_breaks() {
        assert_eq!(decode_base64("aGk=").unwrap(), b"hi");
        assert_eq!(decode_base64("aGk").unwrap(), b"hi");
        assert_eq!(decode_base64("aG\nk=\n").unwrap(), b"hi");
        assert!(decode_base64("!!").is_err());
    }
}
