//! `compare` runs one workload on several targets and draws grouped bars as
//! SVG and PNG; the SVG names every phase and target, the PNG is a real PNG
//! of the expected size, and the JSON carries machine, versions, command line
//! and one sample per iteration.

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
    let chart = out.path().join("charts/cmp");
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
    assert_eq!(
        files,
        vec![chart.with_extension("svg"), chart.with_extension("png")]
    );

    let svg = std::fs::read_to_string(chart.with_extension("svg")).expect("svg");
    assert!(svg.starts_with("<svg"), "{}", &svg[..80.min(svg.len())]);
    for phase in [
        "Tree creation",
        "Directory creation",
        "Directory stat",
        "Directory removal",
        "File creation",
        "File stat",
        "File read",
        "File removal",
        "Tree removal",
    ] {
        assert!(
            svg.contains(&format!(">{phase}<"))
                || svg.contains(&format!(">\n{phase}\n<"))
                || svg.contains(phase),
            "SVG lacks phase {phase}"
        );
    }
    assert!(
        svg.contains("alpha") && svg.contains("beta"),
        "SVG lacks target names"
    );
    assert!(svg.contains("ops/s"), "SVG lacks the unit");
    assert!(
        svg.matches("<rect").count() >= 2 * 9,
        "expected a bar per target per phase"
    );

    let png = std::fs::read(chart.with_extension("png")).expect("png");
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
fn sweep_line_chart_names_phases_and_parameter() {
    let out = tempfile::tempdir().expect("tempdir");
    let s = |v: f64| Summary::of(&[v, v * 1.1]);
    let chart = LineChart {
        title: "sweep".into(),
        x_label: "mdts".into(),
        xs: vec![1.0, 2.0, 4.0],
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
    let svg = std::fs::read_to_string(&files[0]).expect("svg");
    assert!(svg.contains("File creation") && svg.contains("File removal") && svg.contains("mdts"));
    assert!(
        svg.contains("<polyline") || svg.contains("<path"),
        "no line drawn"
    );
    assert_eq!(&std::fs::read(&files[1]).expect("png")[..4], b"\x89PNG");
}
