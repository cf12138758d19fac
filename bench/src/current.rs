//! The "Current figures" block of BENCHMARKS.md, generated from a run's JSON.
//!
//! `--write-current BENCHMARKS.md --from RESULT.json` rewrites only the text
//! between [`BEGIN`] and [`END`]; everything outside the markers stays byte
//! for byte, so the chronological notes under "History" are never touched.
//! The block is a function of the JSON alone (no clock, no git), so the same
//! result file always gives the same block, and it is stamped with the
//! commit the run recorded (`commit` in the JSON's context, see
//! [`crate::commit_of`]).
//!
//! The rows are the headline figures of [`HEADLINE`], in that order, each
//! with the label the run gave it; a figure the run did not measure (`--only`,
//! or skipped) is left out rather than shown empty.

use serde_json::Value;

use crate::Error;
use crate::report::num;

/// The line that opens the generated block.
pub const BEGIN: &str = "<!-- current-figures:begin -->";
/// The line that closes it.
pub const END: &str = "<!-- current-figures:end -->";

/// The headline figures, by JSON key, in table order.
pub const HEADLINE: &[&str] = &[
    // Issue 26's figures first, in the order of its Deliver list.
    "frontends_stdio_net",
    "frontends_http",
    "frontends_http_2026",
    "frontends_post_exec",
    "frontends_sandboxd",
    "frontends_envd",
    "frontends_c",
    "http_concurrency",
    "startup",
    "throughput",
    "pty_throughput",
    "http_files_put",
    "http_files_get",
    "v1_files_put",
    "v1_files_get",
    "idle_jobs_rss_per_job",
    "idle_tasks",
    "http_sessions",
    "pty_memory",
    "keystroke_server",
    "keystroke_mcp",
    "private_memory_init",
    "private_memory_end",
    "peers_rtt_desktop_commander",
    "peers_rtt_mcp_shell_server",
    "peers_startup_desktop_commander",
    "peers_startup_mcp_shell_server",
    "peers_rss_desktop_commander",
    "peers_rss_mcp_shell_server",
    "peers_sdk_e2b",
    "peers_sdk_sandboxd",
    "rtt",
    "rtt_spawn_net",
    "http_rtt",
    "http_execute",
    "http_execute_sse",
    "idle_rss_init",
    "idle_rss_end",
    "size",
    "peak_rss",
    "burst_blocking",
    "burst",
    "tools_list",
    "era_discover",
    "era_tools_list",
    "era_rtt",
    "delivery",
    "kill",
    "session_rtt",
    "setup_rtt",
    "deadline_server",
    "queue",
    "redaction",
    "stdio_files_upload",
    "stdio_files_download",
    "idle_jobs_list",
    "tasks_live_kib",
    "screen_80x24",
    "screen_200x60",
    "screen_idle_rss_per_job",
    "watch_event_p99",
    "http_abuse",
    "soak_rss",
    "soak_fds",
];

/// The civil date (UTC) of a Unix time, `YYYY-MM-DD HH:MM UTC`.
pub fn utc(unix: u64) -> String {
    let days = (unix / 86_400) as i64;
    let secs = unix % 86_400;
    // Days since 1970-01-01 to a proleptic Gregorian date (H. Hinnant's
    // days_from_civil, inverted).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02} UTC",
        secs / 3600,
        secs % 3600 / 60
    )
}

fn float(v: &Value) -> Option<f64> {
    v.as_f64()
}

/// A value with its unit, or `—`.
fn with_unit(v: Option<f64>, unit: &str) -> String {
    match v {
        Some(v) if !v.is_nan() => format!("{} {unit}", num(v)),
        _ => "—".into(),
    }
}

