//! ChatGPT file references on `upload` (docs/files.md): the server fetches a
//! `file` — `{download_url, file_id, …}` or a bare URL — over HTTPS into the
//! same atomic commit as every upload, on every target.
//!
//! The remote is tests/support/https_server.py (Python's standard library):
//! a throwaway CA made at start with the `openssl` CLI, passed to the server
//! as `MCP_EXEC_CA_FILE`; a second listener whose certificate another CA
//! signed; a plain-HTTP one for the refused redirect. It listens on the
//! host's loopback; container targets share the host's network
//! (`--network=host`) and get the CA's directory mounted read-only. The
//! Python process ends with the test (its stdin closes, then it is killed).

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::support::{HostPath, LATEST, Server, TIMEOUT, Target, tool_json};

fn sha_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The local HTTPS server and the files it serves (`/file/<name>`).
pub struct Https {
    child: Child,
    stdin: Option<ChildStdin>,
    /// Trusted certificate (the CA in [`Https::ca`]).
    pub port: u16,
    /// A certificate of another CA.
    pub untrusted_port: u16,
    /// Plain HTTP.
    pub plain_port: u16,
    /// The CA's PEM file.
    pub ca: String,
    /// The directory of the certificates (mounted into containers).
    pub certs: String,
    /// What `/file/<name>` serves.
    pub dir: HostPath,
}

impl Drop for Https {
    fn drop(&mut self) {
        self.stdin.take();
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.certs);
    }
}

impl Https {
    /// Starts the server; `None` (skip, or fail in CI) without python3 or
    /// openssl.
    pub fn start() -> Option<Https> {
        let have = |cmd: &str, arg: &str| {
            Command::new(cmd)
                .arg(arg)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .map_err(|e| format!("{cmd}: {e}"))
                .and_then(|s| s.success().then_some(()).ok_or(format!("{cmd} {arg}: {s}")))
        };
        let ok = have("python3", "--version").and_then(|()| have("openssl", "version"));
        if !crate::support::require(ok, "python3 and openssl (the HTTPS test server)") {
            return None;
        }
        let dir = HostPath::new("fileref-served");
        std::fs::create_dir_all(&dir.0).unwrap();
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/support/https_server.py");
        let mut child = Command::new("python3")
            .arg(script)
            .arg(&dir.0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("starting the HTTPS test server");
        let stdin = child.stdin.take();
        let mut line = String::new();
        let read = BufReader::new(child.stdout.take().unwrap()).read_line(&mut line);
        let ready: Value = match read.ok().and_then(|_| serde_json::from_str(&line).ok()) {
            Some(v) => v,
            None => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("the HTTPS test server did not start: {line:?}");
            }
        };
        let port = |k: &str| ready[k].as_u64().unwrap() as u16;
        Some(Https {
            port: port("port"),
            untrusted_port: port("untrusted_port"),
            plain_port: port("plain_port"),
            ca: ready["ca"].as_str().unwrap().to_owned(),
            certs: ready["certs"].as_str().unwrap().to_owned(),
            dir,
            child,
            stdin,
        })
    }

    /// `https://127.0.0.1:<port><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.port)
    }

    /// Serves `bytes` as `/file/<name>`.
    pub fn serve(&self, name: &str, bytes: &[u8]) {
        std::fs::write(format!("{}/{name}", self.dir.0), bytes).unwrap();
    }

    /// An mcp-exec on `t` that trusts this server's CA, initialized in
    /// the latest revision.
    pub fn mcp_exec(&self, t: Target, env: &[(&str, &str)]) -> Server {
        let mut env: Vec<(&str, &str)> = env.to_vec();
        env.push(("MCP_EXEC_CA_FILE", &self.ca));
        self.mcp_exec_with(t, &env)
    }

    /// The same with exactly `env` (no CA file unless it names one).
    pub fn mcp_exec_with(&self, t: Target, env: &[(&str, &str)]) -> Server {
        let mut s = if t.is_container() {
            let mount = format!("{0}:{0}:ro", self.certs);
            Server::start_with_args(t, env, &["--network=host", "-v", &mount])
        } else {
            Server::start_with_env(t, env)
        };
        s.initialize(LATEST);
        s
    }
}

/// Bytes that are not text, of `n` bytes.
fn payload(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 + i / 251) as u8).collect()
}

/// A fresh directory on the target.
fn fresh_dir(s: &mut Server, what: &str) -> HostPath {
    let dir = HostPath::new(what);
    let r = s.exec(&format!("mkdir -p {}", dir.0));
    assert_eq!(r["exit_code"], json!(0), "{r}");
    dir
}

