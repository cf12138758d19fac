//! [`Screen`]: the VT state of one PTY job, fed with the job's raw output in order, and the
//! [`ScreenView`] the `screen` tool answers.
//!
//! Invariants:
//! - [`Screen::offset`] is the count of raw bytes fed, whatever they were: a view says exactly
//!   which prefix of the job's `stdout` stream it reflects;
//! - feeding is split-invariant: bytes fed in any number of pieces, cut anywhere (inside a UTF-8
//!   character, an escape sequence or an OSC title), give the same screen as fed at once. The
//!   parser keeps its own escape state across feeds; this module carries the one incomplete
//!   UTF-8 character (at most 3 bytes) and the title scanner's state;
//! - memory is bounded by the size and `scrollback_limit`: scrollback is kept as trimmed text,
//!   never as cells, at most `scrollback_limit` lines, oldest dropped first; a title is at most
//!   [`TITLE_LIMIT`] bytes;
//! - a view's `lines` are the visible rows of the active screen, top to bottom, one string per
//!   row, trailing blanks trimmed, a wide character once; `cursor` is on the screen
//!   (`row < rows`, `col < cols`).

use std::collections::VecDeque;

use serde::Serialize;

/// The longest title kept, in bytes; a longer OSC title is cut here (at a character boundary
/// when shown).
pub const TITLE_LIMIT: usize = 1024;

/// The VT state of one PTY job: the `avt` terminal, the text scrollback, the title and the
/// count of bytes fed. `Send`, owned by the job.
pub struct Screen {
    terminal: avt::Terminal,
    /// The start of a UTF-8 character cut by the end of the last feed.
    carry: Carry,
    title: TitleScanner,
    scrollback: Scrollback,
    offset: u64,
}

/// What the `screen` tool answers, as serialized.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct ScreenView {
    /// Columns of the terminal.
    pub cols: u16,
    /// Rows of the terminal; `lines.len()`.
    pub rows: u16,
    /// The visible rows, top to bottom, trailing blanks trimmed.
    pub lines: Vec<String>,
    /// Where the cursor is, and whether it is shown (`\e[?25l` hides it).
    pub cursor: Cursor,
    /// Whether the alternate screen (`\e[?1049h`, full-screen programs) is active.
    pub alternate_screen: bool,
    /// The window title last set by OSC 0 or 2; absent when none (or an empty one) was set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The raw byte offset of the job's output this view reflects.
    pub offset: u64,
    /// Up to the asked number of lines that scrolled off the top of the primary screen, oldest
    /// first; absent unless asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scrollback: Option<Vec<String>>,
}

/// The cursor of a [`ScreenView`], zero-based.
#[derive(Serialize, Clone, Copy, Debug, PartialEq)]
pub struct Cursor {
    /// Row, `0..rows`.
    pub row: u16,
    /// Column, `0..cols`.
    pub col: u16,
    /// Whether the program shows it.
    pub visible: bool,
}

const _: () = {
    const fn is_send<T: Send>() {}
    is_send::<Screen>();
};

impl Screen {
    /// A blank screen of `cols` × `rows` (each at least 1) keeping at most `scrollback_limit`
    /// lines above it.
    pub fn new(cols: u16, rows: u16, scrollback_limit: usize) -> Screen {
        let (cols, rows) = (usize::from(cols.max(1)), usize::from(rows.max(1)));
        let terminal = match avt::Terminal::new(cols, rows) {
            Ok(terminal) => terminal,
            // Unreachable: both dimensions are at least 1, the one thing `new` checks.
            Err(_) => avt::Terminal::new(1, 1).unwrap_or_else(|_| unreachable!()),
        };
        Screen {
            terminal,
            carry: Carry::default(),
            title: TitleScanner::default(),
            scrollback: Scrollback::new(scrollback_limit),
            offset: 0,
        }
    }

