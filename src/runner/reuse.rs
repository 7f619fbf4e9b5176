//! Runs another sweep has already trained. A run id is a hash of everything that makes the
//! run (model, data, training settings, seed), so a finished run folder with the same id in
//! another sweep's folder under the same results root is this run: it is copied, not
//! retrained. Sweeps that extend an earlier one (more seeds, more arms) reuse its runs.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use super::view;
use crate::spec::{PlannedRun, Sweep};
use crate::store::{RunDir, RunState, StoreError};

/// Copies into `sweep`'s folder every run of `runs` that has no folder there yet and is done
/// in a sibling sweep's folder. Returns how many came from each sweep, by name.
pub fn copy_done_elsewhere(
    sweep: &Sweep,
    results_root: &Path,
    runs: &[&PlannedRun],
) -> Result<BTreeMap<String, usize>, StoreError> {
    let own = sweep.results_dir(results_root);
    let mut copied = BTreeMap::new();
    let siblings = sibling_sweeps(results_root, &own);
    for run in runs {
        let to = own.join(&run.id);
        if to.exists() {
            continue;
        }
        let Some((name, from)) = siblings
            .iter()
            .map(|(name, dir)| (name, dir.join(&run.id)))
            .find(|(_, dir)| is_done(dir))
        else {
            continue;
        };
        fs::create_dir_all(&own).map_err(|e| StoreError::io(&own, e))?;
        if copy_run(&from, &to)? {
            *copied.entry(name.clone()).or_insert(0) += 1;
        }
    }
    Ok(copied)
}

/// The other sweep folders under `results_root`, by name, in name order.
fn sibling_sweeps(results_root: &Path, own: &Path) -> Vec<(String, PathBuf)> {
    let Ok(entries) = fs::read_dir(results_root) else {
        return Vec::new();
    };
    let mut out: Vec<(String, PathBuf)> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_dir() && p != own)
        .filter_map(|p| Some((p.file_name()?.to_str()?.to_string(), p)))
        .collect();
    out.sort();
    out
}

fn is_done(dir: &Path) -> bool {
    dir.join("summary.json").is_file()
        && view(&RunDir::new(dir)).is_ok_and(|v| v.state == RunState::Done)
}

/// Copies the finished run `from` (its files and its final checkpoint, which `export` and
/// `score` load; not its lease or temporaries) into a temporary folder beside `to`, then
/// renames it to `to`, so `to` is whole or absent. False when another process made `to`
/// first (its copy stands; ours is removed).
fn copy_run(from: &Path, to: &Path) -> Result<bool, StoreError> {
    let tmp = to.with_file_name(format!(
        "{}.copy.{}.tmp",
        to.file_name().unwrap_or_default().to_string_lossy(),
        std::process::id()
    ));
    let result = (|| {
        copy_files(from, &tmp)?;
        if let Some(ckpt) = RunDir::new(from).find_checkpoint() {
            copy_files(&ckpt, &RunDir::new(&tmp).checkpoint())?;
        }
        Ok(fs::rename(&tmp, to).is_ok())
    })();
    if !matches!(result, Ok(true)) {
        let _ = fs::remove_dir_all(&tmp);
    }
    result
}

/// The plain files of `from` into `to` (made first), leaving out locks, leases and
/// temporaries.
fn copy_files(from: &Path, to: &Path) -> Result<(), StoreError> {
    fs::create_dir_all(to).map_err(|e| StoreError::io(to, e))?;
    for entry in fs::read_dir(from).map_err(|e| StoreError::io(from, e))? {
        let path = entry.map_err(|e| StoreError::io(from, e))?.path();
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        let skip = name == "lock" || name.starts_with("lease") || name.ends_with(".tmp");
        if path.is_file() && !skip {
            fs::copy(&path, to.join(path.file_name().unwrap_or_default()))
                .map_err(|e| StoreError::write(to, e))?;
        }
    }
    Ok(())
}
