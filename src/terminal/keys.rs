//! `input.keys`: tmux key names and literal text, turned into the bytes an xterm
//! (`TERM=xterm-256color`, the PTY job's default) sends for them.
//!
//! Each item is one of:
//! - a **key name** in tmux's spelling (`key-string.c`), case as tmux writes it: `Enter`, `Tab`,
//!   `BTab`, `Escape`, `Space`, `BSpace`, `Up` `Down` `Left` `Right`, `Home`, `End`, `PageUp`
//!   (`PgUp`, `PPage`), `PageDown` (`PgDn`, `NPage`), `Insert` (`IC`), `Delete` (`DC`),
//!   `F1`–`F12`, the keypad `KP0`–`KP9`, `KP/` `KP*` `KP-` `KP+` `KP.` `KPEnter`;
//! - a key with **modifiers**: `C-`, `M-`, `S-` (any order, any case: `C-M-x`, `s-Up`), or
//!   `^x` for `C-x`, in front of a key name or of one character (`C-c`, `M-x`, `C-M-Left`);
//! - anything else, **literal text**, sent as its UTF-8 bytes (as tmux `send-keys` does).
//!
//! What an item that *looks* like a key but is none becomes is the one place this differs from
//! tmux, which would type it: a modifier prefix in front of something that is not a key
//! (`C-NoSuchKey`, `M-`), a function key outside `F1`–`F12` (`F99`), or a modifier the key has
//! no encoding for (`C-1`, `S-Enter`) is a [`KeyError`] naming the item, so that a typo never
//! reaches the program as text. Key names are matched with tmux's capitals only, so literal
//! words (`end`, `up`) stay text.
//!
//! Encodings are xterm's (`ctlseqs`, "PC-Style Function Keys"): cursor keys `\e[A` (`\eOA` in
//! application cursor mode, see [`encode_for`]), `Home`/`End` `\e[H`/`\e[F` (`\eOH`/`\eOF`),
//! `F1`–`F4` `\eOP`…, `F5`–`F12` and the editing keys `\e[N~`; a modifier on one of these is the
//! parameter `1 + shift + 2·meta + 4·ctrl` (`C-Up` = `\e[1;5A`, `S-F5` = `\e[15;2~`). On a
//! character, `C-` is its control code (`C-a` = 0x01, `C-Space` and `C-@` = 0x00, `C-?` = DEL),
//! `M-` is an ESC in front, `S-` a letter's capital. `Enter` is CR, `BSpace` DEL, `BTab` and
//! `S-Tab` `\e[Z`, as tmux sends them.

use thiserror::Error;

/// An item of `input.keys` that looks like a key but is none; `Display` names it and says why.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum KeyError {
    /// A modifier prefix in front of a name that is no key (`C-NoSuchKey`), or of nothing.
    #[error(
        "key {item:?} does not exist: {base:?} is not a key name (e.g. Enter, Up, F5, a single character)"
    )]
    UnknownKey {
        /// The item as given.
        item: String,
        /// What follows the modifiers.
        base: String,
    },
    /// A function key other than `F1`–`F12`.
    #[error("key {item:?} does not exist: function keys are F1 to F12")]
    NoSuchFunctionKey {
        /// The item as given.
        item: String,
    },
    /// A modifier that this key has no encoding for (`C-1`, `S-Enter`).
    #[error("key {item:?} has no encoding: a terminal sends nothing for {modifier} with {base:?}")]
    NoEncoding {
        /// The item as given.
        item: String,
        /// The modifier that cannot apply.
        modifier: &'static str,
        /// The key it was put on.
        base: String,
    },
}

/// The bytes of `items` in normal cursor-key mode. See the module doc.
pub fn encode(items: &[String]) -> Result<Vec<u8>, KeyError> {
    encode_for(items, false)
}

/// The bytes of `items`; the cursor keys and `Home`/`End` are sent as SS3 (`\eOA`) when the
/// program asked for application cursor keys (`Screen::application_cursor`), as xterm does.
pub fn encode_for(items: &[String], application_cursor: bool) -> Result<Vec<u8>, KeyError> {
    let mut out = Vec::new();
    for item in items {
        encode_item(item, application_cursor, &mut out)?;
    }
    Ok(out)
}

