//! The BPF object and its maps: loading, verifying, configuring (the
//! `CONFIG` and `RAWCONFIG` maps), attaching and detaching the programs
//! the tracepoint table names, and reading the kernel side's counters and
//! execution totals. The ring's reader is in [`super::drain`].

use aya::maps::{Array, MapData};
use aya::programs::{RawTracePoint, TracePoint};
use aya::{Ebpf, EbpfLoader};
use nfsdtop_common::nfs4ops::{self, OpsConfig};
use nfsdtop_common::procs::{program_entries, ProcProgram, PROGRAM_ENTRIES};
use nfsdtop_common::typed::{self, TypedOffsets};
use nfsdtop_common::{
    counter, pools::PoolConfig, twin, xprt_table, RawConfig, Slot, SlotConfig, SLOTS,
};

use super::error::{bpf_err, LiveError};

/// The object agent/build.rs built (empty when the toolchain was missing).
pub static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/nfsdtop-ebpf"));

/// Every program of the object, classic ones first, in slot order (the
/// tracepoint table names them), then the NFSv4 operation ones.
pub fn program_names() -> impl Iterator<Item = &'static str> {
    SLOTS
        .iter()
        .map(|i| i.program)
        .chain(SLOTS.iter().filter_map(|i| i.raw.map(|r| r.name)))
        .chain(nfs4ops::TRACEPOINTS.iter().map(|t| t.program))
}

/// Slot `s`'s raw program's name, if it has one.
pub fn raw_program_name(s: Slot) -> Option<&'static str> {
    s.info().raw.map(|r| r.name)
}

pub const DEFAULT_RING_BYTES: u32 = 16 << 20;

/// A ring size as `--ring-size` / `ring_size` take it: bytes, or with a
/// K/M/G suffix (KiB, MiB, GiB); the kernel wants a power of two of at
/// least a page, and more than 1 GiB would pin that much memory.
pub fn parse_ring_size(s: &str) -> Result<u32, String> {
    let t = s.trim();
    let (digits, mult) = match t.trim_end_matches(['B', 'i']).char_indices().last() {
        Some((i, 'K' | 'k')) => (&t[..i], 1u64 << 10),
        Some((i, 'M' | 'm')) => (&t[..i], 1 << 20),
        Some((i, 'G' | 'g')) => (&t[..i], 1 << 30),
        _ => (t, 1),
    };
    let n: u64 = digits
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a size (e.g. 4096, 256K, 16M)"))?;
    let bytes = n.saturating_mul(mult);
    if !(4096..=1 << 30).contains(&bytes) {
        return Err(format!(
            "ring size {bytes} bytes is out of range: use 4096 to 1G"
        ));
    }
    if !bytes.is_power_of_two() {
        return Err(format!(
            "ring size {bytes} bytes is not a power of two (e.g. 4096, 1M, 16M)"
        ));
    }
    Ok(bytes as u32)
}

fn has_object() -> Result<(), LiveError> {
    if OBJECT.is_empty() {
        Err(LiveError::NoBpfObject)
    } else {
        Ok(())
    }
}

/// Whether twin programs run (`nfsdtop_common::twin`: where the kernel
/// can preempt tracepoint programs), which sizes the table of each
/// thread's marks, `TWIN`: 2 MiB of kernel memory where it is needed,
/// one entry elsewhere.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hosting {
    Twinned,
    None,
}

impl Hosting {
    /// `TWIN`'s entries.
    pub fn twin_entries(self) -> u32 {
        match self {
            Hosting::Twinned => twin::ENTRIES,
            Hosting::None => 1,
        }
    }
}

/// Open the object (maps are created, programs not yet loaded); the
/// typed program's offsets are fixed now (a read-only global).
pub fn open(ring_bytes: u32, typed: TypedOffsets, hosting: Hosting) -> Result<Ebpf, LiveError> {
    has_object()?;
    let ring = ring_bytes.max(4096).next_power_of_two();
    let cpus = Counters::cpus()?;
    let mut ebpf = EbpfLoader::new()
        .map_max_entries("EVENTS", ring)
        .map_max_entries("TWIN", hosting.twin_entries())
        .map_max_entries("COUNTERS", cpus as u32 * counter::STRIDE)
        .map_max_entries("OPS_COUNTERS", cpus as u32 * nfs4ops::counter::STRIDE)
        .override_global(typed::GLOBAL, &typed, true)
        .load(OBJECT)
        .map_err(|e| bpf_err("cannot load the BPF object (creating its maps)", &e))?;
    write_proc_programs(&mut ebpf, &program_entries())?;
    Ok(ebpf)
}

