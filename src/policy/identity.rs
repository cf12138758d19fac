//! Who a job runs as and what it may use (docs/security.md): the `user` and `limits`
//! inputs of `execute` (and `POST /exec`) checked against the server's
//! settings, and turned into the [`init::Setup`] the job's child applies to
//! itself before it executes the command.
//!
//! [`JobPolicy`] is built once at start-up from `MCP_EXEC_JOB_LIMITS` (a
//! security setting: an invalid value stops the server, exit 2) and from
//! what the server is (root or not, an HTTP listener without a token or
//! not); it holds no mutable state.
//!
//! - `limits`: each value is a whole number ≥ 1; an unknown name is refused
//!   (silently ignoring `"memory"` would leave a job unlimited that its
//!   caller believes limited). `MCP_EXEC_JOB_LIMITS` gives the defaults,
//!   which are also maxima: a call may lower a default, never raise it, and
//!   a resource without a default is the caller's to set.
//! - CPU time gets a soft limit of `cpu_seconds` (SIGXCPU) and a hard one
//!   second above (SIGKILL for a job that ignores SIGXCPU), so the usual end
//!   is a signal that names its cause; every other limit is soft = hard (a
//!   job cannot raise it again).
//! - `user`: `"name"` (its uid, primary gid and supplementary groups from
//!   `/etc/passwd` and `/etc/group`), `"uid"` (gid = uid, no supplementary
//!   groups: numbers are taken as given, no file is consulted) or
//!   `"uid:gid"`. Only a root server can switch users; and while an HTTP
//!   listener runs without a token, a job of another user could drive the
//!   root server over loopback, so `user` is refused then.

use serde_json::Value;

/// The resource limits a job asks for or the server allows. `None`: not set.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JobLimits {
    /// `RLIMIT_AS`, bytes.
    pub address_space_bytes: Option<u64>,
    /// `RLIMIT_NPROC`, processes of the job's user.
    pub processes: Option<u64>,
    /// `RLIMIT_CPU`, seconds.
    pub cpu_seconds: Option<u64>,
    /// `RLIMIT_FSIZE`, bytes.
    pub file_size_bytes: Option<u64>,
    /// `RLIMIT_NOFILE`, descriptors.
    pub open_files: Option<u64>,
}

/// The names of the limits, in the wire's order.
const NAMES: [&str; 5] = [
    "address_space_bytes",
    "processes",
    "cpu_seconds",
    "file_size_bytes",
    "open_files",
];

impl JobLimits {
    fn slot(&mut self, name: &str) -> Option<&mut Option<u64>> {
        Some(match name {
            "address_space_bytes" => &mut self.address_space_bytes,
            "processes" => &mut self.processes,
            "cpu_seconds" => &mut self.cpu_seconds,
            "file_size_bytes" => &mut self.file_size_bytes,
            "open_files" => &mut self.open_files,
            _ => return None,
        })
    }

    fn get(&self, name: &str) -> Option<u64> {
        let mut copy = *self;
        copy.slot(name).and_then(|s| *s)
    }

    /// Parses `{"cpu_seconds": 10, …}`: an object of whole numbers ≥ 1
    /// (`null` leaves one unset); `what` names it in errors.
    pub fn from_json(value: &Value, what: &str) -> Result<JobLimits, String> {
        let Value::Object(map) = value else {
            return Err(format!("{what} must be an object of limits"));
        };
        let mut limits = JobLimits::default();
        for (name, v) in map {
            let Some(slot) = limits.slot(name) else {
                return Err(format!(
                    "{what} has an unknown limit {name:?} (known: {})",
                    NAMES.join(", ")
                ));
            };
            match v {
                Value::Null => {}
                v => match v.as_u64().or_else(|| whole_float(v)) {
                    Some(n) if n >= 1 => *slot = Some(n),
                    _ => {
                        return Err(format!(
                            "{what}.{name} must be a whole number >= 1 (got {v})"
                        ));
                    }
                },
            }
        }
        Ok(limits)
    }

    /// `MCP_EXEC_JOB_LIMITS` (unset or empty: no defaults, no maxima).
    pub fn from_setting(raw: Option<&str>) -> Result<JobLimits, String> {
        let Some(raw) = raw.filter(|r| !r.trim().is_empty()) else {
            return Ok(JobLimits::default());
        };
        let value: Value = serde_json::from_str(raw)
            .map_err(|e| format!("MCP_EXEC_JOB_LIMITS is not valid JSON ({e}): {raw:?}"))?;
        JobLimits::from_json(&value, "MCP_EXEC_JOB_LIMITS")
    }

