//! Where a process's resident memory is, mapping by mapping, from
//! `/proc/<pid>/smaps`: the idle-RSS figure is one number, and this says which
//! part of it is the binary's own pages, the heap, thread stacks, or other
//! anonymous mappings (per-thread malloc arenas, large buffers `malloc` placed
//! in their own `mmap`).

use serde_json::{Value, json};

use crate::Error;

/// One mapping with resident pages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    /// Start address.
    pub start: u64,
    /// `rwxp`-style permissions.
    pub perms: String,
    /// The path, `[heap]`, `[stack]`, `[vdso]`…, or `[anon]` for a nameless one.
    pub name: String,
    /// Virtual size, KiB.
    pub size_kib: u64,
    /// Resident, KiB.
    pub rss_kib: u64,
    /// Resident and anonymous, KiB.
    pub anon_kib: u64,
}

/// Parses the text of an smaps file; mappings with nothing resident are left out.
pub fn parse(text: &str) -> Vec<Mapping> {
    let mut out: Vec<Mapping> = Vec::new();
    for line in text.lines() {
        let mut fields = line.split_whitespace();
        let Some(first) = fields.next() else { continue };
        if let Some((start, _end)) = first.split_once('-')
            && let Ok(start) = u64::from_str_radix(start, 16)
        {
            // `start-end perms offset dev inode [name]`
            let perms = fields.next().unwrap_or("").to_owned();
            let name = fields.nth(3).map_or("[anon]".to_owned(), str::to_owned);
            out.push(Mapping {
                start,
                perms,
                name,
                size_kib: 0,
                rss_kib: 0,
                anon_kib: 0,
            });
            continue;
        }
        let (Some(m), Some(kib)) = (out.last_mut(), fields.next().and_then(|v| v.parse().ok()))
        else {
            continue;
        };
        match first {
            "Size:" => m.size_kib = kib,
            "Rss:" => m.rss_kib = kib,
            "Anonymous:" => m.anon_kib = kib,
            _ => {}
        }
    }
    out.retain(|m| m.rss_kib > 0);
    out
}

/// The resident mappings of process `pid`.
pub fn of(pid: u32) -> Result<Vec<Mapping>, Error> {
    let path = format!("/proc/{pid}/smaps");
    let text = std::fs::read_to_string(&path).map_err(|e| Error(format!("reading {path}: {e}")))?;
    Ok(parse(&text))
}

fn largest_first(maps: &[Mapping]) -> Vec<&Mapping> {
    let mut sorted: Vec<&Mapping> = maps.iter().collect();
    sorted.sort_by_key(|m| std::cmp::Reverse(m.rss_kib));
    sorted
}

/// The mappings as JSON, largest resident first; paths shortened to their
/// file name.
pub fn json(maps: &[Mapping]) -> Value {
    Value::Array(
        largest_first(maps)
            .into_iter()
            .map(|m| {
                json!({
                    "start": format!("{:x}", m.start),
                    "perms": m.perms,
                    "name": m.name.rsplit('/').next().unwrap_or(&m.name),
                    "size_kib": m.size_kib,
                    "rss_kib": m.rss_kib,
                    "anon_kib": m.anon_kib,
                })
            })
            .collect(),
    )
}

/// One line: resident KiB by mapping, largest first, e.g.
/// `mcp-exec r-xp 1284, [heap] 768, [anon] rw-p 260 (of 260), …`.
pub fn summary(maps: &[Mapping]) -> String {
    largest_first(maps)
        .iter()
        .map(|m| {
            let name = m.name.rsplit('/').next().unwrap_or(&m.name);
            format!("{name} {} {} (of {})", m.perms, m.rss_kib, m.size_kib)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
00200000-0026a000 r--p 00000000 fe:01 123 /srv/mcp-exec
Size:                424 kB
Rss:                 320 kB
Anonymous:             0 kB
VmFlags: rd mr mw me
0fb08000-0ffbb000 rw-p 00000000 00:00 0                                  [heap]
Size:               4812 kB
Rss:                 768 kB
Anonymous:           768 kB
7f56f0021000-7f56f4000000 ---p 00000000 00:00 0
Size:              65404 kB
Rss:                   0 kB
Anonymous:             0 kB
7f56fe492000-7f56fe4d3000 rw-p 00000000 00:00 0
Size:                260 kB
Rss:                 260 kB
Anonymous:           260 kB
";

    #[test]
    fn smaps_parse_into_resident_mappings_with_their_names() {
        let maps = parse(SAMPLE);
        assert_eq!(maps.len(), 3, "{maps:?}");
        assert_eq!(maps[0].name, "/srv/mcp-exec");
        assert_eq!((maps[0].rss_kib, maps[0].anon_kib), (320, 0));
        assert_eq!(maps[1].name, "[heap]");
        assert_eq!(maps[1].size_kib, 4812);
        assert_eq!(maps[2].name, "[anon]");
        assert_eq!(maps[2].start, 0x7f56fe492000);
        assert_eq!(maps[2].perms, "rw-p");
    }

    #[test]
    fn the_summary_lists_the_largest_resident_mapping_first() {
        let line = summary(&parse(SAMPLE));
        assert!(line.starts_with("[heap] rw-p 768 (of 4812)"), "{line}");
        assert!(line.contains("mcp-exec r--p 320"), "{line}");
    }

    #[test]
    fn this_process_has_resident_mappings() {
        let maps = of(std::process::id()).unwrap_or_default();
        assert!(maps.iter().any(|m| m.name == "[stack]"), "{maps:?}");
    }
}
