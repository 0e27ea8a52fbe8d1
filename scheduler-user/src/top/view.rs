//! Drawing the [`TopModel`] with ratatui; fits a plain 80x24 terminal.

use ratatui::{
    layout::{Constraint, Layout, Rect},
    style::{Modifier, Style},
    text::Line,
    widgets::{Block, Borders, Cell, Paragraph, Row, Sparkline, Table},
    Frame,
};

use super::model::TopModel;

/// One block character per eighth of a ring's capacity.
fn level_bar(reserved: i64, capacity: u32) -> char {
    const BARS: [char; 9] = [' ', '▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let eighths = (reserved.max(0) as f64 * 8.0 / capacity.max(1) as f64).ceil() as usize;
    BARS[eighths.min(8)]
}

fn thousands(v: f64) -> String {
    let n = v.round() as u64;
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

/// A duration in µs, in ms or s when long.
fn micros(us: f64) -> String {
    if us < 10_000.0 {
        format!("{us:.0} us")
    } else if us < 10_000_000.0 {
        format!("{:.1} ms", us / 1e3)
    } else {
        format!("{:.1} s", us / 1e6)
    }
}

pub fn render(frame: &mut Frame, model: &TopModel) {
    let [title, switch, spark, nodes] =
        Layout::vertical([Constraint::Length(1), Constraint::Length(5), Constraint::Length(5), Constraint::Min(4)])
            .areas(frame.area());
    let header = format!(" bolt top   every {:.1} s   q quits", model.interval_s);
    frame.render_widget(Paragraph::new(header).style(Style::new().add_modifier(Modifier::REVERSED)), title);
    render_switch(frame, model, switch);
    render_sparkline(frame, model, spark);
    render_nodes(frame, model, nodes);
}

fn render_switch(frame: &mut Frame, model: &TopModel, area: Rect) {
    let (title, lines) = match (&model.switch, &model.switch_error) {
        (Some(s), _) => {
            let depth: Vec<String> = s.depth.iter().enumerate().map(|(i, d)| format!("p{} {d}", i + 1)).collect();
            (
                format!(" switch {} ", s.endpoint),
                vec![
                    Line::from(format!(
                        "decisions/s {}   received/s {}   refill tasks/s {}",
                        thousands(s.decisions_per_s),
                        thousands(s.received_per_s),
                        thousands(s.refill_tasks_per_s)
                    )),
                    Line::from(format!(
                        "queued  {}   (of {} each)   queue_full tasks {}",
                        depth.join("  "),
                        s.capacity,
                        s.queue_full_tasks
                    )),
                ],
            )
        }
        (None, Some(e)) => (" switch ".into(), vec![Line::from(format!("unreachable: {e}"))]),
        (None, None) => (" switch ".into(), vec![Line::from("not watched (--switch off)")]),
    };
    let mut lines = lines;
    lines.push(Line::from(match (&model.client, &model.client_error) {
        (Some(c), _) => format!(
            "sched delay p50 {}  p99 {}  done {}/{} ({})",
            micros(c.p50_sched_delay_us),
            micros(c.p99_sched_delay_us),
            c.completed,
            c.submitted,
            c.endpoint
        ),
        (None, Some(e)) => format!("client unreachable: {e}"),
        (None, None) => "sched delay: watch a client with --client ADDR (bolt submit --metrics ADDR)".into(),
    }));
    frame.render_widget(Paragraph::new(lines).block(Block::new().borders(Borders::ALL).title(title)), area);
}

fn render_sparkline(frame: &mut Frame, model: &TopModel, area: Rect) {
    let width = area.width.saturating_sub(2) as usize;
    let data = &model.decisions_history[model.decisions_history.len().saturating_sub(width)..];
    let peak = data.iter().copied().max().unwrap_or(0);
    let title = format!(" decisions/s, last {} samples, peak {} ", data.len(), thousands(peak as f64));
    frame.render_widget(Sparkline::default().block(Block::new().borders(Borders::ALL).title(title)).data(data), area);
}

fn render_nodes(frame: &mut Frame, model: &TopModel, area: Rect) {
    let levels = model.nodes.iter().map(|n| n.rings.len()).max().unwrap_or(4).clamp(1, 8);
    let mut header = vec![Cell::from("node"), Cell::from("pins")];
    header.extend((1..=levels).map(|p| Cell::from(format!("p{p}"))));
    header.extend(["hit %", "hits/s", "miss/s"].map(Cell::from));
    let rows: Vec<Row> = model
        .nodes
        .iter()
        .map(|n| {
            let mut cells = vec![Cell::from(n.node.to_string()), Cell::from(n.pin_name.clone())];
            for p in 0..levels {
                cells.push(Cell::from(match n.rings.get(p) {
                    Some((r, c)) => format!("{}{r}", level_bar(*r, *c)),
                    None => String::new(),
                }));
            }
            cells.push(Cell::from(n.hit_ratio.map(|r| format!("{:.1}", r * 100.0)).unwrap_or_else(|| "-".into())));
            cells.push(Cell::from(thousands(n.hits_per_s)));
            cells.push(Cell::from(thousands(n.misses_per_s)));
            Row::new(cells)
        })
        .collect();
    let mut widths = vec![Constraint::Length(5), Constraint::Length(10)];
    widths.extend((0..levels).map(|_| Constraint::Length(7)));
    widths.extend([Constraint::Length(6), Constraint::Length(9), Constraint::Length(8)]);
    let title = if model.nodes.is_empty() {
        " rings: no node pinned on this host ".to_string()
    } else {
        format!(" rings: tasks queued per node and priority ({} nodes) ", model.nodes.len())
    };
    let table = Table::new(rows, widths)
        .header(Row::new(header).style(Style::new().add_modifier(Modifier::BOLD)))
        .block(Block::new().borders(Borders::ALL).title(title));
    frame.render_widget(table, area);
}
