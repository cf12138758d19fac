//! The file-transfer scenarios of issue 12:
//!
//! - [`http`] (issue 26): `PUT` and `GET` of one large file (1 GiB; 16 MiB
//!   in a smoke run) on loopback through `/files/…` (`http_files`) and
//!   sandboxd's `/v1/files/…` (`v1_files`, raw body), interleaved run by
//!   run with their baselines in the same run: `dd bs=1M conv=fsync` of
//!   the same bytes from the same source into the same file system for the
//!   PUTs (the server's commit is on disk when it answers: `fsync` of file
//!   and directory; `/files` also verifies the SHA-256 sent in
//!   `X-Content-SHA256`), `cat file > /dev/null` of the file read for the
//!   GETs. Every step starts with `sync`, so that none is throttled for the
//!   dirty pages of the one before. The server's RSS high-water mark is
//!   reset before each transfer and read after it: memory must stay flat
//!   whatever the size.
//! - [`stdio`]: `upload` and `download` of 8 MiB over stdio (base64 in JSON),
//!   wall time from the client's bytes to the server's answer (the client's
//!   base64 and JSON included), against base64-encoding the same bytes in
//!   the client.
//!
//! Each starts a server of its own; every answer is checked, timings are
//! never asserted.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::Error;
use crate::client::{Launch, Server};
use crate::http_client::HttpServer;
use crate::scenarios::CALL_TIMEOUT;
use crate::stats::Samples;

/// How long a server may take to exit after SIGTERM.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// The client's read buffer for a GET.
const BUF: usize = 256 << 10;

/// A directory under the temp dir, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(what: &str) -> Result<Scratch, Error> {
        let dir =
            std::env::temp_dir().join(format!("mcp-exec-bench-{what}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)
            .map_err(|e| Error(format!("creating {}: {e}", dir.display())))?;
        Ok(Scratch(dir))
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Fills `len` bytes of pseudo-random data (xorshift: incompressible
/// enough, and fast) into `path`, and returns its SHA-256 in hex.
fn random_file(path: &Path, len: u64) -> Result<String, Error> {
    let mut f =
        File::create(path).map_err(|e| Error(format!("creating {}: {e}", path.display())))?;
    let mut state = 0x9E37_79B9_7F4A_7C15u64 ^ len;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut left = len;
    while left > 0 {
        for chunk in buf.chunks_exact_mut(8) {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            chunk.copy_from_slice(&state.to_le_bytes());
        }
        let n = usize::try_from(left.min(buf.len() as u64)).unwrap_or(buf.len());
        f.write_all(&buf[..n])
            .map_err(|e| Error(format!("writing {}: {e}", path.display())))?;
        hasher.update(&buf[..n]);
        left -= n as u64;
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut state = 0x2545_F491_4F6C_DD1Du64 ^ seed;
    let mut out = vec![0u8; len];
    for chunk in out.chunks_mut(8) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let n = chunk.len();
        chunk.copy_from_slice(&state.to_le_bytes()[..n]);
    }
    out
}

/// What the HTTP scenarios measured (MiB/s; each baseline once per run,
/// shared by both front-ends).
#[derive(Debug, Default)]
pub struct Transfer {
    /// `PUT /files` throughput.
    pub put: Samples,
    /// `GET /files` throughput.
    pub get: Samples,
    /// sandboxd's `PUT /v1/files` (raw body) throughput.
    pub v1_put: Samples,
    /// sandboxd's `GET /v1/files` throughput.
    pub v1_get: Samples,
    /// `dd bs=1M conv=fsync` of the same bytes from the same source into
    /// the same file system: a copy that is on disk when it ends, as the
    /// server's commit is.
    pub durable: Samples,
    /// `cat file > /dev/null` of the file the GETs read.
    pub cat: Samples,
    /// The server's RSS high-water mark during each transfer, MiB.
    pub peak_rss_mib: Samples,
    /// The server's RSS before the first transfer, MiB.
    pub idle_rss_mib: f64,
    /// Bytes per transfer.
    pub bytes: u64,
    /// Whether `/v1/files` was measured (the binary has sandboxd's REST).
    pub v1: bool,
}

fn mib_per_s(bytes: u64, took: Duration) -> f64 {
    bytes as f64 / f64::from(1 << 20) / took.as_secs_f64()
}

fn io(what: &str) -> impl Fn(std::io::Error) -> Error + '_ {
    move |e| Error(format!("{what}: {e}"))
}

/// Reads an HTTP response head; returns (status, content-length).
fn read_head(reader: &mut BufReader<TcpStream>) -> Result<(u16, Option<u64>), Error> {
    let mut line = String::new();
    reader
        .read_line(&mut line)
        .map_err(io("reading a status line"))?;
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| Error(format!("no HTTP status in {line:?}")))?;
    let mut length = None;
    loop {
        line.clear();
        reader
            .read_line(&mut line)
            .map_err(io("reading a header"))?;
        let l = line.trim();
        if l.is_empty() {
            return Ok((status, length));
        }
        if let Some((k, v)) = l.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            length = v.trim().parse().ok();
        }
    }
}

