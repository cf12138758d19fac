//! Fuzz target `capture` (`fuzz/fuzz_targets/capture.rs`): capture windows and
//! slices (capture::window, capture::slice). What it checks, and how it reads
//! its input: [`capture`](fn@capture).

use super::Input;
use super::utf8::Decoded;
use crate::capture::{self, StreamSpec, Window};

/// `capture`: pushes and reads interleaved on a small window; every read
/// agrees with a model that keeps the whole stream, and paging with `from`
/// rebuilds what the window holds.
///
/// Input: byte 0 is the window size (1–48); then operations, each an op byte:
/// a multiple of 3 pushes a chunk (a length byte mod 24, then the bytes);
/// otherwise op mod 5 reads `all` (0), `tail` (1, a byte mod 8 lines),
/// `none` (2) or `from` (3, 4: a `u16` from mod 160, a length byte mod 40
/// unless op has bit 4, `unaligned` if op has bit 5).
pub fn capture(data: &[u8]) {
    let mut input = Input { data };
    let max = 1 + usize::from(input.byte() % 48);
    let mut window = Window::new(max);
    let mut all: Vec<u8> = Vec::new();
    while !input.is_empty() {
        let op = input.byte();
        if op.is_multiple_of(3) {
            let n = usize::from(input.byte() % 24);
            let chunk = input.take(n);
            window.push(chunk);
            all.extend_from_slice(chunk);
            continue;
        }
        let spec = match op % 5 {
            0 => StreamSpec::All,
            1 => StreamSpec::Tail(u64::from(input.byte() % 8)),
            2 => StreamSpec::None,
            _ => StreamSpec::From {
                from: u64::from(input.u16() % 160),
                length: (op & 0x10 == 0).then(|| u64::from(input.byte() % 40)),
                unaligned: op & 0x20 != 0,
            },
        };
        check_read(&window, max, &all, &spec);
    }
    check_read(&window, max, &all, &StreamSpec::All);
    check_pages(
        &window,
        &all,
        1 + u64::from(data.first().copied().unwrap_or(0) % 7),
    );
}

/// One read against the model.
fn check_read(window: &Window, max: usize, all: &[u8], spec: &StreamSpec) {
    let Some(slice) = window.slice_with(spec, None) else {
        assert!(matches!(spec, StreamSpec::None));
        return;
    };
    let (start, end, dropped) = naive_read(max, all, spec);
    let what = format!("{spec:?} on {all:?} (window {max})");
    assert_eq!(
        (
            slice.offset,
            slice.offset + slice.bytes,
            slice.dropped_bytes
        ),
        (start, end, dropped),
        "{what}"
    );
    assert_eq!(slice.total_bytes, all.len() as u64, "{what}");
    assert_eq!(slice.truncated, dropped.is_some(), "{what}");
    assert_eq!(
        slice.data,
        capture::sanitize_utf8(&all[to_usize(start)..to_usize(end)]),
        "{what}"
    );
}

/// The slice rules applied to the whole stream: `[start, end)` and `dropped_bytes`.
fn naive_read(max: usize, all: &[u8], spec: &StreamSpec) -> (u64, u64, Option<u64>) {
    let total = all.len() as u64;
    let oldest = total.saturating_sub(max as u64);
    let gone = Some(oldest).filter(|&n| n > 0);
    let chars = Decoded::of(all);
    let boundary_after = |pos: u64| chars.inside(pos).map_or(pos, |(_, end)| end);
    let head = boundary_after(oldest);
    match *spec {
        StreamSpec::None => (0, 0, None),
        StreamSpec::All => (head, total, gone),
        StreamSpec::Tail(0) => (total, total, None),
        StreamSpec::Tail(lines) => {
            // Line starts after each `\n` that is not the last byte.
            let starts: Vec<u64> = (oldest..total.saturating_sub(1))
                .filter(|&i| all[to_usize(i)] == b'\n')
                .map(|i| i + 1)
                .collect();
            match starts.len().checked_sub(to_usize(lines)) {
                Some(i) => (starts[i], total, None),
                None => (head, total, gone),
            }
        }
        StreamSpec::From {
            from,
            length,
            unaligned,
        } => {
            if from >= total {
                return (total, total, None);
            }
            let first = from.max(oldest);
            let dropped = (from < oldest).then(|| oldest - from);
            let requested_end = length.map_or(total, |n| (first + n).min(total));
            if unaligned {
                return (first, requested_end, dropped);
            }
            let start = if from < oldest {
                head
            } else {
                match chars.inside(from) {
                    Some((lead, _)) if lead >= oldest => lead,
                    Some((_, end)) => end,
                    None => from,
                }
            };
            let end = if requested_end == first {
                start
            } else {
                boundary_after(requested_end).max(start)
            };
            (start, end, dropped)
        }
    }
}

/// Pages of `length` from the head rebuild the retained stream exactly.
fn check_pages(window: &Window, all: &[u8], length: u64) {
    let total = all.len() as u64;
    let first = window
        .slice_with(&StreamSpec::All, None)
        .map_or(total, |s| s.offset);
    let mut next = first;
    let mut rebuilt = Vec::new();
    while next < total {
        let spec = StreamSpec::From {
            from: next,
            length: Some(length),
            unaligned: false,
        };
        let Some(page) = window.slice_with(&spec, None) else {
            panic!("no page");
        };
        assert_eq!(page.offset, next, "pages are contiguous");
        assert!(page.bytes > 0, "a page makes progress");
        rebuilt.extend_from_slice(&all[to_usize(page.offset)..to_usize(page.offset + page.bytes)]);
        next = page.offset + page.bytes;
    }
    assert_eq!(rebuilt, &all[to_usize(first)..]);
}

fn to_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    #[test]
    fn capture_reads_agree_with_a_model_of_the_whole_stream() {
        crate::fuzzing::stable::drive("capture", super::capture, 3000);
    }
}
