//! Fuzz target `redaction`: see `mcp_exec::fuzzing::redaction` and FUZZING.md.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mcp_exec::fuzzing::redaction(data));