/// Where a transfer goes: `/files<abs path>` (answers `201` with the
/// sha256) or sandboxd's `/v1/files/<name>` (answers `204`).
#[derive(Clone, Copy)]
enum Api<'a> {
    Files(&'a Path),
    V1(&'a str),
}

impl Api<'_> {
    fn url(&self) -> String {
        match self {
            Api::Files(p) => format!("/files{}", p.display()),
            Api::V1(name) => format!("/v1/files/{name}"),
        }
    }
}

/// `PUT` of `src` (sent with `sendfile` by `io::copy`); the answer must be
/// `201` with the expected sha256 (`/files`, which verifies the
/// `X-Content-SHA256` sent) or `204` (`/v1/files`).
fn put(addr: SocketAddr, src: &Path, to: Api, sha: &str, len: u64) -> Result<Duration, Error> {
    let t0 = Instant::now();
    let stream = TcpStream::connect(addr).map_err(io("connecting"))?;
    stream.set_nodelay(true).map_err(io("TCP_NODELAY"))?;
    let mut w = stream.try_clone().map_err(io("cloning a socket"))?;
    let sha_header = match to {
        Api::Files(_) => format!("X-Content-SHA256: {sha}\r\n"),
        Api::V1(_) => String::new(),
    };
    write!(
        w,
        "PUT {} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {len}\r\n{sha_header}Connection: close\r\n\r\n",
        to.url()
    )
    .map_err(io("sending a PUT head"))?;
    let mut f = File::open(src).map_err(io("opening the source"))?;
    std::io::copy(&mut f, &mut w).map_err(io("sending the PUT body"))?;
    let mut reader = BufReader::new(stream);
    let (status, _) = read_head(&mut reader)?;
    let mut body = String::new();
    reader
        .read_to_string(&mut body)
        .map_err(io("reading the PUT answer"))?;
    let took = t0.elapsed();
    let ok = match to {
        Api::Files(_) => status == 201 && body.contains(sha),
        Api::V1(_) => status == 204,
    };
    if !ok {
        return Err(Error(format!("PUT {} answered {status}: {body}", to.url())));
    }
    Ok(took)
}

/// `GET`, read to the end into a buffer; must be `len` bytes.
fn get(addr: SocketAddr, from: Api, len: u64) -> Result<Duration, Error> {
    let t0 = Instant::now();
    let stream = TcpStream::connect(addr).map_err(io("connecting"))?;
    let mut w = stream.try_clone().map_err(io("cloning a socket"))?;
    write!(
        w,
        "GET {} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n",
        from.url()
    )
    .map_err(io("sending a GET"))?;
    let mut reader = BufReader::with_capacity(BUF, stream);
    let (status, length) = read_head(&mut reader)?;
    if status != 200 || length != Some(len) {
        return Err(Error(format!(
            "GET {} answered {status} with length {length:?}",
            from.url()
        )));
    }
    let mut buf = vec![0u8; BUF];
    let mut got = 0u64;
    loop {
        let n = reader.read(&mut buf).map_err(io("reading the GET body"))?;
        if n == 0 {
            break;
        }
        got += n as u64;
    }
    let took = t0.elapsed();
    if got != len {
        return Err(Error(format!("GET gave {got} bytes of {len}")));
    }
    Ok(took)
}

