//! The report's charts: every chart of a short run is a PNG of the promised size that
//! `report.md` shows, and a sweep chart renders too.

use std::path::{Path, PathBuf};

use sim::world::Options;

/// Width and height from a PNG's IHDR chunk, after checking the signature.
fn png_size(path: &Path) -> anyhow::Result<(u32, u32)> {
    let bytes = std::fs::read(path)?;
    anyhow::ensure!(
        bytes.len() > 24,
        "{} is too short for a PNG",
        path.display()
    );
    anyhow::ensure!(
        bytes[..8] == *b"\x89PNG\r\n\x1a\n",
        "{} lacks the PNG signature",
        path.display()
    );
    anyhow::ensure!(
        &bytes[12..16] == b"IHDR",
        "{} does not start with IHDR",
        path.display()
    );
    let word = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    Ok((word(16), word(20)))
}

/// The files of the `![title](file)` images in `markdown`, in order.
fn images(markdown: &str) -> Vec<String> {
    markdown
        .split("![")
        .skip(1)
        .filter_map(|rest| {
            let target = rest.split_once("](")?.1;
            Some(target.split_once(')')?.0.to_string())
        })
        .collect()
}

fn scenario(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../scenarios")
        .join(name)
}

#[test]
fn a_short_run_renders_every_chart_as_a_png_of_the_promised_size_shown_in_the_report()
-> anyhow::Result<()> {
    let scenario = sim::scenario::load(&scenario("demo.toml"))?;
    let dir = tempfile::tempdir()?;
    sim::report::pipeline::run(scenario, dir.path(), Options::default(), true)?;

    let report = std::fs::read_to_string(dir.path().join("report.md"))?;
    let expected = [
        ("depth.png", 1200, 700),
        ("age.png", 1200, 500),
        ("outcomes.png", 1200, 500),
        ("store.png", 1200, 500),
    ];
    let names: Vec<&str> = expected.iter().map(|e| e.0).collect();
    assert_eq!(
        images(&report),
        names,
        "report.md shows the charts in order"
    );
    for (file, width, height) in expected {
        assert_eq!(png_size(&dir.path().join(file))?, (width, height), "{file}");
    }
    Ok(())
}

#[test]
fn a_sweep_renders_one_png_with_a_line_per_series() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let series = vec![
        (
            "full".to_string(),
            vec![(0.0, 12.0), (1.0, 30.5), (2.0, 18.0)],
        ),
        (
            "none".to_string(),
            vec![(0.0, 40.0), (1.0, 55.0), (2.0, 61.0)],
        ),
    ];
    let categories = ["none", "equal", "full"].map(String::from);
    let chart = sim::report::charts::SweepChart {
        file: "sweep.png",
        title: "Drain time by jitter",
        x_label: "jitter",
        y_label: "drain time (s)",
        categories: &categories,
    };
    let (file, title) = sim::report::charts::render_sweep(dir.path(), &chart, &series)?;
    assert_eq!(
        (file.as_str(), title.as_str()),
        ("sweep.png", "Drain time by jitter")
    );
    assert_eq!(png_size(&dir.path().join("sweep.png"))?, (1200, 500));
    Ok(())
}
