//! Fuzz target `utf8`: see `mcp_exec::fuzzing::utf8` and FUZZING.md.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mcp_exec::fuzzing::utf8(data));