/// The names in `dir`, hidden ones (temporary files) included.
fn names(s: &mut Server, dir: &str) -> Vec<String> {
    let r = s.exec(&format!("ls -a {dir}"));
    assert_eq!(r["exit_code"], json!(0), "{r}");
    r["stdout"]["data"]
        .as_str()
        .unwrap_or_default()
        .lines()
        .filter(|l| *l != "." && *l != "..")
        .map(str::to_owned)
        .collect()
}

/// The sha256 the server computes of the file now at `path` (`download`).
fn sha_on_disk(s: &mut Server, path: &str) -> String {
    let r = s.call_result("download", json!({"path": path}));
    assert_eq!(r["isError"], json!(false), "download {path}: {r}");
    tool_json(&r)["sha256"].as_str().unwrap().to_owned()
}

fn a_file_reference_is_fetched_verified_and_committed(t: Target) {
    let Some(https) = Https::start() else { return };
    let bytes = payload(300_000);
    https.serve("photo.png", &bytes);
    let mut s = https.mcp_exec(t, &[]);
    let dir = fresh_dir(&mut s, "fileref-ok");
    let path = format!("{}/photo.png", dir.0);
    let file = json!({
        "download_url": https.url("/file/photo.png"),
        "file_id": "file-abc123",
        "mime_type": "image/png",
        "file_name": "photo.png",
    });
    let up = s.call("upload", json!({"path": path, "file": file}));
    assert_eq!(
        up,
        json!({"path": path, "bytes": bytes.len(), "sha256": sha_hex(&bytes), "unchanged": false, "file_id": "file-abc123"})
    );
    assert_eq!(sha_on_disk(&mut s, &path), sha_hex(&bytes));
    // A retry fetches again and finds the same bytes: nothing rewritten.
    let again = s.call("upload", json!({"path": path, "file": file}));
    assert_eq!(again["unchanged"], json!(true), "{again}");
    // The expected sha256 is verified before the rename.
    let other = format!("{}/other.png", dir.0);
    let e = s.call_err(
        "upload",
        json!({"path": other, "file": file, "sha256": "00".repeat(32)}),
    );
    assert!(e.starts_with("sha256 mismatch: expected 0000"), "{e}");
    assert_eq!(names(&mut s, &dir.0), ["photo.png"]);
}

fn a_bare_url_string_is_fetched_and_a_placeholder_is_refused_saying_why(t: Target) {
    let Some(https) = Https::start() else { return };
    let bytes = payload(1000);
    https.serve("a.bin", &bytes);
    let mut s = https.mcp_exec(t, &[]);
    let dir = fresh_dir(&mut s, "fileref-bare");
    let path = format!("{}/a.bin", dir.0);
    let up = s.call(
        "upload",
        json!({"path": path, "file": https.url("/file/a.bin")}),
    );
    assert_eq!(
        up,
        json!({"path": path, "bytes": 1000, "sha256": sha_hex(&bytes), "unchanged": false})
    );
    let e = s.call_err(
        "upload",
        json!({"path": format!("{}/b", dir.0), "file": "chat_upload://image_0"}),
    );
    assert!(
        e.contains("\"chat_upload://image_0\"")
            && e.contains("not a URL the server can fetch")
            && e.contains("content_base64"),
        "{e}"
    );
    let e = s.call_err(
        "upload",
        json!({"path": format!("{}/c", dir.0), "file": {"file_id": "x"}}),
    );
    assert!(e.contains("no \"download_url\""), "{e}");
    let e = s.call_err(
        "upload",
        json!({"path": format!("{}/d", dir.0), "text": "x", "file": https.url("/file/a.bin")}),
    );
    assert!(e.contains("exactly one of"), "{e}");
    assert_eq!(names(&mut s, &dir.0), ["a.bin"]);
}

fn remote_failures_are_clear_tool_errors_and_leave_nothing(t: Target) {
    let Some(https) = Https::start() else { return };
    https.serve("a", b"hello");
    let mut s = https.mcp_exec(t, &[]);
    let dir = fresh_dir(&mut s, "fileref-errors");
    let path = format!("{}/f", dir.0);
    let err =
        |s: &mut Server, url: String| s.call_err("upload", json!({"path": path, "file": url}));

    let e = err(&mut s, https.url("/status/404?sig=SECRET"));
    assert!(e.contains("answered 404 Not Found"), "{e}");
    assert!(
        !e.contains("SECRET"),
        "the query (a signed link's credential) is not shown: {e}"
    );

    let e = err(&mut s, https.url("/file/a").replace("https://", "http://"));
    assert!(e.contains("only https:// URLs are fetched"), "{e}");

    let untrusted = format!("https://127.0.0.1:{}/file/a", https.untrusted_port);
    let e = err(&mut s, untrusted);
    assert!(
        e.contains("TLS with 127.0.0.1") && e.contains("UnknownIssuer"),
        "names the TLS reason: {e}"
    );
    assert!(names(&mut s, &dir.0).is_empty());
}

