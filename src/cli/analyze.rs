//! `attnres fit`: the scaling laws and compute multipliers of a sweep's finished runs (or of
//! `--points`), and the tables the other analysis commands print.

use std::path::PathBuf;

use clap::Args;

use super::InputError;
use crate::analysis::fit::EMode;
use crate::analysis::multiplier::{FitOptions, FitReport, RunPoint, analyse};
use crate::report::place::report_dir;
use crate::report::tables::{
    FIT_HEADER, HOLD_OUT_HEADER, WALL_CLOCK_HEADER, fit_rows, hold_out_rows, paired_header,
    paired_rows, wall_clock_rows,
};
use crate::report::{AnalysisOptions, analyse_sweeps};
use crate::spec::Sweep;

#[derive(Debug, Clone, Args)]
pub struct FitArgs {
    /// How the irreducible loss E is fitted.
    #[arg(long, value_enum, default_value = "shared")]
    pub e: EMode,
    /// Bootstrap resamples for the intervals (at least 1000 for reported numbers).
    #[arg(long, default_value_t = 1000)]
    pub resamples: usize,
    /// Seed of the bootstrap: the same seed gives the same intervals.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Fit against 6ND instead of the exact FLOP count.
    #[arg(long)]
    pub six_nd: bool,
    /// The reference arm, by its label (`block S=8`); default: the sweep file's
    /// `reference_arm`, else `baseline`.
    #[arg(long)]
    pub baseline: Option<String>,
    #[arg(long, default_value = "results")]
    pub results: PathBuf,
}

impl FitArgs {
    /// The reference arm: `--baseline`, else the first sweep's `reference_arm`, else
    /// `baseline`.
    fn baseline(&self, sweeps: &[&Sweep]) -> String {
        self.baseline
            .clone()
            .or_else(|| sweeps.first()?.file.reference_arm.clone())
            .unwrap_or_else(|| "baseline".into())
    }

    pub(super) fn options(&self, sweeps: &[&Sweep]) -> AnalysisOptions {
        AnalysisOptions {
            results_root: self.results.clone(),
            e_mode: self.e,
            resamples: self.resamples,
            seed: self.seed,
            six_nd: self.six_nd,
            baseline: self.baseline(sweeps),
        }
    }
}

#[derive(Debug, Args)]
pub struct FitCmd {
    /// Sweep files whose runs are fitted together.
    pub sweeps: Vec<PathBuf>,
    /// Fit external points instead: a CSV with columns arm, compute, loss[, seed].
    #[arg(long)]
    pub points: Option<PathBuf>,
    /// Where to write fits.json (default: REPORTS/NAME/fits.json, where REPORTS mirrors
    /// --results: results -> reports, results/reference -> reports/reference).
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub fit: FitArgs,
}

pub(super) fn load_sweeps(paths: &[PathBuf]) -> anyhow::Result<Vec<Sweep>> {
    paths
        .iter()
        .map(|p| Sweep::load(p).map_err(Into::into))
        .collect()
}

pub fn run_fit(cmd: FitCmd) -> anyhow::Result<()> {
    let (report, name) = match &cmd.points {
        Some(csv) => {
            if !cmd.sweeps.is_empty() {
                anyhow::bail!(InputError::Arguments(
                    "give either sweep files or --points, not both".into()
                ));
            }
            if cmd.fit.six_nd {
                anyhow::bail!(InputError::Arguments(
                    "--six-nd does not apply to --points: the CSV's compute column is fitted as \
                     it is"
                        .into()
                ));
            }
            let points = read_points(csv)?;
            let opts = FitOptions {
                baseline: cmd.fit.baseline(&[]),
                e_mode: cmd.fit.e,
                resamples: cmd.fit.resamples,
                seed: cmd.fit.seed,
                curve_points: 24,
            };
            let report = analyse(&points, &opts).map_err(|e| InputError::file(csv, e))?;
            let stem = csv
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "points".into());
            (report, stem)
        }
        None => {
            if cmd.sweeps.is_empty() {
                anyhow::bail!(InputError::Arguments(
                    "give one or more sweep files, or --points FILE.csv".into()
                ));
            }
            let sweeps = load_sweeps(&cmd.sweeps)?;
            let refs: Vec<&Sweep> = sweeps.iter().collect();
            let analysis = analyse_sweeps(&sweeps, &cmd.fit.options(&refs))?;
            let names: Vec<&str> = sweeps.iter().map(|s| s.file.name.as_str()).collect();
            let report = analysis
                .fits
                .map_err(|e| InputError::Arguments(format!("{}: {e}", names.join(", "))))?;
            (report, names.join("+"))
        }
    };
    let out = match cmd.out {
        Some(out) => out,
        None => {
            let dir = report_dir(&cmd.fit.results, None, &name)?;
            dir.join("fits.json")
        }
    };
    print_fit(&report);
    if let Some(dir) = out.parent() {
        std::fs::create_dir_all(dir)?;
    }
    crate::store::write_json(&out, &report)?;
    println!("\nwrote {}", out.display());
    Ok(())
}

