//! Issue #12: the dashboard opened in headless Chromium (Debian's
//! `chromium`) after a job ran: a screenshot is taken at a laptop's
//! screen size, and the numbers the page shows once its script ran (the
//! job's operations, the targets' state) match the servers' counters as
//! `loom jobstats` reads them.
mod common;
use common::*;
use std::process::Command;

fn chromium(tmp: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
        ])
        .arg(format!(
            "--user-data-dir={}",
            tmp.join("chromium").display()
        ))
        .args(["--window-size=1366,900", "--virtual-time-budget=4000"])
        .args(args)
        .output()
        .expect("chromium (Debian package chromium)")
}

/// The text of the cell of class `total` in the row `data-id="id"`.
fn total_of(dom: &str, id: &str) -> Option<u64> {
    let row = dom.split(&format!("<tr data-id=\"{id}\">")).nth(1)?;
    let row = row.split("</tr>").next()?;
    let cell = row.split("<td class=\"total\">").nth(1)?;
    cell.split('<').next()?.trim().parse().ok()
}

#[test]
fn the_dashboard_in_a_browser_matches_the_servers() {
    let c = Cluster::up(1, 2, &[]);
    let port = c.port("dashboard").expect("a dashboard port");
    let dir = c.path("d");
    std::fs::create_dir(&dir).expect("mkdir");
    let o = Command::new("env")
        .args([
            "SLURM_JOB_ID=chrome-7",
            "sh",
            "-c",
            "for i in $(seq 1 12); do echo x > \"$1\"/f$i; done",
            "sh",
        ])
        .arg(&dir)
        .output()
        .expect("the job");
    assert!(o.status.success());
    // What the servers counted for the job, summed over targets. The
    // writers' last reports may still be on their way (they leave after
    // the close): the page is read between two counts.
    let mnt = c.mnt.to_str().expect("utf8").to_string();
    let count = move || -> (u64, String) {
        let out = loom_ok(&["jobstats", "--json", &mnt]);
        let v: serde_json::Value = serde_json::from_str(&out).expect("json");
        let n = v
            .as_array()
            .expect("targets")
            .iter()
            .filter_map(|t| t["jobs"].as_array())
            .flatten()
            .filter(|j| j["id"] == "chrome-7")
            .map(|j| {
                j["ops"]
                    .as_object()
                    .map_or(0, |o| o.values().filter_map(|n| n.as_u64()).sum())
            })
            .sum();
        (n, out)
    };
    let (counted, out) = count();
    assert!(counted >= 12, "{out}");

    let url = format!("http://127.0.0.1:{port}/");
    let shot = c.tmp.path().join("dashboard.png");
    let o = chromium(
        c.tmp.path(),
        &[&format!("--screenshot={}", shot.display()), &url],
    );
    let png = std::fs::read(&shot)
        .unwrap_or_else(|_| panic!("no screenshot: {}", String::from_utf8_lossy(&o.stderr)));
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "a screenshot of {} bytes",
        png.len()
    );

    let o = chromium(c.tmp.path(), &["--dump-dom", &url]);
    let dom = String::from_utf8_lossy(&o.stdout).into_owned();
    let (after, _) = count();
    let shown = total_of(&dom, "chrome-7");
    assert!(
        shown.is_some_and(|n| (counted..=after).contains(&n)),
        "the page's count of the job's operations, {shown:?}, is not between the servers' \
         counts before ({counted}) and after ({after}):\n{dom}"
    );
    for t in ["loom-MDT0000", "loom-OST0000", "loom-OST0001"] {
        let row = dom
            .split(&format!("<tr data-id=\"{t}\">"))
            .nth(1)
            .unwrap_or_else(|| panic!("no row for {t}:\n{dom}"));
        assert!(
            row.split("</tr>").next().unwrap_or("").contains(">up<"),
            "{t} is not shown up"
        );
    }
}
