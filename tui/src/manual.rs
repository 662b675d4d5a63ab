//! The parts of the man pages clap cannot derive from the options: keys,
//! columns (the numbers' from the agent's field table), what each number means, examples, exit codes (roff, inserted
//! after the generated OPTIONS by `nfsdtop manpage`).

use std::io::Write;

use clap::Command;
use nfsdtop::state::{columns, Column, View};
use nfsdtop_agent::present::fields;

/// nfsdtop(1).
const NFSDTOP: &str = r#".SH KEYS
.TP
\fB?\fR, \fBh\fR, F1
help; \fBq\fR or Esc closes it
.TP
\fBq\fR, Ctrl\-C
quit
.TP
space, \fBp\fR
pause and resume: live, the screen stops while the pipeline keeps counting; a demo or a replay (\fB\-\-speed\fR other than 0) stops its source, and the header's third line starts with where it is ("replay at 12.5/60.0s x1": source time since the start, out of the recording's length, and the speed)
.TP
\fB.\fR, \fBn\fR
demo or replay: step one refresh interval of source time (pausing first)
.TP
Left, Right
demo or replay: seek back or on 10 s of source time. On reads every event up to there (cumulative numbers stay whole); back starts the source again from the beginning and reads up to there. At the end of a replay it stays on its last snapshot (END) until sought back or quit
.TP
\fB<\fR, \fB>\fR
demo or replay: half or double speed (1/16 to 64)
.TP
\fB1\fR ... \fB9\fR, \fB0\fR
sort by the first ... tenth column of the view in display order (VIEW_COLUMNS; whether shown or not); the key of the column already sorted by reverses it. A click on a column's title does the same
.TP
F6, \fBo\fR
the sort menu: every column with its digit, the one sorted by marked; up/down and Enter pick one (again: reverse), a digit picks at once, Esc closes
.TP
\fBc\fR
the column chooser: every column of the view, marked where shown; up/down move, space or Enter shows or hides the one under the cursor (NAME always stays), Esc closes. Hidden columns are left out before the width decides what else to drop, and are remembered (see FILES)
.TP
\fBs\fR, \fBS\fR
next sort column; reverse the sort direction. Rows sort on the values as shown (8.3% and 8.3% are equal), ties by name (addresses by value: 10.0.0.2 before 10.0.0.10), so near\-equal rows keep their places from one refresh to the next; the selection stays on its entity
.TP
\fBg\fR
peers or classes
.TP
\fBv\fR
the fairness view (turns against fair shares) or the workload view (what each client asks: WORKLOAD_ONLY); the table's title says which. A sort by a column the other view does not show becomes a sort by SHARE
.TP
\fB/\fR
filter rows (Enter applies, Esc clears). Words separated by spaces must all match; each is an address prefix (\fB10.20.0.0/24\fR, \fBfd00:1234::/32\fR: peers whose address is in it, and per\-peer classes), \fB<fair\fR (below fair share: ratio under 1) or \fB>fair\fR (above it), a column against a number (\fBratio<0.6\fR, \fBwait99>20ms\fR, \fBshare>=10%\fR, \fBconn>4\fR; the columns FILTER_COLUMNS (shares in percent, waits in us, ms or s, ms by default, byte rates in B, KiB, MiB and so on); the operators <, <=, >, >=, =), or else a case\-insensitive substring of the name or the class. A comparison naming no column or no number is left out and said in the footer
.TP
\fB+\fR, \fB\-\fR
longer or shorter refresh interval
.TP
arrows, \fBj\fR, \fBk\fR, PgUp, PgDn, Home, End, \fBG\fR
move the selection; with the mouse, a click on a row selects it and the wheel scrolls (the terminal's own selection: hold Shift)
.TP
Enter, Esc
open and close the drill\-down of the selected row: share against fair share over time, the wait histogram, the transports (for a class: its peers, each with its share, ratio and wait p99)
.TP
\fBw\fR
the list of warnings (lints) behind the header's \fB!\fR lines, every entity each lint found (up to 1000 a lint); arrows, \fBj\fR/\fBk\fR, PgUp/PgDn, Home/End scroll it
.TP
\fBR\fR
the other RPC services (lockd, the NFS client's callback service, any other port than nfsd's): each one's dispatches, requests, peers and Jain's index, and its 32 busiest peers with their dispatches, rate, share and fairness ratio among that service's own peers (every other view is nfsd's alone); \fBR\fR or Esc closes it
.SH COLUMNS
Interval numbers cover the last refresh interval; cumulative ones count
from the start (or since the aggregator first saw the entity).
NARROW
.TP
\fBNAME\fR
the peer's address (a keyed\-hash pseudonym with \fB\-\-redact\fR) or the class; \fB*\fR marks the top offender (the highest ratio among the backlogged), then, where nfsd knows the peer as an NFSv4 client, the client's name (a Linux client's host part; \fB+N\fR: N more clients at the address; the drill\-down shows them whole), else, with \fB\-\-resolve\fR, the address's host name from reverse DNS (looked up in the background, cached; a pseudonym with \fB\-\-redact\fR; the drill\-down shows it as \fBhost NAME\fR)
.TP
\fBCLASS\fR
the peer's class from the class map (without one, every peer is its own class)
.TP
\fBPEERS\fR
grouped by class (\fBg\fR), in place of CLASS: how many peers the class holds
"#;

/// nfsdtop(1) after the table's own columns.
const NFSDTOP_TAIL: &str = r#".PP
The header, every figure for the whole server: dispatches per second
over the last interval; entities backlogged (work queued) at its end, of
all listed; Jain's fairness index over the ratios of the entities
backlogged during the interval (1 = all at their fair share, 1/n = one
got everything); events lost since the start; and "wait (all)", the
p50 and p99 of the wait of every dispatch of the interval, whichever
entity's. That p50 is not a
typical row's: it weighs each entity by its dispatches, so when half the
dispatches waited 18 ms and half 31 ms it can read either from one
interval to the next while each row's own p50 holds still. The third
line is nfsd itself: its threads (\fB/proc/fs/nfsd/threads\fR live, the
scenario's in the demo, the recording's in a replay; \fB?\fR when unknown),
the busy threads (execution time over the interval: the mean number of
threads in service, and in parentheses that over the threads, the
saturation that makes a queue at all; never above the threads: time
counted at a request's end beyond what the threads could do in the
interval is shown in the next one), the threads of each pool when
there are several (how busy each pool is needs the kernel's pid\(->pool
tracepoints of 6.17+ and is not shown), and how many network namespaces
the peers are in when more than one (each peer's drill\-down then names
its own, by inode). Then one line
per lint ("1 peer below half its fair share while backlogged", "events
lost", "starved", ...). Where a line is too long for the terminal, its
least important parts are left out whole (on the first line the source's
free text first, then the kernel, the clock, the wait source), never cut
inside a word.
.SH BATCH OUTPUT
\fB\-b\fR prints one block (\fB\-\-format text\fR), one JSON object
(\fBjson\fR) or CSV rows (\fBcsv\fR) per iteration. JSON counts
(dispatches, entitled, exec_seconds, backlogged_seconds) are cumulative,
rates, shares and ratios per interval; every field is defined in the
project's docs/json.md (installed as /usr/share/doc/nfsdtop/docs/json.md).
CSV names its cumulative columns \fB*_total\fR (requests_total and
bytes_in_total/bytes_out_total among them; bytes empty where not
measured) and ends each iteration with a \fBtotal\fR row for the whole
server. Text adds OPS/S, IN/S and OUT/S as the workload view shows them. Text shows waits as the UI
does (18ms) and every name whole; by class, the second column counts the
class's peers. \fB\-n\fR and \fB\-\-format\fR need \fB\-b\fR.
.SH EXAMPLES
.TP
\fBnfsdtop\fR
this host's nfsd (root, or CAP_BPF and CAP_PERFMON); the built\-in demo server where there is none
.TP
\fBnfsdtop \-\-wait\fR
wait for nfsd to start instead of showing the demo
.TP
\fBnfsdtop \-\-demo seed\-k16 \-\-policy flat\fR
a simulated server: a client with 2 connections against one with 16, both backlogged, under today's queue (its ratio is 0.22; with \fB\-\-policy rr\-peer\fR 1.00)
.TP
\fBnfsdtop \-\-group class \-\-class\-map classes.txt\fR
judge tenants, not addresses (lines of PREFIX CLASS [per\-peer])
.TP
\fBnfsdtop \-b \-n 5 \-d 2 \-\-format json \-\-top 10\fR
five JSON lines, two seconds apart, the ten busiest peers
.TP
\fBnfsdtop record \-o today.nfsdrec \-\-duration 600\fR, then \fBnfsdtop \-\-replay today.nfsdrec \-\-speed 0\fR
record ten minutes, replay them as fast as possible
.TP
\fBnfsdtop \-\-connect http://server:9847\fR
the view of a remote nfsdtopd
.SH EXIT STATUS
.TP
0
quit by the user, or batch mode printed its iterations
.TP
1
an error, explained on standard error (no nfsd where one is required, missing privileges, an unreadable file with FILE:LINE, a remote nfsdtopd unreachable)
.TP
2
invalid command\-line usage
.SH FILES
.TP
\fI$XDG_CONFIG_HOME/nfsdtop/prefs.toml\fR (else \fI~/.config/nfsdtop/prefs.toml\fR)
the interactive UI's preferences, written when it quits and read when it starts: \fBsort\fR (a column's title in lower case), \fBdescending\fR, \fBgroup\fR (peer or class), \fBview\fR (fairness or workload), \fBhidden\fR (columns), \fBinterval\fR (seconds). \fB\-\-group\fR and \fB\-d\fR given on the command line win. A file that cannot be used is ignored with a warning naming its line, and left as it is
.SH SEE ALSO
nfsdtop\-record(1), nfsdtop\-doctor(1), nfsdtopd(8)
"#;

/// nfsdtop-record(1).
const RECORD: &str = r#".SH FILES
Recordings use the extension \fB.nfsdrec\fR: a compact, versioned,
checksummed binary format (the project's docs/recording\-format.md). A
truncated or damaged file replays intact up to the damage, and says where.
.SH EXAMPLES
.TP
\fBnfsdtop record \-o today.nfsdrec \-\-duration 600\fR
ten minutes of this host's nfsd
.TP
\fBnfsdtop record \-\-demo movers \-o movers.nfsdrec \-\-duration 30\fR
a demo scenario, e.g. for a bug report
.TP
\fBnfsdtop \-\-replay today.nfsdrec \-\-speed 10\fR, \fBnfsdtopd \-\-replay today.nfsdrec\fR
look at it again, ten times faster, or serve it as metrics
.SH EXIT STATUS
.TP
0
the duration elapsed, or the first SIGINT/SIGTERM: the file is finished and complete
.TP
1
an error, explained on standard error
.TP
2
invalid command\-line usage
.TP
130
a second SIGINT/SIGTERM before the file was finished
.SH SEE ALSO
nfsdtop(1)
"#;

/// nfsdtop-doctor(1).
const DOCTOR: &str = r#".SH OUTPUT
One line per check (text) or one JSON object (\fB\-\-format json\fR): the
kernel and its tracepoint generation (5.18\-6.5, 6.6+, 6.16+, or the
proposed class field), tracefs, the sunrpc tracepoints and their fields,
BTF and which events go on raw tracepoints, the BPF programs' verifier
verdict, the privileges, and what to do about each failure.
.SH EXAMPLES
.TP
\fBnfsdtop doctor\fR
what this host supports
.TP
\fBnfsdtop doctor \-\-format json | python3 \-m json.tool\fR
the same for a script
.SH EXIT STATUS
.TP
0
the report was printed, and the live source can start here
.TP
3
the report was printed, and the live source cannot start here (its problems say why, each with what to do)
.TP
1
an error, explained on standard error (the report could not be made or written)
.TP
2
invalid command\-line usage
.SH SEE ALSO
nfsdtop(1)
"#;

/// The COLUMNS entries of the field table's TUI columns, in its order.
fn field_columns() -> String {
    fields::FIELDS
        .iter()
        .filter_map(|f| Some((f.tui?.title, f.doc)))
        .map(|(title, doc)| format!(".TP\n\\fB{title}\\fR\n{doc}\n"))
        .collect()
}

/// Each view's columns in display order, as the digits' entry lists
/// them: "fairness: NAME, CLASS or PEERS, CONN, ...; workload: ...".
fn view_columns() -> String {
    [View::Fairness, View::Workload]
        .iter()
        .map(|v| {
            let titles: Vec<&str> = v
                .columns()
                .iter()
                .map(|c| match c {
                    Column::Class => "CLASS or PEERS",
                    c => c.title(),
                })
                .collect();
            format!("{}: {}", v.label(), titles.join(", "))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The workload view's own columns beside those it shares with the
/// fairness view: "OPS/S, IN/S and OUT/S beside CONN, EXEC and SHARE".
fn workload_only() -> String {
    let fairness = View::Fairness.columns();
    let (shared, own): (Vec<Column>, Vec<Column>) = View::Workload
        .columns()
        .into_iter()
        .filter(|c| c.numeric())
        .partition(|c| fairness.contains(c));
    format!("{} beside {}", and_list(&own), and_list(&shared))
}

/// Titles as a sentence lists them: "A, B and C".
fn and_list(cols: &[Column]) -> String {
    let titles: Vec<&str> = cols.iter().map(|c| c.title()).collect();
    match titles.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => titles.concat(),
    }
}

/// What each view gives up on a narrow terminal, and what a table of
/// peers keeps at 80 columns.
fn narrow() -> String {
    let list = and_list;
    [View::Fairness, View::Workload]
        .iter()
        .map(|v| {
            let order = v.drop_order();
            let kept = columns::fitting(80, true, false, *v, &[]);
            format!(
                "On a narrow terminal the {} view gives up {} first, then {}: 80 columns keep {}.",
                v.label(),
                order.first().map_or("nothing", |c| c.title()),
                list(order.get(1..).unwrap_or_default()),
                list(&kept)
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn extra(name: &str) -> String {
    match name {
        "nfsdtop" => format!("{NFSDTOP}{}{NFSDTOP_TAIL}", field_columns())
            .replace("VIEW_COLUMNS", &view_columns())
            .replace("NARROW", &narrow())
            .replace("WORKLOAD_ONLY", &workload_only())
            .replace("FILTER_COLUMNS", &nfsdtop::state::filter::names()),
        "nfsdtop-record" => RECORD.into(),
        "nfsdtop-doctor" => DOCTOR.into(),
        _ => String::new(),
    }
}

/// A man page: clap's sections, then this module's, then clap's last ones.
pub fn render(name: &str, page: Command, out: &mut dyn Write) -> std::io::Result<()> {
    // The conditions clap_mangen's own `render` applies.
    let has_subcommands = page.get_subcommands().any(|s| !s.is_hide_set());
    let has_extra = page.get_after_help().is_some() || page.get_after_long_help().is_some();
    let has_version = page.get_version().is_some() || page.get_long_version().is_some();
    let man = clap_mangen::Man::new(page);
    man.render_title(out)?;
    man.render_name_section(out)?;
    man.render_synopsis_section(out)?;
    man.render_description_section(out)?;
    man.render_options_section(out)?;
    if has_subcommands {
        man.render_subcommands_section(out)?;
    }
    out.write_all(extra(name).as_bytes())?;
    if has_extra {
        man.render_extra_section(out)?;
    }
    if has_version {
        man.render_version_section(out)?;
    }
    Ok(())
}
