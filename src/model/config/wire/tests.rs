//! Tests of the residual family's YAML/JSON form: parsing, defaults, round trips and the errors.

use crate::model::config::ResidualConfig;

fn parse(yaml: &str) -> Result<ResidualConfig, String> {
    serde_yaml_ng::from_str(yaml).map_err(|e| e.to_string())
}

#[test]
fn residual_accepts_names_and_maps_and_round_trips() {
    assert_eq!(parse("baseline").unwrap(), ResidualConfig::Baseline);
    assert_eq!(parse("full").unwrap(), ResidualConfig::full());
    assert_eq!(
        parse("{variant: block, block_size: 4}").unwrap(),
        ResidualConfig::block(4)
    );
    let ablation = parse("{variant: full, key_norm: false, heads: 2}").unwrap();
    let json = serde_json::to_string(&ablation).unwrap();
    assert_eq!(json, r#"{"variant":"full","key_norm":false,"heads":2}"#);
    assert_eq!(
        serde_json::from_str::<ResidualConfig>(&json).unwrap(),
        ablation
    );
}

#[test]
fn residual_errors_say_what_to_do() {
    assert!(parse("block").unwrap_err().contains("needs `block_size`"));
    assert!(
        parse("{variant: full, block_size: 4}")
            .unwrap_err()
            .contains("use `variant: block`")
    );
    assert!(
        parse("{variant: baseline, heads: 2}")
            .unwrap_err()
            .contains("apply only to `full` and `block`")
    );
    assert!(
        parse("{variant: block, block_sz: 4}")
            .unwrap_err()
            .contains("block_sz")
    );
    assert!(parse("blok").unwrap_err().contains("blok"));
    assert!(
        parse("{variant: mhc_lite, streams: 7}")
            .unwrap_err()
            .contains("`mhc_lite` takes 2 to 6 streams, got 7")
    );
    assert!(
        parse("{variant: hc, block_size: 2}")
            .unwrap_err()
            .contains("it takes `streams` and `dynamic`")
    );
    assert!(
        parse("{variant: mhc_lite, sinkhorn_iters: 5}")
            .unwrap_err()
            .contains("applies only to `mhc`")
    );
    assert!(
        parse("{variant: block, block_size: 2, streams: 4}")
            .unwrap_err()
            .contains("only to the multi-stream variants")
    );
}

#[test]
fn per_depth_block_sizes_parse_and_round_trip() {
    use crate::model::config::AttnResConfig;
    let r = parse("{variant: block, block_sizes: [2, 2, 4]}").unwrap();
    assert_eq!(
        r,
        ResidualConfig::AttnRes(AttnResConfig::per_depth(vec![2, 2, 4]))
    );
    assert_eq!(r.label(), "block S=2,2,4");
    assert_eq!(r.variant(), "block");
    assert!(!r.is_plain(), "not on the block-size axis");
    let json = serde_json::to_string(&r).unwrap();
    assert_eq!(json, r#"{"variant":"block","block_sizes":[2,2,4]}"#);
    assert_eq!(serde_json::from_str::<ResidualConfig>(&json).unwrap(), r);
    for (yaml, says) in [
        (
            "{variant: block, block_size: 2, block_sizes: [2, 2]}",
            "not both",
        ),
        (
            "{variant: full, block_sizes: [2, 2]}",
            "only to `variant: block`",
        ),
        ("{variant: block, block_sizes: [1, 1]}", "write `full`"),
        ("{variant: block, block_sizes: [2, 0]}", "at least 1"),
        ("{variant: block, block_sizes: []}", "at least 1"),
        ("{variant: hc, block_sizes: [2]}", "do not apply to `hc`"),
        (
            "{variant: full, value_residual: true}",
            "sweep's `residual` entry",
        ),
    ] {
        let e = parse(yaml).unwrap_err();
        assert!(e.contains(says), "{yaml}: {e}");
    }
}

#[test]
fn multi_stream_variants_parse_and_round_trip() {
    use crate::model::config::HyperConfig;
    assert_eq!(
        parse("hc").unwrap(),
        ResidualConfig::Hyper(HyperConfig::hc(4))
    );
    assert_eq!(
        parse("{variant: mhc, streams: 2}").unwrap(),
        ResidualConfig::Hyper(HyperConfig::mhc(2))
    );
    for yaml in [
        "{variant: hc, streams: 1, dynamic: false}",
        "{variant: mhc, streams: 4, sinkhorn_iters: 5}",
        "mhc_lite",
    ] {
        let r = parse(yaml).unwrap();
        let json = serde_json::to_string(&r).unwrap();
        assert_eq!(
            serde_json::from_str::<ResidualConfig>(&json).unwrap(),
            r,
            "{json}"
        );
    }
}
