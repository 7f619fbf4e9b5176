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
    keep_heap();
    let cli = attnres::cli::Cli::parse();
    match attnres::cli::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(attnres::cli::exit_code(&e))
        }
    }
}

/// Asks glibc's malloc (unless the user tuned it themselves) to serve tensors of up to 32 MB
/// from its heap, never to give the heap's top back to the system, and to grow it 64 MB at a
/// time. A forward pass allocates and frees tensors of hundreds of KB to tens of MB; by
/// default the heap was trimmed at the end of each pass and its pages faulted in again,
/// zero-filled, in the next, and the larger tensors were mapped and unmapped one by one.
/// Measured (git log -- docs/performance.md): Block AttnRes inference at `tiny`,
/// batch 16, 1.49-1.58x the baseline before, 1.11-1.16x after; the baseline at the reference
/// size, context 1024, batch 1, 229 -> 125-176 ms. The price: the heap fragments, and a long
/// run's resident memory levels off above its first steps' (d 512: 1.75-1.85 GB, then
/// 2.05-2.09 GB from its fifth minute), which `plan`'s estimate allows for
/// (`model::memory::HEAP_SLACK`; git log -- docs/performance.md).
fn keep_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let tuned = [
            "MALLOC_TOP_PAD_",
            "MALLOC_TRIM_THRESHOLD_",
            "MALLOC_MMAP_THRESHOLD_",
            "GLIBC_TUNABLES",
        ]
        .iter()
        .any(|v| std::env::var_os(v).is_some());
        if !tuned {
            // SAFETY: called before any other thread starts; mallopt only sets parameters.
            unsafe {
                libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
                libc::mallopt(libc::M_TRIM_THRESHOLD, i32::MAX);
                libc::mallopt(libc::M_TOP_PAD, 64 << 20);
            }
        }
    }
}
