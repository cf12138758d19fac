//! The Kubernetes deployment (docs/kubernetes.md) on one machine, no cluster:
//!
//! - the shipped manifests in `deploy/kubernetes/` validate against the
//!   Kubernetes schemas (`scripts/validate-k8s.sh`, pinned
//!   `kubernetes-validate`);
//! - the shipped Pod, turned by `scripts/kube-variant.sh` into the variant
//!   podman 4.3 can run (token from a host file instead of a Secret volume,
//!   `hostPort` on 127.0.0.1, the local image, no in-container probes: the
//!   scratch image has no curl, so this test polls `/healthz` from the host),
//!   runs under `podman kube play`: it becomes ready, serves MCP over HTTP
//!   with the token, exports metrics, and `podman kube down` stops it
//!   gracefully (exit code 0, its shutdown logged).
//!
//! Needs podman, Debian's `catatonit` (the pod's pause image), the image
//! (`localhost/mcp-exec:scratch` from `images/build-offline.sh`, or
//! `MCP_EXEC_KUBE_IMAGE`) and python3 for the scripts: missing, the tests
//! fail when `CI` is set and skip with the reason elsewhere. Every pod is
//! removed by a `Drop` guard, whatever the test's outcome.

use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::http::{Reply, request};
use crate::support::{LATEST, Target, require, tool_json, wait_for};

/// How long the pod may take to answer `/healthz` 200 after `kube play`
/// returned (podman starts the pause and the server containers first).
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// Read/write timeout of one HTTP exchange.
const IO_TIMEOUT: Duration = Duration::from_secs(20);

/// The Pod's `terminationGracePeriodSeconds`: a graceful stop ends well
/// before it, a SIGKILL at it would show as exit code 137.
const TERMINATION_GRACE: Duration = Duration::from_secs(10);

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn image() -> String {
    std::env::var("MCP_EXEC_KUBE_IMAGE")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| Target::Scratch.image().unwrap().to_owned())
}

