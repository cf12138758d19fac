//! File transfer over MCP (docs/files.md): `upload` and `download` end to end
//! on every target — round trips, the atomic commit (nothing left behind on
//! a mismatch or `ENOSPC`, never a torn file), idempotent retries,
//! `overwrite`, `mkdirs`, modes, FIFOs, paging, the size limit, the cwd
//! policy on file paths, and revision gating.
//!
//! Set-up and inspection go through `execute` (busybox in the images), so
//! the same test reads the same on the host and in a container. Paths are
//! [`HostPath`]s: removed on the host, and fresh in every container.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::support::{HostPath, LATEST, Server, Target, tool_json};

fn sha_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A fresh directory (created by a job, so inside a container too).
fn fresh_dir(s: &mut Server, what: &str) -> HostPath {
    let dir = HostPath::new(what);
    let r = s.exec(&format!("mkdir -p {}", dir.0));
    assert_eq!(r["exit_code"], json!(0), "{r}");
    dir
}

/// A job's stdout, which must exit 0.
fn sh(s: &mut Server, command: &str) -> String {
    let r = s.exec(command);
    assert_eq!(r["exit_code"], json!(0), "{command}: {r}");
    r["stdout"]["data"].as_str().unwrap_or_default().to_owned()
}

/// The names in `dir`, hidden ones included (temporary files are).
fn names(s: &mut Server, dir: &str) -> Vec<String> {
    let out = sh(s, &format!("ls -a {dir}"));
    out.lines()
        .filter(|l| *l != "." && *l != "..")
        .map(str::to_owned)
        .collect()
}

/// `download`: (metadata, resource).
fn download(s: &mut Server, args: Value) -> (Value, Value) {
    let r = s.call_result("download", args.clone());
    assert_eq!(r["isError"], json!(false), "download {args}: {r}");
    let blocks = r["content"].as_array().expect("content");
    assert_eq!(blocks.len(), 2, "{r}");
    assert_eq!(blocks[1]["type"], json!("resource"), "{r}");
    (tool_json(&r), blocks[1]["resource"].clone())
}

/// The bytes of a resource (`text` or base64 `blob`).
fn resource_bytes(resource: &Value) -> Vec<u8> {
    match (resource["text"].as_str(), resource["blob"].as_str()) {
        (Some(t), None) => t.as_bytes().to_vec(),
        (None, Some(b)) => STANDARD.decode(b).expect("base64 blob"),
        _ => panic!("a resource has exactly one of text and blob: {resource}"),
    }
}

fn round_trips_text_and_every_byte_value(t: Target) {
    let mut s = Server::started_in(t, &[], LATEST);
    let dir = fresh_dir(&mut s, "files-rt");

    let text = "héllo\nwörld\n";
    let path = format!("{}/a.txt", dir.0);
    let up = s.call("upload", json!({"path": path, "text": text}));
    assert_eq!(
        up,
        json!({"path": path, "bytes": text.len(), "sha256": sha_hex(text.as_bytes()), "unchanged": false})
    );
    let (meta, res) = download(&mut s, json!({"path": path}));
    assert_eq!(
        meta,
        json!({"path": path, "offset": 0, "bytes": text.len(), "total_bytes": text.len(), "sha256": sha_hex(text.as_bytes())})
    );
    assert_eq!(res["text"], json!(text));
    assert_eq!(res["mimeType"], json!("text/plain"));
    assert_eq!(res["uri"], json!(format!("file://{path}")));

    let all: Vec<u8> = (0..=255u8).collect();
    let bin = format!("{}/all.bin", dir.0);
    let up = s.call(
        "upload",
        json!({"path": bin, "content_base64": STANDARD.encode(&all), "sha256": sha_hex(&all)}),
    );
    assert_eq!(up["bytes"], json!(256));
    let (meta, res) = download(&mut s, json!({"path": bin}));
    assert!(res.get("text").is_none(), "binary comes as a blob: {res}");
    assert_eq!(res["mimeType"], json!("application/octet-stream"));
    assert_eq!(resource_bytes(&res), all);
    assert_eq!(meta["sha256"], json!(sha_hex(&all)));
    // The job sees the same bytes.
    assert_eq!(sha(&mut s, &bin), sha_hex(&all));
}