    /// The limits a job gets: what it asked for, each at most the server's
    /// maximum, and the server's default where it asked for nothing.
    pub fn within(&self, max: &JobLimits) -> Result<JobLimits, String> {
        let mut out = *max;
        for name in NAMES {
            let Some(asked) = self.get(name) else {
                continue;
            };
            if let Some(m) = max.get(name)
                && asked > m
            {
                return Err(format!(
                    "\"limits.{name}\" is {asked}, above the server's maximum {m} (MCP_EXEC_JOB_LIMITS)"
                ));
            }
            if let Some(slot) = out.slot(name) {
                *slot = Some(asked);
            }
        }
        Ok(out)
    }

    /// The kernel limits to apply (see the module doc for CPU time).
    pub fn to_init(self) -> Vec<init::Limit> {
        use init::Resource;
        let same = |resource, v: u64| init::Limit {
            resource,
            soft: v,
            hard: v,
        };
        let mut out = Vec::new();
        if let Some(v) = self.address_space_bytes {
            out.push(same(Resource::AddressSpace, v));
        }
        if let Some(v) = self.processes {
            out.push(same(Resource::Processes, v));
        }
        if let Some(v) = self.cpu_seconds {
            out.push(init::Limit {
                resource: Resource::CpuSeconds,
                soft: v,
                hard: v.saturating_add(1),
            });
        }
        if let Some(v) = self.file_size_bytes {
            out.push(same(Resource::FileSize, v));
        }
        if let Some(v) = self.open_files {
            out.push(same(Resource::OpenFiles, v));
        }
        out
    }
}

/// `10.0` as 10 (some clients send every number as a float).
fn whole_float(v: &Value) -> Option<u64> {
    let f = v.as_f64()?;
    (f.fract() == 0.0 && (0.0..1.8e19).contains(&f)).then_some(f as u64)
}

/// What the server allows jobs to ask for.
#[derive(Debug, Clone, Default)]
pub struct JobPolicy {
    /// `MCP_EXEC_JOB_LIMITS`: defaults and maxima.
    pub limits: JobLimits,
    /// Why `user` is refused on this server, if it is.
    pub user_refused: Option<String>,
}

impl JobPolicy {
    /// The policy of a server started as `euid`, with `http_without_token`
    /// when an HTTP listener runs with no token, and `limits` from
    /// `MCP_EXEC_JOB_LIMITS`.
    pub fn new(
        limits: Option<&str>,
        euid: u32,
        http_without_token: bool,
    ) -> Result<JobPolicy, String> {
        let user_refused = if euid != 0 {
            Some(format!(
                "\"user\" needs the server to run as root (it runs as uid {euid})"
            ))
        } else if http_without_token {
            Some(
                "\"user\" is refused while an HTTP listener runs without a token \
                 (a job could drive the root server over loopback)"
                    .to_owned(),
            )
        } else {
            None
        };
        Ok(JobPolicy {
            limits: JobLimits::from_setting(limits)?,
            user_refused,
        })
    }

    /// The set-up of a job that asked for `user` (`None` when absent) and
    /// `asked` (its `limits`, read with [`JobLimits::from_json`]), reading
    /// the user database from the system.
    pub fn setup(&self, user: Option<&str>, asked: &JobLimits) -> Result<init::Setup, String> {
        let limits = asked.within(&self.limits)?;
        let user = match user {
            None => None,
            Some(spec) => {
                if let Some(why) = &self.user_refused {
                    return Err(why.clone());
                }
                let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
                Some(resolve_user(
                    spec,
                    &read("/etc/passwd"),
                    &read("/etc/group"),
                )?)
            }
        };
        Ok(init::Setup {
            user,
            limits: limits.to_init(),
            oom_score_adj: None,
        })
    }
}

