//! What the sandboxd listeners start with, checked once at start-up: the
//! sandbox root both of them work in ([`SandboxRoot`]) and the gRPC
//! listener's settings ([`SandboxdGrpc`]; REST's are
//! [`super::rest::SandboxdRest`], built on the same root).
//!
//! # The root
//! `--sandboxd-root DIR` (`MCP_EXEC_SANDBOXD_ROOT`, default `/workspace`)
//! is where sandboxd's paths live: REST's `{path}` is relative to it, and a
//! gRPC `Execute`/`Start` runs in it when its `cwd` is unset, or in the
//! root joined with a relative `cwd` (the SDK's `commands.run("pwd",
//! cwd="sub")`). With either listener set the root must be an absolute
//! path to an existing directory that the working-directory policy allows,
//! or the server does not start (exit 2, naming the setting): a sandbox
//! whose every command would fail to start is a configuration mistake to
//! say at once, not per call.
//!
//! # What it is not
//! Not a second policy for jobs: the `cwd` a gRPC job gets is a path like
//! any other `execute` `cwd`, and the working-directory policy alone
//! decides where it may start (a `../..` that leaves the root is allowed
//! exactly when the policy allows where it leads). The root's check here
//! is a start-up check; the policy checks every job again when it starts.

use std::path::{Path, PathBuf};

use crate::config::Config;
use crate::policy::cwd::{CwdPolicy, DirRefusal};
use crate::server::transport::platform::PlatformAuth;

/// The setting, as every message names it.
const NAME: &str = "MCP_EXEC_SANDBOXD_ROOT (--sandboxd-root)";

/// `--sandboxd-root`, checked at start-up.
#[derive(Debug, Clone)]
pub struct SandboxRoot {
    /// As configured (absolute).
    configured: String,
    /// Its realpath at start-up.
    real: PathBuf,
}

impl SandboxRoot {
    /// The root of `c`, which must be an absolute path to a directory that
    /// `main_policy` allows; an `Err` names the setting (and says when the
    /// root is the default), and `main` exits 2.
    pub fn from_config(c: &Config, main_policy: &CwdPolicy) -> Result<SandboxRoot, String> {
        let configured = c.sandboxd_root.clone();
        let root = Path::new(&configured);
        let default = if configured == Config::default().sandboxd_root {
            " (the default; set it to the sandbox's directory)"
        } else {
            ""
        };
        if !root.is_absolute() {
            return Err(format!("{NAME}: {root:?} is not an absolute path"));
        }
        let real = std::fs::canonicalize(root)
            .map_err(|e| format!("{NAME}: {root:?}: {}{default}", init::errno_text(&e)))?;
        match main_policy.open_file_dir(&real) {
            Ok(_) => {}
            Err(DirRefusal::Outside) => {
                return Err(format!(
                    "{NAME}: {}",
                    main_policy.outside_text("the sandbox root", root)
                ));
            }
            Err(DirRefusal::Errno(e)) => {
                return Err(format!(
                    "{NAME}: {root:?}: {}{default}",
                    init::errno_text(&std::io::Error::from(e))
                ));
            }
        }
        Ok(SandboxRoot { configured, real })
    }

    /// The root as configured.
    pub fn configured(&self) -> &Path {
        Path::new(&self.configured)
    }

    /// Its realpath at start-up.
    pub fn real(&self) -> &Path {
        &self.real
    }

    /// The `cwd` a gRPC job asked for as `asked` gets: the root when unset
    /// or empty, the root joined with it when relative, itself when
    /// absolute. The working-directory policy then decides on it.
    #[cfg_attr(
        all(not(feature = "sandboxd"), not(test)),
        expect(dead_code, reason = "only the gRPC front-end starts jobs here")
    )]
    pub fn job_cwd(&self, asked: Option<&str>) -> String {
        match asked.filter(|c| !c.is_empty()) {
            None => self.configured.clone(),
            Some(c) if Path::new(c).is_absolute() => c.to_owned(),
            Some(c) => format!("{}/{c}", self.configured.trim_end_matches('/')),
        }
    }
}

/// `--sandboxd-grpc`'s settings: the listener's auth and the root its jobs
/// start in.
#[derive(Debug)]
#[cfg_attr(
    not(feature = "sandboxd"),
    expect(dead_code, reason = "without the feature `--sandboxd-grpc` is refused")
)]
pub struct SandboxdGrpc {
    /// The platform listeners' auth rule for its address.
    pub auth: PlatformAuth,
    /// Where a job without a `cwd` starts, and what a relative one is
    /// relative to.
    pub root: SandboxRoot,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root(configured: &str) -> SandboxRoot {
        SandboxRoot {
            configured: configured.into(),
            real: PathBuf::from(configured),
        }
    }

    fn config(root: &str) -> Config {
        Config {
            sandboxd_root: root.into(),
            ..Config::default()
        }
    }

    fn anywhere() -> CwdPolicy {
        CwdPolicy::from_settings(None, None).unwrap()
    }

    #[test]
    fn a_job_without_a_cwd_or_with_an_empty_one_starts_in_the_root() {
        let r = root("/srv/sandbox");
        assert_eq!(r.job_cwd(None), "/srv/sandbox");
        assert_eq!(r.job_cwd(Some("")), "/srv/sandbox");
    }

    #[test]
    fn a_relative_cwd_is_joined_to_the_root_and_an_absolute_one_kept() {
        let r = root("/srv/sandbox/");
        assert_eq!(r.job_cwd(Some("sub")), "/srv/sandbox/sub");
        assert_eq!(r.job_cwd(Some("./a/../b")), "/srv/sandbox/./a/../b");
        assert_eq!(r.job_cwd(Some("/tmp")), "/tmp");
    }

    #[test]
    fn a_missing_root_is_an_error_naming_the_setting_and_the_default_says_so() {
        let e = SandboxRoot::from_config(&config("/nonexistent/mcp-exec-root"), &anywhere())
            .unwrap_err();
        assert!(e.starts_with(NAME), "{e}");
        assert!(e.contains("no such file or directory"), "{e}");
        assert!(!e.contains("the default"), "{e}");
        let default = Config::default().sandboxd_root;
        if !Path::new(&default).exists() {
            let e = SandboxRoot::from_config(&Config::default(), &anywhere()).unwrap_err();
            assert!(e.contains("the default"), "{e}");
        }
    }

    #[test]
    fn a_relative_root_or_a_file_is_refused() {
        let e = SandboxRoot::from_config(&config("ws"), &anywhere()).unwrap_err();
        assert!(e.contains("not an absolute path"), "{e}");
        let e = SandboxRoot::from_config(&config("/proc/self/status"), &anywhere()).unwrap_err();
        assert!(e.starts_with(NAME) && e.contains("not a directory"), "{e}");
    }

    #[test]
    fn a_root_outside_the_cwd_policy_is_refused_and_one_inside_is_taken() {
        let tmp = std::env::temp_dir();
        let tmp_text = tmp.to_string_lossy().into_owned();
        let policy = CwdPolicy::from_settings(Some(&tmp_text), Some(&tmp_text)).unwrap();
        let e = SandboxRoot::from_config(&config("/etc"), &policy).unwrap_err();
        assert!(e.starts_with(NAME) && e.contains("outside"), "{e}");
        let r = SandboxRoot::from_config(&config(&tmp_text), &policy).unwrap();
        assert_eq!(r.configured(), tmp);
        assert_eq!(r.real(), std::fs::canonicalize(&tmp).unwrap());
    }
}