/// `sha256sum` of a file, by a job.
fn sha(s: &mut Server, path: &str) -> String {
    sh(s, &format!("sha256sum {path}"))
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_owned()
}

fn a_sha256_mismatch_leaves_nothing_behind_and_the_file_untouched(t: Target) {
    let mut s = Server::started_in(t, &[], LATEST);
    let dir = fresh_dir(&mut s, "files-sha");
    let path = format!("{}/f", dir.0);
    s.call("upload", json!({"path": path, "text": "original"}));
    let wrong = "0".repeat(64);
    let e = s.call_err(
        "upload",
        json!({"path": path, "text": "replacement", "sha256": wrong}),
    );
    assert_eq!(
        e,
        format!(
            "sha256 mismatch: expected {wrong}, got {}",
            sha_hex(b"replacement")
        )
    );
    assert_eq!(sh(&mut s, &format!("cat {path}")), "original");
    assert_eq!(names(&mut s, &dir.0), vec!["f"]);
}

fn an_identical_retry_is_unchanged_even_without_overwrite(t: Target) {
    let mut s = Server::started_in(t, &[], LATEST);
    let dir = fresh_dir(&mut s, "files-retry");
    let path = format!("{}/f", dir.0);
    let first = s.call("upload", json!({"path": path, "text": "v1"}));
    assert_eq!(first["unchanged"], json!(false));
    let mtime = sh(&mut s, &format!("stat -c %Y.%i {path}"));
    for overwrite in [true, false] {
        let again = s.call(
            "upload",
            json!({"path": path, "text": "v1", "overwrite": overwrite}),
        );
        assert_eq!(again["unchanged"], json!(true), "{again}");
    }
    // Nothing was rewritten: the same inode, not a renamed copy.
    assert_eq!(sh(&mut s, &format!("stat -c %Y.%i {path}")), mtime);
    let e = s.call_err(
        "upload",
        json!({"path": path, "text": "v2", "overwrite": false}),
    );
    assert_eq!(e, format!("\"{path}\" exists and overwrite is false"));
    assert_eq!(sh(&mut s, &format!("cat {path}")), "v1");
}

fn mkdirs_creates_missing_parents_only_when_asked(t: Target) {
    let mut s = Server::started_in(t, &[], LATEST);
    let dir = fresh_dir(&mut s, "files-mkdirs");
    let path = format!("{}/a/b/c/f", dir.0);
    let e = s.call_err("upload", json!({"path": path, "text": "x"}));
    assert!(e.contains("does not exist"), "{e}");
    assert!(e.contains("mkdirs"), "{e}");
    s.call("upload", json!({"path": path, "text": "x", "mkdirs": true}));
    assert_eq!(sh(&mut s, &format!("cat {path}")), "x");
}

fn a_new_file_gets_its_mode_and_a_replaced_one_keeps_its_own(t: Target) {
    let mut s = Server::started_in(t, &[], LATEST);
    let dir = fresh_dir(&mut s, "files-mode");
    let plain = format!("{}/plain", dir.0);
    s.call("upload", json!({"path": plain, "text": "x"}));
    assert_eq!(sh(&mut s, &format!("stat -c %a {plain}")).trim(), "644");
    let script = format!("{}/run.sh", dir.0);
    s.call(
        "upload",
        json!({"path": script, "text": "echo hi", "mode": "0750"}),
    );
    assert_eq!(sh(&mut s, &format!("stat -c %a {script}")).trim(), "750");
    s.call("upload", json!({"path": script, "text": "echo bye"}));
    assert_eq!(sh(&mut s, &format!("stat -c %a {script}")).trim(), "750");
    assert_eq!(sh(&mut s, &script).trim(), "bye");
    let e = s.call_err("upload", json!({"path": plain, "text": "y", "mode": "rwx"}));
    assert!(e.starts_with("invalid arguments: \"mode\""), "{e}");
}

