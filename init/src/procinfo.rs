//! Survivor diagnostics from `/proc`: who is still alive, in which state, and
//! why a signal may not have taken effect yet.
//!
//! Owns no state and never signals or waits: it only reads `/proc`, for
//! [`Init::escalate`](crate::Init::escalate)'s survivors, the `kill` tool's
//! detail and the shutdown report.
//!
//! The `stat` line is parsed by `procfs` (which splits after the *last* `)`,
//! so a `comm` containing `)` or spaces cannot shift the fields). Reading
//! `/proc` is best effort: a process that vanishes while being read is simply
//! not a survivor any more, and an unreadable `/proc` gives no survivors
//! rather than an error.

use std::fmt;

use procfs::process::Stat;

/// One process that outlived a signal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Survivor {
    /// Its pid.
    pub pid: i32,
    /// Its command name (`/proc/<pid>/comm`, as in `stat`).
    pub comm: String,
    /// The one-letter state from `stat` (`R`, `S`, `D`, `Z`, `T`, …).
    pub state: char,
    /// The kernel function it sleeps in, where readable and not `0`.
    pub wchan: Option<String>,
    /// Its parent pid.
    pub ppid: i32,
    /// For a zombie whose parent is alive and is not this process: that
    /// parent, which is the one that has to reap it.
    pub zombie_parent: Option<i32>,
}

impl Survivor {
    /// Builds a survivor from a parsed `stat` and an optional `wchan`.
    /// `self_pid` is this process's pid; `parent_alive` says whether the
    /// parent still exists.
    pub(crate) fn from_stat(
        stat: &Stat,
        wchan: Option<String>,
        self_pid: i32,
        parent_alive: bool,
    ) -> Survivor {
        let zombie_parent =
            (stat.state == 'Z' && stat.ppid != self_pid && stat.ppid > 0 && parent_alive)
                .then_some(stat.ppid);
        Survivor {
            pid: stat.pid,
            comm: stat.comm.clone(),
            state: stat.state,
            wchan: wchan.filter(|w| !w.is_empty() && w != "0"),
            ppid: stat.ppid,
            zombie_parent,
        }
    }

    /// Parses the text of a `/proc/<pid>/stat` file.
    #[cfg(test)]
    fn parse_stat(text: &str) -> Option<Stat> {
        procfs::FromRead::from_read(text.as_bytes()).ok()
    }

    /// Whether this process is in uninterruptible sleep.
    pub fn is_uninterruptible(&self) -> bool {
        self.state == 'D'
    }

    fn state_text(&self) -> &'static str {
        match self.state {
            'R' => "running",
            'S' => "sleeping",
            'D' => {
                "uninterruptible sleep (D state): SIGKILL takes effect only when it returns from the kernel"
            }
            'Z' => "zombie",
            'T' => "stopped",
            't' => "stopped by a tracer",
            'X' | 'x' => "dead",
            'I' => "idle",
            'P' => "parked",
            'W' => "waking",
            'K' => "wakekill",
            _ => "unknown state",
        }
    }
}

impl fmt::Display for Survivor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "pid {} ({}) state {}: {}",
            self.pid,
            self.comm,
            self.state,
            self.state_text()
        )?;
        if let Some(w) = &self.wchan {
            write!(f, ", wchan {w}")?;
        }
        if let Some(p) = self.zombie_parent {
            write!(f, ", not yet reaped by its parent pid {p}")?;
        }
        Ok(())
    }
}

/// Every process whose process group is `pgid`.
pub fn group_members(pgid: i32) -> Vec<Survivor> {
    scan(|stat| stat.pgrp == pgid)
}

/// The process groups of session `sid` other than its own (group `sid`):
/// the groups a job-control shell on a terminal job's terminal puts its
/// jobs in. From one scan of /proc, in pgid order.
pub fn session_groups(sid: i32) -> Vec<i32> {
    sessions_groups(&[sid])
}

