//! Output capture end to end: capture policies, the sliding
//! window, `tail`, `from`/`length`, UTF-8 alignment, binary data.
//!
//! Expected bytes are computed here from the same deterministic recipe the
//! job uses (`seq`, `printf`), so every assertion is exact.

use serde_json::{Value, json};

use crate::support::{Server, TIMEOUT, Target, wait_for};

/// One MiB.
const MIB: usize = 1 << 20;

/// Polls `status` until the job is terminal (without delivering it).
fn finish(s: &mut Server, id: &str) {
    let mut last = Value::Null;
    let done = wait_for(TIMEOUT, || {
        last = s.call("status", json!({"job_id": id}));
        last["state"] != json!("running")
    });
    assert!(done, "{id} still running: {last}");
}

/// A job that ran `command` to its end, not yet delivered.
fn finished_job(s: &mut Server, command: &str) -> String {
    let id = s.spawn_job(command);
    finish(s, &id);
    id
}

/// `output` of one stdout spec.
fn stdout(s: &mut Server, id: &str, spec: Value) -> Value {
    let r = s.call("output", json!({"job_id": id, "stdout": spec}));
    r["stdout"].clone()
}

/// What `seq 1 n` prints.
fn seq(n: usize) -> String {
    (1..=n).map(|i| format!("{i}\n")).collect()
}

/// Sanitising as the server does it: each maximal run of invalid bytes becomes one U+FFFD.
fn sanitize(mut bytes: &[u8]) -> String {
    let mut out = String::new();
    let mut in_invalid_run = false;
    loop {
        match std::str::from_utf8(bytes) {
            Ok(valid) => {
                out.push_str(valid);
                return out;
            }
            Err(e) => {
                let (valid, rest) = bytes.split_at(e.valid_up_to());
                if !valid.is_empty() {
                    out.push_str(std::str::from_utf8(valid).expect("valid prefix"));
                    in_invalid_run = false;
                }
                if !in_invalid_run {
                    out.push('\u{FFFD}');
                    in_invalid_run = true;
                }
                bytes = &rest[e.error_len().unwrap_or(rest.len())..];
            }
        }
    }
}

fn streams(r: &Value) -> (bool, bool) {
    (r.get("stdout").is_some(), r.get("stderr").is_some())
}

const BOTH: &str = "echo out; echo err >&2";
const BOTH_FAIL: &str = "echo out; echo err >&2; exit 1";

fn capture_defaults_to_stdout_on_success_and_stderr_on_error_and_a_side_not_given_captures_nothing(
    t: Target,
) {
    let mut s = Server::started(t);
    let ok = s.exec(BOTH);
    assert_eq!(streams(&ok), (true, false), "{ok}");
    assert_eq!(ok["stdout"]["data"], json!("out\n"));
    let failed = s.exec(BOTH_FAIL);
    assert_eq!(streams(&failed), (false, true), "{failed}");
    assert_eq!(failed["stderr"]["data"], json!("err\n"));
    // A null capture is the default too.
    let ok = s.call("execute", json!({"command": BOTH, "capture": null}));
    assert_eq!(streams(&ok), (true, false), "{ok}");
    // Once a capture object is given, a side it does not give captures nothing.
    let r = s.call(
        "execute",
        json!({"command": BOTH, "capture": {"on_error": "all"}}),
    );
    assert_eq!(
        (r["state"].clone(), streams(&r)),
        (json!("success"), (false, false)),
        "{r}"
    );
    let r = s.call(
        "execute",
        json!({"command": BOTH_FAIL, "capture": {"on_success": "all"}}),
    );
    assert_eq!(
        (r["state"].clone(), streams(&r)),
        (json!("error"), (false, false)),
        "{r}"
    );
    for command in [BOTH, BOTH_FAIL] {
        let r = s.call("execute", json!({"command": command, "capture": {}}));
        assert_eq!(streams(&r), (false, false), "{command}: {r}");
    }
    // In an object side, a stream that is not given is not captured.
    let r = s.call(
        "execute",
        json!({"command": BOTH, "capture": {"on_success": {"stderr": "all"}}}),
    );
    assert_eq!(streams(&r), (false, true), "{r}");
}

