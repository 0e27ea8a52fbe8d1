//! Line charts of benchmark results, written as SVG and PNG side by side (plotters).
//!
//! A [`Chart`] is a title, axis labels and named [`Series`] of (x, y) points; [`render`]
//! writes `<stem>.svg` and `<stem>.png`. A log-scale x axis ([`Scale::Log`]) suits
//! latency CDFs, as in the thesis's figures. Text is drawn with DejaVu Sans
//! (Debian's fonts-dejavu-core, installed by `cargo xtask setup`).
//!
//! ```no_run
//! # fn demo() -> anyhow::Result<()> {
//! use scheduler_user::bench::plot::{render, Chart, Scale, Series};
//! let chart = Chart {
//!     title: "Scheduling delay".into(),
//!     x_label: "delay (ms)".into(),
//!     y_label: "CDF".into(),
//!     x_scale: Scale::Log,
//!     series: vec![Series::new("bolt", vec![(0.04, 0.5), (5.0, 0.95)])],
//! };
//! render(&chart, std::path::Path::new("target/bench"), "trace_cdf")?;
//! # Ok(()) }
//! ```

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::Context as _;
use plotters::coord::Shift;
use plotters::prelude::*;

/// Where Debian keeps the font the charts use.
pub const FONT_PATH: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
const FONT: &str = "sans-serif";
const SIZE: (u32, u32) = (900, 560);
/// Series colours, dark enough to read on white.
const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(23, 190, 207),
    RGBColor(60, 60, 60),
];
/// Series with at most this many points get a marker on each.
const MARKED_POINTS: usize = 40;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scale {
    Linear,
    /// Base 10; points with x ≤ 0 are left out.
    Log,
}

#[derive(Clone, Debug)]
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

impl Series {
    pub fn new(label: impl Into<String>, points: Vec<(f64, f64)>) -> Series {
        Series { label: label.into(), points }
    }
}

#[derive(Clone, Debug)]
pub struct Chart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub x_scale: Scale,
    pub series: Vec<Series>,
}

impl Chart {
    pub fn new(
        title: impl Into<String>,
        x_label: impl Into<String>,
        y_label: impl Into<String>,
        x_scale: Scale,
        series: Vec<Series>,
    ) -> Chart {
        Chart { title: title.into(), x_label: x_label.into(), y_label: y_label.into(), x_scale, series }
    }
}

/// Writes `dir/<stem>.svg` and `dir/<stem>.png`; returns both paths.
pub fn render(chart: &Chart, dir: &Path, stem: &str) -> anyhow::Result<[PathBuf; 2]> {
    load_font()?;
    let svg = dir.join(format!("{stem}.svg"));
    let png = dir.join(format!("{stem}.png"));
    draw(SVGBackend::new(&svg, SIZE).into_drawing_area(), chart)
        .with_context(|| format!("drawing {}", svg.display()))?;
    // draw() presents the area, which writes the PNG file.
    draw(BitMapBackend::new(&png, SIZE).into_drawing_area(), chart)
        .with_context(|| format!("drawing {}", png.display()))?;
    Ok([svg, png])
}

/// The empirical CDF of `values` as (value, fraction ≤ value), at most `max_points`
/// points (evenly spaced in rank, always with the largest value).
pub fn cdf(values: &[f64], max_points: usize) -> Vec<(f64, f64)> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 || max_points == 0 {
        return Vec::new();
    }
    let step = n.div_ceil(max_points).max(1);
    let mut out: Vec<(f64, f64)> = (0..n).step_by(step).map(|i| (v[i], (i + 1) as f64 / n as f64)).collect();
    if out.last().map(|p| p.1) != Some(1.0) {
        out.push((v[n - 1], 1.0));
    }
    out
}

/// The `q` quantile (0..=1) of `values` (nearest rank), or 0 when empty.
pub fn quantile(values: &[f64], q: f64) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let rank = ((q.clamp(0.0, 1.0) * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1]
}

fn load_font() -> anyhow::Result<()> {
    static LOADED: OnceLock<Result<(), String>> = OnceLock::new();
    LOADED
        .get_or_init(|| {
            let bytes = std::fs::read(FONT_PATH)
                .map_err(|e| format!("reading {FONT_PATH} (apt-get install fonts-dejavu-core): {e}"))?;
            // Registered once for the life of the process, as plotters requires.
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            plotters::style::register_font(FONT, FontStyle::Normal, bytes)
                .map_err(|_| format!("{FONT_PATH} is not a usable font"))
        })
        .clone()
        .map_err(anyhow::Error::msg)
}

