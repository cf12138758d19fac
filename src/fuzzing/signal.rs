//! Fuzz target `signal` (`fuzz/fuzz_targets/signal.rs`): signal names
//! (init::Signal, the `kill` tool's `signal`). What it checks, and how it reads
//! its input: [`signal`](fn@signal).

use serde_json::{Value, json};

use crate::tools::kill;

/// `signal`: whatever parses names a signal in `1..=64` that parses back
/// from its name and number; `kill`'s `signal` argument agrees with it.
///
/// Input: the text (lossy UTF-8).
pub fn signal(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let parsed = init::Signal::parse(&text);
    if let Ok(sig) = parsed {
        let n = sig.as_raw();
        assert!((1..=64).contains(&n), "{text:?} gave {n}");
        assert_eq!(init::Signal::parse(&n.to_string()).ok(), Some(sig));
        if let Some(name) = sig.name() {
            assert_eq!(init::Signal::parse(name).ok(), Some(sig));
            let lower = format!(" sig{} ", name.to_ascii_lowercase());
            assert_eq!(init::Signal::parse(&lower).ok(), Some(sig));
        }
    }
    let mut args = crate::tools::Args::new();
    args.insert("signal".into(), Value::String(text.clone().into_owned()));
    let bare = text.trim();
    let bare = match bare.get(..3) {
        Some(p) if p.eq_ignore_ascii_case("SIG") => &bare[3..],
        _ => bare,
    };
    match kill::parse_signal(&args) {
        Ok(crate::jobs::Plan::Assured) => assert!(bare.eq_ignore_ascii_case("ASSURED")),
        Ok(crate::jobs::Plan::One(sig)) if text.trim().is_empty() => {
            assert_eq!(sig, init::Signal::TERM)
        }
        Ok(crate::jobs::Plan::One(sig)) => assert_eq!(parsed.ok(), Some(sig), "{text:?}"),
        Err(_) => assert!(parsed.is_err() && !bare.eq_ignore_ascii_case("ASSURED")),
    }
    if let Ok(n) = text.trim().parse::<i64>() {
        args.insert("signal".into(), json!(n));
        let ok = kill::parse_signal(&args).is_ok();
        assert_eq!(ok, (1..=64).contains(&n), "{n}");
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn signal_names_round_trip() {
        crate::fuzzing::stable::drive("signal", super::signal, 3000);
    }
}