/// Resolves `"name"`, `"uid"` or `"uid:gid"` against the text of
/// `/etc/passwd` and `/etc/group`.
pub fn resolve_user(spec: &str, passwd: &str, group: &str) -> Result<init::Credentials, String> {
    let id = |s: &str| s.parse::<u32>().ok().filter(|&n| n != u32::MAX);
    if spec.is_empty() {
        return Err("\"user\" must not be empty".into());
    }
    if let Some((uid, gid)) = spec.split_once(':') {
        return match (id(uid), id(gid)) {
            (Some(uid), Some(gid)) => Ok(init::Credentials {
                uid,
                gid,
                groups: Vec::new(),
            }),
            _ => Err(format!("\"user\" {spec:?} is not a name, a uid or uid:gid")),
        };
    }
    if let Some(uid) = id(spec) {
        return Ok(init::Credentials {
            uid,
            gid: uid,
            groups: Vec::new(),
        });
    }
    let entry = passwd
        .lines()
        .map(|l| l.split(':').collect::<Vec<_>>())
        .find(|f| f.len() >= 4 && f[0] == spec);
    let Some(fields) = entry else {
        return Err(format!("unknown user {spec:?} (not in /etc/passwd)"));
    };
    let (Some(uid), Some(gid)) = (id(fields[2]), id(fields[3])) else {
        return Err(format!("user {spec:?} has a malformed /etc/passwd entry"));
    };
    let mut groups = vec![gid];
    for line in group.lines() {
        let f: Vec<&str> = line.split(':').collect();
        if f.len() >= 4
            && f[3].split(',').any(|member| member.trim() == spec)
            && let Some(g) = id(f[2])
            && !groups.contains(&g)
        {
            groups.push(g);
        }
    }
    Ok(init::Credentials { uid, gid, groups })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const PASSWD: &str =
        "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n";
    const GROUP: &str = "root:x:0:\nusers:x:100:nobody,alice\nnogroup:x:65534:\nstaff:x:50:bob\n";

    #[test]
    fn a_user_by_name_gets_its_primary_and_supplementary_groups() {
        let c = resolve_user("nobody", PASSWD, GROUP).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((c.uid, c.gid), (65534, 65534));
        assert_eq!(c.groups, vec![65534, 100]);
    }

    #[test]
    fn a_numeric_user_is_taken_as_given_without_groups() {
        let c = resolve_user("1000", PASSWD, GROUP).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((c.uid, c.gid, c.groups.len()), (1000, 1000, 0));
        let c = resolve_user("1000:50", PASSWD, GROUP).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((c.uid, c.gid), (1000, 50));
    }

    #[test]
    fn an_unknown_or_malformed_user_is_refused_with_its_name() {
        let e = resolve_user("bob", PASSWD, GROUP).unwrap_err();
        assert_eq!(e, "unknown user \"bob\" (not in /etc/passwd)");
        assert!(resolve_user("1:x", PASSWD, GROUP).is_err());
        assert!(resolve_user("", PASSWD, GROUP).is_err());
    }

    #[test]
    fn limits_above_the_servers_maxima_are_refused_and_defaults_fill_in() {
        let max = JobLimits::from_setting(Some(r#"{"cpu_seconds":10,"open_files":64}"#))
            .unwrap_or_else(|e| panic!("{e}"));
        let asked = JobLimits::from_json(&json!({"cpu_seconds": 5, "processes": 20}), "limits")
            .unwrap_or_else(|e| panic!("{e}"));
        let got = asked.within(&max).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(got.cpu_seconds, Some(5));
        assert_eq!(got.processes, Some(20));
        assert_eq!(got.open_files, Some(64));
        let too_much = JobLimits::from_json(&json!({"cpu_seconds": 11}), "limits")
            .unwrap_or_else(|e| panic!("{e}"));
        let e = too_much.within(&max).unwrap_err();
        assert!(e.contains("above the server's maximum 10"), "{e}");
    }

    #[test]
    fn invalid_limits_name_what_is_wrong() {
        for (bad, needle) in [
            (json!({"memory": 1}), "unknown limit \"memory\""),
            (json!({"cpu_seconds": 0}), "whole number"),
            (json!({"cpu_seconds": -1}), "whole number"),
            (json!({"cpu_seconds": "5"}), "whole number"),
            (json!([1]), "object"),
        ] {
            let e = JobLimits::from_json(&bad, "limits").unwrap_err();
            assert!(e.contains(needle), "{bad}: {e}");
        }
        assert!(
            JobLimits::from_setting(Some("{nope"))
                .unwrap_err()
                .starts_with("MCP_EXEC_JOB_LIMITS")
        );
        assert_eq!(JobLimits::from_setting(Some("")), Ok(JobLimits::default()));
    }

    #[test]
    fn cpu_time_gets_a_hard_limit_one_second_above_the_soft_one() {
        let l = JobLimits {
            cpu_seconds: Some(3),
            ..JobLimits::default()
        };
        let init = l.to_init();
        assert_eq!((init[0].soft, init[0].hard), (3, 4));
    }

    #[test]
    fn user_is_refused_when_not_root_or_behind_a_token_less_listener() {
        let p = JobPolicy::new(None, 1000, false).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            p.setup(Some("nobody"), &JobLimits::default())
                .unwrap_err()
                .contains("root")
        );
        let p = JobPolicy::new(None, 0, true).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            p.setup(Some("nobody"), &JobLimits::default())
                .unwrap_err()
                .contains("token")
        );
    }
}
