//! The epilogue of a shell-session job: the command line that
//! runs the caller's command and then writes the shell's final `pwd` and
//! `export -p` to [`STATE_FD`], between the markers [`super::state_parser`]
//! checks. Why the descriptor is closed for the command and how bash's
//! `EXIT` trap finds it again: the module doc of [`super`].

/// The descriptor number of the state pipe in a session job's shell.
pub const STATE_FD: i32 = 9;

/// The marker the epilogue writes first.
pub(super) const START: &[u8] = b"MCPX";
/// The marker the epilogue writes last.
pub(super) const END: &[u8] = b"MCPX-END\n";

/// `s` as one single-quoted shell word.
fn single_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        if c == '\'' {
            out.push_str("'\\''");
        } else {
            out.push(c);
        }
    }
    out.push('\'');
    out
}

/// The shell command line that runs `command` and then reports the shell's
/// state on [`STATE_FD`]. `server_fd` is the number of the server's read
/// end of the state pipe (bash's fallback, see the module doc).
pub fn wrap(command: &str, server_fd: i32) -> String {
    // Builtins only, each through `command` so a function of the same name
    // cannot replace it. Written once (`mcp_exec_done`): inline after the
    // command, else from the EXIT trap. `set +ex` so the user's `-x` does
    // not trace it and `-e` does not cut it short; expansions quoted, so a
    // user's `IFS` cannot split them. `[ -e /proc/self/fd/9 ]`
    // costs one `stat`, where probing with a redirection would cost an
    // `open` of /dev/null and four `dup`s per job.
    let report = format!(
        "mcp_exec_done=1; \
         [ -e /proc/self/fd/{fd} ] || {{ command exec {fd}>\"/proc/$PPID/fd/{server_fd}\"; }} 2>/dev/null; \
         {{ command printf 'MCPX\\0'; command pwd; command printf '\\0'; command export -p; command printf '\\0MCPX-END\\n'; }} >&{fd}",
        fd = STATE_FD
    );
    let trap =
        format!("if [ -z \"${{mcp_exec_done-}}\" ]; then {{ set +ex; }} 2>/dev/null; {report}; fi");
    format!(
        "trap {trap} 0\n{{ eval {cmd}\n}} {fd}>&-\n\
         {{ mcp_exec_rc=$?; set +ex; }} 2>/dev/null; if [ -z \"${{mcp_exec_done-}}\" ]; then {report}; fi\n\
         exit \"$mcp_exec_rc\"\n",
        trap = single_quote(&trap),
        cmd = single_quote(command),
        fd = STATE_FD,
    )
}
