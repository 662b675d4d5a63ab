//! Loading, configuring and attaching the BPF programs, and the ring
//! buffer drain thread.

use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, SyncSender, TryRecvError};
use std::thread::JoinHandle;
use std::time::Duration;

use aya::maps::{Array, MapData, PerCpuArray, RingBuf};
use aya::programs::{RawTracePoint, TracePoint};
use aya::{Ebpf, EbpfLoader};
use nfsdtop_common::{counter, exec::ExecTotals, slot, xprt_table, RawConfig, Record, SlotConfig};

use super::error::LiveError;

/// The object agent/build.rs built (empty when the toolchain was missing).
pub static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/nfsdtop-ebpf"));

/// Program (function) name for each slot.
pub const PROGRAMS: [&str; slot::COUNT] = [
    "svc_xprt_enqueue",
    "svc_xprt_dequeue",
    "svc_stats_latency",
    "svc_xprt_accept",
    "svc_xprt_free",
];

/// The raw-tracepoint program of each slot that has one.
pub const RAW_PROGRAMS: [Option<&str>; slot::COUNT] = [
    Some("raw_svc_xprt_enqueue"),
    Some("raw_svc_xprt_dequeue"),
    Some("raw_svc_stats_latency"),
    Some("raw_svc_xprt_accept"),
    Some("raw_svc_xprt_free"),
];

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

/// The longest the ring waits to be drained when records arrive slowly.
/// 50 ms of the fastest production measured here (1.7 M records/s, 152
/// ring bytes each) is 13 MB: the default ring holds it, and the reader
/// drains faster than this as soon as a drain finds the ring filling.
pub const DEFAULT_DRAIN_PERIOD: Duration = Duration::from_millis(50);
const MIN_DRAIN_PERIOD: Duration = Duration::from_millis(1);

fn has_object() -> Result<(), LiveError> {
    if OBJECT.is_empty() {
        Err(LiveError::NoBpfObject)
    } else {
        Ok(())
    }
}