fn succeeds(cmd: &mut Command) -> Result<(), String> {
    let what = format!("{cmd:?}");
    match cmd.stdin(Stdio::null()).output() {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(format!(
            "{what} exited with {}: {}",
            o.status,
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Err(format!("{what}: {e}")),
    }
}

/// podman with a pause image of its own (catatonit) and the image to play.
fn kube_play_prerequisites() -> Result<(), String> {
    succeeds(crate::support::podman().arg("--version"))?;
    if !Path::new("/usr/libexec/podman/catatonit").exists() {
        return Err(
            "no /usr/libexec/podman/catatonit: apt-get install catatonit \
                    (scripts/setup.sh does)"
                .into(),
        );
    }
    succeeds(crate::support::podman().args(["image", "exists", &image()]))
        .map_err(|e| format!("image {} missing ({e})", image()))?;
    succeeds(Command::new("python3").arg("--version"))
}

/// A port nobody listens on now (the kernel's pick; podman binds it next).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

// ---------------------------------------------------------------------------
// A minimal HTTP/1.1 client (one request per connection)
// ---------------------------------------------------------------------------

/// One request with `Connection: close`; `Err` when the connection fails
/// (the pod is not listening yet).
fn http(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> std::io::Result<Reply> {
    request(port, method, path, headers, body, IO_TIMEOUT)
}

// ---------------------------------------------------------------------------
// The played pod
// ---------------------------------------------------------------------------

/// A pod played from the generated variant; `Drop` takes it down (and
/// removes it by name, in case `kube down` failed) and deletes its files.
struct PlayedPod {
    name: String,
    dir: PathBuf,
    variant: PathBuf,
    token: String,
    http_port: u16,
    metrics_port: u16,
}

impl PlayedPod {
    fn play() -> PlayedPod {
        let name = format!("mcp-exec-kube-test-{}", std::process::id());
        let dir = std::env::temp_dir().join(&name);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        // Unguessable enough for a test, and never a fixed string.
        let token = std::fs::read_to_string("/proc/sys/kernel/random/uuid")
            .unwrap()
            .trim()
            .to_owned();
        let token_file = dir.join("token");
        std::fs::write(&token_file, &token).unwrap();
        // As the Secret's defaultMode 0400 would project it.
        std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o400)).unwrap();
        let (http_port, metrics_port) = (free_port(), free_port());
        let variant = dir.join("pod.yaml");
        let out = Command::new("bash")
            .arg(repo().join("scripts/kube-variant.sh"))
            .args(["--image", &image(), "--name", &name, "--token-file"])
            .arg(&token_file)
            .args(["--http-port", &http_port.to_string()])
            .args(["--metrics-port", &metrics_port.to_string()])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success(), "kube-variant.sh: {out:?}");
        std::fs::write(&variant, &out.stdout).unwrap();
        // Still a valid Pod: hostPath and hostPort are Kubernetes, not podman extensions.
        let valid = Command::new(repo().join("deploy/.venv/bin/kubernetes-validate"))
            .args(["--strict", "--no-warn"])
            .arg(&variant)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            valid.status.success(),
            "the variant is not a valid Pod: {valid:?}"
        );
        let pod = PlayedPod {
            name,
            dir,
            variant,
            token,
            http_port,
            metrics_port,
        };
        // Left over from a run that was killed before its guard ran.
        pod.remove();
        let out = crate::support::podman()
            .args(["kube", "play"])
            .arg(&pod.variant)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "podman kube play {}: {out:?}\n{}",
            pod.variant.display(),
            String::from_utf8_lossy(&out.stdout)
        );
        pod
    }

    /// podman names a kube container `<pod>-<container>`.
    fn container(&self) -> String {
        format!("{}-mcp-exec", self.name)
    }

    fn logs(&self) -> String {
        crate::support::podman()
            .args(["logs", &self.container()])
            .stdin(Stdio::null())
            .output()
            .map(|o| {
                format!(
                    "{}{}",
                    String::from_utf8_lossy(&o.stdout),
                    String::from_utf8_lossy(&o.stderr)
                )
            })
            .unwrap_or_default()
    }

    /// Whether the server has exited at least once: it stays `exited`, or
    /// `restartPolicy: OnFailure` restarts it (a start-up refusal exits 2).
    fn server_exited(&self) -> bool {
        let out = crate::support::podman()
            .args(["inspect", "--format", "{{.State.Status}} {{.RestartCount}}"])
            .arg(self.container())
            .stdin(Stdio::null())
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_default();
        out.starts_with("exited") || out.split_whitespace().nth(1).is_some_and(|n| n != "0")
    }

    fn remove(&self) {
        for args in [
            vec!["kube", "down", self.variant.to_str().unwrap()],
            vec!["pod", "rm", "--force", "--ignore", &self.name],
        ] {
            let _ = crate::support::podman()
                .args(args)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }

    fn post(&self, session: Option<&str>, body: &Value) -> Reply {
        let bearer = format!("Bearer {}", self.token);
        let mut h = vec![
            ("Authorization", bearer.as_str()),
            ("Accept", "application/json, text/event-stream"),
            ("Content-Type", "application/json"),
        ];
        if let Some(id) = session {
            h.push(("Mcp-Session-Id", id));
        }
        http(self.http_port, "POST", "/mcp", &h, &body.to_string()).expect("POST /mcp")
    }
}

impl Drop for PlayedPod {
    fn drop(&mut self) {
        self.remove();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

#[test]
fn the_shipped_manifests_validate_against_the_kubernetes_schemas() {
    if !require(
        succeeds(Command::new("python3").arg("--version")),
        "python3 for scripts/validate-k8s.sh",
    ) {
        return;
    }
    let out = Command::new("bash")
        .arg(repo().join("scripts/validate-k8s.sh"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "validate-k8s.sh failed:\n{text}");
    for manifest in [
        "pod.yaml",
        "service.yaml",
        "agent-sandbox/sandbox-template.yaml",
        "agent-sandbox/sandbox.yaml",
        "agent-sandbox/networkpolicy.yaml",
    ] {
        assert!(
            text.lines()
                .any(|l| l.contains(manifest) && l.contains("passed")),
            "{manifest} not validated:\n{text}"
        );
    }
}

#[test]
fn the_shipped_pod_under_podman_kube_play_becomes_ready_executes_with_its_token_and_stops_gracefully()
 {
    if !require(kube_play_prerequisites(), "podman kube play") {
        return;
    }
    let pod = PlayedPod::play();

    // Ready: /healthz 200 on the token-free metrics port, polled from the host.
    let mut last = String::from("no answer");
    let mut exited = false;
    let mut ready = false;
    wait_for(READY_TIMEOUT, || {
        match http(pod.metrics_port, "GET", "/healthz", &[], "") {
            Ok(r) if r.status == 200 => {
                ready = true;
                true
            }
            Ok(r) => {
                last = format!("{r:?}");
                false
            }
            Err(e) => {
                // Not listening (yet): give up at once if the server is gone.
                last = e.to_string();
                exited = pod.server_exited();
                std::thread::sleep(Duration::from_millis(200));
                exited
            }
        }
    });
    assert!(
        ready,
        "/healthz not 200 (waited up to {READY_TIMEOUT:?}; last: {last}; server exited: {exited}); logs:\n{}",
        pod.logs()
    );
    let health = http(pod.metrics_port, "GET", "/healthz", &[], "")
        .unwrap()
        .json();
    assert_eq!(health["status"], json!("ok"), "{health}");
    assert_eq!(health["pid1"], json!(true), "mcp-exec is PID 1: {health}");
    assert_eq!(
        http(pod.metrics_port, "GET", "/livez", &[], "")
            .unwrap()
            .status,
        200
    );

    // The MCP port wants the token: none is 401.
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": LATEST, "capabilities": {},
                   "clientInfo": {"name": "kube-test", "version": "0"}}});
    let anonymous = http(pod.http_port, "POST", "/mcp", &[], &init.to_string()).unwrap();
    assert_eq!(anonymous.status, 401, "{anonymous:?}");