/// The generated block (without the markers) for the run `doc`.
pub fn block(doc: &Value) -> Result<String, Error> {
    let Some(figures) = doc["figures"].as_object() else {
        return Err(Error("the result file has no \"figures\" object".into()));
    };
    let commit = doc["commit"].as_str().unwrap_or("unknown");
    let when = doc["unix_time"]
        .as_u64()
        .map_or("an unknown date".into(), utc);
    let mode = doc["mode"].as_str().unwrap_or("?");
    let machine = &doc["machine"];
    let load = |k: &str| float(&machine[k]).map_or("?".into(), |l| format!("{l:.2}"));
    let mut s = format!(
        "Measured at commit `{commit}` on {when}: {mode} run, {} CPUs, load average {} at start, \
         {} at end. The machine may be shared: compare each figure with its baseline, measured in \
         the same run. p50 is the median; for rates (/s) the p99 column is the slow 1st percentile.\n\n\
         | figure | p50 | p99 | baseline (p50) | ratio | target | met? |\n\
         |---|---:|---:|---:|---:|---|---|\n",
        machine["cpus"]
            .as_u64()
            .map_or("?".into(), |n| n.to_string()),
        load("loadavg_start"),
        load("loadavg_end"),
    );
    let mut rows = 0;
    for key in HEADLINE {
        let Some(f) = figures.get(*key) else {
            continue;
        };
        let median = float(&f["median"]);
        if median.is_none_or(f64::is_nan) {
            continue;
        }
        let unit = f["unit"].as_str().unwrap_or("");
        let base = &f["baseline"];
        let baseline = if base.is_object() {
            format!(
                "{} ({})",
                with_unit(float(&base["median"]), unit),
                base["what"].as_str().unwrap_or("?")
            )
        } else {
            "—".into()
        };
        let ratio = match (float(&f["ratio"]), float(&f["p99_ratio"])) {
            (Some(r), Some(p)) => format!("{}× (p99 {}×)", num(r), num(p)),
            (Some(r), None) => format!("{}×", num(r)),
            _ => "—".into(),
        };
        let met = match f["met"].as_bool() {
            Some(true) => "yes",
            Some(false) => "**no**",
            None => "—",
        };
        // A sub-row of the bench's own table (indented) says what it is
        // only under its parent row: name its figure.
        let raw = f["label"].as_str().unwrap_or(key);
        let label = if raw.starts_with(' ') {
            format!("{key}: {}", raw.trim())
        } else {
            raw.to_owned()
        };
        let label = match f["n"].as_u64() {
            Some(n) if f["p99"].is_number() => format!("{label} (n={n})"),
            _ => label,
        };
        s.push_str(&format!(
            "| {label} | {} | {} | {baseline} | {ratio} | {} | {met} |\n",
            with_unit(median, unit),
            with_unit(float(&f["p99"]), unit),
            f["target"].as_str().unwrap_or("—"),
        ));
        rows += 1;
    }
    if rows == 0 {
        return Err(Error(
            "the result file holds none of the headline figures".into(),
        ));
    }
    Ok(s)
}

/// `document` with the text between its [`BEGIN`] and [`END`] lines
/// replaced by `block`; everything else unchanged.
pub fn rewrite(document: &str, block: &str) -> Result<String, Error> {
    let missing = |m: &str| Error(format!("no line {m:?} in the document"));
    let begin = document.find(BEGIN).ok_or_else(|| missing(BEGIN))?;
    let inner = begin + BEGIN.len();
    let end = document[inner..]
        .find(END)
        .map(|i| inner + i)
        .ok_or_else(|| missing(END))?;
    if document[end + END.len()..].contains(BEGIN) || document[inner..end].contains(BEGIN) {
        return Err(Error(format!("{BEGIN:?} appears more than once")));
    }
    let block = block.trim_end_matches('\n');
    Ok(format!(
        "{}\n{block}\n{}",
        &document[..inner],
        &document[end..]
    ))
}

