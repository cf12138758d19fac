//! Generates the sandboxd `process.v1` messages (SPEC §21) from the vendored
//! proto/agent-sandbox/process/v1/process.proto: protox (a pure-Rust
//! protobuf compiler, so no `protoc` is needed) parses it, prost-build
//! writes the message types to `$OUT_DIR/process.v1.rs`, which
//! src/server/transport/sandboxd/wire.rs includes. Services are not
//! generated: the RPCs are served by hand on hyper's HTTP/2. Only with the
//! `sandboxd` feature (default on).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    #[cfg(feature = "sandboxd")]
    {
        let proto = "proto/agent-sandbox/process/v1/process.proto";
        println!("cargo:rerun-if-changed={proto}");
        let files = protox::compile([proto], ["proto/agent-sandbox"])?;
        prost_build::Config::new().compile_fds(files)?;
    }
    Ok(())
}
