//! The sliding window of one output stream: the last `max` bytes plus a count of every byte
//! ever written.
//!
//! Invariants: `buf.len() <= max`; the retained bytes are the stream's bytes
//! `[total - buf.len(), total)`; `lost` holds the last `min(3, dropped)` dropped bytes, so that
//! a character cut by the head can still be recognised as one (its lead byte is at most 3
//! bytes before the head) instead of being guessed at.
//!
//! Many jobs hold windows at once and most print little, so storage grows with the data and
//! never beyond `max`. Pushing is a pair of bulk copies per chunk: at most `max` bytes move,
//! whatever the chunk size, and discarding the head is O(1).

use std::collections::VecDeque;

/// Sliding window over one stream: keeps the last `max` bytes, counts all bytes ever written.
#[derive(Debug, Clone)]
pub struct Window {
    buf: VecDeque<u8>,
    max: usize,
    total: u64,
    lost: LastDropped,
}

/// The last (up to) 3 bytes dropped from the head, newest last.
#[derive(Debug, Clone, Default)]
struct LastDropped {
    bytes: [u8; 3],
    len: usize,
}

impl LastDropped {
    fn remember(&mut self, dropped: &[u8]) {
        for &b in &dropped[dropped.len().saturating_sub(3)..] {
            self.bytes = [self.bytes[1], self.bytes[2], b];
            self.len = (self.len + 1).min(3);
        }
    }

    /// The byte `back` positions before the head (1 = the newest dropped byte).
    fn get(&self, back: usize) -> Option<u8> {
        (1..=self.len).contains(&back).then(|| self.bytes[3 - back])
    }
}

impl Window {
    /// An empty window that will keep at most `max` bytes. Allocates nothing yet.
    pub fn new(max: usize) -> Self {
        Self {
            buf: VecDeque::new(),
            max,
            total: 0,
            lost: LastDropped::default(),
        }
    }

    /// Appends `bytes`, dropping the oldest bytes beyond `max`.
    pub fn push(&mut self, bytes: &[u8]) {
        self.total += bytes.len() as u64;
        if bytes.len() >= self.max {
            // Everything retained goes, and so does the chunk's own head.
            let (kept_from, _) = bytes.split_at(bytes.len() - self.max);
            let (front, back) = self.buf.as_slices();
            self.lost.remember(front);
            self.lost.remember(back);
            self.lost.remember(kept_from);
            self.buf.clear();
            self.grow_for(self.max);
            self.buf.extend(&bytes[bytes.len() - self.max..]);
            return;
        }
        let overflow = (self.buf.len() + bytes.len()).saturating_sub(self.max);
        if overflow > 0 {
            let tail_of_dropped = self.buf.range(overflow.saturating_sub(3)..overflow);
            let mut last = [0u8; 3];
            let mut n = 0;
            for (slot, &b) in last.iter_mut().zip(tail_of_dropped) {
                *slot = b;
                n += 1;
            }
            self.lost.remember(&last[..n]);
            self.buf.drain(..overflow);
        }
        self.grow_for(self.buf.len() + bytes.len());
        // `Extend<&u8>` for `VecDeque` is specialised for slices into a bulk copy.
        self.buf.extend(bytes);
    }

    /// Bytes ever written.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Bytes of memory it holds (its buffer's capacity).
    pub fn held(&self) -> usize {
        self.buf.capacity()
    }

    /// Bytes dropped from the head: `total - retained`.
    pub fn dropped(&self) -> u64 {
        self.total - self.buf.len() as u64
    }

    /// The retained bytes from absolute offset `from` (or from the oldest
    /// retained byte, if `from` was dropped) to the end, with the offset of
    /// the first one.
    pub fn retained_from(&self, from: u64) -> (u64, Vec<u8>) {
        let start = from.clamp(self.oldest(), self.total);
        (start, self.copy(start, self.total))
    }

    /// The raw retained bytes from absolute offset `from`, at most `max` of
    /// them, unsanitised: empty when `from` was dropped or is not written
    /// yet (see [`Window::dropped`], [`Window::total`]).
    pub fn raw(&self, from: u64, max: u64) -> Vec<u8> {
        if from < self.oldest() || from >= self.total {
            return Vec::new();
        }
        self.copy(from, from.saturating_add(max).min(self.total))
    }

