//! Fuzz target `line_framing`: see `mcp_exec::fuzzing::line_framing` and FUZZING.md.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mcp_exec::fuzzing::line_framing(data));
