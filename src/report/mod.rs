//! Reports: `REPORTS/NAME/report.md` and a self-contained `report.html` with every figure,
//! rebuilt from the results folder alone.

pub mod doc;
pub mod findings;
pub mod place;
pub mod sections;
pub mod shapes;
pub mod tables;
pub mod tasks;

use std::path::{Path, PathBuf};

use crate::analysis::fit::EMode;
use crate::analysis::load::{LoadedRun, load_runs};
use crate::analysis::multiplier::{FitOptions, FitReport, analyse};
use crate::analysis::no_fit::NoFit;
use crate::analysis::views::fit_points;
use crate::spec::Sweep;
use crate::store::write_atomic;

#[derive(Debug, Clone)]
pub struct AnalysisOptions {
    pub results_root: PathBuf,
    pub e_mode: EMode,
    pub resamples: usize,
    pub seed: u64,
    /// Fit against 6ND instead of the exact FLOP count.
    pub six_nd: bool,
    /// The reference arm (default `baseline`).
    pub baseline: String,
}

/// The finished runs of some sweeps and their scaling fit (or why there is none).
pub struct Analysis {
    pub runs: Vec<LoadedRun>,
    /// The fit as made, degenerate or not (`fit` writes it either way).
    pub fits: Result<FitReport, NoFit>,
}

impl Analysis {
    /// The fit when its laws can be read; why not otherwise (no fit, or a degenerate one).
    pub fn law(&self) -> Result<&FitReport, NoFit> {
        match &self.fits {
            Ok(r) => match &r.degenerate {
                Some(why) => Err(NoFit::Degenerate(why.clone())),
                None => Ok(r),
            },
            Err(why) => Err(why.clone()),
        }
    }
}

pub fn analyse_sweeps(sweeps: &[Sweep], opts: &AnalysisOptions) -> anyhow::Result<Analysis> {
    let runs = load_runs(sweeps, &opts.results_root)?;
    let mut tasks: Vec<String> = runs.iter().map(|r| r.planned.task()).collect();
    tasks.sort();
    tasks.dedup();
    let fits = if runs.is_empty() {
        Err(NoFit::NoRuns)
    } else if tasks.len() > 1 {
        Err(NoFit::SeveralTasks {
            count: tasks.len(),
            tasks: tasks.join(", "),
        })
    } else {
        analyse_with_time(
            &runs,
            &fit_points(&runs, opts.six_nd),
            &FitOptions {
                baseline: opts.baseline.clone(),
                e_mode: opts.e_mode,
                resamples: opts.resamples,
                seed: opts.seed,
                curve_points: 24,
            },
        )
    };
    Ok(Analysis { runs, fits })
}

/// The fit of `points`, with the wall-clock multipliers that the runs' step times give.
fn analyse_with_time(
    runs: &[LoadedRun],
    points: &[crate::analysis::design::RunPoint],
    opts: &FitOptions,
) -> Result<FitReport, NoFit> {
    let mut report = analyse(points, opts)?;
    match crate::analysis::wall_clock::wall_clock(runs, &report) {
        Ok(w) => report.wall_clock = w,
        Err(why) => report.wall_clock_missing = Some(why),
    }
    Ok(report)
}

/// What `report` wrote.
pub struct Written {
    pub dir: PathBuf,
    pub figures: Vec<PathBuf>,
    pub analysis: Analysis,
}

/// Writes the report of `sweep` under `reports_root/NAME/`.
pub fn write_report(
    sweep: &Sweep,
    opts: &AnalysisOptions,
    reports_root: &Path,
) -> anyhow::Result<Written> {
    let analysis = analyse_sweeps(std::slice::from_ref(sweep), opts)?;
    if analysis.runs.is_empty() {
        anyhow::bail!(crate::error::InputError::file(
            &sweep.path,
            format!(
                "no finished runs under {}; run `attnres run {}` first",
                sweep.results_dir(&opts.results_root).display(),
                sweep.path.display()
            )
        ));
    }
    let dir = reports_root.join(&sweep.file.name);
    let figures_dir = dir.join("figures");
    let _ = std::fs::remove_dir_all(&figures_dir);
    let doc = sections::build(sweep, &analysis, opts, &figures_dir)?;
    std::fs::create_dir_all(&dir)?;
    write_atomic(&dir.join("report.md"), doc.markdown(&dir).as_bytes())?;
    write_atomic(&dir.join("report.html"), doc.html()?.as_bytes())?;
    if let Ok(fits) = &analysis.fits {
        crate::store::write_json(&dir.join("fits.json"), fits)?;
    }
    let figures = doc
        .blocks
        .iter()
        .filter_map(|b| match b {
            doc::Block::Figure { png, .. } => Some(png.clone()),
            _ => None,
        })
        .collect();
    Ok(Written {
        dir,
        figures,
        analysis,
    })
}