fn a_fifo_is_neither_read_nor_replaced(t: Target) {
    let mut s = Server::started_in(t, &[], LATEST);
    let dir = fresh_dir(&mut s, "files-fifo");
    let fifo = format!("{}/p", dir.0);
    sh(&mut s, &format!("mkfifo {fifo}"));
    let refusal = format!("\"{fifo}\" is not a regular file");
    assert_eq!(s.call_err("download", json!({"path": fifo})), refusal);
    assert_eq!(
        s.call_err("upload", json!({"path": fifo, "text": "x"})),
        refusal
    );
    assert_eq!(sh(&mut s, &format!("stat -c %F {fifo}")).trim(), "fifo");
    assert_eq!(names(&mut s, &dir.0), vec!["p"]);
}

fn download_pages_with_offset_and_length(t: Target) {
    let mut s = Server::started_in(t, &[], LATEST);
    let dir = fresh_dir(&mut s, "files-page");
    let path = format!("{}/f", dir.0);
    let content: String = (0..100)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    s.call("upload", json!({"path": path, "text": content}));
    let (meta, res) = download(&mut s, json!({"path": path, "offset": 10, "length": 20}));
    let want = &content.as_bytes()[10..30];
    assert_eq!(
        meta,
        json!({"path": path, "offset": 10, "bytes": 20, "total_bytes": 100, "sha256": sha_hex(want)})
    );
    assert_eq!(resource_bytes(&res), want);
    // A length past the end stops at the end; the end itself is empty.
    let (meta, _) = download(&mut s, json!({"path": path, "offset": 90, "length": 50}));
    assert_eq!(meta["bytes"], json!(10));
    let (meta, res) = download(&mut s, json!({"path": path, "offset": 100}));
    assert_eq!(meta["bytes"], json!(0));
    assert_eq!(res["text"], json!(""));
    let e = s.call_err("download", json!({"path": path, "offset": 101}));
    assert!(e.contains("past the end"), "{e}");
}

fn more_than_the_transfer_limit_says_how_to_page_or_stream(t: Target) {
    let mut s = Server::started_in(t, &[("MCP_EXEC_MAX_TRANSFER_BYTES", "1000")], LATEST);
    let dir = fresh_dir(&mut s, "files-limit");
    let path = format!("{}/f", dir.0);
    let e = s.call_err("upload", json!({"path": path, "text": "x".repeat(1001)}));
    assert!(e.contains("MCP_EXEC_MAX_TRANSFER_BYTES (1000)"), "{e}");
    assert!(e.contains(&format!("PUT /files{path}")), "{e}");
    s.call("upload", json!({"path": path, "text": "x".repeat(1000)}));
    sh(&mut s, &format!("printf y >> {path}"));
    let e = s.call_err("download", json!({"path": path}));
    assert!(e.contains("MCP_EXEC_MAX_TRANSFER_BYTES (1000)"), "{e}");
    assert!(e.contains("\"offset\" and \"length\""), "{e}");
    assert!(e.contains(&format!("GET /files{path}")), "{e}");
    let (meta, _) = download(&mut s, json!({"path": path, "length": 1000}));
    assert_eq!(meta["total_bytes"], json!(1001));
    let (meta, res) = download(&mut s, json!({"path": path, "offset": 1000}));
    assert_eq!(
        (meta["bytes"].clone(), res["text"].clone()),
        (json!(1), json!("y"))
    );
}

fn two_concurrent_uploads_to_one_path_leave_one_whole_file(t: Target) {
    let mut s = Server::started_in(t, &[], LATEST);
    let dir = fresh_dir(&mut s, "files-race");
    let path = format!("{}/f", dir.0);
    let a = vec![b'a'; 2 << 20];
    let b = vec![b'b'; 2 << 20];
    for _ in 0..3 {
        let ia = s.send_call(
            "upload",
            json!({"path": path, "content_base64": STANDARD.encode(&a)}),
        );
        let ib = s.send_call(
            "upload",
            json!({"path": path, "content_base64": STANDARD.encode(&b)}),
        );
        for id in [ia, ib] {
            let r = s.response(&id, crate::support::TIMEOUT);
            assert_eq!(r["result"]["isError"], json!(false), "{r}");
        }
        let got = sha(&mut s, &path);
        assert!(
            got == sha_hex(&a) || got == sha_hex(&b),
            "a torn file: {got}"
        );
        assert_eq!(names(&mut s, &dir.0), vec!["f"]);
    }
}