fn capture_shorthands_select_the_streams_of_each_outcome(t: Target) {
    let mut s = Server::started(t);
    for (shorthand, expected) in [
        ("all", (true, true)),
        ("stdout", (true, false)),
        ("stderr", (false, true)),
        ("none", (false, false)),
    ] {
        for (command, side) in [(BOTH, "on_success"), (BOTH_FAIL, "on_error")] {
            let other = if side == "on_success" {
                "on_error"
            } else {
                "on_success"
            };
            let r = s.call(
                "execute",
                json!({"command": command, "capture": {side: shorthand, other: "all"}}),
            );
            assert_eq!(streams(&r), expected, "{side}: {shorthand:?}: {r}");
            if expected.0 {
                assert_eq!(r["stdout"]["data"], json!("out\n"));
            }
            if expected.1 {
                assert_eq!(r["stderr"]["data"], json!("err\n"));
            }
        }
    }
}

fn capture_objects_apply_per_stream_specs_to_every_delivery_and_output_ignores_them(t: Target) {
    let mut s = Server::started(t);
    let command = "printf 'one\\ntwo\\nthree\\n'; printf 'abcdef' >&2";
    let capture =
        json!({"on_success": {"stdout": {"tail": 1}, "stderr": {"from": 2, "length": 3}}});
    let r = s.call("execute", json!({"command": command, "capture": capture}));
    assert_eq!(
        r["stdout"],
        json!({"data": "three\n", "offset": 8, "bytes": 6, "total_bytes": 14})
    );
    assert_eq!(
        r["stderr"],
        json!({"data": "cde", "offset": 2, "bytes": 3, "total_bytes": 6})
    );

    // wait applies the policy given to execute.
    let on_error = json!({"on_error": {"stdout": "all", "stderr": {"tail": 1}}});
    let id = s.call("execute", json!({"command": "echo o; printf 'x\\ny\\n' >&2; exit 2", "nowait": true, "capture": on_error}))["job_id"]
        .as_str()
        .expect("id")
        .to_owned();
    let r = s.call("wait", json!({"job_ids": [id]}));
    assert_eq!(r[0]["stdout"]["data"], json!("o\n"), "{r}");
    assert_eq!(
        r[0]["stderr"],
        json!({"data": "y\n", "offset": 2, "bytes": 2, "total_bytes": 4})
    );

    // output reads the windows whatever the policy says.
    let id = s.call("execute", json!({"command": BOTH, "nowait": true, "capture": {"on_success": "none", "on_error": "none"}}))["job_id"]
        .as_str()
        .expect("id")
        .to_owned();
    finish(&mut s, &id);
    let r = s.call(
        "output",
        json!({"job_id": id, "stdout": "all", "stderr": "all"}),
    );
    assert_eq!(
        (r["stdout"]["data"].clone(), r["stderr"]["data"].clone()),
        (json!("out\n"), json!("err\n")),
        "{r}"
    );
    let r = s.call("wait", json!({"job_ids": [id]}));
    assert_eq!(streams(&r[0]), (false, false), "{r}");
}

