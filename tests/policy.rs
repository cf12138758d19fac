//! The two policies that guard what a job may touch and what the client
//! may see: the working-directory policy and secret redaction
//! (docs/security.md), end to end on every target.
//!
//! The allowed roots must exist when the server starts: on the host
//! targets a fresh directory under `/tmp` and `/var/tmp`; in the containers
//! (fresh each run) `/tmp` and `/dev/shm`, which both images have.

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};

use crate::support::{HostPath, LATEST, Server, TIMEOUT, Target, wait_for};

static MARKERS: AtomicU64 = AtomicU64::new(0);

/// A `sleep` duration no other process on this machine uses, bounded so
/// that whatever a failing test leaves behind does not live long. (The
/// whole part, 42, is this module's own.)
fn marker() -> String {
    format!(
        "42.{}{:04}",
        std::process::id(),
        MARKERS.fetch_add(1, Ordering::Relaxed)
    )
}

/// Polls `status` until the job is terminal (without delivering it).
fn finish(s: &mut Server, id: &str) {
    let mut last = Value::Null;
    let done = wait_for(TIMEOUT, || {
        last = s.call("status", json!({"job_id": id}));
        last["state"] != json!("running") && last["state"] != json!("queued")
    });
    assert!(done, "{id} still not terminal: {last}");
}

// ---------------------------------------------------------------------------
// Working-directory policy
// ---------------------------------------------------------------------------

/// Two allowed roots and the `MCP_EXEC_ALLOWED_CWDS` value naming them.
struct Roots {
    first: String,
    second: String,
    list: String,
    /// The host directory of `first`, removed at the end.
    _dir: Option<HostPath>,
}

impl Roots {
    fn new(t: Target) -> Roots {
        let (first, second, dir) = if t.is_container() {
            ("/tmp".to_owned(), "/dev/shm".to_owned(), None)
        } else {
            let dir = HostPath::new("cwd-root");
            std::fs::create_dir(&dir.0).expect("create the allowed root");
            (dir.0.clone(), "/var/tmp".to_owned(), Some(dir))
        };
        let list = format!("{first}:{second}");
        Roots {
            first,
            second,
            list,
            _dir: dir,
        }
    }

    /// A server with these roots and `default` as the default cwd.
    fn server(&self, t: Target, default: &str) -> Server {
        Server::started_in(
            t,
            &[
                ("MCP_EXEC_ALLOWED_CWDS", &self.list),
                ("MCP_EXEC_DEFAULT_CWD", default),
            ],
            LATEST,
        )
    }

    fn refusal(&self, cwd: &str) -> String {
        format!(
            "cwd \"{cwd}\" is outside the allowed directories ({})",
            self.list
        )
    }
}

/// The physical working directory a job started in `cwd` finds itself in.
fn pwd_in(s: &mut Server, cwd: &str) -> Value {
    let r = s.call("execute", json!({"command": "pwd -P", "cwd": cwd}));
    assert_eq!(r["state"], json!("success"), "cwd {cwd}: {r}");
    r["stdout"]["data"].clone()
}

fn a_cwd_inside_an_allowed_directory_is_used(t: Target) {
    let roots = Roots::new(t);
    let mut s = roots.server(t, &roots.first);
    let first = &roots.first;
    s.exec(&format!(
        "mkdir -p {first}/sub/deeper && ln -s sub {first}/to-sub"
    ));
    for (cwd, expected) in [
        (first.clone(), first.clone()),
        (format!("{first}/sub/deeper"), format!("{first}/sub/deeper")),
        (format!("{first}/sub/../sub"), format!("{first}/sub")),
        (format!("{first}/to-sub"), format!("{first}/sub")),
        (roots.second.clone(), roots.second.clone()),
    ] {
        assert_eq!(pwd_in(&mut s, &cwd), json!(format!("{expected}\n")));
    }
}

