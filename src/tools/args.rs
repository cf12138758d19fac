//! Reading tool arguments, with the exact error texts of SPEC §4.9.
//!
//! Unknown fields are ignored. A field of the wrong type is an
//! `invalid arguments: …` error; a missing required field has its own text.

use serde_json::{Map, Value};

use crate::jobs::JobId;

/// A tool's arguments.
pub type Args = Map<String, Value>;

/// `invalid arguments: <detail>`.
pub fn invalid(detail: impl std::fmt::Display) -> String {
    format!("invalid arguments: {detail}")
}

/// An optional string (`null` = absent).
pub fn opt_str<'a>(args: &'a Args, key: &str) -> Result<Option<&'a str>, String> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(invalid(format!("\"{key}\" must be a string"))),
    }
}

/// An optional boolean (`null` = absent = false).
pub fn opt_bool(args: &Args, key: &str) -> Result<bool, String> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(invalid(format!("\"{key}\" must be a boolean"))),
    }
}

/// An optional number of seconds (`null` = absent).
pub fn opt_seconds(args: &Args, key: &str) -> Result<Option<f64>, String> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match n.as_f64() {
            Some(v) if v.is_finite() => Ok(Some(v)),
            _ => Err(invalid(format!(
                "\"{key}\" must be a finite number of seconds"
            ))),
        },
        Some(_) => Err(invalid(format!("\"{key}\" must be a number of seconds"))),
    }
}

/// A job id argument that must be present: missing/blank gives
/// `"job_id" is required`; a well-formed but unknown id is the caller's to
/// report; a malformed string is reported as unknown (`unknown job_id "x"`).
pub fn job_id(args: &Args) -> Result<JobId, String> {
    match args.get("job_id") {
        None | Some(Value::Null) => Err("\"job_id\" is required".into()),
        Some(Value::String(s)) if s.trim().is_empty() => Err("\"job_id\" is required".into()),
        Some(Value::String(s)) => JobId::parse(s).ok_or_else(|| unknown_job(s)),
        Some(_) => Err(invalid("\"job_id\" must be a string")),
    }
}

/// `unknown job_id "job-7"`.
pub fn unknown_job(id: impl std::fmt::Display) -> String {
    format!("unknown job_id \"{id}\"")
}

/// `job "job-7" is no longer running`.
pub fn not_running(id: JobId) -> String {
    format!("job \"{id}\" is no longer running")
}
