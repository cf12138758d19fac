//! Every server a test starts ends with the test, also when it fails; and
//! the inherited signal state a run may ask servers to start with.
//!
//! A server with HTTP on rightly outlives its stdin, a PID-1 server outlives
//! the `unshare` around it, and a job outlives a server killed with SIGKILL
//! (it is in a process group of its own). Killing the client-side child is
//! therefore not enough. Each server is started through [`prepare`], which
//! puts a value of its own in its environment (`MCP_EXEC_TEST_SERVER`);
//! every job inherits the server's environment, and a process that leaves
//! its parent keeps it, so [`Mark::end`] finds them all in `/proc/*/environ`
//! (plus the descendants of the client-side child, for a job started with an
//! environment of its own) and kills them until none is left.
//!
//! `scripts/test.sh` exports `MCP_EXEC_TEST_RUN=<random id>` and, at the
//! end, fails the run if a process carrying it is still alive; [`prepare`]
//! passes it on even to a server whose caller cleared the `MCP_EXEC_*`
//! variables.
//!
//! `MCP_EXEC_TEST_INHERIT_IGNORED=HUP,INT,QUIT` starts every non-container
//! server with those signals ignored, as under `nohup` or from a script that
//! backgrounds it (`sh -c 'trap "" HUP INT QUIT; exec …'`: an ignored
//! disposition survives `exec`). `scripts/test.sh` runs the bare target once
//! more that way (issue 19 §5).

use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Set by `scripts/test.sh` for the whole run.
pub const RUN_VAR: &str = "MCP_EXEC_TEST_RUN";
/// Unique to one server under test.
pub const SERVER_VAR: &str = "MCP_EXEC_TEST_SERVER";
/// Signals every non-container server starts with ignored (comma-separated names).
pub const IGNORED_VAR: &str = "MCP_EXEC_TEST_INHERIT_IGNORED";

static SERVERS: AtomicU64 = AtomicU64::new(0);

/// The environment entry (`MCP_EXEC_TEST_SERVER=<pid>-<n>`) that marks one
/// server and everything it starts.
#[derive(Debug, Clone)]
pub struct Mark(String);

/// The signal names of [`IGNORED_VAR`], for a shell's `trap` (empty when unset).
fn inherited_ignored() -> Vec<String> {
    let raw = std::env::var(IGNORED_VAR).unwrap_or_default();
    let names: Vec<String> = raw
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(str::to_owned)
        .collect();
    for n in &names {
        assert!(
            n.chars().all(|c| c.is_ascii_alphanumeric()),
            "{IGNORED_VAR}: {n:?} is not a signal name"
        );
    }
    names
}

/// Marks `command`, which starts a server under test (or a wrapper that
/// execs it: `unshare`, `prlimit`, `podman`), and, unless it runs in a
/// container (`ignore: false`), starts it with the signals of
/// [`IGNORED_VAR`] ignored. Call it before settings that cannot be read
/// back (`uid`, `process_group`, stdio): a wrapped command is rebuilt from
/// its program, arguments, environment changes and directory.
pub fn prepare(command: Command, ignore: bool) -> (Command, Mark) {
    let value = format!(
        "{}-{}",
        std::process::id(),
        SERVERS.fetch_add(1, Ordering::Relaxed)
    );
    let ignored = if ignore {
        inherited_ignored()
    } else {
        Vec::new()
    };
    let mut command = if ignored.is_empty() {
        command
    } else {
        let mut wrapped = Command::new("sh");
        wrapped
            .arg("-c")
            .arg(format!("trap '' {}; exec \"$0\" \"$@\"", ignored.join(" ")))
            .arg(command.get_program())
            .args(command.get_args());
        for (k, v) in command.get_envs() {
            match v {
                Some(v) => wrapped.env(k, v),
                None => wrapped.env_remove(k),
            };
        }
        if let Some(dir) = command.get_current_dir() {
            wrapped.current_dir(dir);
        }
        wrapped
    };
    command.env(SERVER_VAR, &value);
    if let Some(run) = std::env::var_os(RUN_VAR) {
        command.env(RUN_VAR, run);
    }
    (command, Mark(format!("{SERVER_VAR}={value}")))
}

impl Mark {
    /// Kills (SIGKILL) every process that carries this mark, and `root`
    /// (the client-side child) with its descendants, until none is left.
    /// Zombies are left to whoever reaps them (the caller reaps `root`).
    pub fn end(&self, root: Option<u32>) {
        for _ in 0..200 {
            let mut pids = self.carriers();
            if let Some(root) = root.and_then(|r| i32::try_from(r).ok()) {
                pids.extend(descendants(root));
                pids.push(root);
            }
            pids.retain(|&p| !is_zombie(p));
            pids.sort_unstable();
            pids.dedup();
            if pids.is_empty() {
                return;
            }
            for pid in pids {
                if let Some(pid) = rustix::process::Pid::from_raw(pid) {
                    let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Live processes whose environment holds the mark.
    fn carriers(&self) -> Vec<i32> {
        carriers_of(self.0.as_bytes())
    }
}

/// Processes (but this one) whose initial environment contains `entry`.
pub fn carriers_of(entry: &[u8]) -> Vec<i32> {
    let me = std::process::id();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != me)
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|&b| b == 0).any(|v| v == entry))
        })
        .filter_map(|pid| i32::try_from(pid).ok())
        .collect()
}

/// Every descendant of `root` still parented in its tree.
fn descendants(root: i32) -> Vec<i32> {
    let mut found = Vec::new();
    let mut todo = vec![root];
    while let Some(pid) = todo.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let children =
                std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
            for child in children.split_whitespace().filter_map(|c| c.parse().ok()) {
                if !found.contains(&child) {
                    found.push(child);
                    todo.push(child);
                }
            }
        }
    }
    found
}

/// Whether `pid` has exited and waits to be reaped (or is gone).
fn is_zombie(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return true;
    };
    stat.rsplit_once(") ")
        .is_none_or(|(_, rest)| rest.starts_with('Z') || rest.starts_with('X'))
}

/// Ends a process started from a [`prepare`]d command, and everything that
/// carries its mark, when dropped (see [`Mark::end`]): hold it for as long
/// as the process may run, so that a failing test ends it too.
pub struct Guard {
    mark: Mark,
    pid: u32,
}

impl Mark {
    /// A [`Guard`] for the process `pid` started with this mark.
    pub fn guard(&self, pid: u32) -> Guard {
        Guard {
            mark: self.clone(),
            pid,
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.mark.end(Some(self.pid));
    }
}

/// [`Command::output`] of a [`prepare`]d `command` (a run of the binary
/// that ends by itself: a refusal, `mcp-exec health`); whatever it left
/// behind is ended before this returns.
pub fn output(command: Command) -> std::io::Result<std::process::Output> {
    let (mut command, mark) = prepare(command, true);
    let out = command.output();
    mark.end(None);
    out
}
