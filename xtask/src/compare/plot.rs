//! The comparison as a picture (SVG, no scripts): per client, its share
//! of dispatches on each kernel as two bars with its fair share marked
//! over each, and below, its queue wait p50 on each kernel.

use std::fmt::Write as _;

use super::report::{Comparison, Numbers};

const COLORS: [&str; 2] = ["#4477aa", "#ee6677"];
const WIDTH: f64 = 900.0;
const PANEL: f64 = 220.0;
const LEFT: f64 = 60.0;
const TOP: f64 = 50.0;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A round tick step (1, 2 or 5 times a power of ten) and how many of
/// them reach past `max`: an axis a reader can read off, 3 to 7 ticks.
fn axis(max: f64) -> (f64, u32) {
    let max = if max.is_finite() && max > 0.0 {
        max
    } else {
        1.0
    };
    let raw = max / 5.0;
    let power = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * power)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * power);
    (step, (max / step).ceil().max(1.0) as u32)
}

/// One panel: two bars per client of `value`, an optional mark per bar.
fn panel(
    s: &mut String,
    c: &Comparison,
    y0: f64,
    title: &str,
    unit: &str,
    value: &dyn Fn(&Numbers) -> f64,
    mark: Option<&dyn Fn(&Numbers) -> f64>,
) {
    let all = c
        .clients
        .iter()
        .flat_map(|r| r.on.iter().flatten())
        .flat_map(|n| [Some(value(n)), mark.map(|m| m(n))])
        .flatten();
    let (step, ticks) = axis(all.fold(0.0f64, f64::max));
    let top = step * f64::from(ticks);
    let n = c.clients.len().max(1) as f64;
    let slot = (WIDTH - LEFT - 20.0) / n;
    let bar = (slot * 0.35).min(40.0);
    let _ = writeln!(
        s,
        r#"<text x="{LEFT}" y="{:.0}" font-size="14" font-weight="bold">{}</text>"#,
        y0 - 8.0,
        esc(title)
    );
    let _ = writeln!(
        s,
        r##"<line x1="{LEFT}" y1="{:.0}" x2="{:.0}" y2="{:.0}" stroke="#444"/>"##,
        y0 + PANEL,
        WIDTH - 20.0,
        y0 + PANEL
    );
    for t in 0..=ticks {
        let v = step * f64::from(t);
        let y = y0 + PANEL - PANEL * f64::from(t) / f64::from(ticks);
        let digits = (-step.log10()).ceil().max(0.0) as usize;
        let _ = writeln!(
            s,
            r##"<text x="{:.0}" y="{y:.0}" font-size="10" text-anchor="end">{v:.digits$}{unit}</text><line x1="{LEFT}" y1="{y:.0}" x2="{:.0}" y2="{y:.0}" stroke="#ddd"/>"##,
            LEFT - 4.0,
            WIDTH - 20.0
        );
    }
    for (i, r) in c.clients.iter().enumerate() {
        let x0 = LEFT + slot * i as f64 + slot / 2.0 - bar;
        for (k, n) in r.on.iter().enumerate() {
            let Some(n) = n else { continue };
            let h = PANEL * value(n) / top;
            let x = x0 + bar * k as f64;
            let _ = writeln!(
                s,
                r#"<rect x="{x:.1}" y="{:.1}" width="{:.1}" height="{h:.1}" fill="{}"><title>{} {}: {:.2}{unit}</title></rect>"#,
                y0 + PANEL - h,
                bar - 2.0,
                COLORS[k],
                esc(&r.name),
                ["A", "B"][k],
                value(n)
            );
            if let Some(m) = mark {
                let y = y0 + PANEL - PANEL * m(n) / top;
                let _ = writeln!(
                    s,
                    r#"<line x1="{x:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="black" stroke-width="3"/>"#,
                    x + bar - 2.0
                );
            }
        }
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.0}" font-size="10" text-anchor="middle">{} nc={}</text>"#,
            x0 + bar,
            y0 + PANEL + 14.0,
            esc(&r.name),
            r.nconnect
        );
    }
}

pub fn svg(c: &Comparison) -> String {
    let height = TOP + 2.0 * (PANEL + 60.0) + 20.0;
    let mut s = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" font-family="sans-serif">
<rect width="100%" height="100%" fill="white"/>
"#
    );
    let [a, b] = &c.kernels;
    let _ = writeln!(
        s,
        r#"<text x="{LEFT}" y="20" font-size="13"><tspan fill="{}">■ A: {}</tspan>   <tspan fill="{}">■ B: {}</tspan>   ▬ fair share</text>"#,
        COLORS[0],
        esc(&a.kernel),
        COLORS[1],
        esc(&b.kernel)
    );
    panel(
        &mut s,
        c,
        TOP + 10.0,
        "Share of dispatches (bar) and fair share (mark)",
        "%",
        &|n| n.share * 100.0,
        Some(&|n| n.fair_share * 100.0),
    );
    panel(
        &mut s,
        c,
        TOP + PANEL + 80.0,
        "Queue wait p50",
        " ms",
        &|n| n.wait_p50_us / 1000.0,
        None,
    );
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::axis;

    #[test]
    fn axis_steps_are_round_and_reach_past_the_top() {
        assert_eq!(axis(77.9), (20.0, 4));
        assert_eq!(axis(50.1), (20.0, 3));
        assert_eq!(axis(45.5), (10.0, 5));
        assert_eq!(axis(0.8), (0.2, 4));
        assert_eq!(axis(0.0), (0.2, 5));
        for max in [0.013, 3.3, 99.0, 101.0, 12_345.0] {
            let (step, n) = axis(max);
            assert!(
                step * f64::from(n) >= max && (3..=7).contains(&n),
                "{max}: {step} x {n}"
            );
        }
    }
}
