//! Results: the JSON document every command can write (machine, versions,
//! command line, options, per-iteration figures) and the text tables printed
//! on stdout, laid out like mdtest's and IOR's summaries.

use std::fmt::Write as _;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::error::{BenchError, Result};
use crate::machine::{Machine, Versions};
use crate::stats::Summary;

/// One iteration's figure of one phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Iteration number, from 0.
    pub iteration: u32,
    /// The figure, in the phase's unit.
    pub value: f64,
    /// Operations done.
    pub ops: u64,
    /// Bytes moved.
    pub bytes: u64,
    /// Wall time of the phase.
    pub seconds: f64,
}

/// All iterations of one phase on one target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseResult {
    /// Phase name, e.g. `File creation`, `write`, `ior-hard-read`.
    pub phase: String,
    /// Unit of the samples' values.
    pub unit: String,
    /// One sample per iteration.
    pub samples: Vec<Sample>,
}

impl PhaseResult {
    /// The values of all iterations.
    pub fn values(&self) -> Vec<f64> {
        self.samples.iter().map(|s| s.value).collect()
    }

    /// Max, min, mean and standard deviation of the values.
    pub fn summary(&self) -> Option<Summary> {
        Summary::of(&self.values())
    }

    /// Operations per second of each iteration.
    pub fn ops_rates(&self) -> Vec<f64> {
        self.samples
            .iter()
            .map(|s| {
                if s.seconds > 0.0 {
                    s.ops as f64 / s.seconds
                } else {
                    0.0
                }
            })
            .collect()
    }
}

/// All phases of one target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetResult {
    /// Name of the target.
    pub name: String,
    /// Its path or address.
    pub location: String,
    /// Its file system type.
    pub fs_type: String,
    /// Phases in the order they ran.
    pub phases: Vec<PhaseResult>,
}

impl TargetResult {
    /// The phase called `name`.
    pub fn phase(&self, name: &str) -> Option<&PhaseResult> {
        self.phases.iter().find(|p| p.phase == name)
    }
}

/// A summary as written into JSON next to the samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseSummary {
    /// Target name.
    pub target: String,
    /// Phase name.
    pub phase: String,
    /// Unit.
    pub unit: String,
    /// Statistics over iterations.
    pub summary: Summary,
}

/// The JSON document of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Always `loom bench`.
    pub tool: String,
    /// `md`, `io`, `io500`, `compare`, `sweep`.
    pub command: String,
    /// The workload (`md`, `io`, `io500`).
    pub workload: String,
    /// Seconds since the Unix epoch when the run started.
    pub started_unix: u64,
    /// The command line as given.
    pub command_line: Vec<String>,
    /// Where it ran.
    pub machine: Machine,
    /// What ran it.
    pub versions: Versions,
    /// The workload's options.
    pub options: serde_json::Value,
    /// Per-target, per-phase, per-iteration figures.
    pub targets: Vec<TargetResult>,
    /// Statistics of each phase of each target.
    pub summaries: Vec<PhaseSummary>,
    /// Remarks (e.g. "not an official IO500 run").
    pub notes: Vec<String>,
}

impl Report {
    /// A report of `targets`, stamped with this machine, build and command line.
    pub fn new(
        command: &str,
        workload: &str,
        options: serde_json::Value,
        targets: Vec<TargetResult>,
        started: SystemTime,
    ) -> Self {
        let summaries = targets
            .iter()
            .flat_map(|t| {
                t.phases.iter().filter_map(|p| {
                    p.summary().map(|summary| PhaseSummary {
                        target: t.name.clone(),
                        phase: p.phase.clone(),
                        unit: p.unit.clone(),
                        summary,
                    })
                })
            })
            .collect();
        Report {
            tool: "loom bench".to_string(),
            command: command.to_string(),
            workload: workload.to_string(),
            started_unix: started
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            command_line: std::env::args().collect(),
            machine: Machine::current(),
            versions: Versions::current(),
            options,
            targets,
            summaries,
            notes: Vec::new(),
        }
    }

    /// Writes the report as pretty JSON to `path`.
    pub fn write_json(&self, path: &Path) -> Result<()> {
        write_json(path, self)
    }
}

/// Writes any serialisable value as pretty JSON.
pub fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| BenchError::io("encode json", path, std::io::Error::other(e)))?;
    std::fs::write(path, text + "\n").map_err(|e| BenchError::io("write", path, e))
}

/// Formats a figure with three decimals like mdtest, switching to
/// scientific notation only for huge values.
pub fn fmt_value(v: f64) -> String {
    if v.abs() >= 1e12 {
        format!("{v:.3e}")
    } else {
        format!("{v:.3}")
    }
}

