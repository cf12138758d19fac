//! A URL's query and its percent-escapes: the one decoder every listener
//! reads `?key=value` with.
//!
//! The listeners differ on one point only, which each names: whether a
//! `+` in a value is a space (form encoding, as Go's `URL.Query()` reads
//! it: envd's `/files`) or a plus (the MCP listener's `/files` and
//! `/jobs/<id>/tty`, sandboxd's `/v1/files`). Everything else is shared:
//! pairs split on `&`, a key without `=` has the empty value (a flag), the
//! first of repeated keys wins, a value with a bad escape decodes to the
//! empty text, and a value is lossy UTF-8. `%2B` is always a plus: `+` is
//! read before the escapes are decoded.

/// What a `+` in a query value means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plus {
    /// A space (`application/x-www-form-urlencoded`).
    Space,
    /// A plus, as any other unescaped byte.
    Literal,
}

/// A parsed query: `key` or `key=value` pairs, values kept raw
/// (percent-encoded) until read.
#[derive(Debug)]
pub struct Query<'a> {
    pairs: Vec<(&'a str, &'a str)>,
    plus: Plus,
}

impl<'a> Query<'a> {
    /// Splits `query` (the text after `?`, if any) into its pairs; empty
    /// pairs (`a&&b`) are skipped.
    pub fn parse(query: Option<&'a str>, plus: Plus) -> Query<'a> {
        Query {
            pairs: query
                .unwrap_or("")
                .split('&')
                .filter(|p| !p.is_empty())
                .map(|p| p.split_once('=').unwrap_or((p, "")))
                .collect(),
            plus,
        }
    }

    /// The first value of `key`, raw (still percent-encoded).
    pub fn get(&self, key: &str) -> Option<&'a str> {
        self.pairs.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
    }

    /// A flag: present and not `false`/`0`.
    pub fn flag(&self, key: &str) -> bool {
        self.get(key).is_some_and(|v| v != "false" && v != "0")
    }

    /// The first value of `key`, decoded under this query's `+` rule
    /// (lossy UTF-8; the empty text at a bad escape).
    pub fn text(&self, key: &str) -> Option<String> {
        self.get(key).map(|v| {
            String::from_utf8_lossy(&decode(v, self.plus).unwrap_or_default()).into_owned()
        })
    }
}

/// `raw` with `+` read under `plus`, then percent-decoded; `None` at a bad
/// escape.
pub fn decode(raw: &str, plus: Plus) -> Option<Vec<u8>> {
    match plus {
        Plus::Literal => percent_decode(raw),
        Plus::Space => percent_decode(&raw.replace('+', " ")),
    }
}

/// Percent-decodes `raw` (any byte may be escaped, so the result need not
/// be UTF-8; `+` is a plus); `None` at a bad escape (`%` not followed by
/// two hex digits).
pub fn percent_decode(raw: &str) -> Option<Vec<u8>> {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hi = hex_digit(*bytes.get(i + 1)?)?;
            let lo = hex_digit(*bytes.get(i + 2)?)?;
            out.push(hi << 4 | lo);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Some(out)
}

fn hex_digit(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plus_is_a_space_or_a_plus_as_the_listener_says_and_2b_is_always_a_plus() {
        let q = "path=%2Ftmp%2Fa+b%2Bc.txt";
        let form = Query::parse(Some(q), Plus::Space);
        assert_eq!(form.text("path").as_deref(), Some("/tmp/a b+c.txt"));
        let literal = Query::parse(Some(q), Plus::Literal);
        assert_eq!(literal.text("path").as_deref(), Some("/tmp/a+b+c.txt"));
    }

    #[test]
    fn a_key_without_a_value_is_a_flag_and_the_first_of_repeated_keys_wins() {
        let q = Query::parse(
            Some("mkdir&&parents=1&overwrite=false&x=0&x=1"),
            Plus::Literal,
        );
        assert_eq!(q.get("mkdir"), Some(""));
        assert!(q.flag("mkdir"));
        assert!(q.flag("parents"));
        assert!(!q.flag("overwrite"));
        assert!(!q.flag("x"));
        assert_eq!(q.get("x"), Some("0"));
        assert!(!q.flag("absent"));
        assert_eq!(q.text("absent"), None);
        assert_eq!(Query::parse(None, Plus::Space).get("a"), None);
    }

    #[test]
    fn a_bad_escape_decodes_to_the_empty_text_and_a_value_is_lossy_utf8() {
        for plus in [Plus::Space, Plus::Literal] {
            let q = Query::parse(Some("a=%zz&b=%4&c=%ff%41"), plus);
            assert_eq!(q.text("a").as_deref(), Some(""));
            assert_eq!(q.text("b").as_deref(), Some(""));
            assert_eq!(q.text("c").as_deref(), Some("\u{fffd}A"));
        }
        assert_eq!(percent_decode("%2f%2F+"), Some(b"//+".to_vec()));
        assert_eq!(decode("a+%2B", Plus::Space), Some(b"a +".to_vec()));
        assert_eq!(percent_decode("%"), None);
    }
}