/// Times `cat` with stdin and stdout as given.
fn cat(args: &[&Path], stdin: Stdio, stdout: Stdio) -> Result<Duration, Error> {
    let t0 = Instant::now();
    let status = Command::new("cat")
        .args(args)
        .stdin(stdin)
        .stdout(stdout)
        .status()
        .map_err(io("running cat"))?;
    if !status.success() {
        return Err(Error(format!("cat exited with {status}")));
    }
    Ok(t0.elapsed())
}

/// Writes every dirty page back before a measured step, so that no step
/// is throttled for the dirty pages of the one before (the kernel slows
/// down a writer once too much of memory waits for the disk).
fn settle() -> Result<(), Error> {
    Command::new("sync").status().map_err(io("running sync"))?;
    Ok(())
}

/// Times `dd if=src of=dest bs=1M conv=fsync`.
fn dd_fsync(src: &Path, dest: &Path) -> Result<Duration, Error> {
    let t0 = Instant::now();
    let status = Command::new("dd")
        .arg(format!("if={}", src.display()))
        .arg(format!("of={}", dest.display()))
        .args(["bs=1M", "conv=fsync", "status=none"])
        .stdin(Stdio::null())
        .status()
        .map_err(io("running dd"))?;
    if !status.success() {
        return Err(Error(format!("dd exited with {status}")));
    }
    Ok(t0.elapsed())
}

/// `runs` × (`dd conv=fsync`, `PUT /files`, `PUT /v1/files`; `cat file >
/// /dev/null`, `GET /files`, `GET /v1/files`) of `bytes`, every step after
/// `sync`; `/v1/files` only when `v1` and the binary has sandboxd's REST
/// (`--sandboxd-rest`, its root the scratch directory). At most three
/// copies of the bytes exist at once (the source and the two PUTs').
pub fn http(binary: &Path, bytes: u64, runs: usize, v1: bool) -> Result<Option<Transfer>, Error> {
    let dir = Scratch::new("files")?;
    let with_v1 = Launch {
        args: vec![
            "--sandboxd-rest".into(),
            "127.0.0.1:0".into(),
            "--sandboxd-root".into(),
            dir.0.display().to_string(),
        ],
        ..Launch::default()
    };
    let plain = Launch::default();
    let (hs, v1_addr) = match HttpServer::launch(binary, if v1 { &with_v1 } else { &plain }, false)
    {
        Ok(None) => return Ok(None),
        Ok(Some(hs)) if v1 => {
            let addr = hs.listener("sandboxd REST")?;
            (hs, Some(addr))
        }
        Ok(Some(hs)) => (hs, None),
        // A build without sandboxd's REST: `/files` alone.
        Err(e) if v1 && e.0.contains("--sandboxd-rest") => {
            eprintln!("bench: v1_files skipped: {}", e.0);
            match HttpServer::launch(binary, &Launch::default(), false)? {
                None => return Ok(None),
                Some(hs) => (hs, None),
            }
        }
        Err(e) => return Err(e),
    };
    let src = dir.path("src");
    let sha = random_file(&src, bytes)?;
    let mut out = Transfer {
        bytes,
        v1: v1_addr.is_some(),
        ..Transfer::default()
    };
    out.idle_rss_mib = hs.server.memory()?.rss_kib as f64 / 1024.0;
    let peak = |out: &mut Transfer| -> Result<(), Error> {
        out.peak_rss_mib
            .push(hs.server.memory()?.hwm_kib as f64 / 1024.0);
        Ok(())
    };
    for run in 0..runs {
        let by_dd = dir.path("by-dd");
        let name = format!("by-server-{run}");
        let by_server = dir.path(&name);
        let v1_name = format!("by-v1-{run}");

        settle()?;
        out.durable.push(mib_per_s(bytes, dd_fsync(&src, &by_dd)?));
        let _ = std::fs::remove_file(&by_dd);
        settle()?;
        hs.server.reset_peak()?;
        let took = put(hs.addr, &src, Api::Files(&by_server), &sha, bytes)?;
        out.put.push(mib_per_s(bytes, took));
        peak(&mut out)?;
        if let Some(addr) = v1_addr {
            settle()?;
            hs.server.reset_peak()?;
            let took = put(addr, &src, Api::V1(&v1_name), &sha, bytes)?;
            out.v1_put.push(mib_per_s(bytes, took));
            peak(&mut out)?;
            let _ = std::fs::remove_file(dir.path(&v1_name));
        }

        settle()?;
        let base = cat(&[&by_server], Stdio::null(), Stdio::null())?;
        out.cat.push(mib_per_s(bytes, base));
        hs.server.reset_peak()?;
        let took = get(hs.addr, Api::Files(&by_server), bytes)?;
        out.get.push(mib_per_s(bytes, took));
        peak(&mut out)?;
        if let Some(addr) = v1_addr {
            hs.server.reset_peak()?;
            let took = get(addr, Api::V1(&name), bytes)?;
            out.v1_get.push(mib_per_s(bytes, took));
            peak(&mut out)?;
        }
        let _ = std::fs::remove_file(&by_server);
    }
    hs.terminate(STOP_TIMEOUT)?;
    Ok(Some(out))
}