/// [`session_groups`] of every session in `sids` at once, from one scan of
/// /proc, in pgid order: shutdown asks for all its terminal jobs' sessions
/// together, since one scan per job is quadratic in the process count
/// (10,000 terminal jobs, each with a shell, kept it busy for minutes).
pub fn sessions_groups(sids: &[i32]) -> Vec<i32> {
    if sids.is_empty() {
        return Vec::new();
    }
    let Ok(all) = procfs::process::all_processes() else {
        return Vec::new();
    };
    let sids: std::collections::HashSet<i32> = sids.iter().copied().collect();
    let mut groups: Vec<i32> = all
        .flatten()
        .filter_map(|p| p.stat().ok())
        .filter(|s| s.pgrp != s.session && sids.contains(&s.session))
        .map(|s| s.pgrp)
        .collect();
    groups.sort_unstable();
    groups.dedup();
    groups
}

/// Every process except this one (used as PID 1, where that is everything
/// left in the namespace).
pub fn everyone_else() -> Vec<Survivor> {
    let me = rustix::process::getpid().as_raw_nonzero().get();
    scan(|stat| stat.pid != me)
}

fn scan(keep: impl Fn(&Stat) -> bool) -> Vec<Survivor> {
    let me = rustix::process::getpid().as_raw_nonzero().get();
    let Ok(all) = procfs::process::all_processes() else {
        return Vec::new();
    };
    let mut out: Vec<Survivor> = all
        .flatten()
        .filter_map(|p| {
            let stat = p.stat().ok()?;
            if !keep(&stat) {
                return None;
            }
            let wchan = p.wchan().ok();
            let parent_alive =
                stat.ppid > 0 && std::path::Path::new(&format!("/proc/{}", stat.ppid)).exists();
            Some(Survivor::from_stat(&stat, wchan, me, parent_alive))
        })
        .collect();
    out.sort_by_key(|s| s.pid);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real stat line (kernel 6.x, 52 fields) with the state and comm edited.
    fn stat_line(pid: i32, comm: &str, state: char, ppid: i32) -> String {
        format!(
            "{pid} ({comm}) {state} {ppid} {pid} {pid} 0 -1 4194560 106 0 0 0 0 0 0 0 20 0 1 0 \
             2754123 2457600 211 18446744073709551615 94195434192896 94195434213001 \
             140726474738112 0 0 0 0 0 0 1 0 0 17 1 0 0 0 0 0 94195434228688 94195434230304 \
             94195461124096 140726474741606 140726474741626 140726474741626 140726474747885 0"
        )
    }

    #[test]
    fn a_d_state_survivor_is_named_as_uninterruptible_sleep() {
        let stat = Survivor::parse_stat(&stat_line(4242, "fuse worker", 'D', 1)).expect("parses");
        let s = Survivor::from_stat(&stat, Some("request_wait_answer".into()), 1, true);
        assert!(s.is_uninterruptible());
        let text = s.to_string();
        assert!(text.contains("pid 4242 (fuse worker)"), "{text}");
        assert!(
            text.contains("uninterruptible sleep (D state): SIGKILL takes effect only when it returns from the kernel"),
            "{text}"
        );
        assert!(text.contains("wchan request_wait_answer"), "{text}");
    }

    #[test]
    fn a_comm_with_parentheses_and_spaces_does_not_shift_the_fields() {
        let stat = Survivor::parse_stat(&stat_line(77, "a) S 1 (b", 'T', 5)).expect("parses");
        assert_eq!(stat.comm, "a) S 1 (b");
        assert_eq!(stat.state, 'T');
        assert_eq!(stat.ppid, 5);
    }

    #[test]
    fn a_zombie_names_its_living_parent_unless_that_is_us() {
        let stat = Survivor::parse_stat(&stat_line(9, "sh", 'Z', 8)).expect("parses");
        let foreign = Survivor::from_stat(&stat, None, 1, true);
        assert_eq!(foreign.zombie_parent, Some(8));
        assert!(foreign.to_string().contains("parent pid 8"), "{foreign}");
        let ours = Survivor::from_stat(&stat, None, 8, true);
        assert_eq!(ours.zombie_parent, None);
    }

    #[test]
    fn a_wchan_of_zero_is_not_reported() {
        let stat = Survivor::parse_stat(&stat_line(9, "sleep", 'S', 1)).expect("parses");
        assert_eq!(
            Survivor::from_stat(&stat, Some("0".into()), 1, true).wchan,
            None
        );
    }
}
