//! Part F: `nfsdtop whatif` on a 10-minute recording of 1,000 clients
//! (agent/benches/whatif.rs; 1 minute with `--quick`).

use anyhow::ensure;

use super::text::{self, fill};
use super::util::{agent_bench, md_table, table_rows};

pub fn part(quick: bool) -> anyhow::Result<String> {
    let text = agent_bench("whatif", "whatif bench", quick)?;
    let rows = table_rows(&text);
    ensure!(rows.len() >= 2, "whatif bench printed no table:\n{text}");
    let mut s = fill(text::WHATIF, "intro", &[])?;
    s.push_str(&md_table(&rows));
    Ok(s)
}