    /// Feeds raw PTY output, cut anywhere; advances [`offset`](Self::offset) by `bytes.len()`.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.offset += bytes.len() as u64;
        self.title.scan(bytes);
        let mut rest = bytes;
        // Complete a character cut by the last feed first. Each round takes at least one byte,
        // and at most three are needed, so this ends within three rounds.
        while !self.carry.is_empty() && !rest.is_empty() {
            let take = rest.len().min(3);
            let mut head = [0u8; 6];
            let held = self.carry.len();
            head[..held].copy_from_slice(self.carry.bytes());
            head[held..held + take].copy_from_slice(&rest[..take]);
            let pending = feed_utf8(
                &mut self.terminal,
                &mut self.scrollback,
                &head[..held + take],
            );
            self.carry.set(&head[held + take - pending..held + take]);
            rest = &rest[take..];
        }
        if !rest.is_empty() {
            let pending = feed_utf8(&mut self.terminal, &mut self.scrollback, rest);
            self.carry.set(&rest[rest.len() - pending..]);
        }
    }

    /// Changes the size (each at least 1). The primary screen reflows as a terminal's does;
    /// rows pushed off its top go to the scrollback.
    pub fn resize(&mut self, cols: u16, rows: u16) {
        let (cols, rows) = (usize::from(cols.max(1)), usize::from(rows.max(1)));
        self.terminal.resize_with(cols, rows, &mut self.scrollback);
    }

    /// Raw bytes fed so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// `(cols, rows)`.
    pub fn size(&self) -> (u16, u16) {
        let (cols, rows) = self.terminal.size();
        (clamp_u16(cols), clamp_u16(rows))
    }

    /// Whether the program asked for application cursor keys (DECCKM, `\e[?1h`): the cursor
    /// keys are then sent as `\eOA`… (see [`super::keys::encode_for`]).
    pub fn application_cursor(&self) -> bool {
        self.terminal.cursor_key_app_mode()
    }

    /// The screen now, with up to `scrollback` lines from above it (none when 0).
    pub fn view(&self, scrollback: usize) -> ScreenView {
        let (cols, rows) = self.size();
        let lines: Vec<String> = self
            .terminal
            .screen()
            .visible_lines()
            .map(row_text)
            .collect();
        let cursor = self.terminal.cursor();
        ScreenView {
            cols,
            rows,
            lines,
            cursor: Cursor {
                row: clamp_u16(cursor.row).min(rows - 1),
                // A cursor past the last column (a pending wrap) is shown on it.
                col: clamp_u16(cursor.col).min(cols - 1),
                visible: cursor.visible,
            },
            alternate_screen: self.terminal.active_screen_kind() == avt::ScreenKind::Alternate,
            title: self.title.title(),
            offset: self.offset,
            scrollback: (scrollback > 0).then(|| self.scrollback.last(scrollback)),
        }
    }
}

fn clamp_u16(n: usize) -> u16 {
    u16::try_from(n).unwrap_or(u16::MAX)
}

/// A row's text without its trailing blanks, a wide character once. The blanks are found on
/// the cells first, so that a mostly empty row (every line of `yes`) costs its text, not its
/// width: this runs for every line that scrolls off.
fn row_text(line: &avt::Line) -> String {
    let cells = line.cells();
    let end = cells
        .iter()
        .rposition(|c| c.char() != ' ')
        .map_or(0, |i| i + 1);
    let mut text = String::with_capacity(end);
    // The second cell of a wide character has width 0 (and holds a blank).
    text.extend(
        cells[..end]
            .iter()
            .filter(|c| c.width() != 0)
            .map(|c| c.char()),
    );
    text
}