fn a_cwd_outside_the_allowed_directories_is_refused_naming_them(t: Target) {
    let roots = Roots::new(t);
    let mut s = roots.server(t, &roots.first);
    for cwd in [
        "/etc".to_owned(),
        "/".to_owned(),
        format!("{}/..", roots.first),
    ] {
        for nowait in [false, true] {
            assert_eq!(
                s.call_err(
                    "execute",
                    json!({"command": "pwd", "cwd": cwd, "nowait": nowait})
                ),
                roots.refusal(&cwd),
                "nowait {nowait}"
            );
        }
        assert_eq!(
            s.call_err("execute", json!({"argv": ["pwd"], "cwd": cwd})),
            roots.refusal(&cwd),
            "argv"
        );
    }
    assert_eq!(
        s.call("list_jobs", json!({})),
        json!({"jobs": []}),
        "a refused cwd starts no job"
    );
}

fn a_symlink_in_an_allowed_directory_that_leads_outside_is_refused(t: Target) {
    let roots = Roots::new(t);
    let mut s = roots.server(t, &roots.first);
    let first = &roots.first;
    s.exec(&format!(
        "ln -s /etc {first}/to-etc && ln -s ../.. {first}/up && mkdir {first}/d && ln -s /etc {first}/d/etc"
    ));
    for cwd in [
        format!("{first}/to-etc"),
        format!("{first}/up"),
        format!("{first}/d/etc"),
    ] {
        assert_eq!(
            s.call_err("execute", json!({"command": "pwd", "cwd": cwd})),
            roots.refusal(&cwd)
        );
    }
}

fn without_a_cwd_a_job_runs_in_mcp_exec_default_cwd(t: Target) {
    let roots = Roots::new(t);
    for default in [&roots.first, &roots.second] {
        let mut s = roots.server(t, default);
        let r = s.exec("pwd -P");
        assert_eq!(r["stdout"]["data"], json!(format!("{default}\n")), "{r}");
        let r = s.call("execute", json!({"argv": ["pwd", "-P"]}));
        assert_eq!(r["stdout"]["data"], json!(format!("{default}\n")), "{r}");
    }
}

fn without_mcp_exec_allowed_cwds_any_cwd_is_allowed(t: Target) {
    let mut s = Server::started_in(t, &[], LATEST);
    assert_eq!(pwd_in(&mut s, "/etc"), json!("/etc\n"));
    assert_eq!(pwd_in(&mut s, "/"), json!("/\n"));
}

// ---------------------------------------------------------------------------
// Secret redaction
// ---------------------------------------------------------------------------

const AWS_KEY_ID: &str = "AKIAIOSFODNN7EXAMPLE";
/// `ghp_` and 36 letters and digits.
const GITHUB_TOKEN: &str = "ghp_u8jzPde0IgxLd6GncfBAepfJBd0Kh8oOOL8d";
const PEM_BODY: [&str; 5] = [
    "k5VlDPk4C47bIkprJIoekk6P0K4uGpSSozBfGIy2EJAPnjR/rohtxlB3lex0XEw/",
    "yy6yxz4Uk0yGfuBXunJJm/oSHoNrKsFXJu59awr2qxPDjpLK4NFQV7FZmH+UzHQR",
    "1xfxRXmyqhAPu7NPpZP+rtJySLdi46tYBfB2WiucHX4PN8RJIb0/ZWTq338UKnJm",
    "jEfiI9Fu3YxHtGr8W67iYfU7JhUtJjuoOwN81JYuQ0gBJWuIXpyQUfMgsNuD856n",
    "rb0NdObex/PfrsyPZGVmZBp7omYPMBH8NXApHFeZDRoAkSaJGfJdnQYS3zWdYCai",
];
/// A line with nothing secret in it, 99 bytes before its newline.
const FILLER: &str = "the quick brown fox jumps over the lazy dog while the old cat sleeps by the warm fire of the hut ok";

