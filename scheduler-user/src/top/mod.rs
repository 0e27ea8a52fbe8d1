//! `bolt top`: a live terminal view of this host's rings and a switch, redrawn every
//! interval; `q` (or Esc, Ctrl-C) quits.

pub mod collect;
pub mod model;
pub mod view;

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::{backend::TestBackend, Terminal};

pub use collect::Collector;
pub use model::{ClientView, NodeView, SwitchView, TopModel};

#[derive(clap::Args, Debug)]
pub struct TopArgs {
    /// The switch's metrics endpoint, HOST[:PORT] (port 9171 unless given), or "off".
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1")]
    pub switch: String,
    /// A client's endpoint (`bolt submit --metrics ADDR`), for scheduling delay
    /// percentiles: HOST[:PORT] (port 9173 unless given), or "off".
    #[arg(long, value_name = "ADDR", default_value = "off")]
    pub client: String,
    /// Reach the switch's and the client's endpoints from inside this network namespace
    /// (a testbed's switch namespace, e.g. bolt-sw).
    #[arg(long, value_name = "NS")]
    pub switch_netns: Option<String>,
    /// Only these nodes' rings (their directories under /sys/fs/bpf/bolt/; repeat).
    #[arg(long = "iface", value_name = "IF")]
    pub ifaces: Vec<String>,
    /// Seconds between refreshes.
    #[arg(long, value_name = "SECS", default_value_t = 1.0)]
    pub interval: f64,
    /// Quit after this many seconds.
    #[arg(long, value_name = "SECS")]
    pub duration: Option<f64>,
    /// Print one frame as text (80x24, after one interval) instead of the live view: for
    /// scripts and terminals without cursor control.
    #[arg(long)]
    pub once: bool,
}

/// Draws `model` on an off-screen terminal of `width` x `height` and returns its lines.
pub fn render_text(model: &TopModel, width: u16, height: u16) -> anyhow::Result<String> {
    let mut terminal = Terminal::new(TestBackend::new(width, height))?;
    terminal.draw(|f| view::render(f, model))?;
    let buffer = terminal.backend().buffer();
    let mut out = String::new();
    for y in 0..height {
        let line: String = (0..width).map(|x| buffer.cell((x, y)).map(|c| c.symbol()).unwrap_or(" ")).collect();
        out.push_str(line.trim_end());
        out.push('\n');
    }
    Ok(out)
}

pub fn run(args: TopArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.interval >= 0.1 && args.interval <= 3600.0, "--interval must be 0.1 to 3600 seconds");
    let switch = crate::metrics::parse_endpoint(&args.switch, crate::metrics::SWITCH_PORT)?;
    let client = crate::metrics::parse_endpoint(&args.client, crate::metrics::CLIENT_PORT)?;
    let mut collector = Collector::new(args.ifaces.clone(), switch, client, args.switch_netns.clone());
    let interval = Duration::from_secs_f64(args.interval);
    let mut model = TopModel { interval_s: args.interval, ..TopModel::default() };
    if args.once || !std::io::stdout().is_terminal() {
        collector.refresh(&mut model);
        std::thread::sleep(interval);
        collector.refresh(&mut model);
        print!("{}", render_text(&model, 80, 24)?);
        return Ok(());
    }
    let deadline = args.duration.map(|d| Instant::now() + Duration::from_secs_f64(d.clamp(0.0, 1e7)));
    let mut terminal = ratatui::init();
    let result = (|| -> anyhow::Result<()> {
        loop {
            collector.refresh(&mut model);
            terminal.draw(|f| view::render(f, &model))?;
            let next = Instant::now() + interval;
            while let Some(wait) = next.checked_duration_since(Instant::now()) {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    return Ok(());
                }
                if event::poll(wait.min(Duration::from_millis(250)))? {
                    if let Event::Key(k) = event::read()? {
                        let ctrl_c = k.code == KeyCode::Char('c') && k.modifiers.contains(KeyModifiers::CONTROL);
                        if k.kind == KeyEventKind::Press
                            && (matches!(k.code, KeyCode::Char('q') | KeyCode::Esc) || ctrl_c)
                        {
                            return Ok(());
                        }
                    }
                }
            }
        }
    })();
    ratatui::restore();
    result
}
