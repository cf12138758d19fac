//! The JSON forms of stream specs and of the capture policy, parsed into types
//! that cannot hold a malformed request.
//!
//! Parsing is strict about shape (unknown fields and wrong types are errors, so a typo is
//! reported instead of silently capturing something else) and lenient about values the protocol
//! defines away: negative `from`/`length` count as 0, integral floats such as `10.0` are
//! accepted because some clients emit every number as a float, and an object with `tail`
//! reads by `tail` whatever else it holds (`from`, `length` and `unaligned` are then ignored,
//! unread, as the reference does).
//! Every error's text contains "invalid"; the server wraps it as `invalid arguments: …`.

use std::fmt;

use serde_json::{Map, Value};

/// What to read from one stream.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamSpec {
    /// Omit the stream (`"none"`, `null`, `""`).
    None,
    /// The whole retained window (`"all"`).
    All,
    /// The last N lines of the window (`{"tail": N}`).
    Tail(u64),
    /// Bytes from absolute offset `from` (`{"from": P, "length": L?, "unaligned": bool?}`).
    From {
        /// First requested byte.
        from: u64,
        /// Number of requested bytes; `None` reads to the end.
        length: Option<u64>,
        /// `true` returns exact bytes instead of whole characters.
        unaligned: bool,
    },
}

/// A stream spec or capture policy that could not be parsed. Its text contains "invalid" and
/// says what was wrong and where.
#[derive(Debug, Clone, PartialEq)]
pub struct SpecError(String);

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SpecError {}

impl SpecError {
    fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }

    /// Prefixes the JSON path of the offending value, e.g. `capture.on_error.stderr: …`.
    fn at(self, path: &str) -> Self {
        Self(format!("{path}: {}", self.0))
    }
}

const SPEC_FORMS: &str =
    r#"expected "none", "all", {"tail": N} or {"from": P, "length": L, "unaligned": bool}"#;

impl StreamSpec {
    /// Parses the JSON form: `"none"` | `null` | `""` | `"all"` | `{"tail":N}` |
    /// `{"from":P,"length":L?,"unaligned":bool?}`.
    ///
    /// `length: null` and `unaligned: null` count as absent.
    pub fn from_json(v: &Value) -> Result<Self, SpecError> {
        match v {
            Value::Null => Ok(Self::None),
            Value::String(s) => match s.as_str() {
                "" | "none" => Ok(Self::None),
                "all" => Ok(Self::All),
                _ => Err(SpecError::new(format!(
                    "invalid stream spec {}: {SPEC_FORMS}",
                    brief(v)
                ))),
            },
            Value::Object(fields) => Self::from_object(fields),
            _ => Err(SpecError::new(format!(
                "invalid stream spec {}: {SPEC_FORMS}",
                brief(v)
            ))),
        }
    }

    fn from_object(fields: &Map<String, Value>) -> Result<Self, SpecError> {
        if let Some(unknown) = fields
            .keys()
            .find(|k| !matches!(k.as_str(), "tail" | "from" | "length" | "unaligned"))
        {
            return Err(SpecError::new(format!(
                "invalid stream spec: unknown field {unknown:?} ({SPEC_FORMS})"
            )));
        }
        if let Some(tail) = fields.get("tail") {
            return line_count(tail).map(Self::Tail);
        }
        let Some(from) = fields.get("from") else {
            return Err(SpecError::new(format!(
                "invalid stream spec: missing \"tail\" or \"from\" ({SPEC_FORMS})"
            )));
        };
        let length = match fields.get("length") {
            None | Some(Value::Null) => None,
            Some(length) => Some(byte_count("length", length)?),
        };
        let unaligned = match fields.get("unaligned") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(other) => {
                return Err(SpecError::new(format!(
                    "invalid stream spec: \"unaligned\" must be a boolean, got {}",
                    brief(other)
                )));
            }
        };
        Ok(Self::From {
            from: byte_count("from", from)?,
            length,
            unaligned,
        })
    }
}