fn under_a_policy_symlinks_cannot_lead_a_file_path_out(t: Target) {
    // The root must exist before the server starts.
    let (root, _host) = if t.is_container() {
        ("/tmp".to_owned(), None)
    } else {
        let d = HostPath::new("files-root");
        std::fs::create_dir(&d.0).expect("the allowed root");
        (d.0.clone(), Some(d))
    };
    let mut s = Server::started_in(
        t,
        &[
            ("MCP_EXEC_ALLOWED_CWDS", &root),
            ("MCP_EXEC_DEFAULT_CWD", &root),
        ],
        LATEST,
    );
    // Outside the root: beside it on the host, at / in a container (whose
    // root is /tmp, where every HostPath lies).
    let out = if t.is_container() {
        HostPath("/mcp-exec-files-out".to_owned())
    } else {
        HostPath::new("files-out")
    };
    sh(
        &mut s,
        &format!("mkdir -p {0} && echo secret > {0}/s", out.0),
    );
    sh(
        &mut s,
        &format!(
            "ln -sfn {0} {root}/dirlink && ln -sfn {0}/s {root}/filelink",
            out.0
        ),
    );
    let outside = |p: &str| format!("path \"{p}\" is outside the allowed directories ({root})");
    let p = format!("{root}/dirlink/new");
    assert_eq!(
        s.call_err("upload", json!({"path": p, "text": "x"})),
        outside(&p)
    );
    let p = format!("{root}/dirlink/s");
    assert_eq!(s.call_err("download", json!({"path": p})), outside(&p));
    assert_eq!(
        s.call_err("download", json!({"path": format!("{}/s", out.0)})),
        outside(&format!("{}/s", out.0))
    );
    // A symlink as the last component is never followed, nor replaced.
    let p = format!("{root}/filelink");
    let refusal = format!("\"{p}\" is not a regular file");
    assert_eq!(s.call_err("download", json!({"path": p})), refusal);
    assert_eq!(
        s.call_err("upload", json!({"path": p, "text": "x"})),
        refusal
    );
    assert_eq!(sh(&mut s, &format!("cat {}/s", out.0)), "secret\n");
    // Inside, files work as usual.
    let p = format!("{root}/inside-{}", std::process::id());
    s.call("upload", json!({"path": p, "text": "ok"}));
    let (_, res) = download(&mut s, json!({"path": p}));
    assert_eq!(res["text"], json!("ok"));
    sh(&mut s, &format!("rm -f {p} {root}/dirlink {root}/filelink"));
}

fn under_a_policy_the_tools_resolve_the_root_to_itself_and_never_write_over_it(t: Target) {
    let (root, _host) = if t.is_container() {
        ("/tmp".to_owned(), None)
    } else {
        let d = HostPath::new("files-own-root");
        std::fs::create_dir(&d.0).expect("the allowed root");
        (d.0.clone(), Some(d))
    };
    let mut s = Server::started_in(
        t,
        &[
            ("MCP_EXEC_ALLOWED_CWDS", &root),
            ("MCP_EXEC_DEFAULT_CWD", &root),
        ],
        LATEST,
    );
    // Not "outside the allowed directories": the root is what it is, a directory.
    assert_eq!(
        s.call_err("download", json!({"path": root})),
        format!("\"{root}\" is not a regular file")
    );
    assert_eq!(
        s.call_err("upload", json!({"path": root, "text": "x"})),
        format!(
            "\"{root}\" is an allowed root directory (MCP_EXEC_ALLOWED_CWDS): it cannot be written over"
        )
    );
    assert_eq!(sh(&mut s, &format!("test -d {root} && echo dir")), "dir\n");
}

