//! The server is the last to die: the OOM ordering set at
//! start-up, and the memory cgroup's OOM-kill counter that tells a kernel
//! OOM kill from any other SIGKILL.
//!
//! - [`ordering`] runs once at start-up: it reads the `oom_score_adj` the
//!   server inherited, gives jobs max(`MCP_EXEC_JOB_OOM_SCORE_ADJ`, that
//!   value) — raising needs no privilege, lowering does, and Kubernetes may
//!   start a pod's processes at up to 1000 — and lowers the server's own to
//!   −999 (not −1000: it stays killable as a last resort), logging whether it
//!   could. Each job's child writes its value before `exec` (init's `Setup`).
//! - [`OomCounter`] reads `oom_kill` from the server's memory cgroup
//!   (`memory.events` on cgroup v2, `memory.oom_control` on v1). A job whose
//!   process died of a SIGKILL that none of ours sent, while that counter
//!   rose between its start and its end, was killed by the kernel's OOM
//!   killer: `cause: "oom"`. The counter is read, never guessed: without a
//!   readable counter no job is ever said to be OOM-killed. The file is
//!   opened once and re-read with `pread` at offset 0 (a cgroup file shows
//!   its values afresh on every read from the start): a job's start reads
//!   it, and one `pread` replaces the open, stat, reads and close it cost.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const OWN: &str = "/proc/self/oom_score_adj";
/// What the server lowers its own score to.
const SERVER: i32 = -999;

/// Sets up the OOM ordering (see the module doc) and returns the value each
/// job's child must write, or `None` when jobs need not write one (they
/// would inherit it, or `/proc` is unreadable: then nothing is changed).
pub fn ordering(job_setting: i32) -> Option<i32> {
    let inherited = match std::fs::read_to_string(OWN)
        .map_err(|e| e.to_string())
        .and_then(|s| s.trim().parse::<i32>().map_err(|e| e.to_string()))
    {
        Ok(v) => v,
        Err(e) => {
            tracing::warn!(
                error = %e,
                "cannot read {OWN}: jobs keep the server's oom_score_adj and the server keeps its own"
            );
            return None;
        }
    };
    let jobs = job_setting.max(inherited);
    let own = match std::fs::write(OWN, SERVER.to_string()) {
        Ok(()) => {
            tracing::info!(
                inherited,
                server = SERVER,
                jobs,
                "oom_score_adj: the server lowered its own, so the OOM killer takes jobs first"
            );
            SERVER
        }
        // Not permitted is the usual case (podman and Docker do not grant
        // CAP_SYS_RESOURCE): said once at info level, not as a fault.
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            tracing::info!(
                inherited,
                jobs,
                "oom_score_adj: the server keeps its own (lowering it to {SERVER} needs \
                 CAP_SYS_RESOURCE); jobs are raised above it, so the OOM killer takes them first"
            );
            inherited
        }
        Err(e) => {
            tracing::warn!(
                inherited,
                jobs,
                error = %e,
                "oom_score_adj: could not lower the server's own to {SERVER}; \
                 jobs are still raised above it"
            );
            inherited
        }
    };
    (jobs != own).then_some(jobs)
}

/// The `oom_kill` counter of the server's memory cgroup.
#[derive(Debug, Clone)]
pub struct OomCounter {
    path: PathBuf,
    /// The counter's file, open for the server's life (close-on-exec).
    file: Arc<File>,
}

/// Room for the whole counter file: `memory.events` is under 120 bytes,
/// `memory.oom_control` under 60.
const COUNTER_BYTES: usize = 512;

impl OomCounter {
    /// Finds the counter from `/proc/self/cgroup`: the server's own cgroup
    /// under the mount, else the mount's root (a container sees its own
    /// cgroup there). `None` when no readable counter exists.
    pub fn locate() -> Option<OomCounter> {
        let cgroups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        let mut candidates = Vec::new();
        for line in cgroups.lines() {
            let mut f = line.splitn(3, ':');
            let (Some(id), Some(controllers), Some(path)) = (f.next(), f.next(), f.next()) else {
                continue;
            };
            let rel = path.trim_start_matches('/');
            if controllers.split(',').any(|c| c == "memory") {
                let base = Path::new("/sys/fs/cgroup/memory");
                candidates.push(base.join(rel).join("memory.oom_control"));
                candidates.push(base.join("memory.oom_control"));
            } else if id == "0" && controllers.is_empty() {
                let base = Path::new("/sys/fs/cgroup");
                candidates.push(base.join(rel).join("memory.events"));
                candidates.push(base.join("memory.events"));
            }
        }
        candidates
            .into_iter()
            .filter_map(OomCounter::open)
            .find(|c| c.read().is_some())
    }

    /// The counter in the file at `path`, opened now.
    fn open(path: PathBuf) -> Option<OomCounter> {
        let file = Arc::new(File::open(&path).ok()?);
        Some(OomCounter { path, file })
    }

    /// The counter now.
    pub fn read(&self) -> Option<u64> {
        let mut buf = [0u8; COUNTER_BYTES];
        let n = self.file.read_at(&mut buf, 0).ok()?;
        oom_kills(std::str::from_utf8(&buf[..n]).ok()?)
    }

    /// Where it is read from.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The `oom_kill N` line of `memory.events` or `memory.oom_control`.
fn oom_kills(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix("oom_kill "))
        .and_then(|n| n.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oom_kill_line_is_read_from_both_cgroup_versions() {
        let v1 = "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n";
        let v2 = "low 0\nhigh 0\nmax 7\noom 2\noom_kill 2\noom_group_kill 0\n";
        assert_eq!(oom_kills(v1), Some(3));
        assert_eq!(oom_kills(v2), Some(2));
        assert_eq!(oom_kills("oom_kill_disable 0\n"), None);
    }

    #[test]
    fn the_open_counter_reads_the_files_current_value_each_time() {
        let dir = std::env::temp_dir().join(format!("mcp-exec-oom-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("memory.events");
        std::fs::write(&path, "oom 1\noom_kill 1\n").unwrap();
        let counter = OomCounter::open(path.clone()).unwrap();
        assert_eq!(counter.read(), Some(1));
        // The same file (inode), rewritten in place, as a cgroup file changes.
        std::fs::write(&path, "oom 12\noom_kill 12\n").unwrap();
        assert_eq!(counter.read(), Some(12));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
