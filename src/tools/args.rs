//! Reading tool arguments.
//!
//! Unknown fields are ignored. A field of the wrong type is an
//! `invalid arguments: …` error; a missing required field has its own
//! text. Tools validate every argument before they look a job up, as the
//! reference does.

use serde_json::{Map, Value};

use super::error::ToolError;
use crate::jobs::JobId;

/// A tool's arguments.
pub type Args = Map<String, Value>;

/// An optional string (`null` = absent).
pub fn opt_str<'a>(args: &'a Args, key: &str) -> Result<Option<&'a str>, ToolError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(ToolError::invalid(format!("\"{key}\" must be a string"))),
    }
}

/// An optional boolean (`null` = absent = false).
pub fn opt_bool(args: &Args, key: &str) -> Result<bool, ToolError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(ToolError::invalid(format!("\"{key}\" must be a boolean"))),
    }
}

/// An optional number of seconds (`null` = absent).
pub fn opt_seconds(args: &Args, key: &str) -> Result<Option<f64>, ToolError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match n.as_f64() {
            Some(v) if v.is_finite() => Ok(Some(v)),
            _ => Err(ToolError::invalid(format!(
                "\"{key}\" must be a finite number of seconds"
            ))),
        },
        Some(_) => Err(ToolError::invalid(format!(
            "\"{key}\" must be a number of seconds"
        ))),
    }
}

/// A job id argument that must be present. Missing or `null` gives
/// `"job_id" is required`; any string that is not a job id — empty and
/// blank ones included — is an unknown job, shown as given (as in the
/// reference; `input` and `kill` take [`job_id_not_empty`] instead).
pub fn job_id(args: &Args) -> Result<JobId, ToolError> {
    match args.get("job_id") {
        None | Some(Value::Null) => Err(ToolError::JobIdRequired),
        Some(Value::String(s)) => JobId::parse(s).ok_or_else(|| ToolError::unknown(s)),
        Some(_) => Err(ToolError::invalid("\"job_id\" must be a string")),
    }
}

/// [`job_id`] for `input` and `kill`, whose handlers in the reference also
/// check for an empty id: `""` is `"job_id" is required` there, not an
/// unknown job. A blank id (`"  "`) is still unknown.
pub fn job_id_not_empty(args: &Args) -> Result<JobId, ToolError> {
    match args.get("job_id") {
        Some(Value::String(s)) if s.is_empty() => Err(ToolError::JobIdRequired),
        _ => job_id(args),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(v: Value) -> Args {
        match v {
            Value::Object(m) => m,
            _ => Args::new(),
        }
    }

    #[test]
    fn only_a_missing_or_null_job_id_is_required_and_empty_ones_are_unknown() {
        assert_eq!(
            job_id(&args(json!({}))).unwrap_err(),
            ToolError::JobIdRequired
        );
        assert_eq!(
            job_id(&args(json!({"job_id": null}))).unwrap_err(),
            ToolError::JobIdRequired
        );
        for s in ["", "  ", "nope", "job-0"] {
            assert_eq!(
                job_id(&args(json!({ "job_id": s })))
                    .unwrap_err()
                    .to_string(),
                format!("unknown job_id \"{s}\"")
            );
        }
        assert_eq!(job_id(&args(json!({"job_id": "job-3"}))), Ok(JobId(3)));
    }

    #[test]
    fn job_id_not_empty_requires_a_non_empty_id_and_is_job_id_otherwise() {
        for v in [json!({}), json!({"job_id": null}), json!({"job_id": ""})] {
            assert_eq!(
                job_id_not_empty(&args(v.clone())).unwrap_err(),
                ToolError::JobIdRequired,
                "{v}"
            );
        }
        for s in ["  ", "nope", "job-0"] {
            assert_eq!(
                job_id_not_empty(&args(json!({ "job_id": s })))
                    .unwrap_err()
                    .to_string(),
                format!("unknown job_id \"{s}\"")
            );
        }
        assert_eq!(
            job_id_not_empty(&args(json!({"job_id": 3}))).unwrap_err(),
            ToolError::invalid("\"job_id\" must be a string")
        );
        assert_eq!(
            job_id_not_empty(&args(json!({"job_id": "job-3"}))),
            Ok(JobId(3))
        );
    }
}