#[derive(Clone, Copy, Default, PartialEq, Debug)]
struct Mods {
    ctrl: bool,
    meta: bool,
    shift: bool,
}

impl Mods {
    fn any(self) -> bool {
        self.ctrl || self.meta || self.shift
    }

    /// xterm's modifier parameter.
    fn param(self) -> u8 {
        1 + u8::from(self.shift) + 2 * u8::from(self.meta) + 4 * u8::from(self.ctrl)
    }
}

/// What a key name stands for.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Key {
    /// A character key: `Space`, a keypad digit, or a literal one after modifiers.
    Char(char),
    Enter,
    Tab,
    BackTab,
    Escape,
    BSpace,
    /// `CSI 1 ; m X` with modifiers, `CSI X` or `SS3 X` without.
    Cursor(u8),
    /// `SS3 X` without modifiers, `CSI 1 ; m X` with (F1–F4).
    Ss3(u8),
    /// `CSI n ~`, `CSI n ; m ~` with modifiers.
    Tilde(u8),
}

fn named(name: &str) -> Option<Key> {
    Some(match name {
        "Enter" | "KPEnter" => Key::Enter,
        "Tab" => Key::Tab,
        "BTab" => Key::BackTab,
        "Escape" => Key::Escape,
        "Space" => Key::Char(' '),
        "BSpace" => Key::BSpace,
        "Up" => Key::Cursor(b'A'),
        "Down" => Key::Cursor(b'B'),
        "Right" => Key::Cursor(b'C'),
        "Left" => Key::Cursor(b'D'),
        "Home" => Key::Cursor(b'H'),
        "End" => Key::Cursor(b'F'),
        "Insert" | "IC" => Key::Tilde(2),
        "Delete" | "DC" => Key::Tilde(3),
        "PageUp" | "PgUp" | "PPage" => Key::Tilde(5),
        "PageDown" | "PgDn" | "NPage" => Key::Tilde(6),
        "F1" => Key::Ss3(b'P'),
        "F2" => Key::Ss3(b'Q'),
        "F3" => Key::Ss3(b'R'),
        "F4" => Key::Ss3(b'S'),
        "F5" => Key::Tilde(15),
        "F6" => Key::Tilde(17),
        "F7" => Key::Tilde(18),
        "F8" => Key::Tilde(19),
        "F9" => Key::Tilde(20),
        "F10" => Key::Tilde(21),
        "F11" => Key::Tilde(23),
        "F12" => Key::Tilde(24),
        "KP/" => Key::Char('/'),
        "KP*" => Key::Char('*'),
        "KP-" => Key::Char('-'),
        "KP+" => Key::Char('+'),
        "KP." => Key::Char('.'),
        _ => match name.strip_prefix("KP") {
            Some(digit) if digit.len() == 1 && digit.as_bytes()[0].is_ascii_digit() => {
                Key::Char(char::from(digit.as_bytes()[0]))
            }
            _ => return None,
        },
    })
}

