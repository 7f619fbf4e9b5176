//! Metrics files of a run: `steps.csv` (append-only, one row per step), and the long-format
//! `layers.parquet` and `depth_attn.parquet` (rewritten whole, atomically, at each eval).

use std::fs;
use std::io::Write;
use std::path::Path;

use polars_core::prelude::*;
use polars_io::prelude::*;

use super::{StoreError, tmp_path, write_atomic};

pub const STEPS_HEADER: &str = "step,tokens,lr,loss/train,loss/val,acc/val,flops_exact,flops_6nd,\
     wall_s,tokens_per_s,grad_norm";

/// Columns of a row: older runs' files lack the last (`grad_norm`).
const COLUMNS: [usize; 2] = [10, 11];

/// One optimizer step. Validation columns are empty except at evals.
#[derive(Debug, Clone, PartialEq)]
pub struct StepRow {
    /// Steps completed (1-based).
    pub step: u64,
    pub tokens: u64,
    pub lr: f64,
    pub loss_train: f32,
    pub loss_val: Option<f32>,
    pub acc_val: Option<f32>,
    pub flops_exact: f64,
    pub flops_6nd: f64,
    pub wall_s: f64,
    pub tokens_per_s: f64,
    /// The gradient's global norm before clipping (absent in older runs).
    pub grad_norm: Option<f32>,
}

impl StepRow {
    /// Losses print in Rust's shortest round-trip form, so a re-read value is bit-identical.
    pub fn to_csv(&self) -> String {
        let opt = |v: Option<f32>| v.map(|x| x.to_string()).unwrap_or_default();
        format!(
            "{},{},{:e},{},{},{},{:e},{:e},{:.3},{:.1},{}",
            self.step,
            self.tokens,
            self.lr,
            self.loss_train,
            opt(self.loss_val),
            opt(self.acc_val),
            self.flops_exact,
            self.flops_6nd,
            self.wall_s,
            self.tokens_per_s,
            opt(self.grad_norm)
        )
    }
}

/// Appends rows to `steps.csv`, writing the header first if the file is new.
pub fn append_steps(path: &Path, rows: &[StepRow]) -> Result<(), StoreError> {
    let new = !path.exists();
    let mut f = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| StoreError::io(path, e))?;
    let mut text = String::new();
    if new {
        text.push_str(STEPS_HEADER);
        text.push('\n');
    }
    for row in rows {
        text.push_str(&row.to_csv());
        text.push('\n');
    }
    f.write_all(text.as_bytes())
        .map_err(|e| StoreError::io(path, e))
}

/// Drops the rows after `step` (written after the checkpoint a resumed run restarts from).
/// A torn last line from a killed writer is dropped too.
pub fn truncate_steps(path: &Path, step: u64) -> Result<(), StoreError> {
    if !path.exists() {
        return Ok(());
    }
    let text = fs::read_to_string(path).map_err(|e| StoreError::io(path, e))?;
    // The file's own header: an older run resumed keeps its columns' names.
    let header = text.lines().next().unwrap_or(STEPS_HEADER);
    let mut kept = vec![header.to_string()];
    for line in text.lines().skip(1) {
        let fields = line.split(',').count();
        let row_step = line.split(',').next().and_then(|s| s.parse::<u64>().ok());
        match row_step {
            Some(s) if s <= step && COLUMNS.contains(&fields) => kept.push(line.to_string()),
            _ => {}
        }
    }
    let mut out = kept.join("\n");
    out.push('\n');
    write_atomic(path, out.as_bytes())
}

/// Parses `steps.csv` (written by [`append_steps`]).
pub fn read_steps(path: &Path) -> Result<Vec<StepRow>, StoreError> {
    let text = fs::read_to_string(path).map_err(|e| StoreError::io(path, e))?;
    text.lines()
        .enumerate()
        .skip(1)
        .map(|(i, line)| {
            StepRow::parse(line)
                .ok_or_else(|| StoreError::corrupt(path, format!("line {}: `{line}`", i + 1)))
        })
        .collect()
}

impl StepRow {
    /// The row of a steps.csv line; None if it is not one.
    pub fn parse(line: &str) -> Option<Self> {
        let f: Vec<&str> = line.split(',').collect();
        if !COLUMNS.contains(&f.len()) {
            return None;
        }
        let opt = |s: &str| -> Option<Option<f32>> {
            match s {
                "" => Some(None),
                s => s.parse().ok().map(Some),
            }
        };
        Some(Self {
            step: f[0].parse().ok()?,
            tokens: f[1].parse().ok()?,
            lr: f[2].parse().ok()?,
            loss_train: f[3].parse().ok()?,
            loss_val: opt(f[4])?,
            acc_val: opt(f[5])?,
            flops_exact: f[6].parse().ok()?,
            flops_6nd: f[7].parse().ok()?,
            wall_s: f[8].parse().ok()?,
            tokens_per_s: f[9].parse().ok()?,
            grad_norm: f.get(10).map_or(Some(None), |s| opt(s))?,
        })
    }

    /// The row as steps.csv stores it (times and rates rounded), so that what is logged
    /// elsewhere (TensorBoard) equals what the file holds.
    pub fn as_stored(&self) -> Self {
        Self::parse(&self.to_csv()).unwrap_or_else(|| self.clone())
    }
}