fn a_2_kib_window_keeps_the_exact_suffix_and_counts_what_it_dropped(t: Target) {
    let mut s = Server::started_with_env(t, &[("MCP_EXEC_MAX_OUTPUT_BYTES", "2048")]);
    let content = seq(1000);
    let total = content.len(); // 3893
    let dropped = total - 2048; // 1845, inside the line "489\n" at 1844
    let retained = &content[dropped..];
    assert!(retained.starts_with("89\n490\n"));

    let all = json!({"data": retained, "offset": dropped, "bytes": 2048, "total_bytes": total, "truncated": true, "dropped_bytes": dropped});
    assert_eq!(s.exec("seq 1 1000")["stdout"], all, "execute");

    let id = finished_job(&mut s, "seq 1 1000; printf small >&2");
    assert_eq!(stdout(&mut s, &id, json!("all")), all, "output all");
    // A from read starting 45 bytes inside the dropped head starts at the oldest retained
    // byte, and its length counts from there.
    assert_eq!(
        stdout(&mut s, &id, json!({"from": dropped - 45, "length": 100})),
        json!({"data": &content[dropped..dropped + 100], "offset": dropped, "bytes": 100, "total_bytes": total, "truncated": true, "dropped_bytes": 45})
    );
    assert_eq!(
        stdout(&mut s, &id, json!({"from": 0})),
        all,
        "from 0: every dropped byte was requested"
    );
    assert_eq!(
        stdout(&mut s, &id, json!({"from": 3000, "length": 10})),
        json!({"data": &content[3000..3010], "offset": 3000, "bytes": 10, "total_bytes": total})
    );
    // The retained window holds 511 whole lines after the partial "89\n",
    // which counts as a line.
    assert_eq!(retained.matches('\n').count(), 512);
    let whole = stdout(&mut s, &id, json!({"tail": 511}));
    assert_eq!(
        whole,
        json!({"data": &content[dropped + 3..], "offset": dropped + 3, "bytes": 2045, "total_bytes": total})
    );
    let to_head = stdout(&mut s, &id, json!({"tail": 512}));
    assert_eq!(
        (to_head["data"].as_str(), to_head["offset"].clone()),
        (Some(retained), json!(dropped)),
        "{to_head}"
    );
    assert_eq!(to_head["truncated"], json!(true), "{to_head}");
    // The other stream has its own window.
    let r = s.call("output", json!({"job_id": id, "stderr": "all"}));
    assert_eq!(
        r["stderr"],
        json!({"data": "small", "offset": 0, "bytes": 5, "total_bytes": 5})
    );
    // Delivery reads the same window.
    assert_eq!(s.call("wait", json!({"job_ids": [id]}))[0]["stdout"], all);
}

fn three_mib_through_the_default_window_keep_the_last_mib_and_page_back_byte_for_byte(t: Target) {
    let mut s = Server::started(t);
    let command = "seq 1 470000 | head -c 3145728";
    let mut content = seq(470_000);
    content.truncate(3 * MIB);
    let suffix = &content[2 * MIB..];

    let r = s.exec(command);
    let out = &r["stdout"];
    assert_eq!(
        (
            out["offset"].clone(),
            out["bytes"].clone(),
            out["total_bytes"].clone(),
            out["truncated"].clone(),
            out["dropped_bytes"].clone()
        ),
        (
            json!(2 * MIB),
            json!(MIB),
            json!(3 * MIB),
            json!(true),
            json!(2 * MIB)
        )
    );
    assert!(
        out["data"].as_str() == Some(suffix),
        "the retained window is not the exact last MiB"
    );

    // Pages of 256 KiB, the first starting 1000 bytes inside the dropped head
    // (it starts at the oldest retained byte and its length counts from
    // there), each continuing at offset + bytes, rebuild the window.
    let id = finished_job(&mut s, command);
    let page = 256 * 1024;
    let mut rebuilt = String::new();
    let mut from = 2 * MIB - 1000;
    let mut pages = 0;
    loop {
        let slice = stdout(&mut s, &id, json!({"from": from, "length": page}));
        let (offset, bytes) = (
            slice["offset"].as_u64().expect("offset") as usize,
            slice["bytes"].as_u64().expect("bytes") as usize,
        );
        assert_eq!(slice["total_bytes"], json!(3 * MIB));
        if pages == 0 {
            assert_eq!((offset, bytes), (2 * MIB, page), "{}", slice["offset"]);
            assert_eq!(
                (slice["truncated"].clone(), slice["dropped_bytes"].clone()),
                (json!(true), json!(1000))
            );
        } else {
            assert_eq!(
                (offset, bytes),
                (from, page.min(3 * MIB - from)),
                "page {pages}"
            );
            assert!(slice.get("truncated").is_none(), "page {pages}");
        }
        if bytes == 0 {
            assert_eq!(offset, 3 * MIB, "an empty page only at the end");
            break;
        }
        rebuilt.push_str(slice["data"].as_str().expect("data"));
        from = offset + bytes;
        pages += 1;
    }
    // Four full pages: the retained MiB.
    assert_eq!(pages, 4);
    assert!(
        rebuilt == suffix,
        "pages do not rebuild the retained window"
    );
}

