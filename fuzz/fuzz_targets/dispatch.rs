//! Fuzz target `dispatch`: see `mcp_exec::fuzzing::dispatch` and FUZZING.md.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mcp_exec::fuzzing::dispatch(data));
