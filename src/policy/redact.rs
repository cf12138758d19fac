//! Secret redaction of process output (docs/security.md): the [`Redactor`], built once at start-up
//! from `MCP_EXEC_REDACT` and `MCP_EXEC_REDACT_PATTERNS_FILE`, and shared read-only by every
//! reader.
//!
//! # Settings
//! - `MCP_EXEC_REDACT` unset, `""` or `off`: no redaction, outputs stay exact (the default).
//!   `builtin`: the builtin patterns below. Anything else is an error naming the variable.
//! - `MCP_EXEC_REDACT_PATTERNS_FILE`: one regular expression per line, added to the builtin
//!   patterns. Blank lines and lines whose first non-blank character is `#` are ignored, and
//!   whitespace at both ends of a line is trimmed (write `[ ]` for a space at an end). Without
//!   `builtin` the file alone turns redaction on, with only its patterns: naming a file is a
//!   request to redact, and silently ignoring it would fail open. Set together with an explicit
//!   `MCP_EXEC_REDACT=off` it is a contradiction, so that is an error; so is a file that is
//!   unreadable, not UTF-8, has an invalid pattern or one that matches the empty string (with
//!   file and line), or has no pattern at all when it is the only source. An empty value of
//!   either variable counts as unset.
//!
//! File patterns use `regex` crate syntax, matched on raw bytes with Unicode mode off: `\w`,
//! `\d`, `\s`, `\b` and `(?i)` are ASCII, `.` is any byte but `\n`, `^`/`$` match at line
//! edges (multi-line mode; the edges of the context a read is given count as line edges).
//! The whole match of a file pattern is masked; its capture groups change nothing.
//!
//! # Builtin patterns
//! Each is shaped to be unambiguous: a fixed, distinctive prefix and a length, so ordinary
//! output (hashes, UUIDs, base64) is never touched. Where a label tells the reader what was
//! hidden, the label stays and only the secret is masked.
//! - PEM private-key blocks: `-----BEGIN … PRIVATE KEY-----` (RSA, EC, DSA, OPENSSH,
//!   ENCRYPTED, PKCS#8, and `PGP PRIVATE KEY BLOCK`) through `-----END … PRIVATE KEY-----`,
//!   one match however long; the body may be JSON-escaped (`\n`), indented, or carry RFC 1421
//!   headers (`Proc-Type:`, `DEK-Info:`). See "Blocks cut by an edge" below.
//! - Base64-encoded PEM private keys, as in a Kubernetes secret (`tls.key: LS0tLS1CRUdJTi…`):
//!   base64 of `-----BEGIN` followed within 40 characters by base64 of `PRIVATE KEY` (any
//!   alignment); the whole blob, on one line or wrapped, is one match. Certificates stay.
//! - AWS access key ids: `AKIA`/`ASIA` + 16 of `[A-Z0-9]`, as a whole word.
//! - GitHub tokens: `ghp_`/`gho_`/`ghu_`/`ghs_`/`ghr_` + 36 or more alphanumerics;
//!   `github_pat_` + 82 or more of `[A-Za-z0-9_]`. GitLab: `glpat-` + 20 or more.
//! - Slack: `xoxa-`/`xoxb-`/`xoxe-`/`xoxo-`/`xoxp-`/`xoxr-`/`xoxs-` tokens, `xapp-` app tokens,
//!   and the secret path of `hooks.slack.com` webhooks (the host stays).
//! - `Authorization:` / `Proxy-Authorization:` values with the `Bearer`, `Basic` or `Token`
//!   scheme (any case), in header, JSON or `KEY=value` form, the name spelt `Authorization`,
//!   `authorization` or `AUTHORIZATION`: the credentials are masked, the header name and
//!   scheme stay (`Authorization: Bearer [REDACTED]`).
//! - Google API keys: `AIza` + 35. Stripe: `sk_live_`/`rk_live_`/`sk_test_`/`rk_test_` + 20
//!   or more.
//! - OpenAI keys with an unambiguous shape (`sk-proj-`, `sk-svcacct-`, `sk-admin-`, and the
//!   legacy `sk-…T3BlbkFJ…`) and Anthropic keys (`sk-ant-…`); a bare `sk-` is left alone.
//! - npm (`npm_` + 36), PyPI (`pypi-AgEIcHlwaS5vcmc…`) and Hugging Face (`hf_` + 34 letters)
//!   tokens.
//! - JSON Web Tokens: `eyJ…` `.` `eyJ…` `.` signature (a JSON header of at most 512
//!   characters, see "Cost", and a JSON payload).
//! - Passwords in URLs: `scheme://user:PASSWORD@host` masks the password only.
//!
//! # Blocks cut by an edge
//! A read is redacted on its bytes plus up to 4 KiB of context either side (capture's
//! [`CONTEXT`](crate::capture::CONTEXT)), which finds every shorter secret that a slice edge
//! cuts. A PEM block can be longer, so three rules make it one match wherever the edges fall:
//! 1. a `BEGIN` line followed by a body (base64 characters, whitespace, `\n` escapes, headers)
//!    is a match up to and including its `END` line, **or up to where the body stops if no
//!    `END` line follows** (the key is still being written, or is longer than the text at
//!    hand). Such an open match may take in a few words after a cut-off key, never less than
//!    the key;
//! 2. an `END` line whose `BEGIN` is out of sight masks, with itself, the run of body
//!    characters just before it (up to the previous match);
//! 3. while a context side consists only of body characters (apart from the cut part of a
//!    marker line at its far edge), the read may lie inside a long body, so the window widens
//!    that side (doubling, up to 64 KiB) until it reaches a whole `BEGIN`/`END` line or other
//!    text ([`Redact::wants_wider`]).
//!
//! Rules 1 and 2 also make [`Redactor::redact_text`] mask a block split across consecutive
//! chunks of a stream in every chunk that holds a recognisable part of it (a whole marker line
//! or any body byte). Other secrets need the context. Known gap: a secret whose first bytes the
//! window has already dropped cannot be recognised, except a PEM body followed by its `END`.
//!
//! # The live edge
//! While a job runs, a read ends before the newest bytes that could still be the beginning of
//! a match (capture's "The live edge"): `db=postgres://admin:hunter2` is shown as `db=postgres`
//! until the `@` (or anything that rules the shape out, or the job's end) arrives.
//! [`Redact::held_back`] finds them with a second pattern built once from the same patterns:
//! for each, a pattern for *every prefix* of its matches ([`prefixes`], computed on the parse
//! tree), with every assertion (`\b`, `^`, `$`) dropped; their alternation, anchored at the end
//! of the text, finds the leftmost position from which the rest of the text could still grow
//! into a match. Dropping the assertions only widens what is held back, so the rule is sound:
//! a match of the finished stream that is not yet complete, or whose end is the current end,
//! begins at or after that position, and every match that begins before it lies wholly in
//! bytes already written, where the finished stream and the current one agree. What it costs
//! is a delay: output is held while its end looks like the start of a secret (a line ending in
//! `https://host`, an `A` that could start `AKIA`), at most [`HOLD_BACK`] bytes, and released
//! by the next write that rules the shape out or by the job's end; a file pattern that can
//! begin with any word (`[a-z]+@corp`) holds back a running job's trailing words.
//! Not anticipated at the live edge: rule 2 below (an `END` line that masks the headless body
//! before it) — a body written after its `BEGIN` line is already masked by rule 1, and one
//! whose `BEGIN` is out of reach is the known gap; and a match that begins more than
//! [`HOLD_BACK`] bytes before the end, which no read's context could recognise either.
//!
//! # Cost
//! All patterns are one alternation compiled once (`regex::bytes`, no backtracking, each
//! search linear in the text) and run by the lazy DFA (`regex`'s `perf-dfa` feature, the only
//! performance feature enabled); only a short non-PEM match is searched again with captures.
//! Redacting a full 1 MiB window takes about 2–3.5 ms in a release build on the development
//! machine, with or without secrets in it (the ignored test
//! `redacting_a_full_1_mib_window_is_timed` prints the figures); a 4 KiB page with its context
//! is about 1% of that. Enabling `perf-literal` as well (a prefilter over the patterns'
//! literal prefixes) makes it 3–10× faster for about 220 KB more binary; redaction is off by
//! default, so the binary size, which every deployment pays, was preferred.
//!
//! Iterating over matches is not linear in general: after each match the next search starts at
//! its end, and a pattern whose attempt can run on for a long stretch and then fail, and that
//! can start again inside that stretch, makes every search rescan it. Of the builtins only the
//! JWT header could (`eyJ` lies inside its own alphabet), so its length is bounded; with that,
//! 1 MiB of adversarial output (tens of thousands of secrets, restarted attempts) takes about
//! 0.1 s. A file pattern of that shape (an unbounded run of a broad class followed by a
//! required suffix) can be slow on output built to exploit it.

use std::ops::Range;
use std::path::Path;

use regex::bytes::{CaptureLocations, Regex, RegexBuilder};

use regex_syntax::hir::{Hir, HirKind, Look, Repetition};

use crate::capture::{HOLD_BACK, Redact, push_sanitized};

/// What replaces a match.
pub const MARKER: &str = "[REDACTED]";

const MODE_VAR: &str = "MCP_EXEC_REDACT";
const FILE_VAR: &str = "MCP_EXEC_REDACT_PATTERNS_FILE";

/// One builtin pattern.
struct Builtin {
    /// A short name, for tests and error messages.
    name: &'static str,
    /// Mask only capture group 1 (the secret after a label that stays).
    group_is_secret: bool,
    regex: &'static str,
}

const PEM_LABEL: &str = r"[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----";

/// How every match of the first builtin pattern begins (rule 1).
const PEM_BEGIN: &[u8] = b"-----BEGIN ";
/// How every match of the second builtin pattern begins (rule 2).
const PEM_END: &[u8] = b"-----END ";