fn draw<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, chart: &Chart) -> anyhow::Result<()> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| anyhow::anyhow!("{e}");
    root.fill(&WHITE).map_err(e)?;
    let log = chart.x_scale == Scale::Log;
    // A log axis is drawn as log10(x) on a linear one, labelled with x.
    let series: Vec<(String, Vec<(f64, f64)>)> = chart
        .series
        .iter()
        .map(|s| {
            let pts = s
                .points
                .iter()
                .filter(|(x, y)| x.is_finite() && y.is_finite() && (!log || *x > 0.0))
                .map(|&(x, y)| (if log { x.log10() } else { x }, y))
                .collect();
            (s.label.clone(), pts)
        })
        .collect();
    let all = series.iter().flat_map(|(_, p)| p.iter());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in all {
        (x0, x1, y0, y1) = (x0.min(x), x1.max(x), y0.min(y), y1.max(y));
    }
    if x0 > x1 {
        (x0, x1, y0, y1) = (0.0, 1.0, 0.0, 1.0);
    }
    if log {
        (x0, x1) = (x0.floor(), x1.ceil().max(x0.floor() + 1.0));
    } else if x1 - x0 < 1e-12 {
        (x0, x1) = (x0 - 1.0, x1 + 1.0);
    }
    y0 = y0.min(0.0);
    y1 = if y1 <= y0 { y0 + 1.0 } else { y1 + (y1 - y0) * 0.05 };
    let mut ctx = ChartBuilder::on(&root)
        .caption(&chart.title, (FONT, 22))
        .margin(14)
        .x_label_area_size(48)
        .y_label_area_size(72)
        .build_cartesian_2d(x0..x1, y0..y1)
        .map_err(e)?;
    let x_fmt = |v: &f64| if log { trim(10f64.powf(*v)) } else { trim(*v) };
    let y_fmt = |v: &f64| trim(*v);
    ctx.configure_mesh()
        .x_desc(&chart.x_label)
        .y_desc(&chart.y_label)
        .label_style((FONT, 15))
        .axis_desc_style((FONT, 17))
        .x_labels(if log { (x1 - x0) as usize + 1 } else { 10 })
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(e)?;
    for (i, (label, pts)) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        ctx.draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))
            .map_err(e)?
            .label(label.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 22, y)], color.stroke_width(2)));
        if pts.len() <= MARKED_POINTS {
            ctx.draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled()))).map_err(e)?;
        }
    }
    ctx.configure_series_labels()
        // Log-scale charts here are CDFs, rising to the right: keep their legend off the curves.
        .position(if log { SeriesLabelPosition::LowerRight } else { SeriesLabelPosition::UpperLeft })
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font((FONT, 15))
        .draw()
        .map_err(e)?;
    root.present().map_err(e)?;
    Ok(())
}

/// A short axis label: no trailing zeros, at most three decimals.
fn trim(v: f64) -> String {
    let s = if v.abs() >= 100.0 || v == v.round() { format!("{v:.0}") } else { format!("{v:.3}") };
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cdf_and_quantiles_of_a_sample() {
        let v: Vec<f64> = (1..=1000).map(f64::from).collect();
        let c = cdf(&v, 100);
        assert!(c.len() <= 101 && c.len() >= 100);
        assert_eq!(c.last(), Some(&(1000.0, 1.0)));
        assert!(c.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1));
        assert_eq!(quantile(&v, 0.5), 500.0);
        assert_eq!(quantile(&v, 0.99), 990.0);
        assert_eq!(quantile(&[], 0.5), 0.0);
        assert!(cdf(&[], 10).is_empty());
    }

    #[test]
    fn renders_svg_and_png() {
        if !Path::new(FONT_PATH).exists() {
            // The font comes with `cargo xtask setup`; say what is missing rather than pass.
            panic!("{FONT_PATH} is missing: run `cargo xtask setup`");
        }
        let dir = std::env::temp_dir().join(format!("bolt-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let chart = Chart {
            title: "test".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            x_scale: Scale::Log,
            series: vec![Series::new("a", vec![(0.01, 0.1), (1.0, 0.5), (100.0, 1.0)]), Series::new("empty", vec![])],
        };
        let [svg, png] = render(&chart, &dir, "t").unwrap();
        let svg_text = std::fs::read_to_string(&svg).unwrap();
        assert!(svg_text.contains("<svg"));
        assert!(svg_text.lines().any(|l| l.trim() == "a"), "the legend's label is text in the SVG");
        assert_eq!(&std::fs::read(&png).unwrap()[1..4], b"PNG");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
