//! Generates the sandboxd `process.v1` messages (docs/sandboxd.md) from the vendored
//! proto/agent-sandbox/process/v1/process.proto: protox (a pure-Rust
//! protobuf compiler, so no `protoc` is needed) parses it, prost-build
//! writes the message types to `$OUT_DIR/process.v1.rs`, which
//! src/server/transport/sandboxd/wire.rs includes. Services are not
//! generated: the RPCs are served by hand on hyper's HTTP/2. Only with the
//! `sandboxd` feature (default on).
//!
//! It also links release builds of the binary without unwind tables
//! (`unwind_tables` below), and names the commit they are built from for
//! `--version` (`commit` below).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    unwind_tables();
    commit();
    #[cfg(feature = "sandboxd")]
    {
        let proto = "proto/agent-sandbox/process/v1/process.proto";
        println!("cargo:rerun-if-changed={proto}");
        let files = protox::compile([proto], ["proto/agent-sandbox"])?;
        prost_build::Config::new().compile_fds(files)?;
    }
    Ok(())
}

/// Release builds of the binary are linked with link/no-unwind-tables.ld, which discards
/// `.eh_frame` and `.eh_frame_hdr`: with `panic = "abort"` (profile.release) nothing unwinds,
/// and they were 534,260 B of the 5,698,064 B static binary (Rust's default unwind tables for
/// backtraces, which a stripped binary could not symbolise anyway, plus std's and glibc's).
/// What is lost: a panic still prints its message and aborts, without a backtrace, and
/// `perf --call-graph dwarf` cannot walk the stack (`MCP_EXEC_KEEP_UNWIND_TABLES=1` at build
/// time keeps them, e.g. for profiling). Debug and test builds unwind and are untouched.
fn unwind_tables() {
    println!("cargo:rerun-if-changed=link/no-unwind-tables.ld");
    println!("cargo:rerun-if-env-changed=MCP_EXEC_KEEP_UNWIND_TABLES");
    let release = std::env::var("PROFILE").is_ok_and(|p| p == "release");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    let keep = std::env::var_os("MCP_EXEC_KEEP_UNWIND_TABLES").is_some_and(|v| v == "1");
    if release && linux && !keep {
        let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".to_owned());
        println!("cargo:rustc-link-arg-bin=mcp-exec=-Wl,-T,{dir}/link/no-unwind-tables.ld");
    }
}

/// `MCP_EXEC_COMMIT`, which `--version` prints: in a release build, the commit of the clone it
/// is built at (`git rev-parse HEAD`; changes not yet committed are not marked); `unknown`
/// outside a clone (a source tarball) or without git. A debug build says `debug build` and
/// never runs git, so committing does not rebuild it.
fn commit() {
    if std::env::var("PROFILE").is_ok_and(|p| p != "release") {
        println!("cargo:rustc-env=MCP_EXEC_COMMIT=debug build");
        return;
    }
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".to_owned());
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .arg("-C")
            .arg(&dir)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=MCP_EXEC_COMMIT={commit}");
    // Run again when HEAD moves: HEAD itself, the branch it names, the packed refs.
    if let Some(git_dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        let mut watched = vec!["HEAD".to_owned(), "packed-refs".to_owned()];
        if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
            watched.push(branch);
        }
        for name in watched {
            let path = std::path::Path::new(&git_dir).join(name);
            if path.exists() {
                println!("cargo:rerun-if-changed={}", path.display());
            }
        }
    }
}