/// Rewrites the block of the file `markdown` from the result file `json`.
pub fn write(markdown: &std::path::Path, json: &std::path::Path) -> Result<(), Error> {
    let read = |p: &std::path::Path| {
        std::fs::read_to_string(p).map_err(|e| Error(format!("reading {}: {e}", p.display())))
    };
    let doc: Value = serde_json::from_str(&read(json)?)?;
    let text = rewrite(&read(markdown)?, &block(&doc)?)?;
    std::fs::write(markdown, text)
        .map_err(|e| Error(format!("writing {}: {e}", markdown.display())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn result() -> Value {
        json!({
            "mode": "full",
            "commit": "b0b542a",
            "unix_time": 1_796_119_200u64,
            "machine": {"cpus": 2, "loadavg_start": 3.5, "loadavg_end": 4.25},
            "figures": {
                "rtt": {"label": "rtt: blocking execute of `true`", "unit": "ms", "n": 500,
                        "median": 1.25, "p90": 1.5, "p99": 2.5,
                        "baseline": {"what": "spawn+wait", "median": 1.0, "p99": 2.0, "n": 500},
                        "ratio": 1.25, "p99_ratio": 2.5, "target": "median ≤ 1.3×", "met": true},
                "size": {"label": "size, stripped static binary", "unit": "MiB", "n": 1,
                         "median": 3.03, "p90": null, "p99": null, "baseline": null,
                         "ratio": null, "p99_ratio": null, "target": "≤ 2 MiB", "met": false},
                "http_execute": {"label": "http (skipped)", "unit": "ms", "n": 1,
                                 "median": null, "p99": null, "target": "—", "met": null},
                "soak_fds": {"label": "  open descriptors at the end", "unit": "fds", "n": 1,
                             "median": 0.0, "p99": null, "target": "0", "met": true},
                "not_headline": {"label": "x", "unit": "ms", "n": 1, "median": 1.0}
            }
        })
    }

    const DOC: &str = "# Benchmarks\n\n## Current figures\n\n<!-- current-figures:begin -->\nold table\n| a | b |\n<!-- current-figures:end -->\n\n## History\n\nnotes stay\n";

    #[test]
    fn the_rewrite_replaces_only_the_text_between_the_markers() {
        let out = rewrite(DOC, "new block\n").expect("markers are there");
        assert_eq!(
            out,
            "# Benchmarks\n\n## Current figures\n\n<!-- current-figures:begin -->\nnew block\n<!-- current-figures:end -->\n\n## History\n\nnotes stay\n"
        );
        assert_eq!(
            rewrite(&out, "new block\n").expect("still there"),
            out,
            "rewriting with the same block changes nothing"
        );
    }

    #[test]
    fn a_document_without_both_markers_or_with_two_blocks_is_refused() {
        assert!(rewrite("# Benchmarks\n", "b").is_err());
        assert!(rewrite(&format!("{BEGIN}\nno end\n"), "b").is_err());
        assert!(rewrite(&format!("{END}\n{BEGIN}\n"), "b").is_err());
        assert!(rewrite(&format!("{BEGIN}\n{END}\n{BEGIN}\n{END}\n"), "b").is_err());
    }

    #[test]
    fn the_block_is_stamped_with_the_commit_and_lists_measured_headline_figures_in_order() {
        let b = block(&result()).expect("a valid result");
        assert!(b.starts_with("Measured at commit `b0b542a` on 2026-12-01 10:00 UTC: full run, 2 CPUs, load average 3.50 at start, 4.25 at end"), "{b}");
        let rows: Vec<&str> = b.lines().filter(|l| l.starts_with("| ")).collect();
        assert_eq!(
            rows.len(),
            4,
            "header, rtt, size and soak_fds; the skipped and the non-headline figure are left out: {b}"
        );
        assert_eq!(
            rows[1],
            "| rtt: blocking execute of `true` (n=500) | 1.25 ms | 2.50 ms | 1.00 ms (spawn+wait) | 1.25× (p99 2.50×) | median ≤ 1.3× | yes |"
        );
        assert_eq!(
            rows[2],
            "| size, stripped static binary | 3.03 MiB | — | — | — | ≤ 2 MiB | **no** |"
        );
        assert_eq!(
            rows[3],
            "| soak_fds: open descriptors at the end | 0.000 fds | — | — | — | 0 | yes |"
        );
    }

    #[test]
    fn a_result_without_headline_figures_gives_no_block() {
        assert!(block(&json!({"figures": {}})).is_err());
        assert!(block(&json!({})).is_err());
    }

    #[test]
    fn the_repositorys_benchmarks_file_opens_with_one_current_figures_block() {
        let path = crate::workspace().join("BENCHMARKS.md");
        let text = std::fs::read_to_string(&path).expect("BENCHMARKS.md is readable");
        let first_section = text.lines().find(|l| l.starts_with("## "));
        assert_eq!(first_section, Some("## Current figures"));
        let rewritten = rewrite(&text, "x").expect("the markers are there, once");
        assert!(rewritten.contains("## History"));
    }

    #[test]
    fn unix_times_become_utc_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00 UTC");
        assert_eq!(utc(951_782_400), "2000-02-29 00:00 UTC");
        assert_eq!(utc(1_796_119_200 + 59), "2026-12-01 10:00 UTC");
    }
}