fn tail_returns_the_last_lines_with_their_line_endings(t: Target) {
    let mut s = Server::started(t);
    let id = finished_job(&mut s, "printf 'one\\ntwo\\n\\nthree\\n'");
    let slice = |data: &str, offset: usize| json!({"data": data, "offset": offset, "bytes": data.len(), "total_bytes": 15});
    assert_eq!(stdout(&mut s, &id, json!({"tail": 1})), slice("three\n", 9));
    assert_eq!(
        stdout(&mut s, &id, json!({"tail": 2})),
        slice("\nthree\n", 8),
        "empty lines count"
    );
    assert_eq!(
        stdout(&mut s, &id, json!({"tail": 4})),
        slice("one\ntwo\n\nthree\n", 0)
    );
    assert_eq!(
        stdout(&mut s, &id, json!({"tail": 99})),
        slice("one\ntwo\n\nthree\n", 0)
    );
    assert_eq!(stdout(&mut s, &id, json!({"tail": 0})), slice("", 15));

    let id = finished_job(&mut s, "printf 'a\\nb\\nlast'");
    assert_eq!(
        stdout(&mut s, &id, json!({"tail": 2})),
        json!({"data": "b\nlast", "offset": 2, "bytes": 6, "total_bytes": 8}),
        "an unterminated last line is a line"
    );
}

fn from_and_length_read_absolute_ranges_with_negative_and_past_the_end_values(t: Target) {
    let mut s = Server::started(t);
    let id = finished_job(&mut s, "printf 0123456789");
    let slice = |data: &str, offset: usize| json!({"data": data, "offset": offset, "bytes": data.len(), "total_bytes": 10});
    for (spec, expected) in [
        (json!({"from": 3, "length": 4}), slice("3456", 3)),
        (json!({"from": 3}), slice("3456789", 3)),
        (json!({"from": 3, "length": null}), slice("3456789", 3)),
        (json!({"from": 8, "length": 100}), slice("89", 8)),
        (json!({"from": 3, "length": 0}), slice("", 3)),
        (json!({"from": 10}), slice("", 10)),
        (json!({"from": 50, "length": 5}), slice("", 10)),
        (json!({"from": -5}), slice("0123456789", 0)),
        (json!({"from": -5, "length": 2}), slice("01", 0)),
        (json!({"from": 3, "length": -3}), slice("", 3)),
    ] {
        assert_eq!(stdout(&mut s, &id, spec.clone()), expected, "{spec}");
    }
    // An empty stream.
    let r = s.call("output", json!({"job_id": id, "stderr": {"from": 0}}));
    assert_eq!(
        r["stderr"],
        json!({"data": "", "offset": 0, "bytes": 0, "total_bytes": 0})
    );
}

fn utf8_alignment_never_splits_a_character_unless_unaligned(t: Target) {
    let mut s = Server::started(t);
    // "héllo→": h C3A9 l l o E28692 = 9 bytes.
    let id = finished_job(&mut s, r"printf 'h\303\251llo\342\206\222'");
    let slice = |data: &str, offset: u64, bytes: u64| json!({"data": data, "offset": offset, "bytes": bytes, "total_bytes": 9});
    for (spec, expected) in [
        // From 2, from 7, a 2-byte prefix, an unaligned 3-byte read.
        (json!({"from": 2}), slice("éllo→", 1, 8)),
        (json!({"from": 7}), slice("→", 6, 3)),
        (json!({"from": 0, "length": 2}), slice("hé", 0, 3)),
        (
            json!({"from": 2, "length": 3, "unaligned": true}),
            slice("\u{FFFD}ll", 2, 3),
        ),
        // A start inside a character moves back, an end inside one moves forward.
        (json!({"from": 8, "length": 1}), slice("→", 6, 3)),
        (json!({"from": 2, "length": 5}), slice("éllo→", 1, 8)),
        (json!({"from": 1, "length": 5}), slice("éllo", 1, 5)),
        // unaligned gives exact bytes.
        (
            json!({"from": 7, "unaligned": true}),
            slice("\u{FFFD}", 7, 2),
        ),
        (
            json!({"from": 0, "length": 2, "unaligned": true}),
            slice("h\u{FFFD}", 0, 2),
        ),
        (
            json!({"from": 1, "length": 2, "unaligned": false}),
            slice("é", 1, 2),
        ),
    ] {
        assert_eq!(stdout(&mut s, &id, spec.clone()), expected, "{spec}");
    }
    assert_eq!(stdout(&mut s, &id, json!("all")), slice("héllo→", 0, 9));
}