fn too_large_is_refused_by_content_length_and_by_count(t: Target) {
    let Some(https) = Https::start() else { return };
    https.serve("big", &payload(300_000));
    let mut s = https.mcp_exec(t, &[("MCP_EXEC_MAX_TRANSFER_BYTES", "100000")]);
    let dir = fresh_dir(&mut s, "fileref-large");
    let path = format!("{}/f", dir.0);
    let err =
        |s: &mut Server, url: String| s.call_err("upload", json!({"path": path, "file": url}));

    let e = err(&mut s, https.url("/file/big"));
    assert!(
        e.contains("is 300000 bytes, more than MCP_EXEC_MAX_TRANSFER_BYTES (100000)"),
        "{e}"
    );
    // A Content-Length over the limit is refused before any body: this
    // remote sends none and holds the connection for a minute.
    let started = Instant::now();
    let e = err(&mut s, https.url("/claims?length=1000000000"));
    assert!(e.contains("is 1000000000 bytes, more than"), "{e}");
    assert!(started.elapsed() < TIMEOUT);
    // A body without a length is counted and cut at the limit.
    let e = err(&mut s, https.url("/chunked?size=250000"));
    assert!(
        e.contains("sent more than MCP_EXEC_MAX_TRANSFER_BYTES (100000) bytes"),
        "{e}"
    );
    assert!(names(&mut s, &dir.0).is_empty());
}

fn redirects_are_followed_bounded_and_https_only(t: Target) {
    let Some(https) = Https::start() else { return };
    let bytes = payload(5000);
    https.serve("a", &bytes);
    let mut s = https.mcp_exec(t, &[]);
    let dir = fresh_dir(&mut s, "fileref-redirects");
    let path = format!("{}/f", dir.0);

    let up = s.call(
        "upload",
        json!({"path": path, "file": https.url("/redirect/4?to=/file/a")}),
    );
    assert_eq!(up["sha256"], json!(sha_hex(&bytes)), "five hops: {up}");
    let up = s.call(
        "upload",
        json!({"path": format!("{}/g", dir.0), "file": https.url("/relative?to=file/a")}),
    );
    assert_eq!(
        up["sha256"],
        json!(sha_hex(&bytes)),
        "a relative Location: {up}"
    );

    let e = s.call_err(
        "upload",
        json!({"path": format!("{}/h", dir.0), "file": https.url("/redirect/5?to=/file/a")}),
    );
    assert!(e.contains("more than 5 redirects"), "{e}");
    let e = s.call_err(
        "upload",
        json!({"path": format!("{}/h", dir.0), "file": https.url("/to-http?to=/file/a")}),
    );
    assert!(
        e.contains(&format!(
            "redirected to http://127.0.0.1:{}/file/a",
            https.plain_port
        )) && e.contains("only https://"),
        "{e}"
    );
    let mut left = names(&mut s, &dir.0);
    left.sort();
    assert_eq!(left, ["f", "g"]);
}

