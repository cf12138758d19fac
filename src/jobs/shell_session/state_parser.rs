//! The parser of what a shell-session job's epilogue wrote:
//! exactly `MCPX\0<pwd>\n\0<export -p>\0MCPX-END\n`, as dash, busybox ash
//! and bash print it. Anything else (a killed shell, a truncated write, an
//! `exec`ed command) is `None`: the failure mode is "unchanged", never
//! "wrong".

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;

use super::epilogue::{END, START};

/// The most state bytes read from one job; more and the state is dropped
/// (an environment that large cannot be passed to `exec` anyway).
pub const MAX_STATE_BYTES: usize = 4 * 1024 * 1024;

/// Variables a session never carries: the shell maintains them itself.
const NOT_CARRIED: [&str; 4] = ["PWD", "OLDPWD", "SHLVL", "_"];

/// A shell's final state, as reported by the epilogue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportedState {
    /// Its working directory.
    pub cwd: PathBuf,
    /// Its exported variables (without [`NOT_CARRIED`]), sorted by name.
    pub env: Vec<(OsString, OsString)>,
}

/// Parses what the epilogue wrote: `MCPX\0<pwd>\n\0<export -p>\0MCPX-END\n`
/// and nothing else. `None` when it is not exactly that (a killed shell, a
/// truncated write, an `exec`ed command, …).
pub fn parse_state(bytes: &[u8]) -> Option<ReportedState> {
    let mut parts = bytes.split(|&b| b == 0);
    let (start, pwd, exports, end) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if start != START || end != END || parts.next().is_some() {
        return None;
    }
    let pwd = pwd.strip_suffix(b"\n")?;
    if !pwd.starts_with(b"/") {
        return None;
    }
    let mut env = parse_exports(exports)?;
    env.retain(|(k, _)| !NOT_CARRIED.iter().any(|n| k.as_os_str() == OsStr::new(n)));
    env.sort();
    env.dedup_by(|a, b| a.0 == b.0);
    Some(ReportedState {
        cwd: PathBuf::from(OsStr::from_bytes(pwd)),
        env,
    })
}