/// Feeds `bytes` as text: valid runs as they are, each invalid sequence as one U+FFFD (as
/// `String::from_utf8_lossy` does). Returns the length of an incomplete character at the end,
/// which is not fed.
fn feed_utf8(terminal: &mut avt::Terminal, scrollback: &mut Scrollback, mut bytes: &[u8]) -> usize {
    loop {
        match std::str::from_utf8(bytes) {
            Ok(text) => {
                terminal.feed_with(text, &mut *scrollback);
                return 0;
            }
            Err(error) => {
                let (valid, rest) = bytes.split_at(error.valid_up_to());
                if let Ok(text) = std::str::from_utf8(valid) {
                    terminal.feed_with(text, &mut *scrollback);
                }
                match error.error_len() {
                    Some(bad) => {
                        terminal.feed_with('\u{FFFD}', &mut *scrollback);
                        bytes = &rest[bad..];
                    }
                    None => return rest.len(),
                }
            }
        }
    }
}

/// The start of a UTF-8 character (at most 3 bytes) held between feeds.
#[derive(Default)]
struct Carry {
    bytes: [u8; 3],
    len: u8,
}

impl Carry {
    fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn len(&self) -> usize {
        usize::from(self.len)
    }

    fn bytes(&self) -> &[u8] {
        &self.bytes[..self.len()]
    }

    /// Holds `bytes`: an incomplete character, so never more than 3.
    fn set(&mut self, bytes: &[u8]) {
        let len = bytes.len().min(3);
        self.bytes[..len].copy_from_slice(&bytes[..len]);
        self.len = len as u8;
    }
}

/// Lines scrolled off the top of the primary screen, as trimmed text, at most `limit`. It is
/// the `avt` observer that receives them: the terminal itself keeps no scrollback.
struct Scrollback {
    lines: VecDeque<Box<str>>,
    limit: usize,
}

impl Scrollback {
    fn new(limit: usize) -> Scrollback {
        Scrollback {
            lines: VecDeque::new(),
            limit,
        }
    }

    fn last(&self, n: usize) -> Vec<String> {
        let skip = self.lines.len().saturating_sub(n);
        self.lines
            .iter()
            .skip(skip)
            .map(|line| line.to_string())
            .collect()
    }
}

impl avt::Observer for Scrollback {
    type Output = ();

    fn evicted(&mut self, _: &mut avt::Observation<'_>, line: &avt::Line) {
        if self.limit == 0 {
            return;
        }
        if self.lines.len() == self.limit {
            self.lines.pop_front();
        }
        self.lines.push_back(row_text(line).into_boxed_str());
    }

    fn end(&mut self, _: &mut avt::Observation<'_>) {}
}

/// Reads the window title from OSC 0 and OSC 2 (`\e]0;TITLE\a`, `\e]2;TITLE\e\\`) in the raw
/// bytes, which `avt` parses but drops. A byte state machine, so a title cut across feeds is
/// read whole; like xterm, a BEL, ST or any ESC ends the string, CAN or SUB cancels it.
#[derive(Default)]
struct TitleScanner {
    state: TitleState,
    /// The title being read (bounded by [`TITLE_LIMIT`]).
    pending: Vec<u8>,
    title: Option<String>,
}

#[derive(Default, Clone, Copy, PartialEq, Debug)]
enum TitleState {
    #[default]
    Ground,
    Escape,
    /// After `ESC ]`: the numeric parameter so far (saturating).
    Param(u16),
    /// In the string of an OSC; `true` if it sets the title.
    Text(bool),
}

impl TitleScanner {
    fn scan(&mut self, bytes: &[u8]) {
        let mut rest = bytes;
        while !rest.is_empty() {
            if self.state == TitleState::Ground {
                // Outside OSC only ESC matters: skip to it in one pass.
                match rest.iter().position(|&b| b == 0x1b) {
                    Some(at) => {
                        self.state = TitleState::Escape;
                        rest = &rest[at + 1..];
                        continue;
                    }
                    None => return,
                }
            }
            let byte = rest[0];
            rest = &rest[1..];
            self.state = match (self.state, byte) {
                (TitleState::Escape, b']') => TitleState::Param(0),
                (TitleState::Escape, 0x1b) => TitleState::Escape,
                (TitleState::Escape, _) => TitleState::Ground,
                (TitleState::Param(n), b'0'..=b'9') => {
                    TitleState::Param(n.saturating_mul(10).saturating_add(u16::from(byte - b'0')))
                }
                (TitleState::Param(n), b';') => {
                    self.pending.clear();
                    TitleState::Text(n == 0 || n == 2)
                }
                (TitleState::Param(_) | TitleState::Text(_), 0x18 | 0x1a) => TitleState::Ground,
                (TitleState::Param(_), 0x07) => TitleState::Ground,
                (TitleState::Param(_), 0x1b) => TitleState::Escape,
                (TitleState::Param(_), _) => TitleState::Text(false),
                (TitleState::Text(sets), 0x07 | 0x1b) => {
                    if sets {
                        self.finish();
                    }
                    if byte == 0x1b {
                        TitleState::Escape
                    } else {
                        TitleState::Ground
                    }
                }
                (TitleState::Text(sets), _) => {
                    if sets && self.pending.len() < TITLE_LIMIT {
                        self.pending.push(byte);
                    }
                    TitleState::Text(sets)
                }
                (TitleState::Ground, _) => TitleState::Ground,
            };
        }
    }

