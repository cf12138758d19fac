//! Generates the sandboxd `process.v1` messages (SPEC §21) from the vendored
//! proto/agent-sandbox/process/v1/process.proto: protox (a pure-Rust
//! protobuf compiler, so no `protoc` is needed) parses it, prost-build
//! writes the message types to `$OUT_DIR/process.v1.rs`, which
//! src/server/transport/sandboxd/wire.rs includes. Services are not
//! generated: the RPCs are served by hand on hyper's HTTP/2. Only with the
//! `sandboxd` feature (default on).
//!
//! It also links release builds of the binary without unwind tables
//! (`unwind_tables` below).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    unwind_tables();
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