fn binary_output_keeps_nuls_and_replaces_each_invalid_run_with_one_replacement_character(
    t: Target,
) {
    let mut s = Server::started(t);
    // a NUL b FF FE c FF d
    let r = s.exec(r"printf 'a\000b\377\376c\377d'");
    assert_eq!(
        r["stdout"],
        json!({"data": "a\u{0}b\u{FFFD}c\u{FFFD}d", "offset": 0, "bytes": 8, "total_bytes": 8})
    );

    let id = finished_job(&mut s, r"printf 'a\000b\377\376c\377d'");
    // Invalid bytes are not characters: a read starting inside the run stays there.
    assert_eq!(
        stdout(&mut s, &id, json!({"from": 4, "length": 2})),
        json!({"data": "\u{FFFD}c", "offset": 4, "bytes": 2, "total_bytes": 8})
    );
    assert_eq!(
        stdout(&mut s, &id, json!({"from": 1, "length": 1})),
        json!({"data": "\u{0}", "offset": 1, "bytes": 1, "total_bytes": 8})
    );
}

fn sixty_four_kib_of_random_bytes_are_counted_exactly_and_sanitised_run_by_run(t: Target) {
    let mut s = Server::started(t);
    // The raw bytes go to stdout, and a hex dump of the same bytes to stderr.
    let command = "head -c 65536 /dev/urandom | { tee /proc/self/fd/3 | od -An -v -tx1 >&2; } 3>&1";
    let r = s.call(
        "execute",
        json!({"command": command, "capture": {"on_success": "all", "on_error": "all"}}),
    );
    assert_eq!(
        r["state"],
        json!("success"),
        "exit {} {}",
        r["exit_code"],
        r["start_error"]
    );
    let raw: Vec<u8> = r["stderr"]["data"]
        .as_str()
        .expect("hex dump")
        .split_whitespace()
        .map(|h| u8::from_str_radix(h, 16).unwrap_or_else(|e| panic!("{h:?}: {e}")))
        .collect();
    assert_eq!(raw.len(), 65536, "the hex dump has every byte");
    let out = &r["stdout"];
    assert_eq!(
        (
            out["total_bytes"].clone(),
            out["bytes"].clone(),
            out["offset"].clone()
        ),
        (json!(65536), json!(65536), json!(0))
    );
    assert!(out.get("truncated").is_none());
    let data = out["data"].as_str().expect("data");
    assert!(
        data == sanitize(&raw),
        "data is not the run-by-run sanitising of the raw bytes"
    );
}

crate::parity!(
    capture_defaults_to_stdout_on_success_and_stderr_on_error_and_a_side_not_given_captures_nothing,
    capture_shorthands_select_the_streams_of_each_outcome,
    capture_objects_apply_per_stream_specs_to_every_delivery_and_output_ignores_them,
    a_2_kib_window_keeps_the_exact_suffix_and_counts_what_it_dropped,
    three_mib_through_the_default_window_keep_the_last_mib_and_page_back_byte_for_byte,
    tail_returns_the_last_lines_with_their_line_endings,
    from_and_length_read_absolute_ranges_with_negative_and_past_the_end_values,
    utf8_alignment_never_splits_a_character_unless_unaligned,
    binary_output_keeps_nuls_and_replaces_each_invalid_run_with_one_replacement_character,
    sixty_four_kib_of_random_bytes_are_counted_exactly_and_sanitised_run_by_run,
);

#[test]
fn sanitize_collapses_each_invalid_run_into_one_replacement_character() {
    // The test's own oracle, checked against the rules it encodes.
    assert_eq!(sanitize(b"ok"), "ok");
    assert_eq!(sanitize(b"a\xFF\xFEb\xFF"), "a\u{FFFD}b\u{FFFD}");
    assert_eq!(sanitize(b"\xE2\x86\xC0\x80z"), "\u{FFFD}z");
    assert_eq!(sanitize(b"x\xE2\x86"), "x\u{FFFD}");
    assert_eq!(sanitize("é\0".as_bytes()), "é\0");
}
