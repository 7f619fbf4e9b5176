//! The cost figure's input: per-token depth I/O and extra kept state of each arm of a sweep as
//! functions of depth, `L = 8 .. 256` layers (docs/cost.md, sections 1 and "Extra state").
//! Full AttnRes is costed under the two-phase schedule with `N = 8` groups and Block AttnRes
//! with `N = 8` blocks of `S = L / 8` layers, Table 1's convention: the paper holds the block
//! count near 8 as depth grows, so an arm's own small-model `S` would overstate Block's cost
//! at depth. Ablation options (window, heads, ...) do not change these counts and are ignored.

use crate::cost::io::Scheme;
use crate::model::config::{HyperKind, ResidualConfig};

/// Depths drawn, in layers (sublayers).
pub const DEPTHS: [usize; 6] = [8, 16, 32, 64, 128, 256];

/// One arm's cost against depth, both in units of `d` per token.
#[derive(Debug, Clone, PartialEq)]
pub struct CostCurve {
    pub arm: String,
    /// (L, reads + writes per layer).
    pub io: Vec<(f64, f64)>,
    /// (L, d-vectors kept beyond a standard residual's one hidden state).
    pub state: Vec<(f64, f64)>,
}

/// The residual scheme of `residual` in a model of `layers` layers.
pub fn scheme_at(residual: &ResidualConfig, layers: usize) -> Scheme {
    let l = layers as f64;
    match residual {
        ResidualConfig::Baseline => Scheme::Standard,
        ResidualConfig::Denseformer => Scheme::DenseFormer { blocks: l / 2.0 },
        ResidualConfig::Hyper(h) if h.kind == HyperKind::MhcAttnRes => Scheme::MhcAttnRes {
            m: h.streams as f64,
            s: l / 8.0,
            n: 8.0,
        },
        // HC and mHC-lite move the same m streams per layer as mHC.
        ResidualConfig::Hyper(h) => Scheme::Mhc {
            m: h.streams as f64,
        },
        ResidualConfig::AttnRes(c) if c.is_full() => Scheme::Full { s: l / 8.0, n: 8.0 },
        // Every Block arm, uniform or with blocks of their own lengths: 8 blocks at any depth.
        ResidualConfig::AttnRes(_) => Scheme::Block {
            s: (l / 8.0).max(1.0),
            n: 8.0f64.min(l),
        },
    }
}

/// One curve per distinct cost, in the order given: arms whose counts coincide (ablations
/// of one family at one block size) share a curve, named after the first with the number of
/// others.
pub fn cost_curves(arms: &[ResidualConfig]) -> Vec<CostCurve> {
    let mut out: Vec<CostCurve> = Vec::new();
    let mut labels: Vec<String> = Vec::new();
    let mut shared: Vec<usize> = Vec::new();
    for residual in arms {
        let arm = residual.label();
        if labels.contains(&arm) {
            continue;
        }
        labels.push(arm.clone());
        let at = |f: &dyn Fn(&Scheme) -> f64| -> Vec<(f64, f64)> {
            DEPTHS
                .iter()
                .map(|&l| (l as f64, f(&scheme_at(residual, l))))
                .collect()
        };
        let curve = CostCurve {
            io: at(&|s| s.total().vectors),
            state: at(&|s| s.extra_state()),
            arm,
        };
        match out
            .iter()
            .position(|c| c.io == curve.io && c.state == curve.state)
        {
            Some(i) => shared[i] += 1,
            None => {
                out.push(curve);
                shared.push(0);
            }
        }
    }
    for (c, n) in out.iter_mut().zip(shared) {
        if n > 0 {
            c.arm = format!("{} (+{n} with the same cost)", c.arm);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// At L = 128, the arms reproduce Table 1's Standard, Full and Block (S = 16) totals.
    #[test]
    fn curves_pass_through_table1() {
        let curves = cost_curves(&[
            ResidualConfig::Baseline,
            ResidualConfig::full(),
            ResidualConfig::block(16),
            ResidualConfig::block(16),
        ]);
        assert_eq!(curves.len(), 3, "repeated arms are drawn once");
        let mut ablation = crate::model::config::AttnResConfig::block(1);
        ablation.key_norm = false;
        let merged = cost_curves(&[ResidualConfig::full(), ResidualConfig::AttnRes(ablation)]);
        assert_eq!(merged.len(), 1);
        assert_eq!(merged[0].arm, "full (+1 with the same cost)");
        let at128 = |c: &CostCurve| c.io.iter().find(|p| p.0 == 128.0).unwrap().1;
        assert_eq!(at128(&curves[0]), 3.0);
        assert_eq!(at128(&curves[1]), 24.0);
        assert_eq!(at128(&curves[2]), 5.5);
        // Full keeps every layer output; Block its 8 summaries and the partial sum.
        assert_eq!(curves[1].state.last(), Some(&(256.0, 256.0)));
        assert_eq!(curves[2].state.last(), Some(&(256.0, 9.0)));
    }
}
