//! Terminal state for PTY jobs: the **screen** a VT parser builds from a job's raw
//! output, and the **keys** an agent names in `input.keys`.
//!
//! What it is: a leaf. [`Screen`] is fed the same raw bytes the job's `stdout` window gets and
//! answers [`ScreenView`]s; [`encode`] turns tmux key names and literal text into the bytes a
//! terminal would send. Nothing here knows a job, a PTY descriptor, a wire revision or a tool:
//! the job that owns a PTY owns its `Screen` (one owner, fed in output order), and the front-end
//! renders a `ScreenView` as it is (its serde shape is the `screen` tool's result).
//!
//! What it is not: a terminal emulator for a human (no colours, no attributes, no rendering),
//! nor a PTY (allocation, resize ioctls and SIGWINCH belong to the job).
//!
//! # The parser: `avt`, measured against `vt100`
//! Measured on this machine (2 shared cores, Rust 1.95, the release profile of this crate, both
//! wrapped in the same `Screen`: UTF-8 carry, own text scrollback of 1,000 lines, OSC title):
//!
//! | | `avt` 0.19.0 | `vt100` 0.18.1 |
//! |---|---:|---:|
//! | static binary increment (harness) | +59,648 B | +57,024 B |
//! | new crates | `avt`, `unicode-width` | `vt100`, `vte`, `itoa`, `unicode-width`, `arrayvec` |
//! | feed, `yes`-like output (`y\r\n`, 4 KiB reads) | 4–11 MiB/s | 6–15 MiB/s |
//! | feed, escape-heavy (`top`-like repaints, SGR, UTF-8) | 37–58 MiB/s | 36–73 MiB/s |
//! | `view` at 80×24 / 200×60 | 11–13 / 40–53 µs | 23–37 / 132–220 µs |
//! | 1,000 lines of scrollback (79-char lines) | 157 KiB | 153 KiB |
//!
//! Since then this module builds a row's text from the cells up to its last non-blank one
//! instead of collecting the whole row and trimming it: `avt` with it feeds `yes`-like output at
//! 13 MiB/s (vt100 in the same run: 6) and answers `view` at 80×24 in 7 µs (vt100: 29).
//!
//! (Ranges are the spread between runs on the shared machine. The crates' own scrollback keeps
//! full cells: 1,423 KiB (`avt`) and 2,561 KiB (`vt100`) for the same 1,000 lines, which is
//! why this module keeps scrollback as trimmed text instead.)
//!
//! `avt` is chosen because the screen is what agents read: its `view` is 2–4× faster, the only
//! one inside the `screen` tool's budget (≤ 20 µs at 80×24, ≤ 100 µs at 200×60); it reflows the
//! primary screen on resize as real terminals do (`vt100` truncates rows); it keeps the cursor
//! on `\e[?1049h` as xterm does (`vt100` homes it); it exposes DECCKM for the cursor keys; and
//! it brings one crate besides itself. What it costs, paid here: it takes text, not bytes, so
//! [`Screen::feed`] carries an incomplete UTF-8 sequence across feeds (invalid bytes become
//! U+FFFD); it ignores OSC 0/2, so `Screen` reads the title with its own small scanner; it is
//! slower on scroll-heavy output in the crates' own terms (`yes`: every line scrolls, and each
//! line leaving the top is turned into scrollback text), which the PTY throughput benchmark
//! measures against a bare PTY reader; and it is pre-1.0, so it is pinned exactly.

mod keys;
mod screen;

pub use keys::{KeyError, encode, encode_for};
pub use screen::{Cursor, Screen, ScreenView, TITLE_LIMIT};
