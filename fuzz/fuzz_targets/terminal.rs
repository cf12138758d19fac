//! Fuzz target `terminal`: see `mcp_exec::fuzzing::terminal` and FUZZING.md.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mcp_exec::fuzzing::terminal(data));