/// Map a loader error: permission problems become [`LiveError::Privileges`].
fn bpf_err(context: &str, e: &(dyn std::error::Error + 'static)) -> LiveError {
    let mut detail = e.to_string();
    let mut cur = e.source();
    let mut eperm = is_eperm(e);
    while let Some(c) = cur {
        detail.push_str(": ");
        detail.push_str(&c.to_string());
        eperm |= is_eperm(c);
        cur = c.source();
    }
    if eperm {
        LiveError::Privileges {
            detail: format!("{context}: {detail}"),
        }
    } else {
        LiveError::Bpf {
            context: context.to_string(),
            detail,
        }
    }
}

fn is_eperm(e: &(dyn std::error::Error + 'static)) -> bool {
    let io = e.downcast_ref::<std::io::Error>();
    io.and_then(|io| io.raw_os_error())
        .is_some_and(|c| c == 1 /* EPERM */ || c == 13 /* EACCES */)
        || io.is_some_and(|io| io.kind() == std::io::ErrorKind::PermissionDenied)
        || e.to_string().contains("Operation not permitted")
}

/// Open the object (maps are created, programs not yet loaded).
pub fn open(ring_bytes: u32) -> Result<Ebpf, LiveError> {
    has_object()?;
    let ring = ring_bytes.max(4096).next_power_of_two();
    EbpfLoader::new()
        .map_max_entries("EVENTS", ring)
        .load(OBJECT)
        .map_err(|e| bpf_err("cannot load the BPF object (creating its maps)", &e))
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
    let mut ebpf = open(ring_bytes)?;
    let mut ok = Vec::new();
    for name in PROGRAMS {
        program(&mut ebpf, name)?
            .load()
            .map_err(|e| rejected(name, &e))?;
        ok.push(name.to_string());
    }
    for name in RAW_PROGRAMS.into_iter().flatten() {
        raw_program(&mut ebpf, name)?
            .load()
            .map_err(|e| rejected(name, &e))?;
        ok.push(name.to_string());
    }
    Ok(ok)
}

/// Fill the `RAWCONFIG` map (one [`RawConfig`] per slot).
pub fn write_raw_config(
    ebpf: &mut Ebpf,
    slots: &[RawConfig; slot::COUNT],
) -> Result<(), LiveError> {
    write_array(ebpf, "RAWCONFIG", slots)
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

/// Load slot `slot`'s raw program and attach it to raw tracepoint `event`.
pub fn attach_raw(
    ebpf: &mut Ebpf,
    slot: usize,
    event: &str,
) -> Result<aya::programs::raw_trace_point::RawTracePointLinkId, LiveError> {
    let name = RAW_PROGRAMS
        .get(slot)
        .copied()
        .flatten()
        .ok_or_else(|| LiveError::Bpf {
            context: "attach".into(),
            detail: format!("no raw program for slot {slot}"),
        })?;
    let p = raw_program(ebpf, name)?;
    p.load().map_err(|e| rejected(name, &e))?;
    p.attach(event)
        .map_err(|e| bpf_err(&format!("cannot attach to raw tracepoint {event}"), &e))
}

/// Detach slot `slot`'s raw program.
pub fn detach_raw(
    ebpf: &mut Ebpf,
    slot: usize,
    link: aya::programs::raw_trace_point::RawTracePointLinkId,
) -> Result<(), LiveError> {
    let Some(name) = RAW_PROGRAMS.get(slot).copied().flatten() else {
        return Ok(());
    };
    raw_program(ebpf, name)?
        .detach(link)
        .map_err(|e| bpf_err(&format!("cannot detach {name}"), &e))
}

/// Fill the `CONFIG` map (one [`SlotConfig`] per slot).
pub fn write_config(ebpf: &mut Ebpf, slots: &[SlotConfig; slot::COUNT]) -> Result<(), LiveError> {
    write_array(ebpf, "CONFIG", slots)
}

/// Load slot `slot`'s program and attach it to tracepoint `category/event`.
pub fn attach_slot(
    ebpf: &mut Ebpf,
    slot: usize,
    category: &str,
    event: &str,
) -> Result<(), LiveError> {
    let name = PROGRAMS.get(slot).ok_or_else(|| LiveError::Bpf {
        context: "attach".into(),
        detail: format!("no program for slot {slot}"),
    })?;
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
pub fn load_classic(ebpf: &mut Ebpf, slot: usize) -> Result<(), LiveError> {
    let Some(name) = PROGRAMS.get(slot) else {
        return Ok(());
    };
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
    let fd = ebpf.program(name)?.fd().ok()?.as_fd().as_raw_fd();
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")).ok()?;
    info.lines()
        .find_map(|l| l.strip_prefix("recursion_misses:"))
        .and_then(|v| v.trim().parse().ok())
}

/// Per-slot totals summed over CPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlotCounts {
    pub seen: u64,
    pub submitted: u64,
    pub lost: u64,
    pub busy: u64,
    /// Added to the kernel's per-transport execution totals, not sent.
    pub folded: u64,
}

pub struct Counters {
    map: PerCpuArray<MapData, u64>,
}

impl Counters {
    pub fn take(ebpf: &mut Ebpf) -> Result<Counters, LiveError> {
        let map = ebpf.take_map("COUNTERS").ok_or_else(|| LiveError::Bpf {
            context: "the BPF object".into(),
            detail: "it has no COUNTERS map".into(),
        })?;
        Ok(Counters {
            map: PerCpuArray::try_from(map).map_err(|e| bpf_err("the COUNTERS map", &e))?,
        })
    }

    fn sum(&self, idx: u32) -> u64 {
        self.map
            .get(&idx, 0)
            .map(|v| v.iter().fold(0u64, |a, b| a.saturating_add(*b)))
            .unwrap_or(0)
    }

    pub fn read(&self) -> [SlotCounts; slot::COUNT] {
        let mut out = [SlotCounts::default(); slot::COUNT];
        for (s, o) in out.iter_mut().enumerate() {
            let base = s as u32 * counter::COUNT;
            let (submitted, lost, busy, folded) = (
                self.sum(base + counter::SUBMITTED),
                self.sum(base + counter::LOST),
                self.sum(base + counter::BUSY),
                self.sum(base + counter::FOLDED),
            );
            *o = SlotCounts {
                // Every handled hit is counted in exactly one of these.
                seen: [lost, busy, folded, self.sum(base + counter::DISABLED)]
                    .iter()
                    .fold(submitted, |a, &b| a.saturating_add(b)),
                submitted,
                lost,
                busy,
                folded,
            };
        }
        out
    }
}

/// The `EXEC_TOTALS` array (`nfsdtop_common::exec`), memory-mapped
/// read-only: the agent reads the kernel's running execution totals with
/// plain loads, no syscall per transport.
pub struct ExecTotalsMap {
    base: std::ptr::NonNull<ExecTotals>,
}

// SAFETY: the mapping is plain shared memory, read with atomic loads only, and unmapped once (Drop).
unsafe impl Send for ExecTotalsMap {}

const _: () =
    assert!(size_of::<ExecTotals>() == 32 && std::mem::offset_of!(ExecTotals, count) == 24);
const EXEC_TOTALS_BYTES: usize = xprt_table::SLOTS as usize * size_of::<ExecTotals>();

impl ExecTotalsMap {
    pub fn map(ebpf: &Ebpf) -> Result<ExecTotalsMap, LiveError> {
        let Some(aya::maps::Map::Array(data)) = ebpf.map("EXEC_TOTALS") else {
            return Err(LiveError::Bpf {
                context: "the BPF object".into(),
                detail: "it has no EXEC_TOTALS array".into(),
            });
        };
        // SAFETY: maps the whole value area of a BPF array created with BPF_F_MMAPABLE, read-only and shared; unmapped in Drop.
        let p = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                EXEC_TOTALS_BYTES,
                rustix::mm::ProtFlags::READ,
                rustix::mm::MapFlags::SHARED,
                data.fd(),
                0,
            )
        }
        .map_err(|e| bpf_err("cannot map the EXEC_TOTALS array", &std::io::Error::from(e)))?;
        let base = std::ptr::NonNull::new(p.cast()).ok_or_else(|| LiveError::Bpf {
            context: "the EXEC_TOTALS array".into(),
            detail: "mapped at address 0".into(),
        })?;
        Ok(ExecTotalsMap { base })
    }

    /// Entry `idx`, if it held still while read: the programs write
    /// `owner` and `gen` only when an entry changes hands, so both read
    /// the same before and after `us` and `count` means the four belong
    /// together.
    pub fn read(&self, idx: u32) -> Option<ExecTotals> {
        if idx >= xprt_table::SLOTS {
            return None;
        }
        // ExecTotals is four u64 words: owner, gen, us, count.
        let words = self.base.as_ptr().wrapping_add(idx as usize).cast::<u64>();
        let load = |w: usize| {
            // SAFETY: an aligned u64 inside the mapping (idx < SLOTS, w < 4); the kernel writes it concurrently, hence an atomic load.
            unsafe { std::sync::atomic::AtomicU64::from_ptr(words.wrapping_add(w)) }
                .load(std::sync::atomic::Ordering::Acquire)
        };
        let (owner, gen) = (load(0), load(1));
        let (us, count) = (load(2), load(3));
        let same = load(0) == owner && load(1) == gen;
        same.then_some(ExecTotals {
            owner,
            gen,
            us,
            count,
        })
    }
}

impl Drop for ExecTotalsMap {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, unmapped once; nothing reads it after this.
        let _ = unsafe { rustix::mm::munmap(self.base.as_ptr().cast(), EXEC_TOTALS_BYTES) };
    }
}