/// The lines of the secret-bearing output, in order: blocks of `FILLER`
/// around an AWS key id, a GitHub token and an RSA private key block,
/// about 300 KB in all.
fn secret_lines() -> Vec<(usize, Vec<String>)> {
    let mut pem = vec!["-----BEGIN RSA PRIVATE KEY-----".to_owned()];
    pem.extend(PEM_BODY.iter().map(|l| (*l).to_owned()));
    pem.push("-----END RSA PRIVATE KEY-----".to_owned());
    vec![
        (1000, vec![format!("aws_access_key_id = {AWS_KEY_ID}")]),
        (1000, vec![format!("export GITHUB_TOKEN={GITHUB_TOKEN}")]),
        (1000, pem),
        (20, Vec::new()),
    ]
}

/// The command that prints the secret-bearing output, and that output.
fn secret_output() -> (String, String) {
    let mut command = format!("f='{FILLER}'");
    let mut raw = String::new();
    for (filler, lines) in secret_lines() {
        command.push_str(&format!("; yes \"$f\" | head -n {filler}"));
        raw.push_str(&format!("{FILLER}\n").repeat(filler));
        if !lines.is_empty() {
            command.push_str("; printf '%s\\n'");
            for l in &lines {
                command.push_str(&format!(" '{l}'"));
                raw.push_str(l);
                raw.push('\n');
            }
        }
    }
    (command, raw)
}