/// What the stdio scenario measured (ms).
#[derive(Debug, Default)]
pub struct StdioTransfer {
    /// `upload` wall time: base64 + JSON in the client, the call, the answer.
    pub upload: Samples,
    /// `download` wall time: the call, the answer parsed, the blob decoded.
    pub download: Samples,
    /// base64-encoding the same bytes in the client.
    pub encode: Samples,
    /// Bytes per call.
    pub bytes: usize,
}

/// `runs` × (encode, upload, download) of `bytes` over stdio, with
/// `protocol` (2025-03-26 or later: the tools are Part II).
pub fn stdio(
    binary: &Path,
    protocol: &str,
    bytes: usize,
    runs: usize,
) -> Result<Option<StdioTransfer>, Error> {
    let mut server = Server::spawn(binary)?;
    server.initialize(protocol, CALL_TIMEOUT)?;
    let (_, listed) = server.call("tools/list", json!({}), CALL_TIMEOUT)?;
    let has_upload = listed["tools"]
        .as_array()
        .is_some_and(|t| t.iter().any(|t| t["name"] == json!("upload")));
    if !has_upload {
        server.shutdown(STOP_TIMEOUT)?;
        return Ok(None);
    }
    let dir = Scratch::new("files-stdio")?;
    let mut out = StdioTransfer {
        bytes,
        ..StdioTransfer::default()
    };
    for run in 0..runs {
        let data = random_bytes(bytes, run as u64);
        let path = dir.path(&format!("f{run}"));
        let path_text = path.display().to_string();

        let t0 = Instant::now();
        let encoded = STANDARD.encode(&data);
        out.encode.push_ms(t0.elapsed());
        drop(encoded);

        let t0 = Instant::now();
        let args = json!({"path": path_text, "content_base64": STANDARD.encode(&data)});
        let (_, answer) = server.tool("upload", args, CALL_TIMEOUT)?;
        out.upload.push_ms(t0.elapsed());
        if answer["bytes"] != json!(bytes) || answer["unchanged"] != json!(false) {
            return Err(Error(format!("upload answered {answer}")));
        }

        let t0 = Instant::now();
        let (_, result) = server.call(
            "tools/call",
            json!({"name": "download", "arguments": {"path": path_text}}),
            CALL_TIMEOUT,
        )?;
        let blob = result["content"][1]["resource"]["blob"]
            .as_str()
            .ok_or_else(|| Error(format!("download gave no blob: {}", short(&result))))?;
        let back = STANDARD
            .decode(blob)
            .map_err(|e| Error(format!("download's blob is not base64: {e}")))?;
        out.download.push_ms(t0.elapsed());
        if back != data {
            return Err(Error("download gave other bytes than were uploaded".into()));
        }
        let _ = std::fs::remove_file(&path);
    }
    server.shutdown(STOP_TIMEOUT)?;
    Ok(Some(out))
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    s.chars().take(300).collect()
}