/// An integral JSON number as `i128` (wide enough for every `u64` and `i64`), accepting
/// integral floats; `None` for anything else.
fn integer(v: &Value) -> Option<i128> {
    let n = v.as_number()?;
    if let Some(u) = n.as_u64() {
        return Some(i128::from(u));
    }
    if let Some(i) = n.as_i64() {
        return Some(i128::from(i));
    }
    let f = n.as_f64()?;
    // `as` saturates, so 1e300 becomes i128::MAX and is then clamped by the callers.
    (f.is_finite() && f.fract() == 0.0).then_some(f as i128)
}

/// `from` / `length`: negative counts as 0, huge saturates.
fn byte_count(name: &str, v: &Value) -> Result<u64, SpecError> {
    let n = integer(v).ok_or_else(|| {
        SpecError::new(format!(
            "invalid stream spec: {name:?} must be an integer, got {}",
            brief(v)
        ))
    })?;
    Ok(u64::try_from(n.max(0)).unwrap_or(u64::MAX))
}

/// `tail`: an integer; a negative count is 0 lines, like a negative `from`/`length` (as the
/// reference reads it).
fn line_count(v: &Value) -> Result<u64, SpecError> {
    match integer(v) {
        Some(n) => Ok(u64::try_from(n.max(0)).unwrap_or(u64::MAX)),
        None => Err(SpecError::new(format!(
            "invalid stream spec: \"tail\" must be an integer, got {}",
            brief(v)
        ))),
    }
}

/// A JSON value for an error message, cut short so that a huge argument cannot bloat it.
fn brief(v: &Value) -> String {
    const MAX_CHARS: usize = 60;
    let text = v.to_string();
    if text.chars().count() <= MAX_CHARS {
        return text;
    }
    let mut cut: String = text.chars().take(MAX_CHARS).collect();
    cut.push('…');
    cut
}

/// What one side (success or error) of a capture policy returns.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamPair {
    /// Spec applied to stdout.
    pub stdout: StreamSpec,
    /// Spec applied to stderr.
    pub stderr: StreamSpec,
}

impl StreamPair {
    fn new(stdout: StreamSpec, stderr: StreamSpec) -> Self {
        Self { stdout, stderr }
    }

    fn nothing() -> Self {
        Self::new(StreamSpec::None, StreamSpec::None)
    }

    fn from_json(path: &str, v: &Value) -> Result<Self, SpecError> {
        const SIDE_FORMS: &str =
            r#"expected "stdout", "stderr", "all", "none" or {"stdout": spec, "stderr": spec}"#;
        match v {
            Value::Null => Ok(Self::nothing()),
            Value::String(s) => match s.as_str() {
                "stdout" => Ok(Self::new(StreamSpec::All, StreamSpec::None)),
                "stderr" => Ok(Self::new(StreamSpec::None, StreamSpec::All)),
                "all" => Ok(Self::new(StreamSpec::All, StreamSpec::All)),
                "none" => Ok(Self::nothing()),
                _ => Err(SpecError::new(format!(
                    "invalid {path} {}: {SIDE_FORMS}",
                    brief(v)
                ))),
            },
            Value::Object(fields) => {
                if let Some(unknown) = fields
                    .keys()
                    .find(|k| !matches!(k.as_str(), "stdout" | "stderr"))
                {
                    return Err(SpecError::new(format!(
                        "invalid {path}: unknown field {unknown:?} ({SIDE_FORMS})"
                    )));
                }
                let stream = |name: &str| match fields.get(name) {
                    None => Ok(StreamSpec::None),
                    Some(spec) => {
                        StreamSpec::from_json(spec).map_err(|e| e.at(&format!("{path}.{name}")))
                    }
                };
                Ok(Self::new(stream("stdout")?, stream("stderr")?))
            }
            _ => Err(SpecError::new(format!(
                "invalid {path} {}: {SIDE_FORMS}",
                brief(v)
            ))),
        }
    }
}

/// The capture policy: which streams a terminal result carries.
#[derive(Debug, Clone, PartialEq)]
pub struct CapturePolicy {
    /// Applied when the job succeeded (exit code 0, no signal, no start error).
    pub on_success: StreamPair,
    /// Applied to every other terminal state.
    pub on_error: StreamPair,
}

