//! The ring buffer's reader: a thread that drains the `EVENTS` ring on a
//! timer (the programs submit without wake-ups) and hands chunks of whole
//! records to the source, how often it drains, and when it last found the
//! ring empty (how far the agent has read the kernel: `super::rebuild`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, SyncSender, TryRecvError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use aya::maps::{MapData, RingBuf};
use aya::Ebpf;
use nfsdtop_common::Record;

use super::error::{bpf_err, LiveError};

/// The longest the ring waits to be drained when records arrive slowly.
/// 50 ms of the fastest production measured here (1.7 M records/s, 152
/// ring bytes each) is 13 MB: the default ring holds it, and the reader
/// drains faster than this as soon as a drain finds the ring filling.
pub const DEFAULT_DRAIN_PERIOD: Duration = Duration::from_millis(50);
const MIN_DRAIN_PERIOD: Duration = Duration::from_millis(1);

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
    /// The start of the reader's last pass that emptied the ring, once its
    /// chunks were sent (see [`Drain::caught_up_ns`]).
    caught_up: Arc<AtomicU64>,
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
        // Nothing is older than the programs' attach, which follows.
        let caught_up = Arc::new(AtomicU64::new(super::host::monotonic_ns()));
        let stamp = caught_up.clone();
        let thread = std::thread::Builder::new()
            .name("nfsdtop-ring".into())
            .spawn(move || drain_loop(ring, tx, spare_rx, stop_rx, period, ring_bytes, &stamp))
            .map_err(|e| LiveError::Bpf {
                context: "cannot start the ring reader thread".into(),
                detail: e.to_string(),
            })?;
        Ok(Drain {
            rx: Some(rx),
            spare,
            stop: Some(stop),
            thread: Some(thread),
            caught_up,
        })
    }

    /// A time (kernel monotonic) by which every record stamped earlier is
    /// in a chunk already sent: read it *before* taking the waiting
    /// chunks, and it holds for what they bring. It stops moving while
    /// the consumer falls behind (the reader then blocks in a send).
    pub fn caught_up_ns(&self) -> u64 {
        self.caught_up.load(Ordering::Acquire)
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
    caught_up: &AtomicU64,
) {
    let ring_bytes = ring_bytes.max(4096).next_power_of_two();
    let mut wait = period;
    let mut chunk: Vec<u8> = Vec::new();
    loop {
        // Records stamped before this are in the ring (committed) unless
        // their program is still running: the reorder window's second
        // covers that.
        let pass_start = super::host::monotonic_ns();
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
        // After the sends: whoever reads the stamp then finds the chunks.
        caught_up.fetch_max(pass_start, Ordering::Release);
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