/// Runs the wanted file scenarios and reports their figures: 1 GiB over
/// HTTP (16 MiB when `smoke`), 8 MiB over stdio (1 MiB when `smoke`).
pub fn figures(
    o: &crate::Options,
    binary: &Path,
    figures: &mut Vec<crate::report::Figure>,
    notes: &mut serde_json::Map<String, Value>,
) -> Result<(), Error> {
    use crate::report::Figure;
    let (bytes, runs) = if o.smoke {
        (16u64 << 20, 1)
    } else {
        (1u64 << 30, 3)
    };
    let (files, v1) = (o.wants("http_files"), o.wants("v1_files"));
    if files || v1 {
        let size = format!("{} MiB", bytes >> 20);
        eprintln!(
            "bench: http_files/v1_files ({runs} × dd conv=fsync, PUT /files, PUT /v1/files; cat, GET /files, GET /v1/files of {size} on loopback, interleaved)"
        );
        let put_label = format!("PUT /files of {size} (sha256 verified, fsync), loopback");
        let v1_label = format!("PUT /v1/files (sandboxd) of {size} (raw body, fsync), loopback");
        const DD: &str = "dd bs=1M conv=fsync of the same bytes";
        const DD_GOAL: (&str, f64) = ("≥ 0.5× dd conv=fsync", 0.5);
        const CAT: &str = "cat file > /dev/null";
        const CAT_GOAL: (&str, f64) = ("≥ 0.5× cat file > /dev/null", 0.5);
        match http(binary, bytes, runs, v1)? {
            None => {
                for (want, key, label) in [
                    (files, "http_files_put", &put_label),
                    (v1, "v1_files_put", &v1_label),
                ] {
                    if want {
                        crate::http_skipped(key, label, "MiB/s", DD_GOAL.0, figures, notes);
                    }
                }
            }
            Some(t) => {
                if files {
                    figures.push(Figure::rate_vs(
                        "http_files_put",
                        put_label,
                        "MiB/s",
                        &t.put,
                        &t.durable,
                        DD,
                        DD_GOAL,
                    ));
                    figures.push(Figure::rate_vs(
                        "http_files_get",
                        format!("GET /files of {size}, loopback"),
                        "MiB/s",
                        &t.get,
                        &t.cat,
                        CAT,
                        CAT_GOAL,
                    ));
                }
                if v1 && !t.v1 {
                    figures.push(Figure::skipped(
                        "v1_files_put",
                        format!("{v1_label} (skipped: no sandboxd REST in this build)"),
                        "MiB/s",
                        DD_GOAL.0,
                    ));
                } else if v1 {
                    figures.push(Figure::rate_vs(
                        "v1_files_put",
                        v1_label,
                        "MiB/s",
                        &t.v1_put,
                        &t.durable,
                        DD,
                        DD_GOAL,
                    ));
                    figures.push(Figure::rate_vs(
                        "v1_files_get",
                        format!("GET /v1/files (sandboxd) of {size}, loopback"),
                        "MiB/s",
                        &t.v1_get,
                        &t.cat,
                        CAT,
                        CAT_GOAL,
                    ));
                }
                let peak = t.peak_rss_mib.percentile(100.0);
                figures.push(Figure::value(
                    "http_files_rss",
                    format!(
                        "  server RSS high-water mark during any of those transfers (idle {:.2} MiB)",
                        t.idle_rss_mib
                    ),
                    "MiB",
                    peak,
                    Some(("≤ 16 MiB", 16.0)),
                ));
                notes.insert("http_files_bytes".into(), json!(t.bytes));
            }
        }
    }
    if o.wants("stdio_files") {
        let bytes = if o.smoke { 1usize << 20 } else { 8 << 20 };
        let runs = if o.smoke { 2 } else { 10 };
        let size = format!("{} MiB", bytes >> 20);
        eprintln!("bench: stdio_files ({runs} × upload and download of {size} over stdio)");
        let protocol = crate::bounded::part_two(&o.protocol);
        match stdio(binary, protocol, bytes, runs)? {
            None => {
                eprintln!("bench: stdio_files skipped: the server has no upload tool");
                figures.push(Figure::skipped(
                    "stdio_files_upload",
                    format!("upload of {size} over stdio (skipped: no upload tool)"),
                    "ms",
                    "—",
                ));
            }
            Some(s) => {
                figures.push(Figure::latency_vs(
                    "stdio_files_upload",
                    format!("upload of {size} over stdio: client base64 + JSON → answer"),
                    &s.upload,
                    &s.encode,
                    "base64-encoding the same bytes in the client",
                ));
                figures.push(Figure::latency_vs(
                    "stdio_files_download",
                    format!("download of {size} over stdio: request → blob decoded"),
                    &s.download,
                    &s.encode,
                    "base64-encoding the same bytes in the client",
                ));
                notes.insert("stdio_files_bytes".into(), json!(s.bytes));
            }
        }
    }
    Ok(())
}
