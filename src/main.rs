//! The `mcp-exec` binary. Everything, the module tree included, lives in the
//! library (`src/lib.rs`), so that the fuzz targets can link the same code.

fn main() {
    mcp_exec::main();
}