    // initialize + execute with the token, in the pod's policy: the default
    // cwd is the /workspace emptyDir, the root filesystem is read-only.
    let r = pod.post(None, &init);
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        r.json()["result"]["protocolVersion"],
        json!(LATEST),
        "{r:?}"
    );
    let sid = r
        .header("mcp-session-id")
        .expect("Mcp-Session-Id")
        .to_owned();
    let n = pod.post(
        Some(&sid),
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    assert_eq!(n.status, 202, "{n:?}");
    let call = |id: i64, args: Value| {
        let r = pod.post(
            Some(&sid),
            &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                    "params": {"name": "execute", "arguments": args}}),
        );
        assert_eq!(r.status, 200, "{r:?}");
        tool_json(&r.json()["result"])
    };
    let r = call(
        1,
        json!({"command": "pwd; echo in-pod > note && cat note; : >/tmp/t && echo tmp; touch /x 2>/dev/null || echo ro"}),
    );
    assert_eq!(r["state"], json!("success"), "{r}");
    assert_eq!(
        r["stdout"]["data"],
        json!("/workspace\nin-pod\ntmp\nro\n"),
        "{r}"
    );
    let refused = pod.post(
        Some(&sid),
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "execute",
                           "arguments": {"command": "true", "cwd": "/etc"}}}),
    );
    assert!(
        refused.body.contains("outside the allowed directories"),
        "the cwd policy /workspace:/tmp: {refused:?}"
    );

    // Metrics, token-free on the metrics port, count the job.
    let m = http(pod.metrics_port, "GET", "/metrics", &[], "").unwrap();
    assert_eq!(m.status, 200, "{m:?}");
    assert!(
        m.body.contains("mcp_exec_jobs_started_total 1"),
        "{}",
        m.body
    );

    // Stop as the kubelet would: SIGTERM, SIGKILL after the Pod's
    // terminationGracePeriodSeconds (podman takes it as the stop timeout).
    // `podman pod stop` first, because podman 4.3's `kube down` SIGKILLs at
    // once, ignoring the stop timeout (podman issues 19135, 22397; fixed upstream
    // in 2024): the server would die with 137 for podman's reasons, not ours.
    let started = Instant::now();
    let out = crate::support::podman()
        .args(["pod", "stop", &pod.name])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let took = started.elapsed();
    assert!(out.status.success(), "podman pod stop: {out:?}");
    let logs = pod.logs();
    let code = crate::support::podman()
        .args([
            "inspect",
            "--format",
            "{{.State.ExitCode}}",
            &pod.container(),
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&code.stdout).trim(),
        "0",
        "the server's exit code (137 = SIGKILL at the grace): {code:?}; logs:\n{logs}"
    );
    assert!(
        took < TERMINATION_GRACE,
        "the stop took {took:?}; SIGKILL comes at {TERMINATION_GRACE:?}"
    );
    for line in ["shutting down on signal signal=SIGTERM", "mcp-exec exiting"] {
        assert!(logs.contains(line), "no {line:?} in the logs:\n{logs}");
    }
    let out = crate::support::podman()
        .args(["kube", "down"])
        .arg(&pod.variant)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "podman kube down: {out:?}");
    let gone = crate::support::podman()
        .args(["pod", "exists", &pod.name])
        .stdin(Stdio::null())
        .status()
        .unwrap();
    assert!(
        !gone.success(),
        "pod {} still exists after kube down",
        pod.name
    );
}

/// The agent-sandbox Pod (deploy/kubernetes/agent-sandbox/sandbox.yaml's pod template, as the
/// controller creates it) played by podman; `Drop` takes it down and removes its files.
struct AgentPod {
    name: String,
    dir: PathBuf,
    variant: PathBuf,
}

