//! Every committed report under reports/reference/ is what `attnres report` writes now from the
//! committed results under results/reference/: the same files, byte for byte, except the
//! "Generated <time>" line of report.md and report.html. A change to the analysis, the
//! figures or the report text that is not followed by `make report` fails here.

#[path = "common/run.rs"]
mod run;

use std::path::{Path, PathBuf};

use run::*;

/// Relative paths of every file under `dir`, sorted.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push(path.strip_prefix(dir).unwrap().to_path_buf());
            }
        }
    }
    out.sort();
    out
}

/// The file's bytes, without the generation-timestamp line in the report's text forms.
fn comparable(path: &Path) -> Vec<u8> {
    let bytes = std::fs::read(path).unwrap();
    let is_text = matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("md" | "html")
    );
    if !is_text {
        return bytes;
    }
    String::from_utf8(bytes)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with("Generated ") && !l.starts_with("<p>Generated "))
        .collect::<Vec<_>>()
        .join("\n")
        .into_bytes()
}

#[test]
fn committed_reports_rebuild_byte_identical_from_committed_results() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut names: Vec<String> = std::fs::read_dir(root.join("reports/reference"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("report.md").is_file())
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert!(
        names.iter().any(|n| n == "quick"),
        "no committed reports found under reports/reference/: {names:?}"
    );
    let tmp = TempDir::new("reference-reports");
    for name in &names {
        let results = root.join("results/reference").join(name);
        assert!(
            results.is_dir(),
            "reports/reference/{name} is committed but results/reference/{name} is not"
        );
        let out = attnres()
            .current_dir(root)
            .args(["report", &format!("sweeps/{name}.yaml")])
            .args(["--results", "results/reference", "--reports"])
            .arg(tmp.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "report {name}: {}", stderr(&out));
        let committed = root.join("reports/reference").join(name);
        let rebuilt = tmp.path().join(name);
        assert_eq!(
            files(&committed),
            files(&rebuilt),
            "reports/reference/{name}: the committed files differ from the rebuilt ones; run `make report`"
        );
        for file in files(&committed) {
            assert!(
                comparable(&committed.join(&file)) == comparable(&rebuilt.join(&file)),
                "reports/reference/{name}/{} differs from what `attnres report` writes now; run `make report` and commit",
                file.display()
            );
        }
    }
}
