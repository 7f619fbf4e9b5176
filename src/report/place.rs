//! Where a sweep's report goes. The reports folder mirrors the results folder it is built
//! from (`results/` -> `reports/`, `results/reference/` -> `reports/reference/`), and the
//! committed reference reports are written only from the committed reference results.

use std::path::{Component, Path, PathBuf};

use crate::error::InputError;

/// The committed reference results and the reports built from them.
pub const REFERENCE_RESULTS: &str = "results/reference";
pub const REFERENCE_REPORTS: &str = "reports/reference";

/// The report folder of sweep `name`: `reports_root/NAME/`, where the root defaults to the
/// folder that mirrors `results`. Refuses a folder under `reports/reference/` unless the
/// results are the reference results, so a user's own runs never overwrite a reference report.
pub fn report_dir(
    results: &Path,
    reports_root: Option<&Path>,
    name: &str,
) -> Result<PathBuf, InputError> {
    let root = match reports_root {
        Some(root) => root.to_path_buf(),
        None => mirrored_reports(results),
    };
    let dir = root.join(name);
    let writes_reference = absolute(&dir).starts_with(absolute(Path::new(REFERENCE_REPORTS)));
    let from_reference = absolute(results) == absolute(Path::new(REFERENCE_RESULTS));
    if writes_reference && !from_reference {
        return Err(InputError::file(
            &dir,
            format!(
                "holds a committed reference report, built only from {REFERENCE_RESULTS}/ \
                 (`make report`); these results come from {}. Leave --reports out to write \
                 reports/{name}/, or name another folder",
                results.display()
            ),
        ));
    }
    Ok(dir)
}

/// `results` -> `reports`, `results/X/Y` -> `reports/X/Y`; any other folder -> `reports`.
fn mirrored_reports(results: &Path) -> PathBuf {
    let mut parts = results
        .components()
        .filter(|c| !matches!(c, Component::CurDir));
    match parts.next() {
        Some(Component::Normal(first)) if first == "results" => {
            parts.fold(PathBuf::from("reports"), |acc, c| acc.join(c))
        }
        _ => PathBuf::from("reports"),
    }
}

/// The path made absolute against the working folder, `.` and `..` resolved lexically.
fn absolute(path: &Path) -> PathBuf {
    let joined = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut out = PathBuf::new();
    for c in joined.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_mirror_results() {
        assert_eq!(mirrored_reports(Path::new("results")), Path::new("reports"));
        assert_eq!(
            mirrored_reports(Path::new("./results/reference")),
            Path::new("reports/reference")
        );
        assert_eq!(
            mirrored_reports(Path::new("/scratch/runs")),
            Path::new("reports")
        );
    }

    #[test]
    fn only_reference_results_write_reference_reports() {
        let dir = report_dir(Path::new("results/reference"), None, "quick").unwrap();
        assert_eq!(dir, Path::new("reports/reference/quick"));
        assert_eq!(
            report_dir(Path::new("results"), None, "quick").unwrap(),
            Path::new("reports/quick")
        );
        let err = report_dir(
            Path::new("results"),
            Some(Path::new("reports/reference")),
            "quick",
        )
        .unwrap_err();
        let InputError::File { path, problem } = &err else {
            panic!("not a file error: {err}");
        };
        assert_eq!(path, Path::new("reports/reference/quick"));
        assert!(problem.contains("committed reference report"), "{err}");
        // A sweep named `reference` would land on the reference folder itself.
        assert!(report_dir(Path::new("results"), None, "reference").is_err());
        assert!(
            report_dir(
                Path::new("results"),
                Some(Path::new("./reports/../reports/reference")),
                "x"
            )
            .is_err()
        );
    }
}
