//! nfsd's threads as they come and go, the agent's side (the kernel's is
//! `nfsdtop_common::threads`): where nfsd has the `nfsd_dynthread_start`
//! and `nfsd_dynthread_kill` tracepoints (Linux 7.0+), attach a classic
//! program to each, decode their records into the ledger
//! (`crate::server::threads`), and read it with the kernel's counts.
//!
//! The ledger starts from the nfsd threads the kernel lists (kernel
//! threads named `nfsd`), counted once at the attach. On kernels without
//! the tracepoints nothing here runs and nothing changes.

use std::path::Path;
use std::sync::Mutex;

use aya::programs::TracePoint;
use aya::Ebpf;
use nfsdtop_common::threads::{self, counter, TRACEPOINTS};
use nfsdtop_common::RecordView;

use super::error::{bpf_err, LiveError};
use super::format::Format;
use super::mapped::Mapped;
use crate::server::threads::{ThreadEvent, ThreadLedger, ThreadsReading};

/// Where the record's fields are (from the format file), 4 bytes each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fields {
    pool_id: u16,
    nrthreads: u16,
    nrthrmin: u16,
    nrthrmax: u16,
}

impl Fields {
    /// The fields of the `nfsd_dynthread_*` format `text`.
    pub fn parse(text: &str) -> Result<Fields, String> {
        let f = Format::parse(text).map_err(|e| e.to_string())?;
        let at = |name: &str| match f.field(name) {
            Some(x) if x.size == 4 && (x.offset as usize) + 4 <= threads::COPIED_END => {
                Ok(x.offset as u16)
            }
            Some(x) => Err(format!(
                "field {name} is {} bytes at {}: expected 4 bytes before {}",
                x.size,
                x.offset,
                threads::COPIED_END
            )),
            None => Err(format!("no field {name}")),
        };
        Ok(Fields {
            pool_id: at("pool_id")?,
            nrthreads: at("nrthreads")?,
            nrthrmin: at("nrthrmin")?,
            nrthrmax: at("nrthrmax")?,
        })
    }

    /// The event a record of these fields holds (None: not one of them).
    pub fn decode(&self, r: &RecordView<'_>) -> Option<ThreadEvent> {
        if r.raw_kind() != threads::RECORD_KIND {
            return None;
        }
        let start = match r.slot_byte() {
            threads::START => true,
            threads::EXIT => false,
            _ => return None,
        };
        let get = |off: u16| r.field(off, 4).map(|v| v as u32);
        Some(ThreadEvent {
            ts_ns: r.ts_ns(),
            start,
            pool: get(self.pool_id)?,
            nrthreads: get(self.nrthreads)?,
            min: get(self.nrthrmin)?,
            max: get(self.nrthrmax)?,
        })
    }
}

/// The attached programs, their counts and the ledger.
pub struct Threads {
    fields: Fields,
    counts: Mapped,
    ledger: Mutex<ThreadLedger>,
}

impl Threads {
    /// Attach where the kernel has the tracepoints: None where it has not
    /// (threads do not come and go), `Err` with the reason where it has
    /// and they cannot be watched.
    pub fn attach(
        ebpf: &mut Ebpf,
        tracefs: &Path,
        proc_root: &Path,
    ) -> Option<Result<Threads, String>> {
        let text = std::fs::read_to_string(format_path(tracefs)).ok()?;
        Some(
            Self::attach_with(ebpf, &text, proc_root)
                .map_err(|e| format!("threads that come and go not measured: {e}")),
        )
    }

    fn attach_with(ebpf: &mut Ebpf, format: &str, proc_root: &Path) -> Result<Threads, String> {
        let fields = Fields::parse(format)?;
        let events = TRACEPOINTS.map(|tp| (tp.program, "nfsd", tp.event));
        Self::attach_to(ebpf, fields, &events, nfsd_kthreads(proc_root)).map_err(|e| e.to_string())
    }

    /// Attach each `(program, category, event)` and start the ledger at
    /// `running` threads (tests attach the programs to stand-in events).
    pub fn attach_to(
        ebpf: &mut Ebpf,
        fields: Fields,
        events: &[(&str, &str, &str)],
        running: u32,
    ) -> Result<Threads, LiveError> {
        let counts = Mapped::map(ebpf, "THREAD_COUNTS", counter::ENTRIES as usize * 8)?;
        let ledger = Mutex::new(ThreadLedger::new(running, super::host::monotonic_ns()));
        for &(program, category, event) in events {
            attach_one(ebpf, program, category, event)?;
        }
        Ok(Threads {
            fields,
            counts,
            ledger,
        })
    }