/// One probe value: `metric` (in_rms, out_rms, grad_norm) of sublayer `layer` at `step`.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerRow {
    pub step: u64,
    pub layer: u32,
    /// `attn` or `mlp`.
    pub kind: String,
    pub metric: String,
    pub value: f32,
}

/// The mean weight of `source` in mixing step `layer` (`L` is the output step) at `step`.
#[derive(Debug, Clone, PartialEq)]
pub struct DepthRow {
    pub step: u64,
    pub layer: u32,
    pub source: u32,
    pub weight: f32,
}

fn write_parquet(path: &Path, df: &mut DataFrame) -> Result<(), StoreError> {
    let tmp = tmp_path(path);
    let written = fs::File::create(&tmp)
        .map_err(|e| StoreError::io(&tmp, e))
        .and_then(|file| {
            ParquetWriter::new(file)
                .finish(df)
                .map_err(|e| StoreError::write(&tmp, e))
        })
        .and_then(|_| fs::rename(&tmp, path).map_err(|e| StoreError::io(path, e)));
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written.map(|_| ())
}

fn read_parquet(path: &Path) -> Result<Option<DataFrame>, StoreError> {
    if !path.exists() {
        return Ok(None);
    }
    let file = fs::File::open(path).map_err(|e| StoreError::io(path, e))?;
    ParquetReader::new(file)
        .finish()
        .map(Some)
        .map_err(|e| StoreError::corrupt(path, e))
}

pub fn write_layers(path: &Path, rows: &[LayerRow]) -> Result<(), StoreError> {
    let mut df = df!(
        "step" => rows.iter().map(|r| r.step).collect::<Vec<_>>(),
        "layer" => rows.iter().map(|r| r.layer).collect::<Vec<_>>(),
        "kind" => rows.iter().map(|r| r.kind.as_str()).collect::<Vec<_>>(),
        "metric" => rows.iter().map(|r| r.metric.as_str()).collect::<Vec<_>>(),
        "value" => rows.iter().map(|r| r.value).collect::<Vec<_>>(),
    )
    .map_err(|e| StoreError::corrupt(path, e))?;
    write_parquet(path, &mut df)
}

pub fn write_depth(path: &Path, rows: &[DepthRow]) -> Result<(), StoreError> {
    let mut df = df!(
        "step" => rows.iter().map(|r| r.step).collect::<Vec<_>>(),
        "layer" => rows.iter().map(|r| r.layer).collect::<Vec<_>>(),
        "source" => rows.iter().map(|r| r.source).collect::<Vec<_>>(),
        "weight" => rows.iter().map(|r| r.weight).collect::<Vec<_>>(),
    )
    .map_err(|e| StoreError::corrupt(path, e))?;
    write_parquet(path, &mut df)
}

fn column<'a>(df: &'a DataFrame, path: &Path, name: &str) -> Result<&'a Column, StoreError> {
    df.column(name).map_err(|e| StoreError::corrupt(path, e))
}

/// Rows of `layers.parquet` up to `max_step` (all of them when None).
pub fn read_layers(path: &Path, max_step: Option<u64>) -> Result<Vec<LayerRow>, StoreError> {
    let Some(df) = read_parquet(path)? else {
        return Ok(Vec::new());
    };
    let bad = |e: PolarsError| StoreError::corrupt(path, e);
    let step = column(&df, path, "step")?.u64().map_err(bad)?;
    let layer = column(&df, path, "layer")?.u32().map_err(bad)?;
    let kind = column(&df, path, "kind")?.str().map_err(bad)?;
    let metric = column(&df, path, "metric")?.str().map_err(bad)?;
    let value = column(&df, path, "value")?.f32().map_err(bad)?;
    let mut rows = Vec::with_capacity(df.height());
    for i in 0..df.height() {
        let (Some(s), Some(l), Some(k), Some(m), Some(v)) = (
            step.get(i),
            layer.get(i),
            kind.get(i),
            metric.get(i),
            value.get(i),
        ) else {
            return Err(StoreError::corrupt(path, format!("null in row {i}")));
        };
        if max_step.is_none_or(|max| s <= max) {
            rows.push(LayerRow {
                step: s,
                layer: l,
                kind: k.to_string(),
                metric: m.to_string(),
                value: v,
            });
        }
    }
    Ok(rows)
}

/// Rows of `depth_attn.parquet` up to `max_step` (all of them when None).
pub fn read_depth(path: &Path, max_step: Option<u64>) -> Result<Vec<DepthRow>, StoreError> {
    let Some(df) = read_parquet(path)? else {
        return Ok(Vec::new());
    };
    let bad = |e: PolarsError| StoreError::corrupt(path, e);
    let step = column(&df, path, "step")?.u64().map_err(bad)?;
    let layer = column(&df, path, "layer")?.u32().map_err(bad)?;
    let source = column(&df, path, "source")?.u32().map_err(bad)?;
    let weight = column(&df, path, "weight")?.f32().map_err(bad)?;
    let mut rows = Vec::with_capacity(df.height());
    for i in 0..df.height() {
        let (Some(s), Some(l), Some(src), Some(w)) =
            (step.get(i), layer.get(i), source.get(i), weight.get(i))
        else {
            return Err(StoreError::corrupt(path, format!("null in row {i}")));
        };
        if max_step.is_none_or(|max| s <= max) {
            rows.push(DepthRow {
                step: s,
                layer: l,
                source: src,
                weight: w,
            });
        }
    }
    Ok(rows)
}