/// The text summary of one target, in mdtest's layout (Max, Min, Mean,
/// Std Dev per phase); bandwidth phases also get IOR's operations-per-second
/// columns.
pub fn summary_table(t: &TargetResult) -> String {
    let iterations = t.phases.iter().map(|p| p.samples.len()).max().unwrap_or(0);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "SUMMARY {} ({}, {}): (of {iterations} iteration{})",
        t.name,
        t.location,
        t.fs_type,
        if iterations == 1 { "" } else { "s" }
    );
    let _ = writeln!(
        out,
        "   {:<24}  {:>14} {:>14} {:>14} {:>14}  {:<6}",
        "Operation", "Max", "Min", "Mean", "Std Dev", "Unit"
    );
    let _ = writeln!(
        out,
        "   {:<24}  {:>14} {:>14} {:>14} {:>14}",
        "---------", "---", "---", "----", "-------"
    );
    for p in &t.phases {
        let Some(s) = p.summary() else { continue };
        let _ = writeln!(
            out,
            "   {:<22}  : {:>14} {:>14} {:>14} {:>14}  {}",
            p.phase,
            fmt_value(s.max),
            fmt_value(s.min),
            fmt_value(s.mean),
            fmt_value(s.stddev),
            p.unit
        );
        let is_bandwidth = p.samples.iter().any(|s| s.bytes > 0) && p.unit.ends_with("iB/s");
        if is_bandwidth {
            if let Some(o) = Summary::of(&p.ops_rates()) {
                let _ = writeln!(
                    out,
                    "   {:<22}  : {:>14} {:>14} {:>14} {:>14}  ops/s",
                    format!("{} (ops)", p.phase),
                    fmt_value(o.max),
                    fmt_value(o.min),
                    fmt_value(o.mean),
                    fmt_value(o.stddev),
                );
            }
        }
    }
    out
}

/// The side-by-side table of `compare`: mean ± stddev per target and the
/// ratio of each target's mean to the first target's.
pub fn compare_table(targets: &[TargetResult]) -> String {
    let mut out = String::new();
    let Some(first) = targets.first() else {
        return out;
    };
    let mut header = format!("{:<24} {:<7}", "phase", "unit");
    for t in targets {
        let _ = write!(header, " {:>26}", format!("{} median (min–max)", t.name));
    }
    for t in targets.iter().skip(1) {
        let _ = write!(header, " {:>14}", format!("{}/{}", t.name, first.name));
    }
    let _ = writeln!(out, "{header}");
    let _ = writeln!(out, "{}", "-".repeat(header.chars().count()));
    for p in &first.phases {
        let mut line = format!("{:<24} {:<7}", p.phase, p.unit);
        let means: Vec<Option<Summary>> = targets
            .iter()
            .map(|t| t.phase(&p.phase).and_then(|q| q.summary()))
            .collect();
        for m in &means {
            let cell = match m {
                Some(s) => format!(
                    "{} ({}–{})",
                    fmt_sig(s.median),
                    fmt_sig(s.min),
                    fmt_sig(s.max)
                ),
                None => "-".to_string(),
            };
            let _ = write!(line, " {cell:>26}");
        }
        for m in means.iter().skip(1) {
            let cell = match (m, &means[0]) {
                (Some(s), Some(b)) if b.median > 0.0 => format!("{:.2}x", s.median / b.median),
                _ => "-".to_string(),
            };
            let _ = write!(line, " {cell:>14}");
        }
        let _ = writeln!(out, "{line}");
    }
    out
}

/// A compact number for tables: 4 significant digits, no exponent below 1e9.
pub fn fmt_sig(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".to_string()
    } else if a >= 1e9 {
        format!("{v:.3e}")
    } else if a >= 1000.0 {
        format!("{v:.0}")
    } else if a >= 100.0 {
        format!("{v:.1}")
    } else if a >= 10.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(name: &str, values: &[f64]) -> TargetResult {
        TargetResult {
            name: name.into(),
            location: format!("/x/{name}"),
            fs_type: "tmpfs".into(),
            phases: vec![PhaseResult {
                phase: "File creation".into(),
                unit: "ops/s".into(),
                samples: values
                    .iter()
                    .enumerate()
                    .map(|(i, v)| Sample {
                        iteration: i as u32,
                        value: *v,
                        ops: 10,
                        bytes: 0,
                        seconds: 1.0,
                    })
                    .collect(),
            }],
        }
    }

    #[test]
    fn summary_table_prints_mdtest_columns() {
        let t = target("a", &[100.0, 200.0, 300.0]);
        let text = summary_table(&t);
        assert!(text.contains("(of 3 iterations)"), "{text}");
        assert!(text.contains("File creation"));
        assert!(text.contains("300.000") && text.contains("100.000") && text.contains("200.000"));
    }

    #[test]
    fn compare_table_shows_ratio_to_first_target() {
        let text = compare_table(&[target("a", &[100.0]), target("b", &[250.0])]);
        assert!(text.contains("b/a"), "{text}");
        assert!(text.contains("2.50x"), "{text}");
    }
}