/// The builtin patterns, in alternation order. `{PEM}` stands for [`PEM_LABEL`].
///
/// Every pattern starts with a literal (or a few), so that with `regex`'s `perf-literal`
/// feature the search becomes a prefilter over those prefixes (module doc, "Cost"). A
/// case-insensitive `(?i:authorization)` would expand to thousands of literals and turn that
/// prefilter off for the whole alternation, hence the three spellings of the header names.
const BUILTIN: &[Builtin] = &[
    Builtin {
        name: "pem-private-key",
        group_is_secret: false,
        // BEGIN line, blank space, optional RFC 1421 headers, the body, an optional END line.
        regex: r"-----BEGIN {PEM}(?:\s|\\[rn])*(?:[A-Za-z][A-Za-z0-9-]*:[^\r\n\\]*(?:\r?\n|\\r\\n|\\n)(?:\s|\\[rn])*)*(?:[A-Za-z0-9+/=\s]|\\[rn])*(?:-----END {PEM})?",
    },
    Builtin {
        name: "pem-private-key-end",
        group_is_secret: false,
        regex: r"-----END {PEM}",
    },
    Builtin {
        name: "pem-private-key-base64",
        group_is_secret: false,
        // Base64 of `-----BEGIN`, then within 40 characters one of the three encodings of
        // `PRIVATE KEY` (one per alignment), then the rest of the blob, wrapped or not.
        regex: r"LS0tLS1CRUdJTi[A-Za-z0-9+/]{0,40}?(?:UFJJVkFURSBLRV|BSSVZBVEUgS0VZ|UklWQVRFIEtF)[A-Za-z0-9+/=]*(?:\r?\n[A-Za-z0-9+/=]+)*",
    },
    Builtin {
        name: "aws-access-key-id",
        group_is_secret: false,
        regex: r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b",
    },
    Builtin {
        name: "github-token",
        group_is_secret: false,
        regex: r"gh[pousr]_[A-Za-z0-9]{36,}",
    },
    Builtin {
        name: "github-fine-grained-token",
        group_is_secret: false,
        regex: r"github_pat_[A-Za-z0-9_]{82,}",
    },
    Builtin {
        name: "gitlab-token",
        group_is_secret: false,
        regex: r"glpat-[A-Za-z0-9_-]{20,}",
    },
    Builtin {
        name: "slack-token",
        group_is_secret: false,
        regex: r"\bxox[abeoprs]-[A-Za-z0-9-]{10,}|\bxapp-[0-9]+-[A-Za-z0-9-]{10,}",
    },
    Builtin {
        name: "slack-webhook",
        group_is_secret: true,
        regex: r"hooks\.slack\.com/(?:services|workflows|triggers)/([A-Za-z0-9_/-]{20,})",
    },
    Builtin {
        name: "authorization-header",
        group_is_secret: true,
        regex: r#"\b(?:Authorization|authorization|AUTHORIZATION|Proxy-Authorization|proxy-authorization|PROXY-AUTHORIZATION)["']?\s*[:=]\s*["']?(?i:bearer|basic|token)\s+([A-Za-z0-9._~+/=-]+)"#,
    },
    Builtin {
        name: "google-api-key",
        group_is_secret: false,
        regex: r"AIza[0-9A-Za-z_-]{35}",
    },
    Builtin {
        name: "stripe-key",
        group_is_secret: false,
        regex: r"\b[rs]k_(?:live|test)_[0-9A-Za-z]{20,}",
    },
    Builtin {
        name: "openai-key",
        group_is_secret: false,
        regex: r"\bsk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}|\bsk-[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}",
    },
    Builtin {
        name: "anthropic-key",
        group_is_secret: false,
        regex: r"\bsk-ant-[a-z]+[0-9]*-[A-Za-z0-9_-]{20,}",
    },
    Builtin {
        name: "npm-token",
        group_is_secret: false,
        regex: r"\bnpm_[A-Za-z0-9]{36}\b",
    },
    Builtin {
        name: "pypi-token",
        group_is_secret: false,
        regex: r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}",
    },
    Builtin {
        name: "huggingface-token",
        group_is_secret: false,
        regex: r"\bhf_[A-Za-z]{34}\b",
    },
    Builtin {
        name: "jwt",
        group_is_secret: false,
        regex: r"\beyJ[A-Za-z0-9_-]{8,512}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*",
    },
    Builtin {
        name: "url-password",
        group_is_secret: true,
        regex: r#"://[^\s/:@"'<>]*:([^\s/@"'<>]+)@"#,
    },
];

/// A pattern as compiled into the alternation.
#[derive(Debug)]
struct Compiled {
    /// The group that wraps this pattern in the alternation: set exactly when it matched.
    group: usize,
    /// The group to mask instead of the whole match, if any.
    secret: Option<usize>,
}

/// The redaction policy: one compiled alternation of every pattern. Immutable once built, so
/// one value is shared by all readers.
#[derive(Debug)]
pub struct Redactor {
    regex: Regex,
    /// What could still begin a match, anchored at the end of the text (module doc, "The live
    /// edge").
    live: Regex,
    patterns: Vec<Compiled>,
    /// The builtin patterns are on: the PEM rules apply.
    pem: bool,
    /// Some pattern masks a group rather than its whole match.
    any_secret_group: bool,
}

/// A pattern on its way into the alternation.
struct Source {
    regex: String,
    group_is_secret: bool,
    /// Where it came from, for error messages: `builtin NAME` or `FILE:LINE`.
    origin: String,
}

impl Redactor {
    /// Builds the policy from the values of `MCP_EXEC_REDACT` and
    /// `MCP_EXEC_REDACT_PATTERNS_FILE` (module doc): `Ok(None)` when redaction is off, an
    /// error naming the variable (and file and line) when a value is invalid.
    pub fn from_settings(
        mode: Option<&str>,
        patterns_file: Option<&Path>,
    ) -> Result<Option<Redactor>, String> {
        let patterns_file = patterns_file.filter(|path| !path.as_os_str().is_empty());
        let builtin = match mode.unwrap_or("") {
            "" => false,
            "off" => {
                return match patterns_file {
                    None => Ok(None),
                    Some(path) => Err(format!(
                        "{MODE_VAR}=off contradicts {FILE_VAR}={}: unset one of them",
                        path.display()
                    )),
                };
            }
            "builtin" => true,
            other => {
                return Err(format!(
                    "{MODE_VAR}: invalid value {other:?} (expected \"off\" or \"builtin\")"
                ));
            }
        };
        let mut sources = Vec::new();
        if builtin {
            sources.extend(BUILTIN.iter().map(|b| Source {
                regex: b.regex.replace("{PEM}", PEM_LABEL),
                group_is_secret: b.group_is_secret,
                origin: format!("builtin pattern {}", b.name),
            }));
        }
        if let Some(path) = patterns_file {
            let from_file = read_patterns_file(path)?;
            if from_file.is_empty() && !builtin {
                return Err(format!(
                    "{FILE_VAR}: {} has no patterns (and {MODE_VAR} is not \"builtin\")",
                    path.display()
                ));
            }
            sources.extend(from_file);
        }
        if sources.is_empty() {
            return Ok(None);
        }
        Self::build(sources, builtin).map(Some)
    }

    /// Compiles each pattern alone (to validate it and count its groups) and then all of
    /// them as one alternation `(p0)|(p1)|…`, whose wrapping groups tell which one matched.
    fn build(sources: Vec<Source>, pem: bool) -> Result<Self, String> {
        let mut patterns = Vec::with_capacity(sources.len());
        let mut alternation = String::new();
        let mut next_group = 1;
        let mut beginnings = Vec::with_capacity(sources.len());
        for source in &sources {
            let alone = builder(&source.regex)
                .build()
                .map_err(|err| format!("{}: invalid pattern: {err}", source.origin))?;
            beginnings
                .push(prefixes(&parse(&source.regex).map_err(|err| {
                    format!("{}: invalid pattern: {err}", source.origin)
                })?));
            if alone.is_match(b"") {
                return Err(format!(
                    "{}: pattern {:?} matches the empty string",
                    source.origin, source.regex
                ));
            }
            let own_groups = alone.captures_len() - 1;
            if source.group_is_secret && own_groups == 0 {
                return Err(format!("{}: has no group to mask", source.origin));
            }
            patterns.push(Compiled {
                group: next_group,
                secret: source.group_is_secret.then_some(next_group + 1),
            });
            next_group += 1 + own_groups;
            if !alternation.is_empty() {
                alternation.push('|');
            }
            alternation.push('(');
            alternation.push_str(&source.regex);
            alternation.push(')');
        }
        let regex = builder(&alternation)
            .build()
            .map_err(|err| format!("{FILE_VAR}: the patterns together do not compile: {err}"))?;
        let any_secret_group = patterns.iter().any(|p| p.secret.is_some());
        let live = Hir::concat(vec![Hir::alternation(beginnings), Hir::look(Look::End)]);
        let live = builder(&live.to_string()).build().map_err(|err| {
            format!(
                "{FILE_VAR}: the patterns are too complex to tell where a match could begin: {err}"
            )
        })?;
        Ok(Self {
            regex,
            live,
            patterns,
            pem,
            any_secret_group,
        })
    }

    /// Redacts a whole buffer (an `/exec` chunk, the text `wait … until` matches): its
    /// sanitised UTF-8 text with every match replaced by `[REDACTED]`, and the number of
    /// matches. Without context, a secret cut by the buffer's edge is masked only if it is a
    /// PEM block (module doc, "Blocks cut by an edge").
    pub fn redact_text(&self, bytes: &[u8]) -> (String, u64) {
        self.mask(bytes, 0..bytes.len())
    }

    /// The masked text of `text[data]` and how many matches overlapped `data`.
    fn mask(&self, text: &[u8], data: Range<usize>) -> (String, u64) {
        let masks = self.masks(text, &data);
        let mut out = String::with_capacity(data.len());
        let mut at = data.start;
        for mask in &masks {
            push_sanitized(&mut out, &text[at..mask.start]);
            out.push_str(MARKER);
            at = mask.end;
        }
        push_sanitized(&mut out, &text[at..data.end]);
        (out, masks.len() as u64)
    }

