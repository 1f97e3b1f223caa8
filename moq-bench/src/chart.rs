//! The SVG chart: relay CPU per delivered message against connection count, one line per
//! profile and relay, drawn with `plotters`.

use std::collections::BTreeMap;
use std::path::Path;

use plotters::prelude::*;

use crate::record::RunRecord;

/// Draws `runs` to `out` (SVG). Runs of one profile and relay at one connection count are
/// averaged into one point.
pub fn draw(runs: &[RunRecord], out: &Path) -> Result<(), String> {
    let mut series: BTreeMap<String, BTreeMap<u64, Vec<f64>>> = BTreeMap::new();
    for run in runs.iter().filter(|run| run.delivered > 0) {
        series
            .entry(format!("{} ({})", run.profile, run.label))
            .or_default()
            .entry(run.connections)
            .or_default()
            .push(run.relay.cpu_us_per_delivery);
    }
    if series.is_empty() {
        return Err("no runs with deliveries to chart".into());
    }
    let points: Vec<(String, Vec<(u64, f64)>)> = series
        .into_iter()
        .map(|(name, by_count)| {
            let line = by_count
                .into_iter()
                .map(|(count, values)| (count, values.iter().sum::<f64>() / values.len() as f64))
                .collect();
            (name, line)
        })
        .collect();
    let max_connections = points
        .iter()
        .flat_map(|(_, line)| line.iter().map(|(c, _)| *c))
        .max()
        .unwrap_or(1)
        .max(2);
    let max_cpu = points
        .iter()
        .flat_map(|(_, line)| line.iter().map(|(_, v)| *v))
        .fold(0.0f64, f64::max)
        .max(1.0);

    let root = SVGBackend::new(out, (900, 560)).into_drawing_area();
    let failed = |e: &dyn std::fmt::Display| format!("drawing {}: {e}", out.display());
    root.fill(&WHITE).map_err(|e| failed(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption("relay CPU per delivered message", ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d((1u64..max_connections * 2).log_scale(), 0.0..max_cpu * 1.15)
        .map_err(|e| failed(&e))?;
    chart
        .configure_mesh()
        .x_desc("client connections (log)")
        .y_desc("relay CPU µs / delivered message")
        .draw()
        .map_err(|e| failed(&e))?;
    for (index, (name, line)) in points.into_iter().enumerate() {
        let color = Palette99::pick(index).to_rgba();
        chart
            .draw_series(LineSeries::new(line.clone(), color.stroke_width(2)))
            .map_err(|e| failed(&e))?
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color));
        chart
            .draw_series(
                line.into_iter()
                    .map(|point| Circle::new(point, 4, color.filled())),
            )
            .map_err(|e| failed(&e))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| failed(&e))?;
    root.present().map_err(|e| failed(&e))?;
    Ok(())
}