/// Parses `export -p` as dash and busybox ash print it (`export NAME='v'`,
/// quotes as `'"'"'`) and as bash does (`declare -x NAME="v"`, or
/// `NAME=$'…'` with ANSI-C escapes when the value has control characters).
/// An exported variable without a value (`export NAME`) is not in the
/// environment and is skipped. `None` on anything else.
fn parse_exports(text: &[u8]) -> Option<Vec<(OsString, OsString)>> {
    let mut p = Parser { s: text, i: 0 };
    let mut out = Vec::new();
    loop {
        p.skip_space();
        if p.i >= p.s.len() {
            return Some(out);
        }
        let word = p.bare_word();
        match word {
            b"export" => {}
            b"declare" => {
                p.skip_space();
                let flags = p.bare_word();
                if !flags.starts_with(b"-") || !flags.contains(&b'x') {
                    return None;
                }
            }
            _ => return None,
        }
        p.skip_space();
        let name = p.name();
        if name.is_empty() {
            return None;
        }
        let name = OsString::from_vec(name.to_vec());
        if p.peek() == Some(b'=') {
            p.i += 1;
            let value = p.value()?;
            out.push((name, OsString::from_vec(value)));
        }
        match p.peek() {
            None | Some(b'\n') => {}
            _ => return None,
        }
    }
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn skip_space(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\n' | b'\t')) {
            self.i += 1;
        }
    }

    fn bare_word(&mut self) -> &[u8] {
        let start = self.i;
        while matches!(self.peek(), Some(c) if !matches!(c, b' ' | b'\n' | b'\t')) {
            self.i += 1;
        }
        &self.s[start..self.i]
    }

    fn name(&mut self) -> &[u8] {
        let start = self.i;
        while matches!(self.peek(), Some(c) if c.is_ascii_alphanumeric() || c == b'_') {
            self.i += 1;
        }
        &self.s[start..self.i]
    }

    /// A shell word made of quoted segments, up to a blank or the end.
    fn value(&mut self) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        loop {
            match self.peek() {
                None | Some(b' ' | b'\n' | b'\t') => return Some(out),
                Some(b'\'') => {
                    self.i += 1;
                    let end = self.s[self.i..].iter().position(|&b| b == b'\'')?;
                    out.extend_from_slice(&self.s[self.i..self.i + end]);
                    self.i += end + 1;
                }
                Some(b'"') => {
                    self.i += 1;
                    loop {
                        match self.peek()? {
                            b'"' => {
                                self.i += 1;
                                break;
                            }
                            b'\\'
                                if matches!(
                                    self.s.get(self.i + 1),
                                    Some(b'"' | b'\\' | b'$' | b'`' | b'\n')
                                ) =>
                            {
                                out.push(self.s[self.i + 1]);
                                self.i += 2;
                            }
                            c => {
                                out.push(c);
                                self.i += 1;
                            }
                        }
                    }
                }
                Some(b'$') if self.s.get(self.i + 1) == Some(&b'\'') => {
                    self.i += 2;
                    self.ansi_c(&mut out)?;
                }
                Some(c) if c != b'\\' && c != b'$' && c != b'`' && c != b'"' => {
                    out.push(c);
                    self.i += 1;
                }
                Some(_) => return None,
            }
        }
    }

    /// The body of `$'…'` after its opening quote.
    fn ansi_c(&mut self, out: &mut Vec<u8>) -> Option<()> {
        loop {
            match self.peek()? {
                b'\'' => {
                    self.i += 1;
                    return Some(());
                }
                b'\\' => {
                    self.i += 1;
                    let c = self.peek()?;
                    self.i += 1;
                    let simple = match c {
                        b'a' => Some(7),
                        b'b' => Some(8),
                        b'e' | b'E' => Some(27),
                        b'f' => Some(12),
                        b'n' => Some(b'\n'),
                        b'r' => Some(b'\r'),
                        b't' => Some(b'\t'),
                        b'v' => Some(11),
                        b'\\' | b'\'' | b'"' | b'?' => Some(c),
                        _ => None,
                    };
                    if let Some(b) = simple {
                        out.push(b);
                    } else if (b'0'..=b'7').contains(&c) {
                        let mut v = u32::from(c - b'0');
                        for _ in 0..2 {
                            match self.peek() {
                                Some(d @ b'0'..=b'7') => {
                                    v = v * 8 + u32::from(d - b'0');
                                    self.i += 1;
                                }
                                _ => break,
                            }
                        }
                        out.push(u8::try_from(v & 0xff).ok()?);
                    } else if c == b'x' {
                        let mut v = 0u32;
                        let mut n = 0;
                        while n < 2 {
                            match self.peek().and_then(|d| (d as char).to_digit(16)) {
                                Some(d) => {
                                    v = v * 16 + d;
                                    self.i += 1;
                                    n += 1;
                                }
                                None => break,
                            }
                        }
                        if n == 0 {
                            return None;
                        }
                        out.push(u8::try_from(v).ok()?);
                    } else {
                        return None;
                    }
                }
                c => {
                    out.push(c);
                    self.i += 1;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
            .collect()
    }

    #[test]
    fn dash_style_exports_with_quotes_and_newlines_parse() {
        let text = b"export A='x'\"'\"'y'\nexport B='l1\nl2=3'\nexport E\nexport PWD='/tmp'\nexport D=''\n";
        let state = parse_state(&[b"MCPX\0/tmp\n\0".as_slice(), text, b"\0MCPX-END\n"].concat());
        assert_eq!(
            state,
            Some(ReportedState {
                cwd: PathBuf::from("/tmp"),
                env: env(&[("A", "x'y"), ("B", "l1\nl2=3"), ("D", "")]),
            })
        );
    }

    #[test]
    fn bash_style_exports_with_double_quotes_and_ansi_c_escapes_parse() {
        let text = b"declare -x A=\"x'y\\$\\\"\"\ndeclare -x B=$'l1\\nl2\\\\$`\"q\\001'\ndeclare -rx C=\"1\"\ndeclare -x OLDPWD\ndeclare -x SHLVL=\"1\"\n";
        let state = parse_state(&[b"MCPX\0/\n\0".as_slice(), text, b"\0MCPX-END\n"].concat());
        assert_eq!(
            state,
            Some(ReportedState {
                cwd: PathBuf::from("/"),
                env: env(&[("A", "x'y$\""), ("B", "l1\nl2\\$`\"q\u{1}"), ("C", "1")]),
            })
        );
    }

    #[test]
    fn a_stream_without_its_end_marker_or_with_more_is_not_adopted() {
        assert_eq!(parse_state(b"MCPX\0/tmp\n\0export A='1'\n"), None);
        assert_eq!(parse_state(b"MCPX\0/tmp\n\0export A='1'\n\0MCPX-END"), None);
        assert_eq!(
            parse_state(b"MCPX\0/tmp\n\0\0MCPX-END\nMCPX\0/\n\0\0MCPX-END\n"),
            None
        );
        assert_eq!(parse_state(b"MCPX\0tmp\n\0\0MCPX-END\n"), None);
        assert!(parse_state(b"MCPX\0/tmp\n\0\0MCPX-END\n").is_some());
    }
}