    /// Where the records' fields are.
    pub fn fields(&self) -> Fields {
        self.fields
    }

    /// Decode a thread record into the ledger (false: not one).
    pub fn take(&self, r: &RecordView<'_>) -> bool {
        match self.fields.decode(r) {
            Some(e) => {
                if let Ok(mut l) = self.ledger.lock() {
                    l.apply(e);
                }
                true
            }
            None => r.raw_kind() == threads::RECORD_KIND,
        }
    }

    /// The ledger now, with the kernel's counts.
    pub fn read(&self) -> Option<ThreadsReading> {
        let (starts, exits, lost) = (
            self.counts.word(counter::STARTS as usize),
            self.counts.word(counter::EXITS as usize),
            self.counts.word(counter::LOST as usize),
        );
        let mut l = self.ledger.lock().ok()?;
        Some(l.read(super::host::monotonic_ns(), starts, exits, lost))
    }
}

/// The format file of `nfsd_dynthread_start` under `tracefs` (its
/// `_kill` twin has the same class and fields): where it exists, nfsd's
/// threads come and go.
fn format_path(tracefs: &Path) -> std::path::PathBuf {
    tracefs
        .join("events/nfsd")
        .join(TRACEPOINTS[0].event)
        .join("format")
}

/// What `nfsdtop doctor` says of threads that come and go under the
/// tracefs at `tracefs`.
pub fn doctor_note(tracefs: &Path) -> String {
    let format = format_path(tracefs);
    match std::fs::read_to_string(&format) {
        Err(_) => "nfsd's thread count is fixed on this kernel (no nfsd_dynthread_start): \
                   server.threads is what runs"
            .into(),
        Ok(text) => match Fields::parse(&text) {
            Ok(_) => "nfsd starts and stops threads on this kernel (nfsd_dynthread_start, \
                      _kill; with min-threads below threads): nfsdtop follows them \
                      (server.threads_running)"
                .into(),
            Err(why) => format!(
                "threads that come and go cannot be followed: {}: {why}",
                format.display()
            ),
        },
    }
}

fn attach_one(ebpf: &mut Ebpf, name: &str, category: &str, event: &str) -> Result<(), LiveError> {
    let p: &mut TracePoint = ebpf
        .program_mut(name)
        .ok_or_else(|| LiveError::Bpf {
            context: "the BPF object".into(),
            detail: format!("it has no program {name}"),
        })?
        .try_into()
        .map_err(|e| bpf_err(&format!("program {name}"), &e))?;
    p.load()
        .map_err(|e| bpf_err(&format!("the kernel refused {name}"), &e))?;
    p.attach(category, event).map_err(|e| {
        bpf_err(
            &format!("cannot attach to tracepoint {category}/{event}"),
            &e,
        )
    })?;
    Ok(())
}

/// nfsd's threads as the kernel lists them under `proc_root`: kernel
/// threads (children of kthreadd, pid 2) named `nfsd`.
pub fn nfsd_kthreads(proc_root: &Path) -> u32 {
    let Ok(dir) = std::fs::read_dir(proc_root) else {
        return 0;
    };
    dir.filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        })
        .filter(|e| {
            std::fs::read_to_string(e.path().join("stat")).is_ok_and(|s| is_nfsd_kthread(&s))
        })
        .count() as u32
}

/// `/proc/PID/stat` of a kernel thread named nfsd: `PID (nfsd) S 2 …`.
fn is_nfsd_kthread(stat: &str) -> bool {
    let Some((_, rest)) = stat.split_once(" (") else {
        return false;
    };
    let Some((comm, rest)) = rest.rsplit_once(") ") else {
        return false;
    };
    let ppid = rest.split_whitespace().nth(1);
    comm == "nfsd" && ppid == Some("2")
}

#[cfg(test)]
mod tests {
    use super::*;
    use nfsdtop_common::Record;

    /// Debian 7.2's format file of nfsd_dynthread_start.
    const FORMAT: &str = "name: nfsd_dynthread_start
ID: 1880
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:unsigned int netns_ino;\toffset:8;\tsize:4;\tsigned:0;
\tfield:unsigned int pool_id;\toffset:12;\tsize:4;\tsigned:0;
\tfield:unsigned int nrthreads;\toffset:16;\tsize:4;\tsigned:0;
\tfield:unsigned int nrthrmin;\toffset:20;\tsize:4;\tsigned:0;
\tfield:unsigned int nrthrmax;\toffset:24;\tsize:4;\tsigned:0;

print fmt: \"pool=%u nrthreads=%u nrthrmin=%u nrthrmax=%u\", REC->pool_id, REC->nrthreads, REC->nrthrmin, REC->nrthrmax
";

