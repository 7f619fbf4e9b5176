//! Embeds an rpath to `$LIBTORCH/lib` when the `tch` feature is on, so the binary finds the
//! libtorch folder made by scripts/setup-libtorch.sh without LD_LIBRARY_PATH; or to
//! `$ATTNRES_RPATH` when set (`make build-cuda`: the venv's `torch/lib`). Set here rather than
//! in RUSTFLAGS, which would make cargo rebuild every dependency.

fn main() {
    println!("cargo:rerun-if-env-changed=LIBTORCH");
    println!("cargo:rerun-if-env-changed=ATTNRES_RPATH");
    // The commit goes into every run's summary.json, marked `-dirty` when the code that
    // builds the binary differs from it (results must not name a commit they did not run).
    for path in [
        ".git/HEAD",
        ".git/refs/heads",
        "src",
        "Cargo.toml",
        "Cargo.lock",
    ] {
        println!("cargo:rerun-if-changed={path}");
    }
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| String::from_utf8(o.stdout).ok())
    };
    let commit = match git(&["rev-parse", "--short=12", "HEAD"]) {
        Some(head) => {
            let changed = git(&[
                "status",
                "--porcelain",
                "--untracked-files=no",
                "--",
                "src",
                "build.rs",
                "Cargo.toml",
                "Cargo.lock",
            ]);
            let dirty = changed.is_none_or(|c| !c.trim().is_empty());
            format!("{}{}", head.trim(), if dirty { "-dirty" } else { "" })
        }
        None => "unknown".into(),
    };
    println!("cargo:rustc-env=ATTNRES_GIT_COMMIT={commit}");
    if std::env::var_os("CARGO_FEATURE_TCH").is_none() {
        return;
    }
    let lib = match (
        std::env::var_os("ATTNRES_RPATH"),
        std::env::var_os("LIBTORCH"),
    ) {
        (Some(dir), _) if !dir.is_empty() => std::path::PathBuf::from(dir),
        (_, Some(libtorch)) if !libtorch.is_empty() => std::path::Path::new(&libtorch).join("lib"),
        _ => return,
    };
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib.display());
    // The libtorch build goes into every tch run's summary.json: its kernels round
    // differently from release to release. A libtorch folder says it in `build-version`; a
    // torch package (the CUDA venv) in `version.py`.
    let root = lib.parent().unwrap_or(&lib);
    let from_folder = std::fs::read_to_string(root.join("build-version")).ok();
    let from_package = std::fs::read_to_string(root.join("version.py"))
        .ok()
        .and_then(|text| {
            let line = text.lines().find(|l| l.starts_with("__version__"))?;
            Some(line.split(['\'', '"']).nth(1)?.to_string())
        });
    if let Some(version) = from_folder.or(from_package) {
        println!("cargo:rustc-env=ATTNRES_LIBTORCH={}", version.trim());
    }
}
