//! Fuzz target `capture`: see `mcp_exec::fuzzing::capture` and FUZZING.md.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mcp_exec::fuzzing::capture(data));