    /// Makes room for `needed` bytes, doubling as `Vec` would but never past `max`, so a
    /// full window costs `max` bytes and not the next power of two above it.
    fn grow_for(&mut self, needed: usize) {
        let cap = self.buf.capacity();
        if needed <= cap {
            return;
        }
        let target = needed.max(cap.saturating_mul(2)).min(self.max).max(needed);
        self.buf.reserve_exact(target - self.buf.len());
    }

    /// Absolute position of the oldest retained byte (= [`Window::dropped`]).
    pub(super) fn oldest(&self) -> u64 {
        self.dropped()
    }

    /// The byte at absolute position `pos`: retained bytes, plus the last few dropped ones
    /// (see the module invariants); `None` elsewhere.
    pub(super) fn byte_at(&self, pos: u64) -> Option<u8> {
        let oldest = self.oldest();
        if pos >= oldest {
            let index = usize::try_from(pos - oldest).ok()?;
            return self.buf.get(index).copied();
        }
        self.lost.get(usize::try_from(oldest - pos).ok()?)
    }

    /// Copies the retained bytes at absolute positions `[start, end)`; both must lie within
    /// `[oldest, total]`.
    pub(super) fn copy(&self, start: u64, end: u64) -> Vec<u8> {
        let (lo, hi) = (self.index(start), self.index(end));
        if lo >= hi {
            return Vec::new();
        }
        let (front, back) = self.buf.as_slices();
        let mut out = Vec::with_capacity(hi.saturating_sub(lo));
        let split = front.len();
        if lo < split {
            out.extend_from_slice(&front[lo..hi.min(split)]);
        }
        if hi > split {
            out.extend_from_slice(&back[lo.max(split) - split..hi - split]);
        }
        out
    }

    /// Absolute position of the last `needle` in `[start, end)` of the retained bytes.
    pub(super) fn rfind(&self, needle: u8, start: u64, end: u64) -> Option<u64> {
        let (lo, hi) = (self.index(start), self.index(end));
        if lo >= hi {
            return None;
        }
        let (front, back) = self.buf.as_slices();
        let split = front.len();
        let in_back = if hi > split {
            back[lo.max(split) - split..hi - split]
                .iter()
                .rposition(|&b| b == needle)
                .map(|i| i + lo.max(split))
        } else {
            None
        };
        let found = in_back.or_else(|| {
            let in_front = front.get(lo..hi.min(split))?;
            in_front.iter().rposition(|&b| b == needle).map(|i| i + lo)
        });
        found.map(|i| self.oldest() + i as u64)
    }

    /// Index into `buf` of an absolute position, clamped to the retained range so that a
    /// caller's off-by-one cannot turn into a panic on a server path.
    fn index(&self, pos: u64) -> usize {
        let rel = pos.saturating_sub(self.oldest());
        usize::try_from(rel).map_or(self.buf.len(), |i| i.min(self.buf.len()))
    }

    #[cfg(test)]
    pub(super) fn capacity(&self) -> usize {
        self.buf.capacity()
    }

