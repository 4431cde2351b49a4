//! `compare` runs one workload on several targets and draws grouped bars as
//! SVG and PNG; the SVG names every phase and target and has exactly one bar
//! per target in every phase's panel, the PNG is a real PNG of the expected
//! size, and the JSON carries machine, versions, command line and one sample
//! per iteration. A sweep's line chart has one line per phase through
//! exactly the points given, placed by their values.

mod common;

use std::collections::BTreeMap;

use clap::Parser;
use loom_bench::chart::{write_lines, LineChart, Panel};
use loom_bench::cli::{run_compare, BenchCommand, CompareWorkload};
use loom_bench::report::Report;
use loom_bench::stats::Summary;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: loom_bench::BenchArgs,
}

#[test]
fn compare_of_two_directories_draws_every_phase_and_target() {
    let a = tempfile::tempdir().expect("tempdir");
    let b = tempfile::tempdir().expect("tempdir");
    let out = tempfile::tempdir().expect("tempdir");
    // Dots in the name stay: <name>.svg is appended, not substituted.
    let chart = out.path().join("charts/cmp.v1.2");
    let (svg_path, png_path) = (
        out.path().join("charts/cmp.v1.2.svg"),
        out.path().join("charts/cmp.v1.2.png"),
    );
    let json = out.path().join("cmp.json");
    let argv = [
        "loom-bench".to_string(),
        "compare".into(),
        "md".into(),
        "-n".into(),
        "30".into(),
        "-p".into(),
        "2".into(),
        "-i".into(),
        "2".into(),
        "-w".into(),
        "64".into(),
        "-e".into(),
        "64".into(),
        "--chart".into(),
        chart.display().to_string(),
        "--json".into(),
        json.display().to_string(),
        format!("alpha={}", a.path().display()),
        format!("beta={}", b.path().display()),
    ];
    let cli = Cli::try_parse_from(&argv).expect("parses");
    let BenchCommand::Compare(c) = cli.args.command else {
        panic!("not compare")
    };
    let CompareWorkload::Md { opts, cmp } = c.workload else {
        panic!("not md")
    };
    let plan = loom_bench::md::MdPlan::new(opts).expect("plan");
    let files = run_compare(&plan, &cmp, &[]).expect("compare runs");
    assert_eq!(files, vec![svg_path.clone(), png_path.clone()]);

    let svg = std::fs::read_to_string(&svg_path).expect("svg");
    assert!(svg.starts_with("<svg"), "{}", &svg[..80.min(svg.len())]);
    let phases = [
        "Tree creation",
        "Directory creation",
        "Directory stat",
        "Directory removal",
        "File creation",
        "File stat",
        "File read",
        "File removal",
        "Tree removal",
    ];
    let texts = common::svg_texts(&svg);
    let has = |t: &str| texts.iter().any(|x| x == t);
    for phase in phases {
        assert!(has(phase), "SVG lacks phase {phase}: {texts:?}");
    }
    assert!(has("alpha") && has("beta"), "SVG lacks target names");
    assert!(svg.contains("ops/s"), "SVG lacks the unit");
    // Bars are the translucent rectangles; every panel has exactly one bar
    // per target, each target in its own colour.
    let mut bars: BTreeMap<(usize, String), usize> = BTreeMap::new();
    for r in common::svg_elements(&svg, "rect")
        .iter()
        .filter(|r| r.get("opacity").map(String::as_str) == Some("0.8"))
    {
        let (x, y) = (common::num(r, "x"), common::num(r, "y"));
        assert!(common::num(r, "height") > 0.0, "empty bar {r:?}");
        *bars
            .entry((common::panel_of(x, y, phases.len()), r["fill"].clone()))
            .or_default() += 1;
    }
    let colours: std::collections::BTreeSet<&String> = bars.keys().map(|(_, c)| c).collect();
    assert_eq!(colours.len(), 2, "one colour per target: {bars:?}");
    for (panel, phase) in phases.iter().enumerate() {
        for c in &colours {
            assert_eq!(
                bars.get(&(panel, (*c).clone())),
                Some(&1),
                "panel {panel} ({phase}) should have one {c} bar: {bars:?}"
            );
        }
    }
    assert_eq!(bars.values().sum::<usize>(), 2 * phases.len());

    let png = std::fs::read(&png_path).expect("png");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    // IHDR width and height: 3 panels wide, 3 rows of panels plus the title.
    let w = u32::from_be_bytes([png[16], png[17], png[18], png[19]]);
    let h = u32::from_be_bytes([png[20], png[21], png[22], png[23]]);
    assert_eq!((w, h), (3 * 380, 50 + 3 * 300));

    let report: Report =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json")).expect("parses");
    assert_eq!(report.command, "compare");
    assert_eq!(report.targets.len(), 2);
    assert!(report.machine.cpus >= 1 && !report.machine.kernel.is_empty());
    assert!(report.versions.rustc.starts_with("rustc"));
    assert!(!report.command_line.is_empty());
    for t in &report.targets {
        assert_eq!(t.phases.len(), 9);
        assert!(t.phases.iter().all(|p| p.samples.len() == 2));
    }
    assert_eq!(report.summaries.len(), 18);
    // Nothing left in either target.
    assert_eq!(std::fs::read_dir(a.path()).expect("a").count(), 0);
    assert_eq!(std::fs::read_dir(b.path()).expect("b").count(), 0);
}