    /// The parts of `data` to mask, in order and disjoint: one per match that overlaps it.
    fn masks(&self, text: &[u8], data: &Range<usize>) -> Vec<Range<usize>> {
        let mut masks = Vec::new();
        let mut locations = self.regex.capture_locations();
        let mut at = 0;
        // End of the previous match: rule 2 never grows a mask back across it, which keeps
        // masks disjoint and the walk linear.
        let mut floor = 0;
        while at < text.len() {
            let Some(found) = self.regex.find_at(text, at) else {
                break;
            };
            let whole = found.range();
            if whole.is_empty() {
                at = whole.end + 1;
                continue;
            }
            at = whole.end;
            let masked = self.masked_range(text, whole.clone(), floor, &mut locations);
            floor = whole.end;
            let overlap = masked.start.max(data.start)..masked.end.min(data.end);
            if !overlap.is_empty() {
                masks.push(overlap);
            }
        }
        masks
    }

    /// What to mask of the match `whole`.
    ///
    /// The PEM patterns are told apart by their literal prefixes, which no other builtin
    /// pattern has, because running the capture engine over a multi-KiB block costs several
    /// times the search itself. (A file pattern whose match starts with such a prefix is
    /// treated the same way: its trailing whitespace stays, or the body before it goes too.)
    /// Any other match is searched again from its
    /// start with captures, which finds the same match, to learn which pattern it was and so
    /// whether only its secret group is masked.
    fn masked_range(
        &self,
        text: &[u8],
        whole: Range<usize>,
        floor: usize,
        locations: &mut CaptureLocations,
    ) -> Range<usize> {
        let matched = &text[whole.clone()];
        if self.pem && matched.starts_with(PEM_BEGIN) {
            let mut end = whole.end;
            while end > whole.start && text[end - 1].is_ascii_whitespace() {
                end -= 1;
            }
            return whole.start..end;
        }
        if self.pem && matched.starts_with(PEM_END) {
            return pem_body_start(text, whole.start, floor)..whole.end;
        }
        if !self.any_secret_group {
            return whole;
        }
        let same = self.regex.captures_read_at(locations, text, whole.start);
        if same.map(|m| m.range()) != Some(whole.clone()) {
            return whole;
        }
        self.patterns
            .iter()
            .find(|p| locations.get(p.group).is_some())
            .and_then(|p| p.secret)
            .and_then(|group| locations.get(group))
            .map_or(whole, |(start, end)| start..end)
    }
}

impl Redact for Redactor {
    fn redact(&self, text: &[u8], data: Range<usize>) -> (String, u64) {
        // The window never passes a range outside `text`; clamp anyway, indexing must not panic.
        let end = data.end.min(text.len());
        self.mask(text, data.start.min(end)..end)
    }

    /// Rule 3: a side made only of PEM body characters may be the middle of a long block;
    /// so may one that begins with the end of a marker line that the side's edge cut
    /// (`ATE KEY-----` and the body after it) or ends with the start of one.
    fn wants_wider(&self, side: &[u8]) -> bool {
        let marker =
            |b: &u8| b.is_ascii_uppercase() || b.is_ascii_digit() || matches!(b, b' ' | b'-');
        let start = side.iter().position(|b| !marker(b)).unwrap_or(side.len());
        let end = side
            .iter()
            .rposition(|b| !marker(b))
            .map_or(start, |i| i + 1);
        self.pem && !side.is_empty() && side[start..end.max(start)].iter().all(|&b| is_pem_body(b))
    }

    /// The live edge (module doc): from the leftmost position whose rest could grow into a
    /// match. The live pattern matches the empty string at the end, so it always matches.
    fn held_back(&self, tail: &[u8]) -> usize {
        let tail = &tail[tail.len().saturating_sub(HOLD_BACK)..];
        self.live.find(tail).map_or(0, |m| tail.len() - m.start())
    }
}

/// `pattern` parsed as [`builder`] compiles it.
fn parse(pattern: &str) -> Result<Hir, String> {
    regex_syntax::ParserBuilder::new()
        .unicode(false)
        .utf8(false)
        .multi_line(true)
        .crlf(true)
        .build()
        .parse(pattern)
        .map_err(|err| err.to_string())
}

/// Every prefix of every string `hir` matches, the empty one included, with its assertions
/// dropped (which only adds strings): the pattern of what could still grow into a match. Its
/// size is linear in `hir`'s times its nesting depth (each concatenated item appears once
/// as itself and once as its own prefixes), never exponential.
fn prefixes(hir: &Hir) -> Hir {
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => Hir::empty(),
        HirKind::Literal(lit) => lit.0.iter().rev().fold(Hir::empty(), |rest, &b| {
            optional(Hir::concat(vec![Hir::literal([b]), rest]))
        }),
        HirKind::Class(class) => optional(Hir::class(class.clone())),
        HirKind::Capture(capture) => prefixes(&capture.sub),
        // `R{n,m}`: up to `m - 1` whole copies, then a prefix of one more.
        HirKind::Repetition(rep) => match rep.max {
            Some(0) => Hir::empty(),
            max => Hir::concat(vec![
                Hir::repetition(Repetition {
                    min: 0,
                    max: max.map(|m| m - 1),
                    greedy: true,
                    sub: Box::new(loosened(&rep.sub)),
                }),
                prefixes(&rep.sub),
            ]),
        },
        // `A B C`: a prefix of A, or A then a prefix of `B C`.
        HirKind::Concat(items) => {
            let mut rest = items.iter().rev();
            let Some(last) = rest.next() else {
                return Hir::empty();
            };
            rest.fold(prefixes(last), |tail, item| {
                Hir::alternation(vec![
                    prefixes(item),
                    Hir::concat(vec![loosened(item), tail]),
                ])
            })
        }
        HirKind::Alternation(alternatives) => {
            Hir::alternation(alternatives.iter().map(prefixes).collect())
        }
    }
}

/// `hir` without its assertions and groups: what it matches, and more.
fn loosened(hir: &Hir) -> Hir {
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => Hir::empty(),
        HirKind::Literal(_) | HirKind::Class(_) => hir.clone(),
        HirKind::Capture(capture) => loosened(&capture.sub),
        HirKind::Repetition(rep) => Hir::repetition(Repetition {
            sub: Box::new(loosened(&rep.sub)),
            ..rep.clone()
        }),
        HirKind::Concat(items) => Hir::concat(items.iter().map(loosened).collect()),
        HirKind::Alternation(alternatives) => {
            Hir::alternation(alternatives.iter().map(loosened).collect())
        }
    }
}

/// `hir` or nothing.
fn optional(hir: Hir) -> Hir {
    Hir::repetition(Repetition {
        min: 0,
        max: Some(1),
        greedy: true,
        sub: Box::new(hir),
    })
}

/// The regex options every pattern is compiled with (module doc).
fn builder(pattern: &str) -> RegexBuilder {
    let mut builder = RegexBuilder::new(pattern);
    builder.unicode(false).multi_line(true).crlf(true);
    builder
}

/// Bytes a PEM body is made of: base64, whitespace, and the `\` of `\n` escapes.
fn is_pem_body(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b'\\') || b.is_ascii_whitespace()
}

/// Rule 2: where the body before an `END` line at `end_line` starts, not before `floor`;
/// leading whitespace is left out of the mask.
fn pem_body_start(text: &[u8], end_line: usize, floor: usize) -> usize {
    let mut start = end_line;
    while start > floor && is_pem_body(text[start - 1]) {
        start -= 1;
    }
    while start < end_line && text[start].is_ascii_whitespace() {
        start += 1;
    }
    start
}