/// `F` and digits: a function key by its look, existing or not.
fn looks_like_function_key(name: &str) -> bool {
    name.strip_prefix('F')
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Splits the modifier prefixes off: `C-`, `M-`, `S-` (either case), or one leading `^`
/// (tmux's `^x`). `None` when there is none.
fn split_modifiers(item: &str) -> Option<(Mods, &str)> {
    let mut mods = Mods::default();
    let mut rest = item;
    let mut found = false;
    loop {
        let bytes = rest.as_bytes();
        if bytes.len() >= 2 && bytes[1] == b'-' {
            match bytes[0] {
                b'C' | b'c' => mods.ctrl = true,
                b'M' | b'm' => mods.meta = true,
                b'S' | b's' => mods.shift = true,
                _ => break,
            }
            rest = &rest[2..];
            found = true;
        } else {
            break;
        }
    }
    if !found {
        // `^c` is C-c; `^` alone and `^word` are text, as in tmux.
        let mut chars = item.chars();
        if chars.next() == Some('^') && chars.clone().count() == 1 {
            mods.ctrl = true;
            return Some((mods, chars.as_str()));
        }
        return None;
    }
    Some((mods, rest))
}

fn encode_item(item: &str, app_cursor: bool, out: &mut Vec<u8>) -> Result<(), KeyError> {
    let (mods, base) = match split_modifiers(item) {
        Some(split) => split,
        None => {
            if let Some(key) = named(item) {
                return put(item, key, Mods::default(), app_cursor, out);
            }
            if looks_like_function_key(item) {
                return Err(KeyError::NoSuchFunctionKey { item: item.into() });
            }
            out.extend_from_slice(item.as_bytes());
            return Ok(());
        }
    };
    let key = match named(base) {
        Some(key) => key,
        None => {
            let mut chars = base.chars();
            match (chars.next(), chars.next()) {
                (Some(c), None) => Key::Char(c),
                _ if looks_like_function_key(base) => {
                    return Err(KeyError::NoSuchFunctionKey { item: item.into() });
                }
                _ => {
                    return Err(KeyError::UnknownKey {
                        item: item.into(),
                        base: base.into(),
                    });
                }
            }
        }
    };
    put(item, key, mods, app_cursor, out)
}

fn put(
    item: &str,
    key: Key,
    mods: Mods,
    app_cursor: bool,
    out: &mut Vec<u8>,
) -> Result<(), KeyError> {
    let no = |modifier: &'static str| KeyError::NoEncoding {
        item: item.into(),
        modifier,
        base: item.rsplit_once('-').map_or(item, |(_, b)| b).into(),
    };
    match key {
        Key::Cursor(x) if mods.any() => csi_mod(out, 1, mods, x),
        Key::Cursor(x) if app_cursor => out.extend_from_slice(&[0x1b, b'O', x]),
        Key::Cursor(x) => out.extend_from_slice(&[0x1b, b'[', x]),
        Key::Ss3(x) if mods.any() => csi_mod(out, 1, mods, x),
        Key::Ss3(x) => out.extend_from_slice(&[0x1b, b'O', x]),
        Key::Tilde(n) if mods.any() => csi_mod(out, n, mods, b'~'),
        Key::Tilde(n) => out.extend_from_slice(format!("\x1b[{n}~").as_bytes()),
        Key::BackTab => {
            if mods.ctrl {
                return Err(no("C-"));
            }
            meta(out, mods);
            out.extend_from_slice(b"\x1b[Z");
        }
        Key::Tab if mods.shift => {
            if mods.ctrl {
                return Err(no("C-"));
            }
            meta(out, mods);
            out.extend_from_slice(b"\x1b[Z");
        }
        Key::Enter | Key::Tab | Key::Escape | Key::BSpace => {
            if mods.shift {
                return Err(no("S-"));
            }
            let byte = match (key, mods.ctrl) {
                (Key::BSpace, true) => 0x08,
                (_, true) => return Err(no("C-")),
                (Key::Enter, false) => b'\r',
                (Key::Tab, false) => b'\t',
                (Key::Escape, false) => 0x1b,
                _ => 0x7f,
            };
            meta(out, mods);
            out.push(byte);
        }
        Key::Char(c) => {
            let c = if mods.shift {
                if !c.is_ascii_alphabetic() {
                    return Err(no("S-"));
                }
                c.to_ascii_uppercase()
            } else {
                c
            };
            meta(out, mods);
            if mods.ctrl {
                out.push(control_code(c).ok_or_else(|| no("C-"))?);
            } else {
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
    Ok(())
}

fn meta(out: &mut Vec<u8>, mods: Mods) {
    if mods.meta {
        out.push(0x1b);
    }
}

fn csi_mod(out: &mut Vec<u8>, n: u8, mods: Mods, last: u8) {
    out.extend_from_slice(format!("\x1b[{n};{}", mods.param()).as_bytes());
    out.push(last);
}

/// The C0 code `C-` gives with this character, as xterm and tmux send it.
fn control_code(c: char) -> Option<u8> {
    Some(match c {
        'a'..='z' => c as u8 - b'a' + 1,
        'A'..='Z' => c as u8 - b'A' + 1,
        ' ' | '@' | '2' => 0,
        '[' | '3' => 0x1b,
        '\\' | '4' => 0x1c,
        ']' | '5' => 0x1d,
        '^' | '6' | '~' => 0x1e,
        '_' | '7' | '/' => 0x1f,
        '?' | '8' => 0x7f,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(items: &[&str]) -> Vec<u8> {
        let items: Vec<String> = items.iter().map(|s| s.to_string()).collect();
        match encode(&items) {
            Ok(bytes) => bytes,
            Err(e) => panic!("{items:?}: {e}"),
        }
    }

    fn error(item: &str) -> KeyError {
        match encode(&[item.to_string()]) {
            Ok(bytes) => panic!("{item:?} encoded as {bytes:?}"),
            Err(e) => e,
        }
    }

    #[test]
    fn literal_text_is_sent_as_is_and_mixes_with_keys() {
        assert_eq!(keys(&["print(1 + 1)", "Enter"]), b"print(1 + 1)\r");
        assert_eq!(
            keys(&["caf\u{e9}", "", "x-ray", "end", "up", "^", "^word", "C"]),
            "caf\u{e9}x-rayendup^^wordC".as_bytes()
        );
        assert_eq!(keys(&[":wq", "Enter"]), b":wq\r");
    }

    #[test]
    fn the_plain_control_keys_are_the_bytes_tmux_sends() {
        assert_eq!(keys(&["Enter"]), b"\r");
        assert_eq!(keys(&["KPEnter"]), b"\r");
        assert_eq!(keys(&["Tab"]), b"\t");
        assert_eq!(keys(&["BTab"]), b"\x1b[Z");
        assert_eq!(keys(&["S-Tab"]), b"\x1b[Z");
        assert_eq!(keys(&["Escape"]), b"\x1b");
        assert_eq!(keys(&["Space"]), b" ");
        assert_eq!(keys(&["BSpace"]), b"\x7f");
    }

    #[test]
    fn ctrl_on_a_character_is_its_control_code() {
        assert_eq!(keys(&["C-c"]), b"\x03");
        assert_eq!(keys(&["C-C"]), b"\x03");
        assert_eq!(keys(&["c-d"]), b"\x04");
        assert_eq!(keys(&["^c"]), b"\x03");
        assert_eq!(keys(&["C-a", "C-z"]), b"\x01\x1a");
        assert_eq!(keys(&["C-Space", "C-@"]), b"\x00\x00");
        assert_eq!(
            keys(&["C-[", "C-\\", "C-]", "C-^", "C-_", "C-?"]),
            b"\x1b\x1c\x1d\x1e\x1f\x7f"
        );
        assert_eq!(keys(&["C-BSpace"]), b"\x08");
    }

    #[test]
    fn meta_is_an_escape_in_front() {
        assert_eq!(keys(&["M-x"]), b"\x1bx");
        assert_eq!(keys(&["M-Enter"]), b"\x1b\r");
        assert_eq!(keys(&["M-BSpace"]), b"\x1b\x7f");
        assert_eq!(keys(&["M-Space"]), b"\x1b ");
        assert_eq!(keys(&["M-\u{e9}"]), "\x1b\u{e9}".as_bytes());
        assert_eq!(keys(&["C-M-x", "M-C-x"]), b"\x1b\x18\x1b\x18");
        assert_eq!(keys(&["M-BTab"]), b"\x1b\x1b[Z");
        assert_eq!(keys(&["M--"]), b"\x1b-");
    }

    #[test]
    fn shift_on_a_letter_is_its_capital() {
        assert_eq!(keys(&["S-a"]), b"A");
        assert_eq!(keys(&["M-S-a"]), b"\x1bA");
    }

    #[test]
    fn cursor_keys_plain_with_modifiers_and_in_application_mode() {
        assert_eq!(
            keys(&["Up", "Down", "Right", "Left"]),
            b"\x1b[A\x1b[B\x1b[C\x1b[D"
        );
        assert_eq!(keys(&["S-Up"]), b"\x1b[1;2A");
        assert_eq!(keys(&["M-Down"]), b"\x1b[1;3B");
        assert_eq!(keys(&["C-Right"]), b"\x1b[1;5C");
        assert_eq!(keys(&["C-S-Left"]), b"\x1b[1;6D");
        assert_eq!(keys(&["C-M-S-Up"]), b"\x1b[1;8A");
        let app = encode_for(&["Up".into(), "Home".into(), "C-Up".into()], true);
        assert_eq!(app, Ok(b"\x1bOA\x1bOH\x1b[1;5A".to_vec()));
    }

    #[test]
    fn home_end_and_the_editing_keys() {
        assert_eq!(keys(&["Home", "End"]), b"\x1b[H\x1b[F");
        assert_eq!(keys(&["C-End"]), b"\x1b[1;5F");
        assert_eq!(keys(&["Insert", "IC"]), b"\x1b[2~\x1b[2~");
        assert_eq!(keys(&["Delete", "DC"]), b"\x1b[3~\x1b[3~");
        assert_eq!(keys(&["PageUp", "PgUp", "PPage"]), b"\x1b[5~\x1b[5~\x1b[5~");
        assert_eq!(
            keys(&["PageDown", "PgDn", "NPage"]),
            b"\x1b[6~\x1b[6~\x1b[6~"
        );
        assert_eq!(keys(&["S-PageUp", "C-Delete"]), b"\x1b[5;2~\x1b[3;5~");
    }

    #[test]
    fn function_keys_f1_to_f12() {
        assert_eq!(keys(&["F1", "F2", "F3", "F4"]), b"\x1bOP\x1bOQ\x1bOR\x1bOS");
        let tilde: Vec<u8> = [15, 17, 18, 19, 20, 21, 23, 24]
            .iter()
            .flat_map(|n| format!("\x1b[{n}~").into_bytes())
            .collect();
        assert_eq!(
            keys(&["F5", "F6", "F7", "F8", "F9", "F10", "F11", "F12"]),
            tilde
        );
        assert_eq!(
            keys(&["S-F1", "C-F5", "M-F12"]),
            b"\x1b[1;2P\x1b[15;5~\x1b[24;3~"
        );
    }

    #[test]
    fn keypad_keys_are_their_characters() {
        assert_eq!(
            keys(&["KP0", "KP9", "KP/", "KP*", "KP-", "KP+", "KP."]),
            b"09/*-+."
        );
    }

    #[test]
    fn a_modifier_on_no_key_is_an_error_naming_the_item() {
        let e = error("C-NoSuchKey");
        assert_eq!(
            e,
            KeyError::UnknownKey {
                item: "C-NoSuchKey".into(),
                base: "NoSuchKey".into()
            }
        );
        assert!(e.to_string().contains("\"C-NoSuchKey\""), "{e}");
        assert!(matches!(error("M-"), KeyError::UnknownKey { .. }));
        assert!(matches!(error("C-M-Upp"), KeyError::UnknownKey { .. }));
        assert!(matches!(error("S-enter"), KeyError::UnknownKey { .. }));
    }

    #[test]
    fn a_function_key_that_does_not_exist_is_an_error_naming_it() {
        for item in ["F99", "F0", "F13", "C-F13"] {
            let e = error(item);
            assert_eq!(e, KeyError::NoSuchFunctionKey { item: item.into() });
            assert!(
                e.to_string().contains(&format!("{item:?}")) && e.to_string().contains("F1 to F12"),
                "{e}"
            );
        }
        assert_eq!(
            keys(&["F", "Foo", "F1x"]),
            b"FFooF1x",
            "not function keys by their look: text"
        );
    }

    #[test]
    fn a_modifier_a_key_cannot_take_is_an_error_naming_it() {
        for (item, modifier) in [
            ("C-1", "C-"),
            ("C-Enter", "C-"),
            ("C-Tab", "C-"),
            ("S-Enter", "S-"),
            ("S-1", "S-"),
            ("C-\u{e9}", "C-"),
        ] {
            let e = error(item);
            assert!(
                matches!(&e, KeyError::NoEncoding { item: i, modifier: m, .. } if i == item && *m == modifier),
                "{item}: {e:?}"
            );
            assert!(e.to_string().contains(&format!("{item:?}")), "{e}");
        }
    }

    #[test]
    fn the_first_bad_item_fails_the_whole_list() {
        let items = vec!["ok".to_string(), "F99".into(), "C-Nope".into()];
        assert_eq!(
            encode(&items),
            Err(KeyError::NoSuchFunctionKey { item: "F99".into() })
        );
    }
}
