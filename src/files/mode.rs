//! A file's mode as a client writes it (`"0644"`), and the setuid rule:
//! which modes the server gives a file it writes. The file policy's, so
//! that `upload`, `/files` and sandboxd's `/v1/files` answer alike.

/// `"0644"`, `"644"`, `"0o644"`: at most `07777`.
pub fn parse_mode(text: &str) -> Option<u32> {
    let t = text.trim();
    let t = t.strip_prefix("0o").unwrap_or(t);
    if t.is_empty() || t.len() > 5 {
        return None;
    }
    u32::from_str_radix(t, 8).ok().filter(|m| *m <= 0o7777)
}

/// `mode`, unless it has the setuid or setgid bit: a file the root server
/// writes with one runs as root (or with root's group) for every job user
/// that can execute it, so a caller of `upload` or `PUT /files` could hand
/// a `nobody` job a way back to root. A job that means it runs `chmod`
/// itself, as whichever user it is. The sticky bit (01000) is harmless and
/// kept.
pub fn without_setid(mode: u32) -> Result<u32, String> {
    if mode & 0o6000 != 0 {
        return Err(format!(
            "mode {mode:04o} sets the setuid or setgid bit, which upload and PUT /files refuse: \
             the file would run as root for any job user (chmod it from a job to mean it)"
        ));
    }
    Ok(mode)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setuid_and_setgid_modes_are_refused_with_a_reason_and_the_sticky_bit_is_kept() {
        for setid in [0o4755, 0o2755, 0o6777] {
            let e = without_setid(setid).unwrap_err();
            assert!(e.contains("setuid or setgid"), "{e}");
        }
        assert_eq!(without_setid(0o1777), Ok(0o1777));
        assert_eq!(without_setid(0o644), Ok(0o644));
    }

    #[test]
    fn modes_are_octal_with_or_without_a_leading_zero() {
        assert_eq!(parse_mode("0644"), Some(0o644));
        assert_eq!(parse_mode("755"), Some(0o755));
        assert_eq!(parse_mode("0o600"), Some(0o600));
        assert_eq!(parse_mode("4755"), Some(0o4755));
        for bad in ["", "rw-r--r--", "0999", "77777", "-1"] {
            assert_eq!(parse_mode(bad), None, "{bad}");
        }
    }
}