impl Default for CapturePolicy {
    /// The output of a success, the diagnostics of a failure.
    fn default() -> Self {
        Self {
            on_success: StreamPair::new(StreamSpec::All, StreamSpec::None),
            on_error: StreamPair::new(StreamSpec::None, StreamSpec::All),
        }
    }
}

impl CapturePolicy {
    /// A terminal job's default: its one stream, `stdout`, on
    /// both sides, since its diagnostics are on the terminal too.
    pub fn terminal() -> Self {
        let stdout = StreamPair::new(StreamSpec::All, StreamSpec::None);
        Self {
            on_success: stdout.clone(),
            on_error: stdout,
        }
    }

    /// `None` (field absent) or JSON null gives the default. An object `{on_success?,
    /// on_error?}`: each side is a shorthand string `"stdout"` | `"stderr"` | `"all"` (both) |
    /// `"none"`, or an object `{stdout?: spec, stderr?: spec}`.
    ///
    /// Once a capture object is given, a side it does not give (or gives as null) captures
    /// nothing: the caller said what it wants, so the defaults no longer apply.
    pub fn from_json(v: Option<&Value>) -> Result<Self, SpecError> {
        let fields = match v {
            None | Some(Value::Null) => return Ok(Self::default()),
            Some(Value::Object(fields)) => fields,
            Some(other) => {
                return Err(SpecError::new(format!(
                    "invalid capture {}: expected an object {{\"on_success\": …, \"on_error\": …}}",
                    brief(other)
                )));
            }
        };
        if let Some(unknown) = fields
            .keys()
            .find(|k| !matches!(k.as_str(), "on_success" | "on_error"))
        {
            return Err(SpecError::new(format!(
                "invalid capture: unknown field {unknown:?} (expected \"on_success\" or \"on_error\")"
            )));
        }
        let side = |name: &str| match fields.get(name) {
            None => Ok(StreamPair::nothing()),
            Some(side) => StreamPair::from_json(&format!("capture.{name}"), side),
        };
        Ok(Self {
            on_success: side("on_success")?,
            on_error: side("on_error")?,
        })
    }

