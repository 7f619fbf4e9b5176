//! Embeds an rpath to `$LIBTORCH/lib` when the `tch` feature is on, so the binary finds the
//! libtorch folder made by scripts/setup-libtorch.sh without LD_LIBRARY_PATH.

fn main() {
    println!("cargo:rerun-if-env-changed=LIBTORCH");
    if std::env::var_os("CARGO_FEATURE_TCH").is_none() {
        return;
    }
    if let Some(libtorch) = std::env::var_os("LIBTORCH") {
        let lib = std::path::Path::new(&libtorch).join("lib");
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib.display());
    }
}
