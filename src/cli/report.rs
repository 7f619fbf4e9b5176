//! `attnres report` and `attnres compare`: a sweep's report written from its results
//! folder, and several sweeps' multipliers side by side, without training anything.

use std::path::PathBuf;

use clap::Args;

use super::InputError;
use crate::analysis::stats::SeedMean;
use crate::report::place::report_dir;
use crate::report::tables::multiplier_interval;
use crate::report::{analyse_sweeps, write_report};
use crate::spec::Sweep;

use super::analyze::{FitArgs, load_sweeps, print_fit};

#[derive(Debug, Args)]
pub struct ReportCmd {
    pub sweep: PathBuf,
    /// Where reports go: REPORTS/NAME/ (default: the folder that mirrors --results:
    /// results -> reports, results/reference -> reports/reference).
    #[arg(long)]
    pub reports: Option<PathBuf>,
    #[command(flatten)]
    pub fit: FitArgs,
}

pub fn run_report(cmd: ReportCmd) -> anyhow::Result<()> {
    let sweep = Sweep::load(&cmd.sweep)?;
    let dir = report_dir(&cmd.fit.results, cmd.reports.as_deref(), &sweep.file.name)?;
    let started = std::time::Instant::now();
    let reports_root = dir.parent().unwrap_or(std::path::Path::new("."));
    let written = write_report(&sweep, &cmd.fit.options(&[&sweep]), reports_root)?;
    println!(
        "report: {} runs of sweep {}",
        written.analysis.runs.len(),
        sweep.file.name
    );
    match &written.analysis.law() {
        Ok(r) => print_fit(r),
        Err(why) => println!("no scaling fit: {why}"),
    }
    println!("\nfigures:");
    for f in &written.figures {
        println!("  {} (+ .svg)", f.display());
    }
    println!(
        "wrote {} and report.html in {:.1} s",
        written.dir.join("report.md").display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

#[derive(Debug, Args)]
pub struct CompareCmd {
    pub sweeps: Vec<PathBuf>,
    #[command(flatten)]
    pub fit: FitArgs,
}

/// Multipliers and largest-size losses of several sweeps, side by side.
pub fn run_compare(cmd: CompareCmd) -> anyhow::Result<()> {
    let sweeps = load_sweeps(&cmd.sweeps)?;
    if sweeps.is_empty() {
        anyhow::bail!(InputError::Arguments("give at least one sweep file".into()));
    }
    let mut columns = Vec::new();
    let mut arms: Vec<String> = Vec::new();
    for sweep in &sweeps {
        let a = analyse_sweeps(std::slice::from_ref(sweep), &cmd.fit.options(&[sweep]))?;
        let largest = crate::analysis::views::largest_size(&a.runs);
        for r in &a.runs {
            if !arms.contains(&r.planned.arm) {
                arms.push(r.planned.arm.clone());
            }
        }
        columns.push((sweep.file.name.clone(), a, largest));
    }
    let width = arms
        .iter()
        .map(|a| a.chars().count())
        .max()
        .unwrap_or(0)
        .max(3);
    print!("{:<width$}", "arm");
    for (name, _, largest) in &columns {
        print!(
            "  {:>28}  {:>25}",
            format!("{name}: multiplier [95%]"),
            format!("loss @ {} (95% t)", largest.clone().unwrap_or_default())
        );
    }
    println!();
    for arm in &arms {
        print!("{arm:<width$}");
        for (_, a, largest) in &columns {
            let m = match a.law() {
                Ok(r) => match r.arms.iter().find(|x| &x.arm == arm) {
                    Some(x) => x
                        .multiplier
                        .map(|m| format!("{:.3} {}", m.value, multiplier_interval(&m)))
                        .unwrap_or_else(|| "reference".into()),
                    None => "-".into(),
                },
                Err(_) => "no fit".into(),
            };
            let losses: Vec<f64> = a
                .runs
                .iter()
                .filter(|r| &r.planned.arm == arm && Some(&r.planned.size) == largest.as_ref())
                .map(|r| r.loss())
                .collect();
            let loss = if losses.is_empty() {
                "-".into()
            } else {
                let m = SeedMean::of(&losses);
                format!("{} (n={})", m.display(4), m.n)
            };
            print!("  {m:>28}  {loss:>25}");
        }
        println!();
    }
    for (name, a, _) in &columns {
        if let Err(why) = a.law() {
            println!("{name}: no scaling fit: {why}");
        }
    }
    Ok(())
}