fn program<'a>(ebpf: &'a mut Ebpf, name: &str) -> Result<&'a mut TracePoint, LiveError> {
    let p = ebpf.program_mut(name).ok_or_else(|| LiveError::Bpf {
        context: "the BPF object".into(),
        detail: format!("it has no program {name}"),
    })?;
    p.try_into()
        .map_err(|e| bpf_err(&format!("program {name} is not a tracepoint program"), &e))
}

fn raw_program<'a>(ebpf: &'a mut Ebpf, name: &str) -> Result<&'a mut RawTracePoint, LiveError> {
    let p = ebpf.program_mut(name).ok_or_else(|| LiveError::Bpf {
        context: "the BPF object".into(),
        detail: format!("it has no program {name}"),
    })?;
    p.try_into().map_err(|e| {
        bpf_err(
            &format!("program {name} is not a raw tracepoint program"),
            &e,
        )
    })
}

/// A program the kernel's verifier would not load.
fn rejected(name: &str, e: &aya::programs::ProgramError) -> LiveError {
    bpf_err(
        &format!("the kernel's verifier rejected BPF program {name}"),
        e,
    )
}

/// Load every program into the kernel (the verifier runs) without
/// attaching anything: what `nfsdtop doctor` checks.
pub fn verify_all(ring_bytes: u32) -> Result<Vec<String>, LiveError> {
    let mut ebpf = open(ring_bytes, TypedOffsets::default(), Hosting::None)?;
    let mut ok = Vec::new();
    for s in Slot::ALL {
        let name = s.info().program;
        program(&mut ebpf, name)?
            .load()
            .map_err(|e| rejected(name, &e))?;
        ok.push(name.to_string());
    }
    let ops = nfs4ops::TRACEPOINTS.iter().map(|t| t.program);
    for name in Slot::ALL
        .into_iter()
        .filter_map(raw_program_name)
        .chain(ops)
    {
        raw_program(&mut ebpf, name)?
            .load()
            .map_err(|e| rejected(name, &e))?;
        ok.push(name.to_string());
    }
    Ok(ok)
}

/// Load (verify) the typed programs with the offsets of the kernel's BTF
/// in `btf_dir` (see [`super::typed`]).
pub fn verify_typed(btf_dir: &std::path::Path) -> Result<(), String> {
    let k = super::raw::KernelOffsets::from_sys(btf_dir)?;
    let offsets = super::typed::offsets(&k);
    let ebpf = open(64 * 1024, offsets, Hosting::None).map_err(|e| e.to_string())?;
    super::typed::verify(&super::typed::prepare(&ebpf, OBJECT, offsets, btf_dir)?)
}

/// Fill the `RAWCONFIG` map (one [`RawConfig`] per slot).
pub fn write_raw_config(
    ebpf: &mut Ebpf,
    slots: &[RawConfig; Slot::COUNT],
) -> Result<(), LiveError> {
    write_array(ebpf, "RAWCONFIG", slots)
}

/// Fill the `PROC_PROGRAMS` map: the (program, version)s whose procedures
/// the raw svc_stats_latency program folds by index (`open` writes
/// `nfsdtop_common::procs::program_entries`).
pub fn write_proc_programs(
    ebpf: &mut Ebpf,
    entries: &[ProcProgram; PROGRAM_ENTRIES as usize],
) -> Result<(), LiveError> {
    write_array(ebpf, "PROC_PROGRAMS", entries)
}