    #[cfg(test)]
    pub(super) fn retained(&self) -> Vec<u8> {
        self.buf.iter().copied().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::super::xorshift_bytes;
    use super::*;

    #[test]
    fn a_new_window_allocates_nothing_up_front() {
        let window = Window::new(1 << 30);
        assert_eq!(window.capacity(), 0);
        assert_eq!((window.total(), window.dropped()), (0, 0));
    }

    #[test]
    fn storage_grows_with_the_data_not_with_the_maximum() {
        let mut window = Window::new(1 << 30);
        window.push(b"hello");
        assert!(window.capacity() < 4096, "capacity {}", window.capacity());
    }

    #[test]
    fn storage_never_exceeds_the_maximum_once_full() {
        let max = 1_000_000;
        let mut window = Window::new(max);
        for chunk in 0..40 {
            window.push(&vec![chunk as u8; 65_536]);
        }
        assert_eq!(window.retained().len(), max);
        assert!(
            window.capacity() <= max + 64,
            "capacity {}",
            window.capacity()
        );
    }

    #[test]
    fn a_2_kib_window_keeps_the_exact_suffix_and_counts_what_it_dropped() {
        let data = xorshift_bytes(7, 5000);
        let mut window = Window::new(2048);
        for chunk in data.chunks(300) {
            window.push(chunk);
        }
        assert_eq!(window.total(), 5000);
        assert_eq!(window.dropped(), 5000 - 2048);
        assert_eq!(window.oldest(), 2952);
        assert_eq!(window.retained(), &data[2952..]);
    }

    #[test]
    fn a_chunk_larger_than_the_window_keeps_only_its_own_suffix() {
        let data = xorshift_bytes(3, 10_000);
        let mut window = Window::new(2048);
        window.push(b"old bytes");
        window.push(&data);
        assert_eq!(window.total(), 10_009);
        assert_eq!(window.dropped(), 10_009 - 2048);
        assert_eq!(window.retained(), &data[10_000 - 2048..]);
    }

    #[test]
    fn a_chunk_exactly_the_window_size_replaces_everything() {
        let mut window = Window::new(4);
        window.push(b"ab");
        window.push(b"wxyz");
        assert_eq!(window.retained(), b"wxyz");
        assert_eq!(window.dropped(), 2);
    }

    #[test]
    fn a_zero_sized_window_keeps_nothing_but_still_counts() {
        let mut window = Window::new(0);
        window.push(b"abc");
        window.push(b"");
        assert_eq!((window.total(), window.dropped()), (3, 3));
        assert!(window.retained().is_empty());
    }

    #[test]
    fn the_last_three_dropped_bytes_stay_readable() {
        let mut window = Window::new(2);
        window.push(b"abcdef");
        // Dropped "abcd": b, c, d are remembered, a is forgotten.
        assert_eq!(window.byte_at(0), None);
        assert_eq!(
            (window.byte_at(1), window.byte_at(2), window.byte_at(3)),
            (Some(b'b'), Some(b'c'), Some(b'd'))
        );
        assert_eq!(
            (window.byte_at(4), window.byte_at(5)),
            (Some(b'e'), Some(b'f'))
        );
        assert_eq!(window.byte_at(6), None);
        window.push(b"g");
        assert_eq!(window.byte_at(1), None);
        assert_eq!(window.byte_at(4), Some(b'e'));
    }

    #[test]
    fn remembered_dropped_bytes_match_the_stream_for_random_chunking() {
        let data = xorshift_bytes(11, 20_000);
        let mut window = Window::new(1000);
        let mut at = 0;
        let mut sizes = xorshift_bytes(5, 400).into_iter().cycle();
        while at < data.len() {
            let size = usize::from(sizes.next().unwrap_or(1)) * 8 + 1;
            let end = (at + size).min(data.len());
            window.push(&data[at..end]);
            at = end;
            let oldest = window.oldest();
            for pos in oldest.saturating_sub(3)..window.total() {
                assert_eq!(window.byte_at(pos), Some(data[pos as usize]), "pos {pos}");
            }
        }
    }

    #[test]
    fn copy_and_rfind_work_across_the_ring_seam() {
        let mut window = Window::new(8);
        window.push(b"0123456");
        window.push(b"7\n9\nb");
        // The stream is "0123456" "7\n9\nb"; retained = "4567\n9\nb" at offsets 4..12.
        assert_eq!(window.copy(4, 12), b"4567\n9\nb");
        assert_eq!(window.copy(6, 10), b"67\n9");
        assert_eq!(window.rfind(b'\n', 4, 12), Some(10));
        assert_eq!(window.rfind(b'\n', 4, 10), Some(8));
        assert_eq!(window.rfind(b'\n', 4, 8), None);
    }

    #[test]
    fn pushing_256_mib_in_64_kib_chunks_through_a_1_mib_window_is_fast() {
        let chunk = xorshift_bytes(1, 65_536);
        let mut window = Window::new(1 << 20);
        let started = std::time::Instant::now();
        for _ in 0..4096 {
            window.push(&chunk);
        }
        let elapsed = started.elapsed();
        assert_eq!(window.total(), 256 << 20);
        assert_eq!(window.dropped(), (256 << 20) - (1 << 20));
        assert_eq!(window.copy(window.total() - 65_536, window.total()), chunk);
        // Measured here: bulk copies take under 10 ms even unoptimised; a per-byte
        // push_back/pop_front loop takes ~0.4 s optimised and ~2.5 s unoptimised.
        assert!(elapsed.as_millis() < 250, "took {elapsed:?}");
    }
}