pub(super) fn print_fit(r: &FitReport) {
    println!(
        "fit: L = E + A C^-alpha, C in {}, E {}; multipliers vs {} at C = {:.3e}, 95% intervals from {}\n",
        r.compute_unit,
        r.e_mode.describe(),
        r.baseline,
        r.largest_compute,
        r.summary_line()
    );
    print_table(&FIT_HEADER, fit_rows(r));
    if let Some(why) = &r.degenerate {
        println!("\nno multiplier: these laws are not to be read, since {why}");
    }
    if let Some(w) = r.wall_clock.first().filter(|_| r.degenerate.is_none()) {
        println!(
            "\nper unit of training time on {} (median time per token, runs at {} paired by seed):",
            w.machine, w.size
        );
        print_table(&WALL_CLOCK_HEADER, wall_clock_rows(r));
    }
    if let Some(h) = &r.hold_out {
        println!(
            "\nfit validation: refitted without {}, predicted there",
            h.cell
        );
        print_table(&HOLD_OUT_HEADER, hold_out_rows(h));
    }
    if !r.paired.rows.is_empty() {
        println!(
            "\npaired differences to {} per size ({} comparisons, Holm at {}):",
            r.baseline, r.paired.comparisons, r.paired.alpha
        );
        let header = paired_header(&r.baseline);
        let header: Vec<&str> = header.iter().map(String::as_str).collect();
        print_table(&header, paired_rows(&r.paired));
    }
}

/// A plain-text table: first column left-aligned, the rest right-aligned.
pub(super) fn print_table(header: &[&str], rows: Vec<Vec<String>>) {
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            rows.iter()
                .map(|row| row[i].chars().count())
                .chain([header[i].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: Vec<String>| {
        cells
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if i == 0 {
                    format!("{c:<w$}", w = widths[i])
                } else {
                    format!("{c:>w$}", w = widths[i])
                }
            })
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string()
    };
    println!("{}", line(header.iter().map(|s| s.to_string()).collect()));
    for row in rows {
        println!("{}", line(row));
    }
}

/// `arm,compute,loss[,seed]` with a header; points of one arm at one compute are seeds.
fn read_points(path: &std::path::Path) -> anyhow::Result<Vec<RunPoint>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| InputError::file(path, format!("cannot read it: {e}")))?;
    let mut lines = text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'));
    let header: Vec<String> = lines
        .next()
        .unwrap_or_default()
        .split(',')
        .map(|s| s.trim().to_lowercase())
        .collect();
    let col = |name: &str| header.iter().position(|h| h == name);
    let (Some(ia), Some(ic), Some(il)) = (col("arm"), col("compute"), col("loss")) else {
        anyhow::bail!(InputError::file(
            path,
            "the header must name the columns arm, compute, loss (and optionally seed)"
        ));
    };
    let is = col("seed");
    let mut points = Vec::new();
    for (n, line) in lines.enumerate() {
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        let bad =
            |what: &str| InputError::file(path, format!("data line {}: {what}: `{line}`", n + 1));
        let num = |i: usize| {
            f.get(i)
                .and_then(|v| v.parse::<f64>().ok())
                .filter(|v| v.is_finite() && *v > 0.0)
        };
        let compute = num(ic).ok_or_else(|| bad("compute must be a positive number"))?;
        let loss = num(il).ok_or_else(|| bad("loss must be a positive number"))?;
        let seed = match is {
            Some(i) => f
                .get(i)
                .and_then(|v| v.parse::<u64>().ok())
                .ok_or_else(|| bad("seed must be a whole number"))?,
            None => 0,
        };
        points.push(RunPoint {
            arm: f.get(ia).ok_or_else(|| bad("no arm"))?.to_string(),
            cell: String::new(),
            seed,
            compute,
            loss,
        });
    }
    // Pair seeds across arms by size rank: the k-th smallest compute of each arm is size k.
    let arms: Vec<String> = {
        let mut a: Vec<String> = points.iter().map(|p| p.arm.clone()).collect();
        a.dedup();
        a
    };
    for arm in arms {
        let mut computes: Vec<f64> = points
            .iter()
            .filter(|p| p.arm == arm)
            .map(|p| p.compute)
            .collect();
        computes.sort_by(f64::total_cmp);
        computes.dedup();
        for p in points.iter_mut().filter(|p| p.arm == arm) {
            p.cell = format!(
                "s{}",
                computes.iter().position(|&c| c == p.compute).unwrap_or(0)
            );
        }
    }
    Ok(points)
}
