//! Fuzz target `http_checks`: see `mcp_exec::fuzzing::http_checks` and FUZZING.md.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mcp_exec::fuzzing::http_checks(data));