/// Reads `MCP_EXEC_REDACT_PATTERNS_FILE`: one pattern per non-blank, non-comment line.
fn read_patterns_file(path: &Path) -> Result<Vec<Source>, String> {
    let bytes = std::fs::read(path)
        .map_err(|err| format!("{FILE_VAR}: cannot read {}: {err}", path.display()))?;
    let mut sources = Vec::new();
    for (index, line) in bytes.split(|&b| b == b'\n').enumerate() {
        let origin = format!("{FILE_VAR}: {}:{}", path.display(), index + 1);
        let line = std::str::from_utf8(line).map_err(|_| format!("{origin}: not UTF-8"))?;
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        sources.push(Source {
            regex: line.to_owned(),
            group_is_secret: false,
            origin,
        });
    }
    Ok(sources)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::{CONTEXT, Slice, StreamSpec, Window};
    use std::collections::HashSet;
    use std::path::PathBuf;

    // --- fixtures -----------------------------------------------------------------------

    /// Deterministic pseudo-random generator (xorshift64), so tests need no `rand`.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn pick(&mut self, alphabet: &[u8], len: usize) -> String {
            (0..len)
                .map(|_| char::from(alphabet[(self.next() >> 20) as usize % alphabet.len()]))
                .collect()
        }
    }

    const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    const UPPER_ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    const BASE64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const BASE64URL: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    const HEX: &[u8] = b"0123456789abcdef";

    /// AWS's documented example access key id.
    const AWS_EXAMPLE: &str = "AKIAIOSFODNN7EXAMPLE";

    /// A fake token: a prefix and `len` characters of `alphabet`. Tokens are made at run time
    /// so that no token-shaped literal sits in the source for a scanner to flag.
    fn token(rng: &mut Rng, prefix: &str, alphabet: &[u8], len: usize) -> String {
        format!("{prefix}{}", rng.pick(alphabet, len))
    }

    /// A fake PEM private key of realistic shape: `label` (e.g. "RSA "), 64-column base64
    /// lines totalling about `body` bytes, a short last line. Not a key: random base64.
    fn pem(rng: &mut Rng, label: &str, body: usize) -> String {
        let mut out = format!("-----BEGIN {label}PRIVATE KEY-----\n");
        for _ in 0..body / 65 {
            out.push_str(&rng.pick(BASE64, 64));
            out.push('\n');
        }
        out.push_str(&rng.pick(BASE64, 20));
        out.push_str("==\n");
        out.push_str(&format!("-----END {label}PRIVATE KEY-----"));
        out
    }

    /// Standard base64 of `text`, unwrapped (enough of an encoder for test data).
    fn base64_of(text: &str) -> String {
        let mut out = String::new();
        for group in text.as_bytes().chunks(3) {
            let n =
                group.iter().fold(0u32, |n, &b| n << 8 | u32::from(b)) << (8 * (3 - group.len()));
            for i in 0..=group.len() {
                out.push(char::from(BASE64[(n >> (18 - 6 * i)) as usize & 63]));
            }
            out.push_str(&"=".repeat(3 - group.len()));
        }
        out
    }

    fn builtin() -> Redactor {
        match Redactor::from_settings(Some("builtin"), None) {
            Ok(Some(redactor)) => redactor,
            other => panic!("builtin redaction: {other:?}"),
        }
    }

    fn redact(text: &str) -> (String, u64) {
        builtin().redact_text(text.as_bytes())
    }

    /// One ordinary log line: timestamps, hex digests, UUIDs, base64 payloads, URLs,
    /// e-mail addresses. None of it is a secret.
    fn log_line(rng: &mut Rng, i: usize) -> String {
        let uuid = format!(
            "{}-{}-4{}-a{}-{}",
            rng.pick(HEX, 8),
            rng.pick(HEX, 4),
            rng.pick(HEX, 3),
            rng.pick(HEX, 3),
            rng.pick(HEX, 12)
        );
        match i % 5 {
            0 => format!(
                "2025-03-{:02}T12:{:02}:{:02}.{:03}Z INFO  worker[{}]: request id={uuid} took {}ms\n",
                i % 28 + 1,
                i % 60,
                (i / 60) % 60,
                i % 1000,
                i % 8,
                i % 997
            ),
            1 => format!(
                "commit {} sha256:{} https://example.com:8443/api/v1/items?page={i}\n",
                rng.pick(HEX, 40),
                rng.pick(HEX, 64)
            ),
            2 => format!("payload={}== user=ops@example.com\n", rng.pick(BASE64, 62)),
            3 => format!(
                "DEBUG cache key {} ETag \"{}\" git@github.com:org/repo.git\n",
                rng.pick(UPPER_ALNUM, 24),
                rng.pick(BASE64URL, 43)
            ),
            _ => format!(
                "WARN  retry {i}/5: connect to postgres://db.internal:5432/app failed; Authorization required\n"
            ),
        }
    }

    /// A stream of ordinary log lines with secrets planted in it, and where they are (the
    /// range each mask covers, in stream offsets).
    struct Planted {
        bytes: Vec<u8>,
        secrets: Vec<Range<usize>>,
    }

    impl Planted {
        /// At most `size` bytes of log with one of `secrets` after every `every` lines, in turn.
        fn new(size: usize, every: usize, secrets: &[String]) -> Self {
            let mut rng = Rng(0x5EC2E7);
            let (mut bytes, mut ranges) = (Vec::with_capacity(size), Vec::new());
            for i in 1.. {
                let mut line = log_line(&mut rng, i).into_bytes();
                let mut secret = None;
                if i % every == 0 {
                    let text = &secrets[(i / every) % secrets.len()];
                    line.extend_from_slice(b"export VALUE=");
                    secret = Some(line.len()..line.len() + text.len());
                    line.extend_from_slice(text.as_bytes());
                    line.push(b'\n');
                }
                if bytes.len() + line.len() > size {
                    break;
                }
                if let Some(r) = secret {
                    ranges.push(bytes.len() + r.start..bytes.len() + r.end);
                }
                bytes.extend_from_slice(&line);
            }
            Self {
                bytes,
                secrets: ranges,
            }
        }

        /// Every 8-byte piece of every planted secret.
        fn pieces(&self) -> HashSet<&[u8]> {
            self.secrets
                .iter()
                .flat_map(|r| self.bytes[r.clone()].windows(8))
                .collect()
        }

        fn overlapping(&self, range: Range<u64>) -> u64 {
            self.secrets
                .iter()
                .filter(|s| (s.start as u64) < range.end && range.start < s.end as u64)
                .count() as u64
        }
    }

    /// The planted secrets of most shapes, including long PEM blocks.
    fn secrets(rng: &mut Rng) -> Vec<String> {
        vec![
            AWS_EXAMPLE.to_owned(),
            token(rng, "ghp_", ALNUM, 36),
            pem(rng, "RSA ", 1_600),
            token(rng, "github_pat_", ALNUM, 82),
            format!(
                "eyJ{}.eyJ{}.{}",
                rng.pick(BASE64URL, 30),
                rng.pick(BASE64URL, 60),
                rng.pick(BASE64URL, 43)
            ),
            // Longer than twice the context: a page inside it sees neither BEGIN nor END.
            pem(rng, "", 3 * CONTEXT),
            token(rng, "xoxb-", ALNUM, 40),
        ]
    }

    fn window(bytes: &[u8], chunks: &[usize]) -> Window {
        let mut w = Window::new(1 << 20);
        let (mut at, mut sizes) = (0, chunks.iter().cycle());
        while at < bytes.len() {
            let end = (at + sizes.next().copied().unwrap_or(1)).min(bytes.len());
            w.push(&bytes[at..end]);
            at = end;
        }
        w
    }

    fn read(w: &Window, spec: &StreamSpec, redactor: Option<&Redactor>) -> Slice {
        let hook = redactor.map(|r| r as &dyn Redact);
        w.slice_with(spec, hook).expect("a slice")
    }

    fn assert_no_piece(data: &str, pieces: &HashSet<&[u8]>, what: &str) {
        if let Some(piece) = data.as_bytes().windows(8).find(|w| pieces.contains(w)) {
            panic!("{what}: shows {:?}", String::from_utf8_lossy(piece));
        }
    }

    /// A file in the temp directory, removed on drop.
    struct TempFile(PathBuf);

    impl TempFile {
        fn new(name: &str, contents: &str) -> Self {
            let path =
                std::env::temp_dir().join(format!("mcp-exec-redact-{}-{name}", std::process::id()));
            std::fs::write(&path, contents).expect("write the temp file");
            Self(path)
        }
    }

    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    fn from_file(mode: Option<&str>, file: &TempFile) -> Result<Option<Redactor>, String> {
        Redactor::from_settings(mode, Some(&file.0))
    }

    // --- settings -----------------------------------------------------------------------

    #[test]
    fn redaction_is_off_unless_asked_for() {
        for mode in [None, Some(""), Some("off")] {
            assert!(
                matches!(Redactor::from_settings(mode, None), Ok(None)),
                "{mode:?}"
            );
        }
        let empty_path = Path::new("");
        assert!(matches!(
            Redactor::from_settings(None, Some(empty_path)),
            Ok(None)
        ));
    }

    #[test]
    fn builtin_turns_redaction_on() {
        assert!(matches!(
            Redactor::from_settings(Some("builtin"), None),
            Ok(Some(_))
        ));
    }

    #[test]
    fn an_unknown_mode_is_an_error_naming_the_variable_and_the_value() {
        for mode in ["on", "Builtin", " builtin", "true"] {
            let err = Redactor::from_settings(Some(mode), None).expect_err(mode);
            assert!(err.starts_with("MCP_EXEC_REDACT: "), "{err}");
            assert!(err.contains(&format!("{mode:?}")), "{err}");
        }
    }

    #[test]
    fn off_together_with_a_patterns_file_is_an_error() {
        let file = TempFile::new("off.txt", "internal-[0-9]{6}\n");
        let err = from_file(Some("off"), &file).expect_err("contradiction");
        assert!(
            err.contains("MCP_EXEC_REDACT=off") && err.contains("MCP_EXEC_REDACT_PATTERNS_FILE")
        );
    }

    #[test]
    fn a_patterns_file_adds_its_patterns_ignoring_blank_lines_comments_and_edge_spaces() {
        let file = TempFile::new(
            "add.txt",
            "# internal ids\n\n   \n  internal-[0-9]{6}  \r\n\t# another comment\nsecret=\\w+\n",
        );
        let redactor = from_file(Some("builtin"), &file).unwrap().unwrap();
        let (text, n) = redactor
            .redact_text(format!("a internal-123456 b {AWS_EXAMPLE} c secret=xyz d").as_bytes());
        assert_eq!(text, "a [REDACTED] b [REDACTED] c [REDACTED] d");
        assert_eq!(n, 3);
    }

    #[test]
    fn a_patterns_file_alone_redacts_with_only_its_own_patterns() {
        let file = TempFile::new("alone.txt", "internal-[0-9]{6}\n");
        for mode in [None, Some("")] {
            let redactor = from_file(mode, &file).unwrap().unwrap();
            let (text, n) =
                redactor.redact_text(format!("internal-123456 {AWS_EXAMPLE}").as_bytes());
            assert_eq!(
                (text.as_str(), n),
                (format!("[REDACTED] {AWS_EXAMPLE}").as_str(), 1)
            );
        }
    }

    #[test]
    fn a_file_pattern_masks_its_whole_match_even_when_it_has_groups() {
        let file = TempFile::new("groups.txt", "(password)=(\\S+)\n");
        let redactor = from_file(None, &file).unwrap().unwrap();
        assert_eq!(
            redactor.redact_text(b"login password=hunter2 ok").0,
            "login [REDACTED] ok"
        );
    }

    #[test]
    fn file_patterns_are_ascii_byte_patterns_with_line_anchors() {
        let file = TempFile::new("anchors.txt", "^token: \\w+$\n(?i)passphrase \\d+\n");
        let redactor = from_file(None, &file).unwrap().unwrap();
        let (text, n) =
            redactor.redact_text(b"x\ntoken: abc\r\nPassPhrase 42\xff\nnot token: abc\n");
        assert_eq!(
            text,
            "x\n[REDACTED]\r\n[REDACTED]\u{FFFD}\nnot token: abc\n"
        );
        assert_eq!(n, 2);
    }

    #[test]
    fn an_invalid_pattern_is_an_error_with_file_line_and_the_regex_error() {
        let file = TempFile::new("invalid.txt", "# ok\nfine-[0-9]+\nbroken(\n");
        let err = from_file(Some("builtin"), &file).expect_err("invalid");
        let at = format!(
            "MCP_EXEC_REDACT_PATTERNS_FILE: {}:3: invalid pattern",
            file.0.display()
        );
        assert!(err.starts_with(&at), "{err}");
        assert!(err.contains("unclosed group"), "{err}");
    }

    #[test]
    fn a_unicode_class_is_refused_since_patterns_match_bytes() {
        let file = TempFile::new("unicode.txt", "\\p{Greek}+\n");
        let err = from_file(None, &file).expect_err("no unicode classes");
        assert!(err.contains(":1: invalid pattern"), "{err}");
    }

    #[test]
    fn an_unreadable_patterns_file_is_an_error_naming_it() {
        let missing = std::env::temp_dir().join("mcp-exec-redact-no-such-file");
        let err = Redactor::from_settings(Some("builtin"), Some(&missing)).expect_err("missing");
        assert!(
            err.starts_with(&format!(
                "MCP_EXEC_REDACT_PATTERNS_FILE: cannot read {}",
                missing.display()
            )),
            "{err}"
        );
    }

    #[test]
    fn a_pattern_that_matches_the_empty_string_is_refused() {
        let file = TempFile::new("empty-match.txt", "x\ny*\n");
        let err = from_file(None, &file).expect_err("empty match");
        assert!(
            err.contains(":2: pattern \"y*\" matches the empty string"),
            "{err}"
        );
    }

    #[test]
    fn a_patterns_file_that_is_not_utf8_is_an_error_with_its_line() {
        let path =
            std::env::temp_dir().join(format!("mcp-exec-redact-{}-latin1", std::process::id()));
        std::fs::write(&path, b"ok\ncaf\xe9\n").unwrap();
        let file = TempFile(path);
        let err = from_file(None, &file).expect_err("not UTF-8");
        assert!(err.ends_with(":2: not UTF-8"), "{err}");
    }

    #[test]
    fn a_patterns_file_without_patterns_is_an_error_unless_builtin_is_on() {
        let file = TempFile::new("comments.txt", "# nothing yet\n\n");
        let err = from_file(None, &file).expect_err("nothing to redact with");
        assert!(err.contains("has no patterns"), "{err}");
        assert!(matches!(from_file(Some("builtin"), &file), Ok(Some(_))));
    }

    // --- the builtin patterns -----------------------------------------------------------

    #[test]
    fn each_builtin_secret_shape_is_masked_and_labels_stay() {
        let mut rng = Rng(42);
        let cases: Vec<(String, String)> = vec![
            (
                format!("key {AWS_EXAMPLE} end"),
                "key [REDACTED] end".into(),
            ),
            (
                format!(
                    "AWS_ACCESS_KEY_ID={}",
                    token(&mut rng, "ASIA", UPPER_ALNUM, 16)
                ),
                "AWS_ACCESS_KEY_ID=[REDACTED]".into(),
            ),
            (token(&mut rng, "ghp_", ALNUM, 36), MARKER.into()),
            (
                format!("GH_TOKEN={} x", token(&mut rng, "ghs_", ALNUM, 36)),
                "GH_TOKEN=[REDACTED] x".into(),
            ),
            (token(&mut rng, "gho_", ALNUM, 36), MARKER.into()),
            (token(&mut rng, "ghu_", ALNUM, 36), MARKER.into()),
            (token(&mut rng, "ghr_", ALNUM, 36), MARKER.into()),
            (token(&mut rng, "github_pat_", ALNUM, 82), MARKER.into()),
            (token(&mut rng, "glpat-", ALNUM, 20), MARKER.into()),
            (
                format!(
                    "{}-{}-{}",
                    token(&mut rng, "xoxb-", b"0123456789", 12),
                    rng.pick(b"0123456789", 13),
                    rng.pick(ALNUM, 24)
                ),
                MARKER.into(),
            ),
            (token(&mut rng, "xoxp-", ALNUM, 60), MARKER.into()),
            (token(&mut rng, "xapp-1-", ALNUM, 40), MARKER.into()),
            (
                format!(
                    "POST https://hooks.slack.com/services/T{}/B{}/{}",
                    rng.pick(UPPER_ALNUM, 8),
                    rng.pick(UPPER_ALNUM, 8),
                    rng.pick(ALNUM, 24)
                ),
                "POST https://hooks.slack.com/services/[REDACTED]".into(),
            ),
            (
                "Authorization: Bearer abc.DEF-123_x~y+z/0=".into(),
                "Authorization: Bearer [REDACTED]".into(),
            ),
            (
                "> authorization: bearer tok".into(),
                "> authorization: bearer [REDACTED]".into(),
            ),
            (
                r#"{"Authorization": "Basic dXNlcjpwYXNz"}"#.into(),
                r#"{"Authorization": "Basic [REDACTED]"}"#.into(),
            ),
            (
                "-H 'Proxy-Authorization: Token t0k3n'".into(),
                "-H 'Proxy-Authorization: Token [REDACTED]'".into(),
            ),
            (
                "AUTHORIZATION=Bearer xyz".into(),
                "AUTHORIZATION=Bearer [REDACTED]".into(),
            ),
            (token(&mut rng, "AIza", BASE64URL, 35), MARKER.into()),
            (token(&mut rng, "sk_live_", ALNUM, 24), MARKER.into()),
            (token(&mut rng, "rk_live_", ALNUM, 24), MARKER.into()),
            (token(&mut rng, "sk_test_", ALNUM, 24), MARKER.into()),
            (token(&mut rng, "sk-proj-", BASE64URL, 80), MARKER.into()),
            (
                format!("sk-{}T3BlbkFJ{}", rng.pick(ALNUM, 20), rng.pick(ALNUM, 20)),
                MARKER.into(),
            ),
            (
                token(&mut rng, "sk-ant-api03-", BASE64URL, 93),
                MARKER.into(),
            ),
            (token(&mut rng, "npm_", ALNUM, 36), MARKER.into()),
            (
                token(&mut rng, "pypi-AgEIcHlwaS5vcmc", BASE64URL, 70),
                MARKER.into(),
            ),
            (
                token(
                    &mut rng,
                    "hf_",
                    b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
                    34,
                ),
                MARKER.into(),
            ),
            (
                format!(
                    "jwt eyJ{}.eyJ{}.{}",
                    rng.pick(BASE64URL, 20),
                    rng.pick(BASE64URL, 40),
                    rng.pick(BASE64URL, 43)
                ),
                "jwt [REDACTED]".into(),
            ),
            (
                "DATABASE_URL=postgres://app:s3cr3t@db:5432/app".into(),
                "DATABASE_URL=postgres://app:[REDACTED]@db:5432/app".into(),
            ),
            (
                "redis://:hunter2@cache:6379/0".into(),
                "redis://:[REDACTED]@cache:6379/0".into(),
            ),
            (
                format!("{}\n", pem(&mut rng, "RSA ", 200)),
                "[REDACTED]\n".into(),
            ),
            (
                format!(
                    "  tls.key: {}\n  tls.crt: x\n",
                    base64_of(&pem(&mut rng, "EC ", 200))
                ),
                "  tls.key: [REDACTED]\n  tls.crt: x\n".into(),
            ),
            (
                format!("{}\n", &pem(&mut rng, "", 200)[40..]),
                "[REDACTED]\n".into(),
            ),
        ];
        let redactor = builtin();
        for (input, expected) in &cases {
            let (text, n) = redactor.redact_text(input.as_bytes());
            assert_eq!(&text, expected, "input {input:?}");
            assert_eq!(n, 1, "input {input:?}");
        }
        // Every builtin pattern has a case here (a new one needs one).
        let uncovered: Vec<&str> = BUILTIN
            .iter()
            .filter(|b| {
                let alone = builder(&b.regex.replace("{PEM}", PEM_LABEL))
                    .build()
                    .unwrap();
                !cases
                    .iter()
                    .any(|(input, _)| alone.is_match(input.as_bytes()))
            })
            .map(|b| b.name)
            .collect();
        assert!(uncovered.is_empty(), "no case for {uncovered:?}");
    }

    #[test]
    fn a_pem_private_key_block_is_one_match_whatever_its_kind() {
        let mut rng = Rng(7);
        for label in ["RSA ", "EC ", "DSA ", "OPENSSH ", "ENCRYPTED ", ""] {
            let block = pem(&mut rng, label, 1_700);
            let (text, n) = redact(&format!("$ cat key\n{block}\n$ next\n"));
            assert_eq!(
                (text.as_str(), n),
                ("$ cat key\n[REDACTED]\n$ next\n", 1),
                "{label:?}"
            );
        }
    }

    #[test]
    fn a_pgp_private_key_block_with_headers_is_one_match() {
        let mut rng = Rng(8);
        let block = format!(
            "-----BEGIN PGP PRIVATE KEY BLOCK-----\nComment: test key\n\n{}\n{}\n={}\n-----END PGP PRIVATE KEY BLOCK-----",
            rng.pick(BASE64, 64),
            rng.pick(BASE64, 40),
            rng.pick(BASE64, 4)
        );
        assert_eq!(redact(&format!("{block}\n")), ("[REDACTED]\n".into(), 1));
    }

    #[test]
    fn a_legacy_encrypted_pem_key_with_rfc_1421_headers_is_one_match() {
        let mut rng = Rng(9);
        let block = format!(
            "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,{}\n\n{}\n{}\n-----END RSA PRIVATE KEY-----",
            rng.pick(b"0123456789ABCDEF", 32),
            rng.pick(BASE64, 64),
            rng.pick(BASE64, 30)
        );
        assert_eq!(redact(&block), ("[REDACTED]".into(), 1));
    }

    #[test]
    fn a_json_escaped_or_indented_pem_key_is_one_match() {
        let mut rng = Rng(10);
        let (a, b) = (rng.pick(BASE64, 64), rng.pick(BASE64, 64));
        let json = format!(
            r#"{{"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----\n{a}\n{b}\n-----END PRIVATE KEY-----\n", "client_email": "x@y.iam"}}"#
        );
        let (text, n) = redact(&json);
        assert_eq!(n, 1);
        assert_eq!(
            text,
            r#"{"type": "service_account", "private_key": "[REDACTED]\n", "client_email": "x@y.iam"}"#
        );
        let yaml = format!(
            "tls:\n  key: |\n    -----BEGIN EC PRIVATE KEY-----\n    {a}\n    {b}\n    -----END EC PRIVATE KEY-----\n  cert: x\n"
        );
        assert_eq!(
            redact(&yaml),
            ("tls:\n  key: |\n    [REDACTED]\n  cert: x\n".into(), 1)
        );
    }

    #[test]
    fn a_base64_encoded_key_is_one_match_whatever_its_label_and_wrapping() {
        let mut rng = Rng(15);
        for label in ["RSA ", "EC ", "", "OPENSSH ", "ENCRYPTED ", "PGP "] {
            let encoded = base64_of(&pem(&mut rng, label, 700));
            assert_eq!(
                redact(&format!("key: {encoded}\n")),
                ("key: [REDACTED]\n".into(), 1),
                "{label:?}"
            );
            let wrapped: Vec<&str> = encoded
                .as_bytes()
                .chunks(76)
                .map(|line| std::str::from_utf8(line).unwrap())
                .collect();
            let text = format!("$ base64 key.pem\n{}\n$ ls\n", wrapped.join("\n"));
            assert_eq!(
                redact(&text),
                ("$ base64 key.pem\n[REDACTED]\n$ ls\n".into(), 1),
                "{label:?}"
            );
        }
    }

    #[test]
    fn public_keys_and_certificates_are_left_alone() {
        let mut rng = Rng(11);
        for label in [
            "PUBLIC KEY",
            "CERTIFICATE",
            "RSA PUBLIC KEY",
            "PGP PUBLIC KEY BLOCK",
        ] {
            let block = format!(
                "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
                rng.pick(BASE64, 64)
            );
            assert_eq!(redact(&block), (block.clone(), 0), "{label}");
            let encoded = base64_of(&block);
            assert_eq!(redact(&encoded), (encoded.clone(), 0), "base64 of {label}");
        }
    }

    #[test]
    fn a_key_still_being_written_is_masked_up_to_where_it_stops() {
        let mut rng = Rng(12);
        let block = pem(&mut rng, "RSA ", 1_700);
        let (head, tail) = block.split_at(block.len() / 2);
        let mut w = Window::new(1 << 20);
        w.push(b"$ cat id_rsa\n");
        w.push(head.as_bytes());
        let r = builtin();
        let partial = read(&w, &StreamSpec::All, Some(&r));
        assert_eq!(
            (partial.data.as_str(), partial.redacted),
            ("$ cat id_rsa\n[REDACTED]", Some(1))
        );
        w.push(tail.as_bytes());
        w.push(b"\n$ done.\n");
        let whole = read(&w, &StreamSpec::All, Some(&r));
        assert_eq!(
            (whole.data.as_str(), whole.redacted),
            ("$ cat id_rsa\n[REDACTED]\n$ done.\n", Some(1))
        );
    }

    #[test]
    fn an_end_line_whose_begin_is_out_of_sight_masks_the_body_before_it() {
        let mut rng = Rng(13);
        let block = pem(&mut rng, "", 2_000);
        let cut = block.find('\n').unwrap() + 300;
        let (text, n) = redact(&format!("{}\nok\n", &block[cut..]));
        assert_eq!((text.as_str(), n), ("[REDACTED]\nok\n", 1));
    }

    #[test]
    fn a_key_split_across_chunks_is_masked_in_each_chunk_without_context() {
        let mut rng = Rng(14);
        let block = pem(&mut rng, "OPENSSH ", 2_500);
        let stream = format!("before: x.\n{block}\nafter: y.\n");
        let body = stream.find("KEY-----\n").unwrap() + 9..stream.find("-----END").unwrap();
        let planted = Planted {
            secrets: vec![body.clone()],
            bytes: stream.clone().into_bytes(),
        };
        let pieces = planted.pieces();
        let r = builtin();
        // Cuts inside the BEGIN line, just after it, inside the body, inside the END line.
        for cut in [
            12,
            40,
            body.start,
            body.start + 1,
            700,
            1_500,
            body.end - 1,
            body.end + 5,
        ] {
            let (first, second) = stream.as_bytes().split_at(cut);
            for (i, chunk) in [first, second].into_iter().enumerate() {
                let (text, n) = r.redact_text(chunk);
                let what = format!("cut {cut}, chunk {i}: {text:?}");
                assert_no_piece(&text, &pieces, &what);
                // A chunk is recognisably part of a key once it holds a whole BEGIN line
                // (which ends just before the body), a body byte, or a whole END line.
                let recognisable = if i == 0 {
                    cut >= body.start - 1
                } else {
                    cut <= body.end
                };
                assert_eq!(n, u64::from(recognisable), "{what}");
            }
        }
    }

    #[test]
    fn a_secret_cut_by_a_slice_edge_is_masked_on_both_sides_with_context() {
        let r = builtin();
        let stream = format!("aws_access_key_id = {AWS_EXAMPLE}\nnext line\n");
        let at = stream.find(AWS_EXAMPLE).unwrap() as u64;
        let w = window(stream.as_bytes(), &[stream.len()]);
        let spec = |from, length| StreamSpec::From {
            from,
            length: Some(length),
            unaligned: false,
        };
        let left = read(&w, &spec(0, at + 6), Some(&r));
        let right = read(&w, &spec(at + 6, 100), Some(&r));
        assert_eq!(
            (left.data.as_str(), left.redacted),
            ("aws_access_key_id = [REDACTED]", Some(1))
        );
        assert_eq!(
            (right.data.as_str(), right.redacted),
            ("[REDACTED]\nnext line\n", Some(1))
        );
        // Without context the halves are not recognisable: that is what the context is for.
        assert_eq!(r.redact_text(&stream.as_bytes()[..(at + 6) as usize]).1, 0);
    }

    #[test]
    fn invalid_utf8_around_a_secret_is_sanitised_and_the_secret_masked() {
        let mut bytes = b"\xff\xfe ".to_vec();
        bytes.extend_from_slice(AWS_EXAMPLE.as_bytes());
        bytes.extend_from_slice(b" \xc3\x28 ok");
        assert_eq!(
            builtin().redact_text(&bytes),
            ("\u{FFFD} [REDACTED] \u{FFFD}( ok".into(), 1)
        );
    }

    #[test]
    fn adjacent_secrets_are_counted_and_masked_one_by_one() {
        let line = format!("{AWS_EXAMPLE} {AWS_EXAMPLE}\n{AWS_EXAMPLE}");
        assert_eq!(
            redact(&line),
            ("[REDACTED] [REDACTED]\n[REDACTED]".into(), 3)
        );
    }

    // --- no false positives -------------------------------------------------------------

    #[test]
    fn ordinary_output_is_left_exactly_as_it_was() {
        let mut rng = Rng(99);
        let mut log = String::new();
        for i in 0..20_000 {
            log.push_str(&log_line(&mut rng, i));
        }
        // Things that look a little like secrets but are not.
        log.push_str(concat!(
            "Authorization: required\nAuthorization header missing; Bearer authentication is used\n",
            "task-runner disk_live_check sk-learn ghp_short AKIA1234 eyJhbGciOiJIUzI1NiJ9\n",
            "ssh://git@github.com/org/repo http://localhost:8080/x?a=b@c user@example.com\n",
            "http://[::1]:8080/ -----BEGIN CERTIFICATE----- -----END CERTIFICATE-----\n",
            "hf_hub_download xoxo hooks.slack.com/services/ password: ******\n",
        ));
        // A base64 dump shaped like a PEM body, without the markers (`base64 -w 64`).
        for _ in 0..200 {
            log.push_str(&rng.pick(BASE64, 64));
            log.push('\n');
        }
        let (text, n) = redact(&log);
        assert_eq!(n, 0);
        assert!(text == log, "ordinary output changed");
    }

    #[test]
    fn without_matches_a_redacted_slice_is_byte_identical_to_an_unredacted_one() {
        let mut rng = Rng(98);
        let log: String = (0..5_000).map(|i| log_line(&mut rng, i)).collect();
        let w = window(log.as_bytes(), &[4_093, 17, 65_521]);
        let r = builtin();
        let specs = [
            StreamSpec::All,
            StreamSpec::Tail(10),
            StreamSpec::From {
                from: 1_000,
                length: Some(10_000),
                unaligned: false,
            },
            StreamSpec::From {
                from: 5,
                length: None,
                unaligned: true,
            },
        ];
        for spec in specs {
            let plain = serde_json::to_string(&read(&w, &spec, None)).unwrap();
            let redacted = serde_json::to_string(&read(&w, &spec, Some(&r))).unwrap();
            assert!(plain == redacted, "{spec:?}");
        }
    }

    // --- the live edge ------------------------------------------------------------------

    /// What a reader that follows a live stream sees: `chunks` pushed one by one, after each a
    /// live read from where the last one stopped; then, once the stream has ended, the rest.
    fn follow_live(chunks: &[&[u8]], redact: &dyn Redact) -> Vec<String> {
        let mut w = Window::new(1 << 20);
        let spec = |from| StreamSpec::From {
            from,
            length: None,
            unaligned: false,
        };
        let (mut next, mut seen) = (0, Vec::new());
        for chunk in chunks {
            w.push(chunk);
            let page = w.slice_live(&spec(next), Some(redact)).expect("a slice");
            assert_eq!(page.offset, next, "pages are contiguous");
            assert_eq!(
                page.total_bytes,
                w.total(),
                "total_bytes counts held bytes too"
            );
            next = page.offset + page.bytes;
            seen.push(page.data);
        }
        let last = w.slice_with(&spec(next), Some(redact)).expect("a slice");
        assert_eq!(
            last.offset + last.bytes,
            w.total(),
            "the end releases the rest"
        );
        seen.push(last.data);
        seen
    }

    /// The builtin redactor without a live edge: what every read did before it.
    struct NoHoldBack(Redactor);

    impl Redact for NoHoldBack {
        fn redact(&self, text: &[u8], data: Range<usize>) -> (String, u64) {
            self.0.redact(text, data)
        }

        fn wants_wider(&self, side: &[u8]) -> bool {
            self.0.wants_wider(side)
        }
    }

    #[test]
    fn a_url_password_is_not_shown_before_the_at_sign_that_completes_it() {
        let chunks: [&[u8]; 2] = [b"db=postgres://admin:hunter2hunter2", b"@db/app\n"];
        assert_eq!(
            follow_live(&chunks, &builtin()),
            ["db=postgres", "://admin:[REDACTED]@db/app\n", ""]
        );
        // Without the live edge the first read showed the whole password.
        assert_eq!(
            follow_live(&chunks, &NoHoldBack(builtin()))[0],
            "db=postgres://admin:hunter2hunter2"
        );
    }

    #[test]
    fn a_github_token_written_in_two_parts_shows_no_character_of_itself() {
        let mut rng = Rng(20);
        let token = token(&mut rng, "ghp_", ALNUM, 36);
        let (first, second) = token.split_at(22);
        let chunks = [format!("token: {first}"), format!("{second}\nnext\n")];
        let chunks: Vec<&[u8]> = chunks.iter().map(|c| c.as_bytes()).collect();
        assert_eq!(
            follow_live(&chunks, &builtin()),
            ["token: ", "[REDACTED]\nnext\n", ""]
        );
        let before = follow_live(&chunks, &NoHoldBack(builtin()));
        assert_eq!(before[0], format!("token: {first}"), "{before:?}");
    }

    #[test]
    fn every_beginning_of_every_builtin_shape_is_held_back_whole() {
        let mut rng = Rng(21);
        let mut shapes = secrets(&mut rng);
        shapes.extend([
            "postgres://admin:hunter2hunter2@db".to_owned(),
            format!("Authorization: Bearer {}", rng.pick(BASE64URL, 40)),
            token(&mut rng, "AIza", ALNUM, 35),
            token(&mut rng, "sk_live_", ALNUM, 24),
            token(&mut rng, "npm_", ALNUM, 36),
            token(&mut rng, "hf_", b"abcdefghijklmnopqrstuvwxyz", 34),
            format!("hooks.slack.com/services/{}", rng.pick(ALNUM, 30)),
            base64_of("-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n"),
        ]);
        let r = builtin();
        for shape in &shapes {
            let full = format!("noise, then {shape}");
            assert_eq!(r.redact_text(full.as_bytes()).1, 1, "{shape} is a secret");
            // From where the whole match begins (a label before a masked group included:
            // `://admin:`, `Authorization: `), every byte written so far is held.
            // Once the match is whole (`…@`), it is decided and masked, and may be shown.
            let (at, end) = r
                .regex
                .find(full.as_bytes())
                .map_or((0, 0), |m| (m.start(), m.end()));
            for cut in at + 1..end.min(at + HOLD_BACK) {
                let held = r.held_back(&full.as_bytes()[..cut]);
                assert!(
                    held >= cut - at,
                    "{shape:?} cut at {}: held {held}",
                    cut - at
                );
            }
        }
    }

    #[test]
    fn ordinary_output_is_held_back_nothing_at_its_line_ends() {
        let mut rng = Rng(22);
        let r = builtin();
        let mut log = String::new();
        for i in 0..2_000 {
            log.push_str(&log_line(&mut rng, i));
            assert_eq!(r.held_back(log.as_bytes()), 0, "{log:?}");
        }
        // Mid-line, only a tail that could still begin a shape is held.
        assert_eq!(
            r.held_back(b"see https://example.com"),
            "://example.com".len()
        );
        assert_eq!(r.held_back(b"see https://example.com/path."), 0);
        assert_eq!(r.held_back(b"key AKIAIOSF"), "AKIAIOSF".len());
        assert_eq!(r.held_back(b"key AKIA."), 0);
        // A lone `x` could begin `xoxb-`, a `-` the `-----BEGIN` of a key.
        assert_eq!(r.held_back(b"max"), 1);
        assert_eq!(r.held_back(b"a -"), 1);
    }

    #[test]
    fn no_more_than_the_bound_is_held_back() {
        let r = builtin();
        // A URL user and password of `HOLD_BACK - 4` bytes: held whole.
        let mut text = b"x://".to_vec();
        text.extend(std::iter::repeat_n(b'b', HOLD_BACK - 4));
        assert_eq!(r.held_back(&text), HOLD_BACK - 1);
        let mut w = Window::new(1 << 20);
        w.push(&text);
        assert_eq!(w.live_end(&r), 1);
        // Longer: its beginning is out of reach, as it is for a later read's context.
        text.extend(std::iter::repeat_n(b'b', 2 * HOLD_BACK));
        assert_eq!(r.held_back(&text), 0);
        w.push(&[b'b'; 2 * HOLD_BACK]);
        assert_eq!(w.live_end(&r), w.total());
    }

    #[test]
    fn a_file_pattern_is_held_back_from_where_it_could_begin() {
        let file = TempFile::new(
            "live.txt",
            "internal-[0-9]{6}\n(?i)secret=\\S+\n^tok[a-z]{3}$\n",
        );
        let r = from_file(None, &file).unwrap().unwrap();
        assert_eq!(r.held_back(b"id internal-12"), "internal-12".len());
        assert_eq!(r.held_back(b"id internal-12x"), 0);
        assert_eq!(r.held_back(b"a SeCrEt=ab"), "SeCrEt=ab".len());
        // Assertions are dropped: held even where `^` would not match (sound, wider).
        assert_eq!(r.held_back(b"x tokab"), "tokab".len());
        assert_eq!(r.held_back(b"x tokabcd"), 0);
    }

    #[test]
    fn a_live_read_never_ends_inside_a_character() {
        // A byte pattern that begins inside a character: the character is held whole.
        let file = TempFile::new("byte.txt", "(?-u:\\x82)secret\n");
        let r = from_file(None, &file).unwrap().unwrap();
        let mut w = Window::new(64);
        w.push("a\u{2082}".as_bytes()); // E2 82 82
        assert_eq!(w.live_end(&r), 1);
    }

    #[test]
    fn secrets_in_a_log_followed_live_in_odd_chunks_never_show_a_piece() {
        let mut rng = Rng(23);
        let planted = Planted::new(96 << 10, 13, &secrets(&mut rng));
        let pieces = planted.pieces();
        let mut sizes = Rng(24);
        let mut chunks = Vec::new();
        let mut at = 0;
        while at < planted.bytes.len() {
            let size = 1 + (sizes.next() >> 20) as usize % 97;
            let end = (at + size).min(planted.bytes.len());
            chunks.push(&planted.bytes[at..end]);
            at = end;
        }
        let r = builtin();
        let seen = follow_live(&chunks, &r).concat();
        assert_no_piece(&seen, &pieces, "followed live");
        // The same chunks read without the live edge show pieces: the test can fail.
        let before = follow_live(&chunks, &NoHoldBack(builtin())).concat();
        assert!(
            before.as_bytes().windows(8).any(|w| pieces.contains(w)),
            "without the live edge a piece shows"
        );
    }

    // --- bulk output through the window -------------------------------------------------

    #[test]
    fn secrets_in_a_1_mib_log_pushed_in_odd_chunks_are_masked_in_every_whole_read() {
        let mut rng = Rng(1);
        let planted = Planted::new(1 << 20, 97, &secrets(&mut rng));
        let pieces = planted.pieces();
        let w = window(&planted.bytes, &[4_093, 1, 17, 65_521, 333, 8_191]);
        assert_eq!(w.dropped(), 0, "the whole log fits the window");
        let r = builtin();
        let all = read(&w, &StreamSpec::All, Some(&r));
        let plain = read(&w, &StreamSpec::All, None);
        assert_no_piece(&all.data, &pieces, "all");
        assert_eq!(all.redacted, Some(planted.secrets.len() as u64));
        assert_eq!(
            (all.offset, all.bytes, all.total_bytes),
            (plain.offset, plain.bytes, plain.total_bytes)
        );
        // What is left is exactly the log with each secret replaced.
        let mut expected = Vec::new();
        let mut at = 0;
        for secret in &planted.secrets {
            expected.extend_from_slice(&planted.bytes[at..secret.start]);
            expected.extend_from_slice(MARKER.as_bytes());
            at = secret.end;
        }
        expected.extend_from_slice(&planted.bytes[at..]);
        assert!(all.data.as_bytes() == expected, "only the secrets changed");

        let tail = read(&w, &StreamSpec::Tail(400), Some(&r));
        assert_no_piece(&tail.data, &pieces, "tail");
        let range = tail.offset..tail.offset + tail.bytes;
        assert_eq!(tail.redacted.unwrap_or(0), planted.overlapping(range));
    }

    #[test]
    fn paging_with_sizes_that_cut_secrets_never_shows_a_piece_of_one() {
        let mut rng = Rng(2);
        let planted = Planted::new(256 << 10, 29, &secrets(&mut rng));
        let pieces = planted.pieces();
        let w = window(&planted.bytes, &[65_521, 7, 4_099]);
        assert!(
            planted.overlapping(0..40 << 10) >= 7,
            "every kind in the first 40 KiB"
        );
        let r = builtin();
        // (page size, bytes paged through): the small pages only over the first 40 KiB,
        // which holds every kind of secret, to keep the debug build's test time down.
        for (page, through) in [
            (100, 40 << 10),
            (997, w.total()),
            (4_095, w.total()),
            (4_097, w.total()),
            (10_007, w.total()),
        ] {
            let (mut next, mut counted) = (0, 0);
            while next < through {
                let spec = StreamSpec::From {
                    from: next,
                    length: Some(page),
                    unaligned: false,
                };
                let redacted = read(&w, &spec, Some(&r));
                let plain = read(&w, &spec, None);
                assert_eq!(
                    (redacted.offset, redacted.bytes, redacted.total_bytes),
                    (plain.offset, plain.bytes, plain.total_bytes),
                    "offsets describe the raw stream"
                );
                let what = format!("page of {page} at {next}");
                assert_no_piece(&redacted.data, &pieces, &what);
                let expected =
                    planted.overlapping(redacted.offset..redacted.offset + redacted.bytes);
                assert_eq!(redacted.redacted.unwrap_or(0), expected, "{what}");
                counted += expected;
                next = redacted.offset + redacted.bytes;
            }
            // Every secret is counted once per page it touches, so at least once.
            let secrets = planted.overlapping(0..next);
            assert!(counted >= secrets, "page {page}: {counted} < {secrets}");
        }
    }

    #[test]
    fn a_page_deep_inside_a_long_key_is_masked_whole() {
        let mut rng = Rng(3);
        let block = pem(&mut rng, "RSA ", 4 * CONTEXT);
        let stream = format!("start.\n{block}\nend.\n");
        let w = window(stream.as_bytes(), &[1_000]);
        let begin = stream.find("-----BEGIN").unwrap() as u64;
        let r = builtin();
        // Neither the BEGIN nor the END line is within 4 KiB of this page.
        let from = begin + 2 * CONTEXT as u64;
        let spec = StreamSpec::From {
            from,
            length: Some(100),
            unaligned: false,
        };
        let page = read(&w, &spec, Some(&r));
        assert_eq!((page.data.as_str(), page.redacted), ("[REDACTED]", Some(1)));
    }

    #[test]
    fn a_page_whose_context_begins_inside_the_begin_line_is_masked() {
        let mut rng = Rng(8);
        let block = pem(&mut rng, "", 3 * CONTEXT);
        let stream = format!("start.\n{block}\nend.\n");
        let w = window(stream.as_bytes(), &[1_000]);
        let begin = stream.find("-----BEGIN").unwrap() as u64;
        let r = builtin();
        // 4 KiB before the page is the middle of the BEGIN line; the END is far ahead.
        for into_line in [1, 11, 17, 26] {
            let spec = StreamSpec::From {
                from: begin + into_line + CONTEXT as u64,
                length: Some(80),
                unaligned: false,
            };
            let page = read(&w, &spec, Some(&r));
            assert_eq!((page.data.as_str(), page.redacted), ("[REDACTED]", Some(1)));
        }
    }

    #[test]
    fn a_window_whose_head_dropped_the_begin_line_still_masks_the_rest_of_the_key() {
        let mut rng = Rng(4);
        let block = pem(&mut rng, "EC ", 3 * CONTEXT);
        let mut w = Window::new(2 * CONTEXT);
        w.push(b"noise\n");
        w.push(block.as_bytes());
        w.push(b"\nafter.\n");
        assert!(w.dropped() > 100, "the head cut the block");
        let r = builtin();
        let all = read(&w, &StreamSpec::All, Some(&r));
        assert_eq!(
            (all.data.as_str(), all.redacted),
            ("[REDACTED]\nafter.\n", Some(1))
        );
        // A small page at the head: the END line is more than 4 KiB ahead.
        let spec = StreamSpec::From {
            from: 0,
            length: Some(50),
            unaligned: false,
        };
        let page = read(&w, &spec, Some(&r));
        assert_eq!((page.data.as_str(), page.redacted), ("[REDACTED]", Some(1)));
    }

    #[test]
    fn wider_context_is_asked_for_only_inside_what_could_be_a_key_body() {
        let r = builtin();
        assert!(r.wants_wider(b"MIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nBKcwggSjAgEAAoIBAQC7\n"));
        assert!(!r.wants_wider(b"2025-03-01T12:00:00Z INFO ok\n"));
        assert!(!r.wants_wider(b""));
        // The side's edge cut the BEGIN (or END) line: the rest of it, then body.
        assert!(r.wants_wider(b"ATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n"));
        assert!(r.wants_wider(b"MIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END RSA PRI"));
        assert!(!r.wants_wider(b"ATE KEY-----\nnot: a body\n"));
        let file = TempFile::new("no-pem.txt", "internal-[0-9]{6}\n");
        let only_file = from_file(None, &file).unwrap().unwrap();
        assert!(!only_file.wants_wider(b"MIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n"));
    }

    /// Not a pass/fail test: prints how long finding the live edge of a 4 KiB tail takes.
    /// `cargo test --release --lib -- --ignored --nocapture finding_the_live_edge`
    #[test]
    #[ignore = "a measurement, not a check; run by hand with --release"]
    fn finding_the_live_edge_is_timed() {
        let started = std::time::Instant::now();
        let r = builtin();
        println!("building the builtin redactor: {:?}", started.elapsed());
        let mut rng = Rng(9);
        let log: String = (0..200).map(|i| log_line(&mut rng, i)).collect();
        let tails: [(&str, Vec<u8>); 4] = [
            ("a log", log.as_bytes()[log.len() - HOLD_BACK..].to_vec()),
            (
                "a URL user",
                [b"x://".as_slice(), &[b'b'; HOLD_BACK - 4]].concat(),
            ),
            (
                "a PEM body",
                pem(&mut rng, "RSA ", 2 * HOLD_BACK).into_bytes()[..HOLD_BACK].to_vec(),
            ),
            ("eyJ runs", b"eyJ".repeat(HOLD_BACK / 3)),
        ];
        for (name, tail) in tails {
            let runs = 200;
            let started = std::time::Instant::now();
            let mut held = 0;
            for _ in 0..runs {
                held = std::hint::black_box(r.held_back(&tail));
            }
            println!(
                "4 KiB tail, {name}: {:?} (holds {held})",
                started.elapsed() / runs
            );
        }
    }

    /// Not a pass/fail test: prints how long redacting a full 1 MiB window takes.
    /// `cargo test --release -p mcp-exec --bins -- --ignored --nocapture redacting_a_full`
    #[test]
    #[ignore = "a measurement, not a check; run by hand with --release"]
    fn redacting_a_full_1_mib_window_is_timed() {
        let mut rng = Rng(5);
        let planted = Planted::new(1 << 20, 500, &secrets(&mut rng));
        let mut w = Window::new(1 << 20);
        w.push(&planted.bytes);
        let started = std::time::Instant::now();
        let r = builtin();
        println!("building the builtin redactor: {:?}", started.elapsed());
        let mut rng = Rng(6);
        let base64: String = (0..(1 << 20) / 65)
            .map(|_| rng.pick(BASE64, 64) + "\n")
            .collect();
        let mut b = Window::new(1 << 20);
        b.push(base64.as_bytes());
        let mut rng = Rng(7);
        let gh = token(&mut rng, "ghp_", ALNUM, 36);
        let adversarial = [
            (
                "AWS key lines",
                AWS_EXAMPLE.to_owned() + "\n",
                String::new(),
            ),
            (
                "ghp tokens in one run after eyJ",
                format!("-{gh}"),
                "eyJ".to_owned(),
            ),
            (
                "AWS keys after an END prefix",
                format!("{AWS_EXAMPLE} "),
                "-----END ".to_owned(),
            ),
            (
                "AWS keys after a URL user",
                format!(",{AWS_EXAMPLE}"),
                "://x".to_owned(),
            ),
            (
                "eyJ before each ghp token",
                format!("-eyJ-{gh}"),
                String::new(),
            ),
            (
                "URL user before each AWS key",
                format!("://x,{AWS_EXAMPLE},"),
                String::new(),
            ),
            (
                "END label before each AWS key",
                format!("-----END {AWS_EXAMPLE} "),
                String::new(),
            ),
            (
                "overlapping JWT header attempts",
                "-eyJ".to_owned(),
                String::new(),
            ),
            (
                "overlapping URL attempts",
                "://a:".to_owned(),
                String::new(),
            ),
            (
                "overlapping AIza attempts",
                "AIza".to_owned(),
                String::new(),
            ),
        ];
        for (name, unit, prefix) in adversarial {
            let mut hay = prefix.into_bytes();
            while hay.len() < 1 << 20 {
                hay.extend_from_slice(unit.as_bytes());
            }
            let started = std::time::Instant::now();
            let (_, n) = r.redact_text(&hay);
            println!(
                "1 MiB adversarial, {name}: {:?} ({n} matches)",
                started.elapsed()
            );
        }
        for (name, window) in [("log with secrets", &w), ("base64 dump", &b)] {
            let _warm = read(window, &StreamSpec::All, Some(&r));
            let runs = 20;
            let started = std::time::Instant::now();
            for _ in 0..runs {
                std::hint::black_box(read(window, &StreamSpec::All, Some(&r)));
            }
            let redacted = started.elapsed() / runs;
            let started = std::time::Instant::now();
            for _ in 0..runs {
                std::hint::black_box(read(window, &StreamSpec::All, None));
            }
            let plain = started.elapsed() / runs;
            println!("1 MiB {name}: redacted read {redacted:?}, plain read {plain:?}");
        }
    }
}