#[test]
fn sweep_line_chart_draws_each_phase_through_its_points() {
    let out = tempfile::tempdir().expect("tempdir");
    let s = |v: f64| Summary::of(&[v, v * 1.1]);
    let chart = LineChart {
        title: "sweep".into(),
        x_label: "mdts".into(),
        xs: vec![1.0, 2.0, 4.0],
        series: vec![],
        panels: vec![
            Panel {
                title: "File creation".into(),
                unit: "ops/s".into(),
                values: vec![s(100.0), s(180.0), s(300.0)],
            },
            Panel {
                title: "File removal".into(),
                unit: "ops/s".into(),
                values: vec![s(90.0), None, s(250.0)],
            },
        ],
    };
    let files = write_lines(&out.path().join("sweep"), &chart).expect("chart");
    assert_eq!(
        files,
        [out.path().join("sweep.svg"), out.path().join("sweep.png")]
    );
    let svg = std::fs::read_to_string(&files[0]).expect("svg");
    let texts = common::svg_texts(&svg);
    let has = |t: &str| texts.iter().any(|x| x == t);
    assert!(has("File creation") && has("File removal"), "{texts:?}");
    assert!(has("mdts"), "x axis not labelled: {texts:?}");

    // The data lines are the 2-pixel polylines: one per panel, through the
    // points that have values (the missing one is skipped, not drawn at 0).
    let lines: Vec<Vec<(f64, f64)>> = common::svg_elements(&svg, "polyline")
        .iter()
        .filter(|l| l.get("stroke-width").map(String::as_str) == Some("2"))
        .map(common::points)
        .collect();
    assert_eq!(lines.len(), 2, "one data line per panel: {lines:?}");
    let (a, b) = (&lines[0], &lines[1]);
    assert_eq!((a.len(), b.len()), (3, 2), "{lines:?}");
    assert!(a.iter().all(|p| common::panel_of(p.0, p.1, 2) == 0));
    assert!(b.iter().all(|p| common::panel_of(p.0, p.1, 2) == 1));
    // x is linear in the swept value (1, 2, 4); y linear in the mean, and
    // higher means are drawn higher (smaller y). Pixels are whole numbers.
    let means = [105.0, 189.0, 315.0];
    let slope_x = (a[2].0 - a[0].0) / 3.0;
    assert!((a[1].0 - (a[0].0 + slope_x)).abs() <= 1.0, "{a:?}");
    let slope_y = (a[2].1 - a[0].1) / (means[2] - means[0]);
    assert!(slope_y < 0.0, "higher values must be drawn higher: {a:?}");
    let expect_y1 = a[0].1 + slope_y * (means[1] - means[0]);
    assert!((a[1].1 - expect_y1).abs() <= 1.5, "{a:?}");
    // The second panel's points sit at x = 1 and 4, one panel width along.
    assert!((b[0].0 - (a[0].0 + 380.0)).abs() <= 1.0, "{b:?}");
    assert!((b[1].0 - (a[2].0 + 380.0)).abs() <= 1.0, "{b:?}");
    assert!(b[1].1 < b[0].1, "250 is drawn above 94.5: {b:?}");
    let dots = common::svg_elements(&svg, "circle")
        .iter()
        .filter(|c| c.get("r").map(String::as_str) == Some("4"))
        .count();
    assert_eq!(dots, 5, "a dot per value");
    assert_eq!(&std::fs::read(&files[1]).expect("png")[..4], b"\x89PNG");
}

#[test]
fn sweep_line_chart_draws_a_line_per_series_with_a_legend() {
    let out = tempfile::tempdir().expect("tempdir");
    let s = |v: f64| Summary::of(&[v]);
    // Series-major: remote at 1, 2, 4, then striped at 1, 2, 4.
    let chart = LineChart {
        title: "dir-stripe".into(),
        x_label: "dir-stripe".into(),
        xs: vec![1.0, 2.0, 4.0],
        series: vec!["remote".into(), "striped".into()],
        panels: vec![Panel {
            title: "File creation".into(),
            unit: "ops/s".into(),
            values: vec![s(100.0), s(100.0), s(100.0), s(100.0), s(190.0), s(350.0)],
        }],
    };
    let files = write_lines(&out.path().join("ds"), &chart).expect("chart");
    let svg = std::fs::read_to_string(&files[0]).expect("svg");
    let texts = common::svg_texts(&svg);
    let has = |t: &str| texts.iter().any(|x| x == t);
    assert!(has("remote") && has("striped"), "no legend: {texts:?}");
    let lines: Vec<Vec<(f64, f64)>> = common::svg_elements(&svg, "polyline")
        .iter()
        .filter(|l| l.get("stroke-width").map(String::as_str) == Some("2"))
        .map(common::points)
        .filter(|l| l.len() == 3)
        .collect();
    assert_eq!(lines.len(), 2, "a data line per series: {lines:?}");
    let (remote, striped) = (&lines[0], &lines[1]);
    // The flat series stays level; the rising one climbs (smaller y).
    assert!(
        remote.iter().all(|p| (p.1 - remote[0].1).abs() <= 1.0),
        "{remote:?}"
    );
    assert!(
        striped[2].1 < striped[1].1 && striped[1].1 < striped[0].1,
        "{striped:?}"
    );
    assert!(
        (striped[0].1 - remote[0].1).abs() <= 1.0,
        "both start at 100: {lines:?}"
    );
}
