//! The `attnres` command line: parse, run, print `error: ...` and exit non-zero on failure.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    // Like other Unix tools, end quietly when the reader of stdout goes away
    // (`attnres plan ... | head`) instead of panicking on a broken pipe.
    // SAFETY: restoring the default disposition of SIGPIPE before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    keep_heap_top();
    let cli = attnres::cli::Cli::parse();
    match attnres::cli::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(attnres::cli::exit_code(&e))
        }
    }
}

/// Bytes of free memory glibc's malloc keeps at the top of the heap when it grows or trims it.
const HEAP_TOP_PAD: i32 = 256 << 20;

/// Asks glibc's malloc to keep [`HEAP_TOP_PAD`] bytes free at the top of its heap (the default
/// is 128 KiB) unless the user tuned malloc themselves. A forward pass allocates and frees
/// tensors of hundreds of KB to a few MB; by default the heap gives that memory back to the
/// system at the end of each pass and faults it in again, zero-filled, in the next, which
/// cost Block AttnRes inference at `tiny` a third of its time and the baseline at context
/// 1024 as much (docs/performance.md, "Session 12"). Pages are only resident once touched.
fn keep_heap_top() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let tuned = [
            "MALLOC_TOP_PAD_",
            "MALLOC_TRIM_THRESHOLD_",
            "GLIBC_TUNABLES",
        ]
        .iter()
        .any(|v| std::env::var_os(v).is_some());
        if !tuned {
            // SAFETY: called before any other thread starts; mallopt only sets a parameter.
            unsafe {
                libc::mallopt(libc::M_TOP_PAD, HEAP_TOP_PAD);
            }
        }
    }
}
