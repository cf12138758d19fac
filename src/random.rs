//! Random identifiers from the kernel: task ids and HTTP session ids
//! are 128 bits of `getrandom`, never derived from a
//! counter. Owns nothing else; it names no other module of the crate.

/// 128 random bits from the kernel's `getrandom`; `None` (logged) if the
/// kernel has none to give, which the caller must turn into a refusal: an
/// identifier is never made up some other way.
pub fn bits_128() -> Option<u128> {
    let mut raw = [0u8; 16];
    let mut filled = 0;
    while filled < raw.len() {
        match rustix::rand::getrandom(&mut raw[filled..], rustix::rand::GetRandomFlags::empty()) {
            Ok(n) => filled += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => {
                tracing::error!(error = %e, "getrandom failed");
                return None;
            }
        }
    }
    Some(u128::from_le_bytes(raw))
}

#[cfg(test)]
mod tests {
    #[test]
    fn two_draws_differ() {
        assert_ne!(super::bits_128(), super::bits_128());
    }
}