    fn record(which: u8, kind: u8, words: [u32; 5]) -> Record {
        let mut r = Record::new(77, nfsdtop_common::Slot::Enqueue);
        r.slot = which;
        r.raw_kind = kind;
        for (i, w) in words.iter().enumerate() {
            r.raw[8 + 4 * i..12 + 4 * i].copy_from_slice(&w.to_ne_bytes());
        }
        r
    }

    #[test]
    fn records_decode_at_the_format_files_offsets() {
        let f = Fields::parse(FORMAT).unwrap();
        let b = record(
            threads::EXIT,
            threads::RECORD_KIND,
            [4026531840, 1, 6, 2, 8],
        )
        .to_bytes();
        let e = f.decode(&RecordView::new(&b).unwrap()).unwrap();
        assert_eq!(
            e,
            ThreadEvent {
                ts_ns: 77,
                start: false,
                pool: 1,
                nrthreads: 6,
                min: 2,
                max: 8
            }
        );
        let b = record(threads::START, threads::RECORD_KIND, [0, 0, 1, 1, 4]).to_bytes();
        assert!(f.decode(&RecordView::new(&b).unwrap()).unwrap().start);
        // Another kind of record, or a slot byte no tracepoint has: none.
        let b = record(threads::START, 3, [0; 5]).to_bytes();
        assert_eq!(f.decode(&RecordView::new(&b).unwrap()), None);
        let b = record(9, threads::RECORD_KIND, [0; 5]).to_bytes();
        assert_eq!(f.decode(&RecordView::new(&b).unwrap()), None);
    }

    #[test]
    fn a_format_without_the_fields_is_refused_by_name() {
        let e = Fields::parse(&FORMAT.replace("nrthrmax", "other")).unwrap_err();
        assert_eq!(e, "no field nrthrmax");
        let e =
            Fields::parse(&FORMAT.replace("offset:24;\tsize:4", "offset:24;\tsize:8")).unwrap_err();
        assert!(e.starts_with("field nrthrmax is 8 bytes at 24"), "{e}");
    }

    /// The doctor's note: fixed threads without the event, followed with
    /// a format it reads, the file and the reason with one it cannot.
    #[test]
    fn the_doctor_says_whether_threads_come_and_go() {
        let dir =
            std::env::temp_dir().join(format!("nfsdtop-doctor-threads-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        assert!(doctor_note(&dir).starts_with("nfsd's thread count is fixed"));
        let event = dir.join("events/nfsd/nfsd_dynthread_start");
        std::fs::create_dir_all(&event).unwrap();
        std::fs::write(event.join("format"), FORMAT).unwrap();
        assert!(doctor_note(&dir).starts_with("nfsd starts and stops threads"));
        std::fs::write(event.join("format"), FORMAT.replace("pool_id", "pool")).unwrap();
        let note = doctor_note(&dir);
        assert!(
            note.starts_with("threads that come and go cannot be followed: "),
            "{note}"
        );
        assert!(note.ends_with("format: no field pool_id"), "{note}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn nfsd_kernel_threads_are_counted_by_name_and_parent() {
        let dir = std::env::temp_dir().join(format!("nfsdtop-kthreads-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let proc = |pid: &str, stat: &str| {
            std::fs::create_dir_all(dir.join(pid)).unwrap();
            std::fs::write(dir.join(pid).join("stat"), stat).unwrap();
        };
        proc("100", "100 (nfsd) I 2 0 0 0 -1 2129984");
        proc("101", "101 (nfsd) S 2 0 0 0 -1 2129984");
        // A user process named nfsd, and rpc.nfsd: not nfsd threads.
        proc("102", "102 (nfsd) S 1 102 102 0 -1 4194304");
        proc("103", "103 (rpc.nfsd) S 1 103 103 0 -1 4194304");
        // A name with ") " in it does not fool the parser.
        proc("104", "104 (x) (nfsd) S 2 0) S 1 0 0");
        std::fs::create_dir_all(dir.join("self")).unwrap();
        assert_eq!(nfsd_kthreads(&dir), 2);
        assert!(!is_nfsd_kthread("garbage"));
        assert_eq!(nfsd_kthreads(&dir.join("missing")), 0);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
