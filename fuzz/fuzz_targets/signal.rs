//! Fuzz target `signal`: see `mcp_exec::fuzzing::signal` and FUZZING.md.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mcp_exec::fuzzing::signal(data));