/// A server whose `dir` is a 1 MiB tmpfs: the PID-1 target's own mount
/// namespace (a job mounts it), `unshare --mount` around the bare binary,
/// `podman --tmpfs` in the containers.
fn with_small_tmpfs(t: Target) -> Option<(Server, String)> {
    let dir = HostPath::new("files-small").0.clone();
    let mut s = match t {
        Target::Bare => {
            let ok = std::process::Command::new("unshare")
                .args(["--mount", "true"])
                .status()
                .is_ok_and(|s| s.success());
            if !crate::support::require(
                if ok {
                    Ok(())
                } else {
                    Err("unshare --mount failed".into())
                },
                "a private mount namespace",
            ) {
                return None;
            }
            let mut c = std::process::Command::new("unshare");
            c.args([
                "--mount",
                "--propagation",
                "private",
                crate::support::binary(),
            ]);
            Server::spawn_command(t, c)
        }
        Target::Pid1 => Server::start(t),
        Target::Scratch | Target::Tini => {
            let tmpfs = format!("{dir}:rw,size=1m,mode=1777");
            Server::start_with_args(t, &[], &["--tmpfs", &tmpfs])
        }
    };
    s.initialize(LATEST);
    if !t.is_container() {
        sh(
            &mut s,
            &format!("mkdir -p {dir} && mount -t tmpfs -o size=1m tmpfs {dir}"),
        );
    }
    Some((s, dir))
}

fn no_space_leaves_nothing_behind_and_the_destination_untouched(t: Target) {
    let Some((mut s, dir)) = with_small_tmpfs(t) else {
        return;
    };
    let path = format!("{dir}/f");
    s.call("upload", json!({"path": path, "text": "original"}));
    let big = vec![7u8; 2 << 20];
    let e = s.call_err(
        "upload",
        json!({"path": path, "content_base64": STANDARD.encode(&big)}),
    );
    assert_eq!(e, format!("no space left on device writing \"{path}\""));
    assert_eq!(sh(&mut s, &format!("cat {path}")), "original");
    assert_eq!(names(&mut s, &dir), vec!["f"]);
    if !t.is_container() {
        // Leaves the mount with the namespace; the mount point is ours.
        let _ = s.exec(&format!("umount {dir}; rmdir {dir}"));
    }
}

crate::parity!(
    round_trips_text_and_every_byte_value,
    a_sha256_mismatch_leaves_nothing_behind_and_the_file_untouched,
    an_identical_retry_is_unchanged_even_without_overwrite,
    mkdirs_creates_missing_parents_only_when_asked,
    a_new_file_gets_its_mode_and_a_replaced_one_keeps_its_own,
    a_fifo_is_neither_read_nor_replaced,
    download_pages_with_offset_and_length,
    more_than_the_transfer_limit_says_how_to_page_or_stream,
    two_concurrent_uploads_to_one_path_leave_one_whole_file,
    under_a_policy_symlinks_cannot_lead_a_file_path_out,
    under_a_policy_the_tools_resolve_the_root_to_itself_and_never_write_over_it,
    no_space_leaves_nothing_behind_and_the_destination_untouched,
);

#[test]
fn a_2024_11_05_session_sees_neither_file_tool() {
    let mut s = Server::started(Target::Bare);
    let list = s.request("tools/list", json!({}));
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(
        names,
        [
            "execute",
            "wait",
            "status",
            "output",
            "input",
            "kill",
            "list_jobs"
        ]
    );
    let id = s.send_call("upload", json!({"path": "/tmp/x", "text": "x"}));
    let r = s.response(&id, crate::support::TIMEOUT);
    assert_eq!(r["error"]["code"], json!(-32601), "{r}");
}

#[test]
fn from_2025_03_26_upload_is_destructive_and_download_read_only() {
    for revision in ["2025-03-26", LATEST] {
        let mut s = Server::started_in(Target::Bare, &[], revision);
        let list = s.request("tools/list", json!({}));
        let tools = list["result"]["tools"].as_array().expect("tools");
        let find = |name: &str| {
            tools
                .iter()
                .find(|t| t["name"] == json!(name))
                .unwrap_or_else(|| panic!("{name} missing in {revision}"))
                .clone()
        };
        assert_eq!(
            find("upload")["annotations"]["destructiveHint"],
            json!(true)
        );
        assert_eq!(find("download")["annotations"]["readOnlyHint"], json!(true));
        for name in ["upload", "download"] {
            let schema = &find(name)["inputSchema"];
            assert_eq!(schema["required"], json!(["path"]), "{name}");
            assert!(schema.get("oneOf").is_none() && schema.get("anyOf").is_none());
        }
    }
}