/// Drains the ring on a timer (the programs submit without wake-ups) and
/// hands chunks of whole records to the source. The channel is bounded
/// and `send` blocks: if the consumer stalls, the ring fills and the
/// kernel side counts the loss; nothing is dropped silently here.
pub struct Drain {
    rx: Option<Receiver<Vec<u8>>>,
    /// Emptied chunks going back to the reader, so it does not allocate
    /// (and fault in) fresh buffers on every drain.
    spare: SyncSender<Vec<u8>>,
    /// Dropping it wakes and stops the thread at once.
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

/// Chunks of records waiting for the consumer (at most CHUNK_BYTES each).
const QUEUED_CHUNKS: usize = 64;
const SPARE_CHUNKS: usize = 4;
const CHUNK_BYTES: usize = 1 << 20;
/// The largest buffer kept for reuse: a 50 ms drain at 30 k records/s
/// fills about 230 KB.
const SPARE_MAX_BYTES: usize = 512 << 10;

impl Drain {
    /// `period` is the longest wait between drains; `ring_bytes` the size
    /// the ring was created with.
    pub fn start(ebpf: &mut Ebpf, period: Duration, ring_bytes: u32) -> Result<Drain, LiveError> {
        let map = ebpf.take_map("EVENTS").ok_or_else(|| LiveError::Bpf {
            context: "the BPF object".into(),
            detail: "it has no EVENTS map".into(),
        })?;
        let ring = RingBuf::try_from(map).map_err(|e| bpf_err("the EVENTS ring buffer", &e))?;
        let (tx, rx) = mpsc::sync_channel(QUEUED_CHUNKS);
        let (spare, spare_rx) = mpsc::sync_channel(SPARE_CHUNKS);
        let (stop, stop_rx) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("nfsdtop-ring".into())
            .spawn(move || drain_loop(ring, tx, spare_rx, stop_rx, period, ring_bytes))
            .map_err(|e| LiveError::Bpf {
                context: "cannot start the ring reader thread".into(),
                detail: e.to_string(),
            })?;
        Ok(Drain {
            rx: Some(rx),
            spare,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// A chunk of whole records, if one is waiting.
    pub fn try_recv(&self) -> Result<Vec<u8>, TryRecvError> {
        match &self.rx {
            Some(rx) => rx.try_recv(),
            None => Err(TryRecvError::Disconnected),
        }
    }

    /// Give a consumed chunk's buffer back to the reader (dropped if it
    /// has enough spares, or if a burst grew it past `SPARE_MAX_BYTES`:
    /// kept, such buffers would hold the burst's memory for good).
    pub fn recycle(&self, mut chunk: Vec<u8>) {
        if chunk.capacity() > SPARE_MAX_BYTES {
            return;
        }
        chunk.clear();
        let _ = self.spare.try_send(chunk);
    }

    /// Wait up to `timeout` for a chunk.
    pub fn recv_timeout(&self, timeout: Duration) -> Result<Vec<u8>, RecvTimeoutError> {
        match &self.rx {
            Some(rx) => rx.recv_timeout(timeout),
            None => Err(RecvTimeoutError::Disconnected),
        }
    }
}

/// The wait before the next drain, from what this one found: a ring
/// more than an eighth full halves it (down to 1 ms), one under 1/64 full
/// doubles it back up to `period`. Waking rarely when little happens is
/// most of an idle agent's cost; a ring that fills between two drains
/// loses records.
pub fn next_wait(
    wait: Duration,
    drained_bytes: usize,
    ring_bytes: u32,
    period: Duration,
) -> Duration {
    let ring = ring_bytes.max(1) as usize;
    if drained_bytes > ring / 8 {
        (wait / 2).max(MIN_DRAIN_PERIOD.min(period))
    } else if drained_bytes < ring / 64 {
        (wait * 2).min(period)
    } else {
        wait.min(period)
    }
}

/// Ring bytes a record takes: the record and the ring's 8-byte header.
const RING_RECORD_BYTES: usize = Record::SIZE + 8;

fn drain_loop(
    mut ring: RingBuf<MapData>,
    tx: SyncSender<Vec<u8>>,
    spare: Receiver<Vec<u8>>,
    stop: Receiver<()>,
    period: Duration,
    ring_bytes: u32,
) {
    let ring_bytes = ring_bytes.max(4096).next_power_of_two();
    let mut wait = period;
    let mut chunk: Vec<u8> = Vec::new();
    loop {
        let mut drained = 0usize;
        while let Some(item) = ring.next() {
            if chunk.capacity() == 0 {
                chunk = spare.try_recv().unwrap_or_default();
            }
            if item.len() == Record::SIZE {
                chunk.extend_from_slice(&item);
            }
            drained += RING_RECORD_BYTES;
            drop(item);
            if chunk.len() >= CHUNK_BYTES && tx.send(std::mem::take(&mut chunk)).is_err() {
                return;
            }
        }
        // An empty chunk stays for the next drain.
        if !chunk.is_empty() && tx.send(std::mem::take(&mut chunk)).is_err() {
            return;
        }
        wait = next_wait(wait, drained, ring_bytes, period);
        // The drain timer: records wait in the ring until the next tick,
        // which is the point of submitting without wake-ups. Dropping the
        // Drain ends the wait (and the thread) at once.
        match stop.recv_timeout(wait) {
            Err(RecvTimeoutError::Timeout) => {}
            Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
        }
    }
}

impl Drop for Drain {
    fn drop(&mut self) {
        // Either ends the thread: the stop wakes its timer wait, the closed
        // channel fails a send it may be blocked in.
        drop(self.stop.take());
        drop(self.rx.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn drain_wait_shrinks_while_the_ring_fills_and_grows_back_when_idle() {
        let ring = 16 << 20;
        let period = 50 * MS;
        // Idle: stays at the period.
        assert_eq!(next_wait(period, 0, ring, period), period);
        // A quarter of the ring per drain: halves, down to 1 ms.
        let mut w = period;
        for _ in 0..10 {
            w = next_wait(w, ring as usize / 4, ring, period);
        }
        assert_eq!(w, MS);
        // Between 1/64 and 1/8: holds.
        assert_eq!(next_wait(8 * MS, ring as usize / 16, ring, period), 8 * MS);
        // Quiet again: doubles back, never past the period.
        let mut w = MS;
        for _ in 0..10 {
            w = next_wait(w, 100, ring, period);
        }
        assert_eq!(w, period);
        // A period shorter than 1 ms is kept as the floor.
        let tiny = Duration::from_micros(200);
        assert_eq!(next_wait(tiny, ring as usize, ring, tiny), tiny);
    }
}