    fn finish(&mut self) {
        let title = String::from_utf8_lossy(&self.pending).into_owned();
        self.title = (!title.is_empty()).then_some(title);
        self.pending.clear();
    }

    fn title(&self) -> Option<String> {
        self.title.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fed(cols: u16, rows: u16, bytes: &[u8]) -> Screen {
        let mut screen = Screen::new(cols, rows, 100);
        screen.feed(bytes);
        screen
    }

    /// The same bytes fed at once and in pieces of every size from 1 to 7.
    fn assert_split_invariant(bytes: &[u8]) {
        let whole = fed(20, 5, bytes).view(10);
        for size in 1..=7 {
            let mut screen = Screen::new(20, 5, 100);
            for piece in bytes.chunks(size) {
                screen.feed(piece);
            }
            assert_eq!(
                screen.view(10),
                whole,
                "pieces of {size} bytes of {bytes:?}"
            );
        }
    }

    #[test]
    fn text_and_newlines_fill_the_rows_with_trailing_blanks_trimmed() {
        let view = fed(10, 3, b"hello   \r\nworld").view(0);
        assert_eq!(view.lines, ["hello", "world", ""]);
        assert_eq!((view.cols, view.rows), (10, 3));
        assert_eq!(
            view.cursor,
            Cursor {
                row: 1,
                col: 5,
                visible: true
            }
        );
        assert!(!view.alternate_screen);
        assert_eq!(view.title, None);
        assert_eq!(view.scrollback, None);
        assert_eq!(view.offset, 15);
    }

    #[test]
    fn offset_counts_raw_bytes_even_invalid_and_unfinished_ones() {
        let mut screen = Screen::new(10, 3, 0);
        screen.feed(b"a\xff\x1b[");
        screen.feed("\u{e9}".as_bytes().split_at(1).0);
        assert_eq!(screen.offset(), 5);
        assert_eq!(screen.view(0).offset, 5);
    }

    #[test]
    fn escape_sequences_cut_across_feeds_give_the_same_screen() {
        assert_split_invariant(b"ab\x1b[2;3Hxy\x1b[1;31mred\x1b[0m\x1b[K\x1b[?25l\x1b[3Dz");
        let mut screen = Screen::new(10, 3, 0);
        for piece in [&b"\x1b"[..], b"[", b"2", b";", b"4", b"H", b"X"] {
            screen.feed(piece);
        }
        assert_eq!(screen.view(0).lines[1], "   X");
    }

    #[test]
    fn utf8_cut_across_feeds_is_one_character() {
        let text = "caf\u{e9} \u{4e2d}\u{6587} \u{1f600}!";
        assert_split_invariant(text.as_bytes());
        let mut screen = Screen::new(20, 2, 0);
        for byte in text.as_bytes() {
            screen.feed(std::slice::from_ref(byte));
        }
        assert_eq!(screen.view(0).lines[0], text);
    }

    #[test]
    fn invalid_utf8_shows_as_replacement_characters() {
        assert_eq!(
            fed(10, 1, b"a\xffb\xe4\xb8c").view(0).lines[0],
            "a\u{fffd}b\u{fffd}c"
        );
        assert_split_invariant(b"a\xffb\xe4\xb8c\xf0\x9f\x98");
        let mut screen = Screen::new(10, 1, 0);
        screen.feed(b"\xe4");
        screen.feed(b"ab");
        assert_eq!(screen.view(0).lines[0], "\u{fffd}ab");
    }

    #[test]
    fn a_wide_character_is_rendered_once_and_takes_two_columns() {
        let view = fed(10, 1, "\u{4e2d}x".as_bytes()).view(0);
        assert_eq!(view.lines[0], "\u{4e2d}x");
        assert_eq!(view.cursor.col, 3);
    }

    #[test]
    fn alternate_screen_is_reported_while_on_and_the_primary_comes_back_after() {
        let mut screen = fed(10, 3, b"shell$ vi");
        screen.feed(b"\x1b[?1049h\x1b[H\x1b[2Jeditor");
        let on = screen.view(0);
        assert!(on.alternate_screen);
        assert_eq!(on.lines, ["editor", "", ""]);
        screen.feed(b"\x1b[?1049l");
        let off = screen.view(0);
        assert!(!off.alternate_screen);
        assert_eq!(off.lines, ["shell$ vi", "", ""]);
        assert_eq!(
            off.cursor,
            Cursor {
                row: 0,
                col: 9,
                visible: true
            }
        );
    }

    #[test]
    fn title_is_read_from_osc_0_and_2_whole_across_feeds() {
        assert_eq!(
            fed(10, 1, b"\x1b]0;first\x07").view(0).title.as_deref(),
            Some("first")
        );
        let mut screen = fed(10, 1, b"\x1b]2;sec");
        screen.feed(b"ond\x1b");
        screen.feed(b"\\text");
        let view = screen.view(0);
        assert_eq!(view.title.as_deref(), Some("second"));
        assert_eq!(view.lines[0], "text");
        screen.feed("\x1b]2;caf\u{e9}\x07".as_bytes());
        assert_eq!(screen.view(0).title.as_deref(), Some("caf\u{e9}"));
        assert_split_invariant(b"a\x1b]2;t\xc3\xa9tle\x1b\\b\x1b]0;x\x07");
    }

    #[test]
    fn other_osc_strings_and_cancelled_ones_leave_the_title() {
        let mut screen = fed(10, 1, b"\x1b]2;kept\x07");
        screen.feed(b"\x1b]1;icon\x07\x1b]7;file:///tmp\x07\x1b]133;A\x07\x1b]2;gone\x18");
        screen.feed(b"\x1b]52;c;aGk=\x07");
        assert_eq!(screen.view(0).title.as_deref(), Some("kept"));
        screen.feed(b"\x1b]2;\x07");
        assert_eq!(screen.view(0).title, None, "an empty title clears it");
    }

    #[test]
    fn a_long_title_is_bounded() {
        let mut bytes = b"\x1b]2;".to_vec();
        bytes.extend(std::iter::repeat_n(b'x', 10 * TITLE_LIMIT));
        bytes.push(0x07);
        assert_eq!(
            fed(10, 1, &bytes).view(0).title.map(|t| t.len()),
            Some(TITLE_LIMIT)
        );
    }

    #[test]
    fn cursor_visibility_follows_dectcem() {
        let mut screen = fed(10, 2, b"\x1b[?25l");
        assert!(!screen.view(0).cursor.visible);
        screen.feed(b"\x1b[?25h");
        assert!(screen.view(0).cursor.visible);
    }

    #[test]
    fn a_cursor_in_the_pending_wrap_column_is_shown_on_the_last_column() {
        let view = fed(5, 2, b"12345").view(0);
        assert_eq!(view.lines[0], "12345");
        assert!(view.cursor.col < 5, "{:?}", view.cursor);
    }

    #[test]
    fn scrollback_keeps_the_last_lines_that_left_the_top_oldest_first() {
        let mut screen = Screen::new(10, 2, 3);
        for i in 0..6 {
            screen.feed(format!("line {i}\r\n").as_bytes());
        }
        let view = screen.view(2);
        assert_eq!(view.lines, ["line 5", ""]);
        assert_eq!(
            view.scrollback.as_deref(),
            Some(&["line 3".to_string(), "line 4".into()][..])
        );
        assert_eq!(
            screen.view(100).scrollback.map(|s| s.len()),
            Some(3),
            "bounded by the limit"
        );
        assert_eq!(screen.view(0).scrollback, None, "absent unless asked for");
    }

    #[test]
    fn the_alternate_screen_adds_nothing_to_the_scrollback() {
        let mut screen = Screen::new(10, 2, 10);
        screen.feed(b"\x1b[?1049h");
        for i in 0..5 {
            screen.feed(format!("alt {i}\r\n").as_bytes());
        }
        screen.feed(b"\x1b[?1049l");
        assert_eq!(screen.view(10).scrollback, Some(vec![]));
    }

    #[test]
    fn no_scrollback_limit_keeps_none() {
        let mut screen = Screen::new(10, 1, 0);
        screen.feed(b"a\r\nb\r\nc");
        assert_eq!(screen.view(5).scrollback, Some(vec![]));
    }

    #[test]
    fn resize_changes_the_size_reflows_and_keeps_the_cursor_on_screen() {
        let mut screen = fed(10, 3, b"0123456789abc\r\nx");
        screen.resize(20, 4);
        let view = screen.view(0);
        assert_eq!((view.cols, view.rows), (20, 4));
        assert_eq!(view.lines.len(), 4);
        assert!(
            view.lines.contains(&"0123456789abc".to_string()),
            "{:?}",
            view.lines
        );
        screen.resize(4, 1);
        let view = screen.view(10);
        assert_eq!((view.cols, view.rows, view.lines.len()), (4, 1, 1));
        assert!(view.cursor.row < 1 && view.cursor.col < 4);
        assert!(
            !view.scrollback.unwrap_or_default().is_empty(),
            "rows pushed off go above"
        );
    }

    #[test]
    fn zero_sizes_are_taken_as_one() {
        let mut screen = Screen::new(0, 0, 0);
        assert_eq!(screen.size(), (1, 1));
        screen.resize(0, 7);
        assert_eq!(screen.size(), (1, 7));
        screen.feed(b"abc");
        assert_eq!(screen.view(0).rows, 7);
    }

    #[test]
    fn application_cursor_mode_is_visible() {
        let mut screen = Screen::new(10, 1, 0);
        assert!(!screen.application_cursor());
        screen.feed(b"\x1b[?1h");
        assert!(screen.application_cursor());
    }

    #[test]
    fn the_view_serializes_as_spec_20_says() {
        let screen = fed(4, 1, b"\x1b]2;t\x07hi");
        let json = serde_json::to_value(screen.view(0)).unwrap_or_default();
        assert_eq!(
            json,
            serde_json::json!({"cols": 4, "rows": 1, "lines": ["hi"],
                "cursor": {"row": 0, "col": 2, "visible": true},
                "alternate_screen": false, "title": "t", "offset": 8})
        );
        let json = serde_json::to_value(Screen::new(2, 1, 5).view(1)).unwrap_or_default();
        assert_eq!(json["scrollback"], serde_json::json!([]));
        assert!(json.get("title").is_none());
    }
}
