//! The arguments every sweep command takes (the sweep file, `--results`, `--filter`),
//! loading the sweep they name with its filters checked, and checking its runs against this
//! machine.

use std::path::PathBuf;

use clap::Args;

use super::InputError;
use crate::backend::BackendKind;
use crate::runner::Filter;
use crate::spec::Sweep;

#[derive(Debug, Args)]
pub struct SweepArgs {
    /// The sweep file (sweeps/NAME.yaml).
    pub sweep: PathBuf,
    /// Where run folders live: RESULTS/NAME/RUN_ID.
    #[arg(long, default_value = "results")]
    pub results: PathBuf,
    /// Select runs: key=value (size, arm, variant, block_size, seed, id, task) or text; repeatable.
    #[arg(long)]
    pub filter: Vec<String>,
}

impl SweepArgs {
    pub(super) fn load(&self) -> anyhow::Result<(Sweep, Vec<Filter>)> {
        let sweep = Sweep::load(&self.sweep)?;
        let filters = self
            .filter
            .iter()
            .map(|f| {
                f.parse::<Filter>()
                    .map_err(|e| InputError::flag(format!("--filter {f}"), e))
            })
            .collect::<Result<Vec<_>, _>>()?;
        check_filters_select(&sweep, &self.filter, &filters)?;
        Ok((sweep, filters))
    }

    /// [`Self::load`], and `--results` a folder the sweep's runs can be written into.
    pub(super) fn load_to_train(&self) -> anyhow::Result<(Sweep, Vec<Filter>)> {
        let loaded = self.load()?;
        crate::store::root::check(&self.results, &loaded.0.file.name)?;
        Ok(loaded)
    }
}

/// Refuses `--filter`s that select nothing: each must match a run of the sweep, and all of
/// them together at least one, or the command would do nothing and say it succeeded.
fn check_filters_select(sweep: &Sweep, raw: &[String], filters: &[Filter]) -> anyhow::Result<()> {
    let file = sweep.path.display();
    for (text, filter) in raw.iter().zip(filters) {
        if !sweep.runs.iter().any(|r| filter.matches(r)) {
            let hint = match filter.known_values(&sweep.runs) {
                Some((key, values)) => format!("; its {key} values are {}", values.join(", ")),
                None => String::new(),
            };
            anyhow::bail!(InputError::flag(
                format!("--filter {text}"),
                format!("matches no run of {file}{hint}")
            ));
        }
    }
    if !filters.is_empty()
        && !sweep
            .runs
            .iter()
            .any(|r| filters.iter().all(|f| f.matches(r)))
    {
        anyhow::bail!(InputError::flag(
            format!("--filter {}", raw.join(" --filter ")),
            format!("together match no run of {file}; drop one of them")
        ));
    }
    Ok(())
}

/// ` --results DIR` when the results folder is not the default, for commands we suggest.
pub(super) fn results_flag(results: &std::path::Path) -> String {
    if results == std::path::Path::new("results") {
        String::new()
    } else {
        format!(" --results {}", results.display())
    }
}

/// Checks files, and the memory of the runs `filters` select on `device`, located in the
/// sweep file; exit 2 on failure.
pub(super) fn check_environment(
    sweep: &Sweep,
    filters: &[Filter],
    (backend, device): (BackendKind, &str),
    jobs: usize,
) -> anyhow::Result<()> {
    crate::backend::device(backend, device)
        .map_err(|e| InputError::flag(format!("--device {device}"), e))?;
    let selected = |r: &&crate::spec::PlannedRun| filters.iter().all(|f| f.matches(r));
    if backend != BackendKind::Tch
        && let Some(r) = sweep
            .runs
            .iter()
            .filter(selected)
            .find(|r| !r.spec.train.precision.is_f32())
    {
        anyhow::bail!(InputError::file(
            &sweep.path,
            format!(
                "run {} trains in {}, which only the tch backend does; pass `--backend tch`",
                crate::runner::describe(r),
                r.spec.train.precision.name()
            )
        ));
    }
    let limit = crate::runner::capacity::memory_limit(device, jobs);
    if limit.is_none() {
        eprintln!(
            "note: cannot read the memory of `{device}` here; runs are not checked against it"
        );
    }
    sweep
        .check_environment(limit.as_ref(), &|r| filters.iter().all(|f| f.matches(r)))
        .map_err(Into::into)
}