    /// The side that applies to a terminal result.
    pub fn side(&self, success: bool) -> &StreamPair {
        if success {
            &self.on_success
        } else {
            &self.on_error
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(v: Value) -> StreamSpec {
        match StreamSpec::from_json(&v) {
            Ok(spec) => spec,
            Err(err) => panic!("{v} rejected: {err}"),
        }
    }

    fn spec_error(v: Value) -> String {
        match StreamSpec::from_json(&v) {
            Ok(spec) => panic!("{v} accepted as {spec:?}"),
            Err(err) => err.to_string(),
        }
    }

    fn policy(v: Value) -> CapturePolicy {
        match CapturePolicy::from_json(Some(&v)) {
            Ok(policy) => policy,
            Err(err) => panic!("{v} rejected: {err}"),
        }
    }

    fn policy_error(v: Value) -> String {
        match CapturePolicy::from_json(Some(&v)) {
            Ok(policy) => panic!("{v} accepted as {policy:?}"),
            Err(err) => err.to_string(),
        }
    }

    fn from(from: u64, length: Option<u64>, unaligned: bool) -> StreamSpec {
        StreamSpec::From {
            from,
            length,
            unaligned,
        }
    }

    #[test]
    fn none_null_and_empty_string_all_omit_the_stream() {
        for v in [json!("none"), Value::Null, json!("")] {
            assert_eq!(spec(v), StreamSpec::None);
        }
    }

    #[test]
    fn all_and_tail_parse() {
        assert_eq!(spec(json!("all")), StreamSpec::All);
        assert_eq!(spec(json!({"tail": 5})), StreamSpec::Tail(5));
        assert_eq!(spec(json!({"tail": 0})), StreamSpec::Tail(0));
        assert_eq!(spec(json!({"tail": 3.0})), StreamSpec::Tail(3));
    }

    #[test]
    fn from_parses_with_and_without_length_and_unaligned() {
        assert_eq!(spec(json!({"from": 7})), from(7, None, false));
        assert_eq!(
            spec(json!({"from": 7, "length": 3})),
            from(7, Some(3), false)
        );
        assert_eq!(
            spec(json!({"from": 7, "length": 3, "unaligned": true})),
            from(7, Some(3), true)
        );
        assert_eq!(
            spec(json!({"from": 7, "length": null, "unaligned": null})),
            from(7, None, false)
        );
        assert_eq!(
            spec(json!({"from": u64::MAX, "length": u64::MAX})),
            from(u64::MAX, Some(u64::MAX), false)
        );
    }

    #[test]
    fn negative_from_and_length_count_as_zero() {
        assert_eq!(spec(json!({"from": -5})), from(0, None, false));
        assert_eq!(
            spec(json!({"from": -5, "length": -1})),
            from(0, Some(0), false)
        );
        assert_eq!(spec(json!({"from": i64::MIN})), from(0, None, false));
        assert_eq!(spec(json!({"from": -2.0})), from(0, None, false));
    }

    #[test]
    fn integral_floats_are_accepted_and_huge_ones_saturate() {
        assert_eq!(
            spec(json!({"from": 10.0, "length": 2.0})),
            from(10, Some(2), false)
        );
        assert_eq!(spec(json!({"from": 1e300})), from(u64::MAX, None, false));
    }

    #[test]
    fn unknown_strings_and_wrong_types_are_invalid() {
        for v in [
            json!("All"),
            json!("tail"),
            json!(5),
            json!(true),
            json!([1]),
        ] {
            let err = spec_error(v.clone());
            assert!(err.contains("invalid stream spec"), "{v}: {err}");
            assert!(err.contains(&v.to_string()), "{v}: {err}");
        }
    }

    #[test]
    fn an_object_without_tail_or_from_is_invalid() {
        for v in [json!({}), json!({"length": 3}), json!({"unaligned": true})] {
            let err = spec_error(v.clone());
            assert!(
                err.contains("invalid") && err.contains("missing"),
                "{v}: {err}"
            );
        }
    }

    #[test]
    fn unknown_fields_are_invalid() {
        let err = spec_error(json!({"from": 1, "lenght": 3}));
        assert!(
            err.contains("invalid") && err.contains("\"lenght\""),
            "{err}"
        );
    }

    #[test]
    fn tail_wins_over_from_length_and_unaligned_which_are_ignored_unread() {
        for other in ["from", "length", "unaligned"] {
            let mut v = json!({"tail": 1});
            v[other] = json!(1);
            assert_eq!(spec(v), StreamSpec::Tail(1), "with {other:?}");
        }
        assert_eq!(
            spec(json!({"tail": 2, "from": 0, "length": 5, "unaligned": true})),
            StreamSpec::Tail(2)
        );
        // Ignored means not validated either: a malformed ignored value is no error.
        assert_eq!(
            spec(json!({"tail": 3, "from": "x", "length": [], "unaligned": 1})),
            StreamSpec::Tail(3)
        );
    }

    #[test]
    fn a_negative_tail_counts_as_zero_lines() {
        assert_eq!(spec(json!({"tail": -1})), StreamSpec::Tail(0));
        assert_eq!(
            spec(json!({"tail": -9_000_000_000_i64})),
            StreamSpec::Tail(0)
        );
    }

    #[test]
    fn tail_must_be_an_integer() {
        for v in [json!(1.5), json!("3"), Value::Null, json!(true)] {
            let err = spec_error(json!({ "tail": v }));
            assert!(
                err.contains("invalid") && err.contains("\"tail\""),
                "{v}: {err}"
            );
        }
    }

    #[test]
    fn from_and_length_must_be_integers() {
        for key in ["from", "length"] {
            for v in [json!(1.5), json!("3"), json!([]), json!(false)] {
                let mut spec = json!({"from": 0});
                spec[key] = v.clone();
                let err = spec_error(spec);
                assert!(err.contains("invalid") && err.contains(key), "{v}: {err}");
            }
        }
        let err = spec_error(json!({"from": null}));
        assert!(err.contains("invalid") && err.contains("\"from\""), "{err}");
    }

    #[test]
    fn unaligned_must_be_a_boolean() {
        let err = spec_error(json!({"from": 0, "unaligned": "yes"}));
        assert!(
            err.contains("invalid") && err.contains("\"unaligned\""),
            "{err}"
        );
    }

    #[test]
    fn huge_offending_values_are_cut_short_in_errors() {
        let err = spec_error(json!("x".repeat(10_000)));
        assert!(err.contains("invalid") && err.len() < 300, "{}", err.len());
    }

    #[test]
    fn an_absent_or_null_capture_is_the_default() {
        let default = CapturePolicy {
            on_success: StreamPair::new(StreamSpec::All, StreamSpec::None),
            on_error: StreamPair::new(StreamSpec::None, StreamSpec::All),
        };
        assert_eq!(CapturePolicy::default(), default);
        assert_eq!(CapturePolicy::from_json(None), Ok(default.clone()));
        assert_eq!(CapturePolicy::from_json(Some(&Value::Null)), Ok(default));
    }

    #[test]
    fn shorthand_sides_expand_to_stream_pairs() {
        let p = policy(json!({"on_success": "all", "on_error": "stdout"}));
        assert_eq!(
            p.on_success,
            StreamPair::new(StreamSpec::All, StreamSpec::All)
        );
        assert_eq!(
            p.on_error,
            StreamPair::new(StreamSpec::All, StreamSpec::None)
        );
        let p = policy(json!({"on_success": "stderr", "on_error": "none"}));
        assert_eq!(
            p.on_success,
            StreamPair::new(StreamSpec::None, StreamSpec::All)
        );
        assert_eq!(p.on_error, StreamPair::nothing());
    }

    #[test]
    fn object_sides_take_a_spec_per_stream_and_omit_the_rest() {
        let p = policy(json!({"on_error": {"stderr": {"tail": 20}}}));
        assert_eq!(
            p.on_error,
            StreamPair::new(StreamSpec::None, StreamSpec::Tail(20))
        );
        let p = policy(json!({"on_success": {"stdout": {"from": -3}, "stderr": "all"}}));
        assert_eq!(
            p.on_success,
            StreamPair::new(from(0, None, false), StreamSpec::All)
        );
    }

    #[test]
    fn a_side_that_is_not_given_captures_nothing() {
        let p = policy(json!({"on_success": "all"}));
        assert_eq!(p.on_error, StreamPair::nothing());
        let p = policy(json!({"on_error": "all", "on_success": null}));
        assert_eq!(p.on_success, StreamPair::nothing());
        assert_eq!(policy(json!({})).on_success, StreamPair::nothing());
    }

    #[test]
    fn side_picks_success_or_error() {
        let p = policy(json!({"on_success": "stdout", "on_error": "stderr"}));
        assert_eq!(p.side(true), &p.on_success);
        assert_eq!(p.side(false), &p.on_error);
        assert_ne!(p.side(true), p.side(false));
    }

    #[test]
    fn a_capture_that_is_not_an_object_is_invalid() {
        for v in [json!("all"), json!(1), json!([])] {
            let err = policy_error(v.clone());
            assert!(err.contains("invalid capture"), "{v}: {err}");
        }
    }

    #[test]
    fn unknown_capture_fields_are_invalid() {
        let err = policy_error(json!({"on_succes": "all"}));
        assert!(
            err.contains("invalid capture") && err.contains("on_succes"),
            "{err}"
        );
    }

    #[test]
    fn an_unknown_side_shorthand_or_type_is_invalid_and_names_the_side() {
        let err = policy_error(json!({"on_error": "both"}));
        assert!(err.contains("invalid capture.on_error \"both\""), "{err}");
        let err = policy_error(json!({"on_success": 3}));
        assert!(err.contains("invalid capture.on_success 3"), "{err}");
    }

    #[test]
    fn unknown_stream_names_in_a_side_are_invalid() {
        let err = policy_error(json!({"on_success": {"stdin": "all"}}));
        assert!(
            err.contains("invalid capture.on_success") && err.contains("stdin"),
            "{err}"
        );
    }

    #[test]
    fn a_bad_stream_spec_in_a_side_names_its_path() {
        let err = policy_error(json!({"on_error": {"stderr": {"tail": 1.5}}}));
        assert!(err.starts_with("capture.on_error.stderr: invalid"), "{err}");
    }
}