/// Fill the array map `name`, entry `i` = `values[i]`.
fn write_array<T: aya::Pod>(ebpf: &mut Ebpf, name: &str, values: &[T]) -> Result<(), LiveError> {
    let map = ebpf.map_mut(name).ok_or_else(|| LiveError::Bpf {
        context: "the BPF object".into(),
        detail: format!("it has no {name} map"),
    })?;
    let mut array: Array<&mut MapData, T> =
        Array::try_from(map).map_err(|e| bpf_err(&format!("the {name} map"), &e))?;
    for (i, v) in values.iter().enumerate() {
        array
            .set(i as u32, *v, 0)
            .map_err(|e| bpf_err(&format!("cannot write the {name} map"), &e))?;
    }
    Ok(())
}

/// Forgets the transports at `ptrs` in `KNOWN_XPRTS` where an entry still
/// holds one, so that the raw programs' next record of each is full
/// again; how many entries were cleared. Raw programs kept after they
/// missed hits (`--keep-raw-tracepoints`) may have missed a transport's
/// svc_xprt_free, which leaves its freed pointer known: a transport
/// later made at that address without a seen svc_xprt_accept would have
/// its records and folded requests taken for the old one's. Clearing an
/// entry another transport holds only costs that one a full record.
pub fn forget_known(
    ebpf: &mut Ebpf,
    ptrs: impl IntoIterator<Item = u64>,
) -> Result<usize, LiveError> {
    let map = ebpf.map_mut("KNOWN_XPRTS").ok_or_else(|| LiveError::Bpf {
        context: "the BPF object".into(),
        detail: "it has no KNOWN_XPRTS map".into(),
    })?;
    let mut known: Array<&mut MapData, u64> =
        Array::try_from(map).map_err(|e| bpf_err("the KNOWN_XPRTS map", &e))?;
    let mut cleared = 0;
    for ptr in ptrs {
        let entry = xprt_table::slot(ptr);
        if known.get(&entry, 0).is_ok_and(|held| held == ptr) {
            known
                .set(entry, 0, 0)
                .map_err(|e| bpf_err("cannot write the KNOWN_XPRTS map", &e))?;
            cleared += 1;
        }
    }
    Ok(cleared)
}

/// Load slot `slot`'s raw program and attach it to raw tracepoint `event`.
pub fn attach_raw(
    ebpf: &mut Ebpf,
    slot: Slot,
    event: &str,
) -> Result<aya::programs::raw_trace_point::RawTracePointLinkId, LiveError> {
    let name = raw_program_name(slot).ok_or_else(|| LiveError::Bpf {
        context: "attach".into(),
        detail: format!("no raw program for {}", slot.name()),
    })?;
    attach_raw_named(ebpf, name, event)
}

/// Load raw program `name` (unless loaded) and attach it to raw
/// tracepoint `event`, after any program already attached there (the
/// kernel calls a tracepoint's programs in the order they were attached).
pub fn attach_raw_named(
    ebpf: &mut Ebpf,
    name: &str,
    event: &str,
) -> Result<aya::programs::raw_trace_point::RawTracePointLinkId, LiveError> {
    load_raw_named(ebpf, name)?;
    let p = raw_program(ebpf, name)?;
    p.attach(event)
        .map_err(|e| bpf_err(&format!("cannot attach to raw tracepoint {event}"), &e))
}

/// Detach slot `slot`'s raw program.
pub fn detach_raw(
    ebpf: &mut Ebpf,
    slot: Slot,
    link: aya::programs::raw_trace_point::RawTracePointLinkId,
) -> Result<(), LiveError> {
    let Some(name) = raw_program_name(slot) else {
        return Ok(());
    };
    raw_program(ebpf, name)?
        .detach(link)
        .map_err(|e| bpf_err(&format!("cannot detach {name}"), &e))
}

/// Fill the `OPSCONFIG` map (see `nfsdtop_common::nfs4ops`).
pub fn write_ops_config(ebpf: &mut Ebpf, cfg: OpsConfig) -> Result<(), LiveError> {
    write_array(ebpf, "OPSCONFIG", &[cfg])
}