/// Every piece of a secret long enough to identify it: each six-byte run
/// of the key id, the token and the key body lines.
fn secret_fragments() -> Vec<String> {
    let mut secrets = vec![AWS_KEY_ID, GITHUB_TOKEN];
    secrets.extend(PEM_BODY);
    secrets
        .iter()
        .flat_map(|s| {
            (0..=s.len() - 6)
                .map(|i| s[i..i + 6].to_owned())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Requires that `data` shows no part of any secret.
fn assert_no_secret(data: &str, what: &str) {
    for f in secret_fragments() {
        assert!(
            !data.contains(&f),
            "{what}: {f:?} of a secret is visible in {} bytes of data",
            data.len()
        );
    }
}

/// Checks a redacted slice of the whole secret-bearing output.
fn assert_redacted_whole(slice: &Value, raw: &str, what: &str) {
    let data = slice["data"]
        .as_str()
        .unwrap_or_else(|| panic!("{what}: no data"));
    assert!(data.contains("[REDACTED]"), "{what}: no [REDACTED]");
    assert_no_secret(data, what);
    assert!(
        data.contains(FILLER),
        "{what}: the rest of the output is kept"
    );
    assert_eq!(
        (&slice["offset"], &slice["bytes"], &slice["total_bytes"]),
        (&json!(0), &json!(raw.len()), &json!(raw.len())),
        "{what}: offsets and counts are those of the raw stream"
    );
    let n = slice["redacted"]
        .as_u64()
        .unwrap_or_else(|| panic!("{what}: no redacted count"));
    assert!(n >= 3, "{what}: redacted {n}, three secrets were printed");
}

fn redacted_server(t: Target) -> Server {
    Server::started_in(t, &[("MCP_EXEC_REDACT", "builtin")], LATEST)
}

fn builtin_redaction_masks_secrets_in_results_and_output_and_keeps_raw_offsets(t: Target) {
    let mut s = redacted_server(t);
    let (command, raw) = secret_output();

    let r = s.exec(&command);
    assert_eq!(r["state"], json!("success"), "{}", r["stderr"]);
    assert_redacted_whole(&r["stdout"], &raw, "execute");

    let id = s.spawn_job(&command);
    finish(&mut s, &id);
    let out = s.call("output", json!({"job_id": id, "stdout": "all"}));
    assert_redacted_whole(&out["stdout"], &raw, "output");
    let r = s.call("wait", json!({"job_ids": [id], "timeout": 15}));
    assert_redacted_whole(&r[0]["stdout"], &raw, "wait");

    let r = s.exec("echo nothing secret");
    assert_eq!(
        r["stdout"],
        json!({"data": "nothing secret\n", "offset": 0, "bytes": 15, "total_bytes": 15}),
        "no redacted count without a match"
    );
}

fn a_read_cut_through_a_secret_never_shows_any_part_of_it(t: Target) {
    let mut s = redacted_server(t);
    let (command, raw) = secret_output();
    let id = s.spawn_job(&command);
    finish(&mut s, &id);
    let read = |s: &mut Server, spec: Value| {
        let r = s.call("output", json!({"job_id": id, "stdout": spec.clone()}));
        let slice = r["stdout"].clone();
        assert_no_secret(
            slice["data"].as_str().unwrap_or_default(),
            &spec.to_string(),
        );
        assert_eq!(slice["total_bytes"], json!(raw.len()), "{spec}");
        slice
    };

    let mut secrets = vec![AWS_KEY_ID, GITHUB_TOKEN];
    secrets.extend(PEM_BODY);
    for secret in secrets {
        let at = raw.find(secret).expect("the secret is in the output");
        let half = at + secret.len() / 2;
        // Starting in the middle, ending in the middle, and inside it.
        for (from, length) in [
            (half, 4000),
            (at - 4000, half - (at - 4000)),
            (at + 2, secret.len() - 4),
        ] {
            let slice = read(
                &mut s,
                json!({"from": from, "length": length, "unaligned": true}),
            );
            // A read near the end of the stream returns what is there.
            let expected = length.min(raw.len() - from);
            assert_eq!(
                (&slice["offset"], &slice["bytes"]),
                (&json!(from), &json!(expected)),
                "raw offsets for a read from {from} of {length}"
            );
        }
    }

    // Paging through it all in pages whose edges fall anywhere.
    let mut from = 0;
    while from < raw.len() {
        let slice = read(&mut s, json!({"from": from, "length": 997}));
        assert_eq!(slice["offset"], json!(from));
        from += usize::try_from(slice["bytes"].as_u64().expect("bytes")).expect("usize");
    }
    assert_eq!(from, raw.len());
}

fn without_mcp_exec_redact_secrets_come_back_exactly(t: Target) {
    let mut s = Server::started_in(t, &[], LATEST);
    let (command, raw) = secret_output();
    let r = s.exec(&command);
    assert_eq!(
        r["stdout"],
        json!({"data": raw, "offset": 0, "bytes": raw.len(), "total_bytes": raw.len()}),
        "the output comes back exactly, without a redacted count"
    );
    let id = s.spawn_job(&command);
    finish(&mut s, &id);
    let at = raw.find(AWS_KEY_ID).expect("the key id is in the output");
    let r = s.call(
        "output",
        json!({"job_id": id, "stdout": {"from": at + 4, "length": 8}}),
    );
    assert_eq!(
        r["stdout"],
        json!({"data": &AWS_KEY_ID[4..12], "offset": at + 4, "bytes": 8, "total_bytes": raw.len()})
    );
}

fn wait_until_sees_the_redacted_text_and_cannot_match_a_secret(t: Target) {
    let until = json!({"pattern": "AKIA[0-9A-Z]{16}", "stream": "stdout"});
    let command = format!("echo key {AWS_KEY_ID}; sleep {}", marker());

    let mut s = redacted_server(t);
    let id = s.spawn_job(&command);
    let mut out = Value::Null;
    let printed = wait_for(TIMEOUT, || {
        out = s.call("output", json!({"job_id": id, "stdout": "all"}));
        out["stdout"]["total_bytes"] == json!(25)
    });
    assert!(printed, "{out}");
    assert_eq!(
        s.call(
            "wait",
            json!({"job_ids": [id], "timeout": 1, "until": until})
        ),
        json!([{"job_id": id, "state": "running"}]),
        "with redaction the key id is not there to match"
    );

    // The same wait matches without redaction: the pattern is right.
    let mut s = Server::started_in(t, &[], LATEST);
    let id = s.spawn_job(&command);
    assert_eq!(
        s.call(
            "wait",
            json!({"job_ids": [id], "timeout": 15, "until": until})
        ),
        json!([{"job_id": id, "state": "running",
                "matched": {"stream": "stdout", "offset": 4, "bytes": 20}}])
    );
}

/// A command that prints `writes` one after another, each after the file
/// `{go}{i}` exists (the first at once), then exits; bounded so that a
/// failing test leaves nothing behind for long.
fn in_writes(go: &str, writes: &[&str]) -> String {
    let mut command = String::new();
    for (i, text) in writes.iter().enumerate() {
        if i > 0 {
            command.push_str(&format!(
                "n=0; while [ ! -e {go}{i} ] && [ $n -lt 600 ]; do sleep 0.05; n=$((n+1)); done; "
            ));
        }
        command.push_str(&format!("printf '%s' '{text}'; "));
    }
    command.push_str(&format!("rm -f {go}*"));
    command
}

/// Polls `output` until the job has written `total` bytes; its stdout slice then.
fn written(s: &mut Server, id: &str, total: usize) -> Value {
    let mut out = Value::Null;
    let there = wait_for(TIMEOUT, || {
        out = s.call("output", json!({"job_id": id, "stdout": "all"}));
        out["stdout"]["total_bytes"] == json!(total)
    });
    assert!(there, "{out}");
    out["stdout"].clone()
}

fn go_file() -> String {
    format!("/tmp/mcp-exec-go-{}-", marker())
}

fn a_secret_that_later_output_completes_shows_no_byte_of_itself_to_output_or_wait_until(t: Target) {
    let mut s = redacted_server(t);
    let go = go_file();
    let first = "db=postgres://admin:hunter2hunter2";
    let id = s.spawn_job(&in_writes(&go, &[first, "@db/app\n", "done\n"]));
    // Before the `@`: the password could still be one; nothing of it is shown,
    // and `offset + bytes` stops before it.
    assert_eq!(
        written(&mut s, &id, first.len()),
        json!({"data": "db=postgres", "offset": 0, "bytes": 11, "total_bytes": first.len()})
    );
    let probe = json!({"pattern": "admin|hunter|:h", "stream": "stdout"});
    assert_eq!(
        s.call(
            "wait",
            json!({"job_ids": [id], "timeout": 1, "until": probe})
        ),
        json!([{"job_id": id, "state": "running"}]),
        "wait … until sees no more than output does"
    );
    // The `@` arrives (the job still runs): released, masked.
    s.exec(&format!("touch {go}1"));
    let line = "db=postgres://admin:hunter2hunter2@db/app\n";
    let out = written(&mut s, &id, line.len());
    assert_eq!(
        out["data"],
        json!("db=postgres://admin:[REDACTED]@db/app\n"),
        "{out}"
    );
    assert_eq!(
        (&out["bytes"], &out["redacted"]),
        (&json!(line.len()), &json!(1))
    );
    let matched = s.call(
        "wait",
        json!({"job_ids": [id], "timeout": 15, "until": {"pattern": "@db/app", "stream": "stdout"}}),
    );
    assert_eq!(matched[0]["state"], json!("running"), "{matched}");
    assert!(matched[0]["matched"].is_object(), "{matched}");
    s.exec(&format!("touch {go}2"));
    finish(&mut s, &id);
    let out = s.call("output", json!({"job_id": id, "stdout": "all"}));
    assert_eq!(
        out["stdout"]["data"],
        json!("db=postgres://admin:[REDACTED]@db/app\ndone\n")
    );
}

fn a_github_token_written_in_two_parts_shows_no_character_of_itself_while_it_runs(t: Target) {
    let mut s = redacted_server(t);
    let go = go_file();
    let (head, rest) = GITHUB_TOKEN.split_at(22);
    let first = format!("token: {head}");
    let id = s.spawn_job(&in_writes(&go, &[&first, &format!("{rest}\n"), ""]));
    let out = written(&mut s, &id, first.len());
    assert_eq!(
        (&out["data"], &out["bytes"]),
        (&json!("token: "), &json!(7)),
        "{out}"
    );
    // A client that pages on from `offset + bytes` sees nothing more yet.
    let page = s.call("output", json!({"job_id": id, "stdout": {"from": 7}}));
    assert_eq!(
        (&page["stdout"]["data"], &page["stdout"]["bytes"]),
        (&json!(""), &json!(0))
    );
    // Nor does one that asks from inside the held bytes.
    let page = s.call("output", json!({"job_id": id, "stdout": {"from": 15}}));
    assert_eq!(page["stdout"]["data"], json!(""), "{page}");
    s.exec(&format!("touch {go}1"));
    let out = written(&mut s, &id, first.len() + rest.len() + 1);
    assert_eq!(out["data"], json!("token: [REDACTED]\n"), "{out}");
    s.exec(&format!("touch {go}2"));
    finish(&mut s, &id);
}

fn wait_until_from_inside_a_secret_cannot_read_it_a_character_at_a_time(t: Target) {
    let mut s = redacted_server(t);
    let command = format!("echo token {GITHUB_TOKEN} end; sleep {}", marker());
    let id = s.spawn_job(&command);
    let line = format!("token {GITHUB_TOKEN} end\n");
    written(&mut s, &id, line.len());
    // Just past `ghp_`: the rest of the token would start the text, unmasked,
    // if it were redacted without the context before `from`.
    let from = line.find("ghp_").expect("the token") + 4;
    let body = &GITHUB_TOKEN[4..];
    let mut probe = |pattern: String| {
        let until = json!({"pattern": pattern, "stream": "stdout", "from": from});
        s.call(
            "wait",
            json!({"job_ids": [id], "timeout": 0.2, "until": until}),
        )
    };
    let nothing = json!([{"job_id": id, "state": "running"}]);
    for pattern in [
        format!("^{}", &body[..4]),
        format!("^{}", &body[..1]),
        "^Z".to_owned(),
        body[10..14].to_owned(),
    ] {
        assert_eq!(probe(pattern.clone()), nothing, "{pattern} learns nothing");
    }
    // What the pattern does see is what `output` shows from there.
    let seen = probe(r"^\[REDACTED\] end".to_owned());
    assert_eq!(seen[0]["matched"]["offset"], json!(from), "{seen}");
    let out = s.call(
        "output",
        json!({"job_id": id, "stdout": {"from": from, "unaligned": true}}),
    );
    assert_eq!(out["stdout"]["data"], json!("[REDACTED] end\n"), "{out}");
    s.call("kill", json!({"job_id": id}));
}

fn a_patterns_file_adds_expressions_to_redact(t: Target) {
    let patterns = HostPath::new("patterns");
    std::fs::write(&patterns.0, "internal-[0-9]{6}\n").expect("write the patterns file");
    let mut s = Server::start_with_host_file(
        t,
        &[
            ("MCP_EXEC_REDACT", "builtin"),
            ("MCP_EXEC_REDACT_PATTERNS_FILE", &patterns.0),
        ],
        &patterns.0,
    );
    s.initialize(LATEST);
    let line = "id internal-123456 end\n";
    let r = s.exec(&format!("echo {}", line.trim_end()));
    assert_eq!(
        r["stdout"],
        json!({"data": "id [REDACTED] end\n", "offset": 0, "bytes": line.len(),
               "total_bytes": line.len(), "redacted": 1})
    );
    let r = s.exec(&format!("echo {AWS_KEY_ID}"));
    assert_eq!(
        r["stdout"]["data"],
        json!("[REDACTED]\n"),
        "the builtin shapes stay"
    );
}

crate::parity!(
    a_cwd_inside_an_allowed_directory_is_used,
    a_cwd_outside_the_allowed_directories_is_refused_naming_them,
    a_symlink_in_an_allowed_directory_that_leads_outside_is_refused,
    without_a_cwd_a_job_runs_in_mcp_exec_default_cwd,
    without_mcp_exec_allowed_cwds_any_cwd_is_allowed,
    builtin_redaction_masks_secrets_in_results_and_output_and_keeps_raw_offsets,
    a_read_cut_through_a_secret_never_shows_any_part_of_it,
    without_mcp_exec_redact_secrets_come_back_exactly,
    wait_until_sees_the_redacted_text_and_cannot_match_a_secret,
    a_secret_that_later_output_completes_shows_no_byte_of_itself_to_output_or_wait_until,
    a_github_token_written_in_two_parts_shows_no_character_of_itself_while_it_runs,
    wait_until_from_inside_a_secret_cannot_read_it_a_character_at_a_time,
    a_patterns_file_adds_expressions_to_redact,
);
