//! Fuzz target `files_path`: see `mcp_exec::fuzzing::files_path` and FUZZING.md.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mcp_exec::fuzzing::files_path(data));
