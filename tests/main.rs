//! Integration tests of the mcp-exec binary (being written).
