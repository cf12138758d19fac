//! Fuzz target `files_path` (`fuzz/fuzz_targets/files_path.rs`): the
//! `/files/<abs path>` path parser (files::path). What it checks,
//! and how it reads its input: [`files_path`](fn@files_path).

/// `files_path`: the input is the raw path of a `/files/…` URL (or a
/// `?move=` value) as a client sends it. `from_url_path` must agree with a
/// naive model applied by the letter: percent-decode (a `%` needs two hex
/// digits), then refuse a relative path, a NUL byte, a `.` or `..`
/// component, and otherwise join the non-empty components under `/`. An
/// accepted path is therefore absolute, normalised and free of `..`, so
/// "beneath a root" is never a question of spelling; parsing its own text
/// again gives it back (`from_text`, when it is UTF-8).
pub fn files_path(data: &[u8]) {
    use crate::files::path::{PathError, from_text, from_url_path};
    use std::os::unix::ffi::OsStrExt;

    let raw = String::from_utf8_lossy(data);
    let got = from_url_path(&raw);

    let bytes = raw.as_bytes();
    let mut decoded = Vec::new();
    let mut bad_escape = false;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = |b: Option<&u8>| b.and_then(|b| (*b as char).to_digit(16));
            match (hex(bytes.get(i + 1)), hex(bytes.get(i + 2))) {
                (Some(hi), Some(lo)) => {
                    decoded.push((hi * 16 + lo) as u8);
                    i += 3;
                }
                _ => {
                    bad_escape = true;
                    break;
                }
            }
        } else {
            decoded.push(bytes[i]);
            i += 1;
        }
    }
    let parts: Vec<&[u8]> = decoded
        .split(|&b| b == b'/')
        .filter(|p| !p.is_empty())
        .collect();
    let expected: Result<Vec<u8>, fn(String) -> PathError> = if bad_escape {
        Err(PathError::BadEscape)
    } else if decoded.first() != Some(&b'/') {
        Err(PathError::Relative)
    } else if decoded.contains(&0) {
        Err(PathError::Nul)
    } else if parts.iter().any(|p| *p == b"." || *p == b"..") {
        Err(PathError::DotDot)
    } else if parts.is_empty() {
        Ok(b"/".to_vec())
    } else {
        Ok(parts.iter().flat_map(|p| [&b"/"[..], p].concat()).collect())
    };
    match (&got, expected) {
        (Ok(path), Ok(want)) => {
            let have = path.as_os_str().as_bytes();
            assert_eq!(have, &want[..], "{raw:?}");
            assert!(!have.windows(2).any(|w| w == b"//"), "{raw:?}");
            assert!(have == b"/" || !have.ends_with(b"/"), "{raw:?}");
            if let Some(text) = path.to_str() {
                assert_eq!(from_text(text).as_ref(), Ok(path), "{raw:?}");
            }
        }
        (Err(e), Err(kind)) => assert_eq!(e, &kind(raw.clone().into_owned()), "{raw:?}"),
        (got, want) => panic!("{raw:?}: got {got:?}, the model says {want:?}"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn files_paths_agree_with_a_naive_decoder_and_never_hold_dot_dot() {
        crate::fuzzing::stable::drive("files_path", super::files_path, 3000);
    }
}