fn a_stalled_fetch_ends_at_its_deadline_and_the_server_answers_meanwhile(t: Target) {
    let Some(https) = Https::start() else { return };
    let mut s = https.mcp_exec(t, &[("MCP_EXEC_FETCH_TIMEOUT", "3")]);
    let dir = fresh_dir(&mut s, "fileref-deadline");
    let path = format!("{}/f", dir.0);
    let started = Instant::now();
    let id = s.send_call("upload", json!({"path": path, "file": https.url("/stall")}));
    // The fetch runs on the runtime: PID 1 answers other calls meanwhile.
    let r = s.exec("echo still-here");
    assert_eq!(r["stdout"]["data"], json!("still-here\n"), "{r}");
    assert!(
        !s.answered(&id),
        "execute was answered while the fetch was still under way"
    );
    let r = s.response(&id, TIMEOUT);
    let text = r["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert_eq!(r["result"]["isError"], json!(true), "{r}");
    assert!(
        text.contains("took longer than 3 s (MCP_EXEC_FETCH_TIMEOUT)"),
        "{text}"
    );
    assert!(started.elapsed() >= Duration::from_secs(3));
    assert!(
        names(&mut s, &dir.0).is_empty(),
        "no temporary file is left"
    );
}

fn a_cancelled_fetch_ends_and_leaves_nothing(t: Target) {
    let Some(https) = Https::start() else { return };
    let mut s = https.mcp_exec(t, &[]);
    let dir = fresh_dir(&mut s, "fileref-cancel");
    let path = format!("{}/f", dir.0);
    let id = s.send_call("upload", json!({"path": path, "file": https.url("/stall")}));
    // Give the fetch time to connect and stage its temporary file.
    let staged = crate::support::wait_for(TIMEOUT, || !names(&mut s, &dir.0).is_empty());
    assert!(staged, "the fetch stages a temporary file while it reads");
    s.cancel(&id);
    let r = s.response(&id, TIMEOUT);
    assert_eq!(r["error"]["code"], json!(-32800), "{r}");
    let gone = crate::support::wait_for(TIMEOUT, || names(&mut s, &dir.0).is_empty());
    assert!(
        gone,
        "the temporary file is removed: {:?}",
        names(&mut s, &dir.0)
    );
}

fn a_malformed_url_is_refused_without_showing_its_query(t: Target) {
    let Some(https) = Https::start() else { return };
    let mut s = https.mcp_exec(t, &[]);
    let dir = fresh_dir(&mut s, "fileref-malformed");
    let path = format!("{}/f", dir.0);
    // No host, a space in the query, a bad character, a placeholder: each
    // refused as what it is, and the query (a signed link's credential)
    // never shown.
    for (url, says) in [
        // (hyper's parser takes no empty authority: that is "not a URL")
        ("https:///f?sig=SECRET", "is not a URL"),
        ("https://h.example/f?sig=SEC RET", "is not a URL"),
        ("https://h.example/f\u{1}?sig=SECRET", "is not a URL"),
        (
            "sandbox:/mnt/data/f.png?sig=SECRET",
            "not a URL the server can fetch",
        ),
    ] {
        for file in [json!(url), json!({"download_url": url, "file_id": "f1"})] {
            let e = s.call_err("upload", json!({"path": path, "file": file}));
            assert!(e.contains(says), "{url}: {e}");
            assert!(
                !e.contains("SECRET") && !e.contains("SEC RET"),
                "{url}: {e}"
            );
            assert!(e.contains("?…"), "{url}: the cut is shown: {e}");
        }
    }
    assert!(names(&mut s, &dir.0).is_empty());
}

crate::parity!(
    a_file_reference_is_fetched_verified_and_committed,
    a_bare_url_string_is_fetched_and_a_placeholder_is_refused_saying_why,
    remote_failures_are_clear_tool_errors_and_leave_nothing,
    a_malformed_url_is_refused_without_showing_its_query,
    too_large_is_refused_by_content_length_and_by_count,
    redirects_are_followed_bounded_and_https_only,
    a_stalled_fetch_ends_at_its_deadline_and_the_server_answers_meanwhile,
    a_cancelled_fetch_ends_and_leaves_nothing,
);

/// An image `FROM scratch` has no CA bundle: without `MCP_EXEC_CA_FILE` a
/// fetch is refused saying so, never made unverified.
#[test]
fn without_a_ca_bundle_a_fetch_is_refused_naming_mcp_exec_ca_file() {
    if !Target::Scratch.available() {
        return;
    }
    let Some(https) = Https::start() else { return };
    https.serve("a", b"x");
    let mut s = https.mcp_exec_with(Target::Scratch, &[]);
    let e = s.call_err(
        "upload",
        json!({"path": "/tmp/f", "file": https.url("/file/a")}),
    );
    assert!(
        e.contains("no CA bundle") && e.contains("MCP_EXEC_CA_FILE"),
        "{e}"
    );
}

/// `_meta["openai/fileParams"]` is declared where a `Tool` has `_meta`
/// (2025-06-18 on); `file` is an input wherever `upload` is.
#[test]
fn upload_declares_its_file_param_from_2025_06_18_and_takes_file_from_2025_03_26() {
    for (revision, meta) in [
        ("2025-03-26", false),
        ("2025-06-18", true),
        ("2025-11-25", true),
    ] {
        let mut s = Server::started_in(Target::Bare, &[], revision);
        let list = s.request("tools/list", json!({}));
        let upload = list["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == json!("upload"))
            .unwrap()
            .clone();
        let file = &upload["inputSchema"]["properties"]["file"];
        assert_eq!(
            file["required"],
            json!(["download_url", "file_id"]),
            "{revision}: {upload}"
        );
        assert_eq!(upload["inputSchema"]["required"], json!(["path"]));
        if meta {
            assert_eq!(
                upload["_meta"],
                json!({"openai/fileParams": ["file"]}),
                "{revision}"
            );
        } else {
            assert!(upload.get("_meta").is_none(), "{revision}: {upload}");
        }
    }
}
