//! The per-job set-up path of issue 14: what `user` and `limits` cost a job's
//! start, and that the path without them did not get slower.
//!
//! Every job starts through the same `clone(CLONE_VM | CLONE_VFORK)` child;
//! a job with `user` and `limits` has the server look the user up in
//! `/etc/passwd` and `/etc/group` and its child make a few more system calls
//! (`prlimit64` × 5, `setgroups`, `setresgid`, `setresuid`) before `execve`.
//! One server, batches interleaved (direct, set-up, direct, …) so that a
//! change of load hits both alike; with `--compare PATH` (the binary of
//! `main`) a second server's direct `execute` is interleaved too, in the
//! same rounds, as the baseline of "not slower than before".

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::Error;
use crate::client::Server;
use crate::scenarios::{CALL_TIMEOUT, expect_state};
use crate::stats::Samples;

/// What [`setup_rtt`] measured (ms, whole `execute` rtt).
#[derive(Debug, Default)]
pub struct SetupRtt {
    /// `execute {"command":"true"}`.
    pub direct: Samples,
    /// The same with `user` and all five `limits`.
    pub setup: Samples,
    /// `execute {"command":"true"}` on the compared binary, when given.
    pub compared: Samples,
}

/// The set-up arguments measured: a user by name and every limit.
fn setup_args() -> Value {
    json!({"command": "true", "user": "nobody",
           "limits": {"address_space_bytes": 1u64 << 32, "processes": 10_000,
                      "cpu_seconds": 3600, "file_size_bytes": 1u64 << 30,
                      "open_files": 1024}})
}

fn batch(server: &mut Server, args: &Value, n: usize, into: &mut Samples) -> Result<(), Error> {
    for _ in 0..n {
        let (took, result) = server.tool("execute", args.clone(), CALL_TIMEOUT)?;
        expect_state(&result, "success", "setup_rtt")?;
        into.push_ms(took);
    }
    Ok(())
}

/// `rounds` × (direct batch, set-up batch, compared batch, set-up batch,
/// direct batch). The server must run as root (`user` needs it).
pub fn setup_rtt(
    binary: &Path,
    compare: Option<&Path>,
    protocol: &str,
    rounds: usize,
    size: usize,
) -> Result<SetupRtt, Error> {
    let mut server = Server::spawn(binary)?;
    server.initialize(protocol, Duration::from_secs(30))?;
    let mut other = match compare {
        Some(path) => {
            let mut s = Server::spawn(path)?;
            s.initialize(protocol, Duration::from_secs(30))?;
            Some(s)
        }
        None => None,
    };
    let direct = json!({"command": "true"});
    let setup = setup_args();
    let mut out = SetupRtt::default();
    for _ in 0..rounds {
        batch(&mut server, &direct, size, &mut out.direct)?;
        batch(&mut server, &setup, size, &mut out.setup)?;
        if let Some(o) = other.as_mut() {
            batch(o, &direct, size, &mut out.compared)?;
        }
        batch(&mut server, &setup, size, &mut out.setup)?;
        batch(&mut server, &direct, size, &mut out.direct)?;
    }
    server.shutdown(Duration::from_secs(10))?;
    if let Some(o) = other {
        o.shutdown(Duration::from_secs(10))?;
    }
    Ok(out)
}