/// Load raw program `name` and attach it to nfsd's raw tracepoint
/// `event` for as long as the object lives.
pub fn attach_ops(ebpf: &mut Ebpf, name: &str, event: &str) -> Result<(), LiveError> {
    let p = raw_program(ebpf, name)?;
    p.load().map_err(|e| rejected(name, &e))?;
    p.attach(event).map_err(|e| {
        bpf_err(
            &format!("cannot attach to raw tracepoint {event} (is nfsd loaded?)"),
            &e,
        )
    })?;
    Ok(())
}

/// Fill the `POOLCONFIG` map (see `nfsdtop_common::pools`).
pub fn write_pool_config(ebpf: &mut Ebpf, cfg: PoolConfig) -> Result<(), LiveError> {
    write_array(ebpf, "POOLCONFIG", &[cfg])
}

/// Fill the `CONFIG` map (one [`SlotConfig`] per slot).
pub fn write_config(ebpf: &mut Ebpf, slots: &[SlotConfig; Slot::COUNT]) -> Result<(), LiveError> {
    write_array(ebpf, "CONFIG", slots)
}

/// Load slot `slot`'s program and attach it to tracepoint `category/event`.
pub fn attach_slot(
    ebpf: &mut Ebpf,
    slot: Slot,
    category: &str,
    event: &str,
) -> Result<(), LiveError> {
    let name = slot.info().program;
    load_classic(ebpf, slot)?;
    program(ebpf, name)?.attach(category, event).map_err(|e| {
        bpf_err(
            &format!("cannot attach to tracepoint {category}/{event}"),
            &e,
        )
    })?;
    Ok(())
}

/// Load (verify) slot `slot`'s classic program unless it is loaded: before
/// its attach, and at start for a raw slot's fallback, so that a hand-over
/// under load only attaches (verifying allocates the verifier's log
/// buffers).
/// Load (verify) raw program `name`, unless loaded: attaching it later is
/// then one quick call.
pub fn load_raw_named(ebpf: &mut Ebpf, name: &str) -> Result<(), LiveError> {
    let p = raw_program(ebpf, name)?;
    if p.fd().is_err() {
        p.load().map_err(|e| rejected(name, &e))?;
    }
    Ok(())
}

pub fn load_classic(ebpf: &mut Ebpf, slot: Slot) -> Result<(), LiveError> {
    let name = slot.info().program;
    let p = program(ebpf, name)?;
    if p.fd().is_err() {
        p.load().map_err(|e| rejected(name, &e))?;
    }
    Ok(())
}

/// Runs of program `name` the kernel skipped because the program was
/// already running on that CPU (`recursion_misses` in its fdinfo): a raw
/// tracepoint program preempted mid-run on kernels whose tracepoints are
/// preemptible. None where the kernel does not say.
pub fn recursion_misses(ebpf: &Ebpf, name: &str) -> Option<u64> {
    use std::os::fd::{AsFd, AsRawFd};
    fd_recursion_misses(ebpf.program(name)?.fd().ok()?.as_fd().as_raw_fd())
}

/// `recursion_misses` of the program whose descriptor is `fd`.
pub fn fd_recursion_misses(fd: std::os::fd::RawFd) -> Option<u64> {
    fdinfo(fd, "recursion_misses")
}

/// The number a program's fdinfo gives for `key` (`run_time_ns`,
/// `run_cnt`, `recursion_misses`); None where the kernel does not say.
pub fn fdinfo(fd: std::os::fd::RawFd, key: &str) -> Option<u64> {
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")).ok()?;
    info.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.trim().parse().ok())
}

pub use super::mapped::{Counters, ExecTotalsMap, SlotCounts};

#[cfg(test)]
mod tests {
    use super::*;

    /// A key of the kernel's fdinfo, whole keys only (any descriptor has
    /// `pos` and `flags`).
    #[test]
    fn fdinfo_reads_whole_keys() {
        use std::os::fd::AsRawFd;
        let f = std::fs::File::open("/proc/self/stat").unwrap();
        let fd = f.as_raw_fd();
        assert_eq!(fdinfo(fd, "pos"), Some(0));
        assert_eq!(fdinfo(fd, "po"), None, "a key's prefix is not the key");
        assert_eq!(fdinfo(fd, "run_time_ns"), None, "not a program");
        assert_eq!(fdinfo(-1, "pos"), None);
    }
}
