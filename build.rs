//! Embeds an rpath to `$LIBTORCH/lib` when the `tch` feature is on, so the binary finds the
//! libtorch folder made by scripts/setup-libtorch.sh without LD_LIBRARY_PATH.

fn main() {
    println!("cargo:rerun-if-env-changed=LIBTORCH");
    // The commit goes into every run's summary.json.
    println!("cargo:rerun-if-changed=.git/HEAD");
    println!("cargo:rerun-if-changed=.git/refs/heads");
    let commit = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=ATTNRES_GIT_COMMIT={commit}");
    if std::env::var_os("CARGO_FEATURE_TCH").is_none() {
        return;
    }
    if let Some(libtorch) = std::env::var_os("LIBTORCH") {
        let lib = std::path::Path::new(&libtorch).join("lib");
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib.display());
    }
}
