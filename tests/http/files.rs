//! `/files` over HTTP (docs/files.md): PUT/GET/HEAD with `X-Content-SHA256`
//! and `Range`, the file API (list, stat, mkdir, delete, move), status
//! codes, the guard, the cwd policy, and a client that leaves mid-PUT.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::Both;
use crate::support::{HostPath, TIMEOUT, Target, wait_for};

/// A response with a binary body.
#[derive(Debug)]
struct Raw {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Raw {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", String::from_utf8_lossy(&self.body)))
    }
}

/// One request with a binary body (`Connection: close`); the response body
/// is read by its `Content-Length` (none for `HEAD`).
fn call(port: u16, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Raw {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(TIMEOUT)).unwrap();
    s.set_write_timeout(Some(TIMEOUT)).unwrap();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).expect("reading the response");
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no head in {:?}", String::from_utf8_lossy(&raw)));
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .expect("a status");
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect();
    Raw {
        status,
        headers,
        body: raw[split + 4..].to_vec(),
    }
}

fn sha_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A fresh host directory (the bare and PID-1 targets share the host's).
fn fresh_dir(what: &str) -> HostPath {
    let d = HostPath::new(what);
    std::fs::create_dir(&d.0).expect("a fresh directory");
    d
}

/// The names in `dir`, hidden ones included.
fn names(dir: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .expect("reading the directory")
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn put_get_and_head_round_trip_every_byte_value_with_its_length(t: Target) {
    let s = Both::start(t, &[], &[]);
    let dir = fresh_dir("http-files-rt");
    let path = format!("{}/all.bin", dir.0);
    let url = format!("/files{path}");
    // Every byte value, in no period that divides a chunk (1 MiB each
    // way): a chunk written out of order, twice or not at all shows.
    let bytes: Vec<u8> = (0..3usize * 1024 * 1024 + 7)
        .map(|i| (i ^ (i >> 8) ^ (i >> 17)) as u8)
        .collect();
    let sha = sha_hex(&bytes);
    let r = call(s.port, "PUT", &url, &[("X-Content-SHA256", &sha)], &bytes);
    assert_eq!(r.status, 201, "{r:?}");
    assert_eq!(
        r.json(),
        json!({"path": path, "bytes": bytes.len(), "sha256": sha, "unchanged": false})
    );
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
    let again = call(s.port, "PUT", &url, &[], &bytes);
    assert_eq!(again.status, 200, "{again:?}");
    assert_eq!(again.json()["unchanged"], json!(true));

    let got = call(s.port, "GET", &url, &[], b"");
    assert_eq!(got.status, 200);
    assert_eq!(
        got.header("content-length"),
        Some(&*bytes.len().to_string())
    );
    assert_eq!(got.header("accept-ranges"), Some("bytes"));
    assert!(got.body == bytes, "the GET body differs");
    let head = call(s.port, "HEAD", &url, &[], b"");
    assert_eq!(head.status, 200);
    assert_eq!(
        head.header("content-length"),
        Some(&*bytes.len().to_string())
    );
    assert!(head.body.is_empty());

    // Replacing: 200, the new bytes; a name that needs escaping.
    let r = call(s.port, "PUT", &url, &[], b"short");
    assert_eq!(
        (r.status, r.json()["unchanged"].clone()),
        (200, json!(false))
    );
    let r = call(
        s.port,
        "PUT",
        &format!("/files{}/a%20b%25", dir.0),
        &[],
        b"x",
    );
    assert_eq!(r.status, 201, "{r:?}");
    assert_eq!(std::fs::read(format!("{}/a b%", dir.0)).unwrap(), b"x");
}

fn a_range_gets_206_with_content_range_and_past_the_end_416(t: Target) {
    let s = Both::start(t, &[], &[]);
    let dir = fresh_dir("http-files-range");
    let path = format!("{}/f", dir.0);
    std::fs::write(&path, b"0123456789").unwrap();
    let url = format!("/files{path}");
    for (range, body, content_range) in [
        ("bytes=2-5", &b"2345"[..], "bytes 2-5/10"),
        ("bytes=7-", b"789", "bytes 7-9/10"),
        ("bytes=-3", b"789", "bytes 7-9/10"),
        ("bytes=8-100", b"89", "bytes 8-9/10"),
    ] {
        let r = call(s.port, "GET", &url, &[("Range", range)], b"");
        assert_eq!(r.status, 206, "{range}: {r:?}");
        assert_eq!(r.body, body, "{range}");
        assert_eq!(r.header("content-range"), Some(content_range), "{range}");
        assert_eq!(r.header("content-length"), Some(&*body.len().to_string()));
    }
    let r = call(s.port, "GET", &url, &[("Range", "bytes=10-")], b"");
    assert_eq!(r.status, 416, "{r:?}");
    assert_eq!(r.header("content-range"), Some("bytes */10"));
}

fn a_put_whose_sha256_differs_gets_422_and_leaves_nothing_behind(t: Target) {
    let s = Both::start(t, &[], &[]);
    let dir = fresh_dir("http-files-sha");
    let path = format!("{}/f", dir.0);
    std::fs::write(&path, b"original").unwrap();
    let wrong = "ab".repeat(32);
    let r = call(
        s.port,
        "PUT",
        &format!("/files{path}"),
        &[("X-Content-SHA256", &wrong)],
        &vec![1u8; 300_000],
    );
    assert_eq!(r.status, 422, "{r:?}");
    assert_eq!(
        r.json()["error"],
        json!(format!(
            "sha256 mismatch: expected {wrong}, got {}",
            sha_hex(&vec![1u8; 300_000])
        ))
    );
    assert_eq!(std::fs::read(&path).unwrap(), b"original");
    assert_eq!(names(&dir.0), ["f"]);
    let r = call(
        s.port,
        "PUT",
        &format!("/files{path}"),
        &[("X-Content-SHA256", "nothex")],
        b"x",
    );
    assert_eq!(r.status, 400, "{r:?}");
}

fn a_client_that_leaves_mid_put_leaves_nothing_behind(t: Target) {
    let s = Both::start(t, &[], &[]);
    let dir = fresh_dir("http-files-gone");
    let path = format!("{}/f", dir.0);
    let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    write!(
        c,
        "PUT /files{path} HTTP/1.1\r\nHost: localhost\r\nContent-Length: 10000000\r\n\r\n"
    )
    .unwrap();
    c.write_all(&vec![9u8; 1 << 20]).unwrap();
    // The temporary file exists while the body streams in.
    assert!(
        wait_for(TIMEOUT, || names(&dir.0).len() == 1),
        "no temporary file while streaming"
    );
    drop(c);
    assert!(
        wait_for(TIMEOUT, || names(&dir.0).is_empty()),
        "left behind: {:?}",
        names(&dir.0)
    );
}

fn a_directory_lists_sorted_and_pages_and_stat_does_not_follow_symlinks(t: Target) {
    let s = Both::start(t, &[], &[]);
    let dir = fresh_dir("http-files-list");
    for n in ["c", "a", "b", "e"] {
        std::fs::write(format!("{}/{n}", dir.0), n.repeat(3)).unwrap();
    }
    std::fs::create_dir(format!("{}/d", dir.0)).unwrap();
    std::os::unix::fs::symlink("a", format!("{}/l", dir.0)).unwrap();
    let list = |q: &str| call(s.port, "GET", &format!("/files{}/{q}", dir.0), &[], b"");
    let r = list("");
    assert_eq!(r.status, 200, "{r:?}");
    let v = r.json();
    let got: Vec<(&str, &str)> = v["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["name"].as_str().unwrap(), e["type"].as_str().unwrap()))
        .collect();
    assert_eq!(
        got,
        [
            ("a", "file"),
            ("b", "file"),
            ("c", "file"),
            ("d", "dir"),
            ("e", "file"),
            ("l", "symlink")
        ]
    );
    let a = &v["entries"][0];
    assert_eq!(
        (a["size"].clone(), a["mode"].clone()),
        (json!(3), json!("0644"))
    );
    assert!(a["mtime"].as_str().unwrap().ends_with('Z'), "{a}");
    assert_eq!(v.get("next"), None);
    let page = list("?limit=2&after=b").json();
    let names: Vec<&str> = page["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["c", "d"]);
    assert_eq!(page["next"], json!("d"));

    let stat = call(s.port, "GET", &format!("/files{}/l?stat", dir.0), &[], b"").json();
    assert_eq!(stat["type"], json!("symlink"));
    assert_eq!(stat["target"], json!("a"));
    let missing = call(
        s.port,
        "GET",
        &format!("/files{}/nope?stat", dir.0),
        &[],
        b"",
    );
    assert_eq!(missing.status, 404);
    assert!(
        missing.json()["error"].as_str().unwrap().contains("/nope"),
        "{missing:?}"
    );
}

fn mkdir_delete_and_move_answer_with_their_status_codes(t: Target) {
    let s = Both::start(t, &[], &[]);
    let dir = fresh_dir("http-files-api");
    let d = &dir.0;
    let req = |method: &str, url: String| call(s.port, method, &url, &[], b"");
    assert_eq!(req("POST", format!("/files{d}/x?mkdir")).status, 201);
    assert_eq!(req("POST", format!("/files{d}/x?mkdir")).status, 409);
    assert_eq!(req("POST", format!("/files{d}/p/q/r?mkdir")).status, 404);
    let r = req("POST", format!("/files{d}/p/q/r?mkdir&parents"));
    assert_eq!(r.status, 201, "{r:?}");
    assert_eq!(r.json()["type"], json!("dir"));
    assert!(std::path::Path::new(&format!("{d}/p/q/r")).is_dir());

    std::fs::write(format!("{d}/p/q/r/f"), b"1").unwrap();
    std::fs::write(format!("{d}/g"), b"2").unwrap();
    let r = req("POST", format!("/files{d}/g?move={d}/p/q/r/f"));
    assert_eq!(r.status, 409, "{r:?}");
    assert!(
        r.json()["error"].as_str().unwrap().contains("overwrite"),
        "{r:?}"
    );
    assert_eq!(req("POST", format!("/files{d}/g?move={d}/h")).status, 204);
    assert_eq!(std::fs::read(format!("{d}/h")).unwrap(), b"2");
    assert_eq!(
        req("POST", format!("/files{d}/h?move={d}/p/q/r/f&overwrite")).status,
        204
    );
    assert_eq!(std::fs::read(format!("{d}/p/q/r/f")).unwrap(), b"2");
    assert_eq!(
        req("POST", format!("/files{d}/nope?move={d}/z")).status,
        404
    );
    assert_eq!(
        req("POST", format!("/files{d}/x?move=relative")).status,
        400
    );

    let r = req("DELETE", format!("/files{d}/p"));
    assert_eq!(r.status, 409, "{r:?}");
    assert!(r.json()["error"].as_str().unwrap().contains("recursive"));
    assert_eq!(req("DELETE", format!("/files{d}/p?recursive")).status, 204);
    assert!(!std::path::Path::new(&format!("{d}/p")).exists());
    assert_eq!(req("DELETE", format!("/files{d}/p")).status, 404);
    assert_eq!(req("DELETE", format!("/files{d}/x")).status, 409);
    assert_eq!(names(d), ["x"]);
    assert_eq!(req("GET", format!("/files{d}/../etc/passwd")).status, 400);
    assert_eq!(req("PATCH", format!("/files{d}/x")).status, 405);
}

fn files_need_the_token_and_outside_the_policy_is_403(t: Target) {
    let root = fresh_dir("http-files-root");
    let s = Both::start(
        t,
        &[
            ("MCP_EXEC_HTTP_TOKEN", "s3cret-token"),
            ("MCP_EXEC_ALLOWED_CWDS", &root.0),
            ("MCP_EXEC_DEFAULT_CWD", &root.0),
        ],
        &[],
    );
    let auth = [("Authorization", "Bearer s3cret-token")];
    let url = format!("/files{}/f", root.0);
    let r = call(s.port, "PUT", &url, &[], b"x");
    assert_eq!(r.status, 401, "{r:?}");
    assert!(!std::path::Path::new(&format!("{}/f", root.0)).exists());
    assert_eq!(
        call(s.port, "GET", "/files/etc/hostname", &[], b"").status,
        401
    );
    assert_eq!(call(s.port, "PUT", &url, &auth, b"x").status, 201);
    assert_eq!(call(s.port, "GET", &url, &auth, b"").body, b"x");
    let r = call(s.port, "GET", "/files/etc/hostname", &auth, b"");
    assert_eq!(r.status, 403, "{r:?}");
    assert_eq!(
        r.json()["error"],
        json!(format!(
            "path \"/etc/hostname\" is outside the allowed directories ({})",
            root.0
        ))
    );
    std::os::unix::fs::symlink("/etc", format!("{}/etc", root.0)).unwrap();
    let r = call(
        s.port,
        "PUT",
        &format!("/files{}/etc/evil", root.0),
        &auth,
        b"x",
    );
    assert_eq!(r.status, 403, "{r:?}");
    let foreign = [
        ("Authorization", "Bearer s3cret-token"),
        ("Origin", "http://evil.example"),
    ];
    assert_eq!(call(s.port, "GET", &url, &foreign, b"").status, 403);
}

fn under_a_policy_the_root_is_listed_stated_and_headed_and_never_deleted_moved_or_replaced(
    t: Target,
) {
    let root = fresh_dir("http-files-own-root");
    std::fs::write(format!("{}/f", root.0), b"x").unwrap();
    let s = Both::start(
        t,
        &[
            ("MCP_EXEC_ALLOWED_CWDS", &root.0),
            ("MCP_EXEC_DEFAULT_CWD", &root.0),
        ],
        &[],
    );
    let req = |method: &str, path: String| call(s.port, method, &path, &[], b"");
    for url in [format!("/files{}/", root.0), format!("/files{}", root.0)] {
        let r = req("GET", url.clone());
        assert_eq!(r.status, 200, "{url}: {r:?}");
        assert_eq!(r.json()["entries"][0]["name"], json!("f"), "{url}");
        assert_eq!(req("HEAD", url.clone()).status, 200, "{url}");
    }
    let r = req("GET", format!("/files{}?stat", root.0));
    assert_eq!(r.status, 200, "{r:?}");
    let name = std::path::Path::new(&root.0).file_name().unwrap();
    assert_eq!(
        (&r.json()["name"], &r.json()["type"]),
        (&json!(name.to_str().unwrap()), &json!("dir"))
    );
    // What lies beside it stays outside.
    let parent = std::path::Path::new(&root.0).parent().unwrap();
    assert_eq!(
        req("GET", format!("/files{}/", parent.display())).status,
        403
    );
    // The root itself is not to be removed or replaced, and the answer says why.
    let refused = |r: Raw, doing: &str| {
        assert_eq!(r.status, 403, "{doing}: {r:?}");
        assert_eq!(
            r.json()["error"],
            json!(format!(
                "\"{}\" is an allowed root directory (MCP_EXEC_ALLOWED_CWDS): it cannot be {doing}",
                root.0
            ))
        );
    };
    refused(
        req("DELETE", format!("/files{}?recursive=1", root.0)),
        "deleted",
    );
    refused(
        req("POST", format!("/files{0}?move={0}/moved", root.0)),
        "moved",
    );
    refused(
        req("POST", format!("/files{0}/f?move={0}&overwrite=1", root.0)),
        "replaced",
    );
    refused(
        call(s.port, "PUT", &format!("/files{}", root.0), &[], b"y"),
        "written over",
    );
    assert_eq!(std::fs::read(format!("{}/f", root.0)).unwrap(), b"x");
}

fn transfers_are_counted_in_the_metrics(t: Target) {
    let s = Both::start(t, &[], &[]);
    let dir = fresh_dir("http-files-metrics");
    let url = format!("/files{}/f", dir.0);
    assert_eq!(call(s.port, "PUT", &url, &[], &[5u8; 1234]).status, 201);
    assert_eq!(call(s.port, "GET", &url, &[], b"").body.len(), 1234);
    // The GET's reader counts after its last chunk is queued.
    let mut text = String::new();
    let counted = wait_for(Duration::from_secs(5), || {
        text =
            String::from_utf8_lossy(&call(s.port, "GET", "/metrics", &[], b"").body).into_owned();
        text.contains("mcp_exec_transfer_bytes_total{direction=\"download\"} 1234")
    });
    assert!(counted, "{text}");
    assert!(
        text.contains("mcp_exec_transfer_bytes_total{direction=\"upload\"} 1234"),
        "{text}"
    );
}

macro_rules! files_targets {
    ($($name:ident),* $(,)?) => {
        mod bare { $( #[test] fn $name() { if crate::support::Target::Bare.available() { super::$name(crate::support::Target::Bare) } } )* }
        mod pid1 { $( #[test] fn $name() { if crate::support::Target::Pid1.available() { super::$name(crate::support::Target::Pid1) } } )* }
    };
}

files_targets!(
    put_get_and_head_round_trip_every_byte_value_with_its_length,
    a_range_gets_206_with_content_range_and_past_the_end_416,
    a_put_whose_sha256_differs_gets_422_and_leaves_nothing_behind,
    a_client_that_leaves_mid_put_leaves_nothing_behind,
    a_directory_lists_sorted_and_pages_and_stat_does_not_follow_symlinks,
    mkdir_delete_and_move_answer_with_their_status_codes,
    files_need_the_token_and_outside_the_policy_is_403,
    transfers_are_counted_in_the_metrics,
    under_a_policy_the_root_is_listed_stated_and_headed_and_never_deleted_moved_or_replaced,
);
