//! Fuzz target `terminal` (`fuzz/fuzz_targets/terminal.rs`): the PTY screen and `input.keys`
//! (crate::terminal). What it checks, and how it reads its input: [`terminal`](fn@terminal).

use crate::terminal::{Cursor, KeyError, Screen, ScreenView, encode, encode_for};

/// `terminal`: a screen fed the bytes in random pieces equals one fed them at once (escape
/// sequences, UTF-8 and OSC titles cut anywhere); every view has `rows` lines, the cursor on
/// the screen, `offset` = bytes fed, at most the asked scrollback; a resize keeps all of that;
/// every line of the text as a key item either encodes or fails naming itself.
///
/// Input: cols (1–64), rows (1–16), then the bytes; the piece sizes come from a PRNG seeded
/// with the bytes' length.
pub fn terminal(data: &[u8]) {
    let mut input = super::Input { data };
    let cols = 1 + u16::from(input.byte() % 64);
    let rows = 1 + u16::from(input.byte() % 16);
    let bytes = input.take(usize::MAX);
    let mut whole = Screen::new(cols, rows, 8);
    whole.feed(bytes);
    let mut pieces = Screen::new(cols, rows, 8);
    let mut next = super::xorshift(bytes.len() as u64 + 1);
    let mut rest = bytes;
    while !rest.is_empty() {
        let n = (1 + next() % 9) as usize;
        let (piece, tail) = rest.split_at(n.min(rest.len()));
        pieces.feed(piece);
        rest = tail;
    }
    let view: ScreenView = whole.view(5);
    assert_eq!(pieces.view(5), view, "split feeds differ on {bytes:?}");
    check(&whole, cols, rows, bytes.len());
    let (new_cols, new_rows) = (1 + (cols * 7) % 50, 1 + (rows * 3) % 13);
    whole.resize(new_cols, new_rows);
    check(&whole, new_cols, new_rows, bytes.len());
    whole.feed(bytes);
    check(&whole, new_cols, new_rows, 2 * bytes.len());

    let text = String::from_utf8_lossy(bytes);
    let items: Vec<String> = text.split('\n').map(str::to_string).collect();
    for item in &items {
        if let Err(e) = encode(std::slice::from_ref(item)) {
            assert!(
                e.to_string().contains(&format!("{item:?}")),
                "{e} does not name {item:?}"
            );
        }
    }
    let normal: Result<Vec<u8>, KeyError> = encode(&items);
    let application = encode_for(&items, whole.application_cursor());
    assert_eq!(
        normal.is_ok(),
        application.is_ok(),
        "the mode changes bytes, never validity"
    );
}

fn check(screen: &Screen, cols: u16, rows: u16, fed: usize) {
    let view = screen.view(5);
    let cursor: Cursor = view.cursor;
    assert!(cursor.row < rows && cursor.col < cols, "{cursor:?}");
    assert_eq!((view.cols, view.rows), (cols, rows));
    assert_eq!(view.lines.len(), usize::from(rows));
    assert_eq!(view.offset, fed as u64);
    assert_eq!(screen.offset(), fed as u64);
    assert!(view.scrollback.is_some_and(|s| s.len() <= 5));
    assert!(view.lines.iter().all(|l| !l.ends_with(' ')));
    assert!(
        view.title
            .is_none_or(|t| !t.is_empty() && t.len() <= 3 * crate::terminal::TITLE_LIMIT)
    );
}

#[cfg(test)]
mod tests {
    #[test]
    fn screens_are_split_invariant_and_keys_name_their_errors() {
        crate::fuzzing::stable::drive("terminal", super::terminal, 3000);
    }
}
