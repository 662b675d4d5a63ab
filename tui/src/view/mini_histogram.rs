//! A horizontal bar chart of a wait histogram: one row per power of two
//! of microseconds, merged further when the area is short.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::Line;
use ratatui::widgets::Widget;

use nfsdtop_agent::aggregate::histogram::WaitHistogram;

use super::styles;
use crate::warnings::fmt_us;

/// (lower µs, upper µs, count) per displayed row, from shortest wait up.
pub fn rows(h: &WaitHistogram, max_rows: usize) -> Vec<(u64, u64, u64)> {
    let mut rows: Vec<(u64, u64, u64)> = Vec::new();
    for (lo, hi, c) in h.buckets() {
        // Group the histogram's sub-buckets by power of two.
        let (glo, ghi) = if lo == 0 {
            (0, 1)
        } else {
            let p = 63 - lo.leading_zeros();
            (
                1u64 << p,
                1u64.checked_shl(p + 1).unwrap_or(u64::MAX).max(hi),
            )
        };
        match rows.last_mut() {
            Some(r) if r.0 == glo => r.2 += c,
            _ => rows.push((glo, ghi, c)),
        }
    }
    // Fill the empty powers in between, so the shape is honest.
    let mut full: Vec<(u64, u64, u64)> = Vec::with_capacity(rows.len());
    for r in rows {
        if let Some(&(_, prev_hi, _)) = full.last() {
            let mut lo = prev_hi;
            while lo < r.0 {
                let hi = lo.saturating_mul(2).max(lo + 1);
                full.push((lo, hi, 0));
                lo = hi;
            }
        }
        full.push(r);
    }
    let max_rows = max_rows.max(1);
    while full.len() > max_rows {
        full = full
            .chunks(2)
            .map(|c| {
                let last = c[c.len() - 1];
                (c[0].0, last.1, c.iter().map(|r| r.2).sum())
            })
            .collect();
    }
    full
}

pub struct WaitBars<'a> {
    pub hist: &'a WaitHistogram,
}

impl Widget for WaitBars<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        if area.height == 0 || area.width < 12 {
            return;
        }
        if self.hist.count() == 0 {
            Line::styled("no waits recorded", styles::dim()).render(area, buf);
            return;
        }
        let rows = rows(self.hist, area.height as usize);
        let max = rows.iter().map(|r| r.2).max().unwrap_or(1).max(1);
        let label_w = 14usize;
        let count_w = rows
            .iter()
            .map(|r| r.2.to_string().len())
            .max()
            .unwrap_or(1)
            + 1;
        let bar_w = (area.width as usize).saturating_sub(label_w + count_w);
        for (i, (lo, hi, c)) in rows.iter().enumerate() {
            let y = area.y + i as u16;
            let label = format!("{:>6}-{:<6}", fmt_us(*lo as f64), fmt_us(*hi as f64));
            buf.set_stringn(area.x, y, &label, label_w, styles::dim());
            let n = if *c == 0 {
                0
            } else {
                ((*c as f64 / max as f64) * bar_w as f64).ceil() as usize
            };
            let bar: String = "█".repeat(n.min(bar_w));
            buf.set_stringn(
                area.x + label_w as u16,
                y,
                &bar,
                bar_w,
                Style::default().fg(styles::BAR),
            );
            if label_w + bar_w + count_w > area.width as usize {
                continue; // too narrow for the counts: labels and bars only
            }
            let count = format!("{c:>w$}", w = count_w);
            buf.set_stringn(
                area.x + (label_w + bar_w) as u16,
                y,
                &count,
                count_w,
                Style::default(),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_merge_to_fit_and_keep_every_count() {
        let mut h = WaitHistogram::default();
        for us in [0u64, 3, 5, 7, 100, 1000, 1000, 70_000] {
            h.record_us(us);
        }
        let all = rows(&h, 100);
        assert_eq!(all.iter().map(|r| r.2).sum::<u64>(), 8);
        assert_eq!(all[0], (0, 1, 1));
        assert!(all.windows(2).all(|w| w[0].1 == w[1].0), "contiguous");
        let few = rows(&h, 4);
        assert!(few.len() <= 4);
        assert_eq!(few.iter().map(|r| r.2).sum::<u64>(), 8);
    }
}