impl Drop for AgentPod {
    fn drop(&mut self) {
        for args in [
            vec!["kube", "down", self.variant.to_str().unwrap()],
            vec!["pod", "rm", "--force", "--ignore", &self.name],
        ] {
            let _ = crate::support::podman()
                .args(args)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The image's binary knows every flag the agent-sandbox pod passes (`--sandboxd-grpc` comes
/// with the gRPC front-end).
fn image_knows_the_sandboxd_flags() -> Result<(), String> {
    let out = crate::support::podman()
        .args(["run", "--rm", &image(), "--help"])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| e.to_string())?;
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in ["--sandboxd-rest", "--sandboxd-grpc", "--sandboxd-root"] {
        if !help.contains(flag) {
            return Err(format!("{} --help has no {flag}", image()));
        }
    }
    Ok(())
}

#[test]
fn the_agent_sandbox_pod_under_podman_kube_play_serves_v1_health_and_files_on_its_ports() {
    if !require(
        kube_play_prerequisites().and_then(|()| image_knows_the_sandboxd_flags()),
        "podman kube play of the agent-sandbox pod",
    ) {
        return;
    }
    let name = format!("mcp-exec-agent-sandbox-test-{}", std::process::id());
    let dir = std::env::temp_dir().join(&name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let token = std::fs::read_to_string("/proc/sys/kernel/random/uuid")
        .unwrap()
        .trim()
        .to_owned();
    let token_file = dir.join("token");
    std::fs::write(&token_file, &token).unwrap();
    std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o400)).unwrap();
    let (rest, mcp, metrics) = (free_port(), free_port(), free_port());
    // Through k8s-venv.sh, which installs deploy/.venv first when it is not
    // there yet (in a clean clone this test may be the first to need it).
    let out = Command::new("bash")
        .arg("-c")
        .arg(
            "source \"$1\"/scripts/k8s-venv.sh && k8s_venv && shift && \
             exec \"$k8s_python\" \"$@\"",
        )
        .arg("k8s-venv")
        .arg(repo())
        .arg(repo().join("scripts/validate_agent_sandbox.py"))
        .args([
            "--variant",
            "--image",
            &image(),
            "--name",
            &name,
            "--token-file",
        ])
        .arg(&token_file)
        .args(["--port", &format!("sandboxd-rest={rest}")])
        .args(["--port", &format!("http={mcp}")])
        .args(["--port", &format!("metrics={metrics}")])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "the variant: {out:?}");
    let variant = dir.join("pod.yaml");
    std::fs::write(&variant, &out.stdout).unwrap();
    let pod = AgentPod { name, dir, variant };
    let played = crate::support::podman()
        .args(["kube", "play"])
        .arg(&pod.variant)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(played.status.success(), "podman kube play: {played:?}");
    // Ready: sandboxd's probe path, through the hostPort on 127.0.0.1.
    let mut last = String::from("no answer");
    let ready = wait_for(READY_TIMEOUT, || {
        match http(rest, "GET", "/v1/health", &[], "") {
            Ok(r) if r.status == 200 => true,
            Ok(r) => {
                last = format!("{r:?}");
                false
            }
            Err(e) => {
                last = e.to_string();
                false
            }
        }
    });
    assert!(ready, "/v1/health never answered 200: {last}");
    let health = http(rest, "GET", "/v1/health", &[], "").unwrap().json();
    assert_eq!(health["status"], json!("ok"), "{health}");
    // The SDK's calls: no token (MCP_EXEC_PLATFORM_INSECURE=1), into the /workspace emptyDir.
    let put = http(
        rest,
        "PUT",
        "/v1/files/dir%2Fhello.txt",
        &[],
        "from the pod",
    )
    .unwrap();
    assert_eq!(put.status, 204, "{put:?}");
    let got = http(rest, "GET", "/v1/files/dir%2Fhello.txt", &[], "").unwrap();
    assert_eq!((got.status, got.body.as_str()), (200, "from the pod"));
    let listing = http(rest, "GET", "/v1/files/dir", &[], "").unwrap().json();
    assert_eq!(
        listing["entries"][0]["name"],
        json!("hello.txt"),
        "{listing}"
    );
    // MCP on its own port keeps its token; metrics on 9091's listener.
    let bare = http(mcp, "POST", "/mcp", &[], "{}").unwrap();
    assert_eq!(bare.status, 401, "{bare:?}");
    let m = http(metrics, "GET", "/metrics", &[], "").unwrap();
    assert_eq!(m.status, 200);
}
